# agent/ — build/libvcagent-pyXY.so, one per CPython minor found by scripts/find-pythons, all
# from the same sources compiled against that minor's headers (for 3.11 a pyenv build's
# headers are preferred; the .so serves Debian's static python3.11 too).  The agent is NOT
# linked against libpython: Py* symbols resolve from the target process's global scope.
# Only the vc_* API is exported (-fvisibility=hidden + VC_EXPORT).
AGENT_SRCS := $(wildcard agent/*.c)
AGENT_HDRS := $(wildcard agent/*.h) $(wildcard common/*.h)
# "308:/include/dir 309:…", one word per minor (shared interpreters' headers first).
AGENT_PYINCS := $(shell scripts/find-pythons 2>/dev/null | awk '{print ($$4=="shared"?0:1), $$1":"$$3}' \
                  | sort -k1,1n -s | awk '{split($$2,a,":"); if (!(a[1] in seen)) {seen[a[1]]=1; print $$2}}')
AGENT_MINORS := $(foreach p,$(AGENT_PYINCS),$(firstword $(subst :, ,$(p))))
AGENT_CFLAGS := $(CFLAGS_BASE) -fPIC -fvisibility=hidden -fno-strict-aliasing
AGENT_COMMON_OBJS := $(BUILD)/libvccommon.a
AGENT_LIBS := -lz -pthread

define AGENT_template
$(BUILD)/agent/py$(1)/%.o: agent/%.c $(AGENT_HDRS) | $(BUILD)/.deps-ok
	@mkdir -p $$(dir $$@)
	$$(CC) $$(AGENT_CFLAGS) -isystem $(2) -c $$< -o $$@

$(BUILD)/libvcagent-py$(1).so: $(patsubst agent/%.c,$(BUILD)/agent/py$(1)/%.o,$(AGENT_SRCS)) $(AGENT_COMMON_OBJS)
	$$(CC) -shared -Wl,-z,now -o $$@ $$^ $(AGENT_LIBS)

AGENT_SOS += $(BUILD)/libvcagent-py$(1).so
endef

AGENT_SOS :=
# The codec's writer is part of the link: build the agent once it exists.
ifneq ($(wildcard common/cvf_writer.c),)
$(foreach p,$(AGENT_PYINCS),$(eval $(call AGENT_template,$(firstword $(subst :, ,$(p))),$(word 2,$(subst :, ,$(p))))))
endif

.PHONY: agent
agent: $(AGENT_SOS)
ALL_TARGETS += $(AGENT_SOS)
INSTALL_LIB += $(AGENT_SOS)
