/* gdb_script.h — the gdb method's Python script, embedded at build time: injector/gdb_inject.py
 * with the rules of safepoint_rules.def rendered in (injector/tools/render_gdb_script.c writes
 * $(BUILD)/injector/gdb_script.c and the importable $(BUILD)/injector/gdb_inject.py).
 * inject_gdb.c prepends the AGENT and CONTROL assignments and hands it to gdb -x. */
#ifndef VC_GDB_SCRIPT_H
#define VC_GDB_SCRIPT_H

extern const char vc_gdb_script[];

#endif /* VC_GDB_SCRIPT_H */
