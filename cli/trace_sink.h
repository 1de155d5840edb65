/* trace_sink.h — the CLI's output: where `vcattach trace` puts the .cvf bytes the agent
 * sends and `vcattach convert` its output.  A file is written by common/atomic_file.h, the
 * one atomic writer the agent uses too (OUT.tmp created O_EXCL|O_NOFOLLOW, fsync, rename
 * without replacing, directory fsync: a crash never leaves a half-written OUT, a failure or a
 * fatal signal leaves no OUT.tmp, except when the last rename fails: then OUT.tmp is kept and
 * the message names it); `trace` may also stream to a listening Unix socket (-o unix:/path).
 *
 * `trace` opens the sink during preflight, before the target is touched, so that an
 * unwritable or already existing OUT is reported with nothing done to the target.
 */
#ifndef VC_TRACE_SINK_H
#define VC_TRACE_SINK_H

#include "atomic_file.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct trace_sink {
    int is_socket;
    int fd;                  /* the socket, or file.fd (OUT.tmp) while writing; -1 after */
    int force;
    uint64_t bytes;
    char path[PATH_MAX];     /* absolute OUT, or the socket path */
    vc_atomic_file file;     /* a file output's writer (OUT.tmp and its fate) */
};

/* Resolves `out` to an absolute path (OUT's directory must exist) into abs. 0 or -1 + err. */
int sink_absolute_path(const char *out, char *abs, size_t cap, char *err, size_t errlen);

/* Creates OUT.tmp exclusively (O_EXCL|O_NOFOLLOW, mode 0644).  Refuses an existing OUT
 * unless force.  Returns 0 or -1 with err (cause and fix); errno is EEXIST when OUT or OUT.tmp
 * is in the way (a usage error rather than a failure). */
int sink_open_file(struct trace_sink *k, const char *out, int force, char *err, size_t errlen);

/* Removes OUT.tmp if SIGINT, SIGTERM, SIGHUP or SIGPIPE ends the process before
 * sink_commit or sink_abort (then re-raises the signal).  For commands without signal
 * handling of their own (convert); one file sink at a time. */
void sink_remove_on_signal(struct trace_sink *k);

/* Connects to the listening Unix socket at path.  Returns 0 or -1 with err. */
int sink_open_socket(struct trace_sink *k, const char *path, char *err, size_t errlen);

/* Appends bytes (the signature fits ctl_receive's write_chunk; ctx is the sink). */
int sink_write(void *ctx, const void *buf, size_t len, char *err, size_t errlen);

/* File: fsync, rename OUT.tmp to OUT (never replacing an OUT that appeared meanwhile unless
 * force), fsync the directory; a failed rename keeps OUT.tmp and err names it.  Socket: shut
 * down the write side.  Returns 0 or -1 + err. */
int sink_commit(struct trace_sink *k, char *err, size_t errlen);

/* Closes and removes OUT.tmp if it is still there, or resets the socket so that the listener
 * sees an error rather than a clean end (every failure path; a no-op after sink_commit). */
void sink_abort(struct trace_sink *k);

/* OUT is acceptable for a file that the target itself will write (vcattach start): its
 * directory exists and the target's user can write there, OUT absent unless force.
 * abs receives the absolute path.  Returns 0 or -1 with err. */
int sink_check_remote_file(const char *out, uid_t target_uid, int force, char *abs, size_t cap,
                           char *err, size_t errlen);

#endif /* VC_TRACE_SINK_H */
