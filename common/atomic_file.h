/* atomic_file.h — the one atomic file writer of vcattach: the CLI's trace sink (cli/
 * trace_sink.c: `trace`, `convert`, process trees) and the agent's file outputs (agent/emit.c:
 * a `vcattach start` session's OUT and every fallback OUT.partial.cvf) both write through it,
 * so that they agree on what happens to an existing OUT and to OUT.tmp.
 *
 * The protocol: OUT.tmp is created O_EXCL|O_NOFOLLOW with exactly `mode` (so nothing planted
 * at that name is followed or appended to), written, fsync'd, then renamed to OUT without
 * replacing an existing OUT unless VC_ATOMIC_FORCE (a file the operator created meanwhile is
 * never lost), and OUT's directory is fsync'd (the rename survives a power cut).  When the
 * rename fails, OUT.tmp is KEPT (it holds the whole, fsync'd data) and the message names it;
 * an abort before that removes it.  A crash never leaves a half-written OUT.
 *
 * No allocation, no Python, no global state: the agent calls it on its own thread at stop
 * time.  Errors are -errno with a one-line message (cause and fix) in err.
 */
#ifndef VC_ATOMIC_FILE_H
#define VC_ATOMIC_FILE_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* Replace an existing OUT, and remove a leftover OUT.tmp (a regular file or symlink owned by
 * this user) before creating ours. */
#define VC_ATOMIC_FORCE 1u

typedef struct vc_atomic_file {
    int fd;              /* OUT.tmp, open for writing; -1 before open and after commit */
    unsigned flags;      /* VC_ATOMIC_* */
    int tmp_ours;        /* OUT.tmp exists and is ours to remove (abort) */
    int kept;            /* the commit's rename failed: OUT.tmp holds the data and stays */
    char path[PATH_MAX]; /* OUT */
    char tmp[PATH_MAX + 8];
} vc_atomic_file;

/* An unopened writer (fd -1): abort is a no-op on it. */
void vc_atomic_init(vc_atomic_file *f);

/* Creates path + ".tmp" (O_EXCL|O_NOFOLLOW, exactly `mode`).  Does not look at OUT itself:
 * whether it may be replaced is decided at the rename (callers wanting an early refusal check
 * first, as trace_sink.c does).  0, or -errno with err (-EEXIST: OUT.tmp is in the way). */
int vc_atomic_open(vc_atomic_file *f, const char *path, mode_t mode, unsigned flags, char *err,
                   size_t errlen);

/* Appends len bytes to OUT.tmp (EINTR-safe).  0, or -errno with err. */
int vc_atomic_write(vc_atomic_file *f, const void *buf, size_t len, char *err, size_t errlen);

/* fsync and close OUT.tmp, rename it to OUT (never over an existing OUT without
 * VC_ATOMIC_FORCE), fsync the directory.  0, or -errno with err: if the rename failed
 * (-EEXIST: OUT exists) f->kept is 1 and err names OUT.tmp, which is left in place; if the
 * data could not be written to disk, abort removes OUT.tmp. */
int vc_atomic_commit(vc_atomic_file *f, char *err, size_t errlen);

/* Closes OUT.tmp and removes it unless it was renamed or kept.  Safe on every path: after
 * init, a failed open, a commit, or twice. */
void vc_atomic_abort(vc_atomic_file *f);

/* The directory part of path into dir ("." when it has none, "/" for a file in the root).
 * 0, or -1 if it does not fit. */
int vc_atomic_dirname(const char *path, char *dir, size_t cap);

#endif /* VC_ATOMIC_FILE_H */
