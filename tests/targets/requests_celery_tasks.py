"""The Celery app of tests/unit/test_requests.py: a worker on kombu's filesystem broker (the folder
in $VC_CELERY_DIR, no server needed).  work(n, slow, log) runs slow_lookup (a 100 ms sleep)
when slow, and appends "start_ns end_ns slow" (CLOCK_MONOTONIC, the trace's clock) of its own
body to the file `log`: what the test counts the tasks the trace must hold from."""
import os
import time

from celery import Celery

FOLDER = os.environ["VC_CELERY_DIR"]

app = Celery("requests_celery_tasks", broker="filesystem://")
app.conf.broker_transport_options = {"data_folder_in": FOLDER, "data_folder_out": FOLDER}
app.conf.task_ignore_result = True
app.conf.worker_hijack_root_logger = False


def fast_lookup(n):
    return sum(i * i for i in range(100 + n % 50))


def slow_lookup(n):
    time.sleep(0.1)
    return fast_lookup(n)


@app.task
def work(n, slow, log):
    start = time.monotonic_ns()
    value = slow_lookup(n) if slow else fast_lookup(n)
    end = time.monotonic_ns()
    with open(log, "a") as f:
        f.write("%d %d %d\n" % (start, end, int(slow)))
    return value
