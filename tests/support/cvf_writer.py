"""Writing .cvf files by hand, straight from the format's description (version, thread names,
FEE groups, the other-events zblob): an implementation independent of the C writer, so traces
with numbers known in advance can be made.  Also the known trace of the summary tests,
seeded random recursive traces, and an independent computation of the summary's definitions
(self, total, calls, max per function and thread) to check `vcattach summary` and the
exports against.
  known trace  MainThread: A(0..100 ms) contains B(10..40) contains A(15..20)
               worker:     C(0..50) contains D(10..20) and D(30..35)
               plus the agent's drop report, an instant event with args.dropped = 7."""
import json
import random
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
    """events: (pid, tid, name, ts_ticks, dur_ticks); thread_names: {(pid, tid): name}."""
    groups = {}
    for pid, tid, name, ts, dur in events:
        groups.setdefault((pid, tid, name), []).append((ts, dur))
    out = [struct.pack("<Q", 1)]
    for (pid, tid), name in (thread_names or {}).items():
        out.append(b"\x03" + struct.pack("<QQ", pid, tid) + name.encode() + b"\0")
    for (pid, tid, name), evs in groups.items():
        evs.sort()
        body = [b"\x01", struct.pack("<QQ", pid, tid), name.encode(), b"\0",
                struct.pack("<QQq", len(evs), 0, evs[0][0]), _varint(evs[0][1])]
        for (prev_ts, _), (ts, dur) in zip(evs, evs[1:]):
            body += [_varint(ts - prev_ts), _varint(dur)]
        out.append(b"".join(body))
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


def random_events(n, nthreads=3, nfuncs=6, seed=7):
    """Nested calls with few names, so recursion (direct and through others) is common."""
    rnd = random.Random(seed)
    events = []
    for t in range(nthreads):
        tid, now, count = 100 + t, rnd.randrange(1000), 0

        def call(depth, start):
            nonlocal count
            count += 1
            name = "f%d (/srv/app.py:%d)" % (rnd.randrange(nfuncs), 10)
            cur = start + rnd.randrange(0, 40)
            slot = len(events)
            events.append(None)
            if depth < 9:
                for _ in range(rnd.randrange(0, 4)):
                    if count >= n // nthreads:
                        break
                    cur = call(depth + 1, cur) + rnd.randrange(0, 15)
            end = cur + rnd.randrange(0, 40)
            events[slot] = (1, tid, name, start, end - start)
            return end

        while count < n // nthreads:
            now = call(0, now) + rnd.randrange(1, 100)
    return events


# ---- an independent computation of the summary's definitions ------------------------------

def oracle(events):
    """{(pid, tid): {name: dict(self, total, calls, max, sum)}} in ticks, {(pid, tid): busy}."""
    per_thread = {}
    for pid, tid, name, ts, dur in events:
        per_thread.setdefault((pid, tid), []).append((ts, ts + dur, name))
    result, busy = {}, {}
    for tid, evs in per_thread.items():
        evs.sort(key=lambda e: (e[0], -e[1]))
        stats, stack, busy[tid] = {}, [], 0  # stack: [start, end, name, child_ticks]

        def close():
            start, end, name, child = stack.pop()
            stats[name]["self"] += (end - start) - child
            if stack:
                stack[-1][3] += end - start

        for ts, end, name in evs:
            while stack and stack[-1][1] <= ts:
                close()
            if stack:
                end = min(end, stack[-1][1])
            s = stats.setdefault(name, dict(self=0, total=0, calls=0, max=0, sum=0))
            s["calls"] += 1
            s["sum"] += end - ts
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
