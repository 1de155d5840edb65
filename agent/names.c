/* names.c — the pinned key table and key → name resolution (see names.h).
 *
 * Names follow VizTracer: Python "qualname (filename:firstlineno)" (co_qualname on 3.11+,
 * co_name before); C "module.name" when the function has a module, else "Type.name" from the
 * type that defines the method (VizTracer takes the type of self: a subclass's name), else
 * "name".
 */
#include "names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pins_alloc(vc_pins *pins, uint32_t capacity)
{
    pins->slots = calloc(capacity, sizeof *pins->slots);
    pins->by_id = calloc(capacity - capacity / 4, sizeof *pins->by_id);
    if (pins->slots == NULL || pins->by_id == NULL) {
        free(pins->slots);
        free(pins->by_id);
        pins->slots = NULL;
        pins->by_id = NULL;
        return -ENOMEM;
    }
    pins->mask = capacity - 1;
    pins->limit = capacity - capacity / 4;
    return 0;
}

int vc_pins_init(vc_pins *pins, uint32_t capacity)
{
    *pins = (vc_pins){0};
    return pins_alloc(pins, capacity);
}

uint32_t vc_pins_judge(vc_pins *pins, const void *code)
{
    if (!pins->filter->has_globs || vc_filter_code_included(pins->filter, (PyObject *)code))
        return pins->count;
    return VC_ID_EXCLUDED;
}

void vc_pins_each_excluded(vc_pins *pins, uint32_t owner, void (*fn)(PyObject *code, void *ctx),
                           void *ctx)
{
    if (pins->slots == NULL || pins->excluded == 0)
        return;
    for (uint32_t i = 0; i <= pins->mask; i++)
        if (pins->slots[i].ptr != NULL && pins->slots[i].ptr != VC_PIN_TOMBSTONE &&
            pins->slots[i].id == VC_ID_EXCLUDED && pins->slots[i].owner == owner)
            fn((PyObject *)pins->slots[i].ptr, ctx);
}

int vc_pins_maybe_grow(vc_pins *pins)
{
    if (pins->slots == NULL || pins->count + pins->excluded <= (pins->mask + 1) / 2 ||
        pins->mask >= (1u << 30))
        return 0;
    vc_pins bigger = {0};
    if (pins_alloc(&bigger, (pins->mask + 1) * 2) != 0)
        return -ENOMEM;
    uint32_t excluded = 0;
    for (uint32_t i = 0; i <= pins->mask; i++) {
        vc_pin_slot *s = &pins->slots[i];
        if (s->ptr == NULL || s->ptr == VC_PIN_TOMBSTONE)
            continue; /* tombstones are dropped here */
        excluded += s->id == VC_ID_EXCLUDED;
        uint32_t j = vc_pins_hash(s->ptr, s->qual) & bigger.mask;
        while (bigger.slots[j].ptr != NULL)
            j = (j + 1) & bigger.mask;
        bigger.slots[j] = *s;
    }
    memcpy(bigger.by_id, pins->by_id, pins->count * sizeof *pins->by_id);
    bigger.count = pins->count;
    bigger.excluded = excluded;
    bigger.unnamed = pins->unnamed;
    bigger.filter = pins->filter;
    bigger.own_gil = pins->own_gil;
    bigger.arena = pins->arena;
    free(pins->slots);
    free(pins->by_id);
    *pins = bigger;
    return 0;
}

static char *dup_utf8(PyObject *s)
{
    if (s == NULL || !PyUnicode_Check(s))
        return strdup("?");
    const char *u = PyUnicode_AsUTF8(s);
    if (u == NULL) {
        PyErr_Clear();
        return strdup("?");
    }
    return strdup(u);
}

/* The UTF-8 of a str from its characters alone, without asking the interpreter it belongs to:
 * PyUnicode_AsUTF8 may allocate (with the *current* interpreter's allocator) and cache the
 * result in the object, which an interpreter with its own GIL may be doing at the same
 * moment.  A str's characters never change.  3.12+ only (every str is "ready" there, and only
 * there do interpreters have their own GIL).  Surrogates read "?", as PyUnicode_AsUTF8's
 * failure does. */
static char *dup_utf8_readonly(PyObject *s)
{
    if (s == NULL || !PyUnicode_Check(s))
        return strdup("?");
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    char *out = n >= 0 && n < (1 << 24) ? malloc((size_t)n * 4 + 1) : NULL;
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            out[o++] = (char)c;
        } else if (c < 0x800) {
            out[o++] = (char)(0xc0 | (c >> 6));
            out[o++] = (char)(0x80 | (c & 0x3f));
        } else if (c >= 0xd800 && c <= 0xdfff) {
            free(out);
            return strdup("?");
        } else if (c < 0x10000) {
            out[o++] = (char)(0xe0 | (c >> 12));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (c & 0x3f));
        } else {
            out[o++] = (char)(0xf0 | (c >> 18));
            out[o++] = (char)(0x80 | ((c >> 12) & 0x3f));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (c & 0x3f));
        }
    }
    out[o] = '\0';
    return out;
}

