"""Target programs of the attach tests (idle.py, busy_service.py, seccomp_exec.py); the code
that starts and checks them is support/targets.py."""
