/* debug_offsets.h — CPython 3.14+'s _Py_DebugOffsets of a live process, read from outside:
 * the table at the start of _PyRuntime that out-of-process tools (PEP 768's sys.remote_exec,
 * profilers) use to find the interpreter, its thread states and their remote-debugger
 * fields without matching headers.  Used by inject_remote_exec.c.
 *
 * Only the header {cookie "xdebugpy", version, free_threaded} is a documented constant; the
 * positions of the fields after it changed between 3.14 and 3.15 (fields were inserted in the
 * middle of the thread-state section).  So the positions vcattach reads are known per minor
 * version, and every value read is checked for consistency (offsets inside the sizes the
 * table itself reports, the script buffer inside a thread state, ...) before it is used: a
 * layout that changed again (a later patch release) is refused, never guessed.
 */
#ifndef VC_DEBUG_OFFSETS_H
#define VC_DEBUG_OFFSETS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct py_debug_offsets {
    uint64_t runtime;          /* target address of _PyRuntime (and of the table) */
    uint64_t version;          /* the interpreter's PY_VERSION_HEX */
    char file[256];            /* the ELF it came from (target's view), for messages */
    /* offsets inside _PyRuntimeState */
    uint64_t interpreters_head;
    /* offsets inside PyInterpreterState */
    uint64_t interp_size, interp_id, interp_next, threads_head, threads_main, gil_locked,
        gil_holder;
    uint64_t remote_debug_enabled;   /* config.remote_debug (int) */
    /* offsets inside PyThreadState */
    uint64_t tstate_size, tstate_next, tstate_interp, tstate_native_id, eval_breaker;
    uint64_t remote_support;         /* _PyRemoteDebuggerSupport in the thread state */
    /* offsets inside _PyRemoteDebuggerSupport, and its script buffer's size */
    uint64_t pending_call, script_path, script_path_size;
};

/* Target memory through process_vm_readv/writev only (no ptrace: nothing is stopped).
 * 0 or -errno. */
int dbg_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int dbg_write(pid_t pid, uint64_t addr, const void *buf, size_t len);
/* dbg_read without its child, for code that already runs in a bounded_read child (several
 * reads that must see the target at nearly one instant, at the cost of one fork). */
int dbg_read_in_child(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Finds and checks the table of pid (its libpython, else its executable).  Returns 0;
 * -ENOENT when the process has no such table (before 3.14, or not CPython); -EPROTO when the
 * table is not one vcattach can use (free-threaded, an unknown version or layout); another
 * -errno when it cannot be read.  err gets one line for every failure. */
int debug_offsets_read(pid_t pid, struct py_debug_offsets *o, char *err, size_t errlen);

#endif /* VC_DEBUG_OFFSETS_H */
