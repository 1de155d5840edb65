# examples/ — `make demo`: builds everything, then runs scripts/demo.sh (starts
# examples/demo_service.py, traces it for 3 s with build/vcattach, converts, summarises,
# stops the service).  Included by the top Makefile; `demo` is already .PHONY there.
demo: all
	BUILD=$(BUILD) scripts/demo.sh
