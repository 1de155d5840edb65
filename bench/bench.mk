# bench/ — benchmarks; each prints ratios measured side by side in one run.
bench: all $(BENCH_TARGETS)
