"""The C libraries vcattach reaches (issue 32): the agents load into any glibc from 2.17 on
(manylinux2014's floor), whatever glibc built them; the self-contained vcattach needs no
library at all; a target the agents cannot load into is refused in one line before it is
touched.

  - every built agent's dynamic symbol versions: nothing newer than GLIBC_2.17, nothing
    private, no library but libc, libpthread and the loader (zlib is linked in);
  - scripts/glibc-floor, which makes that so: it binds pthread_create to its 2.2.5 version
    (the same code), leaves glob's newer code alone, and fails a library that needs fstat
    (glibc 2.33) with one line naming it;
  - the reader of a libc's version definitions (injector/elf.c), on this machine's libc and on
    hostile copies, under ASan+UBSan;
  - build/vcattach-static (what `make install` and `make dist` ship): no interpreter, no
    DT_NEEDED;
  - the refusals (system tests): a musl process with no musl agent for its CPython (a stand-in
    that the CPython detection takes for 3.11, built with musl-gcc: musl's loader named as
    Alpine names it, and as Debian's musl-tools installs it; tests/system/test_musl.py has a real musl
    CPython) and a glibc older than the floor (the stand-in, static, mapping a
    libc.so.6 whose newest version is GLIBC_2.12): exit 2, one line, the target untouched.
"""
import os
import random
import re
import shutil
import struct
import subprocess
import time

import pytest

from support.paths import BUILD, ROOT, VCATTACH
from support.proc import assert_untouched
from support.targets import Target

FLOOR = (2, 17)
ALLOWED_NEEDED = {"libc.so.6", "libpthread.so.0", "ld-linux-x86-64.so.2"}
GLIBC_FLOOR = os.path.join(ROOT, "scripts", "glibc-floor")
STATIC = os.path.join(BUILD, "vcattach-static")
STANDINS = os.path.join(BUILD, "tests")


def agents():
    return sorted(os.path.join(BUILD, f) for f in os.listdir(BUILD)
                  if re.match(r"^libvcagent-py\d+d?\.so$", f))


def needed_versions(path):
    """{version: [symbols]} of the versioned symbols path imports (`objdump -T`)."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True,
                         check=True).stdout
    got = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and "*UND*" in f and re.match(r"^\(?[A-Z]", f[-2]):
            got.setdefault(f[-2].strip("()"), []).append(f[-1])
    return got


def needed_libraries(path):
    out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def glibc_version(name):
    m = re.match(r"^GLIBC_(\d+)\.(\d+)(?:\.\d+)?$", name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_every_agent_needs_nothing_newer_than_glibc_2_17():
    built = agents()
    assert built, "no agent is built: run make"
    bad = []
    for path in built:
        for ver, syms in needed_versions(path).items():
            if not ver.startswith("GLIBC"):
                continue  # none expected: every other library is linked in (checked below)
            v = glibc_version(ver)
            if v is None or v > FLOOR:
                bad.append("%s: %s needs %s" % (os.path.basename(path), " ".join(syms), ver))
        extra = set(needed_libraries(path)) - ALLOWED_NEEDED
        if extra:
            bad.append("%s: needs %s" % (os.path.basename(path), " ".join(sorted(extra))))
    assert not bad, "\n".join(bad)


def test_the_floor_script_pins_moved_code_and_names_what_it_cannot(tmp_path):
    libc = subprocess.run(["cc", "-print-file-name=libc.so.6"], capture_output=True,
                          text=True).stdout.strip()
    defs = subprocess.run(["objdump", "-T", libc], capture_output=True, text=True).stdout
    if not re.search(r"GLIBC_2\.34\s+pthread_create", defs):
        pytest.skip("this machine's glibc is older than 2.34: pthread_create has nothing to "
                    "pin")
    pins = subprocess.run([GLIBC_FLOOR, "pins", "--floor", "2.17"], capture_output=True,
                          text=True, check=True).stdout
    assert '.symver pthread_create,pthread_create@GLIBC_2.2.5"' in pins  # moved: same code
    assert '.symver fcntl64,fcntl@GLIBC_2.2.5"' in pins                   # renamed: same code
    assert not re.search(r"\.symver glob,", pins)           # glob@GLIBC_2.27 is new code
    assert not re.search(r"\.symver pthread_cond_init,", pins)  # 2.3.2, older than the floor
    # a library calling fstat (exported only since glibc 2.33) fails the check, by name
    src = tmp_path / "uses_fstat.c"
    src.write_text("#include <sys/stat.h>\nint f(int fd) { struct stat st; "
                   "return fstat(fd, &st); }\n")
    lib = tmp_path / "libuses_fstat.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    r = subprocess.run([GLIBC_FLOOR, "check", "--floor", "2.17", str(lib)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "needs fstat@GLIBC_2.33, newer than glibc 2.17 (the agents' floor)" in r.stderr, \
        r.stderr


def test_self_contained_vcattach_needs_no_library():
    if not os.path.exists(STATIC):
        pytest.skip("%s is not built: run make" % STATIC)
    headers = subprocess.run(["readelf", "-lW", STATIC], capture_output=True, text=True,
                             check=True).stdout
    assert "INTERP" not in headers, "needs a dynamic loader"
    assert needed_libraries(STATIC) == []
    # nothing from the environment either: no PATH, no locale, no HOME
    r = subprocess.run([STATIC, "--version"], capture_output=True, text=True, env={})
    assert r.returncode == 0 and "vcattach" in r.stdout, r.stdout + r.stderr


VERSIONS_DRIVER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elf.h"
/* For each file: the symbol versions it defines, counted, and the newest GLIBC_2.N. */
static void note(void *ctx, const char *name)
{
    int *c = ctx;
    c[0]++;
    if (strncmp(name, "GLIBC_2.", 8) == 0 && c[1] < atoi(name + 8))
        c[1] = atoi(name + 8);
}
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY), c[2] = {0, 0};
        struct elf_file ef;
        if (fd < 0 || elf_open_fd(fd, &ef) != 0) {
            printf("unreadable\n");
        } else {
            int rc = elf_version_names(&ef, note, c);
            printf("%d %d %d\n", rc, c[0], c[1]);
            elf_close(&ef);
        }
        if (fd >= 0)
            close(fd);
    }
    return 0;
}
"""


