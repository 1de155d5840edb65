# agent/ — build/libvcagent-pyXY.so, one per CPython minor that scripts/find-pythons found
# headers for (AGENT_PYINCS in $(BUILD)/config.mk), all from the same sources compiled against
# that minor's headers (for 3.11 a pyenv build's headers are preferred; the .so serves Debian's
# static python3.11 too); a word 311d:INC (Debian's python3.11-dbg headers) gives
# libvcagent-py311d.so, the Py_DEBUG ABI, which vcattach loads into debug targets.
# A word MINOR:INC:EXTRA (headers of scripts/test-root's sid root) adds EXTRA with
# -idirafter: Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h> from there,
# while libc's headers stay the host's.  The agent is NOT linked against libpython: Py* symbols
# resolve from the target process's global scope.  Only the vc_* API is exported
# (-fvisibility=hidden).
#
# Every agent loads into any glibc from 2.VC_AGENT_GLIBC_FLOOR_MINOR (common/version.h: 2.17) on,
# whatever glibc builds it (scripts/glibc-floor says how): each object, and the agent's own
# copy of common/ (build/agent/common: the CLI's copy is not pinned, and links statically),
# force-includes build/agent/glibc_pins.h, which binds every glibc symbol to the version it had
# at the floor; what has no such version is wrapped into the system calls of glibc_floor.c;
# zlib is linked in (its symbols kept inside), so an agent needs only libc, libpthread (where
# glibc < 2.34 keeps pthread_create) and the loader.  Each link is checked: a symbol from a
# newer glibc, or another library, fails the build with one line naming it.
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
#   channel.c      the control socket's frames from two threads (stream.c sends, control.c
#                  answers and closes): the stream's only tie to the control side
#   names, buffer, clock, compat (CPython versions)   the leaves
AGENT_SRCS := $(wildcard agent/*.c)
AGENT_GLIBC_FLOOR := 2.$(shell sed -n 's/^\#define VC_AGENT_GLIBC_FLOOR_MINOR \([0-9]*\)$$/\1/p' common/version.h)
AGENT_PINS := $(BUILD)/agent/glibc_pins.h
AGENT_CFLAGS := $(CFLAGS_BASE) -Iagent -fPIC -fvisibility=hidden -fno-strict-aliasing \
                -include $(AGENT_PINS)
# glibc_floor.c's system calls for what glibc 2.17 does not export by these names
AGENT_WRAPPED := fstat fstat64 lstat lstat64 stat stat64 fstatat fstatat64 getrandom
AGENT_LIBS := $(foreach f,$(AGENT_WRAPPED),-Wl,--wrap=$(f)) \
              -Wl,--push-state,-Bstatic -lz -Wl,--pop-state -Wl,--exclude-libs,libz.a \
              -Wl,--push-state,--no-as-needed -l:libpthread.so.0 -Wl,--pop-state -pthread

$(AGENT_PINS): scripts/glibc-floor common/version.h | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	scripts/glibc-floor pins --floor $(AGENT_GLIBC_FLOOR) --cc $(CC) > $@.tmp && mv $@.tmp $@

AGENT_COMMON_OBJS := $(patsubst common/%.c,$(BUILD)/agent/common/%.o,$(COMMON_SRCS))
$(BUILD)/agent/common/%.o: common/%.c $(AGENT_PINS) | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(COMMON_CFLAGS) -include $(AGENT_PINS) -c $< -o $@

$(BUILD)/agent/libvccommon.a: $(AGENT_COMMON_OBJS)
	rm -f $@ && ar rcs $@ $^

define AGENT_template
$(BUILD)/agent/py$(1)/%.o: agent/%.c $(AGENT_PINS) | $(BUILD)/config.mk
	@mkdir -p $$(dir $$@)
	$$(CC) $$(AGENT_CFLAGS) -isystem $(2) $(if $(3),-idirafter $(3)) -c $$< -o $$@

$(BUILD)/libvcagent-py$(1).so: $(patsubst agent/%.c,$(BUILD)/agent/py$(1)/%.o,$(AGENT_SRCS)) $(BUILD)/agent/libvccommon.a scripts/glibc-floor
	$$(CC) -shared -Wl,-z,now -o $$@.tmp $$(filter %.o %.a,$$^) $(AGENT_LIBS)
	scripts/glibc-floor check --floor $(AGENT_GLIBC_FLOOR) $$@.tmp
	mv $$@.tmp $$@

AGENT_SOS += $(BUILD)/libvcagent-py$(1).so
endef

AGENT_SOS :=
$(foreach p,$(AGENT_PYINCS),$(eval $(call AGENT_template,$(firstword $(subst :, ,$(p))),$(word 2,$(subst :, ,$(p))),$(word 3,$(subst :, ,$(p))))))

.PHONY: agent
agent: $(AGENT_SOS)
ALL_TARGETS += $(AGENT_SOS)
INSTALL_LIB += $(AGENT_SOS)
