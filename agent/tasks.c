/* tasks.c — asyncio task steps: the markers and names of tasks.h.
 *
 * Everything here runs on a traced thread inside its hook, with the GIL, or on the agent
 * thread's GIL visit.  The calls into the interpreter are C functions of _asyncio (and
 * str's UTF-8 view): no Python frame runs, so no backend sees its own work, and the eval
 * backend is not re-entered.  The exception being raised, if any, is put back as it was.
 */
#include "tasks.h"
#include "record.h"

#include <stdlib.h>
#include <string.h>

#define VC_TASK_SETS 16384u /* x 4 ways x 16 bytes: 1 MiB */
#define VC_TASK_WAYS 4u

struct task_slot {
    const void *task; /* identity only, never dereferenced */
    uint32_t num;
    uint32_t pad;
};

static struct task_slot *g_slots; /* kept for the process, cleared per session */
static uint32_t g_next_num;
/* The running task, cheapest first (bench/asyncio/run):
 *  - _asyncio._current_tasks (3.8-3.13), the dict {loop: task running a step}: while a step
 *    runs its loop is in it, so when it holds one entry (one loop running a step in the
 *    process: the common case) that entry is ours, and no call is made;
 *  - else _asyncio.current_task() (3.12+; from 3.14 the only way, kept per thread state);
 *  - else the dict's entry for _asyncio._get_running_loop() (3.8-3.11), which costs a
 *    getpid() system call there (asyncio's fork check): ~3 µs a step measured on this VM. */
static PyObject *g_current_task;  /* owned while tracking, or NULL */
static PyObject *g_running_loop;  /* owned while tracking, or NULL */
static PyObject *g_current_tasks; /* a dict, owned while tracking, or NULL */
static PyTypeObject *g_task_type; /* _asyncio.Task (owned while tracking) */

/* One record into t's chunk (a marker: not a call, never counted as one). */
static void put(vc_session *s, vc_thread *t, uint32_t id, uint64_t start, uint64_t dur,
                uint32_t flags)
{
    vc_chunk *c = t->chunk;
    if (c == NULL || c->count == VC_CHUNK_RECORDS) {
        c = vc_record_new_chunk(s, t, start, start);
        if (c == NULL)
            return;
    }
    c->rec[c->count] = (vc_record){.start = start, .dur = dur, .id = id, .flags = flags};
    vc_chunk_publish(c, c->count);
}

/* The task's number: a fresh one when its coroutine starts (first) or it is not in the
 * table; *fresh says which. */
static uint32_t number_of(const void *task, int first, int *fresh)
{
    uintptr_t h = (uintptr_t)task;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    struct task_slot *set = &g_slots[(h >> 40) % VC_TASK_SETS * VC_TASK_WAYS];
    struct task_slot *victim = &set[0];
    for (uint32_t w = 0; w < VC_TASK_WAYS; w++) {
        if (set[w].task == task && !first) {
            *fresh = 0;
            return set[w].num;
        }
        if (set[w].task == task) {
            victim = &set[w];
            break;
        }
        if (set[w].num < victim->num)
            victim = &set[w]; /* the oldest (or an empty way: 0) */
    }
    *fresh = 1;
    victim->task = task;
    victim->num = ++g_next_num;
    return victim->num;
}

/* The task's name as records (tasks.h): get_name() of asyncio's own Task; a subclass (whose
 * get_name may be Python code) is named by its type. */
static void put_name(vc_session *s, vc_thread *t, PyObject *task, uint32_t num)
{
    char buf[VC_TASK_NAME_MAX];
    size_t n = 0;
    PyObject *name = NULL;
    if (Py_TYPE(task) == g_task_type)
        name = PyObject_CallMethod(task, "get_name", NULL);
    Py_ssize_t len = 0;
    const char *utf8 = name != NULL && PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &len)
                                                              : NULL;
    if (utf8 == NULL) {
        PyErr_Clear();
        utf8 = Py_TYPE(task)->tp_name;
        len = (Py_ssize_t)strlen(utf8);
    }
    n = (size_t)len < sizeof buf ? (size_t)len : sizeof buf;
    if (n < (size_t)len) /* cut at a character's first byte */
        while (n > 0 && ((unsigned char)utf8[n] & 0xc0) == 0x80)
            n--;
    memset(buf, 0, sizeof buf);
    memcpy(buf, utf8, n);
    Py_XDECREF(name);
    for (uint32_t k = 0; k < VC_TASK_NAME_PARTS && (k == 0 || 16 * k < n); k++) {
        uint64_t lo, hi;
        memcpy(&lo, buf + 16 * k, 8);
        memcpy(&hi, buf + 16 * k + 8, 8);
        put(s, t, VC_ID_TASK_NAME_0 - k, lo, hi, num);
    }
}

