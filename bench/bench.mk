# bench/ — benchmarks; each prints ratios measured side by side in one run.  Each adds its
# phony target to BENCH_TARGETS; the `bench:` rule is in the top Makefile.

# --- agent overhead (bench/overhead; owned by the agent work) ---
# Prints, per interpreter and workload: untraced time, traced / null-hook / cProfile ratios,
# buffer bytes per call and GIL hold at stop.  Not asserted.
.PHONY: bench-overhead
bench-overhead: all
	bench/overhead/run
BENCH_TARGETS += bench-overhead

# --- codec (bench/codec; owned by the codec work) ---
# Prints convert JSON<->.cvf events/s, MB/s, peak RSS and size ratios on the corpus and a
# synthetic 1M-event trace, next to Python's json.load and zlib -6; then the encoder/decoder
# core rates (goal: encoder >= 20 M events/s).  Not asserted.
$(BUILD)/bench/codec_core: bench/codec/bench_core.c $(BUILD)/libvccommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< $(BUILD)/libvccommon.a -lz -lm
.PHONY: bench-codec
bench-codec: all $(BUILD)/bench/codec_core
	bench/codec/run
BENCH_TARGETS += bench-codec

# --- attach cycle (bench/attach; issue #4) ---
# Prints, on busy (4 threads, ~1M calls/s) and idle 3.11 targets: the wall time of
# `vcattach -t 1s` next to the 1.3 s goal and VizTracer's, time to hook active, the target
# ticker's longest stall during attach and stop next to its untouched baseline, and worker
# speed after/before detach.  Not asserted.  BENCH_ATTACH_ARGS: e.g. --all, -n 3.
.PHONY: bench-attach
bench-attach: all
	bench/attach/run $(BENCH_ATTACH_ARGS)
BENCH_TARGETS += bench-attach
# --- end attach cycle ---

# --- filters (bench/filters; issue 11) ---
# Prints, per interpreter: untraced CPU time and traced / --exclude / --no-c-calls / legacy
# hook / null-floor ratios on three workloads, the per-call cost above the null floor next to
# a clock read measured in the same run; then Flask under gunicorn with wrk: requests/s
# untraced, tracing everything, --exclude '*-packages/*'.  Not asserted.  BENCH_FILTERS_ARGS:
# e.g. --only 3.11, --reps 5, --no-flask.
$(BUILD)/bench/clockcost: bench/filters/clockcost.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $<
.PHONY: bench-filters
bench-filters: all $(BUILD)/bench/clockcost
	bench/filters/run $(BENCH_FILTERS_ARGS)
BENCH_TARGETS += bench-filters

# --- process trees (bench/tree; issue 13) ---
# Prints the attach wall time of `--subprocesses` for trees of 1, 5 and 20 processes; a
# gunicorn service's requests/s before, during and after a whole-tree trace (wrk, local),
# merged trace bytes per process-second, and each process's RSS growth while traced.
# Not asserted.  BENCH_TREE_ARGS: e.g. -R 3, --buffer-mb 64.
.PHONY: bench-tree
bench-tree: all
	bench/tree/run $(BENCH_TREE_ARGS)
BENCH_TARGETS += bench-tree

# --- vcattach next to VizTracer (bench/viztracer; issue 21) ---
# Prints, per interpreter, measured in one process (interleaved rounds, median CPU time):
# untraced time, vcattach and VizTracer traced/untraced and the relative cost
# (vcattach-1)/(viztracer-1) (goal <= 0.7) on a C-call heavy mix, 1M Python calls and fib(25).
# VizTracer is not a dependency: without a source checkout it prints one line and skips.
# Not asserted.  BENCH_VIZ_ARGS: e.g. --viztracer-src DIR, --rounds 9, --only 3.12, -v.
.PHONY: bench-viztracer
bench-viztracer: all
	bench/viztracer/run $(BENCH_VIZ_ARGS)
BENCH_TARGETS += bench-viztracer

# --- long traces, bounded target (bench/stream; issue 17) ---
# Prints, per interpreter and duration (10/30/60 s), the streamed trace next to the whole
# trace kept in the target (`start`, 256 MiB): events, dropped, the target's RSS growth,
# vcattach's CPU and RSS, spool and .cvf bytes per event, stop -> file; with --gunicorn a
# whole gunicorn service under wrk.  Not asserted.
$(BUILD)/bench/ingest: bench/stream/ingest.c $(BUILD)/libvccommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Icommon -o $@ $< $(BUILD)/libvccommon.a -lz -lm
.PHONY: bench-stream
bench-stream: all $(BUILD)/bench/ingest
	bench/stream/run $(BENCH_STREAM_ARGS)
BENCH_TARGETS += bench-stream

# --- CPU clock sampling (bench/cpu; issue 20) ---
# Prints one read of another thread's CPU clock (clockid from the tid, checked against
# pthread_getcpuclockid; /proc schedstat), the period that keeps 200 threads under 0.5%/1% of
# a core, and on a traced 200-thread target: the agent threads' CPU and the sampling's own
# (the trace's "vcattach cpu" instant).  Not asserted.  BENCH_CPU_ARGS: --threads N, --duration D.
.PHONY: bench-cpu
bench-cpu: all
	bench/cpu/run $(BENCH_CPU_ARGS)
BENCH_TARGETS += bench-cpu

# bench/asyncio/run: what marking asyncio task steps costs (agent/tasks.c): an asyncio
# workload's loop-thread CPU time untraced, traced with --no-tasks, and traced; ns per task
# step.  Not asserted.  BENCH_ASYNCIO_ARGS: --python V..., --reps N, --steps N.
.PHONY: bench-asyncio
bench-asyncio: all
	bench/asyncio/run $(BENCH_ASYNCIO_ARGS)
BENCH_TARGETS += bench-asyncio

# --- own-GIL sub-interpreters (bench/subinterp; issue 19) ---
# Prints, per host interpreter 3.12+: 1M calls on the main thread traced alone, beside an idle
# own-GIL sub-interpreter (the session parallel, agent/hooklock.h) and beside a busy one (the
# lock contended), as ratios to untraced, and the busy one's speed traced/untraced.  Not
# asserted.  BENCH_SUBINTERP_ARGS: e.g. --reps 9, --only 3.13.
.PHONY: bench-subinterp
bench-subinterp: all
	bench/subinterp/run $(BENCH_SUBINTERP_ARGS)
BENCH_TARGETS += bench-subinterp

# --- scheduler events (bench/sched; issue 36) ---
# Prints a busy 3.12 target's calls/s while `vcattach -t 3s` traces it with the scheduler's
# switches recorded (the default) and with --no-sched, alternately, 5 times each; the medians
# and their ratio.  Not asserted.
.PHONY: bench-sched
bench-sched: all
	bench/sched/run
BENCH_TARGETS += bench-sched

# --- what tracing costs a service (bench/service; issue 33) ---
# Prints, per interpreter (Debian's 3.11, 3.12, 3.13, the sid root's 3.14) and app (Django's
# admin login page, a Flask JSON endpoint) under gunicorn -w 2 with wrk: requests/s and p50/p99
# untraced, under the null hook, traced (whole service), --no-c-calls, --exclude, --nice 0, and
# with cProfile in the workers; ratios to untraced and to the null hook; vcattach's CPU; calls
# per request.  Not asserted.  BENCH_SERVICE_ARGS: e.g. --reps 5, --only 3.12, --app flask.
.PHONY: bench-service
bench-service: all
	bench/service/run $(BENCH_SERVICE_ARGS)
BENCH_TARGETS += bench-service
