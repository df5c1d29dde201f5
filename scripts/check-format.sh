#!/usr/bin/env bash
# Fail when a product source (every layer folder) differs from what
# clang-format makes of it with the project's .clang-format. Fix with:
#   clang-format -i $(git ls-files 'lib/*.[ch]' 'kube/*.[ch]' ...)
# or pass --fix to rewrite the files in place.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed" >&2; exit 1; }
fix=0
[ "${1:-}" = "--fix" ] && fix=1
mapfile -t files < <(git ls-files -co --exclude-standard 'lib/*.[ch]' 'kube/*.[ch]' 'topology/*.[ch]' \
  'cluster/*.[ch]' 'admission/*.[ch]' 'extender/*.[ch]' 'cmd/*.[ch]')
[ "${#files[@]}" -gt 0 ] || { echo "check-format: no product sources found" >&2; exit 1; }
bad=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if [ "$fix" -eq 1 ]; then
    clang-format -i "$f"
  elif ! clang-format "$f" | diff -q "$f" - >/dev/null; then
    echo "$f: not formatted (clang-format $f | diff $f -)"
    bad=1
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "check-format: run scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} product sources match .clang-format"
