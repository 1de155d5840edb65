# agent/ on musl — build/libvcagent-pyXY-musl.so, the agent for a CPython linked against musl
# libc (Alpine's python:*-alpine), one per minor a glibc agent is built for, when musl-gcc is
# installed (MUSL_GCC in config.mk).
#
# Why a build of its own: a glibc agent dlopen'ed into a musl process brings glibc's libc.so.6
# with it (two C libraries' pthread_t, errno, stat and TLS in one process), or fails on the
# first library musl cannot find; vcattach picks the -musl agent by the target's C library
# (cli/agent_locate.c) and never falls back to the glibc one.  The same sources as agent.mk's,
# compiled by musl-gcc without the glibc floor's pins and wraps (glibc_floor.c is glibc's only).
#
# Headers: the same CPython headers the glibc agent of the minor is built from (AGENT_PYINCS; a
# root's extra directory after musl's own headers, -idirafter, only for Debian's multiarch
# pyconfig.h), else a musl CPython's own from the musl root of scripts/test-root.  The object
# layouts the agent reads are the same on both C libraries: the pyconfig.h of the musl root's
# 3.13 and of pyenv's 3.13 differ only in HAVE_* of the C library and its add-ons (checked:
# `diff` of their #defines), and the pthread types CPython embeds are the same size on musl and
# glibc for x86-64; tests/system/test_musl.py traces that root's musl CPythons (3.11, 3.13)
# with agents built this way.
#
# zlib's deflate is linked in from the host's libz.a (plain C: memcpy, memset, malloc, free),
# its symbols kept inside; musl-gcc is given only zlib's two headers (a directory of its own:
# the host's /usr/include would bring glibc's headers) and libz.a by its path (a -L to glibc's
# library directory would make -lc find glibc's libc.so).  Each link is checked
# (scripts/musl-agent-check): it needs musl's libc.so and nothing else, and every C symbol it
# imports is one musl exports.
MUSL_CC ?= musl-gcc
AGENT_MUSL_SRCS := $(filter-out agent/glibc_floor.c,$(AGENT_SRCS))
AGENT_MUSL_INC := $(BUILD)/agent/musl-include
AGENT_MUSL_CFLAGS := $(CFLAGS_BASE) -Iagent -fPIC -fvisibility=hidden -fno-strict-aliasing \
                     -isystem $(AGENT_MUSL_INC)
AGENT_MUSL_ZLIB := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libz.a /usr/lib64/libz.a /usr/lib/libz.a))

# CPython 3.8-3.10's Python.h includes <crypt.h> where its build had one (glibc's libcrypt);
# Debian's musl-tools ships none (Alpine's musl-dev does: crypt(), which musl's libc exports).
# The agent calls no crypt(); the declaration is Alpine's.
$(AGENT_MUSL_INC)/zlib.h: | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	ln -sf /usr/include/zlib.h /usr/include/zconf.h $(dir $@)
	printf '%s\n' '/* musl declares crypt() here (Alpine musl-dev); see agent/agent_musl.mk */' \
	    '#ifndef VC_MUSL_CRYPT_H' '#define VC_MUSL_CRYPT_H' \
	    'char *crypt(const char *key, const char *salt);' '#endif' > $(dir $@)crypt.h

# Debian's python3.X-dev keeps pyconfig.h in the multiarch directory: Python.h's pyconfig.h
# includes <x86_64-linux-gnu/python3.X/pyconfig.h>, which gcc finds (it searches
# /usr/include/x86_64-linux-gnu) and musl-gcc does not.  On a machine whose only headers of a
# minor are Debian's (a fresh Debian 12: python3.11-dev), the musl agent of 3.11 stopped the
# build there.  Those python3.X directories alone are linked into the musl include directory
# (all of /usr/include would bring glibc's headers); remade when the configuration changes.
$(AGENT_MUSL_INC)/multiarch.stamp: $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	for d in /usr/include/*-linux-*/python3.*; do \
	    [ -d "$$d" ] || continue; \
	    arch=$$(basename "$$(dirname "$$d")"); \
	    mkdir -p $(dir $@)$$arch && ln -sfn "$$d" $(dir $@)$$arch/; \
	done
	touch $@

AGENT_MUSL_COMMON_OBJS := $(patsubst common/%.c,$(BUILD)/agent/musl-common/%.o,$(COMMON_SRCS))
$(BUILD)/agent/musl-common/%.o: common/%.c $(AGENT_MUSL_INC)/zlib.h $(AGENT_MUSL_INC)/multiarch.stamp | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(COMMON_CFLAGS) -isystem $(AGENT_MUSL_INC) -c $< -o $@

$(BUILD)/agent/libvccommon-musl.a: $(AGENT_MUSL_COMMON_OBJS)
	rm -f $@ && ar rcs $@ $^

define AGENT_MUSL_template
$(BUILD)/agent/py$(1)-musl/%.o: agent/%.c $(AGENT_MUSL_INC)/zlib.h $(AGENT_MUSL_INC)/multiarch.stamp | $(BUILD)/config.mk
	@mkdir -p $$(dir $$@)
	$$(MUSL_CC) $$(AGENT_MUSL_CFLAGS) -isystem $(2) $(if $(3),-idirafter $(3)) -c $$< -o $$@

$(BUILD)/libvcagent-py$(1)-musl.so: $(patsubst agent/%.c,$(BUILD)/agent/py$(1)-musl/%.o,$(AGENT_MUSL_SRCS)) $(BUILD)/agent/libvccommon-musl.a scripts/musl-agent-check
	$$(MUSL_CC) -shared -Wl,-z,now -o $$@.tmp $$(filter %.o %.a,$$^) $(AGENT_MUSL_ZLIB) \
	    -Wl,--exclude-libs,libz.a
	scripts/musl-agent-check $$@.tmp
	mv $$@.tmp $$@

AGENT_MUSL_SOS += $(BUILD)/libvcagent-py$(1)-musl.so
endef

musl_minor = $(firstword $(subst :, ,$(1)))
AGENT_MUSL_GLIBC_PYINCS := $(foreach p,$(AGENT_PYINCS),$(if $(filter %d,$(call musl_minor,$(p))),,$(p)))
AGENT_MUSL_GLIBC_MINORS := $(foreach p,$(AGENT_MUSL_GLIBC_PYINCS),$(call musl_minor,$(p)))
AGENT_MUSL_PYINCS := $(if $(MUSL_GCC),$(AGENT_MUSL_GLIBC_PYINCS) \
    $(foreach p,$(AGENT_MUSL_ROOT_PYINCS),$(if $(filter $(AGENT_MUSL_GLIBC_MINORS),$(call musl_minor,$(p))),,$(p))))

AGENT_MUSL_SOS :=
$(foreach p,$(AGENT_MUSL_PYINCS),$(eval $(call AGENT_MUSL_template,$(call musl_minor,$(p)),$(word 2,$(subst :, ,$(p))),$(word 3,$(subst :, ,$(p))))))

.PHONY: agent-musl
agent-musl: $(AGENT_MUSL_SOS)
ALL_TARGETS += $(AGENT_MUSL_SOS)
INSTALL_LIB += $(AGENT_MUSL_SOS)
