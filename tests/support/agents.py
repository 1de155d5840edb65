"""A directory of placeholder agent builds, for preflight tests that must get past the agent
lookup without ever loading an agent."""
import os
import shutil
import tempfile

from .paths import PYTHONS, agent_name


class DummyAgents:
    """A directory holding a placeholder file named like every agent build, so that preflight
    checks *after* the agent lookup can be reached without loading anything: each test using
    it must fail in preflight (the placeholder is not an ELF; dlopen would refuse it)."""

    def __init__(self, file_mode=0o644, dir_mode=0o755):
        self.dir = tempfile.mkdtemp(prefix="vc-agents-", dir="/tmp")
        for p in PYTHONS:
            path = os.path.join(self.dir, agent_name(p["minor"]))
            with open(path, "w") as f:
                f.write("placeholder: preflight tests never load this\n")
            os.chmod(path, file_mode)
        os.chmod(self.dir, dir_mode)
        self.env = {"VCATTACH_AGENT_DIR": self.dir}

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)
