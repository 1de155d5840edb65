#!/usr/bin/env bash
# Installs every Debian package vcattach needs to build, test, fuzz and benchmark.
# Run by .ci/run and by `make` (through build/config.mk) when something is missing.
#   scripts/install-deps.sh          install what is missing (needs root or sudo)
#   scripts/install-deps.sh --check  exit 0 if everything is present, else list what is missing
# The list lives here and only here, so a fresh machine needs nothing but this script.
set -euo pipefail

PACKAGES=(
  build-essential pkg-config        # gcc, make
  clang libclang-rt-14-dev          # second compiler, ASan/UBSan/libFuzzer runtimes
  zlib1g-dev                        # .cvf zblobs (agent, codec)
  libjansson-dev                    # JSON side of `vcattach convert`
  libunwind-dev                     # libunwind-ptrace: safe-point check before injecting
  liblzma-dev                       # libunwind's static archive needs it (the static vcattach)
  gdb                               # --method gdb
  debootstrap                       # scripts/test-root: the sid (CPython 3.14/3.15), bullseye
                                    # (glibc 2.31, 3.9) and trixie (glibc 2.41, 3.13) roots
  musl-tools                        # musl-gcc: musl stand-ins for the refusal tests, the musl
                                    # root's CPython (scripts/test-root musl), musl agents
  python3 python3-pytest            # test runner (Debian's python3)
  python3-pip python3-setuptools    # the test that `pip install ./python` works (offline)
  python3.11 python3.11-dev         # Debian's static, non-PIE CPython: part of the matrix
  procps psmisc strace              # ps/pkill in tests; strace: a target traced by another tracer
  hyperfine                         # bench/
  gunicorn python3-flask wrk        # bench/filters, bench/tree, --subprocesses tests: a real
                                    # forking Flask service under gunicorn, local load
  python3-django                    # bench/service: Django's admin login page under gunicorn
  python3-uvicorn python3-fastapi   # tests/unit/test_requests.py: an ASGI service (uvicorn)
  python3-celery                    # tests/unit/test_requests.py: a Celery worker (filesystem broker)
  apache2 libapache2-mod-wsgi-py3   # tests/system/test_embedded.py: hosts that embed CPython in C:
  uwsgi uwsgi-plugin-python3        # Apache + mod_wsgi, uWSGI (under wrk)
  python3.11-dbg                    # tests/system/test_builds.py: a Py_DEBUG interpreter, and the
                                    # headers of its agent build (libvcagent-py311d.so)
  nodejs npm chromium               # real-viewer test (speedscope in headless Chromium)
  tmux                              # tests/system/test_top.py: `vcattach top` in a real terminal
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from outside Debian's archive (a newer Node on the machine): accept that.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  tmp=(); for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi

if [[ ${1:-} == --check ]]; then
  if ((${#missing[@]})); then echo "missing Debian packages: ${missing[*]}"; exit 1; fi
  exit 0
fi
((${#missing[@]})) || { echo "install-deps: all packages present"; exit 0; }

SUDO=
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
