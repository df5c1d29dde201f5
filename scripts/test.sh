#!/usr/bin/env bash
# Check the layering and the formatting, then build gpu-quota-admission twice
# and run every test in both builds:
#   build/release  Release, unit tests also under valgrind, end-to-end tests, bench smoke test,
#                  and the real control-plane tier when KUBEBUILDER_ASSETS names its binaries
#                  (tests/realcp/README.md; skipped otherwise, and said so)
#   build/asan     Debug with AddressSanitizer + UndefinedBehaviorSanitizer (leaks included)
# Each tree is configured with tests on whatever its cache says (run-demo.sh
# configures build/release without them), and a tree without tests fails.
# Exits non-zero when any check or test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
jobs="$(nproc)"

echo "== check layers and format"
bash scripts/check-layers.sh
bash scripts/check-format.sh

run_build() {
  local dir=$1; shift
  echo "== configure $dir"
  cmake -S . -B "$dir" -DGQA_BUILD_TESTS=ON "$@" >/dev/null
  echo "== build $dir"
  cmake --build "$dir" -j"$jobs"
  echo "== test $dir"
  (cd "$dir" && ctest --output-on-failure --no-tests=error -j"$jobs")
}

run_build build/release -DCMAKE_BUILD_TYPE=Release -DGQA_VALGRIND_TESTS=ON
# The real control-plane tier (label realcp) ran above in build/release when
# KUBEBUILDER_ASSETS names the binaries; it is not registered in build/asan.
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] \
   && [ -x "$KUBEBUILDER_ASSETS/kube-scheduler" ]; then
  echo "== real control-plane tier ran (KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS)"
else
  echo "== real control-plane tier SKIPPED: set KUBEBUILDER_ASSETS=DIR with kube-apiserver and kube-scheduler" \
       "(etcd there or on PATH) (see tests/realcp/README.md)"
fi
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_build build/asan -DCMAKE_BUILD_TYPE=Debug -DGQA_SANITIZE=ON
echo "== all tests passed in build/release and build/asan"
