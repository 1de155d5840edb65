"""The codec on traces the tests generate (no corpus needed, so a user's clone tests it too):
JSON -> .cvf -> JSON through `vcattach convert` gives the events VizTracer's decompressor would
(computed from the spec in support.codec_gen.generate), our C and Python readers agree
exactly, grouping details hold (stable ties, name truncation, pid -1), and the CLI behaves:
direction sniffing, bare lists, -o -, default names, --force, clean errors with no output
left behind."""
import json
import math
import os
import struct
import subprocess
import sys

import pytest

from support.codec_gen import generate, write_json
from support.paths import ASAN_VCATTACH, PYTHONS, ROOT, VCATTACH
from support.traces import convert, events_diff, load_json
from vcattach import cvf


@pytest.mark.parametrize("seed,bare", [(1, False), (2, False), (3, True)])
def test_generated_roundtrip(seed, bare, tmp_path):
    trace, expected, file_info = generate(seed, bare_list=bare)
    src, mid, out = (str(tmp_path / n) for n in ("in.json", "mid.cvf", "out.json"))
    write_json(src, trace)
    convert(src, mid)
    with open(mid, "rb") as f:
        assert f.read(8) == b"\x01" + b"\x00" * 7
    convert(mid, out)
    got = load_json(out)
    diff = events_diff(expected, got["traceEvents"], 1e-6)
    assert diff is None, diff
    assert got.get("file_info") == file_info
    assert ("file_info" in got) == (file_info is not None)
    py = cvf.load(mid)
    assert py == got, "C and Python decoders disagree"


def test_roundtrip_under_asan(tmp_path):
    trace, expected, _ = generate(4, n_x=500)
    src, mid, out = (str(tmp_path / n) for n in ("in.json", "mid.cvf", "out.json"))
    write_json(src, trace)
    convert(src, mid, exe=ASAN_VCATTACH)
    convert(mid, out, exe=ASAN_VCATTACH)
    assert events_diff(expected, load_json(out)["traceEvents"], 1e-6) is None


