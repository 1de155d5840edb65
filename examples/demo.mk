# examples/ — `make demo`: installs the Debian packages that are missing (saying so), builds
# everything, then runs scripts/demo.sh (starts examples/demo_service.py, traces it for 3 s with
# build/vcattach, converts, summarises, stops the service).  Included by the top Makefile;
# `demo` is already .PHONY there, and a setup goal (built by a make of its own).
demo:
	$(call setup_packages,make demo)
	@$(MAKE) --no-print-directory all
	BUILD=$(BUILD) scripts/demo.sh
