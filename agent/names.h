/* names.h — the pinned key table: what a record's id stands for, kept resolvable until stop.
 *
 * A key is (ptr, qual): a code object (qual NULL) for a Python function, or a PyMethodDef*
 * plus the object that qualifies its name (the module-name string, or the type of m_self) for
 * a C function.  The first time the hook sees a key it takes a slot in a pre-allocated
 * open-addressing table, Py_INCREFs the code object / qualifier (so it outlives the call even
 * if the function is deleted), and gets a dense id.  The hook never allocates: the agent
 * thread grows the table during its periodic GIL visit; if the table is still full when a new
 * key appears, the call is counted as unnamed and not recorded.  At stop the ids are turned
 * into UTF-8 names (malloc'd copies) and every pinned object is released.
 *
 * Interpreters (interps.c): every slot notes the interpreter it was pinned in (its owner, a
 * slot of the session's interpreter table, 0 the main one).  Before a sub-interpreter goes,
 * vc_pins_release_owner names its keys (the names stay, by id), releases their references in
 * that interpreter and leaves tombstones in their slots: the same address may then be a new
 * key of another interpreter, with its own id, and no reference into a dead interpreter is
 * ever kept.
 */
#ifndef VC_NAMES_H
#define VC_NAMES_H

#include "buffer.h"
#include "compat.h"
#include "filter.h"

#include <stdint.h>

#define VC_ID_NONE UINT32_MAX
/* A code object whose file the filters leave out (filter.h): pinned like any key (its address
 * cannot be reused by another code while the verdict is cached) but given no id. */
#define VC_ID_EXCLUDED (UINT32_MAX - 1)

typedef struct vc_pin_slot {
    const void *ptr;   /* NULL: empty */
    PyObject *qual;
    uint32_t id;
    uint32_t owner;    /* interpreter slot (interps.h) the key was pinned in */
} vc_pin_slot;

/* A slot whose key was released with its interpreter: never matches, never reused (probing
 * goes on past it), dropped when the table grows. */
#define VC_PIN_TOMBSTONE ((const void *)1)

typedef struct vc_pin {
    const void *ptr;   /* VC_PIN_NAMED: the malloc'd name (its interpreter is gone) */
    PyObject *qual;
    int is_c;
    uint32_t owner;    /* interpreter slot it was pinned in (as its table slot's) */
    int in_arena;      /* named at first sight into the window's arena (vc_pins_first_sight) */
} vc_pin;
#define VC_PIN_NAMED 2 /* vc_pin.is_c of a key named and released with its interpreter */

typedef struct vc_pins {
    vc_pin_slot *slots;
    uint32_t mask;      /* capacity - 1 (power of two) */
    uint32_t limit;     /* max ids before the table counts as full (3/4 of capacity) */
    uint32_t count;     /* ids handed out */
    vc_pin *by_id;      /* [limit] */
    uint32_t excluded;  /* slots holding an excluded code object (no id) */
    uint64_t unnamed;   /* calls not recorded because the table was full */
    const vc_filter *filter; /* verdicts taken on first sight of a code object; NULL: none */
    /* [owner] != 0: that interpreter slot has its own GIL (interps.c): its keys are named
     * from the agent thread by reading their immutable strings only (names.c), never by
     * asking that interpreter (which could allocate in it, or cache into its objects). */
    const unsigned char *own_gil; /* [VC_PINS_OWNERS] */
    /* A session that streams to vcattach names every key at first sight into this arena of
     * its window (buffer.h), where vcattach finds it even if the process is killed a moment
     * later; NULL base: keys are named at the agent's visits only. */
    vc_name_arena *arena;
} vc_pins;
#define VC_PINS_OWNERS 256 /* interps.h's VC_MAX_INTERPS */

int vc_pins_init(vc_pins *pins, uint32_t capacity);
/* Grows when more than half full.  GIL held, hooks idle (agent thread).  0 or -ENOMEM. */
int vc_pins_maybe_grow(vc_pins *pins);
/* Resolves every id to a malloc'd UTF-8 name (names[id], NULL if it failed), then releases
 * every pinned reference and the table.  GIL held. */
char **vc_pins_resolve_and_release(vc_pins *pins, uint32_t *count_out);
void vc_names_free(char **names, uint32_t count);
/* The name of one pinned id (malloc'd UTF-8), NULL if it failed.  GIL held; the pin stays
 * (streaming names new keys while it traces). */
