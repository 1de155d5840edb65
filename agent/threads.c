/* threads.c — per-thread state: the table of traced threads, seeding a thread's shadow stack
 * with the frames already running, OS ids and threading names.  A leaf: it calls only
 * compat.c and names.h (the threading start hook that uses it is starthook.c).
 *
 * The table is one mmap of VC_MAX_THREADS states made once per process and never unmapped:
 * a TLS slot left over from an earlier session still points into valid memory (its
 * generation no longer matches, so it is ignored).  Used pages are returned at session end.
 */
#include "threads.h"
#include "interps.h"
#include "session.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

vc_thread vc_ignored_thread; /* the agent's own thread and threads beyond the table */

static vc_thread *table_base(void)
{
    static vc_thread *base;
    if (base == NULL) {
        void *p = mmap(NULL, (size_t)VC_MAX_THREADS * sizeof(vc_thread), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        base = p;
    }
    return base;
}

/* A native thread id CPython reports, if it is one of this process's threads.  After fork,
 * the child's main thread keeps the parent's native_id (in the thread state and in
 * threading's Thread object): taken as is, the child's main thread would be filed under a
 * thread of its parent.  0 (unknown) lets the hook take gettid() on the thread's first event. */
static pid_t own_tid(unsigned long native)
{
    if (native == 0 || native > 0x7fffffffu)
        return 0;
    /* Without /proc (a chroot or container that does not mount it) nothing can be checked:
     * trust CPython, which is right everywhere but in a fork child's inherited main thread
     * (that one is corrected by gettid() when it is the current thread, vc_thread_new). */
    if (access("/proc/self/task", F_OK) != 0)
        return (pid_t)native;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%lu", native);
    return access(path, F_OK) == 0 ? (pid_t)native : 0;
}

vc_thread *vc_thread_new(vc_session *s, PyThreadState *ts)
{
    if (s->threads == NULL || s->nthreads >= VC_MAX_THREADS)
        return NULL;
    vc_thread *t = &s->threads[s->nthreads];
    /* Only the header is cleared: the stack is written before it is read. */
    memset(t, 0, offsetof(vc_thread, stack));
    t->index = s->nthreads;
    t->gen = s->gen;
    t->tstate = ts;
    t->ident = ts ? (unsigned long)ts->thread_id : 0;
    t->interp_slot = ts ? vc_interps_slot_of(vc_compat_tstate_interp(ts), &t->interp_id) : 0;
    if (ts != NULL && ts == vc_compat_current_tstate())
        t->tid = (pid_t)syscall(SYS_gettid);
    else
        t->tid = ts ? own_tid(vc_compat_native_tid(ts)) : 0;
    /* Published whole: the agent thread reads the table for names without the lock among
     * GILs (hooklock.h), while a hook of an own-GIL interpreter may be adding a thread. */
    __atomic_store_n(&s->nthreads, t->index + 1, __ATOMIC_RELEASE);
    return t;
}

vc_thread *vc_thread_for_tstate(vc_session *s, PyThreadState *ts)
{
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->tstate == ts && !t->bound)
            return t;
    }
    return NULL;
}

vc_thread *vc_thread_for_current(vc_session *s, PyThreadState *ts)
{
    vc_thread *t = vc_thread_for_tstate(s, ts);
    if (t != NULL || ts == NULL)
        return t;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    int64_t id;
    uint32_t slot = vc_interps_slot_of(vc_compat_tstate_interp(ts), &id);
    for (uint32_t i = 0; i < s->nthreads; i++) {
        t = &s->threads[i];
        if (t->tstate == ts && t->bound && t->tid == tid && t->interp_slot == slot &&
            t->interp_id == id)
            return t;
    }
    return NULL;
}

