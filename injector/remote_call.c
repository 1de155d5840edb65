/* remote_call.c — execute code on a borrowed, stopped thread, self-restoring (see
 * remote_call.h).
 *
 * Every piece of our code runs from a state whose way home is already in place: the frame is
 * written before the registers that lead to it are set, so the thread may be let go (or the
 * injector may die) at any stop and still end in rt_sigreturn with its own registers, FPU
 * state and signal mask.  The frame mirrors what the kernel writes when it delivers a signal
 * (arch/x86/kernel/signal_64.c: an rt_sigframe whose pretcode is the restorer, a ucontext
 * whose sigcontext has the registers, an xsave image 64-byte aligned with the fpx_sw_bytes of
 * FP_XSTATE_MAGIC1 and FP_XSTATE_MAGIC2 after it, uc_flags UC_FP_XSTATE|UC_SIGCONTEXT_SS|
 * UC_STRICT_RESTORE_SS), placed below the 128-byte red zone.  rt_sigreturn sets orig_rax to
 * -1, so the interrupted syscall's restart is applied in the frame, as the kernel applies it
 * when no handler runs: -ERESTARTSYS/-ERESTARTNOINTR/-ERESTARTNOHAND → rip -= 2, rax =
 * orig_rax.  -ERESTART_RESTARTBLOCK cannot go through restart_syscall (rt_sigreturn resets
 * the restart block): the syscall is re-issued from its saved arguments instead, and while
 * the injector lives it swaps that rt_sigreturn for a getpid that returns to the restorer
 * and sets the state back itself at its exit stop (the block intact, the restart exact; if
 * the injector dies in between, the restorer still brings the thread home).  The altstack
 * field carries an invalid mode (SS_ONSTACK|SS_DISABLE): restore_altstack then fails with
 * EINVAL, which rt_sigreturn ignores, so the thread's sigaltstack (unknown to us) is kept.
 *
 * While the thread runs our code, anything may happen and is handled:
 *  - syscall stops (PTRACE_SYSCALL): counted to find our rt_sigreturn; nothing else;
 *  - a PTRACE_EVENT_STOP (a queued interrupt, or a group-stop from job control): resume it;
 *    a group-stop's signal is kept for re-delivery at detach so job control still works;
 *  - a signal sent by someone (SIGALRM, SIGCHLD, SIGINT, …): suppressed now, re-delivered at
 *    detach, when the thread is back in its own context;
 *  - a fault raised by the call itself (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP):
 *    the call is abandoned, remote_end sends the thread home (-EFAULT);
 *  - SIGSYS: a seccomp filter forbids a syscall the call made (-ENOSYS);
 *  - no return before the deadline: the thread is interrupted and remote_end sends it home
 *    (-ETIMEDOUT). */
#include "remote_call.h"
#include "proc.h"
#include "xsave_layout.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* kernel-internal errnos (include/linux/errno.h) */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516
/* How long remote_end waits for an abandoned call's thread to stop before restoring it. */
#define RESTORE_WAIT_NS (10 * 1000000000ll)
#define HOMEWARD_NS 1000000000ll   /* bound of a rt_sigreturn piece run by remote_end */
#define RED_ZONE 128
#define PAGE 4096u
#define SCRATCH_STACK (1u << 20)   /* the loader and constructors run on it */
#define SCRATCH_FRAMES 32768u      /* room for one frame (xstate up to the 16 KiB buffer) */
#ifndef FP_XSTATE_MAGIC1 /* <bits/sigcontext.h> */
#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
#endif
#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

/* The x86-64 rt_sigframe as rt_sigreturn reads it (frame = rsp - 8 at the syscall). */
struct sigframe {
    uint64_t pretcode;
    uint64_t uc_flags, uc_link;
    uint64_t ss_sp;
    int32_t ss_flags, ss_pad;
    uint64_t ss_size;
    /* sigcontext: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags */
    uint64_t gregs[18];
    uint16_t cs, gs, fs, ss;
    uint64_t err, trapno, oldmask, cr2, fpstate, reserved1[8];
    uint64_t sigmask;
    unsigned char siginfo[128];
};
_Static_assert(offsetof(struct sigframe, gregs) == 48, "uc_mcontext at uc + 40");
_Static_assert(offsetof(struct sigframe, sigmask) == 304, "uc_sigmask at uc + 296");
_Static_assert(sizeof(struct sigframe) == 440, "rt_sigframe size");

