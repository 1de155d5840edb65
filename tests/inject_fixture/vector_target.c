/* vector_target.c — a target for tests/system/test_inject_kill.py: holds a pattern in every register
 * of its FPU/vector state across a raw read(2) of stdin, which the injector interrupts and
 * borrows, and checks it came back; its signal mask (SIGUSR2 blocked) and sigaltstack are its
 * own too.
 *
 * The state is loaded with XRSTOR from an image built on what XSAVE found, so it covers
 * whatever this CPU has (CPUID leaf 0xD gives each component's place): the x87 control word
 * (round up, double precision) and registers, MXCSR (round toward zero, flush-to-zero,
 * denormals-are-zero), xmm0-15, the upper halves of ymm0-15 (AVX), and where enabled the
 * AVX-512 opmask k0-7, the upper halves of zmm0-15 and zmm16-31.  Other components (PKRU,
 * AMX, ...) keep the values they have and are compared too.  XSAVE right before and right
 * after the syscall, in the same asm: nothing of ours runs in between.
 *
 * After each line read it prints OK, or BAD with what differs; exits at end of input.  Needs
 * XSAVE (the test skips without AVX). */
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AREA 16384
#define FSW_ES 0x80

static unsigned char image[AREA] __attribute__((aligned(64)));
static unsigned char before[AREA] __attribute__((aligned(64)));
static unsigned char after[AREA] __attribute__((aligned(64)));
static uint32_t offset_of[64], size_of[64];
static uint64_t xcr0;

static void xsave(unsigned char *to)
{
    __asm__ volatile("xsave64 (%0)" : : "r"(to), "a"(-1), "d"(-1) : "memory");
}

static uint64_t bv_of(const unsigned char *img)
{
    uint64_t bv;
    memcpy(&bv, img + 512, 8);
    return bv;
}

/* XSAVE leaves a component not in use unwritten: give it its initial value. */
static void normalize(unsigned char *img)
{
    uint64_t bv = bv_of(img);
    if (!(bv & 1)) {
        static const uint16_t fcw = 0x037f;
        memset(img, 0, 24);
        memcpy(img, &fcw, 2);
        memset(img + 32, 0, 128);
    }
    if (!(bv & 2))
        memset(img + 160, 0, 256);
    for (unsigned i = 2; i < 64; i++)
        if ((xcr0 >> i & 1) && size_of[i] && !(bv >> i & 1))
            memset(img + offset_of[i], 0, size_of[i]);
}

/* Appends to why what differs between before and after; 0 when nothing does. */
static int compare(char *why, size_t len)
{
    normalize(before);
    normalize(after);
    size_t n = 0;
    uint16_t fa, fb;
    uint32_t ma, mb;
    memcpy(&fa, before, 2);
    memcpy(&fb, after, 2);
    memcpy(&ma, before + 24, 4);
    memcpy(&mb, after + 24, 4);
    int pending = (before[2] | after[2]) & FSW_ES, st = 0;
    for (unsigned r = 0; r < 8; r++)
        st |= memcmp(before + 32 + 16 * r, after + 32 + 16 * r, 10) != 0;
    if (fa != fb)
        n += snprintf(why + n, len - n, " x87-control-word %#x->%#x", fa, fb);
    if (n < len && (memcmp(before + 2, after + 2, 3) || st ||
                    (pending && memcmp(before + 6, after + 6, 18))))
        n += snprintf(why + n, len - n, " x87-status/tags/registers");
    if (n < len && ma != mb)
        n += snprintf(why + n, len - n, " MXCSR %#x->%#x", ma, mb);
    if (n < len && memcmp(before + 160, after + 160, 256))
        n += snprintf(why + n, len - n, " xmm0-15");
    for (unsigned i = 2; i < 64 && n < len; i++)
        if ((xcr0 >> i & 1) && size_of[i] &&
            memcmp(before + offset_of[i], after + offset_of[i], size_of[i]))
            n += snprintf(why + n, len - n, " component-%u(bytes %u..%u)", i, offset_of[i],
                          offset_of[i] + size_of[i] - 1);
    return n != 0;
}

