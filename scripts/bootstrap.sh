#!/usr/bin/env bash
# Install what a fresh Debian bookworm machine lacks to build and test
# gpu-quota-admission. Does nothing when everything is present; installs the
# missing Debian packages when run as root (or through sudo).
#   (no option) building and every test (scripts/test.sh): also cmocka,
#            valgrind, clang-format, headless Chromium and Python's packages
#   --build  only building the service and the plugin (scripts/run-demo.sh):
#            the compiler, cmake, pkg-config and the -dev libraries
#   --fuzz   also what the libFuzzer targets need (scripts/fuzz.sh): clang and
#            its runtime libraries (libFuzzer, the sanitizers)
#   --list   print the packages the mode needs (one a line) and exit:
#            `scripts/bootstrap.sh --build --list`
set -euo pipefail
mode=test
list=0
for arg in "$@"; do
  case "$arg" in
    --build) mode=build ;;
    --fuzz) mode=fuzz ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bootstrap: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

# pkg-config module -> Debian package that provides it: what the build links.
declare -A modules=(
  [libmicrohttpd]=libmicrohttpd-dev
  [libcjson]=libcjson-dev
  [libcurl]=libcurl4-openssl-dev
  [openssl]=libssl-dev
  [yaml-0.1]=libyaml-dev
  [gnutls]=libgnutls28-dev
)
declare -A build_commands=(
  [cc]=gcc
  [make]=make
  [cmake]=cmake
  [pkg-config]=pkg-config
)
# What only the tests use.
declare -A test_modules=(
  [cmocka]=libcmocka-dev
)
# chromium: the /ui browser test (tests/e2e/test_ui_browser.py), headless.
# etcd, xz, kubectl: the real control-plane tier (tests/realcp): etcd for the
# API server, xz to unpack ../shared/controlplane, kubectl for kustomize and
# apply (Debian's kubernetes-client only where no kubectl is installed).
declare -A test_commands=(
  [python3]=python3
  [openssl]=openssl
  [curl]=curl
  [valgrind]=valgrind
  [clang-format]=clang-format
  [chromium]=chromium
  [etcd]=etcd-server
  [xz]=xz-utils
  [kubectl]=kubernetes-client
)

if [ "$list" -eq 1 ]; then
  pkgs=("${modules[@]}" "${build_commands[@]}")
  [ "$mode" = build ] || pkgs+=("${test_modules[@]}" "${test_commands[@]}" python3-kubernetes python3-yaml)
  [ "$mode" = fuzz ] && pkgs+=(clang libclang-rt-14-dev)
  printf '%s\n' "${pkgs[@]}" | sort -u
  exit 0
fi

missing=()
need_commands() { # name of an associative array: command -> package
  local -n table=$1
  for cmd in "${!table[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${table[$cmd]}")
  done
}
need_modules() { # name of an associative array: pkg-config module -> package
  local -n table=$1
  if command -v pkg-config >/dev/null 2>&1; then
    for mod in "${!table[@]}"; do
      pkg-config --exists "$mod" || missing+=("${table[$mod]}")
    done
  else
    missing+=("${table[@]}")
  fi
}

need_commands build_commands
need_modules modules
if [ "$mode" != build ]; then
  need_commands test_commands
  need_modules test_modules
  # The API simulator's client check uses Debian's python3 and its kubernetes package.
  /usr/bin/python3 -c 'import kubernetes' >/dev/null 2>&1 || missing+=(python3-kubernetes)
  # The plugin's and the monitoring tests read YAML with Debian's python3-yaml.
  /usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || missing+=(python3-yaml)
fi

if [ "$mode" = fuzz ]; then
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