/* The call stub, in a private page of ours:
 *   call *%rax; mov %rax,(%rbx); mov %r12,%rsp; mov $15,%eax; syscall; ud2 */
static const unsigned char stub_code[17] = {0xff, 0xd0, 0x48, 0x89, 0x03, 0x4c, 0x89, 0xe4, 0xb8,
                                            0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x0f, 0x0b};
#define STUB_SYSCALL_END 15

static const unsigned char gadget_syscall_ret[3] = {0x0f, 0x05, 0xc3};
static const unsigned char restorer_rax[9] = {0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};
static const unsigned char restorer_eax[7] = {0xb8, 0x0f, 0, 0, 0, 0x0f, 0x05};

int remote_find_gadgets(const struct elf_file *ef, uint64_t bias, struct remote_gadgets *g)
{
    uint64_t v;
    memset(g, 0, sizeof *g);
    if (elf_find_code(ef, gadget_syscall_ret, sizeof gadget_syscall_ret, &v) < 0)
        return -ENOENT;
    g->syscall_ret = bias + v;
    if (elf_find_code(ef, restorer_rax, sizeof restorer_rax, &v) == 0) {
        g->restorer = bias + v;
        g->restorer_end = g->restorer + sizeof restorer_rax;
    } else if (elf_find_code(ef, restorer_eax, sizeof restorer_eax, &v) == 0) {
        g->restorer = bias + v;
        g->restorer_end = g->restorer + sizeof restorer_eax;
    } else {
        return -ENOENT;
    }
    return 0;
}

/* The thread was interrupted in a syscall that restarts through the kernel's restart block. */
static int restart_block_case(const struct remote *rc)
{
    return (long)rc->saved_regs.orig_rax >= 0 &&
           (long)rc->saved_regs.rax == -ERESTART_RESTARTBLOCK;
}

/* saved_regs with the syscall restart applied, as the thread resumes after rt_sigreturn.
 * rt_sigreturn resets the restart block (restart_syscall would return -EINTR), so a frame
 * re-issues a restart-block syscall from its saved arguments (see remote_call.h). */
static void home_regs(const struct remote *rc, struct user_regs_struct *h)
{
    *h = rc->saved_regs;
    long nr = (long)h->orig_rax, ax = (long)h->rax;
    if (nr >= 0 && (ax == -ERESTARTSYS || ax == -ERESTARTNOINTR || ax == -ERESTARTNOHAND ||
                    ax == -ERESTART_RESTARTBLOCK)) {
        h->rax = (unsigned long long)nr;
        h->rip -= 2;
    }
    h->orig_rax = (unsigned long long)-1;
}

/* Writes a frame that restores the thread home, entirely below address `below`; *frame gets
 * the address of its pretcode slot (rsp for a `ret` into the restorer; rsp - 8 at the
 * restorer's syscall).  On the thread's own stack (own_stack), only memory the thread could
 * write itself is written: a stack too close to its guard page fails (-ENOSPC) before any
 * register is changed. */
