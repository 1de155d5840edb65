"""Target programs and process helpers for the attach tests (test_preflight, test_e2e)."""