def test_ties_keep_input_order_and_group_layout(tmp_path):
    evs = [{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 5.0, "dur": 1.0,
            "args": {"i": i}} for i in range(50)]
    evs.insert(10, {"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 1.0, "dur": 9.0})
    evs.append({"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 4.0, "dur": 2.0,
                "args": {"i": -1}})
    src, mid = str(tmp_path / "t.json"), str(tmp_path / "t.cvf")
    write_json(src, {"traceEvents": evs})
    convert(src, mid)
    out = cvf.load(mid)["traceEvents"]
    # group with args first (first appearance), sorted by ts, ties in input order; then the
    # args-less group of the same name
    assert [e["args"]["i"] for e in out[:51]] == [-1] + list(range(50))
    assert "args" not in out[51] and out[51]["ts"] == 1.0 and len(out) == 52
    assert all(e["cat"] == "FEE" for e in out)


def test_long_names_cut_at_utf8_boundary_and_pid_minus_one(tmp_path):
    long_name = "\u00e9" * 400  # 800 bytes: cut to 510 (byte 511 would split a character)
    evs = [{"ph": "X", "name": long_name, "pid": -1, "tid": -2, "ts": 1.0, "dur": 2.0},
           {"ph": "M", "name": "thread_name", "pid": -1, "tid": -2,
            "args": {"name": "t" * 600}}]
    src, mid, out = (str(tmp_path / n) for n in ("l.json", "l.cvf", "l.json.out"))
    write_json(src, evs)
    convert(src, mid)
    convert(mid, out)
    got = load_json(out)["traceEvents"]
    assert got == cvf.load(mid)["traceEvents"]
    m, x = got
    assert m["args"]["name"] == "t" * 511
    assert x["name"] == "\u00e9" * 255
    assert x["pid"] == 18446744073709551615 and x["tid"] == 18446744073709551614


def test_empty_trace_is_the_reference_35_bytes(tmp_path):
    src, mid = str(tmp_path / "e.json"), str(tmp_path / "e.cvf")
    write_json(src, {"traceEvents": []})
    convert(src, mid)
    with open(mid, "rb") as f:
        assert f.read().hex() == ("0100000000000000" "05" "0200000000000000" "0a00000000000000"
                                  "789c8b8e0500011500b9")


def test_stdout_default_name_force_and_sniffing(tmp_path):
    trace, _, _ = generate(5, n_x=50)
    src = str(tmp_path / "trace.data")  # the direction comes from the contents
    write_json(src, trace)
    r = subprocess.run([VCATTACH, "convert", src], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    made = str(tmp_path / "trace.cvf")
    assert os.path.exists(made)
    # the default output exists now: refused without --force, nothing changed
    before = open(made, "rb").read()
    r = subprocess.run([VCATTACH, "convert", src], capture_output=True, text=True)
    assert r.returncode == 2 and "--force" in r.stderr and r.stderr.count("\n") == 1
    assert open(made, "rb").read() == before
    r = subprocess.run([VCATTACH, "convert", src, "--force"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # -o - : the JSON goes to stdout
    r = subprocess.run([VCATTACH, "convert", made, "-o", "-"], capture_output=True)
    assert r.returncode == 0
    assert json.loads(r.stdout) == cvf.load(made)
    assert sorted(os.listdir(str(tmp_path))) == ["trace.cvf", "trace.data"]


def test_help_and_usage_errors(tmp_path):
    r = subprocess.run([VCATTACH, "convert", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for word in ("--format", "--force", "chrome", "-o OUT", "OUT.tmp"):
        assert word in r.stdout
    for args, code in ((["convert"], 2), (["convert", "--bogus"], 2),
                       (["convert", "a", "b"], 2),
                       (["convert", os.path.join(ROOT, "Makefile"), "--format", "x"], 2)):
        r = subprocess.run([VCATTACH] + args, capture_output=True, text=True)
        assert r.returncode == code, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("vcattach convert: ")


BAD_JSON = [
    ("not json at all", "neither a .cvf"),
    ('{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}',
     'event #0: missing "name"'),
    ('[{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 1}]', 'event #0: missing "dur"'),
    ('[{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, 5]',
     "event #1: not a JSON object"),
    ('[{"name": "f"}]', 'event #0: missing "ph"'),
    ('[{"ph": "X", "name": "f", "pid": "main", "tid": 1, "ts": 1, "dur": 1}]',
     '"pid" must be an integer'),
    ('[{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": "1", "dur": 1}]',
     '"ts" must be a number'),
    ('[{"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 1}]', 'needs an "args" object'),
    ('[{"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 1, "args": {"v": true}}]',
     "is not a number"),
    ('[{"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 1, "args": {"v": 1}},'
     ' {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 1, "args": {"v": 2}}]',
     "event #1: counter"),
    ('[{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1}]', "args.name"),
    ('{"traceEvents": [{"ph": "i"', "invalid JSON"),
    ('{"traceEvents": []} trailing', "trailing data"),
    ('{"other": 1}', 'no "traceEvents"'),
    ('[{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 1e999, "dur": 1}]',
     "invalid JSON"),
    ('[{"ph": "X", "name": "f\\n", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "a": "\\x"}]',
     "invalid JSON"),
    # beyond int64: only a counter value can carry it (as LONG_STRING); a pid cannot
    ('[{"ph": "X", "name": "f", "pid": 18446744073709551615, "tid": 1, "ts": 1, "dur": 1}]',
     "beyond 64 bits"),
]


@pytest.mark.parametrize("exe", [VCATTACH, ASAN_VCATTACH], ids=["normal", "asan"])
@pytest.mark.parametrize("text,message", BAD_JSON, ids=[str(i) for i in range(len(BAD_JSON))])
def test_bad_json_input_is_a_clean_error(text, message, exe, tmp_path):
    src = str(tmp_path / "bad.json")
    with open(src, "w") as f:
        f.write(text)
    out = str(tmp_path / "out.cvf")
    r = convert(src, out, exe=exe, check=False)
    assert r.returncode == 1, r.stderr
    assert message in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert sorted(os.listdir(str(tmp_path))) == ["bad.json"], "output left behind"


def test_python_reader_on_every_interpreter(tmp_path):
    """cvf.py runs on 3.8-3.13: standalone and as vcattach.cvf."""
    trace, _, _ = generate(6, n_x=200)
    src, mid = str(tmp_path / "g.json"), str(tmp_path / "g.cvf")
    write_json(src, trace)
    convert(src, mid)
    want = json.dumps(cvf.load(mid), sort_keys=True)
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); import cvf; "
            "print(json.dumps(cvf.load(sys.argv[2]), sort_keys=True)); "
            "sys.stdout.flush()\n"
            "try:\n cvf.loads(b'\\x02' + bytes(7))\nexcept ValueError as e:\n"
            " print('ERR', e)\n")
    if not PYTHONS:
        pytest.skip("no interpreter of the matrix found")
    for p in PYTHONS:
        r = subprocess.run([p["path"], "-c", code, os.path.join(ROOT, "python", "vcattach"),
                            mid], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (p["id"], r.stderr)
        lines = r.stdout.splitlines()
        assert lines[0] == want, p["id"]
        assert lines[1].startswith("ERR offset 0: unsupported .cvf version 2"), p["id"]
    # as part of the package (the package's __init__ belongs to the agent side)
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "import vcattach.cvf as c; print(len(c.load(sys.argv[2])['traceEvents']))",
                        os.path.join(ROOT, "python"), mid], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == len(cvf.load(mid)["traceEvents"])


def test_fast_and_jansson_paths_give_identical_bytes(tmp_path):
    """Plain X events are read by json_cvf.c's fast path; an escaped "ph" ("\\u0058") sends
    every event through jansson instead.  Both must produce the same .cvf, byte for byte."""
    trace, _, _ = generate(21, n_x=1500)
    plain = json.dumps(trace, ensure_ascii=False, indent=1)  # whitespace everywhere, too
    slow = plain.replace('"ph": "X"', '"ph": "\\u0058"')
    assert slow != plain
    outs = []
    for label, text in (("fast", plain), ("slow", slow)):
        src, dst = str(tmp_path / (label + ".json")), str(tmp_path / (label + ".cvf"))
        with open(src, "w") as f:
            f.write(text)
        convert(src, dst)
        outs.append(open(dst, "rb").read())
    assert outs[0] == outs[1]


def _zblob(obj):
    import zlib
    raw = json.dumps(obj).encode()
    comp = zlib.compress(raw)
    return struct.pack("<QQ", len(raw), len(comp)) + comp


def test_huge_names_and_args_written_by_another_writer(tmp_path):
    """Our writer cuts names at 511 bytes, but other writers need not: a hand-built file with
    a 300 kB FEE name, 200 kB args and a 200 kB thread name must decode (the converter's
    out-of-line paths) the same in C and Python."""
    name = ("n\"\\\n" * 75000).encode()
    args = [{"big": "x" * 200000}, {"small": 1}]
    body = bytearray(struct.pack("<Q", 1))
    body += b"\x03" + struct.pack("<QQ", 1, 2) + b"t" * 200000 + b"\0"
    fee = b"\x01" + struct.pack("<QQ", 1, 2) + name + b"\0" + struct.pack("<Q", 2)
    stream = struct.pack("<q", 100) + bytes([5 << 2]) + bytes([7 << 2]) + bytes([9 << 2])
    args_offset = len(body) + len(fee) + 8 + len(stream)
    body += fee + struct.pack("<Q", args_offset) + stream + _zblob(args)
    body += b"\x05" + _zblob([])
    src, out = str(tmp_path / "h.cvf"), str(tmp_path / "h.json")
    with open(src, "wb") as f:
        f.write(bytes(body))
    convert(src, out)
    got = load_json(out)
    assert got == cvf.load(src)
    ev = got["traceEvents"]
    assert ev[0]["args"]["name"] == "t" * 200000
    assert ev[1]["name"] == name.decode() and ev[1]["args"] == args[0]
    assert ev[2]["ts"] == 1.07 and ev[2]["dur"] == 0.09 and ev[2]["args"] == args[1]


def _strict_loads(text):
    def bad(token):
        raise AssertionError("non-strict JSON token %s in the output" % token)
    return json.loads(text, parse_constant=bad)


def test_output_is_strict_json_even_with_python_nan(tmp_path):
    """Python's json (hence VizTracer) writes NaN/Infinity; Perfetto and JSON.parse reject
    them.  Our Chrome output turns them (and non-finite counter values) into null."""
    nan, inf = float("nan"), float("inf")
    body = bytearray(struct.pack("<Q", 1))
    fee = b"\x01" + struct.pack("<QQ", 1, 2) + b"f\0" + struct.pack("<Q", 2)
    stream = struct.pack("<q", 100) + bytes([1 << 2, 2 << 2, 3 << 2])
    args = [{"v": nan, "s": "NaN Infinity -Infinity"}, {"w": [-inf, inf, 1.5]}]
    body += fee + struct.pack("<Q", len(body) + len(fee) + 8 + len(stream)) + stream
    body += _zblob(args)
    body += (b"\x04" + struct.pack("<QQ", 1, 1) + b"c\0" + struct.pack("<Q", 1) + b"k\0" +
             struct.pack("<Q", 2) + struct.pack("<q", 1000) + b"\x24" + struct.pack("<d", nan) +
             struct.pack("<q", 2000) + b"\x24" + struct.pack("<d", 2.5))
    body += b"\x05" + _zblob([{"ph": "i", "name": "x", "args": {"n": nan}}])
    body += b"\x11" + _zblob({"files": {}, "x": -inf})
    src, out = str(tmp_path / "n.cvf"), str(tmp_path / "n.json")
    with open(src, "wb") as f:
        f.write(bytes(body))
    convert(src, out)
    with open(out) as f:
        got = _strict_loads(f.read())
    ev = got["traceEvents"]
    assert ev[0]["args"] == {"v": None, "s": "NaN Infinity -Infinity"}
    assert ev[1]["args"] == {"w": [None, None, 1.5]}
    assert ev[2]["args"] == {"k": None} and ev[3]["args"] == {"k": 2.5}
    assert ev[4]["args"] == {"n": None} and got["file_info"] == {"files": {}, "x": None}
    py = cvf.load(src)
    assert math.isnan(py["traceEvents"][0]["args"]["v"])
