"""Python source run inside in-process agent targets (test_agent_control, test_agent_chroot):
a prelude that loads the in-tree vcattach package and the helpers those scripts use."""
import textwrap

PRELUDE = textwrap.dedent(r'''
    import ctypes, json, os, sys, threading, time
    import vcattach
    from vcattach import _agent
    def leaf():
        return 1
    def hooks_state():
        st = {"getprofile": repr(sys.getprofile()),
              "threading_profile_hook": repr(threading._profile_hook)}
        if hasattr(sys, "monitoring"):
            st["tools"] = [sys.monitoring.get_tool(i) for i in range(6)]
        return st
    def wait_inactive(lib, limit=30):
        t0 = time.time()
        while lib.vc_agent_active() and time.time() - t0 < limit:
            leaf()
            time.sleep(0.001)
''')
