# cli/ — build/vcattach, the command line: the subcommand table (main.c), one option parser
# for every subcommand (options.c, attach_options.c), the steps every attach shares (attach.c:
# signals, preflight and --hook checks, method, names, CONFIG, injection), one process
# (trace_process.c over preflight, agent_locate, control_client (the framing) and
# trace_sink, the one atomic output path), process trees (tree_trace.c, tree_sessions.c,
# their merge tree_merge.c; a member in another pid namespace named by
# our pid with its own beside it: ns_pid.c), `top` (cmd_top.c, top_screen.c; the watcher the
# trace workflows call: trace_watch.c), stop/status (cmd_stop.c, asking through
# session_query.c), the lines printed from the agent's
# texts (report.c) and the offline commands (cmd_convert.c, cmd_summary.c, cmd_requests.c:
# their options, then one call into libvctrace.a).  It sees each library only through its
# public header: the injector's (injector/include/vcinject.h) with -Iinjector/include, never
# -Iinjector; the trace tools' (trace/include/vctrace.h) with -Itrace/include, never -Itrace.
CLI_SRCS := $(wildcard cli/*.c)
CLI_OBJS := $(patsubst cli/%.c,$(BUILD)/cli/%.o,$(CLI_SRCS))
CLI_CFLAGS = $(CFLAGS_BASE) -Icli -Iinjector/include -Itrace/include $(UNWIND_CFLAGS)
CLI_LIBS = $(JANSSON_LIBS) $(UNWIND_LIBS) -lz -lm

$(BUILD)/cli/%.o: cli/%.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -c $< -o $@

$(BUILD)/vcattach: $(CLI_OBJS) $(BUILD)/libvctrace.a $(BUILD)/libvcinject.a $(BUILD)/libvccommon.a
	$(CC) $(LDFLAGS_BASE) -o $@ $(CLI_OBJS) $(BUILD)/libvctrace.a $(BUILD)/libvcinject.a \
	    $(BUILD)/libvccommon.a $(CLI_LIBS)

# The self-contained vcattach that `make install` and `make dist` ship: the same objects linked
# statically, glibc, jansson, libunwind (with its liblzma) and zlib in, so it runs on any
# x86-64 Linux whatever its C library (a container image, a distroless one) with nothing
# installed.  Not position-independent: Debian's libunwind archives have no PIC objects (its
# stack, heap and mappings are still randomized).  build/vcattach stays the dynamic, PIE
# build the tests run; both find the agents next to themselves (build/) or in ../lib/vcattach.
$(BUILD)/vcattach-static: $(CLI_OBJS) $(BUILD)/libvctrace.a $(BUILD)/libvcinject.a $(BUILD)/libvccommon.a
	$(CC) -static $(LDFLAGS_BASE) -o $@ $(CLI_OBJS) $(BUILD)/libvctrace.a $(BUILD)/libvcinject.a \
	    $(BUILD)/libvccommon.a $(STATIC_LIBS) -lm

ALL_TARGETS += $(BUILD)/vcattach $(BUILD)/vcattach-static
INSTALL_BIN += $(BUILD)/vcattach-static
