"""Command line of the attach workflow (`vcattach [trace]|start|stop|status`): parsing, help,
exit codes.  Accepted arguments are shown accepted by reaching the *next* check (preflight on
a real non-Python process), so nothing here depends on the agent being built."""
import subprocess

import pytest

from support.paths import VCATTACH


def run(*args, timeout=20):
    return subprocess.run([VCATTACH] + list(args), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def sleeper():
    """A real process that is not Python: every well-formed command reaches preflight."""
    p = subprocess.Popen(["sleep", "300"])
    yield p.pid
    p.kill()
    p.wait()


@pytest.mark.parametrize("dur", ["10s", "500ms", "2m", "1.5s", "1h", "3", "0.25s", "24h",
                                 "1min"])
def test_duration_accepted(sleeper, dur):
    r = run("--pid", str(sleeper), "-t", dur)
    assert r.returncode == 2
    assert "not a CPython process" in r.stderr, r.stderr


@pytest.mark.parametrize("dur,why", [
    ("5x", "bad duration"), ("", "bad duration"), ("s", "bad duration"), ("-1s", "bad duration"),
    ("1e3s", "bad duration"), ("1.5.2s", "bad duration"), (" 5s", "bad duration"),
    ("5 s", "bad duration"), ("0s", "is zero"), ("0.0001s", "is zero"), ("25h", "too long"),
    ("99999999999999999999s", "too long"), ("1,5s", "bad duration"),
])
def test_duration_rejected(sleeper, dur, why):
    r = run("--pid", str(sleeper), "-t", dur)
    assert r.returncode == 2
    assert why in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, "one line: %r" % r.stderr
    assert "not a CPython" not in r.stderr  # rejected before touching anything


@pytest.mark.parametrize("args,why", [
    ([], "give --pid PID"),
    (["--pid"], "needs a value"),
    (["--pid", "abc"], "bad pid"),
    (["--pid", "0"], "out of range"),
    (["--pid", "-5"], "bad pid"),
    (["--pid", "99999999999"], "out of range"),
    (["--pid", "1", "--method", "lldb"], "unknown method 'lldb'"),
    (["--pid", "1", "--hook", "trace"], "unknown hook 'trace'"),
    (["--pid", "1", "--buffer-mb", "0"], "out of range"),
    (["--pid", "1", "--buffer-mb", "12MB"], "bad buffer size"),
    (["--pid", "1", "--bogus"], "unknown option '--bogus'"),
    (["--pid", "1", "-x"], "unknown option '-x'"),
    (["--pid", "1", "extra"], "unexpected argument 'extra'"),
    (["--pid", "1", "-o", ""], "empty output path"),
    (["--pid", "1", "--nice", "-21"], "bad --nice '-21'"),
    (["--pid", "1", "--nice", "high"], "bad --nice 'high'"),
])
def test_usage_errors(args, why):
    for prefix in ([], ["trace"]):
        if not prefix and not args:
            continue  # bare `vcattach` prints the general usage (main.c)
        r = run(*(prefix + args))
        assert r.returncode == 2, r
        assert why in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr


def test_start_rejects_socket_output(sleeper):
    r = run("start", "--pid", str(sleeper), "-o", "unix:/tmp/x.sock")
    assert r.returncode == 2 and "vcattach trace" in r.stderr


@pytest.mark.parametrize("cmd", ["stop", "status"])
def test_stop_status_take_only_pid(cmd, sleeper):
    r = run(cmd, "--pid", str(sleeper), "-t", "5s")
    assert r.returncode == 2 and "does not apply" in r.stderr, r.stderr


@pytest.mark.parametrize("cmd", ["trace", "start", "stop", "status"])
def test_help(cmd):
    r = run(cmd, "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("usage: vcattach")
    assert "exit codes" in r.stdout


def test_no_session_in_non_python(sleeper):
    r = run("status", "--pid", str(sleeper))
    assert r.returncode == 1 and "no session is running" in r.stdout
    r = run("stop", "--pid", str(sleeper))
    assert r.returncode == 1 and "no vcattach session is running" in r.stderr


@pytest.mark.parametrize("cmd", ["status", "stop"])
def test_stop_status_missing_pid(cmd):
    r = run(cmd, "--pid", "999999")
    assert r.returncode == 1 and "no such process" in r.stderr


def test_non_python_reported_with_fix(sleeper):
    r = run("--pid", str(sleeper), "-t", "1s")
    assert r.returncode == 2
    assert "pid %d (sleep) is not a CPython process" % sleeper in r.stderr
    assert "give the pid of a python process" in r.stderr


def test_no_such_pid():
    r = run("--pid", "999999", "-t", "1s")
    assert r.returncode == 2 and "no such process: pid 999999" in r.stderr


def test_own_pid_refused():
    # `exec` makes vcattach the shell's pid, so $$ is vcattach itself.
    r = subprocess.run(["sh", "-c", 'exec "$0" --pid $$ -t 1s', VCATTACH], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 2 and "is vcattach itself" in r.stderr, r.stderr
