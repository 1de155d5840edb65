/* inject_ptrace.c — the default injection method: ptrace only, no debugger (see method.h).
 *
 *   checks (nothing touched) → find dlopen/dlerror in the target's libc (.dynsym + map base)
 *   → block termination signals → seize + interrupt every thread → pick a safe thread
 *     (retry for a bounded time while none is safe) → detach every other thread
 *   → on the chosen thread (remote_call.h: libc's own `syscall; ret` and rt_sigreturn
 *     restorer, signal frames that bring it home, no code of the target written): map a
 *     private scratch region (call stub, strings, stack), dlopen(agent, RTLD_NOW|RTLD_LOCAL),
 *     dlerror() on failure, vc_agent_connect(control_path) (address from the agent's .dynsym +
 *     its map base), unmap → detach → unblock signals.
 *
 * SIGINT/SIGTERM/SIGHUP/SIGQUIT (and the job-control stops SIGTSTP/SIGTTIN/SIGTTOU) are
 * blocked from the first seize to the last detach, so a Ctrl-C, Ctrl-Z or a kill arriving
 * mid-way is acted on (by the caller's handlers or the default action) only once every thread
 * runs free; before anything has run in the target, a pending termination signal aborts the
 * injection early.  SIGKILL cannot be blocked: the kernel then detaches every
 * thread itself (no PTRACE_O_EXITKILL), and the thread inside the remote call finishes the
 * piece it is in and returns home through its signal frame (remote_call.h). */
#include "method.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent_symbols.h"
#include "elf.h"
#include "proc.h"
#include "protocol.h"
#include "ptrace.h"
#include "remote_call.h"
#include "safepoint.h"

#define RTLD_DLOPEN_INTERNAL 0x80000000 /* __RTLD_DLOPEN: required by __libc_dlopen_mode */
#define SCRATCH_DATA 16384u           /* agent path + control path */
#define DEFAULT_TIMEOUT_MS 5000
#define SEIZE_STOP_MS 2000             /* longest the other threads stay stopped while seizing */

struct libc_syms {
    uint64_t dlopen, dlerror;       /* target addresses */
    struct remote_gadgets gadgets;
    int internal_dlopen;            /* dlopen is __libc_dlopen_mode */
};

/* Whether [addr, addr + len) lies inside one executable mapping of the target. */
static int in_exec_mapping(const struct proc_maps *maps, uint64_t addr, uint64_t len)
{
    for (size_t i = 0; i < maps->n; i++)
        if (addr >= maps->v[i].start && addr + len <= maps->v[i].end)
            return maps->v[i].perms[2] == 'x';
    return 0;
}

static int is_libdl_name(const char *b)
{
    return strcmp(b, "libdl.so.2") == 0 || (strncmp(b, "libdl-2.", 8) == 0 && strstr(b, ".so"));
}

/* glibc < 2.34 keeps dlopen and dlerror in libdl.so.2; its libc has only __libc_dlopen_mode,
 * which drops the loader's error text.  A target that maps libdl (CPython links it) is called
 * through libdl's own pair, so that a failed dlopen comes back with dlerror()'s words ("version
 * `GLIBC_2.34' not found", "libz.so.1: cannot open shared object file").  0 with both
 * addresses in ls, or -1 (not mapped, or without them). */
static int find_libdl_syms(pid_t pid, const struct proc_maps *maps, struct libc_syms *ls)
{
    const struct proc_map *m = proc_find_module(maps, is_libdl_name);
    int fd = m ? proc_open_mapped(pid, m) : -1;
    struct elf_file ef;
    int r = fd >= 0 ? elf_open_fd(fd, &ef) : -1;
    if (fd >= 0)
        close(fd);
    if (r < 0)
        return -1;
    uint64_t bias = elf_load_bias(&ef, m->start), open_at, error_at;
    r = elf_lookup(&ef, "dlopen", &open_at) == 0 && elf_lookup(&ef, "dlerror", &error_at) == 0;
    elf_close(&ef);
    if (!r)
        return -1;
    ls->dlopen = bias + open_at;
    ls->dlerror = bias + error_at;
    return 0;
}

