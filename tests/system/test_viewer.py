"""Real-viewer test: our exports, opened in speedscope in headless Chromium.

A real trace (examples/demo_service.py traced in-process with `vcattach.trace`, by
tests/viewer/trace_demo.py) is converted to (a) Chrome-trace JSON, (b) speedscope's own
format and (c) folded stacks with build/vcattach, served from 127.0.0.1 next to speedscope's
release build (npm package `speedscope`, installed from tests/viewer/package-lock.json), and
loaded with #profileURL= in /usr/bin/chromium driven by playwright-core
(tests/viewer/check_speedscope.js).
speedscope draws flame graphs on a canvas, so the checks read its Sandwich view, a DOM table:
the page must show no import error, one profile per traced thread, and for the
load-generator and asyncio-loop threads their top functions by self time, as `vcattach
summary` computes them, with the same self time (for (c), one merged profile whose top
functions match `summary --merged`).  Screenshots: build/viewer/*.png.
Skipped (with the reason) only when this machine cannot run Chromium or node at all.
"""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import pytest

from support.paths import BUILD, PYTHONS, ROOT, VCATTACH

VIEWER = os.path.join(ROOT, "tests", "viewer")
SPEEDSCOPE = os.path.join(VIEWER, "node_modules", "speedscope", "dist", "release")
CHROMIUM = "/usr/bin/chromium"
SHOTS = os.path.join(BUILD, "viewer")
WANTED_THREADS = ["load-generator", "asyncio-loop"]


# ---- environment: Chromium, node, the npm packages, a static server -----------------------

def _chromium_runs():
    """None if headless Chromium can render a page here, else the reason it cannot."""
    if not os.access(CHROMIUM, os.X_OK):
        return "%s is not installed (scripts/install-deps.sh installs it)" % CHROMIUM
    if not shutil.which("node"):
        return "node is not installed (scripts/install-deps.sh installs nodejs)"
    with tempfile.TemporaryDirectory(prefix="vc-chromium-") as profile:
        try:
            proc = subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic", "--user-data-dir=" + profile,
                 "--dump-dom", "data:text/html,<p>vcattach-ok</p>"],
                capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "headless Chromium cannot run here: %s" % e
    if "vcattach-ok" not in proc.stdout:
        return "headless Chromium cannot run here: %s" % (proc.stderr.strip().splitlines()
                                                          or ["no output"])[-1]
    return None


def _ensure_npm_packages():
    if os.path.isdir(os.path.join(VIEWER, "node_modules", "playwright-core")) and \
            os.path.isfile(os.path.join(SPEEDSCOPE, "index.html")):
        return
    proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=VIEWER,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, "npm ci in tests/viewer failed:\n" + proc.stderr[-2000:]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """/traces/NAME from the test's directory, everything else from speedscope's build."""
    traces_dir = None

    def translate_path(self, path):
        path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
        name = os.path.basename(path)
        if path.startswith("/traces/"):
            return os.path.join(self.traces_dir, name)
        return os.path.join(SPEEDSCOPE, name or "index.html")

    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    reason = _chromium_runs()
    if reason:
        pytest.skip(reason)
    _ensure_npm_packages()
    traces = str(tmp_path_factory.mktemp("traces"))
    handler = type("Handler", (_Handler,), {"traces_dir": traces})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    os.makedirs(SHOTS, exist_ok=True)
    try:
        yield {"base": "http://127.0.0.1:%d" % server.server_address[1], "traces": traces}
    finally:
        server.shutdown()
        server.server_close()


# ---- the trace: the demo service, traced for real -----------------------------------------

def _tracing_python():
    """(interpreter, agent) for Debian's python3 if its agent is built, else the first one."""
    ordered = sorted(PYTHONS, key=lambda p: os.path.realpath(p["path"]) !=
                     os.path.realpath(sys.executable))
    for p in ordered:
        major, minor = p["version"].split(".")[:2]
        agent = os.path.join(BUILD, "libvcagent-py%d%02d.so" % (int(major), int(minor)))
        if os.path.exists(agent):
            return p, agent
    return None


@pytest.fixture(scope="module")
def demo_trace(viewer):
    found = _tracing_python()
    assert found, "no agent build in %s: run make" % BUILD
    py, agent = found
    cvf = os.path.join(viewer["traces"], "demo.cvf")
    proc = subprocess.run([py["path"], os.path.join(VIEWER, "trace_demo.py"), cvf, "1.0"],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, VCATTACH_AGENT_DIR=os.path.dirname(agent)))
    assert proc.returncode == 0, proc.stderr
    assert os.path.getsize(cvf) > 0
    return cvf


