#!/usr/bin/env bash
# Set-up and work in one command (the README contract).
#   ./run.sh demo [ARGS]   create .venv, install fleetmind with every extra, run `fleetmind demo`
#   ./run.sh test [ARGS]   create .venv, install fleetmind with every extra + dev tools, run pytest
# The first install compiles llama-cpp-python from source: about 4-10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")"
what="${1:-}"
shift || true
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# llama.cpp builds for the building CPU by default (-march=native). On a CPU with AMX
# (seen: Xeon with avx512_fp16 and amx_int8, llama-cpp-python 0.3.36) that build crashes on
# the embedded model's Q4_1 weights; an AVX2 build runs on any x86-64 CPU of the last decade
# and is what the tests ran on. Set CMAKE_ARGS yourself to build otherwise.
if [ "$(uname -m)" = x86_64 ]; then
  export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"
fi
# The flags llama-cpp-python was last built with, kept in .venv. A .venv built with other
# flags (before run.sh set them, or by hand) gets it rebuilt once, from source: pip keeps an
# installed package that satisfies the pin, and keys its cache of built wheels by version, not
# by build flags, so neither an old build nor a cached wheel would ever be replaced.
LLAMA_BUILT=.venv/.llama-cpp-build
llama_build() {
  local flags="${CMAKE_ARGS:-default}"
  if [ "$(cat "$LLAMA_BUILT" 2>/dev/null || true)" = "$flags" ]; then
    return
  fi
  local spec
  spec="$(.venv/bin/python -c 'import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["llm"]
print(next(d for d in deps if d.startswith("llama-cpp-python")))')"
  echo "run.sh: building llama-cpp-python with CMAKE_ARGS='$flags' (a few minutes)" >&2
  .venv/bin/python -m pip install --quiet --force-reinstall --no-deps --no-cache-dir "$spec"
  echo "$flags" >"$LLAMA_BUILT"
}
install() {
  .venv/bin/python -m pip install --quiet --upgrade pip
  llama_build
  .venv/bin/python -m pip install --quiet -e ".[$1]"
}
case "$what" in
  demo)
    install all
    exec .venv/bin/fleetmind demo "$@"
    ;;
  test)
    install all,dev,ray
    # Browser tests drive Debian's Chromium through Playwright (never `playwright install`).
    if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
        || echo "run.sh: could not install chromium; browser tests will be skipped" >&2
    fi
    set +e
    .venv/bin/python -m pytest "$@"
    rc=$?
    set -e
    if [ "$rc" = 5 ]; then
      echo "run.sh: pytest collected no tests (exit 5): treating it as a failure" >&2
      exit 1
    fi
    exit "$rc"
    ;;
  *)
    echo "usage: ./run.sh demo|test [ARGS]" >&2
    exit 2
    ;;
esac
