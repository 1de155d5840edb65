"""Writes a synthetic VizTracer-like Chrome trace of N complete events (default 1,000,000):
4 threads each running a random call tree over ~300 functions (Python and C names like
VizTracer's), ~3% of events with args, 4 counter events per 1000, a few instant events,
and a file_info block.  Deterministic (seeded).  Usage: gen_trace.py [N] OUT.json"""
import json
import random
import sys


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 2 else 1000000
    out = sys.argv[-1]
    rnd = random.Random(2026)
    funcs = ["%s (/srv/app/pkg/mod%d.py:%d)" % (w, i % 40, 10 + i)
             for i, w in enumerate(["handler", "parse", "render", "query", "fetch", "compute",
                                    "validate", "serialize", "<listcomp>", "__init__"] * 30)]
    funcs += ["builtins.len", "builtins.isinstance", "str.join", "dict.get", "list.append"]
    pid = 4242
    tids = [4242, 4250, 4251, 4252]
    parts = []
    w = parts.append
    w('{"traceEvents":[')
    first = True
    clock = {t: 1.5e10 for t in tids}
    made = 0
    while made < n:
        tid = rnd.choice(tids)
        # one call tree: a parent and up to 30 children, events emitted at return
        ts0 = clock[tid]
        t = ts0 + rnd.random() * 2
        children = rnd.randint(0, 30)
        for _ in range(children):
            if made >= n - 1:
                break
            d = round(rnd.random() * 20 + 0.1, 3)
            ev = '{"pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f,"name":%s,"ph":"X","cat":"FEE"' % (
                pid, tid, t, d, json.dumps(rnd.choice(funcs)))
            if rnd.random() < 0.03:
                ev += ',"args":{"return_value":%s}' % json.dumps(repr(rnd.random()))
            w(("" if first else ",") + ev + "}")
            first = False
            made += 1
            t += d + rnd.random() * 3
            if made % 250 == 0:
                w(',{"pid":%d,"tid":%d,"ts":%.3f,"ph":"C","name":"memory","args":'
                  '{"rss":%d,"heap":%.1f}}' % (pid, tid, t, rnd.randint(1, 9) * 1000000,
                                               rnd.random() * 100))
        w(',{"pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f,"name":%s,"ph":"X","cat":"FEE"}' % (
            pid, tid, ts0, t - ts0 + 0.5, json.dumps(rnd.choice(funcs))))
        made += 1
        clock[tid] = t + 1
    for tid in tids:
        w(',{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"Thread-%d"}}'
          % (pid, tid, tid))
        w(',{"ph":"i","name":"checkpoint","pid":%d,"tid":%d,"ts":%.3f,"s":"t"}'
          % (pid, tid, clock[tid]))
    w('],"file_info":{"files":{"/srv/app/pkg/mod0.py":["def handler():\\n    pass\\n",2]},'
      '"functions":{}},"viztracer_metadata":{"version":"1.1.1"}}')
    with open(out, "w") as f:
        f.write("".join(parts))


if __name__ == "__main__":
    main()
