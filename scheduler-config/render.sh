#!/usr/bin/env bash
# Render a KubeSchedulerConfiguration from scheduler-config/ for every master
# node: fill in ${kube-apiserver} (the API server's HOST:PORT) and write
# OUT/<node>/scheduler-config.yaml, ready to copy to that node's
# /etc/kubernetes/scheduler-config.yaml (scheduler-config/README.md).
#
# The endpoints come from the `kubernetes` Service in `default`, as the
# documented install procedure finds them (one address per API server, i.e.
# per master node), or from --endpoint for offline use.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: scheduler-config/render.sh [options]

  --api-version V       v1 (Kubernetes 1.25+, default), v1beta3 (1.23-1.28), v1beta2 (1.22-1.27)
  --variant NAME        drop-in (default: the documented tkestack blocks, filter only,
                        for --placement filter), recommended (filter + prioritize + bind +
                        preemption, nodeCacheCapable, for --placement bind) or hami
                        (recommended plus HAMi's vGPU resources, for --placement bind)
  --endpoint [NAME=]HOST:PORT
                        an API server endpoint (repeatable); NAME names the output
                        directory (default: HOST). Without it, the endpoints of the
                        `kubernetes` Service are read with kubectl, and each is named
                        after the node that has its address when one does.
  --out DIR             output directory (default: ./scheduler-config-rendered)
  --stdout              print the rendered file instead of writing files (one endpoint only)
  --kubectl CMD         kubectl to use (default: $KUBECTL or kubectl)
  -h, --help            this help

Examples:
  scheduler-config/render.sh                                  # every master, drop-in, v1
  scheduler-config/render.sh --variant recommended --api-version v1beta3
  scheduler-config/render.sh --endpoint 10.0.0.10:6443 --stdout
EOF
}

die() {
    echo "render.sh: $*" >&2
    exit 2
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
api_version=v1
variant=drop-in
out=./scheduler-config-rendered
to_stdout=0
kubectl_cmd="${KUBECTL:-kubectl}"
endpoints=()

while [ $# -gt 0 ]; do
    case "$1" in
    --api-version) [ $# -ge 2 ] || die "--api-version needs a value"; api_version="$2"; shift 2 ;;
    --api-version=*) api_version="${1#*=}"; shift ;;
    --variant) [ $# -ge 2 ] || die "--variant needs a value"; variant="$2"; shift 2 ;;
    --variant=*) variant="${1#*=}"; shift ;;
    --endpoint) [ $# -ge 2 ] || die "--endpoint needs a value"; endpoints+=("$2"); shift 2 ;;
    --endpoint=*) endpoints+=("${1#*=}"); shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --stdout) to_stdout=1; shift ;;
    --kubectl) [ $# -ge 2 ] || die "--kubectl needs a value"; kubectl_cmd="$2"; shift 2 ;;
    --kubectl=*) kubectl_cmd="${1#*=}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
    esac
done

case "$api_version" in
v1 | v1beta3 | v1beta2) ;;
*) die "--api-version must be v1, v1beta3 or v1beta2, not \"$api_version\"" ;;
esac
case "$variant" in
drop-in | recommended | hami) ;;
*) die "--variant must be drop-in, recommended or hami, not \"$variant\"" ;;
esac
template="$here/$api_version/$variant.yaml"
[ -f "$template" ] || die "missing template $template"

# HOST:PORT with HOST a DNS name, an IPv4 address or a bracketed IPv6 address.
valid_hostport() {
    [[ "$1" =~ ^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$ ]] || return 1
    local port="${1##*:}"
    [ "$port" -ge 1 ] && [ "$port" -le 65535 ]
}

