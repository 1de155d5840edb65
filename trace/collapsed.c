/* collapsed.c — a trace as folded stacks ("collapsed" format), and the folding itself.
 *
 * One line per distinct call stack, "root;child;leaf <self µs>", the input of flamegraph.pl,
 * inferno and speedscope.  Threads are merged (as flame graphs of a service usually are).
 * Stacks are a trie of (parent stack, function) nodes filled by the shared nesting walk:
 * each call adds its self time to its node, so a line's value is the time spent in exactly
 * that stack, and the values of a trace add up to its traced time.  Weighed by work
 * (`--working`), a call adds its self working time instead (self_cpu.h: on-CPU, as
 * `summary` counts it): a blocked call weighs what it ran, not what it waited.
 * speedscope.c folds the same way, one thread at a time (vct_fold_stacks).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collapsed.h"
#include "self_cpu.h"

#define NO_PARENT UINT32_MAX

typedef struct stack_node {
    uint32_t parent; /* node index, or NO_PARENT for a root call */
    uint32_t func;
    int64_t self;    /* ticks */
} stack_node;

typedef struct collapse_ctx {
    stack_node *nodes;
    size_t nnodes, cap;
    uint32_t *slots; /* open addressing: node index + 1, 0 = empty */
    size_t nslots;
    uint32_t *path;  /* node of each depth of the current stack */
    size_t path_cap;
    int working;     /* weigh by self on-CPU time, not self wall time */
    vct_self_cpu cpu;
    int failed;
} collapse_ctx;

static size_t slot_of(uint32_t parent, uint32_t func, size_t nslots)
{
    uint64_t key = ((uint64_t)parent << 32 | func) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(key >> 20) & (nslots - 1);
}

static int grow_slots(collapse_ctx *c)
{
    size_t nslots = c->nslots ? c->nslots * 2 : 4096;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t n = 0; n < c->nnodes; n++) {
        size_t i = slot_of(c->nodes[n].parent, c->nodes[n].func, nslots);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = (uint32_t)n + 1;
    }
    free(c->slots);
    c->slots = slots;
    c->nslots = nslots;
    return 0;
}

/* The node for `func` called from stack `parent`, created if new; NO_PARENT on failure. */
static uint32_t node_for(collapse_ctx *c, uint32_t parent, uint32_t func)
{
    if ((c->nnodes + 1) * 2 > c->nslots && grow_slots(c) < 0)
        return NO_PARENT;
    size_t i = slot_of(parent, func, c->nslots);
    for (; c->slots[i]; i = (i + 1) & (c->nslots - 1)) {
        const stack_node *n = &c->nodes[c->slots[i] - 1];
        if (n->parent == parent && n->func == func)
            return c->slots[i] - 1;
    }
    if (c->nnodes >= NO_PARENT - 1)
        return NO_PARENT;
    if (c->nnodes == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        stack_node *nodes = realloc(c->nodes, cap * sizeof *nodes);
        if (!nodes)
            return NO_PARENT;
        c->nodes = nodes;
        c->cap = cap;
    }
    c->nodes[c->nnodes] = (stack_node){parent, func, 0};
    c->slots[i] = (uint32_t)c->nnodes + 1;
    return (uint32_t)c->nnodes++;
}

static void on_open(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth)
{
    collapse_ctx *c = ctx;
    if (c->failed)
        return;
    if (depth >= c->path_cap) {
        size_t cap = c->path_cap ? c->path_cap * 2 : 64;
        uint32_t *path = realloc(c->path, cap * sizeof *path);
        if (!path) {
            c->failed = 1;
            return;
        }
        c->path = path;
        c->path_cap = cap;
    }
    uint32_t node = node_for(c, depth ? c->path[depth - 1] : NO_PARENT, ev->func);
    if (node == NO_PARENT || (c->working && vct_self_cpu_open(&c->cpu, depth, start, end) < 0))
        c->failed = 1;
    c->path[depth] = node;
}

static void on_close(void *ctx, const vct_event *ev, int64_t start, int64_t end, int64_t self,
                     size_t depth)
{
    collapse_ctx *c = ctx;
    if (c->working && (self = vct_self_cpu_close(&c->cpu, depth, ev->func, self)) < 0)
        c->failed = 1;
    if (!c->failed)
        c->nodes[c->path[depth]].self = vct_sat_add(c->nodes[c->path[depth]].self, self);
}

int vct_fold_stacks(const vct_trace *t, const vct_thread *only, int working,
                    vct_stack_fn fn, void *ctx, char *err, size_t errlen)
{
    static const vct_walk_ops ops = {on_open, on_close};
    collapse_ctx c = {.working = working, .cpu = {.t = t}};
    uint32_t *chain = NULL;
    size_t chain_cap = 0;
    int rc = -1;
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_thread *th = &t->threads[i];
        if (only != NULL && th != only)
            continue;
        c.cpu.th = th;
        if (vct_thread_walk(th, &ops, &c) < 0 || c.failed)
            goto nomem;
    }
    for (size_t n = 0; n < c.nnodes; n++) {
        /* rounded to the nearest µs without adding first: self may be INT64_MAX */
        int64_t self = c.nodes[n].self;
        int64_t us = self / VCT_TICKS_PER_US + (self % VCT_TICKS_PER_US >= VCT_TICKS_PER_US / 2);
        if (us <= 0)
            continue;
        size_t len = 0; /* the leaf-to-root chain, then reversed: root first */
        for (uint32_t k = (uint32_t)n; k != NO_PARENT; k = c.nodes[k].parent) {
            if (len == chain_cap) {
                size_t cap = chain_cap ? chain_cap * 2 : 64;
                uint32_t *bigger = realloc(chain, cap * sizeof *chain);
                if (!bigger)
                    goto nomem;
                chain = bigger;
                chain_cap = cap;
            }
            chain[len++] = c.nodes[k].func;
        }
        for (size_t a = 0, b = len - 1; a < b; a++, b--) {
            uint32_t f = chain[a];
            chain[a] = chain[b];
            chain[b] = f;
        }
        if (fn(ctx, chain, len, us) < 0) {
            snprintf(err, errlen, "write error while writing the stacks");
            goto out;
        }
    }
    rc = 0;
    goto out;
nomem:
    snprintf(err, errlen, "out of memory while folding the stacks");
out:
    free(chain);
    free(c.nodes);
    free(c.slots);
    free(c.path);
    vct_self_cpu_free(&c.cpu);
    return rc;
}

/* A frame name as one field of a folded line: ';' separates frames, '\n' ends the line. */
static void put_folded_name(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == ';')
            fputc(':', out);
        else if (*s != '\n' && *s != '\r')
            fputc(*s, out);
    }
}

typedef struct folded_out {
    const vct_trace *t;
    FILE *out;
} folded_out;

static int put_folded_line(void *ctx, const uint32_t *funcs, size_t n, int64_t us)
{
    folded_out *o = ctx;
    for (size_t k = 0; k < n; k++) {
        put_folded_name(o->out, o->t->funcs[funcs[k]]);
        fputc(k + 1 < n ? ';' : ' ', o->out);
    }
    fprintf(o->out, "%" PRId64 "\n", us);
    return ferror(o->out) ? -1 : 0;
}

int export_collapsed(const vct_trace *t, int working, FILE *out, char *err, size_t errlen)
{
    folded_out o = {t, out};
    if (vct_fold_stacks(t, NULL, working, put_folded_line, &o, err, errlen) < 0)
        return -1;
    if (fflush(out) != 0 || ferror(out)) {
        snprintf(err, errlen, "write error while writing the collapsed stacks");
        return -1;
    }
    return 0;
}