/* The image XRSTOR loads before each read: patterns in x87, SSE, AVX and AVX-512 state. */
static void build_image(void)
{
    memset(image, 0, sizeof image);
    xsave(image);
    normalize(image);
    uint64_t bv = bv_of(image) | 3;
    const uint16_t fcw = 0x0a7f;         /* round up, double precision, all masked */
    const uint32_t mxcsr = 0x1f80 | 0x6000 | 0x8000 | 0x40; /* RZ, FZ, DAZ, all masked */
    memcpy(image, &fcw, 2);
    memset(image + 2, 0, 22);            /* status, tags (empty), pointers */
    memcpy(image + 24, &mxcsr, 4);
    for (unsigned r = 0; r < 8; r++)     /* the registers' bytes are kept even when empty */
        for (unsigned k = 0; k < 10; k++)
            image[32 + 16 * r + k] = (unsigned char)(r * 29 + k * 3 + 1);
    for (unsigned k = 0; k < 256; k++)
        image[160 + k] = (unsigned char)(k * 7 + 3);
    static const unsigned patterned[] = {2, 5, 6, 7}; /* AVX, opmask, ZMM_Hi256, Hi16_ZMM */
    for (unsigned j = 0; j < sizeof patterned / sizeof patterned[0]; j++) {
        unsigned i = patterned[j];
        if (!(xcr0 >> i & 1) || !size_of[i])
            continue;
        for (unsigned k = 0; k < size_of[i]; k++)
            image[offset_of[i] + k] = (unsigned char)(k * 11 + i * 5 + 1);
        bv |= 1ull << i;
    }
    memcpy(image + 512, &bv, 8);
}

int main(void)
{
    unsigned eax, ebx, ecx, edx, lo, hi;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE))
        return 2;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t)hi << 32 | lo;
    if (!__get_cpuid_count(0xD, 0, &eax, &ebx, &ecx, &edx) || ebx > AREA)
        return 2;
    for (unsigned i = 2; i < 64; i++)
        if ((xcr0 >> i & 1) && __get_cpuid_count(0xD, i, &eax, &ebx, &ecx, &edx) && !(ecx & 1)) {
            offset_of[i] = ebx;
            size_of[i] = eax;
        }
    build_image();

    stack_t alt = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16, .ss_flags = 0}, now;
    sigset_t mask, mask_now;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR2);
    if (!alt.ss_sp || sigaltstack(&alt, NULL) < 0 || sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return 2;
    sigprocmask(SIG_BLOCK, NULL, &mask);
    printf("READY %d xcr0=%#llx\n", (int)getpid(), (unsigned long long)xcr0);
    fflush(stdout);
    for (;;) {
        char buf[64];
        long ret;
        __asm__ volatile("mov $-1, %%eax\n\t"
                         "mov $-1, %%edx\n\t"
                         "xrstor64 (%[image])\n\t"
                         "xsave64 (%[before])\n\t"
                         "xor %%eax, %%eax\n\t"
                         "xor %%edi, %%edi\n\t"
                         "mov %[buf], %%rsi\n\t"
                         "mov $64, %%edx\n\t"
                         "syscall\n\t"
                         "mov %%rax, %%r8\n\t"
                         "mov $-1, %%eax\n\t"
                         "mov $-1, %%edx\n\t"
                         "xsave64 (%[after])\n\t"
                         "mov %%r8, %%rax\n\t"
                         : "=&a"(ret)
                         : [image] "r"(image), [before] "r"(before), [after] "r"(after),
                           [buf] "r"(buf)
                         : "rcx", "rdx", "rdi", "rsi", "r8", "r11", "memory", "xmm0", "xmm1",
                           "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                           "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
        if (ret <= 0)
            return 0;
        char why[512] = "";
        int bad = compare(why, sizeof why);
        if (sigaltstack(NULL, &now) < 0 || now.ss_sp != alt.ss_sp ||
            now.ss_size != alt.ss_size || now.ss_flags != 0)
            bad = 1, strncat(why, " sigaltstack", sizeof why - strlen(why) - 1);
        if (sigprocmask(SIG_BLOCK, NULL, &mask_now) < 0 || memcmp(&mask, &mask_now, sizeof mask))
            bad = 1, strncat(why, " signal-mask", sizeof why - strlen(why) - 1);
        printf("%s%s\n", bad ? "BAD" : "OK", why);
        fflush(stdout);
    }
}
