# tests/fuzz/ — coverage-guided fuzzing (libFuzzer) of every decoder that reads bytes another
# user controls (SECURITY.md, "Fuzzing"): one harness per decoder family, tests/fuzz/fuzz_NAME.c.
#   build/fuzz/obj/…         every source of the CLI but main.c (cli, trace, injector, common)
#                            and the harnesses' shared code, compiled once by clang with
#                            ASan+UBSan and libFuzzer's coverage instrumentation
#   build/fuzz/libvcfuzz.a   those objects: each harness links the ones it reaches
#   build/fuzz/fuzz_NAME     the harnesses (in TEST_PREREQS: `make test` replays their seeds
#                            and regression inputs, test_fuzz.py)
# `make fuzz` runs each for FUZZ_SECONDS (default 60) under nice, on its seeds
# (tests/fuzz/corpus/NAME, kept in the repo) and what earlier runs found (build/fuzz/corpus/
# NAME); a crash is saved in tests/fuzz/regressions/NAME/ and fails the run
# (tests/fuzz/run_fuzz.py).  Without clang, or its libFuzzer runtime (libclang-rt-14-dev),
# nothing is built, said once; the tests skip.

FUZZ_CC := clang
FUZZ_HAVE_CC := $(shell command -v $(FUZZ_CC) 2>/dev/null)
FUZZ_CFLAGS = $(SAN_CFLAGS_BASE) -fsanitize=address,undefined -fno-sanitize-recover=all \
              -Icli -Itrace -Itrace/include -Iinjector -Iinjector/include -Itests/fuzz \
              $(JANSSON_CFLAGS) $(UNWIND_CFLAGS)
FUZZ_LIB_SRCS := $(filter-out cli/main.c,$(wildcard cli/*.c)) \
                 $(wildcard trace/*.c injector/*.c common/*.c) tests/fuzz/fuzz_util.c
FUZZ_LIB_OBJS := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(FUZZ_LIB_SRCS)) \
                 $(BUILD)/fuzz/obj/injector/gdb_script.o
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(filter-out tests/fuzz/fuzz_util.c,\
                                                   $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BINS := $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_NAMES))

$(BUILD)/fuzz/obj/%.o: %.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(BUILD)/fuzz/obj/injector/gdb_script.o: $(BUILD)/injector/gdb_script.c injector/gdb_script.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/libvcfuzz.a: $(FUZZ_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

# The link needs libFuzzer's runtime; without it the harness is not made (its tests skip).
$(BUILD)/fuzz/fuzz_%: $(BUILD)/fuzz/obj/tests/fuzz/fuzz_%.o $(BUILD)/fuzz/libvcfuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/fuzz/libvcfuzz.a $(CLI_LIBS) \
	  || { echo "fuzz: cannot link $@ (clang's libFuzzer runtime, libclang-rt-14-dev, missing?);" \
	            "its tests will skip"; rm -f $@; }

# A harness's own object is kept (make would remove it as an intermediate and compile it again).
.SECONDARY: $(patsubst %,$(BUILD)/fuzz/obj/tests/fuzz/fuzz_%.o,$(FUZZ_NAMES))

ifneq ($(FUZZ_HAVE_CC),)
TEST_PREREQS += $(FUZZ_BINS)
endif

# `make fuzz [FUZZ_SECONDS=N] [FUZZ_HARNESSES="frames proc"]`: every harness (or those named)
# for N seconds each, one after the other, nice'd; a table of executions per second and
# coverage at the end; exit 1 if one crashed (its input is then in tests/fuzz/regressions/).
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES ?= $(FUZZ_NAMES)
.PHONY: fuzz
fuzz: $(BUILD)/config.mk $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_HARNESSES))
	$(PYTHON_HOST) tests/fuzz/run_fuzz.py --build $(BUILD) --seconds $(FUZZ_SECONDS) \
	    $(FUZZ_HARNESSES)

-include $(wildcard $(BUILD)/fuzz/obj/*/*.d $(BUILD)/fuzz/obj/*/*/*.d)
