/* inject.h — load the agent into a live process and start it: the one interface between the
 * CLI (cmd_trace.c, session.c, preflight.c) and the two injection methods
 * (ptrace: ptrace.c, safepoint.c, remote_call.c, elf.c, proc.c; gdb: inject_gdb.c).
 *
 * Both methods do exactly two calls in the target, on one thread stopped at a safe point:
 *     handle = dlopen(agent_path, RTLD_NOW | RTLD_LOCAL)      (a no-op if already loaded)
 *     rc     = vc_agent_connect(control_path)                  (spawns the agent thread)
 * and leave every thread running, with every register restored, on every path.
 *
 * If the injecting process is killed (SIGKILL cannot be blocked):
 *  - ptrace: the kernel detaches every thread; the thread running a call finishes the piece it
 *    is in and comes home through its own signal frame (remote_call.h).  Guaranteed at any
 *    instant; no code page of the target is ever written.  Left behind at worst: the private
 *    scratch mapping, and signals intercepted for re-delivery.
 *  - gdb: gdb runs in its own process group and outlives its parent: it finishes the call and
 *    detaches (tests/test_inject_kill.py).  gdb ITSELF killed mid-call is not survivable: the
 *    call returns into gdb's dummy-frame return address and the target dies (SIGSEGV/SIGTRAP);
 *    this is why run_gdb unwinds a call through gdb before it ever kills gdb.
 */
#ifndef VC_INJECT_H
#define VC_INJECT_H

#include <stddef.h>
#include <sys/types.h>

struct inject_request {
    pid_t pid;
    const char *agent_path;   /* path valid in the target's mount namespace */
    const char *control_path; /* the control socket the agent connects to (target's view) */
    int timeout_ms;           /* bound for the whole injection (every wait inside is bounded) */
    int verbose;              /* progress lines on stderr */
};

enum inject_status {
    INJECT_OK = 0,
    INJECT_UNTOUCHED = 1, /* failed before anything ran in the target (safe to retry/report) */
    INJECT_FAILED = 2,    /* failed after a call ran in the target; target state restored */
};

/* Each returns an enum inject_status and, when not OK, one line (no newline) in err. */
int inject_ptrace(const struct inject_request *req, char *err, size_t errlen);
int inject_gdb(const struct inject_request *req, char *err, size_t errlen);

#endif /* VC_INJECT_H */
