# agent/ — build/libvcagent-pyXY.so, one per CPython minor that scripts/find-pythons found
# headers for (AGENT_PYINCS in $(BUILD)/config.mk), all from the same sources compiled against
# that minor's headers (for 3.11 a pyenv build's headers are preferred; the .so serves Debian's
# static python3.11 too); a word 311d:INC (Debian's python3.11-dbg headers) gives
# libvcagent-py311d.so, the Py_DEBUG ABI, which vcattach loads into debug targets.
# A word MINOR:INC:EXTRA (headers of scripts/test-root's sid root) adds EXTRA with
# -idirafter: Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h> from there, while libc's headers stay the host's (the .so must run on the host's old glibc
# symbol versions as well as on the root's newer glibc).  The agent is NOT linked against
# libpython: Py* symbols resolve from
# the target process's global scope.  Only the vc_* API is exported (-fvisibility=hidden).
#
# Layers (each file calls only files below it; none calls back into agent.c):
#   agent.c        the exported API and the agent thread's steps (prepare, start, wait, stop,
#                  deliver, end); the one uninstall path (stop, failed install, fork child)
#   control.c      the control channel and status socket, served while tracing by a socket
#                  thread that never takes the GIL             emit.c  records → .cvf → sink
#                  (a file through common/atomic_file.c, the CLI's writer too)
#   starthook.c    threading's start hook → the backend's on_new_thread
#   follow.c       a fork child's os._exit wrapper (process-tree sessions)
#   hook_profile.c, hook_monitoring.c, hook_evalframe.c   one backend each, behind backend.h's
#                  operations table
#   filter.c       the filters in force and the per-code verdict (cached in names.h's table)
#   record.h/.c    the hot path (inline) and its out-of-line halves
#   interps.c      every interpreter: adoption, entering one, its end (atexit), their keys
#   threads.c      per-thread states (a leaf)     lifecycle.c  state, stop request, wake fd, result
#   gilwait.c      the agent thread's every GIL wait: a pending call asks the holder to yield
#   session.h/.c   the session's data (g_vc) only; each file declares its own functions in its
#                  header (threads.h, starthook.h, emit.h, follow.h, control.h, ...)
#   tasks.c        asyncio task steps: a marker record per step, the task names (tasks.h)
#   stream.c       the sender thread and the streamed frames; cpu_sample.c, called by it, samples
#                  every traced thread's CPU clock (no GIL, no Python)
#   names, buffer, clock, compat (CPython versions)   the leaves
AGENT_SRCS := $(wildcard agent/*.c)
AGENT_CFLAGS := $(CFLAGS_BASE) -Iagent -fPIC -fvisibility=hidden -fno-strict-aliasing
AGENT_LIBS := -lz -pthread

define AGENT_template
$(BUILD)/agent/py$(1)/%.o: agent/%.c | $(BUILD)/config.mk
	@mkdir -p $$(dir $$@)
	$$(CC) $$(AGENT_CFLAGS) -isystem $(2) $(if $(3),-idirafter $(3)) -c $$< -o $$@

$(BUILD)/libvcagent-py$(1).so: $(patsubst agent/%.c,$(BUILD)/agent/py$(1)/%.o,$(AGENT_SRCS)) $(BUILD)/libvccommon.a
	$$(CC) -shared -Wl,-z,now -o $$@ $$^ $(AGENT_LIBS)

AGENT_SOS += $(BUILD)/libvcagent-py$(1).so
endef

AGENT_SOS :=
$(foreach p,$(AGENT_PYINCS),$(eval $(call AGENT_template,$(firstword $(subst :, ,$(p))),$(word 2,$(subst :, ,$(p))),$(word 3,$(subst :, ,$(p))))))

.PHONY: agent
agent: $(AGENT_SOS)
ALL_TARGETS += $(AGENT_SOS)
INSTALL_LIB += $(AGENT_SOS)
