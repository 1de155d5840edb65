"""Malformed input never crashes the codec: truncation at every offset, seeded random byte
flips, huge declared lengths and counts, a wrong version, unknown header bytes.
  - in-process over every offset/flip with build/tests/cvf_corrupt, plain and ASan+UBSan;
  - through the real CLI (plain and ASan+UBSan): exit 1, one line on stderr naming the
    offset, no OUT and no OUT.tmp left behind;
  - the Python reader: ValueError naming the offset, and for flipped files the same verdict
    and the same events as the C converter (a differential test of two implementations)."""
import json
import math
import os
import random
import struct
import subprocess

import pytest

from support.codec_gen import generate, write_json
from support.paths import ASAN_VCATTACH, BUILD, CORPUS, VCATTACH
from support.traces import convert
from vcattach import cvf

DRIVER = os.path.join(BUILD, "tests", "cvf_corrupt")
ASAN_DRIVER = os.path.join(BUILD, "asan", "tests", "cvf_corrupt")


@pytest.fixture(scope="module")
def small_cvf(tmp_path_factory):
    """A generated .cvf with every record type (names, FEE with and without args, counters,
    other events, file_info), small enough to cut at every offset."""
    d = tmp_path_factory.mktemp("corrupt")
    trace, _, _ = generate(11, n_x=60)
    trace["file_info"] = {"files": {"/a.py": ["x = 1\n", 1]}, "functions": {}}
    src, out = str(d / "small.json"), str(d / "small.cvf")
    write_json(src, trace)
    convert(src, out)
    return out


def _inputs(small_cvf):
    files = [small_cvf]
    for name in ("fib", "vdb_basic"):
        p = os.path.join(CORPUS, name + ".cvf")
        if os.path.exists(p):
            files.append(p)
    return files


@pytest.mark.parametrize("driver", [DRIVER, ASAN_DRIVER], ids=["normal", "asan"])
def test_every_truncation_and_flips_in_process(driver, small_cvf):
    for path in _inputs(small_cvf):
        r = subprocess.run([driver, "cvf", path, "300", "7"], capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, "%s on %s:\n%s%s" % (driver, path, r.stdout, r.stderr)
        assert " 0 problems" in r.stdout


def test_json_truncations_and_flips_under_asan(tmp_path):
    trace, _, _ = generate(12, n_x=40)
    src = str(tmp_path / "t.json")
    write_json(src, trace)
    r = subprocess.run([ASAN_DRIVER, "json", src, "300", "3"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 problems" in r.stdout


def _cli_rejects(exe, data, tmp_path, want=None):
    src = str(tmp_path / "in.cvf")
    with open(src, "wb") as f:
        f.write(data)
    out = str(tmp_path / "out.json")
    r = subprocess.run([exe, "convert", src, "-o", out], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, (len(data), r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("vcattach convert: "), r.stderr
    assert "offset " in r.stderr or "neither a .cvf" in r.stderr, r.stderr
    if want:
        assert want in r.stderr, r.stderr
    assert sorted(os.listdir(str(tmp_path))) == ["in.cvf"], "output left behind"
    os.unlink(src)


@pytest.mark.parametrize("exe", [VCATTACH, ASAN_VCATTACH], ids=["normal", "asan"])
def test_cli_truncations_and_crafted_files(exe, small_cvf, tmp_path):
    data = open(small_cvf, "rb").read()
    rnd = random.Random(5)
    cuts = sorted(set([0, 7, 8, 9, 20, len(data) - 1] +
                      [rnd.randrange(len(data)) for _ in range(25)]))
    # the one cut that is a valid file: right before the optional file_info record
    info_at = len(data) - 1
    while data[info_at] != 0x11 or info_at + 17 > len(data):
        info_at -= 1
    for n in cuts:
        if n != info_at:
            _cli_rejects(exe, data[:n], tmp_path)
    _cli_rejects(exe, b"\x02" + data[1:], tmp_path, "unsupported .cvf version")
    _cli_rejects(exe, data + b"\x00", tmp_path, "unknown record header byte 0x00")
    _cli_rejects(exe, data[:8] + b"\x07" + data[8:], tmp_path, "offset 8: unknown record")
    # huge FEE count in the first FEE record, huge zblob lengths in the other-events record
    fee = data.index(b"\x01", 8)
    while True:  # skip name records to the FEE header
        if data[fee] == 0x01:
            break
        fee = data.index(b"\x00", fee + 17) + 1
    name_end = data.index(b"\x00", fee + 17)
    huge = data[:name_end + 1] + struct.pack("<Q", 1 << 60) + data[name_end + 9:]
    _cli_rejects(exe, huge, tmp_path, "FEE count 1152921504606846976 exceeds")
    empty = bytes.fromhex("0100000000000000" "05" "0200000000000000" "0a00000000000000"
                          "789c8b8e0500011500b9")
    _cli_rejects(exe, empty[:9] + struct.pack("<Q", 1 << 62) + empty[17:], tmp_path,
                 "is impossible")
    _cli_rejects(exe, empty[:17] + struct.pack("<Q", 1 << 62) + empty[25:], tmp_path,
                 "exceeds the 10 bytes left")


def test_python_reader_truncations(small_cvf):
    for path in _inputs(small_cvf):
        data = open(path, "rb").read()
        cvf.loads(data)
        accepted = 0
        for n in range(len(data)):
            try:
                cvf.loads(data[:n])
                accepted += 1  # only the cut right before an optional file_info record
            except ValueError as e:
                assert str(e).startswith("offset "), str(e)
        assert accepted <= 1, path


def _nan_to_none(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    return x


def test_flips_c_and_python_agree(small_cvf, tmp_path):
    data = open(small_cvf, "rb").read()
    rnd = random.Random(99)
    src = str(tmp_path / "f.cvf")
    agree_ok = agree_err = 0
    for i in range(200):
        b = bytearray(data)
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] ^= rnd.randint(1, 255)
        with open(src, "wb") as f:
            f.write(b)
        r = subprocess.run([VCATTACH, "convert", src, "-o", "-"], capture_output=True,
                           timeout=60)
        try:
            py = cvf.loads(bytes(b))
        except ValueError as e:
            py = e
        if isinstance(py, ValueError):
            assert r.returncode != 0, "flip %d: Python rejects (%s), C accepts" % (i, py)
            agree_err += 1
        else:
            assert r.returncode == 0, "flip %d: C rejects (%s), Python accepts" % (i, r.stderr)
            assert json.loads(r.stdout) == _nan_to_none(py), "flip %d: different events" % i
            agree_ok += 1
    assert agree_ok + agree_err == 200
