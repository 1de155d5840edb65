"""Short libFuzzer runs of the codec (tests/fuzz/fuzz_cvf_*.c, built with clang and
ASan+UBSan): the .cvf reader + Chrome converter, and the JSON -> .cvf converter (whose output
must decode).  Seeded with traces the tests generate; about 40 s in total.  Skipped, with the
reason, only when clang's libFuzzer runtime could not build the targets."""
import json
import os
import shutil
import subprocess

import pytest

from support.codec_gen import generate, write_json
from support.paths import BUILD
from support.traces import convert

FUZZ_SECONDS = int(os.environ.get("VC_FUZZ_SECONDS", "20"))


def _fuzzer(name):
    path = os.path.join(BUILD, "fuzz", name)
    if not os.path.exists(path):
        pytest.skip("%s was not built: clang's libFuzzer runtime (libclang-rt-14-dev) is "
                    "unavailable" % path)
    return path


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzzseeds")
    cvfs, jsons = d / "cvf", d / "json"
    cvfs.mkdir()
    jsons.mkdir()
    for seed in range(4):
        trace, _, _ = generate(100 + seed, n_x=15)
        trace["traceEvents"] = trace["traceEvents"][:40]
        src = str(jsons / ("t%d.json" % seed))
        write_json(src, trace)
        convert(src, str(cvfs / ("t%d.cvf" % seed)))
    with open(str(jsons / "bare.json"), "w") as f:
        json.dump([{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2,
                    "args": {"a": [1, {"b": None}]}},
                   {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 1, "args": {"v": 1}}], f)
    return str(cvfs), str(jsons)


def _run(exe, seed_dir, tmp_path, extra):
    work = str(tmp_path / "corpus")
    shutil.copytree(seed_dir, work)
    r = subprocess.run([exe, work, "-max_total_time=%d" % FUZZ_SECONDS, "-seed=12345",
                        "-rss_limit_mb=2048", "-timeout=10", "-print_final_stats=1"] + extra,
                       capture_output=True, text=True, timeout=FUZZ_SECONDS + 120,
                       cwd=str(tmp_path))
    tail = "\n".join(r.stderr.splitlines()[-25:])
    assert r.returncode == 0, "fuzzer found a problem:\n" + tail
    assert "stat::number_of_executed_units" in r.stderr, tail


def test_fuzz_cvf_reader(seeds, tmp_path):
    _run(_fuzzer("fuzz_cvf_reader"), seeds[0], tmp_path, ["-max_len=8192"])


def test_fuzz_json_to_cvf(seeds, tmp_path):
    _run(_fuzzer("fuzz_cvf_json"), seeds[1], tmp_path, ["-max_len=8192"])


@pytest.fixture(scope="module")
def spool_seeds(tmp_path_factory):
    """Frames as the fuzz target reads them (u8 type - 9, u16 length, bytes): a clock, a
    thread, a name, a chunk of three records with a drop marker, and a chunk of CPU clock
    samples (id VC_WIRE_CPU, one going back), a chunk of asyncio task marks (a name in two
    parts, steps, a task 0); and the same stream as a spool file's records (u32 type, u32
    length, bytes) behind the mode byte, with its CPU samples (103), task steps (104) and a
    task name (105)."""
    import struct
    d = tmp_path_factory.mktemp("spoolseeds")
    clock = struct.pack("<QQd", 1000, 5000, 0.5)
    thread = struct.pack("<IiII", 0, 4242, 4, 0) + b"main"
    name = struct.pack("<II", 0, 1) + b"f"
    recs = b"".join(struct.pack("<QQII", 2000 + 10 * i, 5, 0, 0) for i in range(3))
    drop = struct.pack("<QQII", 2100, 50, 0xFFFFFFFD, 7)
    chunk = struct.pack("<II", 0, 4) + recs + drop
    cpu = struct.pack("<II", 0, 3) + b"".join(struct.pack("<QQII", t, c, 0xFFFFFFFC, 0)
                                              for t, c in ((2000, 10), (2010, 30), (2020, 20)))
    # asyncio task marks (agent/tasks.h): a name in two parts, two steps of it, one of task 0
    tasks = struct.pack("<II", 0, 5) + b"".join(struct.pack("<QQII", *r) for r in (
        (int.from_bytes(b"req-0123", "little"), int.from_bytes(b"45678901", "little"),
         0xFFFFFFFA, 1), (int.from_bytes(b"abc\0\0\0\0\0", "little"), 0, 0xFFFFFFF9, 1),
        (2000, 1, 0xFFFFFFFB, 0), (2010, 1, 0xFFFFFFFB, 0), (2020, 0, 0xFFFFFFFB, 0)))
    frames = [(12, clock), (11, thread), (10, name), (9, chunk), (9, cpu), (9, tasks),
              (13, struct.pack("<Q", 4242) + b"py")]
    stream = b"".join(struct.pack("<BH", t - 9, len(p)) + p for t, p in frames)
    (d / "frames").write_bytes(b"\x00" + stream)
    records = b"".join(struct.pack("<II", t, len(p)) + p for t, p in frames if t != 9)
    lane = struct.pack("<IIIIII", 100, 16, 0, 0, 0, 0)
    seg = struct.pack("<IIIIQQ", 101, 24 + 6, 0, 3, 2000, 2025) + bytes([0, 5, 20, 5, 20, 5])
    cpu_rec = struct.pack("<IIII", 103, 8 + 32, 0, 2) + struct.pack("<QQQQ", 2000, 10, 2030, 40)
    task_rec = struct.pack("<IIII", 104, 8 + 16, 0, 1) + struct.pack("<QQ", 2000, 1)
    name_rec = struct.pack("<IIII", 105, 24, 1, 0) + b"req-0123" + b"45678901"
    (d / "file").write_bytes(b"\x01" + records + lane + seg + cpu_rec + task_rec + name_rec)
    return str(d)


def test_fuzz_spool(spool_seeds, tmp_path):
    """What an agent streams and a spool file on disk, fuzzed through spool_add, spool_open's
    replay and the .cvf build (common/spool.c, spool_build.c) under ASan and UBSan."""
    _run(_fuzzer("fuzz_cvf_spool"), spool_seeds, tmp_path, ["-max_len=4096"])
