"""What the targets of tests/system/test_subinterp.py share (subinterp_target.py, subinterp_idle.py,
subinterp_legacy_churn.py import it; the tests copy it beside them into the test root): the
code their sub-interpreters run (work() counts its own calls in COUNT, the oracle the trace's
counts are checked against), and, 3.12+, how to make one under the main GIL."""

WORK = """
COUNT = 0
def work(x):
    global COUNT
    COUNT += 1
    return (x * 7 + 3) % 1009
"""


def legacy_interpreters():
    """3.12+: the sub-interpreters module and a create() of one under the main GIL (the
    "legacy" config, what Py_NewInterpreter and so mod_wsgi make)."""
    try:
        import _interpreters as interpreters  # 3.13+
        return interpreters, lambda: interpreters.create("legacy")
    except ImportError:
        import _xxsubinterpreters as interpreters  # 3.12
        return interpreters, lambda: interpreters.create(isolated=False)
