# vcattach — top-level build.
# Each part owns a fragment with its rules: common/common.mk (codec, protocol),
# agent/agent.mk (libvcagent-pyXY.so per CPython minor), injector/injector.mk (the CLI),
# tests/tests.mk (test programs, sanitizers, fuzzing), bench/bench.mk.
# Outputs go to $(BUILD) (default build/); the CLI is build/vcattach.

BUILD       ?= build
PREFIX      ?= /usr/local
PYTHON_HOST ?= /usr/bin/python3
OPT         ?= -O2 -g
# gnu11 for the Linux interfaces (ptrace, memfd, …); every warning is an error, with gcc and clang.
CFLAGS_BASE := -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
               $(OPT) -D_GNU_SOURCE -fno-omit-frame-pointer -Icommon -Iagent
LDFLAGS_BASE :=

.PHONY: all test demo bench install clean deps
.DEFAULT_GOAL := all

# Parts append to these.
ALL_TARGETS  :=
TEST_PREREQS :=
BENCH_TARGETS :=
INSTALL_BIN  :=
INSTALL_LIB  :=

include common/common.mk
include agent/agent.mk
include injector/injector.mk
include tests/tests.mk
include bench/bench.mk
include examples/demo.mk

all: $(BUILD)/.deps-ok $(ALL_TARGETS)

# Installs missing Debian packages once per build tree (scripts/install-deps.sh owns the list).
deps: $(BUILD)/.deps-ok
$(BUILD)/.deps-ok: scripts/install-deps.sh
	@mkdir -p $(BUILD)
	@scripts/install-deps.sh --check >/dev/null 2>&1 || scripts/install-deps.sh
	@touch $@

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/vcattach
	install -m 0755 $(INSTALL_BIN) $(DESTDIR)$(PREFIX)/bin/
	$(if $(INSTALL_LIB),install -m 0644 $(INSTALL_LIB) $(DESTDIR)$(PREFIX)/lib/vcattach/)

clean:
	rm -rf $(BUILD)
