# injector/ — libvcinject.a, the injection machinery: /proc parsing, ELF symbol lookup in the
# target's files, ptrace seize/interrupt/detach, the safe-point check (libunwind-ptrace), the
# remote call, and the two methods built on them (inject_ptrace, inject_gdb).  No CLI, no
# Python knowledge beyond what a method needs; callers link UNWIND_LIBS.
INJECT_SRCS := $(wildcard injector/*.c)
INJECT_OBJS := $(patsubst injector/%.c,$(BUILD)/injector/%.o,$(INJECT_SRCS))
INJECT_CFLAGS = $(CFLAGS_BASE) -Iinjector $(UNWIND_CFLAGS)

$(BUILD)/injector/%.o: injector/%.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(INJECT_CFLAGS) -c $< -o $@

$(BUILD)/libvcinject.a: $(INJECT_OBJS)
	rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(BUILD)/libvcinject.a