char *vc_pins_name(const vc_pins *pins, uint32_t id);
/* Before interpreter `owner` goes: names its keys (alive: with its GIL held and that
 * interpreter current or sharing it; VC_PINS_NAME_ONLY: from the agent thread, an own-GIL
 * one's read as own_gil says), releases their references and tombstones their slots.
 * alive = 0 (it is gone already): nothing of it is read or released (its objects are leaked
 * rather than touched), its keys are named "?" — the rare interpreter destroyed without our
 * atexit having run. */
void vc_pins_release_owner(vc_pins *pins, uint32_t owner, int alive);
/* alive: the interpreter lives, under the GIL we hold, but is not the current one (3.12+):
 * its keys are named, their references left (leaked, never released from another
 * interpreter). */
#define VC_PINS_NAME_ONLY 2

static inline uint32_t vc_pins_hash(const void *ptr, const void *qual)
{
    uint64_t h = ((uint64_t)(uintptr_t)ptr ^ ((uint64_t)(uintptr_t)qual << 7)) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

/* Out of line (names.c): the first sight of a Python code object under globs: its verdict. */
uint32_t vc_pins_judge(vc_pins *pins, const void *code);
/* Out of line (names.c): key `id` was just pinned: its name into the arena, if it fits.
 * Once per key, under the GIL (in the hook): the one place the record path allocates and
 * reads names, because a process may be killed an instant after its first call of a
 * function (a pool worker), and its trace needs that function's name. */
void vc_pins_first_sight(vc_pins *pins, uint32_t id);
/* 1 if key id's name went into the arena (the agent's visits need not name it). */
static inline int vc_pins_in_arena(const vc_pins *pins, uint32_t id)
{
    return id < pins->count && pins->by_id[id].in_arena;
}
/* A fork child's discard of the table it inherited: every reference of the main
 * interpreter's keys released, none named (a sub-interpreter's are left: CPython deleted
 * those interpreters in the child); the code objects the filters left out are pinned again in
 * `into` unless it is NULL (the child's own table: their sys.monitoring locations are still
 * disabled, and its stop must re-enable them).  GIL held. */
void vc_pins_drop(vc_pins *pins, vc_pins *into);
/* The code objects the filters left out that interpreter slot `owner` pinned (for the
 * monitoring backend's cleanup at stop, in that interpreter): calls fn(code, ctx) for each.
 * GIL held. */
void vc_pins_each_excluded(vc_pins *pins, uint32_t owner, void (*fn)(PyObject *code, void *ctx),
                           void *ctx);

/* Hot path, read only: the id of (ptr, qual) if it is pinned (VC_ID_EXCLUDED for an excluded
 * code object), else VC_ID_NONE (then vc_pins_lookup pins it). */
static inline uint32_t vc_pins_find(const vc_pins *pins, const void *ptr, PyObject *qual)
{
    uint32_t i = vc_pins_hash(ptr, qual) & pins->mask;
    for (;;) {
        const vc_pin_slot *s = &pins->slots[i];
        if (s->ptr == ptr && s->qual == qual)
            return s->id;
        if (s->ptr == NULL)
            return VC_ID_NONE;
        i = (i + 1) & pins->mask;
    }
}

/* Hot path: the id of (ptr, qual), pinning it on first sight.  VC_ID_NONE if full,
 * VC_ID_EXCLUDED for a code object the filters leave out. */
static inline uint32_t vc_pins_lookup(vc_pins *pins, const void *ptr, PyObject *qual, int is_c,
                                      uint32_t owner)
{
    uint32_t i = vc_pins_hash(ptr, qual) & pins->mask;
    for (;;) {
        vc_pin_slot *s = &pins->slots[i];
        if (s->ptr == ptr && s->qual == qual)
            return s->id;
        if (s->ptr == NULL) {
            if (pins->count + pins->excluded >= pins->limit) {
                pins->unnamed++;
                return VC_ID_NONE;
            }
            uint32_t id = !is_c && pins->filter != NULL ? vc_pins_judge(pins, ptr) : pins->count;
            if (id == VC_ID_EXCLUDED) {
                s->ptr = ptr;
                s->qual = qual;
                s->id = id;
                s->owner = owner;
                pins->excluded++;
                Py_INCREF((PyObject *)ptr);
                return id;
            }
            pins->count++;
            s->ptr = ptr;
            s->qual = qual;
            s->id = id;
            s->owner = owner;
            if (!is_c)
                Py_INCREF((PyObject *)ptr);
            Py_XINCREF(qual);
            pins->by_id[id] = (vc_pin){ptr, qual, is_c, owner, 0};
            if (pins->arena != NULL && pins->arena->base != NULL)
                vc_pins_first_sight(pins, id);
            return id;
        }
        i = (i + 1) & pins->mask;
    }
}

#endif /* VC_NAMES_H */
