# tests/ — the programs `make test` needs besides the product: C unit programs of the codec,
# sanitizer builds, fuzz targets, the injection fixture.  None is part of `all`.  The `test:`
# rule itself is in the top Makefile; every part adds its prerequisites to TEST_PREREQS.
#   build/tests/test_*           unit programs of common/ (tests/unit/test_*.c), normal build
#   build/asan/tests/test_*      the same under ASan+UBSan
#   build/asan/vcattach          the whole CLI under ASan+UBSan (corrupt-input tests run it)
#   build/tests/cvf_corrupt      in-process truncation/flip driver (and build/asan/tests/…)
#   build/fuzz/fuzz_*            libFuzzer harnesses (clang; tests/fuzz/fuzz.mk), whose seeds
#                                and regression inputs test_fuzz.py replays
#   build/inject-test            target_facts_read + inject() with ptrace/gdb (libvcinject.a);
#                                its judge-stacks mode judges recorded stacks with safepoint.c
#   build/inject_fixture/        a stand-in agent with no Python C-API use, a C target
#   build/tests/libc-standin, build/tests/musl/*, build/tests/old-glibc/libc.so.6
#                                stand-ins for targets on a C library the agents cannot load into

# ---- codec (.cvf) tests ----------------------------------------------------------------------
CODEC_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# Warnings are the normal build's job; the instrumented builds must not break on other
# compilers' or optimisers' extra warnings.  No -MMD: these link sources directly.
SAN_CFLAGS_BASE := $(filter-out -Werror -MMD -MP,$(CFLAGS_BASE))
CODEC_SAN_CFLAGS = $(SAN_CFLAGS_BASE) $(CODEC_SAN) -Itrace -Itrace/include -Itests/unit $(JANSSON_CFLAGS)
CODEC_COMMON_SRCS := $(wildcard common/*.c)
CODEC_JSON_SRCS := trace/chrome.c trace/json_cvf.c trace/json_text.c
CODEC_UNIT_SRCS := $(wildcard tests/unit/test_*.c)
CODEC_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(CODEC_UNIT_SRCS))
CODEC_ASAN_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/asan/tests/%,$(CODEC_UNIT_SRCS))
CODEC_HDRS := $(wildcard common/*.h trace/*.h trace/include/*.h tests/unit/*.h)

# test_live: the live aggregation of `vcattach top` is libvctrace's (trace/live.c)
$(BUILD)/tests/test_live: tests/unit/test_live.c tests/unit/cvf_test.h $(BUILD)/libvctrace.a $(BUILD)/libvccommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itrace/include -Itests/unit -o $@ $< $(BUILD)/libvctrace.a $(BUILD)/libvccommon.a \
	    $(JANSSON_LIBS) -lz -lm

$(BUILD)/asan/tests/test_live: tests/unit/test_live.c $(wildcard trace/*.c) $(CODEC_COMMON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $< $(wildcard trace/*.c) $(CODEC_COMMON_SRCS) $(JANSSON_LIBS) -lz -lm

$(BUILD)/tests/test_%: tests/unit/test_%.c tests/unit/cvf_test.h $(BUILD)/libvccommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests/unit -o $@ $< $(BUILD)/libvccommon.a -lz -lm

$(BUILD)/asan/tests/test_%: tests/unit/test_%.c $(CODEC_COMMON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $< $(CODEC_COMMON_SRCS) -lz -lm

$(BUILD)/tests/cvf_corrupt: tests/unit/cvf_corrupt.c $(BUILD)/libvctrace.a $(BUILD)/libvccommon.a $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itrace -Itrace/include -Itests/unit -o $@ $< $(BUILD)/libvctrace.a $(BUILD)/libvccommon.a \
	    $(JANSSON_LIBS) -lz -lm

$(BUILD)/asan/tests/cvf_corrupt: tests/unit/cvf_corrupt.c $(CODEC_JSON_SRCS) $(CODEC_COMMON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $< $(CODEC_JSON_SRCS) $(CODEC_COMMON_SRCS) $(JANSSON_LIBS) -lz -lm

# The whole CLI, instrumented: every cli, trace, injector and common source (with the injector's
# generated one, the gdb script), same libraries.  One compile of them all, so the include
# paths are the union of the parts' (cli's own rule, CLI_CFLAGS, is the one that keeps cli/ to
# the libraries' public headers).
ASAN_CLI_SRCS = $(wildcard cli/*.c trace/*.c injector/*.c common/*.c) $(INJECT_GEN_SRCS)
ASAN_CLI_HDRS = $(wildcard cli/*.h trace/*.h trace/include/*.h trace/*.def injector/*.h \
                           injector/include/*.h injector/*.def common/*.h)
$(BUILD)/asan/vcattach: $(ASAN_CLI_SRCS) $(ASAN_CLI_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -Icli -Iinjector -Iinjector/include $(UNWIND_CFLAGS) -o $@ $(ASAN_CLI_SRCS) $(CLI_LIBS)

# The CLI with the test seams (common/test_seam.h): the fault injections that tests of race
# windows and blocked reads use.  The vcattach that operators run has none of them.
$(BUILD)/seams/vcattach: $(ASAN_CLI_SRCS) $(ASAN_CLI_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS_BASE)) -DVC_TEST_SEAMS -Icli -Iinjector -Iinjector/include \
	    -Itrace/include $(JANSSON_CFLAGS) $(UNWIND_CFLAGS) -o $@ $(ASAN_CLI_SRCS) $(CLI_LIBS)

TEST_PREREQS += $(BUILD)/seams/vcattach

TEST_PREREQS += $(CODEC_UNIT_BINS) $(CODEC_ASAN_UNIT_BINS) $(BUILD)/tests/cvf_corrupt \
                $(BUILD)/asan/tests/cvf_corrupt $(BUILD)/asan/vcattach

# libFuzzer harnesses of every decoder of untrusted bytes, and `make fuzz`: their own fragment.
include tests/fuzz/fuzz.mk

# ---- injection tests: fixture agent + driver -------------------------------------------------
$(BUILD)/inject-test: tests/inject_fixture/driver.c $(BUILD)/libvcinject.a \
                      injector/include/vcinject.h injector/safepoint.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Iinjector -Iinjector/include -o $@ tests/inject_fixture/driver.c $(BUILD)/libvcinject.a $(UNWIND_LIBS)

$(BUILD)/inject_fixture/libvcfixture.so: tests/inject_fixture/fixture_agent.c common/protocol.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fPIC -shared -fvisibility=hidden -o $@ $< -lpthread

# the same, as if its dlopen had been abandoned half way (its loaded marker never set)
$(BUILD)/inject_fixture/libvcfixture-unloaded.so: tests/inject_fixture/fixture_agent.c common/protocol.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -DFIXTURE_NEVER_LOADED -fPIC -shared -fvisibility=hidden -o $@ $< -lpthread

$(BUILD)/inject_fixture/unsafe-target: tests/inject_fixture/unsafe_target.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -lpthread

INJECT_TEST_PREREQS := $(BUILD)/inject-test $(BUILD)/inject_fixture/libvcfixture.so \
                       $(BUILD)/inject_fixture/libvcfixture-unloaded.so \
                       $(BUILD)/inject_fixture/unsafe-target
TEST_PREREQS += $(INJECT_TEST_PREREQS)

# Subsets: `make test-inject` (injection layer, ~2 min), `make test-agent` (in-process agent).
.PHONY: test-inject test-agent
test-inject: all $(INJECT_TEST_PREREQS)
	$(call pytest,system/test_inject.py)
test-agent: all
	$(call pytest,system/test_agent.py system/test_agent_control.py)

# ---- process-tree walk: correctness and the time of one scan of a 30 000-process host ------
$(BUILD)/tests/proc-tree-bench: tests/unit/proc_tree_bench.c $(BUILD)/libvcinject.a \
                                injector/include/vcinject.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Iinjector/include -o $@ $< $(BUILD)/libvcinject.a $(UNWIND_LIBS)

TEST_PREREQS += $(BUILD)/tests/proc-tree-bench

# ---- an embedding host that loads libpython at once and initializes it later (test_embedded) --
$(BUILD)/tests/late-init: tests/targets/late_init.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -ldl

TEST_PREREQS += $(BUILD)/tests/late-init

# ---- a host serving requests from a Py_NewInterpreter sub-interpreter, as mod_wsgi does ------
$(BUILD)/tests/subinterp-host: tests/targets/subinterp_host.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -ldl -lpthread

TEST_PREREQS += $(BUILD)/tests/subinterp-host

# ---- targets on a C library the agents cannot load into (test_glibc_floor): a stand-in that
# the CPython detection takes for CPython 3.11, built with musl-gcc (musl-tools; without it the
# musl tests skip) as Alpine names musl's loader (ld-musl-x86_64.so.1, a copy of musl's libc.so
# next to it) and as Debian's musl installs it, and statically with glibc, to map old_glibc.c's
# libc.so.6 (symbol versions up to GLIBC_2.12) as its libc.
STANDIN := tests/targets/libc_standin.c
$(BUILD)/tests/libc-standin: $(STANDIN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -static -o $@ $<
$(BUILD)/tests/old-glibc/libc.so.6: tests/targets/old_glibc.c tests/targets/old_glibc.map
	@mkdir -p $(dir $@)
	$(CC) -shared -nostdlib -fPIC -Wl,-soname,libc.so.6 \
	    -Wl,--version-script=tests/targets/old_glibc.map -o $@ $<
$(BUILD)/tests/musl/musl-standin: $(STANDIN)
	@mkdir -p $(dir $@)
	musl-gcc -O2 -Wall -Wextra -Werror -o $@ $< || \
	  { echo "tests: no musl-gcc (musl-tools): the musl refusal tests will skip"; rm -f $@; }
$(BUILD)/tests/musl/alpine-standin: $(STANDIN)
	@mkdir -p $(dir $@)
	install -m 0755 "$$(readlink -f /lib/ld-musl-x86_64.so.1)" $(dir $@)ld-musl-x86_64.so.1 && \
	musl-gcc -O2 -Wall -Wextra -Werror \
	    -Wl,--dynamic-linker=$(abspath $(dir $@))/ld-musl-x86_64.so.1 -o $@ $< || \
	  { echo "tests: no musl-gcc (musl-tools): the musl refusal tests will skip"; rm -f $@; }

TEST_PREREQS += $(BUILD)/tests/libc-standin $(BUILD)/tests/old-glibc/libc.so.6 \
                $(BUILD)/tests/musl/musl-standin $(BUILD)/tests/musl/alpine-standin

# ---- cli/ns_pid.c (a container member's META/EVENTS, the agent's bytes), plain and ASan+UBSan ----
$(BUILD)/tests/ns-pid-check: tests/unit/ns_pid_check.c cli/ns_pid.c cli/ns_pid.h common/text.c common/utf8.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Icli -o $@ $< cli/ns_pid.c common/text.c common/utf8.c
$(BUILD)/asan/tests/ns-pid-check: tests/unit/ns_pid_check.c cli/ns_pid.c cli/ns_pid.h common/text.c common/utf8.c
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -Icli -o $@ $< cli/ns_pid.c common/text.c common/utf8.c

TEST_PREREQS += $(BUILD)/tests/ns-pid-check $(BUILD)/asan/tests/ns-pid-check
