/* safepoint.h — choose the thread to run the injected calls on: one whose stack holds no lock
 * the calls could need (loader, malloc arenas, stdio, low-level locks, fork/exit/thread
 * creation, nss), preferably one blocked in a syscall.  Uses libunwind-ptrace on threads that
 * are already stopped (ptrace.h). */
#ifndef VC_SAFEPOINT_H
#define VC_SAFEPOINT_H

#include <stddef.h>

#include "proc.h"
#include "ptrace.h"

/* Picks the best stopped thread of g.  Returns its index in g->t, or -1 when no thread is at a
 * safe point; why receives the reason (for the chosen thread: where it is). */
int safepoint_choose(struct tracee_group *g, const struct proc_maps *maps, int verbose,
                     char *why, size_t whylen);

/* The classification of one symbol/module name (exposed for tests and diagnostics): a reason
 * string if a frame in it makes the thread unsafe, else NULL. */
const char *safepoint_unsafe_symbol(const char *name);
const char *safepoint_unsafe_module(const char *path);
/* One frame: function name (may be empty) in the module at module_path (absolute, else the
 * module is not judged).  The ptrace method judges every frame with it; the gdb method's script
 * does the same from the same table (tests/unit/test_safepoint_rules.py compares the two). */
const char *safepoint_unsafe_frame(const char *name, const char *module_path);
/* A C library without unwind tables (musl's): the reason a thread whose innermost frame is in
 * it is unsafe unless safepoint_bare_idle_syscall(its syscall), else NULL.  A frame in it
 * further out ends the known stack. */
const char *safepoint_bare_libc(const char *path);
int safepoint_bare_idle_syscall(long nr);

/* A stack followed frame by frame, innermost first, for the rule no single frame can show
 * (SP_STRIPPED_LIBC in safepoint_rules.def): a run of unnamed frames in a stripped glibc whose
 * caller is in another module.  Zero it before the first frame; set idle for a thread blocked
 * in an idle syscall, to which the rule does not apply. */
struct safepoint_walk {
    int idle;          /* blocked in an idle syscall (a wait: sem_clockwait's futex) */
    int open;          /* inside a run of unnamed frames of that library */
    char module[512];  /* its path */
};
/* The next frame out (name may be empty; module_path as for safepoint_unsafe_frame): the
 * reason it makes the thread unsafe, else NULL.  Judges the frame itself first
 * (safepoint_unsafe_frame), then the run; a run still open when the stack ends is fine. */
const char *safepoint_walk_frame(struct safepoint_walk *w, const char *name,
                                 const char *module_path);

#endif /* VC_SAFEPOINT_H */
