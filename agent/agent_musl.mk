# agent/ on musl — build/libvcagent-pyXY-musl.so, the agent for a CPython linked against musl
# libc (Alpine's python:*-alpine), one per minor whose musl build's headers config.mk found
# (AGENT_MUSL_PYINCS: MINOR:INC words; today the musl root of scripts/test-root, CPython 3.13).
#
# Why a build of its own: a glibc agent dlopen'ed into a musl process brings glibc's libc.so.6
# with it (two C libraries' pthread_t, errno, stat and TLS in one process), or fails on the
# first library musl cannot find; vcattach picks the -musl agent by the target's C library
# (cli/agent_locate.c) and never falls back to the glibc one.  The same sources as agent.mk's,
# compiled by musl-gcc against the musl CPython's own headers (its pyconfig.h), without the
# glibc floor's pins and wraps (glibc_floor.c is glibc's only).  zlib's deflate is linked in
# from the host's libz.a (plain C: memcpy, memset, malloc, free), its symbols kept inside;
# musl-gcc is given only zlib's two headers (a directory of its own: the host's /usr/include
# would bring glibc's headers) and libz.a by its path (a -L to glibc's library directory would
# make -lc find glibc's libc.so).  Each link is checked (scripts/musl-agent-check): it needs
# musl's libc.so and nothing else, and every C symbol it imports is one musl exports.
MUSL_CC ?= musl-gcc
AGENT_MUSL_SRCS := $(filter-out agent/glibc_floor.c,$(AGENT_SRCS))
AGENT_MUSL_INC := $(BUILD)/agent/musl-include
AGENT_MUSL_CFLAGS := $(CFLAGS_BASE) -Iagent -fPIC -fvisibility=hidden -fno-strict-aliasing \
                     -isystem $(AGENT_MUSL_INC)
AGENT_MUSL_ZLIB := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libz.a /usr/lib64/libz.a /usr/lib/libz.a))

$(AGENT_MUSL_INC)/zlib.h: | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	ln -sf /usr/include/zlib.h /usr/include/zconf.h $(dir $@)

AGENT_MUSL_COMMON_OBJS := $(patsubst common/%.c,$(BUILD)/agent/musl-common/%.o,$(COMMON_SRCS))
$(BUILD)/agent/musl-common/%.o: common/%.c $(AGENT_MUSL_INC)/zlib.h | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(COMMON_CFLAGS) -isystem $(AGENT_MUSL_INC) -c $< -o $@

$(BUILD)/agent/libvccommon-musl.a: $(AGENT_MUSL_COMMON_OBJS)
	rm -f $@ && ar rcs $@ $^

define AGENT_MUSL_template
$(BUILD)/agent/py$(1)-musl/%.o: agent/%.c $(AGENT_MUSL_INC)/zlib.h | $(BUILD)/config.mk
	@mkdir -p $$(dir $$@)
	$$(MUSL_CC) $$(AGENT_MUSL_CFLAGS) -isystem $(2) -c $$< -o $$@

$(BUILD)/libvcagent-py$(1)-musl.so: $(patsubst agent/%.c,$(BUILD)/agent/py$(1)-musl/%.o,$(AGENT_MUSL_SRCS)) $(BUILD)/agent/libvccommon-musl.a scripts/musl-agent-check
	$$(MUSL_CC) -shared -Wl,-z,now -o $$@.tmp $$(filter %.o %.a,$$^) $(AGENT_MUSL_ZLIB) \
	    -Wl,--exclude-libs,libz.a
	scripts/musl-agent-check $$@.tmp
	mv $$@.tmp $$@

AGENT_MUSL_SOS += $(BUILD)/libvcagent-py$(1)-musl.so
endef

AGENT_MUSL_SOS :=
$(foreach p,$(AGENT_MUSL_PYINCS),$(eval $(call AGENT_MUSL_template,$(firstword $(subst :, ,$(p))),$(word 2,$(subst :, ,$(p))))))

.PHONY: agent-musl
agent-musl: $(AGENT_MUSL_SOS)
ALL_TARGETS += $(AGENT_MUSL_SOS)
INSTALL_LIB += $(AGENT_MUSL_SOS)
