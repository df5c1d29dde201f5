#!/usr/bin/env bash
# Build gpu-quota-admission twice and run every test in both builds:
#   build/release  Release, unit tests also under valgrind, end-to-end tests, bench smoke test
#   build/asan     Debug with AddressSanitizer + UndefinedBehaviorSanitizer (leaks included)
# Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
jobs="$(nproc)"

run_build() {
  local dir=$1; shift
  echo "== configure $dir"
  cmake -S . -B "$dir" "$@" >/dev/null
  echo "== build $dir"
  cmake --build "$dir" -j"$jobs"
  echo "== test $dir"
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
}

run_build build/release -DCMAKE_BUILD_TYPE=Release -DGQA_VALGRIND_TESTS=ON
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_build build/asan -DCMAKE_BUILD_TYPE=Debug -DGQA_SANITIZE=ON
echo "== all tests passed in build/release and build/asan"
