/* rexec_script.c — the remote-exec script in the target's /tmp (see rexec_script.h); internal
 * to the injector: inject() (inject.c) writes it around the remote-exec method.
 *
 * The paths go into the script as bytes literals with every byte outside [A-Za-z0-9/._-]
 * written as \xNN, so no file name can end the literal or inject code into what the target
 * runs.  The script is only what the agent needs: ctypes.CDLL (dlopen with RTLD_NOW, the same
 * handle the ptrace method gets) and one call that returns at once; ctypes releases the GIL
 * around it and the agent thread does everything else.
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
#include <time.h>
#include <unistd.h>

#include "proc.h"

#define SCRIPT_NAME "attach.py"
#define DIR_PREFIX ".vcattach-rx-"
/* A live vcattach keeps its script for the request's timeout, a cancel's grace and the
 * script's run (inject_remote_exec.c: about 12 s); older ones are a killed vcattach's. */
#define STALE_AFTER_S 30

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

static int render(char *buf, size_t cap, const char *agent, const char *control)
{
    size_t used = 0;
    int n = snprintf(buf, cap, "# vcattach: loads its tracing agent (PEP 768 remote exec); "
                               "vcattach removes this file\n"
                               "import ctypes, os\n"
                               "ctypes.CDLL(os.fsdecode(");
    if (n < 0 || (size_t)n >= cap)
        return -1;
    used = (size_t)n;
    if (put_bytes_literal(buf, cap, &used, agent) < 0)
        return -1;
    n = snprintf(buf + used, cap - used, ")).vc_agent_connect(");
    if (n < 0 || (size_t)n >= cap - used)
        return -1;
    used += (size_t)n;
    if (put_bytes_literal(buf, cap, &used, control) < 0)
        return -1;
    n = snprintf(buf + used, cap - used, ")\n");
    return n < 0 || (size_t)n >= cap - used ? -1 : (int)(used + (size_t)n);
}

/* The directory `name` in tmp_fd, if a killed vcattach left it: named by us with a creator pid
 * that no longer exists, ours (owner, no symlink), and older than any live script.  Its script
 * is unlinked inside the directory opened without following links, then the directory itself
 * (rmdir only removes an empty one, whatever was swapped in meanwhile).  Best effort. */
static void sweep_one(int tmp_fd, const char *name)
{
    const char *p = name + strlen(DIR_PREFIX);
    char *end;
    long creator = strtol(p, &end, 10);
    if (end == p || *end != '-' || strlen(end + 1) != 16 || creator <= 0 ||
        creator == (long)getpid() || kill((pid_t)creator, 0) == 0 || errno != ESRCH)
        return;
    int fd = openat(tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() &&
        time(NULL) - st.st_mtime >= STALE_AFTER_S) {
        unlinkat(fd, SCRIPT_NAME, 0);
        unlinkat(tmp_fd, name, AT_REMOVEDIR);
    }
    close(fd);
}

/* Removes what killed vcattaches left in this /tmp (a vcattach killed between writing its
 * script and removing it cannot clean up after itself). */
static void sweep_stale(int tmp_fd)
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
            sweep_one(tmp_fd, e->d_name);
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

void rexec_script_remove(struct rexec_script *s)
{
    if (s->dir_fd >= 0) {
        unlinkat(s->dir_fd, SCRIPT_NAME, 0);
        close(s->dir_fd);
        s->dir_fd = -1;
    }
    if (s->tmp_fd >= 0) {
        if (s->dir[0])
            unlinkat(s->tmp_fd, s->dir, AT_REMOVEDIR);
        close(s->tmp_fd);
        s->tmp_fd = -1;
    }
    s->dir[0] = s->path[0] = '\0';
}

int rexec_script_create(pid_t pid, const char *agent_path, const char *control_path,
                        struct rexec_script *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->tmp_fd = s->dir_fd = -1;
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
    char root_tmp[64];
    snprintf(root_tmp, sizeof root_tmp, "/proc/%d/root/tmp", (int)pid);
    s->tmp_fd = open(root_tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s->tmp_fd < 0) {
        snprintf(err, errlen, "remote-exec: cannot open the target's /tmp (%s): %s", root_tmp,
                 strerror(errno));
        return -1;
    }
    uid_t uid;
    gid_t gid;
    if (target_fs_ids(pid, &uid, &gid) < 0) {
        snprintf(err, errlen, "remote-exec: cannot read the ids of pid %d", (int)pid);
        rexec_script_remove(s);
        return -1;
    }
    sweep_stale(s->tmp_fd);
    char name[64];
    snprintf(name, sizeof name, DIR_PREFIX "%d-%016llx", (int)getpid(),
             (unsigned long long)nonce);
    /* 0711: the target reaches the script by its path; nobody lists the directory */
    if (mkdirat(s->tmp_fd, name, 0711) < 0) { /* fresh: an existing name is never reused */
        snprintf(err, errlen, "remote-exec: cannot create /tmp/%s in pid %d's view: %s", name,
                 (int)pid, strerror(errno));
        rexec_script_remove(s);
        return -1;
    }
    snprintf(s->dir, sizeof s->dir, "%s", name);
    s->dir_fd = openat(s->tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (s->dir_fd < 0 || fchmod(s->dir_fd, 0711) < 0 || fstat(s->dir_fd, &st) < 0 ||
        st.st_uid != geteuid()) {
        snprintf(err, errlen, "remote-exec: /tmp/%s in pid %d's view is not the directory "
                              "vcattach created", name, (int)pid);
        rexec_script_remove(s);
        return -1;
    }
    /* Readable by the target's user only: it holds the session's token (control_client.h). */
    int fd = openat(s->dir_fd, SCRIPT_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600);
    int ok = fd >= 0 && write(fd, text, (size_t)len) == len && fchown(fd, uid, gid) == 0 &&
             fchmod(fd, 0400) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        snprintf(err, errlen, "remote-exec: cannot write the script into pid %d's /tmp: %s",
                 (int)pid, strerror(e));
        rexec_script_remove(s);
        return -1;
    }
    snprintf(s->path, sizeof s->path, "/tmp/%s/%s", name, SCRIPT_NAME);
    return 0;
}
