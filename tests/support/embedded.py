"""Hosts that embed CPython in a C server, run for real from Debian's packages: Apache httpd +
mod_wsgi (embedded and daemon mode, each with mod_wsgi's default application group — a
sub-interpreter per application — or %{GLOBAL}, the main interpreter) and uWSGI's python3
plugin (--master --processes N --threads M, with or without --lazy-apps); and wrk, the load.

Each server runs on a free high local port with its own configuration under a private
world-readable directory (never the system's /etc/apache2 service), as root with its workers
as www-data, and is always stopped by the pid this module started (its process group).
Every wait is bounded.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from .proc import free_port

APACHE = "/usr/sbin/apache2"
MODULES = "/usr/lib/apache2/modules"
UWSGI_BIN = "/usr/bin/uwsgi"
WRK = "/usr/bin/wrk"
RUN_USER = "www-data"

# The handler every serving process runs: the tests look for it in each process's trace.
HANDLER = "handle_hello"
APP = '''
import os

def handle_hello(environ):
    total = 0
    for i in range(300):  # a loop, not a generator: a few calls per request to trace
        total += i * i
    return total

def application(environ, start_response):
    body = ("hello %d from %d\\n" % (handle_hello(environ), os.getpid())).encode()
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]
'''


def missing():
    """Why the embedded-host tests cannot run here, or None."""
    for path in (APACHE, os.path.join(MODULES, "mod_wsgi.so"), UWSGI_BIN, WRK):
        if not os.path.exists(path):
            return "%s is missing (scripts/install-deps.sh installs it)" % path
    if not os.path.exists("/usr/lib/uwsgi/plugins/python3_plugin.so"):
        return "uwsgi-plugin-python3 is missing (scripts/install-deps.sh installs it)"
    if os.geteuid() != 0:
        return "Apache's master and uWSGI's drop to www-data: the tests need root"
    return None


def get(port, timeout=5):
    """(status, body) of GET / on the server."""
    with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=timeout) as r:
        return r.status, r.read().decode()


def descendants(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True, timeout=30).stdout.split()
    pids = [int(x) for x in out]
    for p in list(pids):
        pids += descendants(p)
    return pids


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class Server:
    """A host started by start(); .master is the pid to trace, .port serves HTTP."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="vcattach-embedded-", dir="/var/tmp")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.proc = None
        self.master = None
        with open(os.path.join(self.dir, "app.py"), "w") as f:
            f.write(APP)
        os.chmod(os.path.join(self.dir, "app.py"), 0o644)
        self.logs = os.path.join(self.dir, "logs")
        os.mkdir(self.logs)
        shutil.chown(self.logs, RUN_USER, RUN_USER)

    def spawn(self, argv):
        """argv in a process group of its own, its stderr a file in the logs (a pipe nobody
        reads could block it)."""
        with open(os.path.join(self.logs, "stderr.log"), "w") as err:
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)

    def wait_serving(self, timeout=30):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                status, body = get(self.port, timeout=2)
                if status == 200:
                    return body
            except Exception as e:  # not listening yet, or its workers not up yet
                last = e
            time.sleep(0.1)
        raise AssertionError("%s did not serve within %ds: %s\n%s"
                             % (type(self).__name__, timeout, last, self.log_tail()))

    def log_tail(self):
        out = []
        for name in sorted(os.listdir(self.logs)):
            p = os.path.join(self.logs, name)
            if name.endswith(".log") and os.path.isfile(p):
                with open(p, errors="replace") as f:
                    out.append("== %s\n%s" % (name, "".join(f.readlines()[-30:])))
        return "\n".join(out)

    def pids(self):
        return [self.master] + descendants(self.master)

    def close(self):
        if self.proc is not None:
            # SIGTERM first: Apache and uWSGI then remove their IPC objects and sockets; the
            # group (the one this module started) is killed if that takes too long.
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                if self.proc.poll() is not None:
                    break
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                except subprocess.TimeoutExpired:
                    pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the group
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Apache(Server):
    """httpd with mod_wsgi.  mode: "embedded" (the application runs in Apache's own children)
    or "daemon" (in mod_wsgi's daemon processes, WSGIDaemonProcess); group: "default"
    (mod_wsgi's default: a sub-interpreter per application) or "global" (%{GLOBAL}: the main
    interpreter).  eager: WSGILazyInitialization Off (the master initializes Python too).
    Runs in the foreground (-DFOREGROUND) so that .master is our child."""

    DAEMON_NAME = "vc-wsgi-daemon"

    def __init__(self, mode, group, eager=False):
        super().__init__()
        self.mode, self.group = mode, group
        conf = os.path.join(self.dir, "httpd.conf")
        lines = [
            "ServerRoot %s" % self.dir,
            "PidFile %s/httpd.pid" % self.logs,
            "DefaultRuntimeDir %s" % self.logs,
            "Listen 127.0.0.1:%d" % self.port,
            "ServerName localhost",
            "User %s" % RUN_USER, "Group %s" % RUN_USER,
            "ErrorLog %s/error.log" % self.logs,
            "LogLevel warn",
            "LoadModule mpm_worker_module %s/mod_mpm_worker.so" % MODULES,
            "LoadModule authz_core_module %s/mod_authz_core.so" % MODULES,
            "LoadModule wsgi_module %s/mod_wsgi.so" % MODULES,
            # the worker MPM: under the event MPM wrk sees an occasional read error (a
            # keep-alive connection closed as a request goes out) with nobody tracing
            # a fixed set of processes (no spawning or reaping under load during the trace),
            # 4 threads each: wrk's 8 kept-alive connections then need both children (with 8
            # each, one child could take them all, and the other serve nothing to trace)
            "StartServers 2", "ServerLimit 2", "ThreadsPerChild 4", "MaxRequestWorkers 8",
            "MinSpareThreads 1", "MaxSpareThreads 8", "MaxConnectionsPerChild 0",
            # wrk keeps its connections: none closed by the server under it (a close racing
            # a request is a socket error to wrk, whoever traces)
            "KeepAlive On", "MaxKeepAliveRequests 0", "KeepAliveTimeout 30",
            "WSGISocketPrefix %s/wsgi" % self.logs,
            "WSGIScriptAlias / %s/app.py" % self.dir,
            "<Directory %s>" % self.dir, "  Require all granted", "</Directory>",
        ]
        if mode == "daemon":
            lines += ["WSGIDaemonProcess app processes=2 threads=4 display-name=%s"
                      % self.DAEMON_NAME, "WSGIProcessGroup app"]
        if group == "global":
            lines.append("WSGIApplicationGroup %{GLOBAL}")
        if eager:  # Python initialized in the master too, before the fork (no Python runs there)
            lines.append("WSGILazyInitialization Off")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = self.spawn([APACHE, "-f", conf, "-DFOREGROUND"])
        self.master = self.proc.pid
        try:
            self.wait_serving()
        except BaseException:
            self.close()
            raise

    def serving(self):
        """The pids that run the application: the daemon processes, or Apache's children."""
        kids = descendants(self.master)
        if self.mode == "daemon":
            return [p for p in kids if cmdline(p).startswith(self.DAEMON_NAME)]
        return [p for p in kids if not cmdline(p).startswith(self.DAEMON_NAME)]


