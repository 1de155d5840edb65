/* collapsed.h — the contract of collapsed.c: a loaded trace as folded ("collapsed") stacks,
 * the input of flamegraph.pl, inferno and speedscope. */
#ifndef VCT_COLLAPSED_H
#define VCT_COLLAPSED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* Folded stacks, all threads merged: one line per distinct call stack,
 * "root;child;leaf <self time in µs, rounded>", stacks whose self time rounds to 0 left out;
 * working: self on-CPU time instead of self wall time (self_cpu.h).  ';' inside a name
 * becomes ':' and newlines are dropped, so every line parses back.  0, or -1 with err. */
int export_collapsed(const vct_trace *t, int working, FILE *out, char *err, size_t errlen);

/* Each distinct call stack of `only` (NULL: every thread, merged) once, with its self time in
 * µs (rounded; working: self on-CPU time), those that round to 0 left out: fn gets the stack's
 * function ids root first.  fn returning -1 stops the fold (a write error).  0, or -1 with
 * err. */
typedef int (*vct_stack_fn)(void *ctx, const uint32_t *funcs, size_t n, int64_t us);
int vct_fold_stacks(const vct_trace *t, const vct_thread *only, int working,
                    vct_stack_fn fn, void *ctx, char *err, size_t errlen);

#endif /* VCT_COLLAPSED_H */
