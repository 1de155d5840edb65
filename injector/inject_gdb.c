/* inject_gdb.c — the fallback injection method: the same two calls through gdb (see method.h).
 *
 *   gdb -batch -nx -nw -p PID  (stdin /dev/null, own process group, bounded by the timeout)
 *     -iex 'set auto-solib-add off'        no symbol loading for 100s of libraries (slow attach)
 *     -ex  'sharedlibrary <libc|libdl|libpthread|libpython>'   just the symbols we need
 *     -ex  'set scheduler-locking off'     other threads run during the call (they may hold
 *                                          the locks dlopen needs; locking deadlocks: memray#966)
 *     -ex  'set unwindonsignal on'         a fault in the call is unwound, not left pending
 *     -iex 'set sysroot /proc/PID/root', -iex 'file /proc/PID/exe'   for a target with
 *                                          another root or mount namespace: its libraries are
 *                                          its own, not ours (a call into our libc's idea of
 *                                          mmap smashed its stack); gdb's default "target:"
 *                                          follows mount namespaces but not chroot.  The script
 *                                          also checks that the executable and mmap, munmap,
 *                                          dlopen, dlerror come from the very files the target
 *                                          maps (inode), else refuses (VC_WRONGLIB) before
 *                                          calling anything; and that gdb can write the
 *                                          thread's register state back (VC_REGSFAIL: gdb < 14
 *                                          on an AMX CPU cannot, and a call would leave the
 *                                          thread broken), at the places this CPU keeps it
 *                                          (VC_LAYOUT: gdb < 14 on AMD with AVX-512 reads
 *                                          the opmask and zmm at Intel's offsets, and a call
 *                                          left k0-k2 changed)
 *     -ex  'python exec(…/dev/fd/3…)'      the script (gdb's Python) from a memfd that gdb
 *                                          inherits as fd 3: no file anywhere, so a vcattach
 *                                          killed meanwhile leaves nothing behind.  It is
 *                                          gdb_inject.py, embedded at build time with the
 *                                          rules of safepoint_rules.def (gdb_script.h): picks
 *                                          a thread at a safe point by the same table as
 *                                          safepoint.c, preferring one blocked in a syscall;
 *                                          then strings written into a page mmap'd in the
 *                                          target, (void*)dlopen(page, 2), (char*)dlerror() on
 *                                          NULL, `sharedlibrary <agent>`,
 *                                          (int)vc_agent_connect(…), munmap(page).
 * No thread at a safe point: the script calls nothing and exits (gdb detaches every thread);
 * gdb is run again after a short pause, until half the timeout is spent.  Entry breakpoints
 * (memray's approach) are deliberately not used: if gdb is killed on timeout while a
 * breakpoint is inserted, the target dies of SIGTRAP at its next malloc.
 *
 * gdb's output is parsed for the script's VC_* markers and gdb's own failure messages, which
 * become the same one-line errors as the ptrace method's.  At the timeout, a call that may be
 * running is first stopped and unwound by gdb itself (a SIGURG to the chosen thread, see
 * run_gdb); gdb is killed only if it does not exit after that (the kernel then detaches it
 * from every thread; only a call still in progress at that moment is at risk). */
#include "method.h"
#include "monotonic.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gdb_script.h"
#include "xsave_layout.h"
#include "proc.h"

#define DEFAULT_TIMEOUT_MS 20000
#define OUTPUT_MAX 65536
/* After the timeout, how long gdb gets to interrupt and unwind a running call before SIGKILL. */
#define GDB_UNWIND_GRACE_MS 5000

/* gdb's absolute path from PATH, or -ENOENT. */
static int find_gdb(char *out, size_t len)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && (size_t)snprintf(out, len, "%.*s/gdb", (int)n, path) < len &&
            access(out, X_OK) == 0)
            return 0;
        path += n + (path[n] == ':');
    }
    return -ENOENT;
}

static void hex_encode(const char *s, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (; *s; s++) {
        *out++ = digits[(unsigned char)*s >> 4];
        *out++ = digits[(unsigned char)*s & 15];
    }
    *out = 0;
}

/* The lines inject_gdb.c puts before vc_gdb_script: the paths, hex-encoded (any byte is safe
 * in them), and the XSAVE component a gdb before 14 would misplace on this CPU (empty: none;
 * xsave_layout.c).  %s: agent (hex), control (hex), component (hex). */
