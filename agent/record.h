/* record.h — the hot path shared by the hook backends: shadow-stack push on entry, pop and
 * one 24-byte record on exit.  No allocation, no lock, no Python call (the only interpreter
 * work is Py_INCREF of a key seen for the first time, in names.h).
 *
 * Filters (filter.h) cost at most this path: a code object the globs leave out is never
 * pushed (its verdict is cached in the key table, so it is one lookup); a call deeper than
 * --max-depth is pushed (the depth stays exact, its exit still pairs) but with no id, so it is
 * never stored; a call shorter than --min-dur is popped and not stored.
 */
#ifndef VC_RECORD_H
#define VC_RECORD_H

#include "session.h"

#include <sys/syscall.h>
#include <unistd.h>

/* Out of line (record.c): a fresh chunk for t, or NULL: the record (start, end) is dropped
 * and, when streaming, its time noted in the thread's drop range. */
vc_chunk *vc_record_new_chunk(vc_session *s, vc_thread *t, uint64_t start, uint64_t end);
/* The marker record of t's pending drop range (VC_ID_DROPPED), for the agent thread's last
 * flush: 1 if there was one (then the range is cleared). */
int vc_record_take_drops(vc_thread *t, vc_record *marker);
/* Out of line (record.c): an exit that does not match the top of the shadow stack. */
void vc_record_mismatch(vc_session *s, vc_thread *t, const void *match, int is_c, uint64_t now);
/* At stop (record.c): every call still running ends at `now`, flagged VC_REC_OPEN, so that
 * every started call pairs up; every shadow stack is left empty. */
void vc_record_close_open(vc_session *s, uint64_t now);
/* The same for one thread (its interpreter is ending, interps.c). */
void vc_record_close_thread(vc_session *s, vc_thread *t, uint64_t now);

static inline void vc_record_store(vc_session *s, vc_thread *t, uint32_t id, uint64_t start,
                                   uint64_t end, uint32_t flags)
{
    if (id == VC_ID_NONE)
        return;
    vc_chunk *c = t->chunk;
    if (__builtin_expect(c == NULL || c->count == VC_CHUNK_RECORDS, 0)) {
        c = vc_record_new_chunk(s, t, start, end);
        if (c == NULL)
            return;
    }
    uint32_t n = c->count;
    vc_record *r = &c->rec[n];
    r->start = start;
    r->dur = end >= start ? end - start : 0;
    r->id = id;
    r->flags = flags & VC_REC_MASK;
    vc_chunk_publish(c, n);
}

/* Pushes a call (flags: VC_REC_RESUME for a resumed generator/coroutine, copied into its
 * record); returns its key's id, VC_ID_EXCLUDED when the filters leave it out (then nothing
 * was pushed: a backend that can switch the event off for that code may do so). */
static inline uint32_t vc_record_enter(vc_session *s, vc_thread *t, const void *match,
                                       const void *key, PyObject *qual, int is_c, uint32_t flags)
{
    uint32_t id = vc_pins_lookup(&s->pins, key, qual, is_c, t->interp_slot);
    if (__builtin_expect(id == VC_ID_EXCLUDED, 0))
        return id;
    uint32_t d = t->depth++;
    if (__builtin_expect(d >= VC_STACK_DEPTH, 0)) {
        t->too_deep++;
        return id;
    }
    if (__builtin_expect(t->tid == 0, 0))
        t->tid = (pid_t)syscall(SYS_gettid);
    vc_frame *f = &t->stack[d];
    f->match = match;
    f->id = __builtin_expect(d >= s->filter.depth_limit, 0) ? VC_ID_NONE : id;
    f->is_c = (uint16_t)is_c;
    f->flags = (uint16_t)flags;
    f->start = vc_clock_now(); /* last: the lookup is not charged to the callee */
    return id;
}

static inline void vc_record_exit(vc_session *s, vc_thread *t, const void *match, int is_c)
{
    uint64_t now = vc_clock_now();
    uint32_t depth = t->depth;
    if (depth == 0)
        return; /* the call began before the hook saw this thread */
    if (__builtin_expect(depth > VC_STACK_DEPTH, 0)) {
        t->depth = depth - 1;
        return;
    }
    vc_frame *f = &t->stack[depth - 1];
    if (__builtin_expect(f->match != match || f->is_c != (uint16_t)is_c, 0)) {
        vc_record_mismatch(s, t, match, is_c, now);
        return;
    }
    t->depth = depth - 1;
    if (__builtin_expect(s->filter.min_dur_raw != 0, 0) && now - f->start < s->filter.min_dur_raw)
        return; /* shorter than --min-dur (also: calls past --max-depth have no id) */
    vc_record_store(s, t, f->id, f->start, now, f->flags);
}

