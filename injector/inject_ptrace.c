/* inject_ptrace.c — the default injection method: ptrace only, no debugger (see inject.h).
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
#include "inject.h"

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

#include "elf.h"
#include "proc.h"
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

static int is_libc_name(const char *b)
{
    return strcmp(b, "libc.so.6") == 0 || (strncmp(b, "libc-2.", 7) == 0 && strstr(b, ".so")) ||
           (strncmp(b, "ld-musl-", 8) == 0) || strncmp(b, "libc.musl-", 10) == 0;
}

/* Whether [addr, addr + len) lies inside one executable mapping of the target. */
static int in_exec_mapping(const struct proc_maps *maps, uint64_t addr, uint64_t len)
{
    for (size_t i = 0; i < maps->n; i++)
        if (addr >= maps->v[i].start && addr + len <= maps->v[i].end)
            return maps->v[i].perms[2] == 'x';
    return 0;
}

static int find_libc_syms(pid_t pid, const struct proc_maps *maps, struct libc_syms *ls,
                          char *err, size_t errlen)
{
    const struct proc_map *m = proc_find_module(maps, is_libc_name);
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
    } else if (elf_lookup(&ef, "__libc_dlopen_mode", &v) == 0) {
        ls->dlopen = bias + v; /* glibc < 2.34: dlopen lives in libdl, maybe not loaded */
        ls->internal_dlopen = 1;
    }
    if (elf_lookup(&ef, "dlerror", &v) == 0)
        ls->dlerror = bias + v;
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