static int write_frame(struct remote *rc, uint64_t below, int own_stack, uint64_t *frame)
{
    int (*put)(pid_t, uint64_t, const void *, size_t) = own_stack ? pt_write_mem : pt_write;
    pid_t tid = rc->t->tid;
    struct user_regs_struct h;
    home_regs(rc, &h);
    uint64_t fp = (below - (rc->fp_size + 4)) & ~63ull;
    uint64_t f = ((fp - sizeof(struct sigframe)) & ~15ull) - 8;
    struct sigframe sf;
    memset(&sf, 0, sizeof sf);
    sf.pretcode = rc->g.restorer;
    sf.uc_flags = (rc->saved_fp->kind == 1 ? UC_FP_XSTATE : 0) | UC_SIGCONTEXT_SS |
                  UC_STRICT_RESTORE_SS;
    sf.ss_flags = SS_ONSTACK | SS_DISABLE; /* invalid: the altstack is left alone */
    const uint64_t g[18] = {h.r8, h.r9, h.r10, h.r11, h.r12, h.r13, h.r14, h.r15, h.rdi,
                            h.rsi, h.rbp, h.rbx, h.rdx, h.rax, h.rcx, h.rsp, h.rip, h.eflags};
    memcpy(sf.gregs, g, sizeof g);
    sf.cs = (uint16_t)h.cs;
    sf.ss = (uint16_t)h.ss;
    sf.oldmask = rc->sigmask;
    sf.fpstate = fp;
    sf.sigmask = rc->sigmask;
    const uint32_t magic2 = FP_XSTATE_MAGIC2;
    int r = put(tid, fp, rc->saved_fp->buf, rc->fp_size);
    if (r == 0)
        r = put(tid, fp + rc->fp_size, &magic2, sizeof magic2);
    if (r == 0)
        r = put(tid, f, &sf, sizeof sf);
    if (r == 0)
        *frame = f;
    return r < 0 && own_stack ? -ENOSPC : r;
}

/* The software bytes of the frame's xsave image (fpx_sw_bytes), as the kernel's own signal
 * frames carry them; returns the image's size (their xstate_size).
 *
 * PTRACE_GETREGSET gives the image in the standard form with the kernel's XCR0 in bytes
 * 464..471 (not signal-frame software bytes) and, in the header's xstate_bv, the components
 * the thread has in use; the others read as their initial values.  rt_sigreturn restores the
 * components the software bytes name from the image (XRSTOR: those not marked in xstate_bv
 * are initialized, as they were) and initializes every other component of the thread, but
 * only if the image is no larger than the thread's own size (fpstate->user_size); a larger
 * one makes it restore the legacy x87/SSE area alone and initialize the rest: the upper
 * halves of ymm0-15, zmm, opmask were lost that way when the frame carried the kernel's
 * largest size (11008 bytes with AMX tile data on Xeon Sapphire Rapids; the thread's own was
 * 2816).  So the frame names the components in use (x87 and SSE always, as the kernel's
 * frames do: MXCSR is restored with them) and its size is where the last of them ends, from
 * CPUID (xsave_layout.c): never more than the thread's own size, since the components it
 * uses are among those its size covers, on every layout (AMD's AVX-512 and PKRU sit at other
 * offsets than Intel's; AMX tile data is in use only in a thread whose size holds it). */
static uint32_t frame_sw_bytes(unsigned char *fx, size_t len)
{
    uint64_t features;
    memcpy(&features, fx + XSAVE_HEADER_AT, 8);
    features |= 3;
    uint32_t xsize = xsave_image_size(&features);
    if (xsize > len)
        xsize = (uint32_t)len;
    const uint32_t magic1 = FP_XSTATE_MAGIC1, ext = xsize + 4;
    memcpy(fx + XSAVE_SW_BYTES_AT, &magic1, 4);
    memcpy(fx + XSAVE_SW_BYTES_AT + 4, &ext, 4);
    memcpy(fx + XSAVE_SW_BYTES_AT + 8, &features, 8);
    memcpy(fx + XSAVE_SW_BYTES_AT + 16, &xsize, 4);
    return xsize;
}

/* After our rt_sigreturn: the thread's FPU/vector state must be what it was.  The frame is
 * what brings it home when we cannot (killed at any instant); while we can, this checks the
 * frame did, and where it did not (a layout this code does not foresee), sets the state
 * directly and records which components the frame missed (rc->fp_missed, for -v and the
 * tests).  0 or -errno. */
static int check_fpstate_home(struct remote *rc)
{
    pid_t tid = rc->t->tid;
    int r = pt_get_fpstate(tid, rc->now_fp);
    if (r < 0)
        return r;
    size_t len = rc->saved_fp->len < rc->now_fp->len ? rc->saved_fp->len : rc->now_fp->len;
    uint64_t missed = rc->now_fp->kind != rc->saved_fp->kind ? ~0ull :
                      xsave_differences(rc->saved_fp->buf, rc->now_fp->buf, len);
    if (!missed)
        return 0;
    rc->fp_missed |= missed;
    return pt_set_fpstate(tid, rc->saved_fp);
}

