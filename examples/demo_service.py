#!/usr/bin/env python3
"""demo_service.py — a small, realistic multi-threaded Python service to attach vcattach to.

What runs (stdlib only, CPython 3.8 - 3.13):
  * thread "http-server": an http.server.ThreadingHTTPServer on 127.0.0.1 (port 0: the OS
    picks one), one thread per request, serving
        GET  /health             liveness
        GET  /search?q=...       parses the query, scans a catalogue with a regex
        POST /orders             parses a JSON order, validates it, prices it
        GET  /report?n=...       a deliberately slow path: an O(n^2) duplicate finder
  * thread "load-generator": a client that sends a mix of those requests in a bounded loop
    (--load-seconds), the way traffic would arrive;
  * thread "asyncio-loop": an asyncio event loop with a periodic task that aggregates the
    request latencies, the kind of background job a real service has.

The service prints "demo_service: serving on http://127.0.0.1:PORT (pid PID)" once it
answers, and with --port-file writes PORT to that file (atomically).  SIGTERM or SIGINT
stop it cleanly; --duration makes it exit by itself.  It can also be imported: DemoService
starts and stops everything in-process (tests trace it with `vcattach.trace`).
"""
import argparse
import asyncio
import hashlib
import json
import os
import random
import re
import signal
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CATALOGUE = [
    {"sku": "SKU-%05d" % i, "name": name, "price_cents": 199 + (i * 37) % 5000}
    for i, name in enumerate(
        ["red widget", "blue widget", "green gadget", "steel bolt", "brass hinge",
         "oak plank", "pine board", "copper wire", "glass panel", "rubber seal"] * 40)
]
SKU_RE = re.compile(r"^SKU-\d{5}$")
EMAIL_RE = re.compile(r"^[\w.+-]+@[\w-]+(\.[\w-]+)+$")


# ---- the request handlers' work: what a profile of this service should show --------------

def search_catalogue(query):
    """Case-insensitive word search over the catalogue."""
    pattern = re.compile(r"\b%s" % re.escape(query.lower()))
    return [item for item in CATALOGUE if pattern.search(item["name"])]


def parse_order(body):
    """Decodes and validates a JSON order; raises ValueError on a bad one."""
    order = json.loads(body.decode("utf-8"))
    if not EMAIL_RE.match(order.get("email", "")):
        raise ValueError("bad email")
    lines = order.get("lines")
    if not isinstance(lines, list) or not lines:
        raise ValueError("no order lines")
    for line in lines:
        if not SKU_RE.match(line.get("sku", "")) or int(line.get("qty", 0)) <= 0:
            raise ValueError("bad order line %r" % (line,))
    return order


def price_order(order):
    prices = {item["sku"]: item["price_cents"] for item in CATALOGUE}
    total = 0
    for line in order["lines"]:
        total += prices.get(line["sku"], 0) * int(line["qty"])
    return total


def find_duplicate_skus(skus):
    """The slow path, on purpose: compares every pair, O(n^2)."""
    duplicates = []
    for i in range(len(skus)):
        for j in range(i + 1, len(skus)):
            if skus[i] == skus[j] and skus[i] not in duplicates:
                duplicates.append(skus[i])
    return duplicates


def build_report(n):
    rnd = random.Random(n)
    skus = [rnd.choice(CATALOGUE)["sku"] for _ in range(n)]
    return {"n": n, "duplicates": len(find_duplicate_skus(skus))}


class DemoHandler(BaseHTTPRequestHandler):
    server_version = "vcattach-demo/1.0"
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):  # quiet: the demo's output is vcattach's
        pass

    def _reply(self, status, obj):
        payload = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        started = time.perf_counter()
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query)
        if url.path == "/health":
            self._reply(200, {"ok": True})
        elif url.path == "/search":
            hits = search_catalogue(params.get("q", [""])[0])
            self._reply(200, {"hits": len(hits), "first": hits[:3]})
        elif url.path == "/report":
            n = max(1, min(int(params.get("n", ["200"])[0]), 2000))
            self._reply(200, build_report(n))
        else:
            self._reply(404, {"error": "no such path"})
        self.server.stats.record(time.perf_counter() - started)

    def do_POST(self):
        started = time.perf_counter()
        if self.path != "/orders":
            self._reply(404, {"error": "no such path"})
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            order = parse_order(body)
        except (ValueError, KeyError, TypeError) as exc:
            self._reply(400, {"error": str(exc)})
        else:
            self._reply(200, {"total_cents": price_order(order)})
        self.server.stats.record(time.perf_counter() - started)


