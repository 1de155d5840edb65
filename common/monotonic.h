/* monotonic.h — milliseconds on CLOCK_MONOTONIC, the one clock every deadline of the CLI, the
 * injection methods and the control protocol is measured on (never the wall clock: an NTP step
 * must not stretch or cut a bounded wait). */
#ifndef VC_MONOTONIC_H
#define VC_MONOTONIC_H

#include <stdint.h>
#include <time.h>

static inline int64_t vc_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