static int is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
           sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS;
}

/* The thread is in a signal-delivery-stop after our code was abandoned: keep the signal for
 * re-delivery unless it is a fault the abandoned code raised itself (kernel-generated, or
 * abort()'s tgkill): re-sent to the restored thread, that would kill the target. */
static void keep_signal_of_abandoned_call(struct tracee *t)
{
    int sig = t->in_signal_stop;
    t->in_signal_stop = 0;
    if (sig <= 0 || sig > 64)
        return;
    if (is_fault(sig)) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) < 0 || si.si_code > 0 ||
            si.si_code == SI_TKILL)
            return;
    }
    t->pending_sigs |= 1ull << (sig - 1);
}

/* A stop other than a syscall stop: a syscall of our code may have been interrupted, so the
 * thread's restart block may be ours now. */
static void foreign_stop(struct remote *rc)
{
    rc->foreign_stops++;
}

/* With the injector alive and the restart block still the thread's own, our rt_sigreturn is
 * skipped (it would reset the block) and the thread's state is set back directly, exactly as
 * found: the interrupted syscall then restarts with its remaining time, as if never stopped. */
static int skip_sigreturn(const struct remote *rc)
{
    return restart_block_case(rc) && !rc->foreign_stops;
}

/* FPU state and mask first, registers last: until the registers are set, the thread is still
 * on its way to a frame that restores all of it. */
static int set_home_directly(struct remote *rc, const struct user_regs_struct *regs)
{
    pid_t tid = rc->t->tid;
    int r = pt_set_fpstate(tid, rc->saved_fp);
    if (r == 0)
        r = pt_set_sigmask(tid, rc->sigmask);
    if (r == 0)
        r = pt_setregs(tid, regs);
    if (r == 0)
        rc->at_home = 1;
    return r;
}

/* Runs one piece from regs until its rt_sigreturn (entry stop at done_rip) has brought the
 * thread home (the exit stop).  sys_rip: rip after the gadget's syscall, whose result goes to
 * *sysret (0: none). */
/* One piece of code run on the borrowed thread: where it ends (done_rip: the rt_sigreturn that
 * brings it home), where a system call's result is read (sys_rip), and the stops seen so far. */
struct piece {
    uint64_t done_rip, sys_rip, *sysret;
    int in_sys;    /* entry and exit stops alternate; we start outside */
    int returning; /* 1: its rt_sigreturn runs; 2: skipped, the registers set directly */
};

#define PIECE_GOES_ON 1 /* not ended: resume the thread (any other result ends the piece) */

/* The piece did not end by the deadline (stuck, e.g. on a lock): the thread is taken back so
 * that it can be restored. */
static int piece_timed_out(struct remote *rc)
{
    struct tracee *t = rc->t;
    foreign_stop(rc);
    rc->timed_out = 1;
    ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
    /* Not stopped within 1 s (uninterruptible sleep, e.g. a vfork in the call): remote_end
     * waits longer before it restores. */
    int r = pt_wait_stop(t, pt_now_ns() + 1000000000, NULL);
    if (r == -ESRCH)
        return -ESRCH;
    if (r == 0)
        keep_signal_of_abandoned_call(t);
    return -ETIMEDOUT;
}

