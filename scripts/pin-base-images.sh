#!/usr/bin/env bash
# pin-base-images.sh - refresh the digests the Dockerfile pins its base images to.
#
# Each `FROM name:tag@sha256:...` (or `FROM name:tag`) gets the digest the
# registry serves for name:tag now: the multi-platform index digest, which
# every platform's pull checks. Needs the network and one of
#   docker buildx imagetools inspect IMAGE --format '{{json .Manifest.Digest}}'
#   skopeo inspect --raw docker://IMAGE | sha256sum   (the index's own bytes)
# Run it when Debian publishes a point release or security updates, then build
# and run the tests; commit the Dockerfile with the tags' date in the message.
#
#   scripts/pin-base-images.sh            rewrite Dockerfile in place
#   scripts/pin-base-images.sh --check    print what would change, exit 1 if anything would
set -euo pipefail

cd "$(dirname "$0")/.."
dockerfile=Dockerfile
check=0
[ "${1:-}" = "--check" ] && check=1

resolve() {
    local image=$1 digest=""
    if command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then
        digest=$(docker buildx imagetools inspect "$image" --format '{{json .Manifest.Digest}}' | tr -d '"')
    elif command -v skopeo >/dev/null 2>&1; then
        local ref=$image
        case $ref in */*) ;; *) ref="library/$ref" ;; esac      # debian:bookworm -> library/debian:bookworm
        case ${ref%%/*} in *.*) ;; *) ref="docker.io/$ref" ;; esac # no registry host: Docker Hub
        digest="sha256:$(skopeo inspect --raw "docker://$ref" | sha256sum | cut -d' ' -f1)"
    else
        echo "pin-base-images: needs docker buildx or skopeo" >&2
        exit 2
    fi
    case $digest in
    sha256:[0-9a-f]*) [ ${#digest} -eq 71 ] || { echo "pin-base-images: $image: bad digest $digest" >&2; exit 2; } ;;
    *) echo "pin-base-images: $image: no digest" >&2; exit 2 ;;
    esac
    echo "$digest"
}

changed=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
while IFS= read -r line; do
    if [[ $line =~ ^FROM[[:space:]]+([a-z0-9./_-]+:[A-Za-z0-9._-]+)(@sha256:[0-9a-f]{64})?(.*)$ ]]; then
        image=${BASH_REMATCH[1]} old=${BASH_REMATCH[2]#@} rest=${BASH_REMATCH[3]}
        new=$(resolve "$image")
        if [ "$new" != "$old" ]; then
            echo "$image: ${old:-(none)} -> $new"
            changed=1
        fi
        line="FROM $image@$new$rest"
    fi
    printf '%s\n' "$line" >>"$tmp"
done <"$dockerfile"

if [ $check -eq 1 ]; then
    exit $changed
fi
cat "$tmp" >"$dockerfile"
[ $changed -eq 1 ] || echo "pin-base-images: every digest is current"