class LatencyStats:
    """Latencies recorded by the handlers, aggregated by the asyncio task."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending = []
        self.summaries = []
        self.requests = 0

    def record(self, seconds):
        with self._lock:
            self._pending.append(seconds)
            self.requests += 1

    def drain(self):
        with self._lock:
            pending, self._pending = self._pending, []
        return pending


# ---- the background threads ---------------------------------------------------------------

def generate_load(base_url, stop, seconds, interval=0.01, rnd=None):
    """Sends a mix of requests, one per `interval` seconds at most, until `stop` is set or
    `seconds` have passed."""
    rnd = rnd or random.Random(1)
    words = ["widget", "gadget", "bolt", "hinge", "plank", "wire", "seal", "panel"]
    deadline = time.monotonic() + seconds
    sent = 0
    while not stop.is_set() and time.monotonic() < deadline:
        kind = rnd.random()
        try:
            if kind < 0.45:
                fetch(base_url + "/search?" + urllib.parse.urlencode({"q": rnd.choice(words)}))
            elif kind < 0.85:
                order = {"email": "buyer%d@example.com" % rnd.randrange(100),
                         "lines": [{"sku": rnd.choice(CATALOGUE)["sku"], "qty": rnd.randrange(1, 5)}
                                   for _ in range(rnd.randrange(1, 6))]}
                fetch(base_url + "/orders", json.dumps(order).encode("utf-8"))
            else:
                fetch(base_url + "/report?n=%d" % rnd.choice([150, 300, 450]))
            sent += 1
        except OSError:
            if stop.is_set():
                break
        stop.wait(interval)
    return sent


def fetch(url, data=None):
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read().decode("utf-8"))


async def aggregate_latencies(stats, stop, period):
    """Every `period` seconds: summarise the latencies recorded since the last run."""
    while not stop.is_set():
        await asyncio.sleep(period)
        batch = stats.drain()
        if batch:
            digest = hashlib.sha256(repr(sorted(batch)).encode()).hexdigest()[:12]
            stats.summaries.append({"count": len(batch), "mean_ms": statistics.mean(batch) * 1e3,
                                    "p_max_ms": max(batch) * 1e3, "digest": digest})
            del stats.summaries[:-100]


def run_event_loop(stats, stop, period):
    asyncio.run(aggregate_latencies(stats, stop, period))


# ---- the service --------------------------------------------------------------------------

class DemoService:
    """Starts the server, the load generator and the asyncio loop; stop() joins them all."""

    def __init__(self, load_seconds=60.0, request_interval=0.01, aggregate_period=0.1):
        self.stop_event = threading.Event()
        self.stats = LatencyStats()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), DemoHandler)
        self.httpd.daemon_threads = True
        self.httpd.stats = self.stats
        self.port = self.httpd.server_address[1]
        self.base_url = "http://127.0.0.1:%d" % self.port
        self.threads = [
            threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                             name="http-server"),
            threading.Thread(target=generate_load,
                             args=(self.base_url, self.stop_event, load_seconds,
                                   request_interval),
                             name="load-generator"),
            threading.Thread(target=run_event_loop,
                             args=(self.stats, self.stop_event, aggregate_period),
                             name="asyncio-loop"),
        ]

    def start(self):
        self.threads[0].start()
        fetch(self.base_url + "/health")  # serving before the load starts
        for t in self.threads[1:]:
            t.start()
        return self.port

    def stop(self):
        self.stop_event.set()
        self.httpd.shutdown()
        for t in self.threads:
            if t.is_alive():
                t.join(timeout=10)
        self.httpd.server_close()


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port-file", help="write the port here once serving")
    ap.add_argument("--load-seconds", type=float, default=600.0,
                    help="how long the built-in client sends requests (default 600)")
    ap.add_argument("--duration", type=float, default=0.0,
                    help="exit after this many seconds (default: run until SIGTERM/SIGINT)")
    args = ap.parse_args(argv)

    service = DemoService(load_seconds=args.load_seconds)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    port = service.start()
    if args.port_file:
        write_port_file(args.port_file, port)
    print("demo_service: serving on http://127.0.0.1:%d (pid %d)" % (port, os.getpid()),
          flush=True)
    # wait in short slices so signals are handled promptly on every version
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    while not done.wait(0.2):
        if deadline is not None and time.monotonic() >= deadline:
            break
    service.stop()
    print("demo_service: stopped after %d requests" % service.stats.requests, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
