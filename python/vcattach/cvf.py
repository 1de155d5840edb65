"""Pure-Python reader of VizTracer's compressed trace format (.cvf, "vcompressor" v1).

    from vcattach import cvf          # or, standalone: import cvf
    data = cvf.load("trace.cvf")      # same dict as VizTracer's VCompressor().decompress()
    data = cvf.loads(raw_bytes)
    data["traceEvents"]               # list of Chrome trace events
    data.get("file_info")             # present iff the file has a FILE_INFO record

It is the project's second, independent implementation of the format (the C one is
common/cvf_reader.c), written from the byte-level specification; the tests check each against
the other and against VizTracer's own output.  Stdlib only (struct, zlib, json); runs on
CPython 3.8 to 3.13.

Malformed input raises ValueError("offset N: what is wrong"); unlike VizTracer's reader,
unknown record bytes, truncation, wrong lengths and trailing garbage are errors, never skipped.
Events come out exactly as VizTracer's decompressor returns them: FEE events are
{"ph": "X", "name", "cat": "FEE", "pid", "tid", "ts", "dur"[, "args"]} with ts/dur in µs as
floats (10 ns resolution), pid/tid unsigned (pid -1 reads as 18446744073709551615).
"""
import json
import struct
import zlib

__all__ = ["load", "loads", "VERSION"]

VERSION = 1

REC_FEE = 0x01
REC_PROCESS_NAME = 0x02
REC_THREAD_NAME = 0x03
REC_COUNTER_EVENTS = 0x04
REC_OTHER_EVENTS = 0x05
REC_FILE_INFO = 0x11

TAG_UNKNOWN = 0x21
TAG_SAME = 0x22
TAG_LONG = 0x23
TAG_FLOAT = 0x24
TAG_LONG_STRING = 0x25

# deflate cannot expand data by more than ~1032:1; a larger declared size is a lie
_ZLIB_MAX_RATIO = 1032
_ZLIB_SLACK = 64

_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


class _Reader(object):
    __slots__ = ("buf", "pos", "size")

    def __init__(self, buf):
        self.buf = buf
        self.pos = 0
        self.size = len(buf)

    def fail(self, msg, at=None, cause=None):
        """Raises ValueError("offset N: msg"), chained to the decoder error `cause` if any."""
        raise ValueError("offset %d: %s" % (self.pos if at is None else at, msg)) from cause

    def need(self, n, what):
        left = self.size - self.pos
        if left < n:
            self.fail("truncated: %s needs %d bytes, %d left" % (what, n, left))

    def u8(self, what):
        self.need(1, what)
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def u64(self, what):
        self.need(8, what)
        v = _U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def i64(self, what):
        self.need(8, what)
        v = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def f64(self, what):
        self.need(8, what)
        v = _F64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def cstr(self, what):
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            self.fail("truncated: %s has no terminating NUL before the end of the file" % what)
        raw = self.buf[self.pos:end]
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail("%s is not valid UTF-8" % what, cause=e)
        self.pos = end + 1
        return s

    def zblob(self, what):
        at = self.pos
        ulen = self.u64(what)
        clen = self.u64(what)
        left = self.size - self.pos
        if clen > left:
            self.fail("%s compressed length %d exceeds the %d bytes left" % (what, clen, left), at)
        if ulen > clen * _ZLIB_MAX_RATIO + _ZLIB_SLACK:
            self.fail("%s uncompressed length %d is impossible for %d compressed bytes"
                      % (what, ulen, clen), at)
        comp = self.buf[self.pos:self.pos + clen]
        self.pos += clen
        d = zlib.decompressobj()
        try:
            raw = d.decompress(comp, ulen + 1)
        except zlib.error as e:
            self.fail("%s is not a valid zlib stream (%s)" % (what, e), at, cause=e)
        if len(raw) > ulen:
            self.fail("%s inflates to more than its declared %d bytes" % (what, ulen), at)
        if not d.eof:
            self.fail("%s is not a valid zlib stream (truncated)" % what, at)
        if len(raw) != ulen:
            self.fail("%s inflates to %d bytes, but declares %d" % (what, len(raw), ulen), at)
        if d.unused_data:
            self.fail("%s has %d bytes of garbage after its zlib stream"
                      % (what, len(d.unused_data)), at)
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            self.fail("%s is not valid JSON: %s" % (what, e), at, cause=e)
        except RecursionError as e:
            self.fail("%s is not valid JSON: nested too deeply" % what, at, cause=e)

    def varint(self, what):
        if self.pos >= self.size:
            self.fail("truncated: %s needs 1 byte, 0 left" % what)
        flag = self.buf[self.pos] & 3
        pos = self.pos
        if flag == 0:
            self.pos = pos + 1
            return self.buf[pos] >> 2
        width = 1 << flag
        self.need(width, what)
        if flag == 1:
            v = _U16.unpack_from(self.buf, pos)[0]
        elif flag == 2:
            v = _U32.unpack_from(self.buf, pos)[0]
        else:
            v = _U64.unpack_from(self.buf, pos)[0]
        self.pos = pos + width
        return v >> 2


