/* human.c — counts, sizes and durations for people (human.h). */
#include "human.h"

#include <inttypes.h>
#include <stdio.h>

const char *vc_human_count(uint64_t v, char *buf, size_t cap)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, v), o = 0;
    if (cap == 0)
        return buf;
    for (int i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *vc_human_bytes(uint64_t bytes, char *buf, size_t cap)
{
    if (bytes < 1024)
        snprintf(buf, cap, "%u B", (unsigned)bytes);
    else if (bytes < 1024 * 1024)
        snprintf(buf, cap, "%.1f KiB", (double)bytes / 1024.0);
    else if (bytes < 1024ull * 1024 * 1024)
        snprintf(buf, cap, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    else
        snprintf(buf, cap, "%.2f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

const char *vc_human_ms(uint64_t ms, char *buf, size_t cap)
{
    if (ms < 1000)
        snprintf(buf, cap, "%ums", (unsigned)ms);
    else if (ms < 60 * 1000)
        snprintf(buf, cap, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600 * 1000)
        snprintf(buf, cap, "%um%02us", (unsigned)(ms / 60000), (unsigned)(ms / 1000 % 60));
    else
        snprintf(buf, cap, "%uh%02um", (unsigned)(ms / 3600000), (unsigned)(ms / 60000 % 60));
    return buf;
}

const char *vc_human_us(double us, int us_decimals, char *buf, size_t cap)
{
    if (us >= 1e6)
        snprintf(buf, cap, "%.3f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, cap, "%.3f ms", us / 1e3);
    else
        snprintf(buf, cap, "%.*f µs", us_decimals, us);
    return buf;
}
