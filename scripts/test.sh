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

# The real control-plane tier's binaries: KUBEBUILDER_ASSETS as given, else
# the project's ../shared/controlplane unpacked once into build/controlplane.
if [ -z "${KUBEBUILDER_ASSETS:-}" ] && ls ../shared/controlplane/*.xz >/dev/null 2>&1; then
  assets="$PWD/build/controlplane"
  mkdir -p "$assets"
  for f in ../shared/controlplane/*.xz; do
    out="$assets/$(basename "$f" .xz)"
    if [ ! -x "$out" ] || [ "$f" -nt "$out" ]; then
      xz -dc "$f" >"$out.tmp" && chmod 0755 "$out.tmp" && mv "$out.tmp" "$out"
    fi
  done
  export KUBEBUILDER_ASSETS="$assets"
fi
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] \
   && [ -x "$KUBEBUILDER_ASSETS/kube-scheduler" ]; then
  realcp="real control-plane tier ran (KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS)"
else
  realcp="real control-plane tier SKIPPED: no kube-apiserver and kube-scheduler found; set KUBEBUILDER_ASSETS=DIR"
  realcp+=" with them (etcd there or on PATH), or put ../shared/controlplane beside the checkout (tests/realcp/README.md)"
fi
echo "== $realcp"

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
# The real control-plane tier (label realcp) runs in build/release only.
echo "== $realcp"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_build build/asan -DCMAKE_BUILD_TYPE=Debug -DGQA_SANITIZE=ON
echo "== all tests passed in build/release and build/asan; $realcp"
