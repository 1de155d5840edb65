# agent/ — libvcagent-pyXY.so, one per CPython minor found by scripts/find-pythons.
# (Filled in by the agent work.)
