"""The agent's session life cycle outside the `with` API, on every interpreter of the matrix:
the control channel (vc_agent_connect: HELLO → CONFIG → STARTED → STATUS → STOP → DATA* →
END, as the injector drives it), the abstract status socket (`vcattach status|stop`), the
duration deadline, the atexit stop when the process exits mid-session, and the errors a user
sees (unwritable output, a second session).  Each target is a real process; each trace is
decoded by both readers (support.traces.decode).
"""
import json
import os
import socket
import subprocess
import textwrap
import time

import pytest

from support.paths import PYTHONS, agent_path, python_env, python_params
from support.protocol import (CONFIG, DATA, END, HELLO, STARTED, STATUS, STOP, control_listener,
                              kv, recv, send)
from support.agent_scripts import FORK_CHILD, PRELUDE, check_fork_child_untraced
from support.traces import check_nesting, decode, named


def _spawn(py, body, *args):
    return subprocess.Popen([py["path"], "-c", PRELUDE + textwrap.dedent(body)] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=python_env())


def _finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, "target failed (rc %s):\n%s\n%s" % (p.returncode, out, err)
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(params=python_params())
def py(request):
    p = request.param
    if not os.path.exists(agent_path(p["minor"])):
        pytest.fail("agent not built for %s: run make" % p["id"])
    return p


def test_control_channel_session(py, tmp_path):
    d, path, srv = control_listener()
    p = _spawn(py, r'''
        lib = _agent.load()
        lib.vc_agent_connect.argtypes = [ctypes.c_char_p]
        assert lib.vc_agent_connect(sys.argv[1].encode()) == 0
        t0 = time.time()
        while not lib.vc_agent_active() and time.time() - t0 < 10:
            time.sleep(0.001)
        wait_inactive(lib)
        print(json.dumps({"after": hooks_state(), "active": lib.vc_agent_active()}))
    ''', path)
    try:
        conn, _ = srv.accept()
        conn.settimeout(30)
        t, payload = recv(conn)
        assert t == HELLO
        hello = kv(payload)
        assert int(hello["pid"]) == p.pid and hello["python"] == py["version"]
        send(conn, CONFIG, b"output=control\nduration_ms=0\nbuffer_mb=16\nhook=auto\n")
        t, payload = recv(conn)
        assert t == STARTED, payload
        assert int(kv(payload)["threads"]) >= 1
        time.sleep(0.3)
        send(conn, STATUS)
        t, payload = recv(conn)
        assert t == STATUS and kv(payload)["state"] == "running"
        send(conn, STOP)
        data = b""
        while True:
            t, payload = recv(conn)
            if t == DATA:
                data += payload
                continue
            assert t == END, (t, payload)
            end = kv(payload)
            break
        conn.close()
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(d)
    rep = _finish(p)
    assert rep["after"]["getprofile"] == "None" and rep["active"] == 0
    assert "tools" not in rep["after"] or all(x is None for x in rep["after"]["tools"])
    cvf_path = str(tmp_path / "control.cvf")
    with open(cvf_path, "wb") as f:
        f.write(data)
    assert int(end["bytes"]) == len(data) and end["status"] == "0"
    ev = decode(cvf_path)
    assert int(end["events"]) == sum(1 for e in ev if e["ph"] == "X")
    assert len(named(ev, "leaf")) > 0
    check_nesting(ev)


def test_status_socket_stop_and_status(py, tmp_path):
    out = str(tmp_path / "status.cvf")
    p = _spawn(py, r'''
        vcattach.start(sys.argv[1])
        for _ in range(100):
            leaf()
        print("started", flush=True)
        wait_inactive(_agent.load())
        r = _agent.VcResult()
        _agent.load().vc_agent_last_result(ctypes.byref(r))
        print(json.dumps({"after": hooks_state(), "events": r.events, "status": r.status}))
    ''', out)
    assert p.stdout.readline().strip() == "started"

    def ask(msg):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect("\0vcattach-agent-%d" % p.pid)
        send(s, msg)
        t, payload = recv(s)
        s.close()
        return t, kv(payload)
    t, st = ask(STATUS)
    assert t == STATUS and st["state"] == "running" and int(st["pid"]) == p.pid
    assert st["output"] == out
    t, end = ask(STOP)
    assert t == END and end["status"] == "0"
    rep = _finish(p)
    assert rep["status"] == 0 and rep["after"]["getprofile"] == "None"
    ev = decode(out)
    assert rep["events"] == int(end["events"]) == sum(1 for e in ev if e["ph"] == "X")
    assert len(named(ev, "leaf")) > 0


