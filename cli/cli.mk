# cli/ — build/vcattach, the command line: the subcommand table (main.c), one option parser
# for every subcommand (options.c), the attach workflow (cmd_trace.c with attach_options,
# preflight, agent_locate, control_client and trace_sink, the one atomic output
# path), process trees (`--subprocesses`: cmd_tree.c) and the offline commands (cmd_convert.c,
# cmd_summary.c) over libvctrace.a.  Sees the injector only through its public header,
# injector/include/vcinject.h (-Iinjector/include, never -Iinjector): no /proc parsing here.
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
