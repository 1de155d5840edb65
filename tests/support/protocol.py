"""The controller's side of the agent control protocol (common/protocol.h): message types,
framing (u32 type, u32 length, payload; little-endian), key=value payloads, and a listening
socket made the way vcattach makes it."""
import os
import socket
import struct
import tempfile

# VC_MSG_* of common/protocol.h
HELLO, CONFIG, STARTED, STOP, STATUS, DATA, END, ERROR = range(1, 9)


def control_listener():
    """The controller's side of a session: a listening socket in a fresh 0700 directory, as
    vcattach makes it.  Returns (directory, socket path, listening socket)."""
    d = tempfile.mkdtemp(prefix="vc-ctl-")
    os.chmod(d, 0o700)
    path = os.path.join(d, "control.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(30)
    return d, path, srv


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def recv(s):
    """One message: (type, payload bytes)."""
    t, n = struct.unpack("<II", recv_exact(s, 8))
    return t, recv_exact(s, n)


def send(s, t, payload=b""):
    s.sendall(struct.pack("<II", t, len(payload)) + payload)


def kv(payload):
    """key=value lines of a payload as a dict."""
    return dict(l.split("=", 1) for l in payload.decode().splitlines() if "=" in l)
