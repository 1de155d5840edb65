/* rexec_script.c — the remote-exec script in the target's /tmp (see rexec_script.h); internal
 * to the injector: inject() (inject.c) writes it around the remote-exec method.
 *
 * The paths go into the script as bytes literals with every byte outside [A-Za-z0-9/._-]
 * written as \xNN, so no file name can end the literal or inject code into what the target
 * runs.  The script is only what the agent needs: ctypes.CDLL (dlopen with RTLD_NOW, the same
 * handle the ptrace method gets) and one call that returns at once; ctypes releases the GIL
 * around it and the agent thread does everything else.
 *
 * Every file operation in the target's /tmp runs in a child as the target's user, in its
 * mount namespace and root (as_target_run, vcinject.h part 4): see rexec_script.h for why.
 * The parent renders the script and picks the name; the child checks /tmp, sweeps, creates.
 */
#include "rexec_script.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "vcinject.h"
#include "test_seam.h"

#define SCRIPT_NAME "attach.py"
#define DIR_PREFIX ".vcattach-rx-"
/* A live vcattach keeps its script for the request's timeout, a cancel's grace and the
 * script's run (inject_remote_exec.c: about 12 s); older ones are a killed vcattach's. */
#define STALE_AFTER_S 30
/* The helper child's bound (SECURITY.md §3: helper processes in the target's filesystem). */
#define HELPER_TIMEOUT_MS 10000

/* Appends path as a Python bytes literal.  Returns 0, or -1 when it does not fit. */
static int put_bytes_literal(char *buf, size_t cap, size_t *used, const char *path)
{
    static const char hex[] = "0123456789abcdef";
    if (*used + 2 >= cap)
        return -1;
    buf[(*used)++] = 'b';
    buf[(*used)++] = '\'';
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '/' || *p == '.' || *p == '_' ||
                    *p == '-';
        if (*used + 5 >= cap)
            return -1;
        if (plain) {
            buf[(*used)++] = (char)*p;
        } else {
            buf[(*used)++] = '\\';
            buf[(*used)++] = 'x';
            buf[(*used)++] = hex[*p >> 4];
            buf[(*used)++] = hex[*p & 15];
        }
    }
    buf[(*used)++] = '\'';
    buf[*used] = '\0';
    return 0;
}

/* The script.  A failed load is one line on the target's stderr, never an exception: a
 * request left posted (inject_remote_exec.c: one that could not be withdrawn for certain) may
 * be taken after vcattach removed its copy of the agent, in whatever frame of the target, and
 * must then not raise there.  (The agent's file may be gone in a good attach too: a copy the
 * target has loaded is removed, and dlopen finds it by its name.) */
static int render(char *buf, size_t cap, const char *agent, const char *control)
{
    size_t used = 0;
    int n = snprintf(buf, cap, "# vcattach: loads its tracing agent (PEP 768 remote exec); "
                               "vcattach removes this file\n"
                               "import ctypes, os, sys\n"
                               "try:\n"
                               "    agent = ctypes.CDLL(os.fsdecode(");
    if (n < 0 || (size_t)n >= cap)
        return -1;
    used = (size_t)n;
    if (put_bytes_literal(buf, cap, &used, agent) < 0)
        return -1;
    n = snprintf(buf + used, cap - used,
                 "))\n"
                 "except OSError as e:\n"
                 "    print('vcattach: its agent did not load:', e, file=sys.stderr)\n"
                 "else:\n"
                 "    agent.vc_agent_connect(");
    if (n < 0 || (size_t)n >= cap - used)
        return -1;
    used += (size_t)n;
    if (put_bytes_literal(buf, cap, &used, control) < 0)
        return -1;
    n = snprintf(buf + used, cap - used, ")\n");
    return n < 0 || (size_t)n >= cap - used ? -1 : (int)(used + (size_t)n);
}

/* 1 when fd and dir_fd are on the same mount (the mount id, statx; the device where the kernel
 * has no mount id): a name in /tmp that is a mount point is none of ours. */
static int same_mount(int dir_fd, int fd)
{
    struct statx a, b;
    if (statx(dir_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &a) < 0 ||
        statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &b) < 0)
        return 0;
    if ((a.stx_mask & b.stx_mask & STATX_MNT_ID) && a.stx_mnt_id != b.stx_mnt_id)
        return 0;
    return a.stx_dev_major == b.stx_dev_major && a.stx_dev_minor == b.stx_dev_minor;
}

