# common/ — what the agent and the CLI both speak: the .cvf codec (cvf.h, cvf_reader.h, with
# json_scan.h and utf8.h), the control protocol (protocol.h), a streamed trace's spool and its
# build into a .cvf (spool.h: vcattach's, and a `start`ed agent's own), the one atomic file writer
# (atomic_file.h) and the EINTR-safe read/write helpers (fd_io.h), plus version.h.  Built
# position-independent, for the CLI and the test programs; the agents link a copy of their own
# compiled against their glibc floor (build/agent/libvccommon.a, agent/agent.mk).
COMMON_SRCS := $(wildcard common/*.c)
COMMON_OBJS := $(patsubst common/%.c,$(BUILD)/common/%.o,$(COMMON_SRCS))
COMMON_CFLAGS := $(CFLAGS_BASE) -fPIC -fvisibility=hidden

$(BUILD)/common/%.o: common/%.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(COMMON_CFLAGS) -c $< -o $@

$(BUILD)/libvccommon.a: $(COMMON_OBJS)
	rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(BUILD)/libvccommon.a