def verdef_section(data):
    """(offset, size) of the SHT_GNU_verdef section of an ELF64 file's bytes."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", data, shoff + i * shentsize + 4)
        if sh_type == 0x6ffffffd:
            return struct.unpack_from("<QQ", data, shoff + i * shentsize + 0x18)
    raise AssertionError("no .gnu.version_d")


def test_version_reader_survives_hostile_version_definitions(tmp_path):
    """injector/elf.c's elf_version_names reads a file the target's user controls (the libc its
    process maps): under ASan+UBSan it reads this machine's libc right (GLIBC_2.N up to its
    release), and 300 copies of the old-glibc stand-in whose version definitions carry random
    offsets, counts and names without a read outside its buffers or a runaway loop."""
    src = tmp_path / "versions.c"
    src.write_text(VERSIONS_DRIVER)
    exe = tmp_path / "versions"
    subprocess.run(["cc", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-D_GNU_SOURCE", "-I", os.path.join(ROOT, "injector"), "-I",
                    os.path.join(ROOT, "common"), "-o", str(exe), str(src),
                    os.path.join(ROOT, "injector", "elf.c")], check=True)
    libc = os.path.realpath(subprocess.run(["cc", "-print-file-name=libc.so.6"],
                                           capture_output=True, text=True).stdout.strip())
    small = os.path.join(STANDINS, "old-glibc", "libc.so.6")  # a few KB to copy 300 times
    if not os.path.exists(small):
        pytest.skip("%s is not built: run make test-prereqs" % small)
    data = open(small, "rb").read()
    off, size = verdef_section(data)
    rng = random.Random(32)
    files = []
    for i in range(300):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            at = off + rng.randrange(0, size - 4)
            value = rng.choice([0, 1, 0xffff, 0x7fffffff, 0xffffffff, rng.getrandbits(32),
                                rng.randrange(0, 64)])
            struct.pack_into("<I", bad, at, value)
        path = tmp_path / ("bad%d.so" % i)
        path.write_bytes(bytes(bad))
        files.append(str(path))
    p = subprocess.run([str(exe), libc] + files, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "runtime error" not in p.stderr, p.stderr[-3000:]
    rc, count, newest = (int(x) for x in p.stdout.splitlines()[0].split())
    assert rc == 0 and count > 30 and newest >= 17, p.stdout.splitlines()[0]
    assert len(p.stdout.splitlines()) == 301


class Standin(Target):
    """tests/targets/libc_standin.c, run as argv (its own program, not an interpreter)."""

    def __init__(self, argv):
        super().__init__({"path": argv[0]}, argv[1:])

    def wait_ready(self, deadline):
        line = self.readline(max(0.1, deadline - time.monotonic()))
        assert line.strip() == "ready", "stand-in not ready: %r" % line


def refused(pid, out, env=None):
    r = subprocess.run([VCATTACH, "--pid", str(pid), "-t", "1s", "-o", str(out)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert_untouched(pid)
    return lines[0]


@pytest.mark.system
@pytest.mark.parametrize("build", ["alpine-standin", "musl-standin"])
def test_musl_target_refused_before_it_is_touched(build, start_target, tmp_path):
    """alpine-standin maps musl's loader as Alpine names it (ld-musl-x86_64.so.1),
    musl-standin as Debian's musl-tools installs it (under x86_64-linux-musl/)."""
    exe = os.path.join(STANDINS, "musl", build)
    if not os.path.exists(exe):
        pytest.skip("%s is not built: musl-gcc (musl-tools) is missing; scripts/install-deps.sh "
                    "installs it" % exe)
    t = start_target(Standin, [exe])
    with open("/proc/%d/maps" % t.pid) as f:
        maps = f.read()
    assert ("/ld-musl-x86_64.so.1" if build == "alpine-standin" else "-linux-musl/") in maps
    # only the glibc agent for 3.11 where vcattach looks: it is not the fallback
    agents = tmp_path / "agents"
    agents.mkdir(mode=0o755)
    glibc_agent = os.path.join(BUILD, "libvcagent-py311.so")
    if not os.path.exists(glibc_agent):
        pytest.skip("%s is not built: run make" % glibc_agent)
    shutil.copy2(glibc_agent, str(agents))
    line = refused(t.pid, tmp_path / "out.cvf", env={"VCATTACH_AGENT_DIR": str(agents)})
    assert line.startswith("vcattach: pid %d runs on musl libc (Alpine?) (" % t.pid), line
    assert "; no musl agent built: libvcagent-py311-musl.so not found in %s" % agents in line, \
        line
    assert "glibc-based image" in line, line  # what to do instead


