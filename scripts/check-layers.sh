#!/usr/bin/env bash
# Fail on an #include that goes up a layer or across to a sibling layer
# (design.md section 10), and on two units (a .c with its .h) that include
# each other. Layers, lowest first, and what each may include (a folder is
# its layer; sub-folders of extender/ are sub-layers, checked the same way):
#   lib                 nothing of the project
#   kube, topology      lib
#   cluster             lib, topology
#   admission           lib, topology, cluster
#   extender/decide     the layers below extender, and itself
#   extender            (app, options, tlspolicy, workers) the above, and itself
#   extender/live       the above, and itself
#   extender/serve      the above, extender/live, and itself
#   cmd                 anything
# So serve and live use decide, never the other way. Tests are not a layer:
# they may include anything.
set -euo pipefail
cd "$(dirname "$0")/.."

below_extender="lib kube topology cluster admission"
declare -A allowed=(
  [lib]="lib"
  [kube]="lib kube"
  [topology]="lib topology"
  [cluster]="lib topology cluster"
  [admission]="lib topology cluster admission"
  [extender/decide]="$below_extender extender/decide"
  [extender]="$below_extender extender/decide extender"
  [extender/live]="$below_extender extender/decide extender extender/live"
  [extender/serve]="$below_extender extender/decide extender extender/live extender/serve"
  [cmd]="$below_extender extender/decide extender extender/live extender/serve cmd"
)

mapfile -t sources < <(git ls-files -co --exclude-standard '*.c' '*.h' | grep -v '^tests/' | grep -v '^build/' || true)

bad=0
for f in "${sources[@]}"; do
  [ -f "$f" ] || continue
  dir=$(dirname "$f")
  if [ -z "${allowed[$dir]+x}" ]; then
    echo "$f: product source outside the layer folders (${!allowed[*]})"
    bad=1
    continue
  fi
  while IFS= read -r hit; do
    line=${hit%%:*}
    target=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"${hit#*:}")
    [ -n "$target" ] || continue
    case "$target" in
      */*) to=$(dirname "$target") ;;
      *) echo "$f:$line: include \"$target\" names no layer folder"; bad=1; continue ;;
    esac
    if [ -z "${allowed[$to]+x}" ]; then
      echo "$f:$line: include \"$target\" is not in a layer folder"
      bad=1
    elif ! tr ' ' '\n' <<<"${allowed[$dir]}" | grep -qxF -- "$to"; then
      echo "$f:$line: $dir may not include $to (\"$target\"): it may include only: ${allowed[$dir]}"
      bad=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
done

# No two units include each other: unit = the path without .c/.h.
edges=$(for f in "${sources[@]}"; do
  [ -f "$f" ] || continue
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.[ch]".*/\1/p' "$f" |
    while IFS= read -r to; do [ "${f%.[ch]}" != "$to" ] && echo "${f%.[ch]} $to"; done
done | sort -u)
while read -r a b; do
  [ -n "$a" ] || continue
  if [[ "$a" < "$b" ]] && grep -qxF -- "$b $a" <<<"$edges"; then
    echo "$a and $b include each other (split what both need into its own header)"
    bad=1
  fi
done <<<"$edges"

if [ "$bad" -ne 0 ]; then
  echo "check-layers: includes break the layering (see design.md section 10)" >&2
  exit 1
fi
echo "check-layers: every include stays in its layer or goes down; no two units include each other"
