/* proc_tree_bench.c — target_descendants_of (injector/proc_tree.c) on synthetic process
 * tables: right answers on small shapes (chains, fans, a cycle of reused pids), and the cost
 * of one scan of an N-process host: the walk's own count of its steps (comparisons, probes,
 * links: test_security_tree.py checks how it grows with N) and, for information only, the
 * time.  A synthetic table because spawning 30 000 processes on a shared test machine is too
 * heavy.
 *
 * Usage: proc-tree-bench [N]   exit 0 when every check holds, 1 otherwise; prints
 *   "descendants of one tree among N processes: S steps, T ms per scan".
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vcinject.h"

static int failures;

static void expect(const char *what, long got, long want)
{
    if (got != want) {
        fprintf(stderr, "FAIL %s: %ld, expected %ld\n", what, got, want);
        failures++;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 30000;
    if (n < 100)
        n = 100;
    pid_t *pids = malloc((size_t)n * sizeof *pids), *ppids = malloc((size_t)n * sizeof *ppids);
    pid_t *out = malloc((size_t)n * sizeof *out);
    if (pids == NULL || ppids == NULL || out == NULL)
        return 1;

    /* a chain 2 <- 3 <- ... : every one descends from 2 */
    for (long i = 0; i < 10; i++)
        pids[i] = (pid_t)(i + 2), ppids[i] = (pid_t)(i + 1);
    expect("chain", target_descendants_of(pids, ppids, 10, 2, out), 9);
    expect("chain order", out[0], 3);
    /* a cycle of reused pids (5's parent 6, 6's parent 5) under 1: no loop */
    pid_t cp[] = {5, 6, 7}, cpp[] = {6, 5, 5};
    expect("cycle", target_descendants_of(cp, cpp, 3, 5, out), 2);
    expect("unrelated", target_descendants_of(cp, cpp, 3, 99, out), 0);

    /* the host: n processes, most children of 1, the traced tree (root 1000) a fan of 50
     * children with 4 grandchildren each, listed last so a scan-based walk is at its worst */
    long k = 0;
    for (long i = 0; i < n - 251; i++)
        pids[k] = (pid_t)(2000 + i), ppids[k++] = i % 7 ? 1 : (pid_t)(2000 + i - 1);
    pids[k] = 1000, ppids[k++] = 1;
    for (long c = 0; c < 50; c++) {
        pid_t child = (pid_t)(900000 + c * 5);
        pids[k] = child, ppids[k++] = 1000;
        for (long g = 1; g <= 4; g++)
            pids[k] = child + (pid_t)g, ppids[k++] = child;
    }
    unsigned long long steps = 0;
    double t0 = now_s();
    long got = 0;
    int reps = 10;
    for (int r = 0; r < reps; r++)
        got = target_descendants_count(pids, ppids, k, 1000, out, &steps);
    double per = (now_s() - t0) / reps;
    expect("fan", got, 250);
    expect("fan sorted", out[0] < out[1] && out[248] < out[249], 1);
    expect("fan by the plain walk", target_descendants_of(pids, ppids, k, 1000, out), 250);
    printf("descendants of one tree among %ld processes: %llu steps, %.3f ms per scan\n", k,
           steps, per * 1e3);
    free(pids);
    free(ppids);
    free(out);
    return failures ? 1 : 0;
}
