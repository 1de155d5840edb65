"""One source of truth for safe points: both injection methods judge stacks alike.

injector/safepoint_rules.def is compiled into safepoint.c (the ptrace method) and rendered into
the gdb method's script at build time (build/injector/gdb_inject.py, embedded in inject_gdb.c).
Here the same stacks go through both judges: safepoint_unsafe_frame() via
`build/inject-test judge-stacks`, and the rendered script's stack_verdict() imported with
python3 (the same function its judge() applies to the frames gdb unwinds).  The stacks: real
ones recorded from the injection tests' targets (tests/inject_fixture/recorded_stacks.txt), and
one set per rule of the table: the name itself, its variants, glibc's __GI_ alias, near misses,
plus the names the gdb list once missed.
"""
import importlib.util
import os
import re
import subprocess

import pytest

from support.paths import BUILD, ROOT

INJECT_TEST = os.path.join(BUILD, "inject-test")
GDB_SCRIPT = os.path.join(BUILD, "injector", "gdb_inject.py")
RULES = os.path.join(ROOT, "injector", "safepoint_rules.def")
RECORDED = os.path.join(ROOT, "tests", "inject_fixture", "recorded_stacks.txt")
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
EXE = "/usr/bin/python3.11"

# The names the gdb method's own list missed before the table was shared, with the reason
# safepoint.c gave for them.
DRIFTED = {
    "systrim": "in malloc",
    "arena_get": "in malloc",
    "arena_get2": "in malloc",
    "__malloc_arena_thread_freeres": "in malloc",
    "__printf": "in stdio",
    "__printf_fp": "in stdio",
    "pthread_atfork": "in atfork",
    "__call_tls_dtors": "in exit",
    "dladdr": "in dladdr",
    "dladdr1": "in dladdr",
    "dlinfo": "in dlinfo",
}

# Names no rule may match: frames every idle thread has, and near misses of the rules.
SAFE_NAMES = ["main", "_start", "start_thread", "clone3", "__libc_start_main",
              "__libc_start_call_main", "__libc_start_main_impl", "__GI___libc_read",
              "__GI___clock_nanosleep", "PyThread_acquire_lock_timed", "_PyEval_EvalFrameDefault",
              "freeaddrinfo", "mallinfo", "forkpty_helper", "dlsymbolize", "exitcode",
              "do_futex_wait", "__GI_", "", "ld_preload_thing"]