def _read_fee(r, events):
    pid = r.u64("FEE pid")
    tid = r.u64("FEE tid")
    name = r.cstr("FEE name")
    count_at = r.pos
    count = r.u64("FEE count")
    args_offset = r.u64("FEE args_offset")
    if count == 0:
        r.fail("FEE group '%s' has count 0" % name[:60], count_at)
    left = r.size - r.pos
    if left < 9 or count - 1 > (left - 9) // 2:
        r.fail("FEE count %d exceeds the %d bytes left" % (count, left), count_at)
    if args_offset and (args_offset > r.size or args_offset < r.pos + 9):
        r.fail("FEE args_offset %d is outside the group's data (%d..%d)"
               % (args_offset, r.pos + 9, r.size), count_at + 8)
    ts = r.i64("FEE first ts")
    dur = r.varint("FEE dur")
    tss = [ts]
    durs = [dur]
    varint = r.varint
    for _ in range(count - 1):
        ts += varint("FEE ts delta")
        tss.append(ts)
        durs.append(varint("FEE dur"))
    if ts > 0x7FFFFFFFFFFFFFFF:
        r.fail("FEE group '%s': timestamp overflows" % name[:60])
    args = None
    if args_offset:
        if args_offset != r.pos:
            r.fail("FEE args_offset %d does not point right after the ts/dur stream (which "
                   "ends at %d)" % (args_offset, r.pos), count_at + 8)
        args = r.zblob("FEE args")
        if not isinstance(args, list):
            r.fail("FEE args is not a JSON list", args_offset)
        if len(args) != count:
            r.fail("FEE group '%s': args list has %d items for %d events"
                   % (name[:60], len(args), count), args_offset)
    if args is None:
        for t, d in zip(tss, durs):
            events.append({"ph": "X", "name": name, "cat": "FEE", "pid": pid, "tid": tid,
                           "ts": t / 100.0, "dur": d / 100.0})
    else:
        for t, d, a in zip(tss, durs, args):
            events.append({"ph": "X", "name": name, "cat": "FEE", "pid": pid, "tid": tid,
                           "ts": t / 100.0, "dur": d / 100.0, "args": a})


def _is_json_int(s):
    """-?(0|[1-9][0-9]*): what the C reader accepts and JSON can carry as a number."""
    t = s[1:] if s[:1] == "-" else s
    if not t or any(not ("0" <= ch <= "9") for ch in t):
        return False
    return t == "0" or t[0] != "0"