/* A system-call stop of the piece: its own rt_sigreturn home, or the result of its call. */
static int piece_syscall_stop(struct remote *rc, struct piece *pc)
{
    pid_t tid = rc->t->tid;
    struct user_regs_struct now;
    int r = pt_getregs(tid, &now);
    if (r < 0)
        return r;
    pc->in_sys = !pc->in_sys;
    if (pc->in_sys) {
        if (now.orig_rax == SYS_rt_sigreturn && now.rip == pc->done_rip) {
            pc->returning = skip_sigreturn(rc) ? 2 : 1;
            if (pc->returning == 2) {
                /* getpid instead, returning to the restorer: if we die before the exit stop,
                 * the thread still comes home through its frame */
                now.orig_rax = SYS_getpid;
                now.rip = rc->g.restorer;
                r = pt_setregs(tid, &now);
                if (r < 0)
                    return r;
            }
        }
        return PIECE_GOES_ON;
    }
    if (pc->returning == 2)
        return set_home_directly(rc, &rc->saved_regs);
    if (pc->returning) {
        struct user_regs_struct h;
        home_regs(rc, &h);
        if (now.rip != h.rip || now.rsp != h.rsp) {
            rc->fault_sig = SIGSEGV; /* the frame was refused (badframe) */
            return -EFAULT;
        }
        rc->at_home = 1;
        return check_fpstate_home(rc);
    }
    if (pc->sysret && now.rip == pc->sys_rip)
        *pc->sysret = now.rax;
    return PIECE_GOES_ON;
}

/* Any other stop: job control (redone later), our call's own fault (the call is dead), or
 * someone else's signal (handed back when the thread is itself again). */
static int piece_signal_stop(struct remote *rc, int st)
{
    struct tracee *t = rc->t;
    int sig = WSTOPSIG(st), event = (unsigned)st >> 16;
    foreign_stop(rc);
    if (event == PTRACE_EVENT_STOP) {
        if (t->group_stop) /* job control stopped the process meanwhile: redo it later */
            t->pending_sigs |= 1ull << (t->group_stop - 1);
        return PIECE_GOES_ON;
    }
    if (event != 0)
        return PIECE_GOES_ON;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int have_si = ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) == 0;
    /* a kernel-generated fault (si_code > 0), or one aimed at this very thread (abort() inside
     * the call raises SIGABRT with tgkill): the call is dead */
    if (is_fault(sig) && have_si && (si.si_code > 0 || si.si_code == SI_TKILL)) {
        rc->fault_sig = sig;
        t->in_signal_stop = 0;
        return sig == SIGSYS ? -ENOSYS : -EFAULT;
    }
    if (sig >= 1 && sig <= 64)
        t->pending_sigs |= 1ull << (sig - 1);
    t->in_signal_stop = 0;
    return PIECE_GOES_ON;
}

static int run_piece(struct remote *rc, struct user_regs_struct *regs, uint64_t done_rip,
                     uint64_t sys_rip, uint64_t *sysret, int64_t deadline_ns)
{
    struct tracee *t = rc->t;
    regs->orig_rax = (unsigned long long)-1; /* never restart a syscall into our code */
    regs->eflags &= ~(1ull << 10);           /* DF clear, as the ABI requires at a call */
    int r = pt_setregs(t->tid, regs);
    if (r < 0)
        return r;
    rc->at_home = 0;
    rc->fault_sig = 0;
    struct piece pc = {done_rip, sys_rip, sysret, 0, 0};
    for (r = PIECE_GOES_ON; r == PIECE_GOES_ON;) {
        /* signals for the thread are kept and handed back at home, never delivered here */
        if (ptrace(PTRACE_SYSCALL, t->tid, 0, 0) < 0)
            return errno == ESRCH ? -ESRCH : -errno;
        t->state = TRACEE_RUNNING;
        int st;
        r = pt_wait_stop(t, deadline_ns, &st);
        if (r == -ETIMEDOUT)
            return piece_timed_out(rc);
        if (r < 0)
            return r;
        r = t->syscall_stop ? piece_syscall_stop(rc, &pc) : piece_signal_stop(rc, st);
    }
    return r;
}

/* Whether the thread runs with an x86 user shadow stack (CET): our `ret` into the restorer and
 * our rt_sigreturn (no shadow-stack restore token) would fault it.  /proc/TID/status shows
 * "x86_Thread_features: shstk ..." on kernels that support it (6.6+). */
static int uses_shadow_stack(pid_t tid)
{
    struct proc_status st;
    return proc_status_read(tid, 0, &st) == 0 && st.shadow_stack;
}

