# injector/ — build/vcattach, the CLI (every subcommand; see injector/main.c).
# Links the shared codec/protocol objects, zlib, jansson (convert) and libunwind-ptrace
# (safe-point check before injecting).
INJECTOR_SRCS := $(wildcard injector/*.c)
INJECTOR_OBJS := $(patsubst injector/%.c,$(BUILD)/injector/%.o,$(INJECTOR_SRCS))
INJECTOR_CFLAGS := $(CFLAGS_BASE) -Iinjector $(shell pkg-config --cflags jansson libunwind-ptrace 2>/dev/null)
INJECTOR_LIBS := $(shell pkg-config --libs jansson libunwind-ptrace 2>/dev/null) -lz -lm

$(BUILD)/injector/%.o: injector/%.c $(wildcard injector/*.h common/*.h agent/vcagent.h) | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(INJECTOR_CFLAGS) -c $< -o $@

$(BUILD)/vcattach: $(INJECTOR_OBJS) $(BUILD)/libvccommon.a
	$(CC) $(LDFLAGS_BASE) -o $@ $(INJECTOR_OBJS) $(BUILD)/libvccommon.a $(INJECTOR_LIBS)

ALL_TARGETS += $(BUILD)/vcattach
INSTALL_BIN += $(BUILD)/vcattach