class UWSGI(Server):
    """uWSGI's python3 plugin: --master --processes N --threads M, --lazy-apps optional (the
    application loaded in each worker instead of the master before the fork)."""

    def __init__(self, processes=3, threads=2, lazy=False):
        super().__init__()
        argv = [UWSGI_BIN, "--plugin", "python3", "--http11-socket", "127.0.0.1:%d" % self.port,
                "--master", "--processes", str(processes), "--threads", str(threads),
                "--uid", RUN_USER, "--gid", RUN_USER, "--chdir", self.dir,
                "--wsgi-file", os.path.join(self.dir, "app.py"), "--die-on-term",
                "--logto", os.path.join(self.logs, "uwsgi.log")]
        if lazy:
            argv.append("--lazy-apps")
        self.proc = self.spawn(argv)
        self.master = self.proc.pid
        self.processes = processes
        try:
            self.wait_serving()
            deadline = time.monotonic() + 20
            while len(self.serving()) < processes and time.monotonic() < deadline:
                time.sleep(0.1)
        except BaseException:
            self.close()
            raise

    def serving(self):
        return descendants(self.master)


WRK_LINE = re.compile(r"(\d+) requests in ")


class Wrk:
    """wrk against the server for a bounded time, started now; result() waits for it."""

    def __init__(self, port, seconds, connections=8):
        self.proc = subprocess.Popen([WRK, "-t2", "-c%d" % connections, "-d%ds" % seconds,
                                      "--timeout", "5s", "http://127.0.0.1:%d/" % port],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.seconds = seconds

    def result(self):
        """(requests, failures, text): failures are wrk's non-2xx/3xx responses plus its
        socket errors (connect, read, write, timeout)."""
        try:
            out, _ = self.proc.communicate(timeout=self.seconds + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate(timeout=10)
            raise AssertionError("wrk did not finish: " + out)
        m = WRK_LINE.search(out)
        requests = int(m.group(1)) if m else 0
        failures = 0
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if m:
            failures += int(m.group(1))
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        if m:
            failures += sum(int(x) for x in m.groups())
        return requests, failures, out


# `vcattach --subprocesses -v` lists every member: "  pid N [(forked) ]STATE: NAME[ — …]".
MEMBER = re.compile(r"^  pid (\d+) (?:\(forked\) )?(traced|lost|not traced|skipped|unfinished): "
                    r"(.*)$")


def members(stdout):
    """{pid: (state, rest of the line)} from vcattach -v's member lines."""
    got = {}
    for line in stdout.splitlines():
        m = MEMBER.match(line)
        if m:
            got[int(m.group(1))] = (m.group(2), m.group(3))
    return got
