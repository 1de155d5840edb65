"""Writing .cvf files by hand, straight from the format's description (version, thread names,
FEE groups, the other-events zblob): an implementation independent of the C writer, so traces
with numbers known in advance can be made.  Also the known trace of the summary tests,
seeded random recursive traces, and an independent computation of the summary's definitions
(self, total, calls, max and every duration (durs) per function and thread, and with waiting
kept apart: oracle_split; nearest_rank() for the percentiles)
to check `vcattach summary` and the exports against.
  known trace  MainThread: A(0..100 ms) contains B(10..40) contains A(15..20)
               worker:     C(0..50) contains D(10..20) and D(30..35)
               plus the agent's drop report, an instant event with args.dropped = 7."""
import json
import math
import os
import random
import re
import struct
import zlib

MS = 100_000  # ticks (10 ns) per millisecond


# ---- writing .cvf files (the format, straight from cvf-format.md) -------------------------

def _varint(v):
    if v <= 0x3F:
        return struct.pack("<B", v << 2)
    if v <= 0x3FFF:
        return struct.pack("<H", (v << 2) | 1)
    if v <= 0x3FFFFFFF:
        return struct.pack("<I", (v << 2) | 2)
    return struct.pack("<Q", (v << 2) | 3)


def _zblob(obj):
    raw = json.dumps(obj).encode()
    packed = zlib.compress(raw)
    return struct.pack("<QQ", len(raw), len(packed)) + packed


def write_cvf(path, events, thread_names=None, other_events=()):
    """events: (pid, tid, name, ts_ticks, dur_ticks[, mark]); mark ("resume", "at_attach" or
    None) goes into the event's args as {"vcattach": mark}, the agent's way of flagging it;
    thread_names: {(pid, tid): name}."""
    groups = {}
    for ev in events:
        pid, tid, name, ts, dur = ev[:5]
        mark = ev[5] if len(ev) > 5 else None
        groups.setdefault((pid, tid, name, mark is not None), []).append((ts, dur, mark))
    out = [struct.pack("<Q", 1)]
    size = 8
    for (pid, tid), name in (thread_names or {}).items():
        out.append(b"\x03" + struct.pack("<QQ", pid, tid) + name.encode() + b"\0")
        size += len(out[-1])
    for (pid, tid, name, has_args), evs in groups.items():
        evs.sort(key=lambda e: (e[0], e[1]))
        stream = [_varint(evs[0][1])]
        for (prev_ts, _, _), (ts, dur, _) in zip(evs, evs[1:]):
            stream += [_varint(ts - prev_ts), _varint(dur)]
        head = b"".join([b"\x01", struct.pack("<QQ", pid, tid), name.encode(), b"\0"])
        stream = b"".join(stream)
        args_off = size + len(head) + 24 + len(stream) if has_args else 0
        record = head + struct.pack("<QQq", len(evs), args_off, evs[0][0]) + stream
        if has_args:
            record += _zblob([{"vcattach": m} if m else {} for _, _, m in evs])
        out.append(record)
        size += len(record)
    out.append(b"\x05" + _zblob(list(other_events)))
    with open(path, "wb") as f:
        f.write(b"".join(out))
    return path


DROPS = {"ph": "i", "name": "vcattach.dropped", "cat": "INSTANT", "s": "g", "pid": 1, "tid": 1,
         "ts": 0.0, "args": {"dropped": 7}}

KNOWN_EVENTS = [
    (1, 1, "A", 0, 100 * MS), (1, 1, "B", 10 * MS, 30 * MS), (1, 1, "A", 15 * MS, 5 * MS),
    (1, 2, "C", 0, 50 * MS), (1, 2, "D", 10 * MS, 10 * MS), (1, 2, "D", 30 * MS, 5 * MS),
]
KNOWN_NAMES = {(1, 1): "MainThread", (1, 2): "worker"}


