# tests/ — `make test`: builds everything (and the sanitizer/fuzz builds the parts add to
# TEST_PREREQS), then runs the whole suite with Debian's pytest.  Target processes are started
# with each interpreter of the matrix explicitly (tests/conftest.py finds them).
PYTEST_ARGS ?=
test: all $(TEST_PREREQS)
	cd tests && $(PYTHON_HOST) -m pytest -q -rs -p no:cacheprovider $(PYTEST_ARGS)

# ---- codec (.cvf) tests: C unit programs, sanitizer builds, fuzz targets --------------------
# Owned by the codec; self-contained.
#   build/tests/test_cvf*        unit programs (tests/unit/test_cvf*.c), normal build
#   build/asan/tests/test_cvf*   the same under ASan+UBSan
#   build/asan/vcattach          the whole CLI under ASan+UBSan (corrupt-input tests run it)
#   build/tests/cvf_corrupt      in-process truncation/flip driver (and build/asan/tests/…)
#   build/fuzz/fuzz_cvf_*        libFuzzer targets (clang), run briefly by test_codec_fuzz.py
CODEC_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# Warnings are the normal build's job; the instrumented builds must not break on other
# compilers' or optimisers' extra warnings.
CODEC_SAN_CFLAGS := $(filter-out -Werror,$(CFLAGS_BASE)) $(CODEC_SAN) -Iinjector -Itests/unit \
                    $(shell pkg-config --cflags jansson 2>/dev/null)
