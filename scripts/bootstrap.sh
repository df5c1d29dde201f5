#!/usr/bin/env bash
# Install what a fresh Debian bookworm machine lacks to build and test
# gpu-quota-admission. Does nothing when everything is present; installs the
# missing Debian packages when run as root (or through sudo).
#   --fuzz   also what the libFuzzer targets need (scripts/fuzz.sh): clang and
#            its runtime libraries (libFuzzer, the sanitizers)
set -euo pipefail
fuzz=0
[ "${1:-}" = "--fuzz" ] && fuzz=1

# pkg-config module or command -> Debian package that provides it
declare -A modules=(
  [libmicrohttpd]=libmicrohttpd-dev
  [libcjson]=libcjson-dev
  [libcurl]=libcurl4-openssl-dev
  [openssl]=libssl-dev
  [yaml-0.1]=libyaml-dev
  [gnutls]=libgnutls28-dev
  [cmocka]=libcmocka-dev
)
# chromium: the /ui browser test (tests/e2e/test_ui_browser.py), headless.
declare -A commands=(
  [cc]=gcc
  [make]=make
  [cmake]=cmake
  [pkg-config]=pkg-config
  [python3]=python3
  [openssl]=openssl
  [curl]=curl
  [valgrind]=valgrind
  [clang-format]=clang-format
  [chromium]=chromium
)

missing=()
# The API simulator's client check uses Debian's python3 and its kubernetes package.
/usr/bin/python3 -c 'import kubernetes' >/dev/null 2>&1 || missing+=(python3-kubernetes)
# The plugin's and the monitoring tests read YAML with Debian's python3-yaml.
/usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || missing+=(python3-yaml)
for cmd in "${!commands[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${commands[$cmd]}")
done
if command -v pkg-config >/dev/null 2>&1; then
  for mod in "${!modules[@]}"; do
    pkg-config --exists "$mod" || missing+=("${modules[$mod]}")
  done
else
  missing+=("${modules[@]}")
fi

if [ "$fuzz" -eq 1 ]; then
  command -v clang >/dev/null 2>&1 || missing+=(clang)
  # -fsanitize=fuzzer links clang's own libFuzzer runtime.
  if ! command -v clang >/dev/null 2>&1 ||
     [ ! -f "$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a" ]; then
    missing+=(libclang-rt-14-dev)
  fi
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "bootstrap: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists of a fresh machine are empty or stale.
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
