"""A fork pool born during a trace (tests/system/test_container_images.py): prints "ready", waits
until the file argv[1] exists (made by the test once vcattach's session runs in this process),
then runs tree_target.py's `mp fork`: multiprocessing pools of the fork start method created
again and again, every worker a fork of this traced process.  tree_target.py must sit beside
it.

No pool exists at attach: its workers, idle in their queue's lock, would each have to be
injected, and the gdb method's few attempts at a thread in a lock wait fail for seconds."""
import os
import sys
import time

import tree_target

if __name__ == "__main__":
    print("ready", flush=True)
    while not os.path.exists(sys.argv[1]) and time.time() < tree_target.END:
        time.sleep(0.02)
    tree_target.run_mp("fork")
