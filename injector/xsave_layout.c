/* xsave_layout.c — the CPU's XSAVE area in the standard form, from CPUID leaf 0xD (see
 * xsave_layout.h).  Read once per process: CPUID traps to the hypervisor in a VM, and 60
 * subleaves per injection would cost more than the injection's own syscalls. */
#include "xsave_layout.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define COMPONENTS 63
#define FSW_ES 0x80 /* x87 status word: an unmasked exception is pending */

struct component {
    uint32_t offset, size; /* size 0: not user state on this CPU */
};

static struct component layout[COMPONENTS];
static uint64_t enabled; /* XCR0: the user components the kernel enabled */
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

static void read_layout(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE))
        return; /* no XSAVE: images are the 512-byte fxsave area */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    enabled = (uint64_t)hi << 32 | lo;
    if (!__get_cpuid_count(0xD, 0, &eax, &ebx, &ecx, &edx))
        return;
    uint64_t user = (uint64_t)edx << 32 | eax; /* the components XCR0 may enable */
    for (unsigned i = 2; i < COMPONENTS; i++) {
        if (!(user >> i & 1) || !__get_cpuid_count(0xD, i, &eax, &ebx, &ecx, &edx))
            continue;
        if (ecx & 1) /* supervisor state: never in a user image (its offset reads 0) */
            continue;
        layout[i].offset = ebx;
        layout[i].size = eax;
    }
}

static void need_layout(void)
{
    pthread_once(&layout_once, read_layout);
}

uint32_t xsave_image_size(uint64_t *features)
{
    need_layout();
    uint64_t end = XSAVE_LEGACY_END;
    for (unsigned i = 2; i < 64; i++) {
        if (!(*features >> i & 1))
            continue;
        if (i >= COMPONENTS || layout[i].size == 0) {
            *features &= ~(1ull << i);
            continue;
        }
        if ((uint64_t)layout[i].offset + layout[i].size > end)
            end = (uint64_t)layout[i].offset + layout[i].size;
    }
    return (uint32_t)end;
}

static int differ(const unsigned char *a, const unsigned char *b, size_t at, size_t n)
{
    return memcmp(a + at, b + at, n) != 0;
}

uint64_t xsave_differences(const unsigned char *a, const unsigned char *b, size_t len)
{
    need_layout();
    uint64_t d = 0;
    if (len < 416)
        return 0;
    /* x87: control, status, tag words (bytes 0..4), then FOP, FIP, FDP (6..23) which mean
     * something only while an exception is pending, then ST0-7 (10 bytes of every 16) */
    int pending = (a[2] | b[2]) & FSW_ES;
    if (differ(a, b, 0, 5) || (pending && differ(a, b, 6, 18)))
        d |= 1;
    for (unsigned r = 0; r < 8; r++)
        if (differ(a, b, 32 + 16 * r, 10))
            d |= 1;
    /* SSE: MXCSR (24..27) and xmm0-15 */
    if (differ(a, b, 24, 4) || differ(a, b, 160, 256))
        d |= 2;
    for (unsigned i = 2; i < COMPONENTS; i++) {
        const struct component *c = &layout[i];
        if (c->size && (size_t)c->offset + c->size <= len && differ(a, b, c->offset, c->size))
            d |= 1ull << i;
    }
    return d;
}

/* Where gdb before 14 puts the components it knows (gdb/i387-tdep.c: Intel's layout). */
static const struct {
    unsigned component;
    uint32_t offset;
    const char *name;
} old_gdb_offsets[] = {
    {2, 576, "AVX (upper halves of ymm0-15)"},
    {3, 960, "MPX bound registers"},
    {4, 1024, "MPX bound configuration"},
    {5, 1088, "AVX-512 opmask (k0-7)"},
    {6, 1152, "AVX-512 upper halves of zmm0-15"},
    {7, 1664, "AVX-512 zmm16-31"},
    {9, 2688, "PKRU"},
};

int xsave_foreign_to_old_gdb(char *why, size_t len)
{
    need_layout();
    for (size_t k = 0; k < sizeof old_gdb_offsets / sizeof old_gdb_offsets[0]; k++) {
        unsigned i = old_gdb_offsets[k].component;
        if (!(enabled >> i & 1) || layout[i].size == 0 ||
            layout[i].offset == old_gdb_offsets[k].offset)
            continue;
        snprintf(why, len, "%s at byte %u of the XSAVE area, where gdb before 14 reads %u",
                 old_gdb_offsets[k].name, layout[i].offset, old_gdb_offsets[k].offset);
        return 1;
    }
    return 0;
}
