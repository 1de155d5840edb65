/* test_cvf_atomic.c — unit checks of common/atomic_file.c (the one atomic writer of the CLI's
 * sink and the agent's file outputs) and common/fd_io.h (the EINTR-safe read/write helpers).
 *
 * Named test_cvf_* so that tests/tests.mk's wildcard builds it (normal and ASan+UBSan) and
 * test_codec_unit.py runs it.  Every case works in a fresh mkdtemp directory, removed at the
 * end: an existing OUT is refused without force and replaced with it, OUT.tmp is kept when the
 * rename fails and removed on abort, a symlink planted at OUT.tmp is never followed, the mode
 * is exact whatever the umask, and a read interrupted by signals still returns everything.
 */
#include "atomic_file.h"
#include "cvf_test.h"
#include "fd_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static char out[256], tmp[264], victim[256];

static void put(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(vc_write_all(fd, text, strlen(text)) == 0);
        close(fd);
    }
}

/* The whole file, or "<absent>". */
static const char *get(const char *path)
{
    static char buf[256];
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return "<absent>";
    ssize_t n = vc_read_all(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A fresh case: OUT, OUT.tmp and the symlink victim gone. */
static void reset(void)
{
    unlink(out);
    rmdir(out);
    unlink(tmp);
    unlink(victim);
}

/* open + write + commit of `text`; returns the commit's (or open's) result. */
static int write_file(vc_atomic_file *f, unsigned flags, const char *text, char *err, size_t errlen)
{
    int rc = vc_atomic_open(f, out, 0640, flags, err, errlen);
    if (rc < 0)
        return rc;
    CHECK(vc_atomic_write(f, text, strlen(text), err, errlen) == 0);
    return vc_atomic_commit(f, err, errlen);
}

static void test_new_file(void)
{
    reset();
    vc_atomic_file f;
    char err[512] = "";
    mode_t old = umask(077); /* the mode must not depend on it */
    CHECK(write_file(&f, 0, "trace", err, sizeof err) == 0);
    umask(old);
    vc_atomic_abort(&f); /* a no-op after a commit */
    CHECK(strcmp(get(out), "trace") == 0);
    CHECK(!exists(tmp));
    struct stat st;
    CHECK(stat(out, &st) == 0 && (st.st_mode & 07777) == 0640);
}

static void test_refuses_existing_without_force(void)
{
    reset();
    put(out, "operator");
    vc_atomic_file f;
    char err[512] = "";
    CHECK(write_file(&f, 0, "trace", err, sizeof err) == -EEXIST);
    CHECK(f.kept == 1);
    vc_atomic_abort(&f); /* must not remove a kept OUT.tmp */
    CHECK(strcmp(get(out), "operator") == 0);
    CHECK(strcmp(get(tmp), "trace") == 0);
    CHECK(strstr(err, tmp) != NULL);          /* the message names the kept file */
    CHECK(strstr(err, "--force") != NULL);    /* and the fix */
}

static void test_replaces_with_force(void)
{
    reset();
    put(out, "operator");
    vc_atomic_file f;
    char err[512] = "";
    CHECK(write_file(&f, VC_ATOMIC_FORCE, "trace", err, sizeof err) == 0);
    CHECK(f.kept == 0);
    vc_atomic_abort(&f);
    CHECK(strcmp(get(out), "trace") == 0);
    CHECK(!exists(tmp));
}

static void test_tmp_kept_when_rename_fails(void)
{
    reset();
    /* OUT is a non-empty directory: even a forced rename of a file onto it fails. */
    CHECK(mkdir(out, 0755) == 0);
    char inner[300];
    snprintf(inner, sizeof inner, "%s/x", out);
    put(inner, "x");
    vc_atomic_file f;
    char err[512] = "";
    int rc = write_file(&f, VC_ATOMIC_FORCE, "trace", err, sizeof err);
    CHECK(rc < 0);
    CHECK(f.kept == 1);
    vc_atomic_abort(&f);
    CHECK(strcmp(get(tmp), "trace") == 0);
    CHECK(strstr(err, tmp) != NULL);
    unlink(inner);
    rmdir(out);
}

static void test_abort_removes_tmp(void)
{
    reset();
    vc_atomic_file f;
    char err[512] = "";
    CHECK(vc_atomic_open(&f, out, 0644, 0, err, sizeof err) == 0);
    CHECK(exists(tmp));
    CHECK(vc_atomic_write(&f, "part", 4, err, sizeof err) == 0);
    vc_atomic_abort(&f);
    CHECK(f.fd == -1);
    CHECK(!exists(tmp));
    CHECK(!exists(out));
    vc_atomic_abort(&f); /* twice: still safe */
    vc_atomic_file g;
    vc_atomic_init(&g);
    vc_atomic_abort(&g); /* never opened: safe */
    CHECK(vc_atomic_commit(&g, err, sizeof err) == -EBADF);
}

static void test_symlinked_tmp(void)
{
    reset();
    put(victim, "victim");
    CHECK(symlink(victim, tmp) == 0);
    vc_atomic_file f;
    char err[512] = "";
    /* Without force: refused, naming OUT.tmp; the link's target untouched. */
    CHECK(vc_atomic_open(&f, out, 0644, 0, err, sizeof err) == -EEXIST);
    CHECK(strstr(err, tmp) != NULL);
    vc_atomic_abort(&f);
    CHECK(strcmp(get(victim), "victim") == 0);
    struct stat st;
    CHECK(lstat(tmp, &st) == 0 && S_ISLNK(st.st_mode)); /* a refusal removes nothing */
    /* With force: the link itself is removed (never followed), a fresh file written. */
    CHECK(write_file(&f, VC_ATOMIC_FORCE, "trace", err, sizeof err) == 0);
    vc_atomic_abort(&f);
    CHECK(strcmp(get(victim), "victim") == 0);
    CHECK(strcmp(get(out), "trace") == 0);
    CHECK(lstat(out, &st) == 0 && S_ISREG(st.st_mode));
    CHECK(!exists(tmp));
    /* A dangling symlink is refused the same way (O_EXCL|O_NOFOLLOW: no file created
     * through it). */
    reset();
    CHECK(symlink(victim, tmp) == 0);
    CHECK(vc_atomic_open(&f, out, 0644, 0, err, sizeof err) == -EEXIST);
    vc_atomic_abort(&f);
    CHECK(!exists(victim));
}

static void test_dirname(void)
{
    char d[64];
    CHECK(vc_atomic_dirname("/a/b/c.cvf", d, sizeof d) == 0 && strcmp(d, "/a/b") == 0);
    CHECK(vc_atomic_dirname("/c.cvf", d, sizeof d) == 0 && strcmp(d, "/") == 0);
    CHECK(vc_atomic_dirname("c.cvf", d, sizeof d) == 0 && strcmp(d, ".") == 0);
    CHECK(vc_atomic_dirname("/a/b/c.cvf", d, 3) == -1);
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

/* A blocking read interrupted by signals (no SA_RESTART) still gets every byte. */
static void test_read_all_eintr(void)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t child = fork();
    if (child == 0) {
        close(p[0]);
        usleep(100 * 1000);
        vc_write_all(p[1], "0123456789", 10);
        usleep(50 * 1000);
        vc_write_all(p[1], "abcdefghij", 10);
        _exit(0);
    }
    close(p[1]);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* sa_flags 0: read() fails with EINTR */
    sigaction(SIGALRM, &sa, &old);
    struct itimerval it = {.it_interval = {0, 5000}, .it_value = {0, 5000}};
    setitimer(ITIMER_REAL, &it, NULL);
    char buf[32];
    ssize_t n = vc_read_all(p[0], buf, 20);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    CHECK(n == 20);
    CHECK(n == 20 && memcmp(buf, "0123456789abcdefghij", 20) == 0);
    CHECK(alarms > 0);
    CHECK(vc_read_all(p[0], buf, sizeof buf) == 0); /* end of file */
    close(p[0]);
    waitpid(child, NULL, 0);
}

static void test_pread_all(void)
{
    reset();
    put(out, "0123456789");
    int fd = open(out, O_RDONLY | O_CLOEXEC);
    char buf[16] = "";
    CHECK(vc_pread_all(fd, buf, 4, 3) == 4 && memcmp(buf, "3456", 4) == 0);
    CHECK(vc_pread_all(fd, buf, 16, 8) == 2); /* short only at the end */
    CHECK(lseek(fd, 0, SEEK_CUR) == 0);       /* position untouched */
    close(fd);
    CHECK(vc_write_all(-1, "x", 1) == -1 && errno == EBADF);
}

int main(void)
{
    (void)membuf_sink; /* cvf_test.h's codec sink: not needed here */
    snprintf(dir, sizeof dir, "/tmp/test_cvf_atomic.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(out, sizeof out, "%s/out.cvf", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    test_new_file();
    test_refuses_existing_without_force();
    test_replaces_with_force();
    test_tmp_kept_when_rename_fails();
    test_abort_removes_tmp();
    test_symlinked_tmp();
    test_dirname();
    test_read_all_eintr();
    test_pread_all();
    reset();
    CHECK(rmdir(dir) == 0);
    return test_summary("test_cvf_atomic");
}
