/* self_cpu.h — the working time of each call of a nesting walk (model.h), for the exports
 * that weigh stacks by work instead of wall time (`convert --working`: collapsed, svg,
 * speedscope), by the same rule as `summary`'s working table.
 *
 * A call's inclusive on-CPU time is its thread's CPU clock advance over its span (cpu.h:
 * exact with scheduler events, interpolated between samples without), and so is the part of
 * its span the clock covers; its self figures are those minus its direct children's.  Its
 * working time is its self on-CPU time, plus, for the part no sample covers (a thread born
 * and ended between two looks, a trace without CPU data), its self time unless its name says
 * it waits (waits.def) — what `summary` books as working where it cannot measure.
 * One slot per open depth, grown as the walk goes deeper, and one byte per function.
 */
#ifndef VCT_SELF_CPU_H
#define VCT_SELF_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct vct_self_cpu_slot {
    int64_t on, cov;           /* the call's inclusive on-CPU and covered ticks */
    int64_t kids_on, kids_cov; /* ... the sums of its direct children's */
} vct_self_cpu_slot;

typedef struct vct_self_cpu {
    const vct_trace *t;
    const vct_thread *th;    /* the thread being walked (set before each thread's walk) */
    vct_self_cpu_slot *slot; /* per open depth */
    size_t cap;
    unsigned char *kind;     /* per function: 0 not looked up yet, 1 work, 2 a wait */
} vct_self_cpu;

/* At a call's open (the walk's on_open arguments).  0, or -1 when out of memory. */
int vct_self_cpu_open(vct_self_cpu *s, size_t depth, int64_t start, int64_t end);
/* At its close (func: its function id, self: its self wall ticks): its working ticks,
 * 0 <= result <= self; -1 when out of memory. */
int64_t vct_self_cpu_close(vct_self_cpu *s, size_t depth, uint32_t func, int64_t self);
void vct_self_cpu_free(vct_self_cpu *s);

#endif /* VCT_SELF_CPU_H */
