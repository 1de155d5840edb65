/* debug_offsets.c — read and check a live CPython 3.14+'s _Py_DebugOffsets (debug_offsets.h).
 *
 * Where: the ELF that holds the interpreter (libpython3.X.so when mapped, else the
 * executable) has a section ".PyRuntime" holding exactly _PyRuntime, whose first member is
 * the table; the `_PyRuntime` symbol is the fallback for a file whose section headers were
 * stripped.  The file is opened the target's way (its /proc/PID/map_files entry, then its root
 * + path without following a last symlink), non-blocking, and used only if it is a regular
 * file with the mapping's inode: nothing in the target's filesystem can make us read a FIFO
 * or another file.
 *
 * What: the table grows between releases and its fields moved (3.15 inserted thread-state
 * fields before native_thread_id), so the positions are per minor version (the table below,
 * from CPython's Include/internal/pycore_debug_offsets.h), and the values are then checked
 * against each other; anything inconsistent is refused with -EPROTO.
 */
#include "debug_offsets.h"
#include "bounded_read.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "elf.h"
#include "proc.h"

#define COOKIE "xdebugpy"
/* One read of the target's memory (bounded_read.h): far more than a read ever takes. */
#define DBG_READ_TIMEOUT_MS 2000

/* Byte positions inside _Py_DebugOffsets of the fields vcattach reads.  The first sections
 * (runtime, interpreter and the start of the thread state) are the same in 3.14 and 3.15;
 * native_thread_id and the debugger-support section moved.  `size` is sizeof(the table). */
struct layout {
    int minor;
    uint16_t native_id, debugger_support, size;
};
static const struct layout layouts[] = {
    {14, 224, 712, 760},
    {15, 248, 840, 888},
};
enum {
    POS_INTERPRETERS_HEAD = 40,    /* runtime_state.interpreters_head */
    POS_INTERP_SIZE = 48,          /* interpreter_state.size */
    POS_INTERP_ID = 56,            /* interpreter_state.id */
    POS_INTERP_NEXT = 64,          /* interpreter_state.next */
    POS_THREADS_HEAD = 72,         /* interpreter_state.threads_head */
    POS_THREADS_MAIN = 80,         /* interpreter_state.threads_main */
    POS_GIL_LOCKED = 144,          /* interpreter_state.gil_runtime_state_locked */
    POS_GIL_HOLDER = 152,          /* interpreter_state.gil_runtime_state_holder */
    POS_TSTATE_SIZE = 176,         /* thread_state.size */
    POS_TSTATE_NEXT = 192,         /* thread_state.next */
    POS_TSTATE_INTERP = 200,       /* thread_state.interp */
    /* debugger_support: eval_breaker, remote_debugger_support, remote_debugging_enabled,
     * debugger_pending_call, debugger_script_path, debugger_script_path_size */
};

struct vm_read {
    pid_t pid;
    uint64_t addr;
};

int dbg_read_in_child(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

static int vm_read(void *arg, void *buf, size_t len)
{
    const struct vm_read *r = arg;
    return dbg_read_in_child(r->pid, r->addr, buf, len);
}

/* The address comes from the target's memory (pointers it controls), and may be in a
 * FUSE-backed mapping whose daemon never answers: read in a child with a deadline
 * (bounded_read.h). */
int dbg_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    struct vm_read r = {.pid = pid, .addr = addr};
    return bounded_read("dbg", vm_read, &r, buf, len, DBG_READ_TIMEOUT_MS);
}

int dbg_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec local = {(void *)buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
    return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

static int is_libpython(const char *base)
{
    return !strncmp(base, "libpython3.", 11) && strstr(base, ".so") != NULL;
}

/* fd of a regular file with the mapping's inode, or -errno. */
static int open_checked(const char *path, int flags, const struct proc_map *m)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != m->inode) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

/* The mapped interpreter ELF, opened the target's way. */
static int open_interpreter(pid_t pid, const struct proc_map *m)
{
    char path[4096 + 64];
    snprintf(path, sizeof path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start,
             m->end);
    int fd = open_checked(path, 0, m); /* a magic link: following it is its purpose */
    if (fd >= 0)
        return fd;
    if (proc_root_path(pid, m->path, path, sizeof path) < 0)
        return -ENAMETOOLONG;
    return open_checked(path, O_NOFOLLOW, m);
}