/* In the helper: our directory `name` in tmp_fd, opened without following a link or crossing
 * a mount, owned by us (the target's user).  The fd, or -1. */
static int open_ours(int tmp_fd, const char *name)
{
    int fd = openat(tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_uid != geteuid() || !same_mount(tmp_fd, fd))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* In the helper: the directory `name` in tmp_fd, if a killed vcattach left it: named by us
 * with a creator pid that no longer exists, the target user's, on /tmp's own mount (a mount
 * point is not swept into), and older than any live script.  Its script is unlinked inside
 * the opened directory, then the directory itself (rmdir removes only an empty one,
 * whatever was swapped in meanwhile).  Best effort. */
static void sweep_one(int tmp_fd, const char *name, pid_t self)
{
    const char *p = name + strlen(DIR_PREFIX);
    char *end;
    long creator = strtol(p, &end, 10);
    if (end == p || *end != '-' || strlen(end + 1) != 16 || creator <= 0 ||
        creator == (long)self || kill((pid_t)creator, 0) == 0 || errno != ESRCH)
        return;
    int fd = open_ours(tmp_fd, name);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && time(NULL) - st.st_mtime >= STALE_AFTER_S) {
        unlinkat(fd, SCRIPT_NAME, 0);
        unlinkat(tmp_fd, name, AT_REMOVEDIR);
    }
    close(fd);
}

/* In the helper: removes what killed vcattaches left in this /tmp (a vcattach killed between
 * writing its script and removing it cannot clean up after itself). */
static void sweep_stale(int tmp_fd, pid_t self)
{
    int fd = dup(tmp_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d)) != NULL && seen++ < 100000)
        if (strncmp(e->d_name, DIR_PREFIX, strlen(DIR_PREFIX)) == 0)
            sweep_one(tmp_fd, e->d_name, self);
    closedir(d);
}

/* The uid and gid the target opens files with (fsuid, fsgid: the 4th field of Uid:/Gid:). */
static int target_fs_ids(pid_t pid, uid_t *uid, gid_t *gid)
{
    struct proc_status st;
    if (proc_status_read(pid, 0, &st) < 0)
        return -1;
    *uid = st.uid[3];
    *gid = st.gid[3];
    return 0;
}

/* Uid 0 of the target's user namespace as ours sees it (/proc/PID/uid_map: "inside outside
 * count" lines, outside in our namespace): the owner a root-owned /tmp has there.  0, or -1
 * when that namespace maps no root. */
static int target_root_uid(pid_t pid, uid_t *root)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    unsigned long in, out, count;
    int found = 0;
    while (!found && fscanf(f, "%lu %lu %lu", &in, &out, &count) == 3)
        if (in == 0 && count > 0) {
            *root = (uid_t)out;
            found = 1;
        }
    fclose(f);
    return found ? 0 : -1;
}

/* What the helper is asked to do. */
struct rx_job {
    int remove;                /* 0: check /tmp, sweep, create; 1: remove dir */
    const char *dir;
    const char *text;
    size_t len;
    uid_t tmp_owner;           /* root of the target's user namespace, as we see it */
    pid_t self;                /* the vcattach (its pid names the directory) */
};

/* Test-only fault injection (test_seam.h, not in the product): VCATTACH_TEST_RX_PAUSE_MS=N (tests/system/test_security_sock.py) makes
 * the helper sleep N ms (at most 5 s) right after creating the directory, so that a test can
 * mount something over it in that window.  Unset, it does nothing. */