static int find_libc_syms(pid_t pid, const struct proc_maps *maps, struct libc_syms *ls,
                          char *err, size_t errlen)
{
    const struct proc_map *m = proc_find_module(maps, proc_is_libc_name);
    if (!m) {
        inject_set_err(err, errlen, "no libc is mapped in process %d (statically linked, or not a "
                "native process): it cannot load the agent", (int)pid);
        return -ENOENT;
    }
    int fd = proc_open_mapped(pid, m);
    if (fd < 0) {
        inject_set_err(err, errlen, "cannot open the target's libc %s: %s", m->path, strerror(-fd));
        return fd;
    }
    struct elf_file ef;
    int r = elf_open_fd(fd, &ef);
    close(fd);
    if (r < 0) {
        inject_set_err(err, errlen, "cannot read the target's libc %s: %s", m->path, strerror(-r));
        return r;
    }
    uint64_t bias = elf_load_bias(&ef, m->start), v;
    memset(ls, 0, sizeof *ls);
    if (elf_lookup(&ef, "dlopen", &v) == 0) {
        ls->dlopen = bias + v;
        if (elf_lookup(&ef, "dlerror", &v) == 0)
            ls->dlerror = bias + v;
    } else if (find_libdl_syms(pid, maps, ls) < 0 &&
               elf_lookup(&ef, "__libc_dlopen_mode", &v) == 0) {
        ls->dlopen = bias + v; /* glibc < 2.34 without libdl loaded: no error text */
        ls->internal_dlopen = 1;
    }
    /* the code borrowed must be code the target maps executable (its bytes are checked
     * against its memory by remote_begin) */
    int have_gadgets = remote_find_gadgets(&ef, bias, &ls->gadgets) == 0 &&
                       in_exec_mapping(maps, ls->gadgets.syscall_ret, 3) &&
                       in_exec_mapping(maps, ls->gadgets.restorer,
                                       ls->gadgets.restorer_end - ls->gadgets.restorer);
    elf_close(&ef);
    if (!ls->dlopen) {
        inject_set_err(err, errlen, "neither dlopen nor __libc_dlopen_mode found in %s", m->path);
        return -ENOENT;
    }
    if (!have_gadgets) {
        inject_set_err(err, errlen, "%s has no `syscall; ret` or rt_sigreturn restorer code to borrow: "
                "not a supported libc; use --method gdb", m->path);
        return -ENOEXEC;
    }
    return 0;
}

/* Address of vc_agent_connect in the target, and of its vc_agent_loaded marker (0: an agent
 * from before the marker, which cannot tell). */
static int find_agent_entry(pid_t pid, const char *agent_path, uint64_t *addr,
                            uint64_t *loaded_addr, char *err, size_t errlen)
{
    static const char *const names[] = {"vc_agent_connect", "vc_agent_loaded"};
    uint64_t at[2];
    char why[512];
    int r = agent_symbols(pid, agent_path, names, at, 2, why, sizeof why);
    if (r == -ENOENT) {
        inject_set_err(err, errlen, "dlopen succeeded but %s", why);
        return r;
    }
    if (r < 0) {
        inject_set_err(err, errlen, "%s", why);
        return r;
    }
    if (at[0] == 0) {
        inject_set_err(err, errlen, "%s does not export vc_agent_connect: not a vcattach agent",
                       agent_path);
        return -ENOENT;
    }
    *addr = at[0];
    *loaded_addr = at[1];
    return 0;
}

static const sigset_t *termination_signals(void)
{
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    /* Job control too: a Ctrl-Z (or a background tty write) that stopped us now would keep
     * every seized thread of the target stopped until we are continued.  Held back, it stops
     * us once every thread runs free. */
    sigaddset(&set, SIGTSTP);
    sigaddset(&set, SIGTTIN);
    sigaddset(&set, SIGTTOU);
    return &set;
}

static int termination_pending(void)
{
    sigset_t p;
    if (sigpending(&p) < 0)
        return 0;
    return sigismember(&p, SIGINT) || sigismember(&p, SIGTERM) || sigismember(&p, SIGHUP) ||
           sigismember(&p, SIGQUIT);
}

static double ms_since(int64_t t0)
{
    return (double)(pt_now_ns() - t0) / 1e6;
}

