#!/usr/bin/env bash
# Build gpu-quota-admission (Release) and serve the bundled demo cluster state
# on http://127.0.0.1:3456. Extra arguments are passed to the service.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --build  # the build only: no test tools, no browser
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DGQA_BUILD_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)" --target gpu-quota-admission >/dev/null
exec build/release/gpu-quota-admission --state-file examples/demo-state.yaml "$@"