/* Address of vc_agent_connect in the target, from the agent's .dynsym and its mapping. */
static int find_agent_entry(pid_t pid, const char *agent_path, uint64_t *addr, char *err,
                            size_t errlen)
{
    char path[4096 + 64];
    struct stat sb;
    int have_stat = proc_root_path(pid, agent_path, path, sizeof path) == 0 && stat(path, &sb) == 0;
    struct proc_maps maps;
    int r = proc_read_maps(pid, &maps);
    if (r < 0) {
        inject_set_err(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-r));
        return r;
    }
    const struct proc_map *m = have_stat ? proc_find_inode(&maps, sb.st_dev, sb.st_ino) : NULL;
    /* Else by name: the agent was rebuilt or upgraded (or its copy removed) after the target
     * first loaded it, dlopen matched the path and returned the object already mapped, which
     * /proc shows as "(deleted)".  That copy is the one to call; its bytes stay readable
     * through map_files. */
    if (!m)
        m = proc_find_loaded(pid, &maps, agent_path);
    if (!m) {
        proc_free_maps(&maps);
        inject_set_err(err, errlen, "dlopen succeeded but %s is not mapped in the target", agent_path);
        return -ENOENT;
    }
    int fd = proc_open_mapped(pid, m);
    struct elf_file ef;
    r = fd < 0 ? fd : elf_open_fd(fd, &ef);
    if (fd >= 0)
        close(fd);
    if (r < 0) {
        proc_free_maps(&maps);
        inject_set_err(err, errlen, "cannot read the agent %s: %s", agent_path, strerror(-r));
        return r;
    }
    uint64_t v;
    r = elf_lookup(&ef, "vc_agent_connect", &v);
    if (r == 0)
        *addr = elf_load_bias(&ef, m->start) + v;
    else
        inject_set_err(err, errlen, "%s does not export vc_agent_connect: not a vcattach agent",
                agent_path);
    elf_close(&ef);
    proc_free_maps(&maps);
    return r;
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
    fprintf(stderr, "vcattach: [%8.3f ms] ", ms_since(t0));
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
static int run_calls(const struct method_request *req, struct remote *rc,
                     const struct libc_syms *ls, int64_t deadline, int64_t t0, char *err,
                     size_t errlen)
{
    pid_t tid = rc->t->tid;
    size_t alen = strlen(req->agent_path) + 1, clen = strlen(req->control_path) + 1;
    uint64_t data = 0, ret = 0;
    int r = remote_map_scratch(rc, SCRATCH_DATA, &data, deadline);
    if (r == -ENOSPC) {
        inject_set_err(err, errlen, "no room for a signal frame on the stack of thread %d (near its "
                "guard page); nothing was run, retry later", (int)tid);
        return INJECT_UNTOUCHED;
    }
    if (r < 0) {
        inject_set_err(err, errlen, "cannot map the call stub in the target: %s",
                r == -ENOSYS ? "blocked by seccomp" : strerror(-r));
        return INJECT_UNTOUCHED;
    }
    note(req, t0, "scratch region at %#llx", (unsigned long long)rc->scratch);
    /* data: [agent path] [control path] */
    uint64_t agent_str = data, control_str = data + alen;
    if (pt_write(tid, agent_str, req->agent_path, alen) < 0 ||
        pt_write(tid, control_str, req->control_path, clen) < 0) {
        inject_set_err(err, errlen, "cannot write into the target's memory");
        return INJECT_UNTOUCHED;
    }
    if (termination_pending()) {
        inject_set_err(err, errlen, "interrupted by a signal before anything ran in the target");
        return INJECT_UNTOUCHED;
    }

    uint64_t flags = RTLD_NOW | RTLD_LOCAL | (ls->internal_dlopen ? RTLD_DLOPEN_INTERNAL : 0);
    r = remote_call(rc, ls->dlopen, agent_str, flags, &ret, deadline);
    note(req, t0, "dlopen -> %d, handle %#llx", r, (unsigned long long)ret);
    if (r < 0)
        goto call_failed;
    if (ret == 0) {
        char msg[512] = "";
        uint64_t s = 0;
        if (ls->dlerror && remote_call(rc, ls->dlerror, 0, 0, &s, deadline) == 0 && s)
            read_remote_string(tid, s, msg, sizeof msg);
        inject_set_err(err, errlen, "dlopen(%s) failed in the target: %s", req->agent_path,
                msg[0] ? msg : "(no dlerror text)");
        return INJECT_FAILED;
    }
    uint64_t entry = 0;
    if (find_agent_entry(req->pid, req->agent_path, &entry, err, errlen) < 0)
        return INJECT_FAILED;
    r = remote_call(rc, entry, control_str, 0, &ret, deadline);
    note(req, t0, "vc_agent_connect -> %d, rc %d", r, (int)(int32_t)ret);
    if (r < 0)
        goto call_failed;
    if ((int32_t)ret != 0) {
        int e = (int32_t)ret;
        inject_set_err(err, errlen, "vc_agent_connect(%.*s) failed in the target: %d (%s)",
                (int)strcspn(req->control_path, "#"), req->control_path, e,
                e < 0 ? strerror(-e) : "error");
        return INJECT_FAILED;
    }
    return INJECT_OK;

call_failed:
    if (r == -ETIMEDOUT)
        inject_set_err(err, errlen, "the call into the target did not return within the timeout (%d ms); "
                "registers restored, the call was abandoned", req->timeout_ms);
    else if (r == -ENOSYS)
        inject_set_err(err, errlen, "the injected call was blocked by seccomp (SIGSYS); registers "
                "restored");
    else if (r == -EFAULT)
        inject_set_err(err, errlen, "the injected call crashed with %s; registers restored",
                strsignal(rc->fault_sig));
    else if (r == -ESRCH)
        inject_set_err(err, errlen, "the target thread exited during the injected call");
    else
        inject_set_err(err, errlen, "remote call failed: %s", strerror(-r));
    return INJECT_FAILED;
}