static void note(const struct method_request *req, int64_t t0, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(const struct method_request *req, int64_t t0, const char *fmt, ...)
{
    if (!req->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vcattach: pid %d [%8.3f ms] ", (int)req->pid, ms_since(t0));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Reads a NUL-terminated string from the target (at most len-1 bytes). */
static void read_remote_string(pid_t tid, uint64_t addr, char *buf, size_t len)
{
    buf[0] = 0;
    for (size_t i = 0; i + 1 < len; i += 64) {
        size_t chunk = len - 1 - i < 64 ? len - 1 - i : 64;
        if (pt_read(tid, addr + i, buf + i, chunk) < 0) {
            buf[i] = 0;
            return;
        }
        buf[i + chunk] = 0;
        if (memchr(buf + i, 0, chunk))
            return;
    }
}

/* The two calls on the chosen thread, between remote_begin and remote_end, after mapping the
 * scratch region (remote_end unmaps it, or leaves it mapped when a call was abandoned on
 * timeout: its frames may still be referenced).  Returns an inject_status: UNTOUCHED while
 * dlopen has not run, FAILED after. */
/* Why a remote call failed (remote_call's -errno), the thread's registers being restored. */
static int call_failed(const struct method_request *req, const struct remote *rc, int r,
                       char *err, size_t errlen)
{
    if (r == -ETIMEDOUT)
        inject_set_err(err, errlen, "the call into the target did not return within the "
                       "timeout (%d ms); registers restored, the call was abandoned",
                       req->timeout_ms);
    else if (r == -ENOSYS)
        inject_set_err(err, errlen, "the injected call was blocked by seccomp (SIGSYS); "
                       "registers restored");
    else if (r == -EFAULT)
        inject_set_err(err, errlen, "the injected call crashed with %s; registers restored",
                       strsignal(rc->fault_sig));
    else if (r == -ESRCH)
        inject_set_err(err, errlen, "the target thread exited during the injected call");
    else
        inject_set_err(err, errlen, "remote call failed: %s", strerror(-r));
    return INJECT_FAILED;
}

/* The agent's and the control socket's paths written into a scratch region of the target:
 * their addresses in *agent_str, *control_str.  INJECT_OK, or INJECT_UNTOUCHED with err. */
static int stage_strings(const struct method_request *req, struct remote *rc, int64_t t0,
                         int64_t deadline, uint64_t *agent_str, uint64_t *control_str,
                         char *err, size_t errlen)
{
    pid_t tid = rc->t->tid;
    size_t alen = strlen(req->agent_path) + 1, clen = strlen(req->control_path) + 1;
    uint64_t data = 0;
    int r = remote_map_scratch(rc, SCRATCH_DATA, &data, deadline);
    if (r == -ENOSPC) {
        inject_set_err(err, errlen, "no room for a signal frame on the stack of thread %d (near "
                       "its guard page); nothing was run, retry later", (int)tid);
        return INJECT_UNTOUCHED;
    }
    if (r < 0) {
        inject_set_err(err, errlen, "cannot map the call stub in the target: %s",
                       r == -ENOSYS ? "blocked by seccomp" : strerror(-r));
        return INJECT_UNTOUCHED;
    }
    note(req, t0, "scratch region at %#llx", (unsigned long long)rc->scratch);
    *agent_str = data, *control_str = data + alen; /* data: [agent path] [control path] */
    if (pt_write(tid, *agent_str, req->agent_path, alen) < 0 ||
        pt_write(tid, *control_str, req->control_path, clen) < 0) {
        inject_set_err(err, errlen, "cannot write into the target's memory");
        return INJECT_UNTOUCHED;
    }
    return INJECT_OK;
}

/* dlopen(agent) in the target; on failure the target's own dlerror() text.  INJECT_*. */
static int call_dlopen(const struct method_request *req, struct remote *rc,
                       const struct libc_syms *ls, uint64_t agent_str, int64_t t0,
                       int64_t deadline, char *err, size_t errlen)
{
    uint64_t flags = RTLD_NOW | RTLD_LOCAL | (ls->internal_dlopen ? RTLD_DLOPEN_INTERNAL : 0);
    uint64_t handle = 0;
    int r = remote_call(rc, ls->dlopen, agent_str, flags, &handle, deadline);
    note(req, t0, "dlopen -> %d, handle %#llx", r, (unsigned long long)handle);
    if (r < 0)
        return call_failed(req, rc, r, err, errlen);
    if (handle != 0)
        return INJECT_OK;
    char msg[512] = "";
    uint64_t s = 0;
    if (ls->dlerror && remote_call(rc, ls->dlerror, 0, 0, &s, deadline) == 0 && s)
        read_remote_string(rc->t->tid, s, msg, sizeof msg);
    inject_set_err(err, errlen, "dlopen(%s) failed in the target: %s", req->agent_path,
                   msg[0] ? msg : ls->internal_dlopen
                       ? "(glibc before 2.34 keeps the loader's error text in libdl.so.2, which "
                         "this process has not loaded)"
                       : "(no dlerror text)");
    return INJECT_FAILED;
}

static int run_calls(const struct method_request *req, struct remote *rc,
                     const struct libc_syms *ls, int64_t deadline, int64_t t0, char *err,
                     size_t errlen)
{
    uint64_t agent_str, control_str, ret = 0;
    int status = stage_strings(req, rc, t0, deadline, &agent_str, &control_str, err, errlen);
    if (status != INJECT_OK)
        return status;
    if (termination_pending()) {
        inject_set_err(err, errlen, "interrupted by a signal before anything ran in the target");
        return INJECT_UNTOUCHED;
    }
    /* Loaded by an earlier attach whose copy of the agent is gone since: glibc's dlopen finds
     * it by that name, musl's opens the path first and fails (ENOENT).  The agent is never
     * unloaded, so it is resident and there is nothing to load: its entry is found below by
     * its mapping either way. */
    if (proc_loaded_and_gone(req->pid, req->agent_path))
        note(req, t0, "agent mapped already, its file gone: no dlopen");
    else
        status = call_dlopen(req, rc, ls, agent_str, t0, deadline, err, errlen);
    if (status != INJECT_OK)
        return status;
    uint64_t entry = 0, loaded = 0;
    if (find_agent_entry(req->pid, req->agent_path, &entry, &loaded, err, errlen) < 0)
        return INJECT_FAILED;
    /* Mapped but never finished loading (an earlier dlopen of it abandoned half way, its
     * relocations maybe not done): calling into it would crash the thread we borrowed. */
    uint32_t mark = 0;
    if (loaded && (pt_read(rc->t->tid, loaded, &mark, sizeof mark) < 0 ||
                   mark != VC_AGENT_LOADED_MAGIC)) {
        inject_set_err(err, errlen, "the agent %s is mapped in pid %d but never finished "
                       "loading (an earlier injection's dlopen was abandoned half way); it is "
                       "not called into, and this process cannot be traced until it restarts",
                       req->agent_path, (int)req->pid);
        return INJECT_FAILED;
    }
    int r = remote_call(rc, entry, control_str, 0, &ret, deadline);
    note(req, t0, "vc_agent_connect -> %d, rc %d", r, (int)(int32_t)ret);
    if (r < 0)
        return call_failed(req, rc, r, err, errlen);
    if ((int32_t)ret != 0) {
        int e = (int32_t)ret;
        inject_set_err(err, errlen, "vc_agent_connect(%.*s) failed in the target: %d (%s)",
                       (int)strcspn(req->control_path, "#"), req->control_path, e,
                       e < 0 ? strerror(-e) : "error");
        return INJECT_FAILED;
    }
    return INJECT_OK;
}

/* Why the threads of pid could not all be seized and stopped (pt_seize_all's -errno). */
static void explain_seize(int r, pid_t pid, char *err, size_t errlen)
{
    if (r == -EPERM)
        inject_set_err(err, errlen, "ptrace: Operation not permitted on pid %d (another "
                       "user's process? run as its user or with CAP_SYS_PTRACE; check "
                       "kernel.yama.ptrace_scope)", (int)pid);
    else if (r == -EBUSY)
        inject_set_err(err, errlen, "a thread of process %d is already traced by another tool "
                       "(a debugger, a profiler, another vcattach?): detach it first", (int)pid);
    else if (r == -ESRCH)
        inject_set_err(err, errlen, "process %d exited", (int)pid);
    else if (r == -ETIMEDOUT)
        inject_set_err(err, errlen, "a thread of process %d did not stop within %d ms (in an "
                       "uninterruptible wait: vfork, disk or NFS I/O?); nothing was run, retry "
                       "later", (int)pid, SEIZE_STOP_MS);
    else
        inject_set_err(err, errlen, "cannot stop the threads of %d: %s", (int)pid,
                       strerror(-r));
}

/* Seizes every thread of the target until one is stopped at a safe point, within half the
 * budget (the calls need the rest).  The index of that thread in g (every thread stopped,
 * maps re-read), or -1 with err (g released: nothing ran). */
static int seize_at_safe_point(const struct method_request *req, struct tracee_group *g,
                               struct proc_maps *maps, int64_t t0, int64_t deadline,
                               int timeout_ms, char *err, size_t errlen)
{
    pid_t pid = req->pid;
    int64_t search_deadline = t0 + (int64_t)timeout_ms * 500000;
    char why[256] = "";
    for (int attempts = 1;; attempts++) {
        /* Every thread stops within moments unless one is in an uninterruptible wait (a vfork
         * parent, disk I/O): then all the others would stay stopped until the deadline. */
        int64_t stop_by = pt_now_ns() + (int64_t)SEIZE_STOP_MS * 1000000;
        int r = pt_seize_all(g, pid, stop_by < deadline ? stop_by : deadline);
        note(req, t0, "seize+interrupt: %d (%zu threads)", r, g->n);
        if (r < 0) {
            explain_seize(r, pid, err, errlen);
            return -1;
        }
        /* Every thread is stopped: its credentials cannot change until it runs again, so
         * this is the last look at them, and the one that counts (a setuid() between the
         * preflight and the seize is caught here). */
        if (req->facts && target_facts_same_identity(req->facts, err, errlen) < 0)
            return -1;
        /* the map may have changed while the threads ran */
        proc_free_maps(maps);
        if (proc_read_maps(pid, maps) < 0) {
            inject_set_err(err, errlen, "process %d exited", (int)pid);
            return -1;
        }
        int chosen = safepoint_choose(g, maps, req->verbose, why, sizeof why);
        note(req, t0, "safe point: %s", chosen >= 0 ? why : "none");
        if (chosen >= 0)
            return chosen;
        pt_release(g);
        if (termination_pending()) {
            inject_set_err(err, errlen, "interrupted by a signal before anything ran in the "
                           "target");
            return -1;
        }
        if (pt_now_ns() >= search_deadline) {
            inject_set_err(err, errlen, "no thread reached a safe point in %d attempts (%s); "
                           "nothing was run, retry later", attempts, why);
            return -1;
        }
        /* Let the threads move on: 1 ms, then twice as long each time up to 20 ms.  A thread
         * leaves malloc or a lock within microseconds; a process caught in its loader (a
         * spawned worker found at its exec) leaves it within a few ms, and a first pause of
         * 20 ms let its interpreter start and run its first code before the agent was in. */
        long pause_ms = attempts < 5 ? 1L << (attempts - 1) : 20;
        struct timespec pause = {0, (pause_ms < 20 ? pause_ms : 20) * 1000000};
        nanosleep(&pause, NULL);
    }
}

/* The caught thread (req->caught: the process's only thread, stopped by this very process at
 * its interpreter's start, catch.c), where it stands.  Its index in g when the process still
 * has that one thread and it is at a safe point; else it is let go and -1 (the usual search
 * follows, as for any process), or -2 with err when the process is not the one judged any
 * more (nothing ran). */
static int take_caught(const struct method_request *req, struct tracee_group *g,
                       struct proc_maps *maps, int64_t t0, char *err, size_t errlen)
{
    pid_t pid = req->pid;
    if (pt_adopt(g, pid, req->caught) < 0) {
        struct tracee_group one = {.pid = pid, .t = req->caught, .n = 1, .cap = 1};
        pt_detach(&one, req->caught);
        return -1;
    }
    pid_t *tids = NULL;
    size_t n = 0;
    int alone = proc_list_tasks(pid, &tids, &n) == 0 && n == 1 && tids[0] == pid;
    free(tids);
    if (!alone) { /* a thread came meanwhile (a constructor's): all are seized the usual way */
        note(req, t0, "caught, but not its only thread: let go");
        pt_release(g);
        return -1;
    }
    if (req->facts && target_facts_same_identity(req->facts, err, errlen) < 0) {
        pt_release(g);
        return -2;
    }
    proc_free_maps(maps);
    if (proc_read_maps(pid, maps) < 0) {
        inject_set_err(err, errlen, "process %d exited", (int)pid);
        pt_release(g);
        return -2;
    }
    char why[256] = "";
    int chosen = safepoint_choose(g, maps, req->verbose, why, sizeof why);
    note(req, t0, "caught at its start; safe point: %s%s", chosen >= 0 ? "" : "none: ", why);
    if (chosen < 0)
        pt_release(g);
    return chosen;
}

/* The calls on thread `chosen` of g, every other thread running again first (the calls may
 * need their locks); the thread is restored on every path.  An INJECT_* status. */
static int call_on_thread(const struct method_request *req, struct tracee_group *g, int chosen,
                          const struct libc_syms *ls, int64_t t0, int64_t deadline, char *err,
                          size_t errlen)
{
    struct tracee *t = &g->t[chosen];
    for (size_t i = 0; i < g->n; i++)
        if ((int)i != chosen)
            pt_detach(g, &g->t[i]);
    note(req, t0, "other threads resumed; calling on thread %d", (int)t->tid);

    struct remote rc;
    int r = remote_begin(&rc, t, &ls->gadgets);
    if (r == -EOPNOTSUPP) {
        inject_set_err(err, errlen, "thread %d runs with an x86 shadow stack (CET), which the "
                       "ptrace method cannot call into; nothing was run (use --method gdb)",
                       (int)t->tid);
        return INJECT_UNTOUCHED;
    }
    if (r < 0) {
        inject_set_err(err, errlen, "cannot prepare thread %d: %s", (int)t->tid, strerror(-r));
        return INJECT_UNTOUCHED;
    }
    int status = run_calls(req, &rc, ls, deadline, t0, err, errlen);
    int rr = remote_end(&rc);
    if (rc.fp_missed)
        note(req, t0, "thread %d: a frame did not bring xstate components %#llx home; they "
             "were set directly", (int)t->tid, (unsigned long long)rc.fp_missed);
    if (rr < 0 && t->state != TRACEE_GONE) {
        status = INJECT_FAILED;
        inject_set_err(err, errlen, "could not restore thread %d: %s", (int)t->tid, strerror(-rr));
    }
    return status;
}

int inject_ptrace(const struct method_request *req, char *err, size_t errlen)
{
    int64_t t0 = pt_now_ns();
    int timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
    int64_t deadline = t0 + (int64_t)timeout_ms * 1000000;
    err[0] = 0;
    if (!req->control_path || strlen(req->control_path) >= SCRATCH_DATA / 2 ||
        !req->agent_path || strlen(req->agent_path) >= SCRATCH_DATA / 2) {
        inject_set_err(err, errlen, "agent or control path missing or too long");
        return INJECT_UNTOUCHED;
    }
    struct proc_maps maps;
    if (proc_read_maps_or_explain(req->pid, &maps, err, errlen) < 0)
        return INJECT_UNTOUCHED;
    struct libc_syms ls;
    if (find_libc_syms(req->pid, &maps, &ls, err, errlen) < 0) {
        proc_free_maps(&maps);
        return INJECT_UNTOUCHED;
    }
    note(req, t0, "dlopen and the call gadgets found in the target's libc");
    /* a signal that would end vcattach waits until every thread is restored */
    sigset_t old_mask;
    sigprocmask(SIG_BLOCK, termination_signals(), &old_mask);
    struct tracee_group g = {0};
    int status = INJECT_UNTOUCHED;
    int chosen = req->caught ? take_caught(req, &g, &maps, t0, err, errlen) : -1;
    if (chosen == -1)
        chosen = seize_at_safe_point(req, &g, &maps, t0, deadline, timeout_ms, err, errlen);
    if (chosen >= 0)
        status = call_on_thread(req, &g, chosen, &ls, t0, deadline, err, errlen);
    pt_release(&g);
    note(req, t0, "all threads detached");
    proc_free_maps(&maps);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return status;
}
