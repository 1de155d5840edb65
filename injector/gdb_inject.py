# gdb_inject.py — the gdb method's script (inject_gdb.c), run by gdb's Python after it attached.
#
# Picks a thread at a safe point by unwinding every thread with the rules of
# injector/safepoint_rules.def (the table safepoint.c compiles in; the build renders it at the
# "@SAFEPOINT_RULES@" line below), preferring one blocked in an idle syscall; then writes the
# agent and control paths into a page mmap'd in the target and calls
# (void*)dlopen(page, RTLD_NOW), (char*)dlerror() on NULL, `sharedlibrary <agent>`,
# (int)vc_agent_connect(control) (through dlsym when gdb cannot read the loaded copy's
# symbols), munmap(page).  No thread at a safe point: nothing is called.
#
# It reports on stdout with VC_* marker lines that inject_gdb.c parses:
#   VC_THREAD tid safe|unsafe why   VC_UNSAFE   VC_CHOSEN tid why   VC_WRONGLIB text   VC_PREPFAIL text
#   VC_REGSFAIL text   VC_LAYOUT text
#   VC_CALLING   VC_CALLFAIL text   VC_DLOPEN handle   VC_DLERROR text   VC_CONNECT rc
#
# inject_gdb.c prepends AGENT and CONTROL (the paths, str) and OLD_GDB_MISPLACES (str: the
# XSAVE component a gdb before 14 would look for in the wrong place on this CPU, or empty).  Outside gdb (python3, the tests)
# the module imports without running anything: the judging functions are plain Python.
import os
import re

try:
    import gdb
except ImportError:  # imported by the tests with python3: only the judge is used
    gdb = None

# @SAFEPOINT_RULES@

MAX_FRAMES = 512


def _match_symbol(name):
    """The first symbol rule matching name (a 'name' rule matches the name and its variants:
    followed by '_', '@', '.' or a digit, never a letter)."""
    for kind, text, why in SYMBOL_RULES:
        if not name.startswith(text):
            continue
        rest = name[len(text):]
        if kind == 'name' and rest and rest[0] not in '_@.0123456789':
            continue
        return why
    return None


def symbol_verdict(name):
    """Why a frame in function name makes its thread unsafe, or None."""
    if not name:
        return None
    why = _match_symbol(name)
    for alias in ALIASES:
        if why is None and name.startswith(alias) and len(name) > len(alias):
            why = _match_symbol(name[len(alias):])
    return why


def module_verdict(path):
    base = os.path.basename(path)
    for prefix, needs_so, why in MODULE_RULES:
        if base.startswith(prefix) and (not needs_so or '.so' in base):
            return why
    return None


def _library_rule(path, rules):
    """The reason of the first (file name prefix, reason) of rules the library at path (an
    absolute path, else none) matches, or None."""
    if not path.startswith('/'):
        return None
    base = os.path.basename(path)
    for prefix, why in rules:
        if base.startswith(prefix):
            return why
    return None


def bare_libc(path):
    """The reason of the C library without unwind tables at path (musl's), or None:
    safepoint_bare_libc() in C."""
    return _library_rule(path, BARE_LIBCS)


def frame_verdict(name, path):
    """Why a frame in function name (may be '') of the module at path (absolute, else the
    module is not judged) makes its thread unsafe, or None.  safepoint_unsafe_frame() in C."""
    why = module_verdict(path) if path.startswith('/') else None
    return why or symbol_verdict(name)


def stripped_libc(path):
    """The reason of the stripped C library at path (SP_STRIPPED_LIBC), or None."""
    return _library_rule(path, STRIPPED_LIBCS)


class Walk:
    """A stack followed frame by frame, innermost first: a run of unnamed frames of a stripped
    glibc whose caller is in another module is unsafe.  safepoint_walk_frame() in C."""

    def __init__(self, idle=False):
        self.idle = idle  # blocked in an idle syscall: the rule does not apply
        self.module = None  # the library of the open run

    def frame(self, name, path):
        why = frame_verdict(name, path)
        if why:
            return why
        if self.module is not None:
            if path[:511] != self.module[:511]:
                return stripped_libc(self.module)
            if name:
                self.module = None
            return None
        if not name and not self.idle and stripped_libc(path):
            self.module = path
        return None


def stack_verdict(frames, idle=False):
    """frames: (name, module path) pairs, innermost first (idle: of a thread blocked in an idle
    syscall).  (index, why) of the first unsafe frame, or None when the stack is clean."""
    walk = Walk(idle)
    for i, (name, path) in enumerate(frames[:MAX_FRAMES]):
        why = walk.frame(name, path)
        if why:
            return i, why
    return None


def bre(s):
    return re.sub(r'([.*\[\]^$\\])', r'\\\1', s)


def syscall_nr(th):
    th.switch()
    try:
        nr = int(gdb.parse_and_eval('$orig_rax'))
    except (gdb.error, ValueError):
        return -1
    return nr - (1 << 64) if nr >= 1 << 63 else nr