int inject_ptrace(const struct method_request *req, char *err, size_t errlen)
{
    int64_t t0 = pt_now_ns();
    int timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
    int64_t deadline = t0 + (int64_t)timeout_ms * 1000000;
    pid_t pid = req->pid;
    err[0] = 0;
    if (!req->control_path || strlen(req->control_path) >= SCRATCH_DATA / 2 ||
        !req->agent_path || strlen(req->agent_path) >= SCRATCH_DATA / 2) {
        inject_set_err(err, errlen, "agent or control path missing or too long");
        return INJECT_UNTOUCHED;
    }
    struct proc_maps maps;
    int r = proc_read_maps_or_explain(pid, &maps, err, errlen);
    if (r < 0)
        return INJECT_UNTOUCHED;
    struct libc_syms ls;
    if (find_libc_syms(pid, &maps, &ls, err, errlen) < 0) {
        proc_free_maps(&maps);
        return INJECT_UNTOUCHED;
    }

    sigset_t old_mask;
    sigprocmask(SIG_BLOCK, termination_signals(), &old_mask);

    struct tracee_group g = {0};
    int status = INJECT_UNTOUCHED, chosen = -1, attempts = 0;
    char why[256] = "";
    /* safe-point search gets at most half the budget: the calls need the rest */
    int64_t search_deadline = t0 + (int64_t)timeout_ms * 500000;
    for (;;) {
        attempts++;
        /* Every thread stops within moments unless one is in an uninterruptible wait (a vfork
         * parent, disk I/O): then all the others would stay stopped until the deadline. */
        int64_t stop_by = pt_now_ns() + (int64_t)SEIZE_STOP_MS * 1000000;
        r = pt_seize_all(&g, pid, stop_by < deadline ? stop_by : deadline);
        note(req, t0, "seize+interrupt: %d (%zu threads)", r, g.n);
        if (r < 0) {
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
            goto out;
        }
        /* Every thread is stopped: its credentials cannot change until it runs again, so
         * this is the last look at them, and the one that counts (a setuid() between the
         * preflight and the seize is caught here). */
        if (req->facts && target_facts_same_identity(req->facts, err, errlen) < 0)
            goto out;
        /* the map may have changed while the threads ran */
        proc_free_maps(&maps);
        if (proc_read_maps(pid, &maps) < 0) {
            inject_set_err(err, errlen, "process %d exited", (int)pid);
            goto out;
        }
        chosen = safepoint_choose(&g, &maps, req->verbose, why, sizeof why);
        note(req, t0, "safe point: %s", chosen >= 0 ? why : "none");
        if (chosen >= 0)
            break;
        pt_release(&g);
        if (termination_pending()) {
            inject_set_err(err, errlen, "interrupted by a signal before anything ran in the target");
            goto out;
        }
        if (pt_now_ns() >= search_deadline) {
            inject_set_err(err, errlen, "no thread reached a safe point in %d attempts (%s); nothing "
                    "was run, retry later", attempts, why);
            goto out;
        }
        struct timespec pause = {0, 20 * 1000000}; /* let the threads move on */
        nanosleep(&pause, NULL);
    }

    /* every other thread runs again before the call: the call may need their locks */
    struct tracee *t = &g.t[chosen];
    for (size_t i = 0; i < g.n; i++)
        if ((int)i != chosen)
            pt_detach(&g, &g.t[i]);
    note(req, t0, "other threads resumed; calling on thread %d", (int)t->tid);

    struct remote rc;
    r = remote_begin(&rc, t, &ls.gadgets);
    if (r == -EOPNOTSUPP) {
        inject_set_err(err, errlen, "thread %d runs with an x86 shadow stack (CET), which the ptrace "
                "method cannot call into; nothing was run (use --method gdb)", (int)t->tid);
        goto out;
    }
    if (r < 0) {
        inject_set_err(err, errlen, "cannot prepare thread %d: %s", (int)t->tid, strerror(-r));
        goto out;
    }
    status = run_calls(req, &rc, &ls, deadline, t0, err, errlen);
    int rr = remote_end(&rc);
    if (rr < 0 && t->state != TRACEE_GONE) {
        status = INJECT_FAILED;
        inject_set_err(err, errlen, "could not restore thread %d: %s", (int)t->tid, strerror(-rr));
    }

out:
    pt_release(&g);
    note(req, t0, "all threads detached");
    proc_free_maps(&maps);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return status;
}
