/* clock.h — the hook's timestamp source and its conversion to CLOCK_MONOTONIC.
 *
 * On x86-64 with an invariant TSC the hook reads rdtsc (a few ns, no syscall, no vDSO call);
 * the raw ticks are mapped to CLOCK_MONOTONIC nanoseconds at stop from two (tsc, ns) pairs,
 * one taken at session start and one at stop (each the tightest of several samples).
 * Elsewhere (or without an invariant TSC) the raw value already is CLOCK_MONOTONIC ns.
 */
#ifndef VC_CLOCK_H
#define VC_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "tick_map.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* decided once per process by vc_clock_init; hidden: the hot path reads it PC-relative */
extern int vc_clock_use_tsc __attribute__((visibility("hidden")));

static inline uint64_t vc_clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Raw timestamp for the hot path. */
static inline uint64_t vc_clock_now(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(vc_clock_use_tsc, 1))
        return __rdtsc();
#endif
    return vc_clock_mono_ns();
}

/* The hot paths' fast halves (record.h) are leaves: they read the clock only when it is the
 * TSC (an inline instruction); otherwise (no invariant TSC, not x86-64) they leave the call
 * to the general path, whose clock_gettime is a call. */
static inline int vc_clock_fast_ok(void)
{
#if defined(__x86_64__)
    return __builtin_expect(vc_clock_use_tsc, 1);
#else
    return 0;
#endif
}

static inline uint64_t vc_clock_fast(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#else
    return 0; /* never used: vc_clock_fast_ok() is 0 */
#endif
}

/* A (raw, ns) calibration pair. */
typedef struct vc_clock_pair {
    uint64_t raw;
    uint64_t ns;
} vc_clock_pair;

/* Conversion from raw ticks to monotonic ns for one session (common/tick_map.h: the CLI
 * converts a streamed trace with the same map). */
typedef vc_tick_map vc_clock_map;

void vc_clock_init(void);
vc_clock_pair vc_clock_sample(void);
/* ns → raw ticks for thresholds set before a session's own calibration (--min-dur): the
 * tick rate is measured once per process over a few ms (agent thread, never the hot path). */
uint64_t vc_clock_ns_to_raw(uint64_t ns);
void vc_clock_map_make(vc_clock_map *map, vc_clock_pair start, vc_clock_pair stop);

static inline uint64_t vc_clock_to_ns(const vc_clock_map *map, uint64_t raw)
{
    return vc_tick_map_ns(map, raw);
}

#endif /* VC_CLOCK_H */
