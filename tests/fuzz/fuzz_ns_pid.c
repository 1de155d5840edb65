/* fuzz_ns_pid.c — libFuzzer harness: a `--subprocesses` member in another pid namespace (a
 * container's process), whose agent's META and EVENTS vcattach rewrites to the host's pid
 * (cli/ns_pid.c) before they reach its spool, then the tree's trace built from its spool and
 * another member's (spool_build_processes), as cli/tree_trace.c does.
 *
 * Input: u32 host pid, u32 the pid it has in its namespace (both made 1..INT_MAX), then the
 * bytes its agent sends on the control socket (u32 type | u32 length | payload), read with
 * vc_msg_recv as tree_trace.c reads a member's.  The other member is the same stream sent by a
 * process in our own pid namespace (no rewrite).  Checked: a rewritten META stays within the
 * spool's bound for a name, an EVENTS rewrite within the growth its matches allow, and the
 * tree's .cvf decodes (fuzz_require_cvf).
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/ns_pid. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "ns_pid.h"
#include "protocol.h"
#include "spool.h"

struct member {
    pid_t pid, own_pid;
    struct spool *sp;
};

static void *rewrite(const struct member *m, uint32_t type, const char *buf, size_t n,
                     size_t *rn)
{
    if (m->own_pid == m->pid)
        return NULL;
    if (type == VC_MSG_META) {
        unsigned char *out = ns_pid_meta(buf, n, m->pid, m->own_pid, rn);
        uint64_t host;
        if (out != NULL && (*rn > 8 + NS_PID_NAME_MAX ||
                            (memcpy(&host, out, 8), host != (uint64_t)m->pid)))
            __builtin_trap(); /* the spool would refuse the member's name */
        return out;
    }
    if (type == VC_MSG_EVENTS) {
        char key[32], host[32];
        size_t klen = (size_t)snprintf(key, sizeof key, "\"pid\":%d", (int)m->own_pid);
        size_t hlen = (size_t)snprintf(host, sizeof host, "\"pid\":%d", (int)m->pid);
        char *out = ns_pid_events(buf, n, m->pid, m->own_pid, rn);
        /* every match takes klen + 1 bytes of the input and grows by hlen - klen at most */
        size_t grow = hlen > klen ? hlen - klen : 0;
        if (out != NULL && *rn > n + n / (klen + 1) * grow)
            __builtin_trap();
        return out;
    }
    return NULL;
}

/* cli/tree_trace.c's on_stream_frame: rewritten when the member is in another pid
 * namespace, into its spool.  spool_add's result: -1 the member is lost, -2 it ended early
 * (its spool stops there). */
static int stream_frame(struct member *m, uint32_t type, const char *buf, size_t n)
{
    size_t rn = 0;
    void *rewritten = rewrite(m, type, buf, n, &rn);
    char err[512];
    int rc = rewritten ? spool_add(m->sp, type, rewritten, rn, err, sizeof err)
                       : spool_add(m->sp, type, buf, n, err, sizeof err);
    free(rewritten);
    return rc;
}

/* tree_trace.c's spool_initial_name: the member's own pid and its command line. */
static void initial_name(struct member *m)
{
    unsigned char meta[8 + 32];
    uint64_t own = (uint64_t)m->own_pid;
    memcpy(meta, &own, 8);
    memcpy(meta + 8, "python app.py", 13);
    stream_frame(m, VC_MSG_META, (const char *)meta, 8 + 13);
}

static pid_t pid_of(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    v &= 0x7fffffffu;
    return v ? (pid_t)v : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *buf;
    if (buf == NULL && (buf = malloc(VC_MSG_MAX + 1)) == NULL)
        abort();
    if (size < 8)
        return 0;
    struct member ms[2] = {{pid_of(data), pid_of(data + 4), NULL},
                           {pid_of(data) ^ 1, pid_of(data) ^ 1, NULL}};
    static const char *const names[2] = {"member.spool", "other.spool"};
    char path[256], err[1024];
    for (int i = 0; i < 2; i++) {
        fuzz_path(names[i], path, sizeof path);
        unlink(path);
        if (spool_create(&ms[i].sp, path, (uint64_t)ms[i].pid, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz: %s\n", err);
            abort();
        }
        initial_name(&ms[i]);
    }
    int peer;
    int fd = fuzz_agent_socket(data + 8, size - 8, &peer);
    int rc[2] = {0, 0}; /* a member's spool takes frames until one is refused */
    for (;;) {
        uint32_t type;
        long n = fd < 0 ? -1 : vc_msg_recv(fd, &type, buf, VC_MSG_MAX + 1, 1000);
        if (n < 0 || type == VC_MSG_END)
            break;
        for (int i = 0; i < 2; i++)
            if (rc[i] == 0 && spool_frame_type(type))
                rc[i] = stream_frame(&ms[i], type, buf, (size_t)n);
    }
    if (fd >= 0) {
        close(fd);
        close(peer);
    }
    /* write_merged: a member whose agent broke the protocol (-1) is lost, not built; one
     * whose spool is full (-2) keeps what it had */
    struct spool *sps[2];
    size_t k = 0;
    for (int i = 0; i < 2; i++)
        if (rc[i] != -1)
            sps[k++] = ms[i].sp;
    int out = fuzz_memfd();
    struct spool_stats st;
    if (k && spool_build_processes(sps, k, cvf_sink_fd, (void *)(intptr_t)out, &st, err,
                                   sizeof err) == 0)
        fuzz_require_cvf(out, "spool_build_processes (a tree)");
    close(out);
    for (int i = 0; i < 2; i++)
        spool_close(ms[i].sp, 1);
    return 0;
}