/* First line of a small procfs file of thread tid, without its newline; "" if unreadable. */
static void read_task_file(pid_t tid, const char *what, char *buf, size_t len)
{
    char path[64];
    buf[0] = '\0';
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

/* t->blocked: the kernel's view of thread tid right now — its state letter (R running,
 * S sleeping, D disk…) and the kernel function it sleeps in (wchan), or else the system call
 * it is in.  Plain file reads, no Python: known only when the OS tid is (3.11+ records it in
 * the thread state; before, a thread's tid is learnt on its first event, after seeding). */
static void note_blocked(vc_thread *t)
{
    char stat[512], wchan[64], sysc[64];
    t->blocked[0] = '\0';
    if (t->tid <= 0)
        return;
    read_task_file(t->tid, "stat", stat, sizeof stat);
    const char *paren = strrchr(stat, ')');
    if (paren == NULL || paren[1] != ' ' || paren[2] == '\0')
        return;
    char state = paren[2];
    read_task_file(t->tid, "wchan", wchan, sizeof wchan);
    read_task_file(t->tid, "syscall", sysc, sizeof sysc);
    sysc[strcspn(sysc, " ")] = '\0'; /* the number; "running" when not in one */
    if (wchan[0] && strcmp(wchan, "0") != 0)
        snprintf(t->blocked, sizeof t->blocked, "%c %.40s", state, wchan);
    else if (sysc[0] && strcmp(sysc, "running") != 0)
        snprintf(t->blocked, sizeof t->blocked, "%c syscall %.20s", state, sysc);
    else
        snprintf(t->blocked, sizeof t->blocked, "%c", state);
    for (char *p = t->blocked; *p; p++) /* it goes into JSON verbatim: keep it plain */
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '?';
}

void vc_thread_seed(vc_session *s, vc_thread *t, PyThreadState *ts, uint64_t now, int by_frame)
{
    /* The null hook (--null-hook) records nothing, so nothing is seeded either: no hook of it
     * would pop a seeded frame when it returns, and the stop would close every one as running
     * to the end (a call caught at attach, returned long before, shown as lasting the whole
     * trace; a loaded CI machine caught one). */
    if (s->null_hook)
        return;
    PyObject *codes[VC_STACK_DEPTH];
    const void *frames[VC_STACK_DEPTH];
    int n = vc_compat_thread_codes(ts, codes, frames, VC_STACK_DEPTH);
    /* The legacy hook identifies a running call by its frame, sys.monitoring by its code. */
    /* codes[] is innermost first: push the outermost first. */
    /* Frames the filters leave out are not pushed, as the hooks would not have pushed them. */
    for (int i = n - 1; i >= 0; i--) {
        uint32_t id = vc_pins_lookup(&s->pins, codes[i], NULL, 0, t->interp_slot);
        if (id == VC_ID_EXCLUDED)
            continue;
        uint32_t d = t->depth++;
        vc_frame *f = &t->stack[d];
        f->match = by_frame == VC_SEED_BY_EVAL ? vc_compat_eval_identity((PyFrameObject *)frames[i])
                   : by_frame ? frames[i] : (const void *)codes[i];
        f->id = d >= s->filter.depth_limit ? VC_ID_NONE : id;
        f->is_c = 0;
        f->flags = VC_REC_AT_ATTACH | (i == 0 ? VC_REC_AT_ATTACH_INNER : 0);
        f->start = now;
    }
    t->seeded = t->depth;
    if (n > 0)
        note_blocked(t);
    for (int i = 0; i < n; i++)
        Py_DECREF(codes[i]);
}

/* t's name: `base`, and for a sub-interpreter's thread state "base [interp N]" (the same OS
 * thread's other states are other tracks: docs/cvf-format.md). */
static void set_name_utf8(vc_thread *t, const char *base)
{
    char buf[1100];
    const char *u = base;
    if (t->interp_id != 0) {
        snprintf(buf, sizeof buf, "%.1000s [interp %lld]", base, (long long)t->interp_id);
        u = buf;
    }
    if (t->name != NULL && strcmp(t->name, u) == 0)
        return;
    char *copy = strdup(u);
    if (copy != NULL) {
        free(t->name);
        t->name = copy;
    }
}

static void set_name(vc_thread *t, PyObject *name)
{
    if (name == NULL || !PyUnicode_Check(name))
        return;
    const char *u = PyUnicode_AsUTF8(name);
    if (u == NULL) {
        PyErr_Clear();
        return;
    }
    set_name_utf8(t, u);
}

int32_t vc_thread_track_tid(const vc_thread *t)
{
    if (t->interp_id == 0 || t->tid <= 0 || t->tid >= (1 << 22))
        return (int32_t)t->tid;
    return (int32_t)t->tid | (int32_t)((uint32_t)(t->interp_id % 511 + 1) << 22);
}

static PyObject *threading_active(void)
{
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    if (modules == NULL || !PyDict_Check(modules))
        return NULL;
    PyObject *threading = PyDict_GetItemString(modules, "threading"); /* borrowed */
    if (threading == NULL)
        return NULL;
    PyObject *active = PyObject_GetAttrString(threading, "_active");
    if (active == NULL || !PyDict_Check(active)) {
        PyErr_Clear();
        Py_XDECREF(active);
        return NULL;
    }
    return active;
}

static unsigned long attr_ulong(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    unsigned long r = PyLong_Check(v) ? PyLong_AsUnsignedLong(v) : 0;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        r = 0;
    }
    Py_DECREF(v);
    return r;
}