int remote_begin(struct remote *rc, struct tracee *t, const struct remote_gadgets *g)
{
    if (uses_shadow_stack(t->tid))
        return -EOPNOTSUPP;
    memset(rc, 0, sizeof *rc);
    rc->t = t;
    rc->g = *g;
    rc->saved_fp = malloc(sizeof *rc->saved_fp);
    rc->now_fp = malloc(sizeof *rc->now_fp);
    if (!rc->saved_fp || !rc->now_fp) {
        free(rc->saved_fp);
        free(rc->now_fp);
        return -ENOMEM;
    }
    unsigned char code[9];
    int r = pt_read(t->tid, g->syscall_ret, code, sizeof gadget_syscall_ret);
    if (r == 0 && memcmp(code, gadget_syscall_ret, sizeof gadget_syscall_ret) != 0)
        r = -ENOEXEC; /* the target's libc text differs from its file */
    size_t rlen = g->restorer_end - g->restorer;
    if (r == 0 && (rlen > sizeof code || (r = pt_read(t->tid, g->restorer, code, rlen)) == 0) &&
        memcmp(code, rlen == sizeof restorer_rax ? restorer_rax : restorer_eax, rlen) != 0)
        r = -ENOEXEC;
    if (r == 0)
        r = pt_getregs(t->tid, &rc->saved_regs);
    if (r == 0)
        r = pt_get_fpstate(t->tid, rc->saved_fp); /* the frame must carry it */
    if (r == 0)
        r = pt_get_sigmask(t->tid, &rc->sigmask);
    if (r == 0)
        r = pt_set_tracesysgood(t->tid);
    if (r < 0)
        goto fail;
    unsigned char *fx = rc->saved_fp->buf;
    if (rc->saved_fp->kind == 1) {
        rc->fp_size = frame_sw_bytes(fx, rc->saved_fp->len);
    } else { /* fxsave only: no software bytes, the kernel restores the legacy area */
        memset(fx + XSAVE_SW_BYTES_AT, 0, 512 - XSAVE_SW_BYTES_AT);
        rc->fp_size = 512;
    }
    rc->regs_saved = 1;
    rc->at_home = 1;
    return 0;
fail:
    free(rc->saved_fp);
    free(rc->now_fp);
    rc->saved_fp = rc->now_fp = NULL;
    return r;
}

int remote_syscall(struct remote *rc, long nr, const uint64_t args[6], uint64_t *ret,
                   int64_t deadline_ns)
{
    struct user_regs_struct regs;
    home_regs(rc, &regs);
    uint64_t frame;
    int r = write_frame(rc, regs.rsp - RED_ZONE, 1, &frame);
    if (r < 0)
        return r;
    regs.rax = (unsigned long long)nr;
    regs.rdi = args[0];
    regs.rsi = args[1];
    regs.rdx = args[2];
    regs.r10 = args[3];
    regs.r8 = args[4];
    regs.r9 = args[5];
    regs.rip = rc->g.syscall_ret;
    regs.rsp = frame; /* `ret` after the syscall pops pretcode: the restorer */
    *ret = (uint64_t)-ENOSYS;
    return run_piece(rc, &regs, rc->g.restorer_end, rc->g.syscall_ret + 2, ret, deadline_ns);
}

static uint64_t scratch_result(const struct remote *rc)
{
    return rc->scratch + PAGE;
}

int remote_map_scratch(struct remote *rc, size_t data_len, uint64_t *data, int64_t deadline_ns)
{
    size_t len = PAGE + ((64 + data_len + PAGE - 1) & ~(size_t)(PAGE - 1)) + SCRATCH_STACK +
                 SCRATCH_FRAMES;
    /* Mapped read+exec, the stub written with PTRACE_POKEDATA (which writes a private page the
     * process itself cannot), then everything but the stub made read+write: no page is ever
     * writable and executable, and exec is never added to a mapping, so targets under
     * MemoryDenyWriteExecute (systemd's seccomp filter, or prctl PR_SET_MDWE) accept it. */
    uint64_t args[6] = {0, len, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                        (uint64_t)-1, 0};
    uint64_t ret = 0;
    int r = remote_syscall(rc, SYS_mmap, args, &ret, deadline_ns);
    if (r < 0)
        return r;
    if ((int64_t)ret < 0 && (int64_t)ret > -4096)
        return (int)(int64_t)ret;
    rc->scratch = ret;
    rc->scratch_len = len;
    uint64_t pargs[6] = {rc->scratch + PAGE, len - PAGE, PROT_READ | PROT_WRITE, 0, 0, 0};
    r = remote_syscall(rc, SYS_mprotect, pargs, &ret, deadline_ns);
    if (r < 0)
        return r;
    if ((int64_t)ret < 0)
        return (int)(int64_t)ret;
    r = pt_poke_text(rc->t->tid, rc->scratch, stub_code, sizeof stub_code);
    if (r < 0)
        return r;
    *data = scratch_result(rc) + 64;
    return 0;
}

