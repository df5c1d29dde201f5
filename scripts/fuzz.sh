#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer) in build/fuzz and run each for a while,
# starting from the seed corpora in tests/fuzz/corpus/<target>.
#
#   scripts/fuzz.sh                     every target for 20 s (what CI runs)
#   scripts/fuzz.sh --seconds 3600      every target for an hour
#   scripts/fuzz.sh --only verbs --seconds 600 --jobs 2
#
# New inputs that reach new code are kept in build/fuzz/corpus/<target> (the
# tree's seeds are never modified; copy good ones there by hand). Any crash,
# leak, sanitizer report or timeout stops with a non-zero exit and names the
# reproducer under build/fuzz/artifacts/<target>/: rerun it with
#   build/fuzz/fuzz_<target> build/fuzz/artifacts/<target>/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
only=""
jobs=1
build=build/fuzz
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: --seconds wants a whole number" >&2; exit 2 ;; esac

bash scripts/bootstrap.sh --fuzz
cmake -S tests/fuzz -B "$build" -DCMAKE_C_COMPILER=clang >/dev/null
cmake --build "$build" -j"$(nproc)"

targets=$(grep -E '^[a-z_]+$' tests/fuzz/targets.txt)
[ -n "$only" ] && targets=$only
root=$(pwd)
build=$(cd "$build" && pwd)
failed=()
for t in $targets; do
  bin="$build/fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
  work="$build/corpus/$t"
  art="$build/artifacts/$t"
  logs="$build/logs/$t"
  mkdir -p "$work" "$art" "$logs"
  parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
  echo "== fuzz_$t for ${seconds}s"
  # -timeout: one input may take 10 s; -rss_limit_mb: a leak or blow-up
  # fails the run (LeakSanitizer also checks at the end). With --jobs,
  # libFuzzer writes one log per job into $logs.
  if ! (cd "$logs" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -dict="$root/tests/fuzz/dicts/gqa.dict" -artifact_prefix="$art/" -print_final_stats=1 "${parallel[@]}" \
      "$work" "$root/tests/fuzz/corpus/$t") >"$logs/run.log" 2>&1; then
    echo "fuzz.sh: fuzz_$t FAILED; log $logs/run.log; reproducer(s) in $art:" >&2
    ls "$art" >&2 || true
    tail -40 "$logs/run.log" >&2
    failed+=("$t")
  else
    grep -E "^stat::number_of_executed_units" "$logs/run.log" | tail -1 | sed 's/^/   /'
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "== every fuzz target ran ${seconds}s without a finding"
