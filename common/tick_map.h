/* tick_map.h — the agent's raw clock to CLOCK_MONOTONIC ns and to the .cvf's 10 ns ticks.
 *
 * One definition for both sides of a streamed trace: the agent converts with it when it
 * encodes a trace itself (agent/emit.c), vcattach when it builds one from a spool
 * (common/spool_build.c).  The same map and the same rounding give the same file whichever
 * side wrote it; an event's end is rounded on its own, so nesting survives the rounding.
 */
#ifndef VC_TICK_MAP_H
#define VC_TICK_MAP_H

#include <stdint.h>

typedef struct vc_tick_map {
    uint64_t raw0, ns0;
    double ns_per_raw;
} vc_tick_map;

/* A span of raw ticks in ns, saturated: a map from a hostile spool (rate up to 1e6 ns per
 * tick) must not overflow the conversion (a double past 2^64 is undefined as an integer). */
static inline uint64_t vc_tick_map_span(const vc_tick_map *map, uint64_t raw_span)
{
    double ns = (double)raw_span * map->ns_per_raw;
    return ns < 1.8e19 ? (uint64_t)ns : UINT64_C(18000000000000000000);
}

static inline uint64_t vc_tick_map_ns(const vc_tick_map *map, uint64_t raw)
{
    if (raw >= map->raw0)
        return map->ns0 + vc_tick_map_span(map, raw - map->raw0);
    uint64_t back = vc_tick_map_span(map, map->raw0 - raw);
    return back < map->ns0 ? map->ns0 - back : 0;
}

static inline int64_t vc_tick_map_ticks(const vc_tick_map *map, uint64_t raw)
{
    return (int64_t)((vc_tick_map_ns(map, raw) + 5) / 10);
}

#endif /* VC_TICK_MAP_H */