def test_deadline_and_atexit(py, tmp_path):
    # duration: the session ends by itself; then a session left running at exit is written by
    # the atexit stop, and the process exits normally.
    a, b = str(tmp_path / "deadline.cvf"), str(tmp_path / "atexit.cvf")
    p = _spawn(py, r'''
        vcattach.start(sys.argv[1], duration=0.3)
        wait_inactive(_agent.load())
        print(json.dumps({"deadline_exists": os.path.exists(sys.argv[1]),
                          "after": hooks_state()}), flush=True)
        vcattach.start(sys.argv[2])
        for _ in range(1000):
            leaf()
        def bye():
            sys.exit(0)
        def outer_exit():
            try:
                bye()
            finally:
                leaf()
        outer_exit()
    ''', a, b)
    rep = _finish(p)
    assert rep["deadline_exists"] and rep["after"]["getprofile"] == "None"
    assert len(named(decode(a), "leaf")) > 0
    ev = decode(b)
    assert len(named(ev, "leaf")) == 1001
    assert len(named(ev, "bye")) == 1 and len(named(ev, "outer_exit")) == 1
    bye, outer = named(ev, "bye")[0], named(ev, "outer_exit")[0]
    assert outer["ts"] <= bye["ts"] and bye["ts"] + bye["dur"] <= outer["ts"] + outer["dur"]
    check_nesting(ev)


def test_user_errors(py, tmp_path):
    p = _spawn(py, r'''
        res = {}
        try:
            vcattach.start("/nonexistent-dir/x.cvf")
        except vcattach.VcattachError as e:
            res["unwritable"] = str(e)
        vcattach.start(sys.argv[1])
        try:
            vcattach.start(sys.argv[1] + ".2")
        except vcattach.VcattachError as e:
            res["busy"] = str(e)
        r = vcattach.stop()
        res["first_ok"] = r.status == 0 and os.path.exists(sys.argv[1])
        try:
            vcattach.start(sys.argv[1] + ".3", hook="monitoring")
            vcattach.stop()
            res["monitoring"] = "ok"
        except vcattach.VcattachError as e:
            res["monitoring"] = str(e)
        res["after"] = hooks_state()
        print(json.dumps(res))
    ''', str(tmp_path / "ok.cvf"))
    rep = _finish(p)
    assert "not writable" in rep["unwritable"] and "/nonexistent-dir" in rep["unwritable"]
    assert "already running" in rep["busy"]
    assert rep["first_ok"]
    if tuple(int(x) for x in py["version"].split(".")[:2]) >= (3, 12):
        assert rep["monitoring"] == "ok"
    else:
        assert "3.12" in rep["monitoring"]
    assert rep["after"]["getprofile"] == "None"


def test_fork_child_is_left_untraced(py, tmp_path):
    out = str(tmp_path / "fork.cvf")
    rep = _finish(_spawn(py, FORK_CHILD, out))
    check_fork_child_untraced(rep, decode(out))


def test_deep_recursion_is_counted(py, tmp_path):
    out = str(tmp_path / "deep.cvf")
    p = _spawn(py, r'''
        sys.setrecursionlimit(5000)
        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)
        with vcattach.trace(sys.argv[1]) as t:
            down(1500)
        print(json.dumps(t.result._asdict()))
    ''', out)
    rep = _finish(p)
    ev = decode(out)
    detach = [e for e in ev if e["name"] == "vcattach detach"][0]
    assert rep["dropped"] == detach["args"]["dropped"] == detach["args"]["too_deep"] > 0
    n_down = len(named(ev, "down"))
    assert n_down + detach["args"]["too_deep"] == 1501
    check_nesting(ev)


