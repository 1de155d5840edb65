"""`make demo`'s script (scripts/demo.sh), run for real: the bundled service
(examples/demo_service.py, a thread per request) traced by vcattach for 3 s, then its
exports, summary and requests.

What a newcomer is promised by it (issue 36): the working table is led by the slow path,
find_duplicate_skus, with blocked calls (lock acquires, polls) far behind; its flame graph of
working time, demo.svg, shows find_duplicate_skus as the heavy frame under the request
handler (from DemoHandler.do_GET, always the widest child, down to find_duplicate_skus),
where the wall-time graph beside it is wide with waits; and its last lines point at
`vcattach top`.
"""
import os
import re
import subprocess

import pytest

from support.paths import BUILD, ROOT, VCATTACH

DEMO = os.path.join(ROOT, "scripts", "demo.sh")
FRAME = re.compile(r'<g class="f[^"]*" data-x="([\d.]+)" data-w="([\d.]+)" data-d="(\d+)"'
                   r'[^>]*><title>([^<]*)</title>')


def frames(svg):
    """[(x, w, depth, label)] of a flame graph written by `convert --format svg`."""
    with open(svg) as f:
        return [(float(x), float(w), int(d), label)
                for x, w, d, label in FRAME.findall(f.read())]


def heaviest_path(fr, start_prefix):
    """From the widest frame named start_prefix…, the widest child at each level down: the
    names on the way (the frame itself first)."""
    starts = [f for f in fr if f[3].startswith(start_prefix)]
    assert starts, start_prefix
    cur = max(starts, key=lambda f: f[1])
    path = [cur[3]]
    while True:
        x, w, d, _ = cur
        kids = [f for f in fr if f[2] == d + 1 and f[0] >= x - 1e-9 and
                f[0] + f[1] <= x + w + 1e-9]
        if not kids:
            return path
        cur = max(kids, key=lambda f: f[1])
        path.append(cur[3])


def working_rows(text):
    """[(self ms, function)] of the working table of `summary --merged` in the demo's output."""
    rows, inside = [], False
    for line in text.splitlines():
        if "function (working)" in line:
            inside = True
            continue
        if inside:  # numbers and "-" columns, then the function after two spaces
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) < 3 or not re.match(r"^[\d.]+$", cells[0]):
                break
            rows.append((float(cells[0]), cells[-1]))
    return rows


@pytest.fixture(scope="module")
def demo():
    env = dict(os.environ, BUILD=BUILD, DEMO_SECONDS="3")
    r = subprocess.run(["bash", DEMO], capture_output=True, text=True, timeout=300, env=env,
                       cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    return r.stdout


def test_demo_working_table_is_led_by_the_slow_path(demo):
    if os.geteuid() == 0:  # root: the scheduler's own switches
        assert "CPU exact (scheduler events)" in demo, demo[:3000]
    rows = working_rows(demo)
    assert rows and rows[0][1].startswith("find_duplicate_skus ("), rows
    top = rows[0][0]
    for ms, name in rows:
        if name.startswith(("_thread.lock.acquire", "select.", "Condition.wait")):
            assert ms < top / 4, rows  # a blocked call weighs what it ran, little
    assert "vcattach top --pid" in demo


def test_demo_working_flame_graph_shows_the_slow_path(demo):
    out = os.path.join(BUILD, "demo")
    working = frames(os.path.join(out, "demo.svg"))
    path = heaviest_path(working, "DemoHandler.do_GET (")
    assert any(n.startswith("find_duplicate_skus (") for n in path), path
    # the same handler in wall time: find_duplicate_skus is a sliver of the whole there
    wall = frames(os.path.join(out, "demo-wall.svg"))
    share = lambda fr: sum(w for _, w, _, n in fr if n.startswith("find_duplicate_skus ("))
    assert share(working) > 5 * share(wall), (share(working), share(wall))
    with open(os.path.join(out, "demo.svg")) as f:
        assert "flame graph of working (on-CPU) time" in f.read()
