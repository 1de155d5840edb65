#!/usr/bin/env bash
# demo.sh — `make demo`: the first minute with vcattach, end to end, on a real service.
#
#   1. starts examples/demo_service.py (HTTP server + load generator + asyncio task),
#   2. attaches: vcattach --pid PID -t 3s -o build/demo/demo.cvf,
#   3. shows the service still serving after vcattach detached,
#   4. converts the trace for the viewers and prints `vcattach summary`,
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
  else PY=$("$ROOT/scripts/find-pythons" | head -n1 | awk '{print $NF}'); fi
fi
[[ -n $PY && -x $PY ]] || die "no CPython found (install python3, or set DEMO_PYTHON=/path/to/python3)"

mkdir -p "$OUT"
rm -f "$OUT/port" "$OUT/demo.cvf" "$OUT/demo.json" "$OUT/demo.speedscope.json"

SERVICE_PID=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $SERVICE_PID ]] && kill -0 "$SERVICE_PID" 2>/dev/null; then
    kill -TERM "$SERVICE_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVICE_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SERVICE_PID" 2>/dev/null; then
      echo "demo: the service (pid $SERVICE_PID) did not stop on SIGTERM; killing it" >&2
      kill -KILL "$SERVICE_PID" 2>/dev/null || true
    fi
    wait "$SERVICE_PID" 2>/dev/null || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted" >&2; exit 130' INT TERM

# GET url, print the HTTP status; exits non-zero if the service does not answer.
http_get() {
  "$PY" - "$1" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    r.read()
    print(r.status)
EOF
}

say "Starting the demo service with $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"
"$PY" "$ROOT/examples/demo_service.py" --port-file "$OUT/port" >"$OUT/service.log" 2>&1 &
SERVICE_PID=$!
for _ in $(seq 100); do
  [[ -s $OUT/port ]] && break
  kill -0 "$SERVICE_PID" 2>/dev/null || die "the service exited early; see $OUT/service.log"
  sleep 0.1
done
[[ -s $OUT/port ]] || die "the service did not start serving within 10 s; see $OUT/service.log"
URL=http://127.0.0.1:$(cat "$OUT/port")
echo "pid $SERVICE_PID serving on $URL (GET /health: HTTP $(http_get "$URL/health"))"
sleep 1 # let the load generator warm the service up

say "vcattach --pid $SERVICE_PID -t ${SECONDS_TO_TRACE}s -o $OUT/demo.cvf"
"$VCATTACH" --pid "$SERVICE_PID" -t "${SECONDS_TO_TRACE}s" -o "$OUT/demo.cvf"

say "After detach: is the service unharmed?"
kill -0 "$SERVICE_PID" 2>/dev/null || die "the service is gone after the trace!"
echo "pid $SERVICE_PID alive; GET /search?q=widget: HTTP $(http_get "$URL/search?q=widget")"

say "vcattach convert $OUT/demo.cvf -o $OUT/demo.json"
"$VCATTACH" convert "$OUT/demo.cvf" -o "$OUT/demo.json"
"$VCATTACH" convert "$OUT/demo.cvf" --format speedscope -o "$OUT/demo.speedscope.json" ||
  echo "(speedscope export unavailable in this build; demo.json opens in speedscope too)"
ls -l "$OUT"/demo.cvf "$OUT"/demo*.json | awk '{print "  " $5 " bytes  " $NF}'

say "vcattach summary $OUT/demo.cvf --top 8"
"$VCATTACH" summary "$OUT/demo.cvf" --top 8

say "Open the trace"
cat <<EOF
  Perfetto:     https://ui.perfetto.dev -> "Open trace file" -> $OUT/demo.json
  Chrome:       chrome://tracing -> "Load" -> $OUT/demo.json
  speedscope:   https://www.speedscope.app -> "Browse" -> $OUT/demo.speedscope.json (or demo.json)
  VizTracer:    vizviewer $OUT/demo.json
  terminal:     $VCATTACH summary $OUT/demo.cvf --thread load-generator --sort total
The slow path to look for: find_duplicate_skus (an O(n^2) loop under GET /report).
EOF