def test_sinks_fd_unix_and_fallback(py, tmp_path):
    sock_path = str(tmp_path / "sink.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    srv.settimeout(60)
    fd_file = str(tmp_path / "fd.cvf")
    gone_dir = tmp_path / "gone"
    gone_dir.mkdir()
    fallback = str(tmp_path / "fallback.cvf")
    p = _spawn(py, r'''
        res = {}
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with vcattach.trace(fd):
            leaf()
        os.close(fd)
        with vcattach.trace("unix:" + sys.argv[2]):
            leaf()
        vcattach.start(os.path.join(sys.argv[3], "x.cvf"), fallback=sys.argv[4])
        leaf()
        os.rmdir(sys.argv[3])
        try:
            vcattach.stop()
            res["fallback"] = "no error"
        except vcattach.VcattachError as e:
            res["fallback"] = str(e)
        print(json.dumps(res))
    ''', fd_file, sock_path, str(gone_dir), fallback)
    conn, _ = srv.accept()
    conn.settimeout(60)
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    conn.close()
    srv.close()
    rep = _finish(p)
    unix_file = str(tmp_path / "unix.cvf")
    with open(unix_file, "wb") as f:
        f.write(data)
    for path in (fd_file, unix_file, fallback):
        assert len(named(decode(path), "leaf")) == 1, path
    assert "fallback" in rep["fallback"] and fallback in rep["fallback"]
    assert os.stat(fallback).st_mode & 0o777 == 0o600


def test_agent_missing_is_a_clear_error(py, tmp_path):
    env = python_env(VCATTACH_AGENT=str(tmp_path / "no-such-agent.so"))
    code = textwrap.dedent(r'''
        import sys, vcattach
        try:
            vcattach.start(sys.argv[1])
        except vcattach.VcattachError as e:
            print(e)
    ''')
    r = subprocess.run([py["path"], "-c", code, str(tmp_path / "x.cvf")], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "cannot load the agent" in r.stdout and "no-such-agent.so" in r.stdout
    assert not os.path.exists(str(tmp_path / "x.cvf"))


def test_control_detach_writes_output_at_deadline(py, tmp_path):
    # `vcattach start`: the controller leaves after STARTED; the agent stops at its deadline
    # and writes the output file itself.
    d, path, srv = control_listener()
    out = str(tmp_path / "detached.cvf")
    p = _spawn(py, r'''
        lib = _agent.load()
        lib.vc_agent_connect.argtypes = [ctypes.c_char_p]
        assert lib.vc_agent_connect(sys.argv[1].encode()) == 0
        t0 = time.time()
        while not lib.vc_agent_active() and time.time() - t0 < 10:
            time.sleep(0.001)
        wait_inactive(lib)
        r = _agent.VcResult()
        lib.vc_agent_last_result(ctypes.byref(r))
        print(json.dumps({"after": hooks_state(), "status": r.status, "events": r.events}))
    ''', path)
    try:
        conn, _ = srv.accept()
        conn.settimeout(30)
        assert recv(conn)[0] == HELLO
        send(conn, CONFIG, ("output=%s\nduration_ms=300\ndetach=1\n" % out).encode())
        t, payload = recv(conn)
        assert t == STARTED, payload
        conn.close()
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(d)
    rep = _finish(p)
    assert rep["status"] == 0 and rep["after"]["getprofile"] == "None"
    ev = decode(out)
    assert rep["events"] == sum(1 for e in ev if e["ph"] == "X")
    assert len(named(ev, "leaf")) > 0


def test_unix_sink_with_full_backlog_does_not_hang_the_agent(tmp_path):
    """output=unix:PATH whose listener never accepts and has a full backlog: the agent's
    connect must give up (bounded), the trace goes to the fallback, and the session ends."""
    built = [p for p in PYTHONS if os.path.exists(agent_path(p["minor"]))]
    if not built:
        pytest.skip("no agent built")
    py = built[-1]
    sock_path = str(tmp_path / "full.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(0)
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    filler.connect(sock_path)  # takes the only backlog slot; nobody ever accepts
    fallback = str(tmp_path / "fallback.cvf")
    try:
        p = _spawn(py, r'''
            lib = _agent.load()
            res = {}
            vcattach.start("unix:" + sys.argv[1], fallback=sys.argv[2])
            leaf()
            try:
                vcattach.stop(wait=40)
                res["stop"] = "no error"
            except vcattach.VcattachError as e:
                res["stop"] = str(e)
            res["active"] = lib.vc_agent_active()
            print(json.dumps(res))
        ''', sock_path, fallback)
        rep = _finish(p, timeout=90)
    finally:
        filler.close()
        srv.close()
    assert "fallback" in rep["stop"] and fallback in rep["stop"], rep
    assert rep["active"] == 0, rep
    assert len(named(decode(fallback), "leaf")) == 1