@pytest.mark.system
def test_glibc_older_than_the_floor_refused_before_it_is_touched(start_target, tmp_path):
    exe = os.path.join(STANDINS, "libc-standin")
    old_libc = os.path.join(STANDINS, "old-glibc", "libc.so.6")
    for f in (exe, old_libc):
        if not os.path.exists(f):
            pytest.skip("%s is not built: run make test-prereqs" % f)
    t = start_target(Standin, [exe, old_libc])
    line = refused(t.pid, tmp_path / "out.cvf")
    assert line.startswith("vcattach: pid %d runs on glibc 2.12 (%s defines no symbol version "
                           "newer than GLIBC_2.12), older than glibc 2.17, the oldest vcattach's "
                           "agents load into" % (t.pid, old_libc)), line


@pytest.mark.system
def test_static_target_without_libc_is_not_refused_as_old_glibc(start_target, tmp_path):
    """The same stand-in mapping no libc at all: not a C library vcattach can judge, so not
    refused as musl or old glibc (the injection says what it found, untouched)."""
    exe = os.path.join(STANDINS, "libc-standin")
    if not os.path.exists(exe):
        pytest.skip("%s is not built: run make test-prereqs" % exe)
    t = start_target(Standin, [exe])
    r = subprocess.run([VCATTACH, "--pid", str(t.pid), "-t", "1s", "-o", str(tmp_path / "o.cvf"),
                        "--method", "ptrace"], capture_output=True, text=True, timeout=60)
    assert "musl" not in r.stderr and "older than glibc" not in r.stderr, r.stderr
    assert "no libc is mapped" in r.stderr and "(the target was not changed)" in r.stderr, \
        r.stderr
    assert_untouched(t.pid)