CODEC_COMMON_SRCS := common/cvf_writer.c common/cvf_reader.c common/cvf_util.c
CODEC_JSON_SRCS := injector/convert_chrome.c injector/json_cvf.c injector/json_text.c
CODEC_UNIT_SRCS := $(wildcard tests/unit/test_cvf*.c)
CODEC_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(CODEC_UNIT_SRCS))
CODEC_ASAN_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/asan/tests/%,$(CODEC_UNIT_SRCS))
CODEC_HDRS := $(wildcard common/*.h injector/*.h tests/unit/*.h)
CODEC_JANSSON_LIBS := $(shell pkg-config --libs jansson 2>/dev/null)

$(BUILD)/tests/test_cvf%: tests/unit/test_cvf%.c tests/unit/cvf_test.h $(BUILD)/libvccommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests/unit -o $@ $< $(BUILD)/libvccommon.a -lz -lm

$(BUILD)/asan/tests/test_cvf%: tests/unit/test_cvf%.c $(CODEC_COMMON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $< $(CODEC_COMMON_SRCS) -lz -lm

$(BUILD)/tests/cvf_corrupt: tests/unit/cvf_corrupt.c $(CODEC_JSON_SRCS) $(BUILD)/libvccommon.a $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Iinjector -Itests/unit -o $@ $< $(CODEC_JSON_SRCS) $(BUILD)/libvccommon.a $(CODEC_JANSSON_LIBS) -lz -lm

$(BUILD)/asan/tests/cvf_corrupt: tests/unit/cvf_corrupt.c $(CODEC_JSON_SRCS) $(CODEC_COMMON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $< $(CODEC_JSON_SRCS) $(CODEC_COMMON_SRCS) $(CODEC_JANSSON_LIBS) -lz -lm

# The whole CLI, instrumented: every injector and common source, same libraries.
CODEC_ASAN_CLI_SRCS = $(wildcard injector/*.c) $(wildcard common/*.c)
$(BUILD)/asan/vcattach: $(CODEC_ASAN_CLI_SRCS) $(CODEC_HDRS) $(wildcard agent/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CODEC_SAN_CFLAGS) -o $@ $(CODEC_ASAN_CLI_SRCS) $(INJECTOR_LIBS)

# libFuzzer targets: always clang (gcc has no libFuzzer).
CODEC_FUZZ_CFLAGS := $(filter-out -Werror,$(CFLAGS_BASE)) -fsanitize=fuzzer,address,undefined \
                     -fno-sanitize-recover=all -Iinjector $(shell pkg-config --cflags jansson 2>/dev/null)
$(BUILD)/fuzz/fuzz_cvf_%: tests/fuzz/fuzz_cvf_%.c $(CODEC_COMMON_SRCS) $(CODEC_JSON_SRCS) $(CODEC_HDRS)
	@mkdir -p $(dir $@)
	@# Without clang's libFuzzer runtime (libclang-rt-14-dev) the fuzz tests skip, saying so.
	clang $(CODEC_FUZZ_CFLAGS) -o $@ $< $(CODEC_COMMON_SRCS) $(CODEC_JSON_SRCS) $(CODEC_JANSSON_LIBS) -lz -lm \
	  || { echo "codec: cannot build $@ (clang libFuzzer runtime missing?); fuzz tests will skip"; rm -f $@; }

CODEC_FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_cvf_*.c))

CODEC_TEST_PREREQS := $(CODEC_UNIT_BINS) $(CODEC_ASAN_UNIT_BINS) $(BUILD)/tests/cvf_corrupt \
                      $(BUILD)/asan/tests/cvf_corrupt $(BUILD)/asan/vcattach $(CODEC_FUZZ_BINS)
TEST_PREREQS += $(CODEC_TEST_PREREQS)
test: $(CODEC_TEST_PREREQS)
# ---- end codec tests ---------------------------------------------------------------------------

# ---- injector tests (inject_ptrace / inject_gdb): fixture agent + driver ----------------------
# Owned by the injection methods.  build/inject-test calls inject_ptrace()/inject_gdb() directly
# (its main() lives outside injector/, which is all linked into build/vcattach);
# build/inject_fixture/libvcfixture.so is a stand-in agent with no Python C-API use.
INJECT_TEST_OBJS := $(addprefix $(BUILD)/injector/,proc.o elf.o ptrace.o safepoint.o \
                      remote_call.o inject_ptrace.o inject_gdb.o)

$(BUILD)/inject-test: tests/inject_fixture/driver.c $(INJECT_TEST_OBJS) injector/inject.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Iinjector -o $@ tests/inject_fixture/driver.c $(INJECT_TEST_OBJS) \
	    $(shell pkg-config --libs libunwind-ptrace 2>/dev/null)

$(BUILD)/inject_fixture/libvcfixture.so: tests/inject_fixture/fixture_agent.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fPIC -shared -fvisibility=hidden -o $@ $< -lpthread

$(BUILD)/inject_fixture/unsafe-target: tests/inject_fixture/unsafe_target.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -lpthread

INJECT_TEST_PREREQS := $(BUILD)/inject-test $(BUILD)/inject_fixture/libvcfixture.so \
                       $(BUILD)/inject_fixture/unsafe-target
ALL_TARGETS += $(INJECT_TEST_PREREQS)
TEST_PREREQS += $(INJECT_TEST_PREREQS)
test: $(INJECT_TEST_PREREQS)
# `make test-inject` runs only these (about two minutes: real targets on every interpreter).
.PHONY: test-inject
test-inject: all
	cd tests && $(PYTHON_HOST) -m pytest -q -rs -p no:cacheprovider $(PYTEST_ARGS) test_inject.py
# ---- end injector tests -------------------------------------------------------------------------

# ---- agent tests (tests/test_agent*.py; owned by the agent work) -----------------------------
# `make test` runs them with the rest; `make test-agent` runs only them.  They need every
# build/libvcagent-pyXY.so (in ALL_TARGETS) and build/vcattach (convert).
.PHONY: test-agent
test-agent: all
	cd tests && $(PYTHON_HOST) -m pytest -q -rs -p no:cacheprovider $(PYTEST_ARGS) test_agent.py test_agent_control.py
# ---- end agent tests --------------------------------------------------------------------------