static uint64_t u64_at(const unsigned char *t, size_t pos)
{
    uint64_t v;
    memcpy(&v, t + pos, sizeof v);
    return v;
}

/* 1 when [off, off + len) lies inside a structure of `size` bytes. */
static int inside(uint64_t off, uint64_t len, uint64_t size)
{
    return off < size && len <= size - off;
}

static int check_layout(struct py_debug_offsets *o, const unsigned char *t,
                        const struct layout *l, char *why, size_t cap)
{
    o->interpreters_head = u64_at(t, POS_INTERPRETERS_HEAD);
    o->interp_size = u64_at(t, POS_INTERP_SIZE);
    o->interp_id = u64_at(t, POS_INTERP_ID);
    o->interp_next = u64_at(t, POS_INTERP_NEXT);
    o->threads_head = u64_at(t, POS_THREADS_HEAD);
    o->threads_main = u64_at(t, POS_THREADS_MAIN);
    o->gil_locked = u64_at(t, POS_GIL_LOCKED);
    o->gil_holder = u64_at(t, POS_GIL_HOLDER);
    o->tstate_size = u64_at(t, POS_TSTATE_SIZE);
    o->tstate_next = u64_at(t, POS_TSTATE_NEXT);
    o->tstate_interp = u64_at(t, POS_TSTATE_INTERP);
    o->tstate_native_id = u64_at(t, l->native_id);
    size_t d = l->debugger_support;
    o->eval_breaker = u64_at(t, d);
    o->remote_support = u64_at(t, d + 8);
    o->remote_debug_enabled = u64_at(t, d + 16);
    o->pending_call = u64_at(t, d + 24);
    o->script_path = u64_at(t, d + 32);
    o->script_path_size = u64_at(t, d + 40);
    uint64_t runtime_size = u64_at(t, 24);
    const char *bad = NULL;
    if (runtime_size < 4096 || runtime_size > (64u << 20) ||
        !inside(o->interpreters_head, 8, runtime_size))
        bad = "runtime state";
    else if (o->interp_size < 512 || o->interp_size > (64u << 20) ||
             !inside(o->interp_id, 8, o->interp_size) ||
             !inside(o->interp_next, 8, o->interp_size) ||
             !inside(o->threads_head, 8, o->interp_size) ||
             !inside(o->threads_main, 8, o->interp_size) ||
             !inside(o->gil_locked, 4, o->interp_size) ||
             !inside(o->gil_holder, 8, o->interp_size) ||
             !inside(o->remote_debug_enabled, 4, o->interp_size))
        bad = "interpreter state";
    else if (o->tstate_size < 256 || o->tstate_size > (1u << 20) ||
             !inside(o->tstate_next, 8, o->tstate_size) ||
             !inside(o->tstate_interp, 8, o->tstate_size) ||
             !inside(o->tstate_native_id, 8, o->tstate_size) ||
             !inside(o->eval_breaker, 8, o->tstate_size))
        bad = "thread state";
    else if (o->script_path_size < 64 || o->script_path_size > 65536 ||
             !inside(o->pending_call, 4, o->script_path) ||
             !inside(o->remote_support, o->script_path + o->script_path_size, o->tstate_size))
        bad = "remote debugger support";
    if (bad)
        snprintf(why, cap, "its %s offsets are not where 3.%d keeps them", bad, l->minor);
    return bad ? -1 : 0;
}

/* Where _PyRuntime is in pid (o->runtime, o->file: the interpreter's file, libpython or the
 * executable) and the size of its .PyRuntime section in *size.  0 or -errno with err. */