def older_frames(f):
    """(name, module path, pc) of f and the frames it was called from, innermost first."""
    n = 0
    while f is not None and n < MAX_FRAMES:
        pc = f.pc()
        if pc == 0:
            break
        # a return address points after the call: look up the call itself
        path = gdb.solib_name(pc if n == 0 else pc - 1) or ''
        if path.startswith('target:'):  # gdb's name for a file read through the target
            path = path[len('target:'):]
        yield f.name() or '', path, pc
        try:
            f = f.older()
        except gdb.error:
            break  # the unwind ends here: judge what was seen
        n += 1


def judge(th, nr):
    """(-1, why) when the thread is at no safe point, else (0, where it is)."""
    th.switch()
    try:
        f = gdb.newest_frame()
    except gdb.error as e:
        return -1, 'cannot unwind: %s' % e
    top = '?'
    walk = Walk(nr in IDLE_SYSCALLS)
    for n, (name, path, pc) in enumerate(older_frames(f)):
        if n == 0:
            top = '%s in %s' % (name or hex(pc), os.path.basename(path) or 'the executable')
        bare = bare_libc(path)
        if bare:  # no unwind tables (musl): safepoint.c's judge_thread() does the same
            if n == 0 and nr not in BARE_IDLE_SYSCALLS:
                return -1, '%s (%s)' % (bare, 'syscall %d' % nr if nr >= 0 else 'running')
            break
        why = walk.frame(name, path)
        if why:
            return -1, '%s (%s)' % (why, name or hex(pc))
    if nr >= 0:
        return 0, 'blocked in syscall %d (%s)' % (nr, top)
    return 0, 'running (%s)' % top


def choose_thread():
    """Registers first (cheap), then unwind in order of preference, stopping at the first clean
    stack: the best choice, found with as little unwinding as possible."""
    order = []
    for th in gdb.selected_inferior().threads():
        nr = syscall_nr(th)
        order.append((-(3 if nr in IDLE_SYSCALLS else (2 if nr >= 0 else 1)), th.num, th, nr))
    order.sort(key=lambda c: (c[0], c[1]))
    for _, _, th, nr in order:
        try:
            s, why = judge(th, nr)
        except Exception as e:
            s, why = -1, 'cannot inspect: %s' % e
        print('VC_THREAD %d %s %s' % (th.ptid[1], 'unsafe' if s < 0 else 'safe', why))
        if s >= 0:
            return th, why
    return None

# Every function we call must come from the file the target maps at its address: gdb reading
# another libc than the target's (a chroot, a container) computes addresses that land in the
# target's libc at the wrong offsets.  Compared by inode (maps vs stat of the file gdb read;
# "target:" names are the target's paths).
def wrong_library():
    pid = gdb.selected_inferior().pid
    maps = []
    with open('/proc/{}/maps'.format(pid)) as f:
        for line in f:
            p = line.split(None, 5)
            if len(p) >= 5:
                lo, hi = (int(x, 16) for x in p[0].split('-'))
                maps.append((lo, hi, int(p[4])))
    exe = gdb.current_progspace().filename or ''
    try:
        if os.stat(exe).st_ino != os.stat('/proc/{}/exe'.format(pid)).st_ino:
            return "gdb read the executable from {}, not the target's".format(exe)
    except OSError as e:
        return 'cannot check the executable ({}): {}'.format(exe, e)
    for name in ('mmap', 'munmap', 'dlopen', 'dlerror'):
        try:
            addr = int(gdb.parse_and_eval('(unsigned long)&' + name))
        except gdb.error as e:
            return '{} not found: {}'.format(name, str(e).replace('\n', ' '))
        path = gdb.solib_name(addr) or gdb.current_progspace().filename or ''
        if path.startswith('target:'):
            path = '/proc/{}/root{}'.format(pid, path[7:])
        ino = [m[2] for m in maps if m[0] <= addr < m[1]]
        try:
            mine = os.stat(path).st_ino
        except OSError as e:
            return 'cannot check {} ({}): {}'.format(name, path, e)
        if not ino or ino[0] != mine:
            return 'gdb read {} from {}, which is not the file the target maps at {:#x}'.format(
                name, path, addr)
    return None


# gdb before 14 reads and writes the XSAVE area with a size of its own (2696 bytes), which a
# kernel whose area is larger refuses to take back (EFAULT: AMX's tile configuration on Xeon
# Sapphire Rapids and later makes it 2816).  A call then fails half-way, after gdb has set the
# thread's pc, stack and orig_rax, and gdb cannot put them back: a sleeping thread returned
# ERESTART_RESTARTBLOCK (516) to its program.  So before any call one register of the XSAVE
# area is written: xmm0's lowest bit flipped, then flipped back.  A refused write changes
# nothing (the kernel checks the size first); gdb skips a write of an unchanged value, hence
# the flip.  None, or gdb's message.
def registers_unwritable():
    try:
        v = int(gdb.parse_and_eval('$xmm0.v2_int64[0]'))
        gdb.execute('set var $xmm0.v2_int64[0] = %d' % (v ^ 1), to_string=True)
    except gdb.error as e:
        return str(e).replace('\n', ' ')
    try:
        gdb.execute('set var $xmm0.v2_int64[0] = %d' % v, to_string=True)
    except gdb.error as e:
        return 'xmm0 changed and not restored: ' + str(e).replace('\n', ' ')
    return None