def known_trace(tmp_path):
    return write_cvf(str(tmp_path / "known.cvf"), KNOWN_EVENTS, KNOWN_NAMES, [DROPS])


WAIT_NAMES = ["_thread.lock.acquire", "wait (/usr/lib/python3.8/threading.py:270)", "select.epoll.poll", "_socket.socket.recv_into",
              "Condition.wait (/usr/lib/python3.11/threading.py:288)",
              "_PollLikeSelector.select (/usr/lib/python3.12/selectors.py:402)",
              "Condition.wait (/srv/mylib/locks.py:3)", "lock.acquire_later"]


def random_events(n, nthreads=3, nfuncs=6, seed=7, waits=False):
    """Nested calls with few names, so recursion (direct and through others) is common.
    waits: some calls are blocking ones (and some near-misses that are not), some are marked
    resume slices, and each thread's first calls are marked in progress at attach."""
    rnd = random.Random(seed)
    events = []
    for t in range(nthreads):
        tid, now, count = 100 + t, rnd.randrange(1000), 0

        def call(depth, start):
            nonlocal count
            count += 1
            name = "f%d (/srv/app.py:%d)" % (rnd.randrange(nfuncs), 10)
            if waits and rnd.random() < 0.2:
                name = rnd.choice(WAIT_NAMES)
            cur = start + rnd.randrange(0, 40)
            slot = len(events)
            events.append(None)
            if depth < 9:
                for _ in range(rnd.randrange(0, 4)):
                    if count >= n // nthreads:
                        break
                    cur = call(depth + 1, cur) + rnd.randrange(0, 15)
            end = cur + rnd.randrange(0, 40)
            mark = None
            if waits:
                mark = "at_attach" if count <= 4 else "resume" if rnd.random() < 0.1 else None
            events[slot] = (1, tid, name, start, end - start, mark)
            return end

        while count < n // nthreads:
            now = call(0, now) + rnd.randrange(1, 100)
    return events


# ---- an independent computation of the summary's definitions ------------------------------

def oracle(events):
    """{(pid, tid): {name: dict(self, total, calls, max, sum)}} in ticks, {(pid, tid): busy}.
    Everything counted as work (`summary --all`); resume slices are not calls."""
    per_thread = {}
    for ev in events:
        pid, tid, name, ts, dur = ev[:5]
        mark = ev[5] if len(ev) > 5 else None
        per_thread.setdefault((pid, tid), []).append((ts, ts + dur, name, mark))
    result, busy = {}, {}
    for tid, evs in per_thread.items():
        evs.sort(key=lambda e: (e[0], -e[1]))
        stats, stack, busy[tid] = {}, [], 0  # stack: [start, end, name, child_ticks]

        def close():
            start, end, name, child = stack.pop()
            stats[name]["self"] += (end - start) - child
            if stack:
                stack[-1][3] += end - start

        for ts, end, name, mark in evs:
            while stack and stack[-1][1] <= ts:
                close()
            if stack:
                end = min(end, stack[-1][1])
            s = stats.setdefault(name, dict(self=0, total=0, calls=0, max=0, sum=0, durs=[]))
            s["calls"] += mark != "resume"
            s["sum"] += end - ts
            s["durs"].append(end - ts)
            s["max"] = max(s["max"], end - ts)
            if all(frame[2] != name for frame in stack):
                s["total"] += end - ts
            if not stack:
                busy[tid] += end - ts
            stack.append([ts, end, name, 0])
        while stack:
            close()
        result[tid] = stats
    return result, busy


def nearest_rank(durations, q):
    """The q-quantile by nearest rank: the ceil(q·n)-th smallest (what summary and requests
    print; summary's own may differ by its histogram's stated error, PERCENTILE_ERROR)."""
    ordered = sorted(durations)
    return ordered[max(1, min(len(ordered), math.ceil(q * len(ordered)))) - 1]


# the relative error `vcattach summary` states for its p50/p99 (trace/histogram.h)
PERCENTILE_ERROR = 0.0099


