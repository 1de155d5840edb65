# injector/ — libvcinject.a, the injection machinery behind one public header,
# injector/include/vcinject.h: the target's facts (target_facts.c), CPython detection
# (target_python.c), process questions (proc_tree.c; their namespaces: namespaces.c; the
# abstract socket names they listen on: unix_names.c), the choice of method and the fallback
# (inject.c); inside, /proc parsing, ELF symbol lookup in the target's files, ptrace
# seize/interrupt/detach, the safe-point check (libunwind-ptrace), the remote call, and the
# methods built on them (inject_ptrace, inject_gdb, inject_remote_exec).  No CLI; callers
# include injector/include only and link UNWIND_LIBS.
#
# The safe-point rules are one table, injector/safepoint_rules.def: safepoint.c compiles it in,
# and the build renders it into the gdb method's script (injector/gdb_inject.py) with
# injector/tools/render_gdb_script.c, a tool run on the build machine only:
#   $(BUILD)/injector/gdb_inject.py   the rendered script (the tests import its judge)
#   $(BUILD)/injector/gdb_script.c    the same as a C string, compiled into the library
INJECT_SRCS := $(wildcard injector/*.c)
INJECT_GEN_SRCS := $(BUILD)/injector/gdb_script.c
INJECT_OBJS := $(patsubst injector/%.c,$(BUILD)/injector/%.o,$(INJECT_SRCS)) \
               $(BUILD)/injector/gdb_script.o
INJECT_CFLAGS = $(CFLAGS_BASE) -Iinjector -Iinjector/include $(UNWIND_CFLAGS)

$(BUILD)/injector/%.o: injector/%.c | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(INJECT_CFLAGS) -c $< -o $@

$(BUILD)/injector/tools/render_gdb_script: injector/tools/render_gdb_script.c \
                                           injector/safepoint_rules.def | $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Iinjector -o $@ $<

# One run writes both; the .py is the grouped target's other half.
$(BUILD)/injector/gdb_script.c $(BUILD)/injector/gdb_inject.py &: injector/gdb_inject.py \
        $(BUILD)/injector/tools/render_gdb_script
	$(BUILD)/injector/tools/render_gdb_script injector/gdb_inject.py \
	    $(BUILD)/injector/gdb_inject.py $(BUILD)/injector/gdb_script.c

$(BUILD)/injector/gdb_script.o: $(BUILD)/injector/gdb_script.c injector/gdb_script.h
	$(CC) $(INJECT_CFLAGS) -c $< -o $@

$(BUILD)/libvcinject.a: $(INJECT_OBJS)
	rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(BUILD)/libvcinject.a $(BUILD)/injector/gdb_inject.py
