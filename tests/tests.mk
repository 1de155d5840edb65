# tests/ — the programs `make test` needs besides the product: C unit programs of the codec,
# sanitizer builds, fuzz targets, the injection fixture.  None is part of `all`.  The `test:`
# rule itself is in the top Makefile; every part adds its prerequisites to TEST_PREREQS.
#   build/tests/test_cvf*        unit programs (tests/unit/test_cvf*.c), normal build
#   build/asan/tests/test_cvf*   the same under ASan+UBSan
#   build/asan/vcattach          the whole CLI under ASan+UBSan (corrupt-input tests run it)
#   build/tests/cvf_corrupt      in-process truncation/flip driver (and build/asan/tests/…)
#   build/fuzz/fuzz_cvf_*        libFuzzer targets (clang), run briefly by test_codec_fuzz.py
#   build/inject-test            target_facts_read + inject() with ptrace/gdb (libvcinject.a);
#                                its judge-stacks mode judges recorded stacks with safepoint.c
#   build/inject_fixture/        a stand-in agent with no Python C-API use, a C target

# ---- codec (.cvf) tests ----------------------------------------------------------------------
CODEC_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# Warnings are the normal build's job; the instrumented builds must not break on other
# compilers' or optimisers' extra warnings.  No -MMD: these link sources directly.
SAN_CFLAGS_BASE := $(filter-out -Werror -MMD -MP,$(CFLAGS_BASE))
CODEC_SAN_CFLAGS = $(SAN_CFLAGS_BASE) $(CODEC_SAN) -Itrace -Itests/unit $(JANSSON_CFLAGS)
CODEC_COMMON_SRCS := $(wildcard common/*.c)
CODEC_JSON_SRCS := trace/chrome.c trace/json_cvf.c trace/json_text.c
CODEC_UNIT_SRCS := $(wildcard tests/unit/test_cvf*.c)
CODEC_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(CODEC_UNIT_SRCS))
CODEC_ASAN_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/asan/tests/%,$(CODEC_UNIT_SRCS))
CODEC_HDRS := $(wildcard common/*.h trace/*.h tests/unit/*.h)

$(BUILD)/tests/test_cvf%: tests/unit/test_cvf%.c tests/unit/cvf_test.h $(BUILD)/libvccommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests/unit -o $@ $< $(BUILD)/libvccommon.a -lz -lm

$(BUILD)/asan/tests/test_cvf%: tests/unit/test_cvf%.c $(CODEC_COMMON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $< $(CODEC_COMMON_SRCS) -lz -lm

$(BUILD)/tests/cvf_corrupt: tests/unit/cvf_corrupt.c $(BUILD)/libvctrace.a $(BUILD)/libvccommon.a $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itrace -Itests/unit -o $@ $< $(BUILD)/libvctrace.a $(BUILD)/libvccommon.a \
	    $(JANSSON_LIBS) -lz -lm

$(BUILD)/asan/tests/cvf_corrupt: tests/unit/cvf_corrupt.c $(CODEC_JSON_SRCS) $(CODEC_COMMON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $< $(CODEC_JSON_SRCS) $(CODEC_COMMON_SRCS) $(JANSSON_LIBS) -lz -lm

# The whole CLI, instrumented: every cli, trace, injector and common source (with the injector's
# generated one, the gdb script), same libraries.
ASAN_CLI_SRCS = $(wildcard cli/*.c trace/*.c injector/*.c common/*.c) $(INJECT_GEN_SRCS)
$(BUILD)/asan/vcattach: $(ASAN_CLI_SRCS) $(wildcard cli/*.h trace/*.h injector/*.h injector/include/*.h injector/*.def common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -Icli -Iinjector -Iinjector/include $(UNWIND_CFLAGS) -o $@ $(ASAN_CLI_SRCS) $(CLI_LIBS)

# libFuzzer targets: always clang (gcc has no libFuzzer).
CODEC_FUZZ_CFLAGS = $(SAN_CFLAGS_BASE) -fsanitize=fuzzer,address,undefined \
                    -fno-sanitize-recover=all -Itrace $(JANSSON_CFLAGS)
$(BUILD)/fuzz/fuzz_cvf_%: tests/fuzz/fuzz_cvf_%.c $(CODEC_COMMON_SRCS) $(CODEC_JSON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	@# Without clang's libFuzzer runtime (libclang-rt-14-dev) the fuzz tests skip, saying so.
	clang $(CODEC_FUZZ_CFLAGS) -o $@ $< $(CODEC_COMMON_SRCS) $(CODEC_JSON_SRCS) $(JANSSON_LIBS) -lz -lm \
	  || { echo "codec: cannot build $@ (clang libFuzzer runtime missing?); fuzz tests will skip"; rm -f $@; }

CODEC_FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_cvf_*.c))

TEST_PREREQS += $(CODEC_UNIT_BINS) $(CODEC_ASAN_UNIT_BINS) $(BUILD)/tests/cvf_corrupt \
                $(BUILD)/asan/tests/cvf_corrupt $(BUILD)/asan/vcattach $(CODEC_FUZZ_BINS)

# ---- injection tests: fixture agent + driver -------------------------------------------------
$(BUILD)/inject-test: tests/inject_fixture/driver.c $(BUILD)/libvcinject.a \
                      injector/include/vcinject.h injector/safepoint.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Iinjector -Iinjector/include -o $@ tests/inject_fixture/driver.c $(BUILD)/libvcinject.a $(UNWIND_LIBS)

$(BUILD)/inject_fixture/libvcfixture.so: tests/inject_fixture/fixture_agent.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fPIC -shared -fvisibility=hidden -o $@ $< -lpthread

$(BUILD)/inject_fixture/unsafe-target: tests/inject_fixture/unsafe_target.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -lpthread

INJECT_TEST_PREREQS := $(BUILD)/inject-test $(BUILD)/inject_fixture/libvcfixture.so \
                       $(BUILD)/inject_fixture/unsafe-target
TEST_PREREQS += $(INJECT_TEST_PREREQS)

# Subsets: `make test-inject` (injection layer, ~2 min), `make test-agent` (in-process agent).
.PHONY: test-inject test-agent
test-inject: all $(INJECT_TEST_PREREQS)
	$(call pytest,test_inject.py)
test-agent: all
	$(call pytest,test_agent.py test_agent_control.py)

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

# ---- cli/ns_pid.c (a container member's META/EVENTS, the agent's bytes), plain and ASan+UBSan ----
$(BUILD)/tests/ns-pid-check: tests/unit/ns_pid_check.c cli/ns_pid.c cli/ns_pid.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Icli -o $@ $< cli/ns_pid.c
$(BUILD)/asan/tests/ns-pid-check: tests/unit/ns_pid_check.c cli/ns_pid.c cli/ns_pid.h
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -Icli -o $@ $< cli/ns_pid.c

TEST_PREREQS += $(BUILD)/tests/ns-pid-check $(BUILD)/asan/tests/ns-pid-check