# "NAME HOST:PORT" lines, one per API server.
declare -a names=() hostports=()
if [ ${#endpoints[@]} -gt 0 ]; then
    for e in "${endpoints[@]}"; do
        name="" hp="$e"
        if [[ "$e" == *=* ]]; then
            name="${e%%=*}"
            hp="${e#*=}"
        fi
        valid_hostport "$hp" || die "--endpoint \"$e\": want [NAME=]HOST:PORT (IPv6 as [ADDR]:PORT)"
        if [ -z "$name" ]; then
            name="${hp%:*}"
            name="${name#[}"
            name="${name%]}"
        fi
        names+=("$name")
        hostports+=("$hp")
    done
else
    command -v "${kubectl_cmd%% *}" >/dev/null 2>&1 || die "no --endpoint given and \"$kubectl_cmd\" is not available"
    # The documented procedure: the endpoints of the `kubernetes` Service.
    # shellcheck disable=SC2086
    ips="$($kubectl_cmd get endpoints kubernetes -n default \
        -o jsonpath='{range .subsets[*]}{range .addresses[*]}{.ip}{"\n"}{end}{end}')" ||
        die "cannot read the endpoints of the kubernetes Service (kubectl get endpoints kubernetes -n default)"
    # shellcheck disable=SC2086
    port="$($kubectl_cmd get endpoints kubernetes -n default \
        -o jsonpath='{.subsets[0].ports[?(@.name=="https")].port}')" || port=""
    if [ -z "$port" ]; then
        # shellcheck disable=SC2086
        port="$($kubectl_cmd get endpoints kubernetes -n default -o jsonpath='{.subsets[0].ports[0].port}')" || port=""
    fi
    [ -n "$ips" ] || die "the kubernetes Service has no endpoints"
    [[ "$port" =~ ^[0-9]+$ ]] || die "cannot find the port of the kubernetes Service's endpoints (got \"$port\")"
    # Node name of each address, where a node has it (best effort: the caller
    # may not be allowed to list nodes).
    # shellcheck disable=SC2086
    node_map="$($kubectl_cmd get nodes \
        -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{range .status.addresses[*]}{.address}{" "}{end}{"\n"}{end}' \
        2>/dev/null)" || node_map=""
    while IFS= read -r ip; do
        [ -n "$ip" ] || continue
        name="$ip"
        while IFS=$'\t' read -r node addrs; do
            for a in $addrs; do
                if [ "$a" = "$ip" ]; then
                    name="$node"
                fi
            done
        done <<<"$node_map"
        if [[ "$ip" == *:* ]]; then
            hp="[$ip]:$port"
        else
            hp="$ip:$port"
        fi
        valid_hostport "$hp" || die "unexpected endpoint address \"$ip\""
        names+=("$name")
        hostports+=("$hp")
    done <<<"$ips"
fi

render() {
    # The template's only placeholder, as in the documented blocks. HOST:PORT
    # was validated above, so it holds no sed metacharacter but '.', '[' and
    # ']', which are literal in a replacement.
    echo "# Rendered by scheduler-config/render.sh from $api_version/$variant.yaml for the API server at $1."
    sed -e "s|\${kube-apiserver}|$1|g" "$template"
}

if [ "$to_stdout" = 1 ]; then
    [ ${#hostports[@]} -eq 1 ] || die "--stdout needs exactly one endpoint (found ${#hostports[@]})"
    render "${hostports[0]}"
    exit 0
fi

declare -A seen=()
for i in "${!hostports[@]}"; do
    name="${names[$i]}"
    [[ "$name" =~ ^[A-Za-z0-9._:-]+$ ]] || die "unusable output name \"$name\""
    [ -z "${seen[$name]:-}" ] || die "two endpoints are named \"$name\""
    seen[$name]=1
    mkdir -p "$out/$name"
    render "${hostports[$i]}" >"$out/$name/scheduler-config.yaml"
    echo "$out/$name/scheduler-config.yaml (API server ${hostports[$i]}, $api_version $variant)"
done
cat <<EOF

Next, on each master node, one at a time (scheduler-config/README.md):
  copy OUT/<node>/scheduler-config.yaml to /etc/kubernetes/scheduler-config.yaml,
  add --config=/etc/kubernetes/scheduler-config.yaml and the volume mounts to
  /etc/kubernetes/manifests/kube-scheduler.yaml, and watch kube-scheduler restart.
EOF
