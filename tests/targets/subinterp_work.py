"""The code the sub-interpreters of tests/test_subinterp.py's targets run (subinterp_target.py,
subinterp_idle.py import it; the tests copy it beside them into the test root): work() counts
its own calls in COUNT, the oracle the trace's counts are checked against."""

WORK = """
COUNT = 0
def work(x):
    global COUNT
    COUNT += 1
    return (x * 7 + 3) % 1009
"""