/* The fast halves of enter and exit, for the sys.monitoring callbacks (whose every call costs
 * a C-to-C call with its own frame, so what they do inline matters): the common case only,
 * as a leaf (no call, so the callback needs no saved registers), with every rare condition
 * checked before anything is written.  VC_FAST_SLOW: nothing was done, the caller takes the
 * general path (vc_record_enter / vc_record_exit*), which gives the same result. */
#define VC_FAST_DONE 0
#define VC_FAST_SLOW 1
#define VC_FAST_EXCLUDED 2 /* enter only: the code is excluded, nothing pushed (as VC_ID_EXCLUDED) */

/* As vc_record_enter when the TSC is the clock, the key is already pinned, the stack has
 * room and the thread's tid is known. */
static inline int vc_record_enter_fast(vc_session *s, vc_thread *t, const void *match,
                                       const void *key, PyObject *qual, int is_c, uint32_t flags)
{
    uint32_t d = t->depth;
    if (__builtin_expect(!vc_clock_fast_ok() || d >= VC_STACK_DEPTH || t->tid == 0, 0))
        return VC_FAST_SLOW;
    uint32_t id = vc_pins_find(&s->pins, key, qual);
    if (__builtin_expect(id >= VC_ID_EXCLUDED, 0))
        return id == VC_ID_EXCLUDED ? VC_FAST_EXCLUDED : VC_FAST_SLOW;
    t->depth = d + 1;
    vc_frame *f = &t->stack[d];
    f->match = match;
    f->id = __builtin_expect(d >= s->filter.depth_limit, 0) ? VC_ID_NONE : id;
    f->is_c = (uint16_t)is_c;
    f->flags = (uint16_t)flags;
    f->start = vc_clock_fast(); /* last: the lookup is not charged to the callee */
    return VC_FAST_DONE;
}

/* As vc_record_exit when the TSC is the clock, the exit matches the top of the stack and the
 * thread's chunk has room.  A Python exit that matches the top is the same with globs (only
 * included calls are pushed: vc_record_exit_py); a C exit with globs takes the general path
 * (vc_record_exit_c's check of the caller). */
static inline int vc_record_exit_fast(vc_session *s, vc_thread *t, const void *match, int is_c)
{
    if (__builtin_expect(!vc_clock_fast_ok(), 0))
        return VC_FAST_SLOW;
    uint64_t now = vc_clock_fast();
    uint32_t depth = t->depth;
    vc_chunk *c = t->chunk;
    if (__builtin_expect(depth - 1 >= VC_STACK_DEPTH || c == NULL || c->count == VC_CHUNK_RECORDS, 0))
        return VC_FAST_SLOW; /* depth 0 or past the stack; no chunk, or a full one */
    vc_frame *f = &t->stack[depth - 1];
    if (__builtin_expect(f->match != match || f->is_c != (uint16_t)is_c, 0))
        return VC_FAST_SLOW;
    t->depth = depth - 1;
    uint64_t start = f->start;
    if (__builtin_expect(s->filter.min_dur_raw != 0, 0) && now - start < s->filter.min_dur_raw)
        return VC_FAST_DONE;
    if (f->id == VC_ID_NONE)
        return VC_FAST_DONE;
    uint32_t n = c->count;
    vc_record *r = &c->rec[n];
    r->start = start;
    r->dur = now >= start ? now - start : 0;
    r->id = f->id;
    r->flags = f->flags & VC_REC_MASK;
    vc_chunk_publish(c, n);
    return VC_FAST_DONE;
}

/* The exit of a Python call (match: what its entry pushed; code: its code object).  With
 * globs, an exit that is not the top of the stack is first checked against the cached
 * verdict, so that excluded code never pays the mismatch walk.  Returns 1 if the code is
 * excluded (nothing was done). */
static inline int vc_record_exit_py(vc_session *s, vc_thread *t, const void *match, const void *code)
{
    if (__builtin_expect(s->filter.has_globs, 0)) {
        uint32_t d = t->depth;
        if (!(d > 0 && d <= VC_STACK_DEPTH && t->stack[d - 1].match == match) &&
            vc_pins_lookup(&s->pins, code, NULL, 0, t->interp_slot) == VC_ID_EXCLUDED)
            return 1;
    }
    vc_record_exit(s, t, match, 0);
    return 0;
}

