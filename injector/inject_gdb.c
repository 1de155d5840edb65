/* inject_gdb.c — the fallback injection method: the same two calls through gdb (see inject.h).
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
 *                                          follows mount namespaces but not chroot
 *     -x   script.py (gdb's Python)        picks a thread at a safe point by unwinding every
 *                                          thread (same rules as safepoint.c: nothing in the
 *                                          loader, malloc, stdio, lock waits, fork, exit, nss),
 *                                          preferring one blocked in a syscall; checks that
 *                                          the executable and mmap, munmap, dlopen, dlerror
 *                                          come from the very files the target maps (inode),
 *                                          else refuses (VC_WRONGLIB) before calling anything;
 *                                          then
 *                                          strings written into a page mmap'd in the target,
 *                                          (void*)dlopen(page, 2), (char*)dlerror() on NULL,
 *                                          `sharedlibrary <agent>`, (int)vc_agent_connect(…),
 *                                          munmap(page).
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
#include "inject.h"

#include <errno.h>
#include <fcntl.h>
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

#include "proc.h"

#define DEFAULT_TIMEOUT_MS 20000
#define OUTPUT_MAX 65536
/* After the timeout, how long gdb gets to interrupt and unwind a running call before SIGKILL. */
#define GDB_UNWIND_GRACE_MS 5000

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* The Python script gdb runs after attaching.  %s: agent (hex), control (hex). */
static const char script_fmt[] =
    "import gdb, os, re\n"
    "AGENT = bytes.fromhex('%s').decode('utf-8', 'surrogateescape')\n"
    "CONTROL = bytes.fromhex('%s').decode('utf-8', 'surrogateescape')\n"
    "UNSAFE = re.compile(r'^(?:__GI_+)?(?:malloc|__libc_malloc|_int_|calloc|__libc_calloc|"
    "realloc|__libc_realloc|free(?:$|@)|__libc_free|cfree|memalign|__libc_memalign|"
    "posix_memalign|aligned_alloc|valloc|pvalloc|tcache_|sysmalloc|malloc_consolidate|_IO_|"
    "__lll_lock_wait|__lll_lock_wake|pthread_mutex_lock|__pthread_mutex_lock|"
    "___pthread_mutex_lock|__pthread_mutex_cond_lock|pthread_rwlock_|__pthread_rwlock_|"
    "fork|__libc_fork|_Fork|__run_fork_handlers|__register_atfork|pthread_create|"
    "__pthread_create|exit(?:$|@)|_exit|__run_exit_handlers|atexit|__cxa_atexit|"
    "__cxa_finalize|__new_exitfn|dl_iterate_phdr|__dl_iterate_phdr|_dl_|dlopen|dlclose|dlsym|"
    "dlvsym|dlerror|___dlopen|__libc_dlopen|__libc_dlsym|__libc_dlclose|getaddrinfo|"
    "gethostby|getpw|getgr|__nss_|_nss_|nss_|getnameinfo|fflush|fwrite|fputs|fopen|fclose|"
    "__vfprintf)')\n"
    /* futex clock_nanosleep nanosleep select pselect6 poll ppoll epoll_wait epoll_pwait read
     * accept accept4 recvfrom recvmsg wait4 waitid pause rt_sigtimedwait rt_sigsuspend
     * restart_syscall */
    "IDLE = {202, 230, 35, 23, 270, 7, 271, 232, 281, 0, 43, 288, 45, 47, 61, 247, 34, 128, 130, 219}\n"
    "def bre(s):\n"
    "    return re.sub(r'([.*\\[\\]^$\\\\])', r'\\\\\\1', s)\n"
    "def syscall_nr(th):\n"
    "    th.switch()\n"
    "    try:\n"
    "        nr = int(gdb.parse_and_eval('$orig_rax'))\n"
    "    except (gdb.error, ValueError):\n"
    "        return -1\n"
    "    return nr - (1 << 64) if nr >= 1 << 63 else nr\n"
    "def judge(th, nr):\n"
    "    th.switch()\n"
    "    try:\n"
    "        f = gdb.newest_frame()\n"
    "    except gdb.error as e:\n"
    "        return -1, 'cannot unwind: %%s' %% e\n"
    "    n, top = 0, '?'\n"
    "    while f is not None and n < 512:\n"
    "        pc = f.pc()\n"
    "        if pc == 0:\n"
    "            break\n"
    "        name = f.name() or ''\n"
    "        lib = os.path.basename(gdb.solib_name(pc if n == 0 else pc - 1) or '')\n"
    "        if n == 0:\n"
    "            top = '%%s in %%s' %% (name or hex(pc), lib or 'the executable')\n"
    "        if lib.startswith('ld-linux') or lib.startswith('ld-musl') or lib.startswith('ld.so'):\n"
    "            return -1, 'in the dynamic loader (%%s)' %% (name or hex(pc))\n"
    "        if UNSAFE.match(name):\n"
    "            return -1, 'in %%s' %% name\n"
    "        try:\n"
    "            f = f.older()\n"
    "        except gdb.error:\n"
    "            break\n"
    "        n += 1\n"
    "    if nr >= 0:\n"
    "        return 0, 'blocked in syscall %%d (%%s)' %% (nr, top)\n"
    "    return 0, 'running (%%s)' %% top\n"
    /* Every function we call must come from the file the target maps at its address: gdb
     * reading another libc than the target's (a chroot, a container) computes addresses that
     * land in the target's libc at the wrong offsets.  Compared by inode (maps vs stat of the
     * file gdb read; "target:" names are the target's paths). */
    "def wrong_library():\n"
    "    pid = gdb.selected_inferior().pid\n"
    "    maps = []\n"
    "    with open('/proc/{}/maps'.format(pid)) as f:\n"
    "        for line in f:\n"
    "            p = line.split(None, 5)\n"
    "            if len(p) >= 5:\n"
    "                lo, hi = (int(x, 16) for x in p[0].split('-'))\n"
    "                maps.append((lo, hi, int(p[4])))\n"
    "    exe = gdb.current_progspace().filename or ''\n"
    "    try:\n"
    "        if os.stat(exe).st_ino != os.stat('/proc/{}/exe'.format(pid)).st_ino:\n"
    "            return 'gdb read the executable from {}, not the target\\'s'.format(exe)\n"
    "    except OSError as e:\n"
    "        return 'cannot check the executable ({}): {}'.format(exe, e)\n"
    "    for name in ('mmap', 'munmap', 'dlopen', 'dlerror'):\n"
    "        try:\n"
    "            addr = int(gdb.parse_and_eval('(unsigned long)&' + name))\n"
    "        except gdb.error as e:\n"
    "            return '{} not found: {}'.format(name, str(e).replace('\\n', ' '))\n"
    "        path = gdb.solib_name(addr) or gdb.current_progspace().filename or ''\n"
    "        if path.startswith('target:'):\n"
    "            path = '/proc/{}/root{}'.format(pid, path[7:])\n"
    "        ino = [m[2] for m in maps if m[0] <= addr < m[1]]\n"
    "        try:\n"
    "            mine = os.stat(path).st_ino\n"
    "        except OSError as e:\n"
    "            return 'cannot check {} ({}): {}'.format(name, path, e)\n"
    "        if not ino or ino[0] != mine:\n"
    "            return 'gdb read {} from {}, which is not the file the target maps at {:#x}'" \
    ".format(name, path, addr)\n"
    "    return None\n"
    /* registers first (cheap), then unwind in order of preference, stopping at the first
     * clean stack: the best choice, found with as little unwinding as possible */
    "def main():\n"
    "    order = []\n"
    "    for th in gdb.selected_inferior().threads():\n"
    "        nr = syscall_nr(th)\n"
    "        order.append((-(3 if nr in IDLE else (2 if nr >= 0 else 1)), th.num, th, nr))\n"
    "    order.sort(key=lambda c: (c[0], c[1]))\n"
    "    chosen = None\n"
    "    for _, _, th, nr in order:\n"
    "        try:\n"
    "            s, why = judge(th, nr)\n"
    "        except Exception as e:\n"
    "            s, why = -1, 'cannot inspect: %%s' %% e\n"
    "        print('VC_THREAD %%d %%s %%s' %% (th.ptid[1], 'unsafe' if s < 0 else 'safe', why))\n"
    "        if s >= 0:\n"
    "            chosen = (th, why)\n"
    "            break\n"
    "    if chosen is None:\n"
    "        print('VC_UNSAFE')\n"
    "        return\n"
    "    th = chosen[0]\n"
    "    th.switch()\n"
    "    wrong = wrong_library()\n"
    "    if wrong:\n"
    "        print('VC_WRONGLIB ' + wrong)\n"
    "        return\n"
    "    print('VC_CHOSEN %%d %%s' %% (th.ptid[1], chosen[1]))\n"
    /* The strings go into a page we mmap in the target and write ourselves: string literals
     * in a gdb call would make gdb call malloc in the target (and leak there). */
    "    data = AGENT.encode('utf-8', 'surrogateescape') + b'\\0'\n"
    "    ctl = CONTROL.encode('utf-8', 'surrogateescape') + b'\\0'\n"
    "    size = 4096 * ((len(data) + len(ctl)) // 4096 + 1)\n"
    "    try:\n"
    "        buf = int(gdb.parse_and_eval('(unsigned long)(void*)mmap(0, %%d, 3, 0x22, -1, 0)' %% size))\n"
    "    except gdb.error as e:\n"
    "        print('VC_PREPFAIL mmap: %%s' %% str(e).replace('\\n', ' '))\n"
    "        return\n"
    "    if buf == 0 or buf >= (1 << 64) - 4096:\n"
    "        print('VC_PREPFAIL mmap failed in the target')\n"
    "        return\n"
    "    try:\n"
    "        inf = gdb.selected_inferior()\n"
    "        inf.write_memory(buf, data)\n"
    "        inf.write_memory(buf + len(data), ctl)\n"
    "        calls(buf, buf + len(data))\n"
    "    finally:\n"
    "        try:\n"
    "            gdb.parse_and_eval('(int)munmap(%%d, %%d)' %% (buf, size))\n"
    "        except gdb.error:\n"
    "            pass\n"
    "def calls(agent, control):\n"
    "    print('VC_CALLING', flush=True)\n"
    "    try:\n"
    "        h = int(gdb.parse_and_eval('(unsigned long)(void*)dlopen((char*)%%d, 2)' %% agent))\n"
    "    except gdb.error as e:\n"
    "        print('VC_CALLFAIL dlopen: %%s' %% str(e).replace('\\n', ' '))\n"
    "        return\n"
    "    print('VC_DLOPEN %%#x' %% h)\n"
    "    if h == 0:\n"
    "        try:\n"
    "            e = gdb.parse_and_eval('(char*)dlerror()')\n"
    "            print('VC_DLERROR %%s' %% (e.string() if int(e) else ''))\n"
    "        except gdb.error as e:\n"
    "            print('VC_DLERROR (dlerror failed: %%s)' %% e)\n"
    "        return\n"
    "    gdb.execute('sharedlibrary ' + bre(os.path.basename(AGENT)), to_string=True)\n"
    "    try:\n"
    "        rc = int(gdb.parse_and_eval('(int)vc_agent_connect((char*)%%d)' %% control))\n"
    "    except gdb.error as e:\n"
    "        print('VC_CALLFAIL vc_agent_connect: %%s' %% str(e).replace('\\n', ' '))\n"
    "        return\n"
    "    print('VC_CONNECT %%d' %% rc)\n"
    "main()\n";

