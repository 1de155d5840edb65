/* xsave_layout.h — the CPU's XSAVE area as user space sees it: the standard (non-compacted)
 * form that PTRACE_GETREGSET NT_X86_XSTATE returns and signal frames carry, whatever form the
 * kernel keeps internally (compacted with XSAVEC/XSAVES).  Where each state component lies
 * and how large it is comes from CPUID leaf 0xD, never from a table: the offsets differ
 * between vendors (AMD has no MPX gap: its AVX-512 opmask starts at byte 832, Intel's at
 * 1088; its PKRU at 2432, Intel's at 2688) and features come and go (AMX, APX). */
#ifndef VC_XSAVE_LAYOUT_H
#define VC_XSAVE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define XSAVE_SW_BYTES_AT 464 /* bytes 464..511 of the fxsave area: software's */
#define XSAVE_HEADER_AT 512   /* xstate_bv (8 bytes), xcomp_bv (8), reserved */
#define XSAVE_LEGACY_END 576  /* fxsave area + xsave header: the smallest image */

/* The size of a standard-form image that holds `*features` (bit i: state component i): where
 * the last of them ends, at least XSAVE_LEGACY_END.  Components that are not user state
 * (supervisor, or unknown to CPUID) are removed from *features. */
uint32_t xsave_image_size(uint64_t *features);

/* The state components whose values differ between two standard-form images of len bytes
 * (PTRACE_GETREGSET's: a component not in use reads as its initial value), bit i for
 * component i.  Bit 0 covers the x87 registers with their control and status words (the
 * instruction and operand pointers only while an exception is pending: without one, AMD
 * CPUs neither save nor restore them), bit 1 the xmm registers with MXCSR.  The xsave header
 * (which components are marked in use) and the software bytes are not state: ignored. */
uint64_t xsave_differences(const unsigned char *a, const unsigned char *b, size_t len);

/* gdb before 14 reads and writes the XSAVE area at fixed offsets, Intel's.  1 when this
 * CPU enables a component gdb knows at another offset (AMD with AVX-512 or PKRU), with the
 * first such component and both offsets in why; 0 otherwise. */
int xsave_foreign_to_old_gdb(char *why, size_t len);

#endif
