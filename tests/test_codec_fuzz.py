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
