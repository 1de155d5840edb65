"""Issue 9, the offline tools (summary, convert) and the ELF reader, given hostile files.

The files a trace tool reads come from the agent, i.e. from the target's user; an ELF that
vcattach reads belongs to the target's user.  Each test fails on the code before its fix:
  - summary loaded threads with a scan per new thread (200k threads: quadratic, ~1 GB);
  - span and duration sums overflowed int64 on extreme timestamps (UBSan aborts);
  - huge JSON reals were cast from double to integer (UBSan aborts);
  - the ELF reader mmapped the file: truncated meanwhile, it SIGBUSed;
  - convert must refuse an OUT.tmp that someone else created (O_EXCL|O_NOFOLLOW).
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import zlib

import pytest

from support.paths import BUILD, ROOT, VCATTACH

ASAN_VCATTACH = os.path.join(BUILD, "asan", "vcattach")
I64_MIN, MAX_VARINT = -2**63, 2**62 - 1


def _varint(v):
    if v <= 0x3F:
        return struct.pack("<B", v << 2)
    if v <= 0x3FFF:
        return struct.pack("<H", (v << 2) | 1)
    if v <= 0x3FFFFFFF:
        return struct.pack("<I", (v << 2) | 2)
    return struct.pack("<Q", (v << 2) | 3)


def write_cvf(path, groups):
    """groups: [((pid, tid, name), [(ts_ticks, dur_ticks), ...]), ...] (sorted by ts)."""
    out = [struct.pack("<Q", 1)]
    for (pid, tid, name), evs in groups:
        body = [b"\x01", struct.pack("<QQ", pid, tid), name.encode(), b"\0",
                struct.pack("<QQq", len(evs), 0, evs[0][0]), _varint(evs[0][1])]
        for (prev, _), (ts, dur) in zip(evs, evs[1:]):
            body += [_varint(ts - prev), _varint(dur)]
        out.append(b"".join(body))
    raw = b"[]"
    packed = zlib.compress(raw)
    out.append(b"\x05" + struct.pack("<QQ", len(raw), len(packed)) + packed)
    with open(path, "wb") as f:
        f.write(b"".join(out))
    return str(path)


def _limit_memory(mb):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    return apply


def test_summary_of_200k_threads_is_linear(tmp_path):
    """A 9 MB .cvf with 200k one-call threads: the quadratic loader took ~1 min and 826 MB.
    The bound here is memory (512 MB of address space) and a generous wall-clock cap."""
    path = write_cvf(tmp_path / "many.cvf", [((1, t, "f"), [(t, 10)]) for t in range(200_000)])
    assert os.path.getsize(path) > 8 << 20
    for extra in ([], ["--merged"], ["--max-threads", "0"]):
        p = subprocess.run([VCATTACH, "summary", path] + extra, capture_output=True, text=True,
                           timeout=120, preexec_fn=_limit_memory(512))
        assert p.returncode == 0, p.stderr
        assert "200000 threads" in p.stdout.splitlines()[0]


EXTREME = [((1, 1, "f"), [(I64_MIN, MAX_VARINT)]),
           ((1, 1, "g"), [(I64_MIN + k * MAX_VARINT, MAX_VARINT) for k in (1, 2, 3)]),
           ((1, 2, "f"), [(I64_MIN, MAX_VARINT)]),
           ((1, 3, "h"), [(2**63 - 10, 5)])]


@pytest.mark.parametrize("binary", [VCATTACH, ASAN_VCATTACH], ids=["normal", "sanitized"])
def test_summary_and_exports_survive_extreme_timestamps(tmp_path, binary):
    """Calls from INT64_MIN to INT64_MAX: the span and every sum saturate instead of overflowing
    (a negative span in the normal build, an abort under UBSan before the fix)."""
    if not os.path.exists(binary):
        pytest.skip(f"{binary} not built (make {os.path.relpath(binary, ROOT)})")
    path = write_cvf(tmp_path / "extreme.cvf", EXTREME)
    for extra in ([], ["--merged"], ["--sort", "total"]):
        p = subprocess.run([binary, "summary", path] + extra, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        head = p.stdout.splitlines()[0]
        assert ": -" not in head and "span" in head, head
        assert "runtime error" not in p.stderr
    for fmt in ("speedscope", "collapsed", "chrome", "svg"):
        out = tmp_path / f"out.{fmt}"
        p = subprocess.run([binary, "convert", path, "-o", str(out), "--format", fmt],
                           capture_output=True, text=True, timeout=120)
        assert "runtime error" not in p.stderr, p.stderr
        assert p.returncode in (0, 1), p.stderr


HUGE_CASES = {
    # reals where integers are expected: a clean one-line refusal
    "real_pids": ([{"ph": "X", "name": "f", "pid": 1e300, "tid": -1e300, "ts": 0, "dur": 1}],
                  1),
    # huge reals where reals are allowed: saturated, never cast out of range
    "dropped": ([{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 0, "dur": 1},
                 {"ph": "i", "name": "vcattach.dropped", "args": {"dropped": 1e300}, "pid": 1,
                  "tid": 1, "ts": 0, "s": "g"},
                 {"ph": "i", "name": "vcattach.dropped", "args": {"dropped": 5e19}, "pid": 1,
                  "tid": 1, "ts": 1, "s": "g"}], 0),
    "times": ([{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1e300},
               {"ph": "X", "name": "g", "pid": 1, "tid": 1, "ts": -1e300, "dur": 1e18},
               {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 1e300,
                "args": {"v": 1e300, "w": -1e300}},
               {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": -1e300, "args": {"v": 1}}],
              None),
}


@pytest.mark.parametrize("binary", [VCATTACH, ASAN_VCATTACH], ids=["normal", "sanitized"])
@pytest.mark.parametrize("case", sorted(HUGE_CASES))
def test_huge_json_reals_are_saturated_not_cast(tmp_path, binary, case):
    """pids, timestamps, counter values and args.dropped of ±1e300: converting such a double
    to an integer is undefined behaviour; they are refused with a message or saturated."""
    if not os.path.exists(binary):
        pytest.skip(f"{binary} not built")
    events, want = HUGE_CASES[case]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"traceEvents": events}))
    for cmd in (["summary", str(path)], ["convert", str(path), "-o", str(tmp_path / "o.cvf")]):
        p = subprocess.run([binary] + cmd, capture_output=True, text=True, timeout=60)
        assert "runtime error" not in p.stderr, p.stderr
        assert p.returncode in ((0, 1) if want is None else (want,)), p.stderr
        if p.returncode:
            assert p.stderr.count("\n") == 1, p.stderr
        if case == "dropped" and cmd[0] == "summary":
            assert "18,446,744,073,709,551,615 calls dropped" in p.stdout, p.stdout


ELF_DRIVER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include "elf.h"
/* Opens an ELF, truncates it (as its owner could while vcattach reads it), then looks up. */
int main(int argc, char **argv)
{
    int fd = open(argv[1], O_RDWR);
    struct elf_file ef;
    if (fd < 0 || elf_open_fd(fd, &ef) != 0)
        return 2;
    if (ftruncate(fd, 64) != 0)
        return 3;
    uint64_t a = 0;
    const char *name = NULL;
    uint64_t off = 0;
    int found = elf_lookup(&ef, argv[2], &a) == 0;
    int named = found && elf_symbolize(&ef, a, &name, &off) == 0;
    printf("%d %d\n", found, named);
    elf_close(&ef);
    close(fd);
    return 0;
}
"""