static int find_runtime(pid_t pid, struct py_debug_offsets *o, uint64_t *size, char *err,
                        size_t errlen)
{
    struct proc_maps maps;
    int rc = proc_read_maps_or_explain(pid, &maps, err, errlen);
    if (rc < 0)
        return rc;
    const struct proc_map *m = proc_find_module(&maps, is_libpython);
    if (!m) {
        char exe[64];
        struct stat st;
        snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
        if (stat(exe, &st) == 0)
            m = proc_find_inode(&maps, st.st_dev, (uint64_t)st.st_ino);
    }
    if (!m) {
        snprintf(err, errlen, "pid %d maps no libpython and its executable was not found in "
                              "its memory map", (int)pid);
        proc_free_maps(&maps);
        return -ENOENT;
    }
    snprintf(o->file, sizeof o->file, "%s", m->path);
    int fd = open_interpreter(pid, m);
    struct elf_file ef;
    rc = fd < 0 ? fd : elf_open_fd(fd, &ef);
    if (fd >= 0)
        close(fd); /* the mapping stays valid */
    if (rc < 0) {
        snprintf(err, errlen, "cannot read %s of pid %d: %s", o->file, (int)pid, strerror(-rc));
        proc_free_maps(&maps);
        return rc;
    }
    uint64_t vaddr = 0;
    if (elf_section(&ef, ".PyRuntime", &vaddr, size) < 0) {
        *size = 4096; /* stripped section headers: the symbol, the table fits in a page */
        if (elf_lookup(&ef, "_PyRuntime", &vaddr) < 0)
            vaddr = 0;
    }
    o->runtime = vaddr ? elf_load_bias(&ef, m->start) + vaddr : 0;
    elf_close(&ef);
    proc_free_maps(&maps);
    if (!o->runtime) {
        snprintf(err, errlen, "%s has no .PyRuntime section nor _PyRuntime symbol (CPython "
                              "3.14+ has)", o->file);
        return -ENOENT;
    }
    return 0;
}

/* The layout of the table's head (cookie, version, free-threaded flag) for its minor, the
 * version in o->version.  The layout, or NULL with *rc and err. */
static const struct layout *table_layout(pid_t pid, struct py_debug_offsets *o, uint64_t size,
                                         int *rc, char *err, size_t errlen)
{
    unsigned char t[24];
    *rc = dbg_read(pid, o->runtime, t, sizeof t);
    if (*rc < 0) {
        snprintf(err, errlen, "cannot read _PyRuntime of pid %d: %s", (int)pid, strerror(-*rc));
        return NULL;
    }
    o->version = u64_at(t, 8);
    int major = (int)((o->version >> 24) & 0xff), minor = (int)((o->version >> 16) & 0xff);
    *rc = -ENOENT;
    if (memcmp(t, COOKIE, 8) != 0 || major != 3 || minor < 14) {
        snprintf(err, errlen, "%s has no debug offsets table (CPython 3.14+ has one)", o->file);
        return NULL;
    }
    *rc = -EPROTO;
    if (u64_at(t, 16) != 0) {
        snprintf(err, errlen, "pid %d runs a free-threaded CPython 3.%d, whose thread states "
                              "vcattach does not handle", (int)pid, minor);
        return NULL;
    }
    const struct layout *l = NULL;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].minor == minor)
            l = &layouts[i];
    if (!l)
        snprintf(err, errlen, "vcattach knows the debug offsets of CPython 3.14 and 3.15 only, "
                              "and pid %d runs 3.%d: use --method ptrace", (int)pid, minor);
    else if (l->size > size)
        snprintf(err, errlen, "the .PyRuntime section of %s is too small for 3.%d's debug "
                              "offsets", o->file, minor);
    return l && l->size <= size ? l : NULL;
}

int debug_offsets_read(pid_t pid, struct py_debug_offsets *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    uint64_t size = 0;
    int rc = find_runtime(pid, o, &size, err, errlen);
    if (rc < 0)
        return rc;
    const struct layout *l = table_layout(pid, o, size, &rc, err, errlen);
    if (l == NULL)
        return rc;
    unsigned char t[1024];
    if (l->size > sizeof t) {
        snprintf(err, errlen, "the debug offsets of %s are larger than vcattach reads", o->file);
        return -EPROTO;
    }
    rc = dbg_read(pid, o->runtime, t, l->size);
    if (rc < 0) {
        snprintf(err, errlen, "cannot read _PyRuntime of pid %d: %s", (int)pid, strerror(-rc));
        return rc;
    }
    char why[128];
    if (check_layout(o, t, l, why, sizeof why) < 0) {
        snprintf(err, errlen, "the debug offsets of pid %d (Python 3.%d.%d) have a layout "
                              "vcattach does not know (%s): use --method ptrace",
                 (int)pid, (int)((o->version >> 16) & 0xff), (int)((o->version >> 8) & 0xff),
                 why);
        return -EPROTO;
    }
    return 0;
}