static void test_pause(void)
{
    const char *v = VC_SEAM(RX_PAUSE_MS);
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms > 0) {
        struct timespec ts = {.tv_sec = (ms > 5000 ? 5000 : ms) / 1000,
                              .tv_nsec = ((ms > 5000 ? 5000 : ms) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* In the helper: the script in a fresh directory of /tmp.  0, or 1 with the reason in out. */
static int create_in_child(const struct rx_job *j, int tmp_fd, char *out, size_t cap)
{
    struct stat st;
    if (fstat(tmp_fd, &st) < 0 || st.st_uid != j->tmp_owner || !(st.st_mode & S_ISVTX)) {
        snprintf(out, cap, "the target's /tmp is not root-owned and sticky: not used");
        return 1;
    }
    sweep_stale(tmp_fd, j->self);
    /* 0711 (our umask is 022): the target reaches the script by its path; nobody lists the
     * directory.  Fresh: an existing name is never reused. */
    if (mkdirat(tmp_fd, j->dir, 0711) < 0) {
        snprintf(out, cap, "cannot create /tmp/%s: %s", j->dir, strerror(errno));
        return 1;
    }
    test_pause();
    int dir_fd = open_ours(tmp_fd, j->dir);
    if (dir_fd < 0) {
        snprintf(out, cap, "/tmp/%s is not the directory vcattach created", j->dir);
        unlinkat(tmp_fd, j->dir, AT_REMOVEDIR);
        return 1;
    }
    /* Readable by the target's user only (0400, the helper's own file): it holds the
     * session's token (control_client.h). */
    int fd = openat(dir_fd, SCRIPT_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0400);
    int ok = fd >= 0 && write(fd, j->text, j->len) == (ssize_t)j->len;
    int e = errno;
    if (fd >= 0 && close(fd) < 0)
        ok = 0;
    if (!ok) {
        snprintf(out, cap, "cannot write the script: %s", strerror(e));
        unlinkat(dir_fd, SCRIPT_NAME, 0);
        unlinkat(tmp_fd, j->dir, AT_REMOVEDIR);
    }
    close(dir_fd);
    return ok ? 0 : 1;
}

static int rx_in_child(void *arg, char *out, size_t cap)
{
    const struct rx_job *j = arg;
    int tmp_fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp_fd < 0) {
        snprintf(out, cap, "cannot open the target's /tmp: %s", strerror(errno));
        return 1;
    }
    int rc = 0;
    if (!j->remove) {
        rc = create_in_child(j, tmp_fd, out, cap);
    } else {
        int dir_fd = open_ours(tmp_fd, j->dir);
        if (dir_fd >= 0) {
            unlinkat(dir_fd, SCRIPT_NAME, 0);
            close(dir_fd);
            unlinkat(tmp_fd, j->dir, AT_REMOVEDIR);
        }
    }
    close(tmp_fd);
    return rc;
}

void rexec_script_remove(struct rexec_script *s)
{
    if (s->dir[0]) {
        struct rx_job j = {.remove = 1, .dir = s->dir, .self = getpid()};
        char out[AS_TARGET_OUT_MAX], err[256];
        /* Best effort: what a failure leaves is swept by the next run (rexec_script.h). */
        as_target_run(s->pid, s->uid, s->gid, rx_in_child, &j, out, sizeof out,
                      HELPER_TIMEOUT_MS, err, sizeof err);
    }
    s->dir[0] = s->path[0] = '\0';
}

int rexec_script_create(pid_t pid, const char *agent_path, const char *control_path,
                        struct rexec_script *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->pid = pid;
    char text[3 * 4 * 4096];
    int len = render(text, sizeof text, agent_path, control_path);
    if (len < 0) {
        snprintf(err, errlen, "remote-exec: agent or socket path too long");
        return -1;
    }
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
        snprintf(err, errlen, "remote-exec: getrandom: %s", strerror(errno));
        return -1;
    }
    uid_t root;
    if (target_fs_ids(pid, &s->uid, &s->gid) < 0 || target_root_uid(pid, &root) < 0) {
        snprintf(err, errlen, "remote-exec: cannot read the ids of pid %d", (int)pid);
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, DIR_PREFIX "%d-%016llx", (int)getpid(),
             (unsigned long long)nonce);
    struct rx_job j = {.dir = name, .text = text, .len = (size_t)len, .tmp_owner = root,
                       .self = getpid()};
    char out[AS_TARGET_OUT_MAX], why[AS_TARGET_OUT_MAX];
    if (as_target_run(pid, s->uid, s->gid, rx_in_child, &j, out, sizeof out, HELPER_TIMEOUT_MS,
                      why, sizeof why) < 0) {
        snprintf(err, errlen, "remote-exec: the loader script in pid %d's /tmp: %s", (int)pid,
                 why);
        return -1;
    }
    snprintf(s->dir, sizeof s->dir, "%s", name);
    snprintf(s->path, sizeof s->path, "/tmp/%s/%s", name, SCRIPT_NAME);
    return 0;
}