static const char script_head_fmt[] =
    "AGENT = bytes.fromhex('%s').decode('utf-8', 'surrogateescape')\n"
    "CONTROL = bytes.fromhex('%s').decode('utf-8', 'surrogateescape')\n"
    "OLD_GDB_MISPLACES = bytes.fromhex('%s').decode()\n";

static const char *marker(const char *out, const char *m);

/* The script's fd in gdb, and how gdb runs it (as `-x file.py` would: in gdb's __main__). */
#define GDB_SCRIPT_FD 3
#define GDB_RUN_SCRIPT \
    "python exec(compile(open('/dev/fd/3').read(), 'vcattach-gdb-inject', 'exec'))"

/* Starts gdb on pid with the script (script_fd, a memfd: fd 3 in gdb), its stdout and stderr
 * into a pipe (*read_fd).  Returns gdb's pid, or -errno. */
static pid_t spawn_gdb(const char *gdb, pid_t pid, int script_fd, int *read_fd)
{
    char pidstr[32], sysroot[64] = "set width 0", exefile[64] = "set width 0";
    snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
    if (proc_other_root(pid) == 1) {
        snprintf(sysroot, sizeof sysroot, "set sysroot /proc/%d/root", (int)pid);
        snprintf(exefile, sizeof exefile, "file /proc/%d/exe", (int)pid);
    }
    const char *argv[] = {
        gdb, "-batch", "-nx", "-nw", "-p", pidstr,
        "-iex", sysroot,
        "-iex", exefile,
        "-iex", "set auto-solib-add off",
        "-iex", "set debuginfod enabled off",
        "-iex", "set pagination off",
        "-iex", "set confirm off",
        "-iex", "set width 0",
        "-ex", "set print thread-events off",
        "-ex", "set scheduler-locking off",
        "-ex", "set unwindonsignal on",
        "-ex", "handle SIGURG stop print nopass", /* our timeout's way to unwind a call */
        "-ex", "sharedlibrary libc\\.so",
        "-ex", "sharedlibrary libc-",
        "-ex", "sharedlibrary libdl",
        "-ex", "sharedlibrary libpthread",
        "-ex", "sharedlibrary libpython",
        "-ex", GDB_RUN_SCRIPT,
        NULL,
    };
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    pid_t child = fork();
    if (child < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    if (child == 0) {
        /* own process group: the operator's Ctrl-C must not reach gdb mid-call */
        setpgid(0, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* out of the way of 0-3 first (close-on-exec: only the dup2 copies survive exec) */
        int script = fcntl(script_fd, F_DUPFD_CLOEXEC, 10);
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (script < 0)
            _exit(127);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        dup2(script, GDB_SCRIPT_FD); /* lseek-free: gdb opens /dev/fd/3 anew, at offset 0 */
        execv(gdb, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    *read_fd = fds[0];
    return child;
}

/* Runs gdb once; fills out (NUL-terminated, truncated to outlen).  Returns 0 when gdb exited,
 * -ETIMEDOUT when it had to be killed, -errno when it could not run. */
static int run_gdb(const char *gdb, pid_t pid, int script_fd, int timeout_ms, char *out,
                   size_t outlen)
{
    int fd = -1;
    pid_t child = spawn_gdb(gdb, pid, script_fd, &fd);
    if (child < 0)
        return (int)child;
    size_t used = 0;
    int64_t deadline = vc_monotonic_ms() + timeout_ms;
    int timed_out = 0, interrupted = 0;
    for (;;) {
        int64_t left = deadline - vc_monotonic_ms();
        const char *chosen;
        if (left <= 0 && !interrupted && (out[used] = 0, chosen = marker(out, "VC_CHOSEN")) &&
            strchr(chosen, '\n')) { /* the whole line, tid included, has arrived */
            /* A call may be running on the chosen thread: killed now, gdb would leave it to
             * return into gdb's dummy-frame breakpoint (the target dies of it).  A SIGURG to
             * that thread makes gdb stop the call there and unwind it (unwindonsignal, and
             * `handle SIGURG stop nopass`: never passed on), then the script ends and gdb
             * detaches.  (SIGINT to gdb does not do it: gdb stops another thread and lets the
             * call finish after it has detached.)  SIGURG is ignored by default, should it
             * ever reach the target itself. */
            int tid = atoi(chosen);
            if (tid > 0)
                syscall(SYS_tgkill, pid, tid, SIGURG);
            interrupted = 1;
            deadline = vc_monotonic_ms() + GDB_UNWIND_GRACE_MS;
            continue;
        }
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(left > 100 ? 100 : left));
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break; /* EOF: gdb is exiting */
        size_t take = (size_t)n < outlen - 1 - used ? (size_t)n : outlen - 1 - used;
        memcpy(out + used, buf, take);
        used += take;
    }
    out[used] = 0;
    close(fd);
    int status;
    if (timed_out) {
        kill(child, SIGKILL); /* the kernel detaches a dead tracer from every thread */
        waitpid(child, &status, 0);
        return -ETIMEDOUT;
    }
    /* EOF seen: gdb exits promptly; still bounded */
    for (int i = 0; i < 500; i++) {
        pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child && interrupted)
            return -ETIMEDOUT; /* the call was interrupted and unwound: still a timeout */
        if (w == child)
            return WIFEXITED(status) && WEXITSTATUS(status) == 127 ? -ENOEXEC : 0;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return -ETIMEDOUT;
}

static const char *marker(const char *out, const char *m)
{
    size_t n = strlen(m);
    for (const char *p = out; (p = strstr(p, m)) != NULL; p += n)
        if ((p == out || p[-1] == '\n') && (p[n] == ' ' || p[n] == '\n' || p[n] == 0))
            return p + n + (p[n] == ' ');
    return NULL;
}

/* Copies the rest of the line at p into buf. */
static void line_at(const char *p, char *buf, size_t len)
{
    size_t n = strcspn(p, "\n");
    snprintf(buf, len, "%.*s", (int)n, p);
}

/* The first line of gdb's output that looks like an error, for messages. */
static void first_gdb_error(const char *out, char *buf, size_t len)
{
    static const char *keys[] = {"ptrace:", "No symbol", "Cannot ", "Could not",
                                 "Error", "error", "signaled", "not permitted", NULL};
    buf[0] = 0;
    for (int k = 0; keys[k]; k++) {
        const char *p = strstr(out, keys[k]);
        if (!p)
            continue;
        while (p > out && p[-1] != '\n')
            p--;
        line_at(p, buf, len);
        return;
    }
}

static int valid_path(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}


/* Step 1: everything that can be checked before gdb touches the target; finds gdb.  Returns 0,
 * or -1 with err set (nothing was done to the target). */
static int check_request(const struct method_request *req, char *gdb, size_t gdblen, char *err,
                         size_t errlen)
{
    pid_t pid = req->pid;
    if (!req->agent_path || !req->control_path || !valid_path(req->agent_path) ||
        !valid_path(req->control_path) || strlen(req->agent_path) > 4096 ||
        strlen(req->control_path) > 4096) {
        inject_set_err(err, errlen, "agent or control path missing, too long or with control characters");
        return -1;
    }
    if (find_gdb(gdb, gdblen) < 0) {
        inject_set_err(err, errlen, "gdb not found: install gdb or use --method ptrace");
        return -1;
    }
    struct proc_maps maps;
    if (proc_read_maps_or_explain(pid, &maps, err, errlen) < 0)
        return -1;
    int has_libc = proc_find_module(&maps, proc_is_libc_name) != NULL;
    proc_free_maps(&maps);
    if (!has_libc) {
        inject_set_err(err, errlen, "no libc is mapped in process %d (statically linked, or not a "
                "native process): it cannot load the agent", (int)pid);
        return -1;
    }
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Step 2: the script gdb runs, in a memfd (no file anywhere): the AGENT and CONTROL lines,
 * then vc_gdb_script.  Returns its fd (close-on-exec; spawn_gdb hands gdb a copy), or -1 with
 * err set. */
static int write_script(const struct method_request *req, char *err, size_t errlen)
{
    char misplaced[160] = "", mhex[2 * sizeof misplaced];
    xsave_foreign_to_old_gdb(misplaced, sizeof misplaced);
    hex_encode(misplaced, mhex);
    size_t alen = strlen(req->agent_path), clen = strlen(req->control_path);
    size_t cap = sizeof script_head_fmt + 2 * (alen + clen) + sizeof mhex;
    char *head = malloc(cap), *ahex = malloc(2 * alen + 1), *chex = malloc(2 * clen + 1);
    int fd = -1;
    if (!head || !ahex || !chex) {
        inject_set_err(err, errlen, "out of memory");
        goto out;
    }
    hex_encode(req->agent_path, ahex);
    hex_encode(req->control_path, chex);
    int n = snprintf(head, cap, script_head_fmt, ahex, chex, mhex);
    fd = memfd_create("vcattach-gdb-inject", MFD_CLOEXEC);
    if (fd < 0 || write_all(fd, head, (size_t)n) < 0 ||
        write_all(fd, vc_gdb_script, strlen(vc_gdb_script)) < 0) {
        inject_set_err(err, errlen, "cannot write the gdb script into a memfd: %s",
                       strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
out:
    free(head);
    free(ahex);
    free(chex);
    return fd;
}

/* Step 3: what one gdb run means (r: run_gdb's result, out: its output).  Returns the
 * inject_status with err set when not OK; *no_safe_point is set when the script found no
 * thread at a safe point and called nothing (the caller may run gdb again). */
/* Markers of the script (gdb_inject.py) that refuse before any call, each said in one line
 * made of the marker's own line: nothing was called. */
static const struct {
    const char *marker, *fmt;
} refusals[] = {
    {"VC_WRONGLIB", "gdb: refusing to call into the target: %s (its root or mount namespace "
                    "hides its own files from gdb; use --method ptrace)"},
    {"VC_LAYOUT", "gdb %s does not know this CPU's XSAVE layout; its calls would not bring the "
                  "borrowed thread's vector registers home; nothing was called; use --method "
                  "ptrace (or gdb 14 or later)"},
    {"VC_PREPFAIL", "gdb: could not prepare the call: %s"},
};

/* What gdb itself says when it cannot start on the target, and what it means (%d: the pid). */
static const struct {
    const char *needle, *fmt;
} gdb_failures[] = {
    {"ptrace: Operation not permitted", "gdb: ptrace: Operation not permitted on pid %d "
     "(another user's process? run as its user or with CAP_SYS_PTRACE; check "
     "kernel.yama.ptrace_scope)"},
    {"ptrace: No such process", "gdb: no process with pid %d"},
    {"Python scripting is not supported", "this gdb has no Python support: install Debian's "
     "gdb or use --method ptrace (pid %d)"},
};

/* gdb did not end by itself (r < 0): a timeout, or it could not be run.  An INJECT_*. */
static int gdb_did_not_finish(const char *gdb, int r, const char *out, int timeout_ms,
                              char *err, size_t errlen)
{
    int status = marker(out, "VC_CALLING") ? INJECT_FAILED : INJECT_UNTOUCHED;
    if (r == -ETIMEDOUT && strstr(out, "GDB has restored the context")) {
        inject_set_err(err, errlen, "the call into the target did not return within the timeout "
                       "(%d ms); gdb unwound it (registers restored) and detached", timeout_ms);
        return status;
    }
    if (r == -ETIMEDOUT) {
        inject_set_err(err, errlen, "gdb did not finish within %d ms (killed; the kernel "
                       "detached it)%s", timeout_ms,
                       status == INJECT_FAILED ? " during the call" : "");
        return status;
    }
    inject_set_err(err, errlen, "cannot run %s: %s", gdb, strerror(-r));
    return INJECT_UNTOUCHED;
}

/* The calls ran: the agent connected, dlopen said why not, or a call failed.  An INJECT_*,
 * or -1 when the output holds none of these. */
static int call_outcome(const struct method_request *req, const char *out, char *err,
                        size_t errlen)
{
    char line[512];
    const char *p;
    if ((p = marker(out, "VC_CONNECT"))) {
        int rc = atoi(p);
        if (rc)
            inject_set_err(err, errlen, "vc_agent_connect(%.*s) failed in the target: %d (%s)",
                           (int)strcspn(req->control_path, "#"), req->control_path, rc,
                           rc < 0 ? strerror(-rc) : "error");
        return rc == 0 ? INJECT_OK : INJECT_FAILED;
    }
    if ((p = marker(out, "VC_DLERROR"))) {
        line_at(p, line, sizeof line);
        inject_set_err(err, errlen, "dlopen(%s) failed in the target: %s", req->agent_path,
                       line[0] ? line : "(no dlerror text)");
        return INJECT_FAILED;
    }
    if ((p = marker(out, "VC_CALLFAIL"))) {
        line_at(p, line, sizeof line);
        const char *sig = strstr(out, "received signal ");
        char signame[64] = "a signal";
        if (sig)
            sscanf(sig + 16, "%63[A-Z0-9]", signame);
        if (strstr(line, "signaled while in a function called from GDB"))
            inject_set_err(err, errlen, "the injected call crashed with %s; gdb restored the "
                           "thread (%.*s)", signame, (int)strcspn(line, ":"), line);
        else
            inject_set_err(err, errlen, "gdb: the call failed: %s", line);
        return INJECT_FAILED;
    }
    return -1;
}

/* The script refused before any call, or gdb could not start.  INJECT_UNTOUCHED with err, or
 * -1 when the output says neither. */
static int refused_before_calling(const struct method_request *req, const char *out,
                                  int *no_safe_point, char *err, size_t errlen)
{
    char line[512];
    const char *p;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        if ((p = marker(out, refusals[i].marker))) {
            line_at(p, line, sizeof line);
            inject_set_err(err, errlen, refusals[i].fmt, line);
            return INJECT_UNTOUCHED;
        }
    if ((p = marker(out, "VC_REGSFAIL"))) {
        line_at(p, line, sizeof line);
        inject_set_err(err, errlen, "gdb cannot write the registers of pid %d (%s)%s; nothing "
                       "was called; use --method ptrace", (int)req->pid, line,
                       strstr(line, "extended state") ? ": a gdb older than 14 on a CPU whose "
                       "register state it does not know (AMX)" : "");
        return INJECT_UNTOUCHED;
    }
    if (marker(out, "VC_UNSAFE")) {
        *no_safe_point = 1;
        inject_set_err(err, errlen, "no thread reached a safe point");
        return INJECT_UNTOUCHED;
    }
    for (size_t i = 0; i < sizeof gdb_failures / sizeof gdb_failures[0]; i++)
        if (strstr(out, gdb_failures[i].needle)) {
            inject_set_err(err, errlen, gdb_failures[i].fmt, (int)req->pid);
            return INJECT_UNTOUCHED;
        }
    return -1;
}

static int interpret_run(const struct method_request *req, const char *gdb, int r,
                         const char *out, int timeout_ms, int *no_safe_point, char *err,
                         size_t errlen)
{
    *no_safe_point = 0;
    if (r < 0)
        return gdb_did_not_finish(gdb, r, out, timeout_ms, err, errlen);
    int status = call_outcome(req, out, err, errlen);
    if (status < 0)
        status = refused_before_calling(req, out, no_safe_point, err, errlen);
    if (status >= 0)
        return status;
    char gerr[512];
    first_gdb_error(out, gerr, sizeof gerr);
    if (marker(out, "VC_CALLING")) {
        inject_set_err(err, errlen, "gdb stopped during the call: %s",
                       gerr[0] ? gerr : "no output");
        return INJECT_FAILED;
    }
    inject_set_err(err, errlen, "gdb failed before the call: %s",
                   gerr[0] ? gerr : "no recognizable output (run with -v)");
    return INJECT_UNTOUCHED;
}

/* Step 4: gdb runs until one run reaches a verdict; a run that found no thread at a safe point
 * is repeated after a short pause until half the timeout is spent.  Termination signals wait
 * until gdb has detached (see the top comment).  The timeout counts from t0. */
static int run_attempts(const struct method_request *req, const char *gdb, int script_fd,
                        int64_t t0, char *out, char *err, size_t errlen)
{
    int timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
    int64_t deadline = t0 + timeout_ms, search_until = t0 + timeout_ms / 2;
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    int status;
    for (int attempt = 1;; attempt++) {
        int64_t left = deadline - vc_monotonic_ms();
        int r = left > 0 ? run_gdb(gdb, req->pid, script_fd, (int)left, out, OUTPUT_MAX)
                         : -ETIMEDOUT;
        if (req->verbose)
            fprintf(stderr, "vcattach: gdb attempt %d (%d):\n%s", attempt, r, out);
        int no_safe_point;
        status = interpret_run(req, gdb, r, out, timeout_ms, &no_safe_point, err, errlen);
        if (!no_safe_point)
            break;
        if (vc_monotonic_ms() >= search_until) {
            inject_set_err(err, errlen, "no thread reached a safe point in %d gdb attempts; nothing "
                    "was run, retry later", attempt);
            break;
        }
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return status;
}

int inject_gdb(const struct method_request *req, char *err, size_t errlen)
{
    int64_t t0 = vc_monotonic_ms();
    char gdb[4096];
    err[0] = 0;
    if (check_request(req, gdb, sizeof gdb, err, errlen) < 0)
        return INJECT_UNTOUCHED;
    int script_fd = -1, status = INJECT_UNTOUCHED;
    char *out = malloc(OUTPUT_MAX);
    if (!out)
        inject_set_err(err, errlen, "out of memory");
    else if ((script_fd = write_script(req, err, errlen)) >= 0)
        status = run_attempts(req, gdb, script_fd, t0, out, err, errlen);
    if (script_fd >= 0)
        close(script_fd);
    free(out);
    return status;
}