static const char *marker(const char *out, const char *m);

/* Runs gdb once; fills out (NUL-terminated, truncated to outlen).  Returns 0 when gdb exited,
 * -ETIMEDOUT when it had to be killed, -errno when it could not run. */
static int run_gdb(const char *gdb, pid_t pid, const char *script, int timeout_ms, char *out,
                   size_t outlen)
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
        "-x", script,
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
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execv(gdb, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    int64_t deadline = now_ms() + timeout_ms;
    int timed_out = 0, interrupted = 0;
    for (;;) {
        int64_t left = deadline - now_ms();
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
            deadline = now_ms() + GDB_UNWIND_GRACE_MS;
            continue;
        }
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int r = poll(&p, 1, (int)(left > 100 ? 100 : left));
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n <= 0)
            break; /* EOF: gdb is exiting */
        size_t take = (size_t)n < outlen - 1 - used ? (size_t)n : outlen - 1 - used;
        memcpy(out + used, buf, take);
        used += take;
    }
    out[used] = 0;
    close(fds[0]);
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

static int is_libc_name(const char *b)
{
    return strcmp(b, "libc.so.6") == 0 || (strncmp(b, "libc-2.", 7) == 0 && strstr(b, ".so")) ||
           strncmp(b, "ld-musl-", 8) == 0 || strncmp(b, "libc.musl-", 10) == 0;
}