static char *python_name(PyCodeObject *co, int foreign)
{
    char *(*dup)(PyObject *) = foreign ? dup_utf8_readonly : dup_utf8;
    char *name = dup(vc_compat_code_name(co));
    char *file = dup(co->co_filename);
    char *out = NULL;
    if (name != NULL && file != NULL &&
        asprintf(&out, "%s (%s:%d)", name, file, co->co_firstlineno) < 0)
        out = NULL;
    free(name);
    free(file);
    return out;
}

/* The class in type's MRO whose tp_methods holds ml: the one that defines the method.  A
 * bound C method (the legacy hook's C_CALL argument) only knows the type of its self, a
 * subclass maybe (`SQLiteCursorWrapper.execute` for sqlite3.Cursor.execute), next to a
 * Python method of that very name.  Runs once per key, at name resolution. */
static PyTypeObject *defining_type(PyTypeObject *type, const PyMethodDef *ml)
{
    PyObject *mro = type->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro))
        return type;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *base = PyTuple_GET_ITEM(mro, i);
        if (!PyType_Check(base))
            continue;
        for (const PyMethodDef *m = ((PyTypeObject *)base)->tp_methods; m && m->ml_name; m++)
            if (m == ml)
                return (PyTypeObject *)base;
    }
    return type;
}

/* foreign: the key's interpreter has its own GIL and is not the current one: only what never
 * changes is read (the type's own name: the sys.monitoring backend, the only one that traces
 * such interpreters, qualifies a method by its defining type already; the module's C name). */
static char *c_name(const PyMethodDef *ml, PyObject *qual, int foreign)
{
    const char *fname = ml->ml_name ? ml->ml_name : "?";
    char *out = NULL;
    if (qual == NULL)
        return strdup(fname);
    char *prefix = NULL;
    if (PyType_Check(qual)) {
        PyTypeObject *type = (PyTypeObject *)qual;
        prefix = strdup((foreign ? type : defining_type(type, ml))->tp_name);
    } else if (PyModule_Check(qual) && foreign) {
        PyModuleDef *def = PyModule_GetDef(qual);
        prefix = strdup(def != NULL && def->m_name != NULL ? def->m_name : "?");
    } else if (PyModule_Check(qual)) {
        const char *m = PyModule_GetName(qual);
        if (m == NULL)
            PyErr_Clear();
        prefix = strdup(m ? m : "?");
    } else {
        prefix = foreign ? dup_utf8_readonly(qual) : dup_utf8(qual);
    }
    if (prefix != NULL && asprintf(&out, "%s.%s", prefix, fname) < 0)
        out = NULL;
    free(prefix);
    return out;
}

/* The name given to the keys of an interpreter that went without our atexit (names.h). */
static const char gone_name[] = "? (its sub-interpreter ended before its names were read)";

static int foreign(const vc_pins *pins, uint32_t owner)
{
    return pins->own_gil != NULL && owner > 0 && owner < VC_PINS_OWNERS && pins->own_gil[owner];
}

static char *pin_name(const vc_pins *pins, const vc_pin *p)
{
    int f = foreign(pins, p->owner);
    return p->is_c ? c_name(p->ptr, p->qual, f) : python_name((PyCodeObject *)p->ptr, f);
}

/* Names are cut here in the arena (the .cvf writer cuts at 511 bytes anyway, cvf.h). */
#define VC_ARENA_NAME_MAX 1024

void vc_pins_first_sight(vc_pins *pins, uint32_t id)
{
    vc_name_arena *a = pins->arena;
    uint64_t used = __atomic_load_n(a->len, __ATOMIC_RELAXED);
    if (used + 8 > a->cap)
        return; /* full: the agent's visits name the keys from here on */
    /* An exception on its way (a key first seen as a frame unwinds): naming could clear it,
     * which would change what the target does.  This key is named at the next visit. */
    if (PyErr_Occurred())
        return;
    char *name = pin_name(pins, &pins->by_id[id]);
    PyErr_Clear(); /* ours only: none was set before */
    size_t n = name ? strlen(name) : 0;
    if (n > VC_ARENA_NAME_MAX)
        n = VC_ARENA_NAME_MAX;
    if (name != NULL && used + 8 + n <= a->cap) {
        uint32_t head[2] = {id, (uint32_t)n};
        memcpy(a->base + used, head, 8);
        memcpy(a->base + used + 8, name, n);
        /* whole before it is counted: vcattach may read it after a kill (buffer.h) */
        __atomic_store_n(a->len, used + 8 + n, __ATOMIC_RELEASE);
        pins->by_id[id].in_arena = 1;
    }
    free(name);
}