def _wait_table():
    """[(kind, name, file or None)] parsed from trace/waits.def, the one list of blocking
    calls, so this oracle classifies independently of the C matcher."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "trace",
                        "waits.def")
    table = []
    with open(path) as f:
        for line in f:
            m = re.match(r'^WAIT_C\((\w+), "([^"]+)"\)', line)
            if m:
                table.append((m.group(1).lower(), m.group(2), None))
            m = re.match(r'^WAIT_PY\((\w+), "([^"]+)", "([^"]+)"\)', line)
            if m:
                table.append((m.group(1).lower(), m.group(2), m.group(3)))
    return table


def wait_kind(name, table=None):
    for kind, wname, wfile in table or _wait_table():
        if wfile is None and " (" not in name:
            if name == wname or name.endswith("." + wname):
                return kind
        elif wfile is not None and " (" in name:
            qual, rest = name.split(" (", 1)
            path = rest.rsplit(":", 1)[0]
            if "." not in qual:  # before 3.11: no qualname, the last part matches
                wname = wname.rsplit(".", 1)[-1]
            if qual == wname and (path == wfile or path.endswith("/" + wfile)):
                return kind
    return None


def oracle_split(events):
    """The default summary: ({tid: {name: dict(self, total, calls, max, sum, wait,
    at_attach)}}, {tid: busy}, {tid: waiting}) in ticks.  A blocking call outside another one
    is waiting, with everything under it; a call in progress at attach waited until its first
    child (or its end); working totals leave waiting out."""
    table = _wait_table()
    per_thread = {}
    for ev in events:
        pid, tid, name, ts, dur = ev[:5]
        mark = ev[5] if len(ev) > 5 else None
        per_thread.setdefault((pid, tid), []).append((ts, ts + dur, name, mark))
    result, busy, waiting = {}, {}, {}
    for tid, evs in per_thread.items():
        evs.sort(key=lambda e: (e[0], -e[1]))
        stats, stack = {}, []
        busy[tid] = waiting[tid] = 0
        clock = [0]
        # frame: dict(start, end, name, mark, child, first, clock0, wait, inside)

        def close():
            f = stack.pop()
            dur = f["end"] - f["start"]
            if stack:
                stack[-1]["child"] += dur
            if f["inside"]:
                return
            s = stats[f["name"]]
            if f["wait"]:
                clock[0] += dur
                return
            self_t = dur - f["child"]
            if f["mark"] == "at_attach":
                gap = min((f["first"] if f["first"] is not None else f["end"]) - f["start"],
                          self_t)
                s["at_attach"] += gap
                self_t -= gap
                clock[0] += gap
                waiting[tid] += gap
            s["self"] += self_t
            if all(g["name"] != f["name"] or g["inside"] or g["wait"] for g in stack):
                s["total"] += dur - (clock[0] - f["clock0"])

        for ts, end, name, mark in evs:
            while stack and stack[-1]["end"] <= ts:
                close()
            if stack:
                end = min(end, stack[-1]["end"])
                if stack[-1]["first"] is None:
                    stack[-1]["first"] = ts
            inside = any(g["wait"] or g["inside"] for g in stack)
            is_wait = not inside and wait_kind(name, table) is not None
            if not stack:
                busy[tid] += end - ts
            stack.append(dict(start=ts, end=end, name=name, mark=mark, child=0, first=None,
                              clock0=clock[0], wait=is_wait, inside=inside))
            if inside:
                continue
            s = stats.setdefault(name, dict(self=0, total=0, calls=0, max=0, sum=0, wait=0,
                                            at_attach=0, durs=[]))
            s["calls"] += mark != "resume"
            s["sum"] += end - ts
            s["durs"].append(end - ts)
            s["max"] = max(s["max"], end - ts)
            if is_wait:
                s["wait"] += end - ts
                waiting[tid] += end - ts
        while stack:
            close()
        result[tid] = stats
    return result, busy, waiting
