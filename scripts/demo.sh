#!/usr/bin/env bash
# demo.sh — `make demo`: the first minute with vcattach, end to end, on a real service.
#
#   1. starts examples/demo_service.py (HTTP server + load generator + asyncio task),
#   2. attaches: vcattach --pid PID -t 3s -o build/demo/demo.cvf,
#   3. shows the service still serving after vcattach detached,
#   4. converts the trace for the viewers (Chrome JSON, speedscope, a flame graph SVG) and
#      prints `vcattach summary` and `vcattach requests` (the slowest requests),
#   5. stops the service it started (also on Ctrl-C or an error).
#
# Environment: BUILD (default build), DEMO_PYTHON (default /usr/bin/python3, else the first
# interpreter scripts/find-pythons finds), DEMO_SECONDS (trace duration, default 3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
VCATTACH=$BUILD/vcattach
OUT=$BUILD/demo
SECONDS_TO_TRACE=${DEMO_SECONDS:-3}

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

[[ -x $VCATTACH ]] || die "$VCATTACH is missing: run 'make' first (make demo builds it)"

PY=${DEMO_PYTHON:-}
if [[ -z $PY ]]; then
  if [[ -x /usr/bin/python3 ]]; then PY=/usr/bin/python3
  else PY=$("$ROOT/scripts/find-pythons" | head -n1 | awk '{print $2}'); fi
fi
[[ -n $PY && -x $PY ]] || die "no CPython found (install python3, or set DEMO_PYTHON=/path/to/python3)"

mkdir -p "$OUT"
# shorter paths in what is printed when the files are under the current directory
SHOW=${OUT#"$PWD"/}
CLI=${VCATTACH#"$PWD"/}
rm -f "$OUT/port" "$OUT/demo.cvf" "$OUT/demo.json" "$OUT/demo.speedscope.json" "$OUT/demo.svg" \
  "$OUT/demo-wall.svg"

SERVICE_PID=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $SERVICE_PID ]] && kill -0 "$SERVICE_PID" 2>/dev/null; then
    kill -TERM "$SERVICE_PID" 2>/dev/null || true # the service exits on SIGTERM
    for _ in $(seq 150); do kill -0 "$SERVICE_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SERVICE_PID" 2>/dev/null; then
      echo "demo: the service (pid $SERVICE_PID) did not stop on SIGTERM; killing it" >&2
      kill -KILL "$SERVICE_PID" 2>/dev/null || true
    fi
    wait "$SERVICE_PID" 2>/dev/null || true
  fi
  exit "$rc"
}
trap cleanup EXIT
# Ctrl-C ends the demo (a vcattach that is tracing stops early and still writes its trace);
# the service is stopped either way.
trap 'echo; echo "demo: interrupted" >&2; exit 130' INT TERM

# GET url, print the HTTP status; exits non-zero if the service does not answer.
http_get() {
  "$PY" - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        r.read()
        print(r.status)
except OSError as e:
    sys.exit("demo: GET %s failed: %s" % (sys.argv[1], e))
EOF
}

say "Starting the demo service with $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"
# In a session of its own, so a Ctrl-C in this terminal reaches this script and vcattach but
# not the service, which must stay up while attached; cleanup stops it.
setsid "$PY" "$ROOT/examples/demo_service.py" --port-file "$OUT/port" >"$OUT/service.log" 2>&1 &
SERVICE_PID=$!
for _ in $(seq 100); do
  [[ -s $OUT/port ]] && break
  kill -0 "$SERVICE_PID" 2>/dev/null || die "the service exited early; see $OUT/service.log"
  sleep 0.1
done
[[ -s $OUT/port ]] || die "the service did not start serving within 10 s; see $OUT/service.log"
URL=http://127.0.0.1:$(cat "$OUT/port")
status=$(http_get "$URL/health") || die "the service does not answer on $URL; see $OUT/service.log"
echo "pid $SERVICE_PID serving on $URL (GET /health: HTTP $status)"
sleep 1 # let the load generator warm the service up

say "$CLI --pid $SERVICE_PID -t ${SECONDS_TO_TRACE}s -o $SHOW/demo.cvf"
"$VCATTACH" --pid "$SERVICE_PID" -t "${SECONDS_TO_TRACE}s" -o "$OUT/demo.cvf"

say "After detach: is the service unharmed?"
kill -0 "$SERVICE_PID" 2>/dev/null || die "the service is gone after the trace!"
status=$(http_get "$URL/search?q=widget") || die "the service stopped answering after the trace!"
echo "pid $SERVICE_PID alive; GET /search?q=widget: HTTP $status"

say "$CLI convert $SHOW/demo.cvf -o $SHOW/demo.json"
"$VCATTACH" convert "$OUT/demo.cvf" -o "$OUT/demo.json"
"$VCATTACH" convert "$OUT/demo.cvf" --format speedscope -o "$OUT/demo.speedscope.json" ||
  echo "(speedscope export unavailable in this build; demo.json opens in speedscope too)"
# the flame graph of the work (on-CPU time: waits shrink to what they ran), and of wall time;
# merged: a thread per request, so the requests' work adds up in one tree
"$VCATTACH" convert "$OUT/demo.cvf" --format svg --working --merged -o "$OUT/demo.svg"
"$VCATTACH" convert "$OUT/demo.cvf" --format svg --merged -o "$OUT/demo-wall.svg"
ls -l "$SHOW"/demo.cvf "$SHOW"/demo*.json "$SHOW"/demo*.svg | awk '{print "  " $5 " bytes  " $NF}'

say "$CLI summary $SHOW/demo.cvf --merged --top 12"
"$VCATTACH" summary "$SHOW/demo.cvf" --merged --top 12

# The demo's handler is http.server's: its do_GET/do_POST are the unit of work (--entry).
say "$CLI requests $SHOW/demo.cvf --entry 'DemoHandler.do_*' --top 3"
"$VCATTACH" requests "$SHOW/demo.cvf" --entry 'DemoHandler.do_*' --top 3

SPEEDSCOPE_FILE=$SHOW/demo.json
[[ -s $OUT/demo.speedscope.json ]] && SPEEDSCOPE_FILE=$SHOW/demo.speedscope.json
say "Open the trace"
cat <<EOF
  Perfetto:     https://ui.perfetto.dev -> "Open trace file" -> $SHOW/demo.json
  Chrome:       chrome://tracing -> "Load" -> $SHOW/demo.json
  speedscope:   https://www.speedscope.app -> "Browse" -> $SPEEDSCOPE_FILE
  VizTracer:    vizviewer $SHOW/demo.json
  flame graph:  any browser, offline -> $SHOW/demo.svg (the work: on-CPU time, so
                find_duplicate_skus is the wide frame under GET; Search, click to zoom),
                $SHOW/demo-wall.svg (wall time: the waits are the wide frames)
  per thread:   $CLI summary $SHOW/demo.cvf     (tables for the 12 busiest threads)
                $CLI summary $SHOW/demo.cvf --thread load-generator --sort total
The slow path: find_duplicate_skus (an O(n^2) loop under GET /report) tops the working
table: high self time, a few calls, a mean in milliseconds.  Waits (locks, poll, sockets)
are in the waiting table below it; --all ranks everything together.  Run as root, working
and waiting come from the scheduler's own context switches ("CPU exact" in the header).
Watch a live service the same way, refreshed every second (q detaches, the service runs on):
                $CLI top --pid PID
EOF
