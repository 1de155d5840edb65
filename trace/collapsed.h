/* collapsed.h — the contract of collapsed.c: a loaded trace as folded ("collapsed") stacks,
 * the input of flamegraph.pl, inferno and speedscope. */
#ifndef VCT_COLLAPSED_H
#define VCT_COLLAPSED_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"

/* Folded stacks, all threads merged: one line per distinct call stack,
 * "root;child;leaf <self time in µs, rounded>", stacks whose self time rounds to 0 left out.
 * ';' inside a name becomes ':' and newlines are dropped, so every line parses back.
 * 0, or -1 with err. */
int export_collapsed(const vct_trace *t, FILE *out, char *err, size_t errlen);

#endif /* VCT_COLLAPSED_H */