/* A sub-interpreter's thread state whose OS thread the main interpreter's threading does not
 * name (a thread started by the sub-interpreter's own threading or by C, or no threading
 * imported): the name of the same OS thread's main-interpreter state, else MainThread for the
 * process's main thread, else Thread-TID; with its interpreter (set_name_utf8). */
static void name_sub_interpreter_states(vc_session *s)
{
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->interp_id == 0 || t->name != NULL || t->tid <= 0)
            continue;
        const char *base = NULL;
        for (uint32_t j = 0; j < s->nthreads && base == NULL; j++)
            if (s->threads[j].interp_id == 0 && s->threads[j].tid == t->tid)
                base = s->threads[j].name;
        char fallback[32];
        if (base == NULL) {
            if (t->tid == getpid())
                snprintf(fallback, sizeof fallback, "MainThread");
            else
                snprintf(fallback, sizeof fallback, "Thread-%d", (int)t->tid);
            base = fallback;
        }
        set_name_utf8(t, base);
    }
}

/* Names every known thread from threading._active, reading plain attributes (_ident,
 * _native_id, _name) so that no Python code runs. */
void vc_threads_capture_names(vc_session *s)
{
    PyObject *active = threading_active();
    if (active == NULL) {
        name_sub_interpreter_states(s);
        return;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *thread;
    while (PyDict_Next(active, &pos, &key, &thread)) {
        unsigned long ident = attr_ulong(thread, "_ident");
        unsigned long native = attr_ulong(thread, "_native_id");
        PyObject *name = PyObject_GetAttrString(thread, "_name");
        if (name == NULL) {
            PyErr_Clear();
            continue;
        }
        for (uint32_t i = 0; i < s->nthreads; i++) {
            vc_thread *t = &s->threads[i];
            /* ident first: a fork child's threading keeps the parent's _native_id. */
            int same = (ident != 0 && ident == t->ident && t->tstate) ||
                       (native != 0 && t->tid != 0 && (pid_t)native == t->tid);
            if (same) {
                set_name(t, name);
                if (t->tid == 0)
                    t->tid = own_tid(native);
            }
        }
        Py_DECREF(name);
    }
    Py_DECREF(active);
    name_sub_interpreter_states(s);
}

void vc_thread_capture_current_name(vc_session *s, vc_thread *t)
{
    PyObject *active = threading_active();
    if (active == NULL)
        return;
    PyObject *key = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    PyObject *thread = key ? PyDict_GetItem(active, key) : NULL; /* borrowed */
    if (thread != NULL) {
        PyObject *name = PyObject_GetAttrString(thread, "_name");
        if (name == NULL)
            PyErr_Clear();
        set_name(t, name);
        Py_XDECREF(name);
    }
    Py_XDECREF(key);
    Py_DECREF(active);
    PyErr_Clear();
}

int vc_threads_alloc(vc_session *s)
{
    s->threads = table_base();
    s->nthreads = 0;
    return s->threads ? 0 : -1;
}

void vc_thread_free_all(vc_session *s)
{
    for (uint32_t i = 0; i < s->nthreads; i++) {
        free(s->threads[i].name);
        s->threads[i].name = NULL;
    }
    if (s->threads != NULL && s->nthreads > 0) {
        size_t bytes = (size_t)s->nthreads * sizeof(vc_thread);
        bytes = (bytes + 4095) & ~(size_t)4095;
        madvise(s->threads, bytes, MADV_DONTNEED); /* pages read back as zeros: still valid */
    }
    s->nthreads = 0;
}