/* With globs: 1 if a C call made by the Python call `caller` (frame or code, as pushed) is
 * traced, i.e. the caller's code is included.  The top of the shadow stack answers without a
 * lookup when it is the caller (only included calls are pushed). */
static inline int vc_record_caller_traced(vc_session *s, vc_thread *t, const void *caller,
                                          const void *caller_code)
{
    uint32_t d = t->depth;
    if (d > 0 && d <= VC_STACK_DEPTH && t->stack[d - 1].match == caller && !t->stack[d - 1].is_c)
        return 1;
    return vc_pins_lookup(&s->pins, caller_code, NULL, 0, t->interp_slot) != VC_ID_EXCLUDED;
}

/* The exit of a C call made by `caller`.  With globs, a C exit whose entry was left out (its
 * caller is excluded) must not pop the same function called by an included frame further
 * down: the entry below the top must then be the caller. */
static inline void vc_record_exit_c(vc_session *s, vc_thread *t, const void *ml, const void *caller)
{
    if (__builtin_expect(s->filter.has_globs, 0)) {
        uint32_t d = t->depth;
        if (d >= 2 && d <= VC_STACK_DEPTH && t->stack[d - 2].match != caller)
            return;
    }
    vc_record_exit(s, t, ml, 1);
}

/* The (PyMethodDef, qualifier) of a builtin function or method (PyCFunctionObject). */
static inline void vc_cfunc_fill(PyObject *callable, const PyMethodDef **ml, PyObject **qual)
{
    PyCFunctionObject *fn = (PyCFunctionObject *)callable;
    *ml = fn->m_ml;
    if (fn->m_module != NULL)
        *qual = fn->m_module;
    else if (fn->m_self != NULL)
        *qual = (PyObject *)Py_TYPE(fn->m_self);
    else
        *qual = NULL;
}

/* The (PyMethodDef, qualifier) of a method descriptor: the type that defines the method, not
 * the (sub)class of self: a C method called on a Python subclass keeps its own name (names.c
 * does the same for bound ones). */
static inline void vc_cdescr_fill(PyObject *callable, const PyMethodDef **ml, PyObject **qual)
{
    *ml = ((PyMethodDescrObject *)callable)->d_method;
    *qual = (PyObject *)PyDescr_TYPE(callable);
}

/* The (PyMethodDef, qualifier) of a C callable, as VizTracer names it; 0 if the callable is
 * not a C function we trace.  self_arg: the first argument for method descriptors (or NULL). */
static inline int vc_cfunc_key(PyObject *callable, PyObject *self_arg, const PyMethodDef **ml,
                               PyObject **qual)
{
    PyTypeObject *type = Py_TYPE(callable);
    /* Exact-type tests first: PyCFunction_Check on anything else walks the MRO, and on the
     * monitoring backend this runs for every call (Python functions and classes included). */
    if (type == &PyFunction_Type || type == &PyType_Type || type == &PyMethod_Type)
        return 0;
    if (type == &PyMethodDescr_Type) {
        if (self_arg == NULL)
            return 0;
        vc_cdescr_fill(callable, ml, qual);
        return 1;
    }
    if (vc_compat_is_cfunction_exact(type) || PyCFunction_Check(callable)) {
        vc_cfunc_fill(callable, ml, qual);
        return 1;
    }
    return 0;
}

/* vc_cfunc_key for the fast halves of the monitoring callbacks, exact types only: -1 for any
 * other type (a subclass of builtin_function_or_method needs PyCFunction_Check's MRO walk, a
 * call: the general path does it).  The descriptor's first argument is read only for a
 * descriptor: *self_slot, where `missing` (sys.monitoring.MISSING) means none. */
static inline int vc_cfunc_key_exact(PyObject *callable, PyObject *const *self_slot,
                                     PyObject *missing, const PyMethodDef **ml, PyObject **qual)
{
    PyTypeObject *type = Py_TYPE(callable);
    if (type == &PyFunction_Type || type == &PyType_Type || type == &PyMethod_Type)
        return 0;
    if (type == &PyMethodDescr_Type) {
        if (*self_slot == missing)
            return 0;
        vc_cdescr_fill(callable, ml, qual);
        return 1;
    }
    if (vc_compat_is_cfunction_exact(type)) {
        vc_cfunc_fill(callable, ml, qual);
        return 1;
    }
    return -1;
}

#endif /* VC_RECORD_H */