# gdb before 14 reads and writes the XSAVE area at Intel's offsets.  Where this CPU keeps a
# component elsewhere (AMD with AVX-512: opmask at byte 832, not 1088), gdb neither saves nor
# puts back the real registers around its calls: on an AMD EPYC, gdb 13.1's dlopen call left
# k0-k2 as glibc's string functions had set them.  inject_gdb.c names that component
# (xsave_layout.c); then a gdb older than 14 calls nothing.  None, or what is misplaced.
def layout_unknown():
    if not OLD_GDB_MISPLACES:
        return None
    try:
        major = int(gdb.VERSION.split('.')[0])
    except ValueError:
        major = 0
    return None if major >= 14 else '%s (%s)' % (gdb.VERSION, OLD_GDB_MISPLACES)


def main():
    chosen = choose_thread()
    if chosen is None:
        print('VC_UNSAFE')
        return
    th = chosen[0]
    th.switch()
    wrong = wrong_library()
    if wrong:
        print('VC_WRONGLIB ' + wrong)
        return
    unwritable = registers_unwritable()
    if unwritable:
        print('VC_REGSFAIL ' + unwritable)
        return
    unknown = layout_unknown()
    if unknown:
        print('VC_LAYOUT ' + unknown)
        return
    print('VC_CHOSEN %d %s' % (th.ptid[1], chosen[1]))
    # The strings go into a page we mmap in the target and write ourselves: string literals in
    # a gdb call would make gdb call malloc in the target (and leak there).
    data = AGENT.encode('utf-8', 'surrogateescape') + b'\0'
    ctl = CONTROL.encode('utf-8', 'surrogateescape') + b'\0'
    sym = b'vc_agent_connect\0'
    size = 4096 * ((len(data) + len(ctl) + len(sym)) // 4096 + 1)
    try:
        buf = int(gdb.parse_and_eval('(unsigned long)(void*)mmap(0, %d, 3, 0x22, -1, 0)' % size))
    except gdb.error as e:
        print('VC_PREPFAIL mmap: %s' % str(e).replace('\n', ' '))
        return
    if buf == 0 or buf >= (1 << 64) - 4096:
        print('VC_PREPFAIL mmap failed in the target')
        return
    try:
        inf = gdb.selected_inferior()
        inf.write_memory(buf, data)
        inf.write_memory(buf + len(data), ctl)
        inf.write_memory(buf + len(data) + len(ctl), sym)
        calls(buf, buf + len(data), buf + len(data) + len(ctl))
    finally:
        try:
            gdb.parse_and_eval('(int)munmap(%d, %d)' % (buf, size))
        except gdb.error:
            pass


def calls(agent, control, sym):
    print('VC_CALLING', flush=True)
    try:
        h = int(gdb.parse_and_eval('(unsigned long)(void*)dlopen((char*)%d, 2)' % agent))
    except gdb.error as e:
        print('VC_CALLFAIL dlopen: %s' % str(e).replace('\n', ' '))
        return
    print('VC_DLOPEN %#x' % h)
    if h == 0:
        try:
            e = gdb.parse_and_eval('(char*)dlerror()')
            print('VC_DLERROR %s' % (e.string() if int(e) else ''))
        except gdb.error as e:
            print('VC_DLERROR (dlerror failed: %s)' % e)
        return
    gdb.execute('sharedlibrary ' + bre(os.path.basename(AGENT)), to_string=True)
    try:
        rc = int(gdb.parse_and_eval('(int)vc_agent_connect((char*)%d)' % control))
    except gdb.error as e:
        if 'No symbol' not in str(e):  # the call itself failed or was interrupted: never again
            print('VC_CALLFAIL vc_agent_connect: %s' % str(e).replace('\n', ' '))
            return
        # A copy an earlier attach loaded and whose file is gone since (dlopen returned it by
        # name): gdb has no file to read its symbols from.  The loader has them: dlsym.
        try:
            fn = int(gdb.parse_and_eval('(unsigned long)dlsym((void*)%d, (char*)%d)' % (h, sym)))
            if fn == 0:
                raise gdb.error('dlsym found no vc_agent_connect')
            rc = int(gdb.parse_and_eval('((int(*)(char*))%d)((char*)%d)' % (fn, control)))
        except gdb.error as e2:
            print('VC_CALLFAIL vc_agent_connect: %s; %s' % (str(e).replace('\n', ' '),
                                                           str(e2).replace('\n', ' ')))
            return
    print('VC_CONNECT %d' % rc)


if gdb is not None and __name__ == '__main__':
    main()
