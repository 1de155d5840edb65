# cli/ — build/vcattach, the command line: the subcommand table (main.c), one option parser
# for every subcommand (options.c, attach_options.c), the steps every attach shares (attach.c:
# signals, preflight and --hook checks, method, names, CONFIG, injection), one process
# (trace_process.c over preflight, agent_locate, control_client (+ unix_names) and
# trace_sink, the one atomic output path), process trees (tree_trace.c, tree_sessions.c,
# their merge tree_merge.c; a member in another pid namespace named by
# our pid with its own beside it: ns_pid.c), stop/status (cmd_stop.c), the lines printed from the agent's
# texts (report.c) and the offline commands (cmd_convert.c, cmd_summary.c) over
# libvctrace.a.  It sees the injector only through its public header
# (injector/include/vcinject.h): -Iinjector/include, never -Iinjector.
CLI_SRCS := $(wildcard cli/*.c)
CLI_OBJS := $(patsubst cli/%.c,$(BUILD)/cli/%.o,$(CLI_SRCS))
CLI_CFLAGS = $(CFLAGS_BASE) -Icli -Iinjector/include -Itrace $(JANSSON_CFLAGS) $(UNWIND_CFLAGS)
CLI_LIBS = $(JANSSON_LIBS) $(UNWIND_LIBS) -lz -lm

$(BUILD)/cli/%.o: cli/%.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -c $< -o $@

$(BUILD)/vcattach: $(CLI_OBJS) $(BUILD)/libvctrace.a $(BUILD)/libvcinject.a $(BUILD)/libvccommon.a
	$(CC) $(LDFLAGS_BASE) -o $@ $(CLI_OBJS) $(BUILD)/libvctrace.a $(BUILD)/libvcinject.a \
	    $(BUILD)/libvccommon.a $(CLI_LIBS)

ALL_TARGETS += $(BUILD)/vcattach
INSTALL_BIN += $(BUILD)/vcattach
