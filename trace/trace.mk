# trace/ — libvctrace.a, the offline trace tools: the trace model, loaders (.cvf, Chrome
# JSON), the converters (.cvf <-> Chrome JSON) and exports (speedscope, folded stacks), the
# summary computation, several .cvf merged into one (merge.c: process trees, separate traces).
# Never touches a process; callers link JANSSON_LIBS.
TRACE_SRCS := $(wildcard trace/*.c)
TRACE_OBJS := $(patsubst trace/%.c,$(BUILD)/trace/%.o,$(TRACE_SRCS))
TRACE_CFLAGS = $(CFLAGS_BASE) -Itrace $(JANSSON_CFLAGS)

$(BUILD)/trace/%.o: trace/%.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(TRACE_CFLAGS) -c $< -o $@

$(BUILD)/libvctrace.a: $(TRACE_OBJS)
	rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(BUILD)/libvctrace.a
