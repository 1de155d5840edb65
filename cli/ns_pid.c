/* ns_pid.c — a tree member in another pid namespace, shown with the pid the host sees
 * (ns_pid.h).
 *
 * Why: an agent names its process with getpid(), which inside a container is the container's
 * pid (1, 7, ...): two containers of one pod would both claim pid 1 in the merged trace, and
 * the operator, who works with the host's pids (ps, kill, the CLI's lines), could not tell
 * which process a track is.  vcattach knows both (SO_PEERCRED gives the host's pid, NSpid in
 * /proc/PID/status the container's): it rewrites what the agent sends about its process
 * (META: pid and name; EVENTS: the instants' "pid") before the frame reaches the spool, so
 * the track's pid is the host's and its name carries the container's.  Thread ids stay as
 * the process sees them (they only tell the threads of one track apart).
 *
 * The agent's frames are the target's user's bytes: every rewrite goes through the bounded
 * text builder (common/text.h) with a stated cap, and input that does not look as expected is
 * passed on unchanged (the spool judges it, as for any member).
 */
#include "ns_pid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

void ns_pid_label(pid_t pid, pid_t own_pid, char *buf, size_t cap)
{
    if (own_pid > 0 && own_pid != pid)
        snprintf(buf, cap, "%d (pid %d in its namespace)", (int)pid, (int)own_pid);
    else
        snprintf(buf, cap, "%d", (int)pid);
}

void *ns_pid_meta(const void *in, size_t n, pid_t pid, pid_t own_pid, size_t *out_n)
{
    if (n < 8)
        return NULL;
    char suffix[64];
    int slen = snprintf(suffix, sizeof suffix, " (pid %d in its namespace)", (int)own_pid);
    if (n - 8 + (size_t)slen > NS_PID_NAME_MAX) /* the spool's bound for a name: cut it */
        n = 8 + NS_PID_NAME_MAX - (size_t)slen;
    vc_text out;
    vc_text_init(&out, 8 + NS_PID_NAME_MAX);
    uint64_t host = (uint64_t)pid;
    vc_text_put(&out, &host, 8);
    vc_text_put(&out, (const unsigned char *)in + 8, n - 8);
    if (vc_text_put(&out, suffix, (size_t)slen) != 0) {
        vc_text_free(&out);
        return NULL;
    }
    *out_n = out.len;
    return out.buf; /* the caller frees it */
}

/* Where "pid":OWN (OWN followed by ',' or '}') starts at p, the length of the match, else 0. */
static size_t match_at(const char *p, const char *end, const char *key, size_t klen)
{
    if ((size_t)(end - p) < klen + 1 || memcmp(p, key, klen) != 0)
        return 0;
    const char *q = p + klen;
    return q < end && (*q == ',' || *q == '}') ? klen : 0;
}

void *ns_pid_events(const void *in, size_t n, pid_t pid, pid_t own_pid, size_t *out_n)
{
    const char *s = in, *end = s + n;
    char key[48], host[48];
    int klen = snprintf(key, sizeof key, "\"pid\":%d", (int)own_pid);
    int hlen = snprintf(host, sizeof host, "\"pid\":%d", (int)pid);
    vc_text out;
    vc_text_init(&out, NS_PID_EVENTS_MAX);
    const char *run = s; /* bytes not yet copied */
    for (const char *p = s; p < end;) {
        size_t m = *p == '"' ? match_at(p, end, key, (size_t)klen) : 0;
        if (!m) {
            p++;
            continue;
        }
        vc_text_put(&out, run, (size_t)(p - run));
        vc_text_put(&out, host, (size_t)hlen);
        p += m;
        run = p;
    }
    if (vc_text_put(&out, run, (size_t)(end - run)) != 0) {
        vc_text_free(&out);
        return NULL;
    }
    *out_n = out.len;
    return out.buf;
}
