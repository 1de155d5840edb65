"""Small C shared objects the tests compile and inject in place of the agent (an agent whose
connect call blocks, vforks, sleeps past a timeout...): built in the test's own temporary
directory, made traversable so that a target running as another user can map them."""
import os
import subprocess


def build_test_agent(tmp_path, name, source):
    """Compiles `source` (C) into tmp_path/lib<name>.so; its path."""
    src, so = tmp_path / ("%s.c" % name), tmp_path / ("lib%s.so" % name)
    src.write_text(source)
    cc = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)],
                        capture_output=True, text=True, timeout=60)
    assert cc.returncode == 0, cc.stderr
    os.chmod(str(tmp_path), 0o755)
    return str(so)
