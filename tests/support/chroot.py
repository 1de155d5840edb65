"""Targets in the sid test root (scripts/test-root): targets/busy_service.py under a chroot
interpreter (3.14, 3.15), plainly chrooted or container-like (CONTAINER: its own mount and pid
namespace as well).  Used by test_e2e_chroot and test_e2e_remote_exec through conftest's
chroot_service fixture."""
import json
import os
import shutil
import subprocess
import time

from .paths import root_workdir
from .proc import python_pid
from .targets import BUSY


class ChrootService:
    """busy_service.py under a chroot interpreter, in a fresh directory under ROOT/tmp."""

    def __init__(self, python, tmp_path, wrap=()):
        self.python = python
        self.outside, self.inside = root_workdir(python, tmp_path, "vc-svc")
        shutil.copy2(BUSY, os.path.join(self.outside, "busy_service.py"))
        self.script = os.path.join(self.inside, "busy_service.py")
        self.log = open(os.path.join(self.outside, "service.log"), "w")
        self.proc = subprocess.Popen(list(wrap) + python["argv"] + [self.script, self.inside],
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd="/")
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.outside, "ready")):
            assert self.proc.poll() is None, "service died: %s" % self.output()
            assert time.monotonic() < deadline, "service not ready: %s" % self.output()
            time.sleep(0.02)
        self.pid = python_pid(self.proc.pid) if wrap else self.proc.pid

    def output(self):
        self.log.flush()
        with open(os.path.join(self.outside, "service.log")) as f:
            return f.read()

    def start_late_thread(self):
        open(os.path.join(self.outside, "start_late"), "w").close()

    def finish(self, timeout=60):
        open(os.path.join(self.outside, "finish"), "w").close()
        self.proc.wait(timeout)
        self.log.close()
        with open(os.path.join(self.outside, "report.json")) as f:
            return json.load(f)

    def expected_checksum(self, rounds):
        out = subprocess.run(self.python["argv"] + [self.script, "--check", str(rounds)],
                             capture_output=True, text=True, timeout=120, check=True)
        return int(out.stdout)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.kill()
            self.proc.wait(10)
        if not self.log.closed:
            self.log.close()
