/* fd_io.h — the EINTR-safe whole-buffer read and write of vcattach: every plain read/write
 * loop of the CLI, the injector, the codec and the agent's file outputs goes through these.
 *
 * Why here and header-only: a signal (the CLI's SIGINT, a profiler's SIGPROF in the target
 * the agent runs in) may interrupt any read or write, and a short count is legal for pipes,
 * sockets and slow filesystems; one copy of the retry means no caller forgets a case.  The
 * functions are static inline, like monotonic.h, so that libvcinject.a (which links no
 * common/ object) can use them too; they allocate nothing and call no Python, so the agent
 * may use them anywhere.  Sockets that must not block (deadlines, MSG_DONTWAIT) keep their
 * own poll loops (protocol.c, trace_sink.c): these helpers block until done.
 */
#ifndef VC_FD_IO_H
#define VC_FD_IO_H

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

/* Writes all len bytes of buf to fd, retrying EINTR and short writes.  0, or -1 with errno
 * (EIO for a write that wrote nothing without an error). */
static inline int vc_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The loop of vc_read_all and vc_pread_all: read() when off < 0, else pread() at off. */
static inline ssize_t vc_read_loop(int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = off < 0 ? read(fd, p + done, len - done)
                            : pread(fd, p + done, len - done, off + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* Reads up to len bytes from fd into buf, retrying EINTR and short reads, until len bytes or
 * the end of the file.  Returns the bytes read (< len only at end of file), or -1 with errno. */
static inline ssize_t vc_read_all(int fd, void *buf, size_t len)
{
    return vc_read_loop(fd, buf, len, -1);
}

/* vc_read_all at offset off >= 0 (pread: the file position is left alone).  Returns the bytes
 * read (< len only at end of file), or -1 with errno. */
static inline ssize_t vc_pread_all(int fd, void *buf, size_t len, off_t off)
{
    return vc_read_loop(fd, buf, len, off);
}

#endif /* VC_FD_IO_H */
