/* method.h — internal: the contract of the methods that load the agent into a live process
 * (what each is given, what it returns, what it may call), behind vcinject.h's inject()
 * (inject.c, the dispatcher: its own API is vcinject.h's), which re-checks the target and
 * picks one of them
 * (ptrace: ptrace.c, safepoint.c, remote_call.c, elf.c, proc.c; gdb: inject_gdb.c;
 * remote-exec: inject_remote_exec.c, debug_offsets.c).
 *
 * ptrace and gdb do exactly two calls in the target, on one thread stopped at a safe point:
 *     handle = dlopen(agent_path, RTLD_NOW | RTLD_LOCAL)      (a no-op if already loaded)
 *     rc     = vc_agent_connect(control_path)                  (spawns the agent thread)
 * and leave every thread running, with every register restored, on every path.
 * remote-exec (CPython 3.14+, PEP 768) stops nothing and runs no code of ours: it asks the
 * interpreter, through memory writes, to run a small script at a thread's next evaluation
 * breaker; the script makes the same two calls through ctypes.
 *
 * If the injecting process is killed (SIGKILL cannot be blocked):
 *  - ptrace: the kernel detaches every thread; the thread running a call finishes the piece it
 *    is in and comes home through its own signal frame (remote_call.h).  Guaranteed at any
 *    instant; no code page of the target is ever written.  Left behind at worst: the private
 *    scratch mapping, and signals intercepted for re-delivery.
 *  - gdb: gdb runs in its own process group and outlives its parent: it finishes the call and
 *    detaches (tests/system/test_inject_kill.py).  gdb ITSELF killed mid-call is not survivable: the
 *    call returns into gdb's dummy-frame return address and the target dies (SIGSEGV/SIGTRAP);
 *    this is why run_gdb unwinds a call through gdb before it ever kills gdb.
 *  - remote-exec: nothing is stopped; a request not yet taken stays posted, and the thread
 *    runs the loader script at its next evaluation breaker (its agent then finds no listener
 *    and gives up); the script file stays in the target's /tmp.
 */
#ifndef VC_INJECT_METHOD_H
#define VC_INJECT_METHOD_H

#include <stddef.h>
#include <sys/types.h>

#include "vcinject.h" /* enum inject_status, inject_wait_fn */

/* What one method is given.  Called by inject() (inject.c) only, after target_facts_recheck
 * and, for ptrace/gdb, proc_check_agent: the methods themselves no longer re-check the target. */
struct method_request {
    pid_t pid;
    const char *agent_path;   /* path valid in the target's mount namespace */
    const char *control_path; /* the control socket the agent connects to (target's view) */
    int timeout_ms;           /* bound for the whole injection (every wait inside is bounded) */
    int verbose;              /* progress lines on stderr */
    /* ptrace: called once every thread is seized and stopped (the target's credentials cannot
     * change until they run again): 0 when it is still the process preflight judged, else -1
     * with err, and nothing runs.  NULL: no check. */
    const struct target_facts *facts;
    /* ptrace: the process's only thread, already ours and stopped (inject_request.caught):
     * tried first, where it stands; owned (let go) by the method from then on.  NULL: none. */
    struct tracee *caught;
};

/* The check behind method_request.facts (target_facts.c): same start time, same uids and
 * gids as at target_facts_read.  0, or -1 with one line in err. */
int target_facts_same_identity(const struct target_facts *f, char *err, size_t errlen);

/* Each returns an enum inject_status and, when not OK, one line (no newline) in err. */
int inject_ptrace(const struct method_request *req, char *err, size_t errlen);
int inject_gdb(const struct method_request *req, char *err, size_t errlen);

/* remote-exec: whether pid is a CPython 3.14+ that accepts remote-exec requests (its debug
 * offsets are readable and known, remote debugging is enabled).  Reads only.  INJECT_OK, or
 * INJECT_UNTOUCHED with the reason in err. */
int inject_remote_exec_check(pid_t pid, char *err, size_t errlen);

/* remote-exec: posts script_path (a file valid and readable in the target's view, which loads
 * req->agent_path and calls vc_agent_connect(req->control_path)) to the thread most likely to
 * run Python soon, and calls wait_connected until the agent connects or req->timeout_ms has
 * passed; then the request is cancelled (pending flag cleared, path buffer restored).
 * INJECT_OK (connected); INJECT_UNTOUCHED (refused, or cancelled before any thread took it:
 * nothing ran); INJECT_FAILED (the script was taken but the agent did not connect, or the
 * request could not be withdrawn for certain: then *script_in_use, and the caller must leave
 * the script where it is, since the interpreter may still open it). */
int inject_remote_exec(const struct method_request *req, const char *script_path,
                       inject_wait_fn wait_connected, void *ctx, int *script_in_use, char *err,
                       size_t errlen);

/* For the methods (method_err.c): fills err with one formatted line, always terminated. */
void inject_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* VC_INJECT_METHOD_H */
