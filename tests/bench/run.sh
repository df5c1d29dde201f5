#!/bin/sh
# Build the server and gqa-bench in Release and run the benchmark.
# Usage: tests/bench/run.sh [gqa-bench flags...]
#   GQA_BENCH_BUILD_DIR   build directory (default: build-bench in the source tree)
#   GQA_BENCH_CMAKE_ARGS  extra arguments for the configure step
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${GQA_BENCH_BUILD_DIR:-$src/build-bench}
# GQA_BENCH_CMAKE_ARGS is split into words on purpose.
# shellcheck disable=SC2086
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release ${GQA_BENCH_CMAKE_ARGS:-}
cmake --build "$build" --target gqa-bench -j "$(nproc)"
exec "$build/tests/bench/gqa-bench" --binary "$build/gpu-quota-admission" "$@"
