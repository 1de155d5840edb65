/* fuzz_util.c — the harnesses' shared setup (see fuzz_util.h). */
#include "fuzz_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "commands.h"
#include "cvf_reader.h"

static char scratch[64];

/* The names the harnesses use in the scratch directory: removed with it at exit. */
static void remove_scratch(void)
{
    static const char *const names[] = {"in", "out.spool", "out.spool.prev", "spool",
                                        "spool2", "member.spool", "other.spool"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", scratch, names[i]);
        unlink(path);
    }
    rmdir(scratch);
}

const char *fuzz_path(const char *name, char *path, size_t cap)
{
    if (!scratch[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(scratch, sizeof scratch, "%s/vcattach-fuzz-XXXXXX", base);
        if (mkdtemp(scratch) == NULL) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(remove_scratch);
    }
    snprintf(path, cap, "%s/%s", scratch, name);
    return path;
}

void fuzz_write_file(const char *name, const void *data, size_t size, char *path, size_t cap)
{
    fuzz_path(name, path, cap);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror("fuzz: writing the input file");
        abort();
    }
}

void fuzz_quiet_stdout(void)
{
    if (freopen("/dev/null", "w", stdout) == NULL)
        abort();
}

int fuzz_agent_socket(const void *data, size_t size, int *peer)
{
    int sv[2];
    if (size > FUZZ_SOCKET_MAX)
        return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    /* Room for the whole input: the writer never waits for the reader (root may force it
     * past wmem_max; otherwise the default, ~200 KiB, holds FUZZ_SOCKET_MAX). */
    int room = (int)FUZZ_SOCKET_MAX * 2;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUFFORCE, &room, sizeof room);
    const char *p = data;
    for (size_t done = 0; done < size;) {
        ssize_t n = send(sv[1], p + done, size - done, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) {
            perror("fuzz: the agent's bytes do not fit the socket");
            abort();
        }
        done += (size_t)n;
    }
    shutdown(sv[1], SHUT_WR); /* EOF after the data; what vcattach sends still lands */
    *peer = sv[1];
    return sv[0];
}

/* ---- reading every value of a .cvf -------------------------------------------------------- */

static volatile uint64_t sink;

static int on_name(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    sink += pid + tid + strlen(name);
    return 0;
}

static int on_fee(void *ctx, const cvf_fee_group *g)
{
    for (size_t i = 0; i < g->count; i++)
        sink += (uint64_t)g->ts[i] + g->dur[i];
    if (g->args)
        for (size_t i = 0; i < g->count; i++)
            sink += (unsigned char)g->args_json[g->args[i].off + g->args[i].len - 1];
    return 0;
}

static int on_counter(void *ctx, const cvf_counter_group *g)
{
    for (size_t k = 0; k < g->nkeys; k++)
        sink += strlen(g->keys[k]);
    for (size_t i = 0; i < g->nts * g->nkeys; i++)
        if (g->values[i].tag == CVF_COUNTER_LONG_STRING)
            sink += strlen(g->values[i].v.s);
    return 0;
}

static int on_json(void *ctx, const cvf_json_record *r)
{
    for (size_t i = 0; i < r->nitems; i++)
        sink += (unsigned char)r->json[r->items[i].off];
    sink += r->len;
    return 0;
}

int fuzz_cvf_read_all(const void *cvf, size_t size, unsigned flags, char *msg, size_t cap)
{
    static const cvf_visitor v = {on_name, on_name, on_fee, on_counter, on_json, on_json};
    cvf_error err;
    int rc = cvf_read(cvf, size, &v, NULL, flags, &err);
    if (rc != 0)
        snprintf(msg, cap, "%s", err.msg);
    return rc;
}

int fuzz_memfd(void)
{
    int fd = memfd_create("fuzz-cvf", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    return fd;
}

void fuzz_require_cvf(int fd, const char *what)
{
    off_t size = lseek(fd, 0, SEEK_END);
    unsigned char *cvf = malloc(size > 0 ? (size_t)size : 1);
    if (size < 0 || cvf == NULL || pread(fd, cvf, (size_t)size, 0) != size)
        abort();
    char msg[512];
    if (fuzz_cvf_read_all(cvf, (size_t)size, 0, msg, sizeof msg) != 0) {
        fprintf(stderr, "fuzz: the .cvf %s wrote does not decode: %s\n", what, msg);
        __builtin_trap();
    }
    free(cvf);
}

/* ---- the offline tools -------------------------------------------------------------------- */

static int run(int (*cmd)(int, char **), const char *const *args)
{
    char *argv[16];
    int argc = 0;
    for (; args[argc] != NULL && argc < 15; argc++)
        argv[argc] = (char *)args[argc];
    argv[argc] = NULL;
    return cmd(argc, argv);
}

void fuzz_offline_tools(const char *path, unsigned variant)
{
    /* One load with compaction costs ~3 ms under ASan whatever the input (a 6 MiB scratch
     * buffer, trace/load.c, which ASan maps and unmaps): the variants of `summary` and of the
     * compact exports take turns, chosen by the input (the same input always runs the same
     * ones). */
    const char *const summary[][10] = {
        {"summary", path, NULL},
        {"summary", path, "--all", "--merged", NULL},
        {"summary", path, "--by", "interp", NULL},
        {"summary", path, "--sort", "cpu", "--max-threads", "0", "--thread", "MainThread", NULL},
    };
    const char *const compact[][8] = {
        {"convert", path, "-o", "-", "--format", "svg", NULL},
        {"convert", path, "-o", "-", "--format", "collapsed", NULL},
    };
    const char *const convert[][12] = {
        {"convert", path, "-o", "-", "--tasks", "--requests", NULL},
        {"convert", path, "-o", "-", "--format", "speedscope", NULL},
    };
    const char *const window[][12] = {
        {"convert", path, "-o", "-", "--from", "1us", "--to", "0.5", "--min-dur", "10us", NULL},
        {"convert", path, "-o", "-", "--from", "0", "--format", "collapsed", NULL},
    };
    const char *const requests[] = {"requests", path, NULL};
    int readable = run(cmd_summary, summary[0]) != VC_EXIT_FAIL;
    run(cmd_requests, requests);
    if (readable) {
        run(cmd_summary, summary[1 + variant % 3]);
        run(cmd_convert, compact[variant / 3 % 2]);
        run(cmd_convert, window[variant / 6 % 2]);
        for (size_t i = 0; i < sizeof convert / sizeof convert[0]; i++)
            run(cmd_convert, convert[i]);
    }
    fflush(stdout);
}
