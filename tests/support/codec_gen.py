"""Seeded Chrome traces for the codec tests, together with what VizTracer's decompressor
returns for them (computed from the spec's rules, not from our C code)."""
import json
import math
import random

U64 = (1 << 64) - 1

NAMES = ["main (/srv/app/main.py:1)", "fib (/srv/app/fib.py:3)", "builtins.len",
         "\u51fd\u6570 (/srv/\u00e9t\u00e9/x.py:9)", "quote\"back\\slash\ttab (/a.py:2)",
         "emoji \U0001F600 (/e.py:1)"]


def _ticks(us, scale):
    return math.floor(us * scale + 0.5) if us >= 0 else -math.floor(-us * scale + 0.5)


def _counter_expected(name, pid, tid, rows):
    """What the reference's counter writer + reader give for one group (spec §5.3):
    rows = [(ts, args)] in input order; returns decoded events."""
    rows = sorted(rows, key=lambda r: r[0])
    keys = []
    for _, args in rows:
        for k in args:
            if k not in keys:
                keys.append(k)
    wcache = {}
    tagged = []
    for ts, args in rows:
        diff = {}
        for k, v in args.items():
            if k not in wcache or not (wcache[k] == v):
                wcache[k] = v
                diff[k] = v
        for k in list(wcache):
            if k not in args and wcache[k] is not None:
                wcache[k] = None
                diff[k] = None
        tagged.append((ts, diff))
    rcache = {}
    out = []
    for ts, diff in tagged:
        args = {}
        for k in keys:
            if k not in diff:                      # SAME
                v = rcache.get(k)
                if v is not None:
                    args[k] = v
            elif diff[k] is None:                   # UNKNOWN
                rcache[k] = None
            else:
                args[k] = rcache[k] = diff[k]
        out.append({"name": name, "pid": pid & U64, "tid": tid & U64, "ph": "C", "args": args,
                    "ts": _ticks(ts, 1000) / 1000.0})
    return out


def generate(seed, n_x=3000, with_file_info=True, bare_list=False):
    """A Chrome trace exercising every record type, and the events the format gives back.
    Returns (trace, expected_events, expected_file_info)."""
    rnd = random.Random(seed)
    events = []
    expected = []
    pids = [4321, -1]
    tids = {4321: [4321, 4400, 4401], -1: [7, -5]}
    # names: repeated (last wins), plus an M event of another kind (kept verbatim)
    for pid in pids:
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                       "args": {"name": "old name"}})
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                       "args": {"name": "proc %d \u00e9" % pid}})
        for tid in tids[pid]:
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": "Thread-%d" % tid}})
    sort_ev = {"ph": "M", "name": "thread_sort_index", "pid": 4321, "tid": 4400,
               "args": {"sort_index": 2}}
    events.append(sort_ev)
    expected.append(sort_ev)
    # complete events: random order, ties, with and without args, negative ts, big deltas
    base = [0.0, 1.5e8, 4.2e10, 1.7e15][seed % 4]  # 1.7e15: epoch-based µs, ticks > 2^53
    for i in range(n_x):
        pid = rnd.choice(pids)
        tid = rnd.choice(tids[pid])
        name = rnd.choice(NAMES)
        ts = round(base + rnd.random() * 1e6, rnd.choice([0, 2, 3]))
        if i % 97 == 0:
            ts = -round(rnd.random() * 100, 2)
        if i % 501 == 0:
            ts = base + 5e9  # a delta that needs the 8-byte varint
        dur = rnd.choice([0, 0.01, 0.28, 1.25, 11.12, round(rnd.random() * 5000, 3), 1e5])
        ev = {"pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name, "ph": "X",
              "cat": "FEE", "id": i}
        if i % 3 == 0:
            ev["args"] = rnd.choice([{"n": i}, {"s": "x\n\"y\u00e9", "l": [1, 2.5, None]},
                                     {}, {"f": 0.1, "t": True}])
        if i % 7 == 0 and events and events[-1].get("ph") == "X":
            prev = events[-1]
            ev.update(pid=prev["pid"], tid=prev["tid"], ts=prev["ts"], dur=prev["dur"],
                      name=prev["name"])
            if "args" in prev:
                ev["args"] = {"tie": i}
            else:
                ev.pop("args", None)
        events.append(ev)
        x = {"ph": "X", "name": ev["name"], "cat": "FEE", "pid": ev["pid"] & U64,
             "tid": ev["tid"] & U64, "ts": _ticks(ev["ts"], 100) / 100.0,
             "dur": _ticks(max(ev["dur"], 0), 100) / 100.0}
        if "args" in ev:
            x["args"] = ev["args"]
        expected.append(x)
    # counters: ints, floats, None, keys appearing and vanishing, 1 -> 1.0 counted as same
    rows = {}
    seq = [({"a": 1, "b": 2.5}, 1.0001), ({"a": 1}, 2.0), ({"a": 1.0, "b": None}, 3.0),
           ({"a": 7, "c": -3}, 4.5), ({"b": 0.1}, 5.25), ({}, 6.0), ({"a": 2 ** 62}, 7.0)]
    for pid in pids:
        for args, ts in seq:
            ev = {"ph": "C", "name": "memory", "pid": pid, "tid": pid, "ts": ts + pid % 7,
                  "args": dict(args), "cat": "dropped"}
            events.append(ev)
            rows.setdefault(("memory", pid, pid), []).append((ev["ts"], ev["args"]))
    for (nm, pid, tid), rs in rows.items():
        expected.extend(_counter_expected(nm, pid, tid, rs))
    # other events, verbatim
    for i in range(20):
        ev = rnd.choice([
            {"ph": "i", "name": "log %d" % i, "pid": 4321, "tid": 4321, "ts": 10.5 + i,
             "s": "t", "cat": "INSTANT", "args": {"msg": "\u00fcber \"quoted\""}},
            {"ph": "B", "name": "open", "pid": -1, "tid": 7, "ts": 99.0 + i},
            {"ph": "N", "id": "0x1", "name": "obj", "pid": 4321, "tid": 4321, "ts": 3.0},
            {"ph": "s", "id": i, "name": "flow", "cat": "f", "pid": 4321, "tid": 4321,
             "ts": 1.0, "bind_id": 5},
        ])
        events.append(dict(ev))
        expected.append(dict(ev))
    rnd.shuffle(events)
    names = {}  # the last name of each (pid, tid) wins, in the shuffled order
    for ev in events:
        if ev["ph"] == "M" and ev["name"] in ("process_name", "thread_name"):
            names[(ev["name"], ev["pid"], ev["tid"])] = ev["args"]["name"]
    for (kind, pid, tid), nm in names.items():
        expected.append({"ph": "M", "name": kind, "pid": pid & U64, "tid": tid & U64,
                         "args": {"name": nm}})
    file_info = None
    if bare_list:
        trace = events
    else:
        trace = {"traceEvents": events, "viztracer_metadata": {"version": "1.1.1"},
                 "displayTimeUnit": "ns"}
        if with_file_info:
            file_info = {"files": {"/srv/app/main.py": ["print('hi')\n" * 50, 50]},
                         "functions": {"main": ["/srv/app/main.py", 1]}}
            trace["file_info"] = file_info
    return trace, expected, file_info


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