int remote_call(struct remote *rc, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t *ret,
                int64_t deadline_ns)
{
    if (!rc->scratch)
        return -EINVAL;
    uint64_t top = rc->scratch + rc->scratch_len, frame;
    int r = write_frame(rc, top, 0, &frame);
    if (r < 0)
        return r;
    struct user_regs_struct regs;
    home_regs(rc, &regs);
    regs.rax = fn;
    regs.rdi = a0;
    regs.rsi = a1;
    regs.rbx = scratch_result(rc);
    regs.r12 = frame + 8; /* rsp at the stub's rt_sigreturn */
    regs.rip = rc->scratch;
    regs.rsp = (top - SCRATCH_FRAMES) & ~15ull; /* aligned before `call` pushes */
    rc->calls_run++;
    r = run_piece(rc, &regs, rc->scratch + STUB_SYSCALL_END, 0, NULL, deadline_ns);
    if (r == 0)
        r = pt_read(rc->t->tid, scratch_result(rc), ret, sizeof *ret);
    return r;
}

/* Sends the thread home from wherever our code left it: a fresh frame on its own stack and
 * the restorer; if that cannot be done, the registers, FPU state and mask are set directly. */
static int go_home(struct remote *rc)
{
    struct tracee *t = rc->t;
    struct user_regs_struct regs;
    home_regs(rc, &regs);
    uint64_t frame;
    int r = write_frame(rc, regs.rsp - RED_ZONE, 1, &frame);
    if (r == 0) {
        regs.rip = rc->g.restorer;
        regs.rsp = frame + 8;
        r = run_piece(rc, &regs, rc->g.restorer_end, 0, NULL, pt_now_ns() + HOMEWARD_NS);
        if (r == 0 || t->state == TRACEE_GONE)
            return r;
        if (t->state == TRACEE_RUNNING) /* left running toward its rt_sigreturn: fine too */
            return r;
    }
    home_regs(rc, &regs);
    return set_home_directly(rc, &regs);
}

int remote_end(struct remote *rc)
{
    int err = 0;
    if (!rc->t || !rc->regs_saved)
        goto out;
    struct tracee *t = rc->t;
    if (t->state == TRACEE_GONE)
        goto out;
    /* after a timeout the abandoned frames may still be referenced: the scratch stays */
    int keep_scratch = rc->timed_out;
    if (t->state == TRACEE_RUNNING) {
        /* An abandoned call that did not stop for the interrupt yet: it would come home by
         * itself once free, but only when (if ever) the call returns; take it back first. */
        ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
        int r = pt_wait_stop(t, pt_now_ns() + RESTORE_WAIT_NS, NULL);
        if (r < 0) { /* gone, or still running: its own frames bring it home if ever it returns */
            rc->running_away = 1;
            err = r;
            goto out;
        }
        keep_signal_of_abandoned_call(t);
    }
    if (!rc->at_home) {
        err = go_home(rc);
        if (err < 0)
            goto out;
    }
    if (rc->scratch && !keep_scratch && rc->at_home) {
        uint64_t margs[6] = {rc->scratch, rc->scratch_len, 0, 0, 0, 0}, ret;
        if (remote_syscall(rc, SYS_munmap, margs, &ret, pt_now_ns() + HOMEWARD_NS) == 0)
            rc->scratch = 0;
        if (!rc->at_home)
            err = go_home(rc);
    }
out:
    free(rc->saved_fp);
    free(rc->now_fp);
    rc->saved_fp = rc->now_fp = NULL;
    return err;
}