void vc_pins_drop(vc_pins *pins, vc_pins *into)
{
    for (uint32_t i = 0; pins->slots != NULL && i <= pins->mask; i++) {
        vc_pin_slot *sl = &pins->slots[i];
        if (sl->ptr == NULL || sl->ptr == VC_PIN_TOMBSTONE || sl->owner != 0)
            continue;
        if (sl->id == VC_ID_EXCLUDED) {
            if (into != NULL)
                (void)vc_pins_lookup(into, sl->ptr, NULL, 0, 0); /* judged again: excluded */
            Py_DECREF((PyObject *)sl->ptr);
            continue;
        }
        if (sl->id >= pins->count)
            continue;
        vc_pin *p = &pins->by_id[sl->id];
        if (p->is_c == VC_PIN_NAMED)
            continue;
        if (!p->is_c)
            Py_DECREF((PyObject *)p->ptr);
        Py_XDECREF(p->qual);
    }
    for (uint32_t id = 0; pins->by_id != NULL && id < pins->count; id++)
        if (pins->by_id[id].is_c == VC_PIN_NAMED)
            free((void *)pins->by_id[id].ptr);
    free(pins->slots);
    free(pins->by_id);
    *pins = (vc_pins){0};
}

char *vc_pins_name(const vc_pins *pins, uint32_t id)
{
    if (id >= pins->count || pins->by_id == NULL)
        return NULL;
    const vc_pin *p = &pins->by_id[id];
    if (p->is_c == VC_PIN_NAMED)
        return p->ptr ? strdup(p->ptr) : NULL;
    return pin_name(pins, p);
}

char **vc_pins_resolve_and_release(vc_pins *pins, uint32_t *count_out)
{
    uint32_t n = pins->count;
    char **names = calloc(n ? n : 1, sizeof *names);
    for (uint32_t id = 0; id < n; id++) {
        vc_pin *p = &pins->by_id[id];
        if (p->is_c == VC_PIN_NAMED) { /* named and released with its interpreter */
            if (names != NULL)
                names[id] = (char *)p->ptr;
            else
                free((void *)p->ptr);
            continue;
        }
        if (names != NULL)
            names[id] = pin_name(pins, p);
        if (foreign(pins, p->owner))
            continue; /* another GIL's objects: their references are left, never released */
        if (!p->is_c)
            Py_DECREF((PyObject *)p->ptr);
        Py_XDECREF(p->qual);
    }
    for (uint32_t i = 0; pins->excluded && pins->slots && i <= pins->mask; i++)
        if (pins->slots[i].ptr != NULL && pins->slots[i].ptr != VC_PIN_TOMBSTONE &&
            pins->slots[i].id == VC_ID_EXCLUDED && !foreign(pins, pins->slots[i].owner))
            Py_DECREF((PyObject *)pins->slots[i].ptr);
    free(pins->slots);
    free(pins->by_id);
    pins->slots = NULL;
    pins->by_id = NULL;
    pins->count = 0;
    pins->excluded = 0;
    *count_out = names ? n : 0;
    return names;
}

void vc_pins_release_owner(vc_pins *pins, uint32_t owner, int alive)
{
    if (pins->slots == NULL)
        return;
    for (uint32_t i = 0; i <= pins->mask; i++) {
        vc_pin_slot *sl = &pins->slots[i];
        if (sl->ptr == NULL || sl->ptr == VC_PIN_TOMBSTONE || sl->owner != owner)
            continue;
        if (sl->id == VC_ID_EXCLUDED) {
            if (alive == 1)
                Py_DECREF((PyObject *)sl->ptr);
        } else if (sl->id < pins->count) {
            vc_pin *p = &pins->by_id[sl->id];
            char *name = NULL;
            if (alive) {
                int f = alive == VC_PINS_NAME_ONLY && foreign(pins, owner);
                name = p->is_c ? c_name(p->ptr, p->qual, f) : python_name((PyCodeObject *)p->ptr, f);
                PyErr_Clear();
                if (alive == 1 && !p->is_c)
                    Py_DECREF((PyObject *)p->ptr);
                if (alive == 1)
                    Py_XDECREF(p->qual);
            } else {
                name = strdup(gone_name);
            }
            /* NULL (out of memory) reads as an unnamed key, as a failed resolution does */
            *p = (vc_pin){name, NULL, VC_PIN_NAMED, 0, 0};
        }
        sl->ptr = VC_PIN_TOMBSTONE;
        sl->qual = NULL;
        sl->id = VC_ID_NONE;
    }
}

void vc_names_free(char **names, uint32_t count)
{
    if (names == NULL)
        return;
    for (uint32_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}