static int valid_path(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

int inject_gdb(const struct inject_request *req, char *err, size_t errlen)
{
    pid_t pid = req->pid;
    int timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
    int64_t t0 = now_ms(), deadline = t0 + timeout_ms, search_until = t0 + timeout_ms / 2;
    err[0] = 0;
    if (!req->agent_path || !req->control_path || !valid_path(req->agent_path) ||
        !valid_path(req->control_path) || strlen(req->agent_path) > 4096 ||
        strlen(req->control_path) > 4096) {
        set_err(err, errlen, "agent or control path missing, too long or with control characters");
        return INJECT_UNTOUCHED;
    }
    char gdb[4096];
    if (find_gdb(gdb, sizeof gdb) < 0) {
        set_err(err, errlen, "gdb not found: install gdb or use --method ptrace");
        return INJECT_UNTOUCHED;
    }
    if (proc_check_injectable(pid, req->agent_path, err, errlen) < 0)
        return INJECT_UNTOUCHED;
    struct proc_maps maps;
    int mr = proc_read_maps_or_explain(pid, &maps, err, errlen);
    if (mr < 0)
        return INJECT_UNTOUCHED;
    int has_libc = proc_find_module(&maps, is_libc_name) != NULL;
    proc_free_maps(&maps);
    if (!has_libc) {
        set_err(err, errlen, "no libc is mapped in process %d (statically linked, or not a "
                "native process): it cannot load the agent", (int)pid);
        return INJECT_UNTOUCHED;
    }

    size_t cap = sizeof script_fmt + 2 * (strlen(req->agent_path) + strlen(req->control_path));
    char *script = malloc(cap), *ahex = malloc(2 * strlen(req->agent_path) + 1),
         *chex = malloc(2 * strlen(req->control_path) + 1), *out = malloc(OUTPUT_MAX);
    char script_path[] = "/tmp/vcattach-gdb-XXXXXX.py";
    int status = INJECT_UNTOUCHED, fd = -1, script_made = 0;
    if (!script || !ahex || !chex || !out) {
        set_err(err, errlen, "out of memory");
        goto done;
    }
    hex_encode(req->agent_path, ahex);
    hex_encode(req->control_path, chex);
    int n = snprintf(script, cap, script_fmt, ahex, chex);
    fd = mkstemps(script_path, 3);
    if (fd >= 0)
        script_made = 1;
    if (fd < 0 || write(fd, script, (size_t)n) != n) {
        set_err(err, errlen, "cannot write the gdb script in /tmp: %s", strerror(errno));
        goto done;
    }
    close(fd);
    fd = -1;

    /* termination signals wait until gdb has detached (see the top comment) */
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    for (int attempt = 1;; attempt++) {
        int64_t left = deadline - now_ms();
        int r = left > 0 ? run_gdb(gdb, pid, script_path, (int)left, out, OUTPUT_MAX) : -ETIMEDOUT;
        if (req->verbose)
            fprintf(stderr, "vcattach: gdb attempt %d (%d):\n%s", attempt, r, out);
        char line[512], gerr[512];
        const char *p;
        first_gdb_error(out, gerr, sizeof gerr);
        if (r == -ETIMEDOUT && strstr(out, "GDB has restored the context")) {
            status = marker(out, "VC_CALLING") ? INJECT_FAILED : INJECT_UNTOUCHED;
            set_err(err, errlen, "the call into the target did not return within the timeout "
                    "(%d ms); gdb unwound it (registers restored) and detached", timeout_ms);
        } else if (r == -ETIMEDOUT) {
            status = marker(out, "VC_CALLING") ? INJECT_FAILED : INJECT_UNTOUCHED;
            set_err(err, errlen, "gdb did not finish within %d ms (killed; the kernel detached "
                    "it)%s", timeout_ms, status == INJECT_FAILED ? " during the call" : "");
        } else if (r < 0) {
            set_err(err, errlen, "cannot run %s: %s", gdb, strerror(-r));
        } else if ((p = marker(out, "VC_CONNECT"))) {
            int rc = atoi(p);
            status = rc == 0 ? INJECT_OK : INJECT_FAILED;
            if (rc)
                set_err(err, errlen, "vc_agent_connect(%s) failed in the target: %d (%s)",
                        req->control_path, rc, rc < 0 ? strerror(-rc) : "error");
        } else if ((p = marker(out, "VC_DLERROR"))) {
            line_at(p, line, sizeof line);
            status = INJECT_FAILED;
            set_err(err, errlen, "dlopen(%s) failed in the target: %s", req->agent_path,
                    line[0] ? line : "(no dlerror text)");
        } else if ((p = marker(out, "VC_CALLFAIL"))) {
            line_at(p, line, sizeof line);
            status = INJECT_FAILED;
            const char *sig = strstr(out, "received signal ");
            char signame[64] = "a signal";
            if (sig)
                sscanf(sig + 16, "%63[A-Z0-9]", signame);
            if (strstr(line, "signaled while in a function called from GDB"))
                set_err(err, errlen, "the injected call crashed with %s; gdb restored the "
                        "thread (%.*s)", signame, (int)strcspn(line, ":"), line);
            else
                set_err(err, errlen, "gdb: the call failed: %s", line);
        } else if ((p = marker(out, "VC_WRONGLIB"))) {
            line_at(p, line, sizeof line);
            set_err(err, errlen, "gdb: refusing to call into the target: %s (its root or "
                    "mount namespace hides its own files from gdb; use --method ptrace)", line);
        } else if ((p = marker(out, "VC_PREPFAIL"))) {
            line_at(p, line, sizeof line);
            set_err(err, errlen, "gdb: could not prepare the call: %s", line);
        } else if (marker(out, "VC_UNSAFE")) {
            if (now_ms() < search_until) {
                struct timespec ts = {0, 50 * 1000000};
                nanosleep(&ts, NULL);
                continue;
            }
            set_err(err, errlen, "no thread reached a safe point in %d gdb attempts; nothing "
                    "was run, retry later", attempt);
        } else if (strstr(out, "ptrace: Operation not permitted")) {
            set_err(err, errlen, "gdb: ptrace: Operation not permitted on pid %d (another "
                    "user's process? run as its user or with CAP_SYS_PTRACE; check "
                    "kernel.yama.ptrace_scope)", (int)pid);
        } else if (strstr(out, "ptrace: No such process")) {
            set_err(err, errlen, "gdb: no process with pid %d", (int)pid);
        } else if (strstr(out, "Python scripting is not supported")) {
            set_err(err, errlen, "this gdb has no Python support: install Debian's gdb or use "
                    "--method ptrace");
        } else if (marker(out, "VC_CALLING")) {
            status = INJECT_FAILED;
            set_err(err, errlen, "gdb stopped during the call: %s", gerr[0] ? gerr : "no output");
        } else {
            set_err(err, errlen, "gdb failed before the call: %s",
                    gerr[0] ? gerr : "no recognizable output (run with -v)");
        }
        break;
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
done:
    if (fd >= 0)
        close(fd);
    if (script_made) /* after a failed mkstemps the name may be someone else's file */
        unlink(script_path);
    free(script);
    free(ahex);
    free(chex);
    free(out);
    return status;
}
