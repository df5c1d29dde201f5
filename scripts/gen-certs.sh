#!/usr/bin/env bash
# Certificates for gpu-quota-admission's admission webhooks (OpenSSL):
# a CA and a serving certificate for the Service gpu-quota-admission-webhook,
# stored in the Secret the Deployment mounts, and the CA written into the
# webhook configurations' caBundle.
#
# Install order (the same in README.md, docs/install.md, manifests/kustomization.yaml
# and scripts/gen-certs.sh; tests/install/test_install_order.py applies it):
#   1. scripts/gen-certs.sh --out ../gqa-certs --control-plane-cidr CIDR
#      Offline: the webhook CA and serving certificate, the Secret, the caBundle
#      patch, who may reach port 3456 (CIDR: the control-plane nodes' addresses,
#      where the API server's service proxy and kube-scheduler dial from; repeat
#      the flag for more), and a kustomization in ../gqa-certs on manifests/.
#   2. kubectl apply -k ../gqa-certs
#      One apply, in kustomize's order: the Secret before the Deployment that
#      mounts it, the webhook configurations last and already carrying caBundle.
#      Upgrades re-apply the same directory.
# Without the admission webhooks there is no certificate and no step 1:
#   1. enable components/no-webhooks (in manifests/kustomization.yaml or an overlay)
#      and put the control-plane CIDR in manifests/networkpolicy-sources.yaml
#   2. kubectl apply -k manifests/   (or the overlay)
# Never apply manifests/ with its webhooks on its own: without caBundle the CRL
# webhook (failurePolicy Fail) refuses every CRL change, and the pods wait for a
# Secret that does not exist while GPU pods stay Pending.
#
#   scripts/gen-certs.sh --out DIR       offline (install step 1): write the
#                                        files, the Secret, the caBundle patch
#                                        and a kustomization to DIR, touch no
#                                        cluster (then `kubectl apply -k DIR`)
#   scripts/gen-certs.sh --out DIR --apply
#                                        renew on an installed cluster: keep the
#                                        files (and the CA) in DIR, patch caBundle
#                                        and apply the Secret with kubectl
#   scripts/gen-certs.sh                 the same without keeping files (a new
#                                        CA each time)
#
# The cluster modes only renew: on a cluster without the webhook
# configurations they change nothing and print the install order.
#
# The CA is kept when DIR already holds ca.crt and ca.key (and it outlives the
# new certificate), so re-running renews only the serving certificate and
# caBundle stays the same. In cluster mode, when the CA does change, the
# previous CA stays in caBundle next to the new one, so the API server trusts
# both the old certificate (still served until the pods see the new Secret)
# and the new one.
set -euo pipefail

NAMESPACE=kube-system
SERVICE=gpu-quota-admission-webhook
SECRET=gpu-quota-admission-webhook-tls
WEBHOOK_CONFIG=gpu-quota-admission
CLUSTER_DOMAIN=cluster.local
DAYS=365
CA_DAYS=3650
KEY_BITS=2048
# The webhooks in manifests/webhooks.yaml (tests/install/test_certs.py checks
# that these match), for the offline caBundle patch.
VALIDATING_WEBHOOKS="crl-configmaps.gpu-admission.io pods.gpu-admission.io"
MUTATING_WEBHOOKS="pod-defaults.gpu-admission.io"

