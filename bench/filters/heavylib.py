"""bench/filters/heavylib.py — the "heavy library" of the filters benchmark: nearly all of the
workload's calls happen here (small Python functions and C calls), so `--exclude '*heavylib*'`
leaves only the caller's few calls traced."""


def _leaf(i):
    return i & 7


def _mid(i):
    return _leaf(i) + _leaf(i + 1) + len((i,))


def work(n):
    s = 0
    for i in range(n):
        s += _mid(i)
    return s