def test_elf_truncated_while_read_cannot_sigbus(tmp_path):
    """The ELF reader keeps its own copy of the tables it uses (the mmap it had before made a
    truncation by the file's owner a SIGBUS in vcattach)."""
    lib = os.path.join(BUILD, "libvcinject.a")
    if not os.path.exists(lib):
        pytest.skip("build/libvcinject.a not built")
    src = tmp_path / "elf_truncate.c"
    src.write_text(ELF_DRIVER)
    exe = tmp_path / "elf_truncate"
    subprocess.run(["cc", "-O1", "-I", os.path.join(ROOT, "injector"), "-o", str(exe), str(src),
                    lib], check=True)
    libc = subprocess.run(["cc", "-print-file-name=libc.so.6"], capture_output=True,
                          text=True).stdout.strip()
    if not os.path.isabs(libc):
        libc = "/lib/x86_64-linux-gnu/libc.so.6"
    victim = tmp_path / "libc-copy.so"
    shutil.copyfile(libc, victim)
    p = subprocess.run([str(exe), str(victim), "malloc"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout.split() == ["1", "1"]


def test_convert_refuses_a_precreated_tmp(tmp_path):
    """OUT.tmp made beforehand (by another user, or a symlink to a file of root's): convert
    neither writes through it nor follows it."""
    src = write_cvf(tmp_path / "in.cvf", [((1, 1, "f"), [(0, 10)])])
    canary = tmp_path / "canary"
    canary.write_text("untouched\n")
    out = tmp_path / "out.json"
    tmp = tmp_path / "out.json.tmp"
    for make in ("file", "symlink"):
        if make == "file":
            tmp.write_text("someone else's\n")
        else:
            os.symlink(canary, tmp)
        p = subprocess.run([VCATTACH, "convert", src, "-o", str(out)], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode != 0
        assert "out.json.tmp exists" in p.stderr, p.stderr
        assert canary.read_text() == "untouched\n"
        assert not out.exists()
        if make == "file":
            assert tmp.read_text() == "someone else's\n"
        else:
            assert os.readlink(tmp) == str(canary)
        tmp.unlink()
    # with --force the stale name is removed (not followed) and the output written
    os.symlink(canary, tmp)
    p = subprocess.run([VCATTACH, "convert", src, "-o", str(out), "--force"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert canary.read_text() == "untouched\n"
    assert out.exists() and not tmp.exists()