usage() {
    cat <<'EOF'
Usage: scripts/gen-certs.sh [--out DIR] [--apply] [options]

  --out DIR             write ca.crt, ca.key, tls.crt, tls.key, secret.yaml,
                        cabundle-validating.yaml, cabundle-mutating.yaml and
                        kustomization.yaml to DIR;
                        without --apply nothing else happens (no cluster needed)
  --apply               also apply the Secret and patch caBundle with kubectl:
                        renewal on an installed cluster (the default when --out
                        is not given); refused where the webhook configurations
                        do not exist yet (install: --out DIR, then
                        kubectl apply -k DIR)
  --namespace NS        namespace of the Service and Secret (default kube-system)
  --service NAME        webhook Service (default gpu-quota-admission-webhook)
  --secret NAME         Secret the Deployment mounts (default gpu-quota-admission-webhook-tls)
  --webhook-config NAME name of the Validating/MutatingWebhookConfiguration (default gpu-quota-admission)
  --cluster-domain D    cluster DNS domain (default cluster.local)
  --days N              validity of the serving certificate (default 365)
  --ca-days N           validity of a new CA (default 3650)
  --new-ca              make a new CA even when DIR has one
  --control-plane-cidr CIDR
                        who may reach port 3456 (the extender verbs): the
                        control-plane nodes' addresses, where the API server's
                        service proxy and kube-scheduler dial from; repeat for
                        more than one. Written to DIR/networkpolicy-sources.yaml,
                        which the generated kustomization patches into the
                        NetworkPolicy. Required with --out unless DIR already
                        has that file (kept, as the CA is). docs/security.md
  --monitoring-namespace NS
                        the namespace of the Prometheus that scrapes /metrics,
                        also admitted on 3456 (default monitoring; "" for none)
  --manifests DIR       the manifests the generated kustomization builds on
                        (default: manifests/ of this repository)
  --kubectl CMD         kubectl to use (default: $KUBECTL or kubectl)
  -h, --help            this help

The Secret holds the private key: do not commit DIR to version control
(or seal/encrypt secret.yaml first).
EOF
}

die() {
    echo "gen-certs.sh: $*" >&2
    exit 2
}