def _summary_tops(cvf, thread=None, n=3):
    """[(name, self ms)] of a thread's (None: all threads') top functions by self time, from
    vcattach summary."""
    which = ["--thread", thread] if thread else ["--merged"]
    # --all: speedscope shows every call's self time, waits included
    out = subprocess.run([VCATTACH, "summary", cvf, "--top", str(n), "--all"] + which,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # self ms, self%, total ms, total%, calls, mean, p50, p99, max µs, function
    rows = re.findall(r"^\s+([\d.]+)\s+[\d.]+%\s+[\d.]+\s+[\d.]+%\s+[\d,]+(?:\s+[\d.]+){4}  "
                      r"(.*)$", out.stdout, re.M)
    assert rows, out.stdout
    return [(name, float(ms)) for ms, name in rows]


def _threads_with_calls(cvf):
    out = subprocess.run([VCATTACH, "summary", cvf, "--top", "1", "--max-threads", "0", "--all"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return len(re.findall(r"^\S.*: [\d,]+ calls?, .* in calls$", out.stdout, re.M))


# speedscope prints times with a unit; unitless weights (collapsed stacks: our µs) have none
UNITS = {"ns": 1e-6, "µs": 1e-3, "ms": 1.0, "s": 1e3, "": 1e-3}
SANDWICH_ROW = re.compile(r"([\d.,]+)(ns|µs|ms|s|) \([^)]*\)\n\t([\d.,]+)(ns|µs|ms|s|) "
                          r"\([^)]*\)\n\t(.+)")


def _sandwich_self_ms(text):
    """{function: self ms} from the Sandwich table's text (Total, Self, Symbol Name)."""
    return {m.group(5): float(m.group(3).replace(",", "")) * UNITS[m.group(4)]
            for m in SANDWICH_ROW.finditer(text)}


def _open_in_speedscope(viewer, trace_file, shot_name, want=None):
    url = "%s/index.html#profileURL=%s" % (
        viewer["base"], urllib.parse.quote("%s/traces/%s" % (viewer["base"], trace_file), safe=""))
    with tempfile.TemporaryDirectory(prefix="vc-viewer-profile-") as profile:
        opts = {"url": url, "userDataDir": profile, "executablePath": CHROMIUM,
                "screenshot": os.path.join(SHOTS, shot_name),
                "wantProfiles": want if want is not None else
                [name + " (" for name in WANTED_THREADS], "timeoutMs": 30000}
        proc = subprocess.run(["node", os.path.join(VIEWER, "check_speedscope.js"),
                               json.dumps(opts)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _check_report(report, cvf):
    assert report["error"] is None, report
    assert report["ok"] and not report["dialogs"] and not report["pageErrors"], report
    assert not [e for e in report["consoleErrors"] if "Failed to load" in e], report
    assert report["profileCount"] == _threads_with_calls(cvf)
    visited = {v["want"]: v for v in report["visited"]}
    assert set(visited) == {name + " (" for name in WANTED_THREADS}, report["firstTitle"]
    for thread in WANTED_THREADS:
        shown = _sandwich_self_ms(visited[thread + " ("]["text"])
        tops = _summary_tops(cvf, thread)
        for name, self_ms in tops:
            assert name in shown, (thread, name, sorted(shown)[:20])
        name, self_ms = tops[0]  # speedscope shows 3 significant digits
        assert shown[name] == pytest.approx(self_ms, rel=0.01, abs=0.002), (thread, name)
    # the demo's own code is visible, not only the stdlib underneath
    assert any(n.startswith("generate_load (") for n in
               _sandwich_self_ms(visited["load-generator ("]["text"]))
    assert any(n.startswith("aggregate_latencies (") for n in
               _sandwich_self_ms(visited["asyncio-loop ("]["text"]))


def _convert(cvf, out, *fmt):
    proc = subprocess.run([VCATTACH, "convert", cvf, "-o", out, "--force"] + list(fmt),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def test_chrome_json_opens_in_speedscope(viewer, demo_trace):
    _convert(demo_trace, os.path.join(viewer["traces"], "demo.json"))
    report = _open_in_speedscope(viewer, "demo.json", "speedscope-chrome")
    _check_report(report, demo_trace)


def _need_format(fmt):
    help_text = subprocess.run([VCATTACH, "convert", "--help"], capture_output=True,
                               text=True).stdout
    if fmt not in help_text:
        pytest.skip("vcattach convert has no --format %s yet (trace/convert_job.c's format "
                    "table needs the row from export.h)" % fmt)


def test_speedscope_json_opens_in_speedscope(viewer, demo_trace):
    _need_format("speedscope")
    _convert(demo_trace, os.path.join(viewer["traces"], "demo.speedscope.json"),
             "--format", "speedscope")
    report = _open_in_speedscope(viewer, "demo.speedscope.json", "speedscope-speedscope")
    _check_report(report, demo_trace)


def test_working_speedscope_opens_in_speedscope(viewer, demo_trace):
    """`--format speedscope --working`: one "sampled" profile per thread, its stacks weighed by
    working time; speedscope imports it without an error, a profile per traced thread, and
    the load generator's Sandwich view lists the demo's own code."""
    _need_format("speedscope")
    _convert(demo_trace, os.path.join(viewer["traces"], "demo.working.speedscope.json"),
             "--format", "speedscope", "--working")
    report = _open_in_speedscope(viewer, "demo.working.speedscope.json", "speedscope-working")
    assert report["error"] is None, report
    assert report["ok"] and not report["dialogs"] and not report["pageErrors"], report
    assert report["profileCount"] == _threads_with_calls(demo_trace)
    visited = {v["want"]: v for v in report["visited"]}
    assert set(visited) == {name + " (" for name in WANTED_THREADS}, report["firstTitle"]
    shown = _sandwich_self_ms(visited["load-generator ("]["text"])
    assert any(n.startswith("generate_load (") or n.startswith("fetch (") for n in shown), shown


def test_collapsed_stacks_open_in_speedscope(viewer, demo_trace):
    """Folded stacks merge all threads into one profile: its Sandwich view lists the process's
    top functions by self time, as `vcattach summary --merged` computes them."""
    _need_format("collapsed")
    _convert(demo_trace, os.path.join(viewer["traces"], "demo.folded"), "--format", "collapsed")
    report = _open_in_speedscope(viewer, "demo.folded", "speedscope-collapsed", want=[""])
    assert report["error"] is None and report["ok"] and not report["dialogs"], report
    assert report["profileCount"] == 1 and len(report["visited"]) == 1
    shown = _sandwich_self_ms(report["visited"][0]["text"])
    for name, self_ms in _summary_tops(demo_trace):
        assert shown.get(name) == pytest.approx(self_ms, rel=0.01, abs=0.01), (name, shown)


# ---- our own flame graph SVG ---------------------------------------------------------------

def _open_svg(svg, shot_name, search):
    with tempfile.TemporaryDirectory(prefix="vc-viewer-profile-") as profile:
        opts = {"file": os.path.abspath(svg), "userDataDir": profile,
                "executablePath": CHROMIUM, "screenshot": os.path.join(SHOTS, shot_name),
                "search": search}
        proc = subprocess.run(["node", os.path.join(VIEWER, "check_svg.js"), json.dumps(opts)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("merged", [False, True], ids=["per-thread", "merged"])
def test_svg_flame_graph_renders_searches_and_zooms(viewer, demo_trace, merged):
    """The SVG opens offline (file://, no network request), draws the frames, the Search
    button highlights the matching ones and reports their share, a click zooms a frame to the
    full width and Reset zoom restores the view.  Screenshots: build/viewer/svg-*.png."""
    _need_format("svg")
    svg = os.path.join(viewer["traces"], "demo%s.svg" % ("-merged" if merged else ""))
    _convert(demo_trace, svg, "--format", "svg", *(["--merged"] if merged else []))
    with open(svg, encoding="utf-8") as f:
        text = f.read()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    report = _open_svg(svg, "svg-merged" if merged else "svg-per-thread", "find_duplicate")
    assert report["error"] is None and report["ok"], report
    assert not report["pageErrors"] and not report["consoleErrors"], report
    assert report["requests"] == [], report["requests"]
    assert ("merged" in report["title"]) == merged, report["title"]
    assert report["frames"] > 10 and report["visible"] > 10 and report["widest"] > 1100, report
    assert report["labelled"] > 5, report
    # search: every highlighted frame matches, and the matched share is shown
    s = report["search"]
    assert s["highlighted"] >= 1 and s["names"], s
    assert all("find_duplicate" in n for n in s["names"]), s["names"]
    assert s["matched"].startswith("Matched: "), s
    # zoom: the clicked frame spans the width (1200 - 2 * 10 margin); fewer frames remain
    z = report["zoom"]
    assert "find_duplicate" in z["name"]
    assert z["width"] > 1170 and z["width"] > z["before"], z
    assert z["visible"] < report["visible"] and z["resetShown"], z
    assert report["reset"]["visible"] == report["visible"], report["reset"]
    if not merged:  # a frame per thread, named like the threads of the trace
        assert any(t in text for t in WANTED_THREADS)