def _read_counter(r, events):
    pid = r.u64("counter pid")
    tid = r.u64("counter tid")
    name = r.cstr("counter name")
    at = r.pos
    nkeys = r.u64("counter key count")
    if nkeys > r.size - r.pos:
        r.fail("counter key count %d exceeds the %d bytes left" % (nkeys, r.size - r.pos), at)
    keys = [r.cstr("counter key") for _ in range(nkeys)]
    at = r.pos
    nts = r.u64("counter event count")
    if nts > (r.size - r.pos) // (8 + nkeys):
        r.fail("counter event count %d exceeds the %d bytes left" % (nts, r.size - r.pos), at)
    cache = {}
    for _ in range(nts):
        ts = r.i64("counter ts")
        args = {}
        for key in keys:
            tag_at = r.pos
            tag = r.u8("counter value tag")
            if tag == TAG_UNKNOWN:
                cache[key] = None
            elif tag == TAG_SAME:
                v = cache.get(key)
                if v is not None:
                    args[key] = v
            elif tag == TAG_LONG:
                v = r.i64("counter LONG value")
                args[key] = cache[key] = v
            elif tag == TAG_FLOAT:
                v = r.f64("counter FLOAT value")
                args[key] = cache[key] = v
            elif tag == TAG_LONG_STRING:
                s = r.cstr("counter LONG_STRING value")
                if not _is_json_int(s):
                    r.fail("counter LONG_STRING value '%s' is not a decimal integer" % s[:40],
                           tag_at + 1)
                args[key] = cache[key] = int(s)
            else:
                r.fail("unknown counter value tag 0x%02x (expected 0x21..0x25)" % tag, tag_at)
        events.append({"name": name, "pid": pid, "tid": tid, "ph": "C", "args": args,
                       "ts": ts / 1000.0})


def loads(data):
    """Decodes .cvf bytes into {"traceEvents": [...][, "file_info": ...]}."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise TypeError("cvf.loads needs bytes, not %s" % type(data).__name__)
    r = _Reader(data)
    if r.size < 8:
        raise ValueError("offset 0: not a .cvf file: %d bytes, shorter than the 8-byte version "
                         "header" % r.size)
    version = r.u64("version")
    if version != VERSION:
        raise ValueError("offset 0: unsupported .cvf version %d (only version 1 exists)"
                         % version)
    events = []
    result = {"traceEvents": events}
    saw_other = False
    while r.pos < r.size:
        at = r.pos
        h = r.u8("record header")
        if h == REC_PROCESS_NAME or h == REC_THREAD_NAME:
            pid = r.u64("name record pid")
            tid = r.u64("name record tid")
            name = r.cstr("process name" if h == REC_PROCESS_NAME else "thread name")
            events.append({"ph": "M",
                           "name": "process_name" if h == REC_PROCESS_NAME else "thread_name",
                           "pid": pid, "tid": tid, "args": {"name": name}})
        elif h == REC_FEE:
            _read_fee(r, events)
        elif h == REC_COUNTER_EVENTS:
            _read_counter(r, events)
        elif h == REC_OTHER_EVENTS:
            saw_other = True
            other = r.zblob("other events")
            if not isinstance(other, list):
                r.fail("other events is not a JSON list", at + 1)
            events.extend(other)
        elif h == REC_FILE_INFO:
            result["file_info"] = r.zblob("file_info")
        else:
            r.fail("unknown record header byte 0x%02x (the file is corrupt or not a .cvf)" % h,
                   at)
    if not saw_other:
        # every writer emits exactly one, after names, FEE and counter groups
        r.fail("the file ends without the other-events record (0x05) every .cvf has: it is "
               "truncated")
    return result


def load(path):
    """Reads and decodes a .cvf file (see loads)."""
    with open(path, "rb") as f:
        return loads(f.read())


if __name__ == "__main__":  # python -m vcattach.cvf IN.cvf > OUT.json
    import sys
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python -m vcattach.cvf IN.cvf > OUT.json\n")
        sys.exit(2)
    try:
        json.dump(load(sys.argv[1]), sys.stdout)
    except (OSError, ValueError) as e:
        sys.stderr.write("%s: %s\n" % (sys.argv[1], e))
        sys.exit(1)
