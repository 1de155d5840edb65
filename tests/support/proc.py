"""Processes seen from outside: /proc state of a target, running build/vcattach, dropping
privileges.  What "the target is left alive, unstopped and untraced" means is defined here,
once: assert_untouched (the process) and assert_running_untraced (every thread of it)."""
import os
import socket
import subprocess
import time

from .paths import VCATTACH, world_readable

NOBODY = (65534, 65534)

# Wraps a command in its own mount namespace with a private /tmp (like systemd's PrivateTmp, or
# a container sharing the rest of the filesystem).
PRIVATE_TMP = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs vc-private-tmp /tmp && exec "$0" "$@"')


def as_user(user):
    """preexec_fn that drops to user=(uid, gid) with no supplementary groups (root test
    runner), or None for user=None."""
    if user is None:
        return None
    uid, gid = user

    def preexec():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return preexec


def run_vcattach(*args, env=None, timeout=60, user=None, stdin=None, exe=VCATTACH):
    """Runs build/vcattach; env adds to (does not replace) ours; user=(uid, gid) drops
    privileges first."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    if user is not None:
        exe = world_readable(exe)  # another user may not reach a clone under a 0700 home
    return subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, preexec_fn=as_user(user), stdin=stdin)


def proc_state(pid):
    """State letter of /proc/PID/stat, or None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2]


def tracer_pid(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return None


def task_states(pid):
    """State letters of every thread of pid (threads that end meanwhile are left out)."""
    states = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return states


def assert_untouched(pid):
    """The target runs, unstopped and untraced (what every preflight failure must leave)."""
    assert proc_state(pid) in ("R", "S", "D"), "state %r" % proc_state(pid)
    assert tracer_pid(pid) == 0


def assert_running_untraced(pid):
    """No thread of pid is stopped or traced (what every injection must leave behind)."""
    tasks = os.listdir("/proc/%d/task" % pid)
    assert tasks, "target %d has no threads" % pid
    for tid in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                tracer = [l for l in f if l.startswith("TracerPid:")][0].split()[1]
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile (ESRCH once its entry is being torn down)
        assert state not in ("T", "t"), "thread %s of %d left stopped (%s)" % (tid, pid, state)
        assert tracer == "0", "thread %s of %d still traced by %s" % (tid, pid, tracer)


def python_pid(pid):
    """With a wrapper (unshare --fork) the Python process is a child of the wrapper."""
    for _ in range(100):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        try:
            if "python" in os.readlink("/proc/%d/exe" % pid):
                return pid
        except OSError:
            pass
        time.sleep(0.02)
    return pid


def free_port():
    """A local TCP port nobody listens on now (the kernel's choice), for a server under test."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _tree_states(pid):
    """'pid stat wchan args' of pid and every descendant (for a hang's report)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,stat=,wchan:24=,args="],
                         capture_output=True, text=True).stdout.splitlines()
    rows = {int(ln.split()[0]): ln for ln in out if ln.split()}
    kids = {}
    for p, ln in rows.items():
        kids.setdefault(int(ln.split()[1]), []).append(p)
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        if p in rows:
            seen.append(rows[p][:200])
        todo += kids.get(p, [])
    return "\n".join(seen)


def hang_report(pid, targets=()):
    """Where a vcattach that outlived its bound was: its threads' stacks (as gdb reads them),
    the states of its children and of the targets' trees."""
    report = ["vcattach (pid %d) still running" % pid]
    try:
        bt = subprocess.run(["gdb", "-nx", "-batch", "-p", str(pid),
                             "-ex", "thread apply all bt"], capture_output=True, text=True,
                            timeout=60).stdout
        report.append("its stacks:\n" + "\n".join(ln for ln in bt.splitlines()
                                                   if ln.startswith(("#", "Thread"))))
    except (OSError, subprocess.TimeoutExpired) as e:
        report.append("its stacks could not be read: %s" % e)
    report.append("its processes:\n" + _tree_states(pid))
    for t in targets:
        report.append("target tree %d:\n%s" % (t, _tree_states(t)))
    return "\n".join(report)


def communicate_or_explain(proc, timeout, targets=()):
    """proc.communicate(timeout), or, when vcattach outlives it: an AssertionError that says
    where it was (hang_report) and what it printed until it was killed."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    report = hang_report(proc.pid, targets) + "\n(after %s s)" % timeout
    proc.kill()
    stdout, stderr = proc.communicate(timeout=30)
    raise AssertionError("%s\nits stdout:\n%s\nits stderr:\n%s"
                         % (report, stdout[-3000:], stderr[-3000:]))
