/* self_cpu.c — the working time of each call of a nesting walk (self_cpu.h). */
#include "self_cpu.h"

#include <stdlib.h>

#include "cpu.h"
#include "waits.h"

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

int vct_self_cpu_open(vct_self_cpu *s, size_t depth, int64_t start, int64_t end)
{
    if (depth >= s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        while (cap <= depth)
            cap *= 2;
        vct_self_cpu_slot *slot = realloc(s->slot, cap * sizeof *slot);
        if (slot == NULL)
            return -1;
        s->slot = slot;
        s->cap = cap;
    }
    vct_self_cpu_slot *sl = &s->slot[depth];
    sl->on = vct_cpu_span(s->th, start, end, &sl->cov);
    sl->kids_on = sl->kids_cov = 0;
    if (depth) {
        vct_self_cpu_slot *up = &s->slot[depth - 1];
        up->kids_on = vct_sat_add(up->kids_on, sl->on);
        up->kids_cov = vct_sat_add(up->kids_cov, sl->cov);
    }
    return 0;
}

/* Whether func's name says it waits (looked up once per function). */
static int waits(vct_self_cpu *s, uint32_t func)
{
    if (s->kind == NULL && (s->kind = calloc(s->t->nfuncs ? s->t->nfuncs : 1, 1)) == NULL)
        return -1;
    if (func >= s->t->nfuncs)
        return 0;
    if (s->kind[func] == 0)
        s->kind[func] = vct_wait_kind_of(s->t->funcs[func]) == VCT_WAIT_NONE ? 1 : 2;
    return s->kind[func] == 2;
}

int64_t vct_self_cpu_close(vct_self_cpu *s, size_t depth, uint32_t func, int64_t self)
{
    if (depth >= s->cap || self <= 0)
        return 0;
    const vct_self_cpu_slot *sl = &s->slot[depth];
    /* children lie within the call's span: the differences are its own; the clamps only
     * guard interpolation rounding */
    int64_t cov = clamp(vct_sat_diff(sl->cov, sl->kids_cov), 0, self);
    int64_t on = clamp(vct_sat_diff(sl->on, sl->kids_on), 0, cov);
    if (cov == self)
        return on;
    int w = waits(s, func);
    return w < 0 ? -1 : w ? on : on + (self - cov);
}

void vct_self_cpu_free(vct_self_cpu *s)
{
    free(s->slot);
    free(s->kind);
    s->slot = NULL;
    s->kind = NULL;
    s->cap = 0;
}
