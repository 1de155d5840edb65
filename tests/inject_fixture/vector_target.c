/* vector_target.c — a target for tests/test_inject_kill.py: holds a pattern in ymm0-15 and a
 * non-default MXCSR (round toward zero) across a raw read(2) of stdin, which the injector
 * interrupts and borrows; its signal mask (SIGUSR2 blocked) and sigaltstack are its own too.
 * After each line read it prints OK if every vector register, MXCSR, the mask and the
 * altstack came back intact, BAD otherwise; exits at end of input.  Needs AVX. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    static unsigned char in[16 * 32] __attribute__((aligned(32)));
    static unsigned char out[16 * 32] __attribute__((aligned(32)));
    for (unsigned i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    unsigned mx_in = 0x1f80 | (3u << 13), mx_out = 0;
    stack_t alt = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16, .ss_flags = 0}, now;
    sigset_t mask, mask_now;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR2);
    if (!alt.ss_sp || sigaltstack(&alt, NULL) < 0 || sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return 2;
    sigprocmask(SIG_BLOCK, NULL, &mask);
    printf("READY %d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        char buf[64];
        long ret;
        __asm__ volatile("ldmxcsr %[mxi]\n\t"
        "vmovdqu 0(%[in]), %%ymm0\n\t"
        "vmovdqu 32(%[in]), %%ymm1\n\t"
        "vmovdqu 64(%[in]), %%ymm2\n\t"
        "vmovdqu 96(%[in]), %%ymm3\n\t"
        "vmovdqu 128(%[in]), %%ymm4\n\t"
        "vmovdqu 160(%[in]), %%ymm5\n\t"
        "vmovdqu 192(%[in]), %%ymm6\n\t"
        "vmovdqu 224(%[in]), %%ymm7\n\t"
        "vmovdqu 256(%[in]), %%ymm8\n\t"
        "vmovdqu 288(%[in]), %%ymm9\n\t"
        "vmovdqu 320(%[in]), %%ymm10\n\t"
        "vmovdqu 352(%[in]), %%ymm11\n\t"
        "vmovdqu 384(%[in]), %%ymm12\n\t"
        "vmovdqu 416(%[in]), %%ymm13\n\t"
        "vmovdqu 448(%[in]), %%ymm14\n\t"
        "vmovdqu 480(%[in]), %%ymm15\n\t"
        "xor %%eax, %%eax\n\t"
        "xor %%edi, %%edi\n\t"
        "mov %[buf], %%rsi\n\t"
        "mov $64, %%edx\n\t"
        "syscall\n\t"
        "vmovdqu %%ymm0, 0(%[out])\n\t"
        "vmovdqu %%ymm1, 32(%[out])\n\t"
        "vmovdqu %%ymm2, 64(%[out])\n\t"
        "vmovdqu %%ymm3, 96(%[out])\n\t"
        "vmovdqu %%ymm4, 128(%[out])\n\t"
        "vmovdqu %%ymm5, 160(%[out])\n\t"
        "vmovdqu %%ymm6, 192(%[out])\n\t"
        "vmovdqu %%ymm7, 224(%[out])\n\t"
        "vmovdqu %%ymm8, 256(%[out])\n\t"
        "vmovdqu %%ymm9, 288(%[out])\n\t"
        "vmovdqu %%ymm10, 320(%[out])\n\t"
        "vmovdqu %%ymm11, 352(%[out])\n\t"
        "vmovdqu %%ymm12, 384(%[out])\n\t"
        "vmovdqu %%ymm13, 416(%[out])\n\t"
        "vmovdqu %%ymm14, 448(%[out])\n\t"
        "vmovdqu %%ymm15, 480(%[out])\n\t"
        "stmxcsr %[mxo]\n\t"
        : "=&a"(ret), [mxo] "=m"(mx_out)
        : [in] "r"(in), [out] "r"(out), [buf] "r"(buf), [mxi] "m"(mx_in)
        : "rcx", "r11", "rdi", "rsi", "rdx", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
        if (ret <= 0)
            return 0;
        int ok = memcmp(in, out, sizeof in) == 0 && mx_out == mx_in;
        if (sigaltstack(NULL, &now) < 0 || now.ss_sp != alt.ss_sp || now.ss_size != alt.ss_size ||
            now.ss_flags != 0 || sigprocmask(SIG_BLOCK, NULL, &mask_now) < 0 ||
            memcmp(&mask, &mask_now, sizeof mask) != 0)
            ok = 0;
        printf("%s\n", ok ? "OK" : "BAD");
        fflush(stdout);
    }
}
