"""Reading traces in tests: `vcattach convert` (the C decoder), both decoders at once (which
must agree), comparing event lists the way the format allows, and selecting and checking the
Chrome-trace events an agent recorded."""
import collections
import json
import subprocess

from .paths import VCATTACH


def convert(src, dst, *extra, exe=VCATTACH, check=True, timeout=120):
    """`vcattach convert SRC -o DST EXTRA…` (either direction)."""
    r = subprocess.run([exe, "convert", src, "-o", dst] + list(extra), capture_output=True,
                       text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, "convert %s -> %s failed (%d): %s" % (src, dst, r.returncode,
                                                                       r.stderr)
    return r


def load_json(path):
    with open(path) as f:
        return json.load(f)


def decode(path):
    """Decodes a .cvf with the C decoder and the Python reader; asserts they agree; returns
    the events."""
    from vcattach import cvf
    out = path + ".json"
    r = subprocess.run([VCATTACH, "convert", path, "-o", out], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        c_events = json.load(f)["traceEvents"]
    py_events = cvf.load(path)["traceEvents"]

    def canon(evs):
        return sorted(json.dumps(e, sort_keys=True) for e in evs)
    assert len(c_events) == len(py_events)
    assert canon(c_events) == canon(py_events), "C decoder and Python reader disagree"
    return py_events


def _key(ev):
    e = {k: v for k, v in ev.items() if k not in ("ts", "dur")}
    return json.dumps(e, sort_keys=True)


def events_diff(expected, got, tol):
    """None if the two event lists are equal as multisets with ts/dur within tol, else a
    description of the first differences."""
    a = collections.defaultdict(list)
    b = collections.defaultdict(list)
    for e in expected:
        a[_key(e)].append((e.get("ts"), e.get("dur")))
    for e in got:
        b[_key(e)].append((e.get("ts"), e.get("dur")))
    problems = []
    for k in set(a) | set(b):
        x = sorted(a.get(k, []), key=lambda t: (t[0] or 0, t[1] or 0))
        y = sorted(b.get(k, []), key=lambda t: (t[0] or 0, t[1] or 0))
        if len(x) != len(y):
            problems.append("%d expected vs %d got: %s" % (len(x), len(y), k[:200]))
            continue
        for (t1, d1), (t2, d2) in zip(x, y):
            for u, v in ((t1, t2), (d1, d2)):
                if (u is None) != (v is None) or (u is not None and abs(u - v) > tol):
                    problems.append("ts/dur %r vs %r: %s" % ((t1, d1), (t2, d2), k[:200]))
                    break
            if len(problems) > 5:
                break
        if len(problems) > 5:
            break
    return "\n".join(problems) if problems else None


def x_events(events):
    """The complete ("X") events of an event list."""
    return [e for e in events if e["ph"] == "X"]


def count(events, name):
    return sum(1 for e in x_events(events) if e["name"] == name)


def named(events, prefix):
    """X events of the Python function `prefix` (named "prefix (file:line)")."""
    return [e for e in x_events(events) if e["name"].startswith(prefix + " (")]


def check_nesting(events):
    """Per thread: any two X events are disjoint or one contains the other.  Returns
    {tid: [(ts, dur, name) in 10 ns units]}."""
    by_tid = {}
    for e in x_events(events):
        by_tid.setdefault(e["tid"], []).append((round(e["ts"] * 100), round(e["dur"] * 100),
                                                e["name"]))
    for tid, evs in by_tid.items():
        evs.sort(key=lambda v: (v[0], -v[1]))
        stack = []
        for ts, dur, name in evs:
            assert dur >= 0
            while stack and stack[-1][0] + stack[-1][1] <= ts:
                stack.pop()
            if stack:
                pts, pdur, pname = stack[-1]
                assert ts + dur <= pts + pdur, "%s overlaps its parent %s on tid %s" % (
                    name, pname, tid)
            stack.append((ts, dur, name))
    return by_tid
