#!/usr/bin/env bash
# Fail on an #include that goes up a layer or across to a sibling layer
# (design.md section 10). Layers, lowest first, and what each may include:
#   lib                 nothing of the project
#   kube, topology      lib
#   cluster             lib, topology
#   admission           lib, topology, cluster
#   extender            every layer below it
#   cmd                 anything
# Tests are not a layer: they may include anything.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
  [lib]="lib"
  [kube]="lib kube"
  [topology]="lib topology"
  [cluster]="lib topology cluster"
  [admission]="lib topology cluster admission"
  [extender]="lib kube topology cluster admission extender"
  [cmd]="lib kube topology cluster admission extender cmd"
)

bad=0
for layer in "${!allowed[@]}"; do
  [ -d "$layer" ] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    target=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"${rest#*:}")
    [ -n "$target" ] || continue
    case "$target" in
      */*) to=${target%%/*} ;;
      *) echo "$file:$line: include \"$target\" names no layer folder"; bad=1; continue ;;
    esac
    if [ -z "${allowed[$to]+x}" ]; then
      echo "$file:$line: include \"$target\" is not in a layer folder"
      bad=1
    elif ! grep -qw -- "$to" <<<"${allowed[$layer]}"; then
      echo "$file:$line: $layer may not include $to (\"$target\"): it may include only: ${allowed[$layer]}"
      bad=1
    fi
  done < <(grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$layer"/*.[ch] 2>/dev/null || true)
done

# Every product source sits in a layer folder.
for f in $(git ls-files '*.c' '*.h' | grep -v '^tests/'); do
  top=${f%%/*}
  if [ "$top" = "$f" ] || [ -z "${allowed[$top]+x}" ]; then
    echo "$f: product source outside the layer folders (${!allowed[*]})"
    bad=1
  fi
done

if [ "$bad" -ne 0 ]; then
  echo "check-layers: includes break the layering (see design.md section 10)" >&2
  exit 1
fi
echo "check-layers: every include stays in its layer or goes down"
