"""A traced service that starts children on request, for the tests where a tree member is the
attacker (test_security_tree.py, test_security_boundary.py): the service's root process, the
tree's control socket as /proc/net/unix shows it, and a bounded wait."""
import os
import signal
import subprocess
import time

from .proc import as_user

SYSTEM_PY = "/usr/bin/python3"

# The tree's root: on SIGUSR1 starts one more child (the NUL-separated argv in the file
# `spec`, bytes: an argument may be in any encoding), then waits, calling a function.
TREE_ROOT = r"""
import os, signal, subprocess, sys, time
spec = sys.argv[1]
kids = []
def spawn(*_):
    with open(spec, "rb") as f:
        argv = f.read().split(b"\0")
    kids.append(subprocess.Popen(argv))
signal.signal(signal.SIGUSR1, spawn)
print("ready", flush=True)
def work():
    return sum(range(1000))
while True:
    work(); time.sleep(0.005)
    for k in kids:
        k.poll()
"""


# The start of a tree member in Perl (not Python: vcattach does not inject it) that speaks the
# agent's side of the tree's control socket itself, as any descendant can: $ARGV[0] is the
# socket's name; sendf(TYPE, PAYLOAD) and recvf() (a frame's type, its payload dropped).
PERL_MEMBER = r"""
use strict; use Socket;
my $name = shift @ARGV;
socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die "socket: $!";
connect($s, pack_sockaddr_un("\0$name")) or die "connect: $!";
sub sendf { my ($t, $p) = @_; syswrite($s, pack("VV", $t, length $p) . $p) }
sub readn { my $n = shift; my $b = '';
    while (length $b < $n) { my $r = sysread($s, $b, $n - length $b, length $b); return undef unless $r }
    return $b }
sub recvf { my $h = readn(8); return undef unless defined $h;
    my ($t, $n) = unpack("VV", $h); return defined readn($n) ? $t : undef }
"""


def wait_for(cond, timeout, what):
    """cond()'s first true value within timeout seconds, else an AssertionError naming what."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def ctl_names():
    """The abstract names of the trees' control sockets listening now."""
    with open("/proc/net/unix") as f:
        return {l.split()[-1][1:] for l in f if "@vcattach-ctl-" in l}


class TreeRoot:
    """The tree's root process (as user, or root), with a spawn-on-SIGUSR1 hook."""

    def __init__(self, argv0, spec, user=None):
        self.spec = spec
        self.p = subprocess.Popen([argv0, "-c", TREE_ROOT, spec], stdout=subprocess.PIPE,
                                  text=True, preexec_fn=as_user(user), start_new_session=True,
                                  cwd="/")
        assert self.p.stdout.readline().strip() == "ready"
        self.pid = self.p.pid

    def spawn(self, argv):
        """Starts argv (str or bytes items) as a child of the root."""
        with open(self.spec + ".new", "wb") as f:
            f.write(b"\0".join(a if isinstance(a, bytes) else a.encode() for a in argv))
        os.chmod(self.spec + ".new", 0o644)
        os.replace(self.spec + ".new", self.spec)
        os.kill(self.pid, signal.SIGUSR1)

    def close(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