void vc_tasks_step(vc_session *s, vc_thread *t, PyCodeObject *co)
{
    uint32_t d = t->depth;
    if (d == 0 || d > VC_STACK_DEPTH)
        return;
    vc_frame *f = &t->stack[d - 1];
    int awaited = d >= 2 && (t->stack[d - 2].flags & VC_FRAME_CORO);
    f->flags |= VC_FRAME_CORO;
    if (awaited || !(co->co_flags & CO_COROUTINE) || t->interp_slot != 0 ||
        f->id == VC_ID_NONE || g_task_type == NULL)
        return;
    vc_exc_saved saved;
    vc_compat_exc_save(&saved);
    PyObject *task = NULL, *key, *value;
    Py_ssize_t pos = 0;
    if (g_current_tasks != NULL && PyDict_GET_SIZE(g_current_tasks) == 1 &&
        PyDict_Next(g_current_tasks, &pos, &key, &value)) {
        task = value;
        Py_INCREF(task);
    } else if (g_current_task != NULL) {
        task = PyObject_CallObject(g_current_task, NULL);
    } else if (g_running_loop != NULL && g_current_tasks != NULL) {
        PyObject *loop = PyObject_CallObject(g_running_loop, NULL);
        if (loop != NULL && loop != Py_None) {
            task = PyDict_GetItemWithError(g_current_tasks, loop);
            Py_XINCREF(task);
        }
        Py_XDECREF(loop);
    }
    if (task == NULL)
        PyErr_Clear(); /* no running loop: a coroutine driven by hand */
    if (task != NULL && task != Py_None) {
        int fresh;
        uint32_t num = number_of(task, !(f->flags & VC_REC_RESUME), &fresh);
        if (fresh)
            put_name(s, t, task, num);
        put(s, t, VC_ID_TASK, f->start, num, 0);
    }
    Py_XDECREF(task);
    vc_compat_exc_restore(&saved);
}

static PyObject *attr_or_null(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (v == NULL)
        PyErr_Clear();
    return v;
}

void vc_tasks_visit(vc_session *s)
{
    if (s->tasks_on || !s->stream || s->no_tasks || s->backend == NULL)
        return;
    PyObject *name = PyUnicode_FromString("_asyncio");
    PyObject *mod = name != NULL ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    if (mod == NULL) { /* not imported (yet): nothing to track */
        PyErr_Clear();
        return;
    }
    PyObject *fn = attr_or_null(mod, "current_task");
    PyObject *loop = attr_or_null(mod, "_get_running_loop");
    PyObject *tasks = attr_or_null(mod, "_current_tasks");
    PyObject *type = attr_or_null(mod, "Task");
    Py_DECREF(mod);
    if (fn != NULL && !PyCallable_Check(fn))
        Py_CLEAR(fn);
    if (loop != NULL && !PyCallable_Check(loop))
        Py_CLEAR(loop);
    if (tasks != NULL && !PyDict_CheckExact(tasks))
        Py_CLEAR(tasks);
    int usable = type != NULL && PyType_Check(type) &&
                 (fn != NULL || (loop != NULL && tasks != NULL));
    if (!usable) {
        Py_XDECREF(fn);
        Py_XDECREF(loop);
        Py_XDECREF(tasks);
        Py_XDECREF(type);
        PyErr_Clear();
        return;
    }
    if (g_slots == NULL)
        g_slots = calloc((size_t)VC_TASK_SETS * VC_TASK_WAYS, sizeof *g_slots);
    else
        memset(g_slots, 0, (size_t)VC_TASK_SETS * VC_TASK_WAYS * sizeof *g_slots);
    if (g_slots == NULL) {
        Py_XDECREF(fn);
        Py_XDECREF(loop);
        Py_XDECREF(tasks);
        Py_DECREF(type);
        return;
    }
    g_next_num = 0;
    g_current_task = fn;
    g_running_loop = loop;
    g_current_tasks = tasks;
    g_task_type = (PyTypeObject *)type;
    s->tasks_on = 1;
}

void vc_tasks_stop(vc_session *s)
{
    s->tasks_on = 0;
    Py_CLEAR(g_current_task);
    Py_CLEAR(g_running_loop);
    Py_CLEAR(g_current_tasks);
    PyObject *type = (PyObject *)g_task_type;
    g_task_type = NULL;
    Py_XDECREF(type);
}