@pytest.fixture(scope="module")
def gdb_script():
    for f in (INJECT_TEST, GDB_SCRIPT):
        if not os.path.exists(f):
            pytest.skip("%s is not built: run `make`" % f)
    spec = importlib.util.spec_from_file_location("gdb_inject_rendered", GDB_SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # outside gdb: defines the judge, runs nothing
    return mod


def table():
    """The rules as written in safepoint_rules.def (comments removed)."""
    text = re.sub(r"/\*.*?\*/", "", open(RULES).read(), flags=re.S)
    text = re.sub(r"^#.*$", "", text, flags=re.M)  # the default definitions of the macros
    text = re.sub(r'"\s*\n\s*"', "", text)  # a reason written as adjacent literals
    rules = {
        "name": re.findall(r'SP_NAME\("([^"]+)", "([^"]+)"\)', text),
        "prefix": re.findall(r'SP_PREFIX\("([^"]+)", "([^"]+)"\)', text),
        "alias": re.findall(r'SP_ALIAS\("([^"]+)"\)', text),
        "module": [(p, so == "1", why) for p, so, why in
                   re.findall(r'SP_MODULE\("([^"]+)", ([01]), "([^"]+)"\)', text)],
        "idle": re.findall(r"SP_IDLE_SYSCALL\((\w+)\)", text),
        "bare": re.findall(r'SP_BARE_LIBC\("([^"]+)", "([^"]+)"\)', text),
        "bare_idle": re.findall(r"SP_BARE_IDLE_SYSCALL\((\w+)\)", text),
        "stripped": re.findall(r'SP_STRIPPED_LIBC\("([^"]+)", "([^"]+)"\)', text),
    }
    count = len(re.findall(r"\bSP_[A-Z_]+\(", text))
    assert count == sum(len(v) for v in rules.values()), "a rule this test cannot read"
    return rules


IDLE = ("#idle", "")  # a first "frame" that marks the stack's thread as blocked in an idle syscall


def parse_stacks(text):
    """[(expected verdict or None, [(name, path), ...]), ...] as inject-test reads them (a
    "#idle" line before a stack's frames: IDLE first)."""
    stacks, cur, expect = [], [], None
    for line in text.split("\n"):
        if line.startswith("## expect "):
            expect = line.split()[2].rstrip(":")
        if line == IDLE[0]:
            cur.append(IDLE)
        if line.startswith("#"):
            continue
        if not line:
            if cur:
                stacks.append((expect, cur))
            cur = []
            continue
        name, path = line.split("\t")
        cur.append((name, path))
    if cur:
        stacks.append((expect, cur))
    return stacks


def render(stacks):
    return "".join("".join(f[0] + "\n" if f == IDLE else "%s\t%s\n" % f for f in frames) + "\n"
                   for _, frames in stacks)


def c_verdicts(text):
    out = subprocess.run([INJECT_TEST, "judge-stacks"], input=text, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def py_verdicts(mod, stacks):
    res = []
    for _, frames in stacks:
        idle = bool(frames) and frames[0] == IDLE
        v = mod.stack_verdict(frames[1:] if idle else frames, idle)
        res.append("safe" if v is None else "unsafe %d %s" % v)
    return res


def synthetic_stacks(rules):
    """(expected, frames) per rule: every rule hit as the innermost frame and below Python
    frames, in its variants, through the alias, and near misses whose verdict is only compared."""
    S = []
    outer = [("_PyEval_EvalFrameDefault", EXE), ("start_thread", LIBC), ("clone3", LIBC)]
    for name, _ in rules["name"]:
        for variant in (name, name + "@GLIBC_2.2.5", name + "_r", name + "64", name + ".cold"):
            S.append(("unsafe", [(variant, LIBC)] + outer))
            S.append(("unsafe", [("__GI___libc_read", LIBC), ("caller", EXE), (variant, LIBC)]))
        for alias in rules["alias"]:
            S.append(("unsafe", [(alias + name, LIBC)] + outer))
        S.append((None, [(name + "x", LIBC)] + outer))  # a letter after: compared only
        S.append((None, [(name[:-1], LIBC)] + outer))
    for prefix, _ in rules["prefix"]:
        for variant in (prefix, prefix + "x", prefix + "_internal", prefix + "9"):
            S.append(("unsafe", [(variant, LIBC)] + outer))
        for alias in rules["alias"]:
            S.append(("unsafe", [(alias + prefix + "y", LIBC)] + outer))
        S.append((None, [(prefix[:-1], LIBC)] + outer))
        S.append((None, [("x" + prefix, LIBC)] + outer))
    for alias in rules["alias"]:
        S.append(("safe", [(alias, LIBC)] + outer))
    for prefix, needs_so, _ in rules["module"]:
        for d in ("/lib64/", "/usr/lib/x86_64-linux-gnu/", "/"):
            S.append(("unsafe", [("", d + prefix + "x86-64.so.2")] + outer))
            S.append(("unsafe", [("some_fn", EXE), ("_start", d + prefix + "2.31.so")]))
        S.append(("safe" if needs_so else "unsafe", [("", "/lib/" + prefix + "x")] + outer))
        S.append(("safe", [("", prefix + "x.so.2")] + outer))  # not a path: not judged
        S.append(("safe", [("", "/lib/x" + prefix + ".so")] + outer))
    for name in DRIFTED:
        S.append(("unsafe", [("caller", EXE), (name, LIBC)] + outer))
    for name in SAFE_NAMES:  # (an unnamed libc frame: entered through a named one, "read")
        S.append(("safe", [(name, LIBC), ("read", LIBC), (name, EXE), ("", "[vdso]")] + outer))
    for prefix, _ in rules["stripped"]:  # unnamed frames of a stripped glibc
        lib = "/usr/lib/x86_64-linux-gnu/" + prefix + ("31.so" if prefix.endswith(".") else ".6")
        # glibc 2.42's malloc tail-calls its slow path: the exported entry is not on the stack
        S.append(("unsafe", [("", lib), ("", lib), ("PyMem_Malloc", EXE)] + outer))
        S.append(("unsafe", [("", lib), ("", EXE), ("", EXE)] + outer))
        S.append(("unsafe", [("_PyObject_Malloc", EXE), ("", lib), ("", "[vdso]")] + outer))
        # entered through an exported function (judged by its name): the GIL's wait
        S.append(("safe", [("", lib), ("", lib), ("pthread_cond_timedwait", lib),
                           ("PyThread_acquire_lock_timed", EXE)] + outer))
        S.append(("unsafe", [("", lib), ("", lib), ("malloc", lib), ("PyMem_Malloc", EXE)]))
        # a thread blocked in an idle syscall: waits are tail-called too (sid's sem_clockwait,
        # under 3.14's _PySemaphore_Wait); the rule does not apply, the names still do
        S.append(("safe", [IDLE, ("", lib), ("", lib), ("_PySemaphore_Wait", EXE)] + outer))
        S.append(("unsafe", [IDLE, ("", lib), ("malloc", lib), ("PyMem_Malloc", EXE)]))
        # a run that ends the stack (a thread's start, or where the unwind stopped)
        S.append(("safe", [("thread_run", EXE), ("", lib), ("", lib)]))
        S.append(("safe", [("main", EXE), ("", lib), ("__libc_start_main", lib), ("_start", EXE)]))
        # other stripped libraries (no such rule) and musl's libc (no unwind tables) are not it
        S.append(("safe", [("", "/usr/lib/x86_64-linux-gnu/libm.so.6"), ("f", EXE)] + outer))
        S.append(("safe", [("", "libc.so.6"), ("f", EXE)] + outer))  # not a path: not judged
    S.append(("safe", []))  # (an empty stack is no stack: dropped by render/parse)
    return [s for s in S if s[1]]


def check_expectations(stacks, verdicts):
    for (expect, frames), v in zip(stacks, verdicts):
        if expect is not None:
            assert v.split()[0] == expect, (frames, v)


def test_rendered_script_holds_the_table(gdb_script):
    """The build rendered every rule of the table into the gdb script, in order."""
    rules = table()
    kinds = {"name": rules["name"], "prefix": rules["prefix"]}
    text = re.sub(r"/\*.*?\*/", "", open(RULES).read(), flags=re.S)
    text = re.sub(r"^#.*$", "", text, flags=re.M)  # the default definitions of the macros
    ordered = [(k.lower(), a, b) for k, a, b in
               re.findall(r'SP_(NAME|PREFIX)\("([^"]+)", "([^"]+)"\)', text)]
    assert list(gdb_script.SYMBOL_RULES) == ordered
    assert sum(len(v) for v in kinds.values()) == len(ordered)
    assert list(gdb_script.ALIASES) == rules["alias"]
    assert list(gdb_script.MODULE_RULES) == rules["module"]
    # the idle syscalls, numbered by the same <sys/syscall.h> as safepoint.c's SYS_ names
    script = open(GDB_SCRIPT).read()
    for name, block in (("IDLE_SYSCALLS", "idle"), ("BARE_IDLE_SYSCALLS", "bare_idle")):
        body = re.search(r"^%s = frozenset\(\(\n(.*?)^\)\)" % name, script, re.M | re.S).group(1)
        idle = re.findall(r"^    (\d+),  # (\w+)$", body, flags=re.M)
        assert [n for _, n in idle] == rules[block]
        assert getattr(gdb_script, name) == {int(nr) for nr, _ in idle}
        assert len(getattr(gdb_script, name)) == len(rules[block])
    # musl's libc: no unwind tables, judged by the syscall its thread is blocked in
    assert list(gdb_script.BARE_LIBCS) == rules["bare"] and rules["bare"][0][0] == "ld-musl"
    assert not set(rules["bare_idle"]) & {"futex", "read", "restart_syscall"}
    assert gdb_script.bare_libc("/lib/ld-musl-x86_64.so.1") == rules["bare"][0][1]
    assert gdb_script.bare_libc(LIBC) is None and gdb_script.bare_libc("ld-musl.so") is None


def test_recorded_stacks_judged_alike(gdb_script):
    text = open(RECORDED).read()
    stacks = parse_stacks(text)
    assert len(stacks) >= 15 and all(e in ("safe", "unsafe") for e, _ in stacks)
    c = c_verdicts(text)
    assert c == py_verdicts(gdb_script, stacks)
    check_expectations(stacks, c)


def test_every_rule_judged_alike(gdb_script, tmp_path):
    rules = table()
    stacks = synthetic_stacks(rules)
    text = render(stacks)
    assert parse_stacks(text) == [(None, f) for _, f in stacks]
    c = c_verdicts(text)
    py = py_verdicts(gdb_script, stacks)
    assert len(c) == len(stacks)
    diff = [(f, a, b) for (_, f), a, b in zip(stacks, c, py) if a != b]
    assert not diff, diff[:10]
    check_expectations(stacks, c)


def test_drifted_names_now_unsafe_in_both(gdb_script):
    stacks = [(None, [(name, LIBC)]) for name in DRIFTED]
    c = c_verdicts(render(stacks))
    assert c == py_verdicts(gdb_script, stacks)
    assert c == ["unsafe 0 %s" % why for why in DRIFTED.values()]