# An IPv4 or IPv6 CIDR with its prefix length (what a NetworkPolicy ipBlock takes).
valid_cidr() {
    local addr=${1%/*} len=${1##*/} o
    [[ "$1" == */* && "$len" =~ ^(0|[1-9][0-9]{0,2})$ ]] || return 1
    if [[ "$addr" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]]; then
        for o in "${BASH_REMATCH[@]:1}"; do ((10#$o <= 255)) || return 1; done
        ((len <= 32))
    else
        [[ "$addr" == *:* && "$addr" =~ ^[0-9a-fA-F:.]+$ ]] && ((len <= 128))
    fi
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
manifests="$here/../manifests"
out=""
apply=""
new_ca=0
kubectl_cmd="${KUBECTL:-kubectl}"
cidrs=()
monitoring_ns=monitoring

while [ $# -gt 0 ]; do
    case "$1" in
    --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --apply) apply=1; shift ;;
    --namespace) [ $# -ge 2 ] || die "--namespace needs a value"; NAMESPACE="$2"; shift 2 ;;
    --namespace=*) NAMESPACE="${1#*=}"; shift ;;
    --service) [ $# -ge 2 ] || die "--service needs a value"; SERVICE="$2"; shift 2 ;;
    --service=*) SERVICE="${1#*=}"; shift ;;
    --secret) [ $# -ge 2 ] || die "--secret needs a value"; SECRET="$2"; shift 2 ;;
    --secret=*) SECRET="${1#*=}"; shift ;;
    --webhook-config) [ $# -ge 2 ] || die "--webhook-config needs a value"; WEBHOOK_CONFIG="$2"; shift 2 ;;
    --webhook-config=*) WEBHOOK_CONFIG="${1#*=}"; shift ;;
    --cluster-domain) [ $# -ge 2 ] || die "--cluster-domain needs a value"; CLUSTER_DOMAIN="$2"; shift 2 ;;
    --cluster-domain=*) CLUSTER_DOMAIN="${1#*=}"; shift ;;
    --days) [ $# -ge 2 ] || die "--days needs a value"; DAYS="$2"; shift 2 ;;
    --days=*) DAYS="${1#*=}"; shift ;;
    --ca-days) [ $# -ge 2 ] || die "--ca-days needs a value"; CA_DAYS="$2"; shift 2 ;;
    --ca-days=*) CA_DAYS="${1#*=}"; shift ;;
    --new-ca) new_ca=1; shift ;;
    --manifests) [ $# -ge 2 ] || die "--manifests needs a value"; manifests="$2"; shift 2 ;;
    --manifests=*) manifests="${1#*=}"; shift ;;
    --control-plane-cidr) [ $# -ge 2 ] || die "--control-plane-cidr needs a value"; cidrs+=("$2"); shift 2 ;;
    --control-plane-cidr=*) cidrs+=("${1#*=}"); shift ;;
    --monitoring-namespace) [ $# -ge 2 ] || die "--monitoring-namespace needs a value"; monitoring_ns="$2"; shift 2 ;;
    --monitoring-namespace=*) monitoring_ns="${1#*=}"; shift ;;
    --kubectl) [ $# -ge 2 ] || die "--kubectl needs a value"; kubectl_cmd="$2"; shift 2 ;;
    --kubectl=*) kubectl_cmd="${1#*=}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
    esac
done

dns1123='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
[[ "$NAMESPACE" =~ $dns1123 ]] || die "--namespace \"$NAMESPACE\" is not a valid namespace name"
[[ "$SERVICE" =~ $dns1123 ]] || die "--service \"$SERVICE\" is not a valid Service name"
[[ "$SECRET" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "--secret \"$SECRET\" is not a valid Secret name"
[[ "$CLUSTER_DOMAIN" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "--cluster-domain \"$CLUSTER_DOMAIN\" is not a DNS name"
[ -z "$monitoring_ns" ] || [[ "$monitoring_ns" =~ $dns1123 ]] ||
    die "--monitoring-namespace \"$monitoring_ns\" is not a valid namespace name"
for c in "${cidrs[@]}"; do
    valid_cidr "$c" || die "--control-plane-cidr \"$c\" is not a CIDR (such as 10.0.0.0/24 or fd00::/64)"
done
[[ "$DAYS" =~ ^[1-9][0-9]*$ ]] || die "--days must be a positive number"
[[ "$CA_DAYS" =~ ^[1-9][0-9]*$ ]] || die "--ca-days must be a positive number"
if [ -n "$out" ] && [ "${#cidrs[@]}" -eq 0 ] && [ ! -s "$out/networkpolicy-sources.yaml" ]; then
    die "say who may reach port 3456, where kube-scheduler calls the extender:" \
        "--control-plane-cidr CIDR (the control-plane nodes' addresses; repeat for more)." \
        "Without it the NetworkPolicy admits nobody and GPU pods stay Pending (docs/security.md)"
fi
if [ -z "$apply" ]; then
    # Offline when a directory is given, cluster mode otherwise.
    if [ -n "$out" ]; then apply=0; else apply=1; fi
fi
command -v openssl >/dev/null 2>&1 || die "openssl is not installed"

umask 077
if [ -n "$out" ]; then
    mkdir -p "$out"
    dir="$(cd "$out" && pwd)"
else
    dir="$(mktemp -d)"
fi
rel=""

kube() {
    # shellcheck disable=SC2086
    $kubectl_cmd "$@"
}

b64() {
    base64 <"$1" | tr -d '\n'
}

fqdn="$SERVICE.$NAMESPACE.svc"
work="$(mktemp -d)"
trap 'rm -rf "$work"; [ -n "$out" ] || rm -rf "$dir"' EXIT

cat >"$work/openssl.cnf" <<EOF
[req]
distinguished_name = dn_ca
prompt = no
[dn_ca]
CN = $SERVICE-ca
[dn_server]
CN = $fqdn
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
subjectAltName = @alt_names
[alt_names]
DNS.1 = $SERVICE
DNS.2 = $SERVICE.$NAMESPACE
DNS.3 = $fqdn
DNS.4 = $fqdn.$CLUSTER_DOMAIN
EOF
sed -e 's/^distinguished_name = dn_ca$/distinguished_name = dn_server/' "$work/openssl.cnf" >"$work/server.cnf"

# --- CA: keep the one in DIR when it is usable --------------------------------
reuse_ca=0
if [ "$new_ca" = 0 ] && [ -s "$dir/ca.crt" ] && [ -s "$dir/ca.key" ]; then
    if ! openssl x509 -noout -checkend $((DAYS * 86400)) -in "$dir/ca.crt" >/dev/null 2>&1; then
        echo "gen-certs.sh: the CA in $dir expires within $DAYS days: making a new one" >&2
    elif [ "$(openssl x509 -noout -pubkey -in "$dir/ca.crt" | openssl sha256)" != \
        "$(openssl pkey -pubout -in "$dir/ca.key" | openssl sha256)" ]; then
        die "$dir/ca.key does not belong to $dir/ca.crt"
    else
        reuse_ca=1
    fi
fi
if [ "$reuse_ca" = 0 ]; then
    openssl req -x509 -new -config "$work/openssl.cnf" -extensions v3_ca -sha256 \
        -newkey "rsa:$KEY_BITS" -nodes -keyout "$work/ca.key" -out "$work/ca.crt" -days "$CA_DAYS" 2>/dev/null ||
        die "openssl could not make the CA"
    mv -f "$work/ca.key" "$dir/ca.key"
    mv -f "$work/ca.crt" "$dir/ca.crt"
fi

# --- serving certificate --------------------------------------------------------
openssl req -new -config "$work/server.cnf" -sha256 \
    -newkey "rsa:$KEY_BITS" -nodes -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null ||
    die "openssl could not make the serving key"
openssl x509 -req -in "$work/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$DAYS" -sha256 \
    -extfile "$work/server.cnf" -extensions v3_server -out "$work/tls.crt" 2>/dev/null ||
    die "openssl could not sign the serving certificate"
openssl verify -CAfile "$dir/ca.crt" -purpose sslserver "$work/tls.crt" >/dev/null ||
    die "the new serving certificate does not verify against $dir/ca.crt"
mv -f "$work/tls.key" "$dir/tls.key"
mv -f "$work/tls.crt" "$dir/tls.crt"
chmod 600 "$dir/ca.key" "$dir/tls.key"
chmod 644 "$dir/ca.crt" "$dir/tls.crt"

# --- the Secret the Deployment mounts ----------------------------------------------
cat >"$dir/secret.yaml" <<EOF
# Serving certificate of the $SERVICE Service (made by scripts/gen-certs.sh).
# It holds a private key: do not commit it unencrypted.
apiVersion: v1
kind: Secret
metadata:
  name: $SECRET
  namespace: $NAMESPACE
  labels:
    app.kubernetes.io/name: gpu-quota-admission
    app.kubernetes.io/part-of: gpu-quota-admission
type: kubernetes.io/tls
data:
  tls.crt: $(b64 "$dir/tls.crt")
  tls.key: $(b64 "$dir/tls.key")
  ca.crt: $(b64 "$dir/ca.crt")
EOF

# --- offline: caBundle patch and a kustomization that builds on manifests/ ---------
ca_bundle="$(b64 "$dir/ca.crt")"
# The webhook components/scheduler-name-webhook adds gets the caBundle too when
# the manifests this kustomization builds on enable it (an overlay given as
# --manifests, or components: in manifests/kustomization.yaml). It is named
# only then: a caBundle patch entry for a webhook that is not there would add
# an incomplete one.
SCHEDULER_NAME_WEBHOOK=scheduler-name.gpu-admission.io
has_scheduler_name_webhook() {
    if command -v kubectl >/dev/null 2>&1; then
        kubectl kustomize "$manifests" 2>/dev/null |
            grep -q -E '^[[:space:]-]*name: scheduler-name\.gpu-admission\.io$'
    else
        grep -q -E '^[[:space:]]*-[[:space:]].*components/scheduler-name-webhook' "$manifests/kustomization.yaml" 2>/dev/null
    fi
}
if [ -n "$out" ] && has_scheduler_name_webhook; then
    MUTATING_WEBHOOKS="$MUTATING_WEBHOOKS $SCHEDULER_NAME_WEBHOOK"
fi
# One file per configuration: kustomize before v5.1 (kubectl 1.27 to 1.30)
# refuses a patch file holding two documents.
cabundle_patch() { # KIND WEBHOOK...
    local kind=$1 w
    shift
    echo "# caBundle of the $kind (made by scripts/gen-certs.sh)."
    echo "apiVersion: admissionregistration.k8s.io/v1"
    echo "kind: $kind"
    echo "metadata:"
    echo "  name: $WEBHOOK_CONFIG"
    echo "webhooks:"
    for w in "$@"; do
        printf -- '- name: %s\n  clientConfig:\n    caBundle: %s\n' "$w" "$ca_bundle"
    done
}
# shellcheck disable=SC2086
cabundle_patch ValidatingWebhookConfiguration $VALIDATING_WEBHOOKS >"$dir/cabundle-validating.yaml"
# shellcheck disable=SC2086
cabundle_patch MutatingWebhookConfiguration $MUTATING_WEBHOOKS >"$dir/cabundle-mutating.yaml"
rm -f "$dir/webhook-cabundle-patch.yaml" # the two-document file of earlier versions

# The sources port 3456 admits, as a patch of the NetworkPolicy (the same
# path manifests/networkpolicy-sources.yaml patches, whose placeholder admits
# nobody): from --control-plane-cidr, else the file DIR already has.
write_network_sources() {
    local c
    [ "${#cidrs[@]}" -gt 0 ] || return 0 # checked before anything was written: DIR has the file
    {
        echo "# Who may reach port 3456 (made by scripts/gen-certs.sh --control-plane-cidr):"
        echo "# a JSON patch of the NetworkPolicy gpu-quota-admission (docs/security.md)."
        echo "- op: replace"
        echo "  path: /spec/ingress/0/from"
        echo "  value:"
        for c in "${cidrs[@]}"; do
            printf -- '  - ipBlock:\n      cidr: %s\n' "$c"
        done
        if [ -n "$monitoring_ns" ]; then
            printf -- '  - namespaceSelector:\n      matchLabels:\n        kubernetes.io/metadata.name: %s\n' \
                "$monitoring_ns"
        fi
    } >"$dir/networkpolicy-sources.yaml"
}

if [ -n "$out" ]; then
    manifests_abs="$(cd "$manifests" 2>/dev/null && pwd)" || die "--manifests $manifests: no such directory"
    case "$dir/" in
    "$manifests_abs"/*)
        echo "gen-certs.sh: $dir is inside $manifests_abs: not writing kustomization.yaml" \
            "(a kustomization cannot build on a directory that contains it)" >&2
        rm -f "$dir/kustomization.yaml"
        ;;
    *)
        rel="$(realpath --relative-to="$dir" "$manifests_abs")"
        write_network_sources
        cat >"$dir/kustomization.yaml" <<EOF
# gpu-quota-admission with the certificates of this directory
# (made by scripts/gen-certs.sh): kubectl apply -k $out
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $rel
- secret.yaml
patches:
- path: cabundle-validating.yaml
- path: cabundle-mutating.yaml
- path: networkpolicy-sources.yaml
  target:
    kind: NetworkPolicy
    name: gpu-quota-admission
EOF
        ;;
    esac
fi

echo "gen-certs.sh: $([ "$reuse_ca" = 1 ] && echo "kept the CA" || echo "made a new CA"), made a serving certificate for" \
    "$SERVICE, $SERVICE.$NAMESPACE, $fqdn and $fqdn.$CLUSTER_DOMAIN valid for $DAYS days" >&2
[ -z "$out" ] || echo "gen-certs.sh: wrote $dir/{ca.crt,ca.key,tls.crt,tls.key,secret.yaml,cabundle-validating.yaml,cabundle-mutating.yaml${rel:+,networkpolicy-sources.yaml,kustomization.yaml}}" >&2

if [ "$apply" != 1 ]; then
    [ -z "$rel" ] || echo "gen-certs.sh: next (install step 2): kubectl apply -k $out" >&2
    exit 0
fi

# --- cluster mode ---------------------------------------------------------------------
command -v "${kubectl_cmd%% *}" >/dev/null 2>&1 || die "\"$kubectl_cmd\" is not available (use --out DIR to work offline)"
kube get namespace "$NAMESPACE" -o name >/dev/null || die "cannot reach the cluster, or namespace $NAMESPACE is missing"

# Renewal only: a Secret applied ahead of the manifests would invite
# `kubectl apply -k manifests/` next, which creates the webhook configurations
# without caBundle (the CRL webhook then refuses every CRL change).
present=""
for kind in validatingwebhookconfiguration mutatingwebhookconfiguration; do
    if kube get "$kind" "$WEBHOOK_CONFIG" -o name >/dev/null 2>&1; then
        present="$present $kind"
    else
        echo "gen-certs.sh: no $kind/$WEBHOOK_CONFIG on the cluster" >&2
    fi
done
if [ -z "$present" ]; then
    echo "gen-certs.sh: nothing to renew: the webhooks are not installed. Install in this order:" >&2
    echo "  scripts/gen-certs.sh --out ../gqa-certs --control-plane-cidr CIDR && kubectl apply -k ../gqa-certs" >&2
    echo "  (docs/install.md; without the webhooks no certificate is needed)" >&2
    exit 2
fi

# caBundle first, then the Secret: the API server must trust the new CA before
# a pod serves a certificate signed by it. Keep the previous CA in the bundle
# when the CA changed, so the certificate still being served stays trusted.
patched=0
for kind in $present; do
    names="$(kube get "$kind" "$WEBHOOK_CONFIG" -o jsonpath='{range .webhooks[*]}{.name}{"\n"}{end}')"
    old="$(kube get "$kind" "$WEBHOOK_CONFIG" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')"
    cp "$dir/ca.crt" "$work/bundle.pem"
    if [ -n "$old" ]; then
        printf '%s' "$old" | base64 -d >"$work/old.pem" 2>/dev/null || : >"$work/old.pem"
        # The first certificate of the old bundle: the CA in use until now.
        awk '/-----BEGIN CERTIFICATE-----/{n++} n==1{print} /-----END CERTIFICATE-----/{if(n==1) exit}' \
            "$work/old.pem" >"$work/prev.pem"
        if [ -s "$work/prev.pem" ] && openssl x509 -noout -in "$work/prev.pem" >/dev/null 2>&1 &&
            ! cmp -s <(openssl x509 -outform der -in "$work/prev.pem") <(openssl x509 -outform der -in "$dir/ca.crt") &&
            openssl x509 -noout -checkend 0 -in "$work/prev.pem" >/dev/null 2>&1; then
            cat "$work/prev.pem" >>"$work/bundle.pem"
        fi
    fi
    bundle="$(b64 "$work/bundle.pem")"
    patch="["
    i=0
    while IFS= read -r n; do
        [ -n "$n" ] || continue
        [ "$i" = 0 ] || patch+=","
        patch+="{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$bundle\"}"
        i=$((i + 1))
    done <<<"$names"
    patch+="]"
    [ "$i" -gt 0 ] || continue
    kube patch "$kind" "$WEBHOOK_CONFIG" --type=json -p "$patch" >/dev/null ||
        die "could not patch caBundle of $kind/$WEBHOOK_CONFIG"
    echo "gen-certs.sh: caBundle of $kind/$WEBHOOK_CONFIG updated ($i webhooks)" >&2
    patched=$((patched + 1))
done

# Server-side apply: no last-applied-configuration annotation repeating the key.
kube apply --server-side --force-conflicts --field-manager=gen-certs -f "$dir/secret.yaml" >/dev/null ||
    die "could not apply Secret $NAMESPACE/$SECRET"
echo "gen-certs.sh: Secret $NAMESPACE/$SECRET applied; the kubelet refreshes the mounted files within" \
    "about a minute and the service reloads them (pods that are not running yet start with them)" >&2
[ "$patched" -gt 0 ] || echo "gen-certs.sh: note: no webhook configuration was patched" >&2
exit 0
