"""A Debian root of scripts/test-root run as a container image: its own mount and pid
namespaces, its own /proc, and its root an overlay of the cached root (writes go to a layer
under the test's tmp_path, the cached root stays pristine), as docker and kubelet run an
image.  The service is targets/busy_service.py (or another script that takes the service's
directory, makes its "ready" file, ends on its "finish" file and writes its report.json), the
container's pid 1.  What an operator does
from outside is done the same ways: files copied in through /proc/PID/root (`docker cp`),
commands run inside with nsenter into the service's mount and pid namespaces (`docker exec`,
`kubectl exec`)."""
import json
import os
import shutil
import signal
import subprocess
import time

from .paths import BUILD, ROOT, root_workdir
from .targets import BUSY

# Run by `unshare --mount --pid --fork sh -c ENTER MERGED LOWER UPPER WORK ARGV...`: the
# overlay and /proc of the new pid namespace mounted, then ARGV chrooted into it (chroot's
# chdir("/") included), exec'd so that it is the namespace's pid 1.
ENTER = ('mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$0" && '
         'mount -t proc proc "$0/proc" && shift 3 && exec chroot "$0" "$@"')
SRV = "/srv"  # the service's directory inside the container


class ImageContainer:
    """python (a debian_root_python row) running busy_service.py as pid 1 of a container of
    its root.  .pid is its host pid."""

    def __init__(self, python, tmp_path, script=BUSY):
        self.python = python
        self.tmp_path = tmp_path
        layer = os.path.join(str(tmp_path), "layer")
        self.upper, work, merged = (os.path.join(layer, d) for d in ("upper", "work", "merged"))
        for d in (self.upper, work, merged):
            os.makedirs(d)
        os.makedirs(self.upper + SRV)
        name = os.path.basename(script)
        shutil.copy2(script, self.upper + SRV + "/" + name)  # a layer of the image
        self.log = open(os.path.join(str(tmp_path), "container.log"), "w")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "sh", "-c",
             ENTER, merged, python["root"], self.upper, work, python["path"],
             SRV + "/" + name, SRV],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = None
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, "the container ended: %s" % self.output()
            assert time.monotonic() < deadline, "the service is not ready: %s" % self.output()
            kids = self._children(self.proc.pid)
            if kids and os.path.exists(self.host_path(SRV + "/ready", kids[0])):
                self.pid = kids[0]
                return
            time.sleep(0.05)

    @staticmethod
    def _children(pid):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def host_path(self, inner, pid=None):
        """The host's way to the container's path inner (through /proc/PID/root)."""
        return "/proc/%d/root%s" % (pid or self.pid, inner)

    def inside(self, argv):
        """The command line that runs argv inside the container (its mount and pid namespaces,
        its root, its cwd), as `docker exec` runs it."""
        return ["nsenter", "--target", str(self.pid), "--mount", "--pid", "--root",
                "--wd"] + [str(a) for a in argv]

    def exec(self, argv, timeout=120):
        """argv run inside the container: a CompletedProcess with text output."""
        return subprocess.run(self.inside(argv), capture_output=True, text=True,
                              timeout=timeout)

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def start_late_thread(self):
        open(self.host_path(SRV + "/start_late"), "w").close()

    def expected_checksum(self, rounds):
        """The service's oracle, run by the same interpreter outside any container (after
        finish the container is gone): chrooted into the cached root, from its /tmp."""
        outside, inside = root_workdir(self.python, self.tmp_path, "vc-check")
        shutil.copy2(BUSY, os.path.join(outside, "busy_service.py"))
        r = subprocess.run(self.python["argv"] + [inside + "/busy_service.py", "--check",
                                                  str(rounds)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return int(r.stdout)

    def finish(self, timeout=60):
        """Ends the service the way it ends itself; returns its report (support.service's
        assert_unharmed reads it), read from the layer once the container is gone."""
        open(self.host_path(SRV + "/finish"), "w").close()
        self.proc.wait(timeout)
        with open(self.upper + SRV + "/report.json") as f:
            return json.load(f)

    def close(self):
        if self.proc.poll() is None:
            try:
                if self.pid:
                    os.kill(self.pid, signal.SIGKILL)  # the namespace's init: the rest follow
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(20)
        self.log.close()


def make_env():
    """Our environment without the variables of a make this test may run under."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def install_by_make_install(c):
    r = subprocess.run(["make", "-s", "BUILD=" + BUILD, "install",
                        "DESTDIR=" + c.host_path(""), "PREFIX=/opt/vcattach"], cwd=ROOT,
                       env=make_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return "/opt/vcattach"
