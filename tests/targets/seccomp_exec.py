"""Runs a command under a seccomp filter that makes ptrace(2) fail with EPERM, like Docker's
default profile did for containers without CAP_SYS_PTRACE (x86-64 only).

    python seccomp_exec.py PROGRAM [ARGS...]
"""
import ctypes
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
NR_PTRACE_X86_64 = 101

BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_RET_K = 0x06


def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def main():
    if platform.machine() != "x86_64":
        sys.exit("seccomp_exec.py: x86-64 only")
    program = b"".join([
        insn(BPF_LD_W_ABS, 0, 0, 0),                   # A = seccomp_data.nr
        insn(BPF_JEQ_K, 0, 1, NR_PTRACE_X86_64),       # ptrace?
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ])
    filters = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    prog = SockFprog(len(program) // 8, ctypes.addressof(filters))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        sys.exit("seccomp_exec.py: cannot install the filter: %s"
                 % os.strerror(ctypes.get_errno()))
    os.execv(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
