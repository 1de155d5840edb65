"""A process tree for `vcattach --subprocesses` tests (tests/system/test_tree.py).

    tree_target.py fork        a parent, two long-lived fork children (one answers a pipe
                               ping-pong: the clock check) and a short-lived fork child
                               every 0.3 s that leaves through os._exit
    tree_target.py mp METHOD   multiprocessing pools (fork, forkserver or spawn) created again
                               and again: workers born during the trace
    tree_target.py pool-with METHOD  the same through `with ctx.Pool(2) as pool:`, whose exit
                               terminates the workers (SIGTERM): they end without a stop
    tree_target.py fork-deep   a parent that forks FORK_DEPTH calls deep every 0.1 s: the child
                               returns through the frames the fork was made in, then works
                               and leaves through os._exit
    tree_target.py fork-on-signal  a parent that calls without pause and, at each SIGUSR1,
                               forks three long-lived children (the test chooses the moment:
                               while its agent thread is in a send, say)
    tree_target.py subprocess [PYTHON]  subprocess.run of a Python child (PYTHON, default this
                               interpreter: another version makes a mixed tree) and of a shell
                               child, again and again

Prints "ready" once the tree is up; runs until killed (at most 120 s).
"""
import os
import subprocess
import sys
import time

END = time.time() + 120


def child_work(n):
    return sum(child_leaf(i) for i in range(n))


def child_leaf(i):
    return i * 2


def clock_ping(wfd):
    os.write(wfd, b"p")


def clock_wait(rfd):
    os.read(rfd, 1)


def clock_pong(rfd, wfd):
    if not os.read(rfd, 1):
        os._exit(0)  # the parent is gone
    os.write(wfd, b"q")


def long_child(rfd=None, wfd=None):
    while time.time() < END:
        if rfd is not None:
            clock_pong(rfd, wfd)
        else:
            child_work(200)
            time.sleep(0.02)
    os._exit(0)


def short_child():
    child_work(300)
    time.sleep(0.05)
    child_work(300)
    os._exit(0)


def run_fork():
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    if os.fork() == 0:
        # only the ends it uses: with its parent gone, its read sees EOF instead of blocking
        os.close(to_child_w)
        os.close(to_parent_r)
        long_child(to_child_r, to_parent_w)
    if os.fork() == 0:
        long_child()
    print("ready", flush=True)
    last_fork = 0.0
    while time.time() < END:
        clock_ping(to_child_w)
        clock_wait(to_parent_r)
        time.sleep(0.02)
        if time.time() - last_fork > 0.3:
            last_fork = time.time()
            pid = os.fork()
            if pid == 0:
                short_child()
            os.waitpid(pid, 0)


FORK_DEPTH = 6


def forked_in(depth):
    """os.fork() `depth` calls down: the child returns through every one of these frames."""
    if depth:
        return forked_in(depth - 1)
    return os.fork()


def after_fork_work():
    child_work(100)


def run_fork_deep():
    print("ready", flush=True)
    while time.time() < END:
        child_work(50)  # keys the parent pins first: the child's table gives their ids out again
        pid = forked_in(FORK_DEPTH)
        if pid == 0:
            after_fork_work()
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.1)


def run_fork_on_signal():
    import signal
    asked = []
    signal.signal(signal.SIGUSR1, lambda *_: asked.append(1))
    print("ready", flush=True)
    while time.time() < END:
        child_work(50)  # ~50 k calls/s: its agent thread always has a chunk to send
        time.sleep(0.001)
        if asked:
            asked.clear()
            for _ in range(3):
                if os.fork() == 0:
                    quiet_child()


def quiet_child():
    while time.time() < END:
        child_work(20)
        time.sleep(0.02)
    os._exit(0)


def mp_work(x):
    time.sleep(0.05)  # a pool that lives a little: a new interpreter takes ~50 ms to start
    return child_work(100 + x)


def run_mp(method):
    import multiprocessing as mp
    ctx = mp.get_context(method)
    print("ready", flush=True)
    while time.time() < END:
        pool = ctx.Pool(2)
        pool.map(mp_work, range(8))
        pool.close()
        pool.join()
        time.sleep(0.2)


def run_pool_with(method):
    import multiprocessing as mp
    ctx = mp.get_context(method)
    print("ready", flush=True)
    while time.time() < END:
        with ctx.Pool(2) as pool:
            pool.map(mp_work, range(8))
        time.sleep(0.2)


CHILD_PYTHON = sys.executable


def sub_parent():
    subprocess.run([CHILD_PYTHON, "-c",
                    "import time\n"
                    "def sub_child_fn():\n"
                    "    time.sleep(0.4)\n"
                    "    return sum(range(1000))\n"
                    "sub_child_fn()\n"], check=True)
    subprocess.run(["/bin/sh", "-c", "sleep 0.4"], check=True)


def run_subprocess():
    print("ready", flush=True)
    while time.time() < END:
        sub_parent()
        time.sleep(0.1)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "fork":
        run_fork()
    elif mode == "fork-deep":
        run_fork_deep()
    elif mode == "fork-on-signal":
        run_fork_on_signal()
    elif mode == "mp":
        run_mp(sys.argv[2])
    elif mode == "pool-with":
        run_pool_with(sys.argv[2])
    else:
        if len(sys.argv) > 2:
            CHILD_PYTHON = sys.argv[2]
        run_subprocess()
