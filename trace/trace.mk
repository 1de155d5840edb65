# trace/ — libvctrace.a, the offline trace tools behind one public header,
# trace/include/vctrace.h: the text reports of `summary` and `requests` (summary_report.c,
# requests_report.c), `convert` (convert_job.c) and the merge of several .cvf (merge.c).
# Inside: the inputs (input.c: a file, or several merged), the trace model (model.c, compact
# runs model_runs.c) and its loader (load.c, which runs the finishing steps: the model's, then
# cpu.c's and tasks.c's), the analyses (summary, waits, requests, tasks, CPU samples, Python
# names pyname.c), the converters (.cvf <-> Chrome JSON: chrome.c, json_cvf.c) and the exports
# (speedscope, folded stacks, SVG), each behind a header of its own, and the live aggregation of
# `vcattach top` (live.c, live_view.c: frames, not files).  Never touches a process;
# callers include trace/include only and link JANSSON_LIBS.
TRACE_SRCS := $(wildcard trace/*.c)
TRACE_OBJS := $(patsubst trace/%.c,$(BUILD)/trace/%.o,$(TRACE_SRCS))
TRACE_CFLAGS = $(CFLAGS_BASE) -Itrace -Itrace/include $(JANSSON_CFLAGS)

$(BUILD)/trace/%.o: trace/%.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(TRACE_CFLAGS) -c $< -o $@

$(BUILD)/libvctrace.a: $(TRACE_OBJS)
	rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(BUILD)/libvctrace.a
