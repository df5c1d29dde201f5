#!/usr/bin/env python3
"""scripts/gen-certs.sh: offline (--out DIR) it writes a CA and a serving
certificate for the webhook Service's DNS names, the Secret the Deployment
mounts, a caBundle patch for exactly the webhooks in manifests/, and a
kustomization that builds on manifests/; the real server serves that
certificate on --listen-https and Python's ssl module verifies it against the
CA for every DNS name of the Service (and refuses other names and other CAs);
re-running keeps the CA; in cluster mode (a stand-in kubectl) it patches
caBundle of every webhook before it applies the Secret, server-side, and keeps
the previous CA in the bundle when the CA changes."""

import base64
import json
import os
import socket
import ssl
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_certs")

SERVICE = "gpu-quota-admission-webhook"
NAMESPACE = "kube-system"
DNS_NAMES = [SERVICE, SERVICE + "." + NAMESPACE, SERVICE + "." + NAMESPACE + ".svc",
             SERVICE + "." + NAMESPACE + ".svc.cluster.local"]


CIDR = "10.0.0.0/24"


def gen(s, *args, env=None, cidr=CIDR):
    """gen-certs.sh with args; with --out, also --control-plane-cidr cidr
    (which --out requires) unless cidr is None."""
    e = dict(os.environ)
    e.pop("KUBECTL", None)
    if env:
        e.update(env)
    extra = ["--control-plane-cidr", cidr] if cidr and "--out" in args and args[-1] != "--out" else []
    return ic.run(["bash", s.path("scripts", "gen-certs.sh")] + list(args) + extra, env=e)


def openssl(*args, stdin=None):
    return subprocess.run(["openssl"] + list(args), capture_output=True, text=True, input=stdin, timeout=60)


def cert_text(path):
    return openssl("x509", "-noout", "-text", "-in", path).stdout


def fingerprint(path):
    return openssl("x509", "-noout", "-fingerprint", "-sha256", "-in", path).stdout.strip()


def pem_to_der(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def handshake(port, cafile, name):
    """(negotiated cert DER, /healthz status line) over TLS verified against cafile."""
    ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=name) as tls:
            der = tls.getpeercert(binary_form=True)
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: " + name.encode() + b"\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = tls.recv(4096)
                if not chunk:
                    break
                data += chunk
            return der, data.split(b"\r\n", 1)[0].decode()


@suite.test
def offline_files(s):
    out = s.tempdir("certs")
    r = gen(s, "--out", out)
    s.require(r.returncode == 0, "gen-certs.sh --out succeeds", r.stderr)
    for f in ("ca.crt", "ca.key", "tls.crt", "tls.key", "secret.yaml", "cabundle-validating.yaml",
              "cabundle-mutating.yaml", "kustomization.yaml"):
        s.check(os.path.exists(os.path.join(out, f)), "%s written" % f)
    for f in ("ca.key", "tls.key"):
        s.check_eq(os.stat(os.path.join(out, f)).st_mode & 0o077, 0, "%s is readable by its owner only" % f)
    r = openssl("verify", "-CAfile", os.path.join(out, "ca.crt"), "-purpose", "sslserver", os.path.join(out, "tls.crt"))
    s.check(r.returncode == 0, "openssl verifies tls.crt against ca.crt for TLS servers", r.stdout + r.stderr)
    text = cert_text(os.path.join(out, "tls.crt"))
    for name in DNS_NAMES:
        s.check("DNS:%s," % name in text + "," or "DNS:%s\n" % name in text, "SAN has %s" % name)
    sans = [x.strip()[4:] for x in text.split("Subject Alternative Name:")[1].split("\n")[1].split(",")]
    s.check_eq(sorted(sans), sorted(DNS_NAMES), "SAN is exactly the Service's DNS names")
    s.check("CA:FALSE" in text and "TLS Web Server Authentication" in text, "serving cert: not a CA, server auth")
    ca = cert_text(os.path.join(out, "ca.crt"))
    s.check("CA:TRUE" in ca and "Certificate Sign" in ca, "CA: basicConstraints CA and keyCertSign")
    # Key matches certificate.
    k = openssl("pkey", "-pubout", "-in", os.path.join(out, "tls.key")).stdout
    c = openssl("x509", "-noout", "-pubkey", "-in", os.path.join(out, "tls.crt")).stdout
    s.check(k and k == c, "tls.key is tls.crt's key")
    # 365 days by default.
    r = openssl("x509", "-noout", "-checkend", str(364 * 86400), "-in", os.path.join(out, "tls.crt"))
    s.check(r.returncode == 0, "valid for about a year")
    r = openssl("x509", "-noout", "-checkend", str(366 * 86400), "-in", os.path.join(out, "tls.crt"))
    s.check(r.returncode != 0, "not much longer than a year")


@suite.test
def offline_secret_and_patch(s):
    out = s.tempdir("secret")
    r = gen(s, "--out", out)
    s.require(r.returncode == 0, "gen-certs.sh --out succeeds", r.stderr)
    secret = ic.load_docs(os.path.join(out, "secret.yaml"))[0]
    objs = ic.manifest_objects(s.src)
    dep = ic.find(objs, "Deployment", "gpu-quota-admission", "kube-system")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if "secret" in v)
    s.check_eq((secret["kind"], secret["type"]), ("Secret", "kubernetes.io/tls"), "a kubernetes.io/tls Secret")
    s.check_eq((secret["metadata"]["namespace"], secret["metadata"]["name"]),
               (dep["metadata"]["namespace"], vol["secret"]["secretName"]), "the Secret the Deployment mounts")
    for key, f in (("tls.crt", "tls.crt"), ("tls.key", "tls.key"), ("ca.crt", "ca.crt")):
        with open(os.path.join(out, f), "rb") as fh:
            s.check_eq(base64.b64decode(secret["data"][key]), fh.read(), "Secret %s is %s" % (key, f))
    with open(os.path.join(out, "ca.crt"), "rb") as fh:
        ca_b64 = base64.b64encode(fh.read()).decode()
    # One document per file: kustomize before v5.1 refuses a two-document patch file.
    patches = []
    for f in ("cabundle-validating.yaml", "cabundle-mutating.yaml"):
        docs = ic.load_docs(os.path.join(out, f))
        s.check_eq(len(docs), 1, "%s holds one patch" % f)
        patches += docs
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        want = ic.find(objs, kind, "gpu-quota-admission")
        got = next((p for p in patches if p["kind"] == kind), None)
        s.require(got is not None, "patch for %s" % kind)
        s.check_eq(got["metadata"]["name"], want["metadata"]["name"], "%s patch names the configuration" % kind)
        s.check_eq(sorted(w["name"] for w in got["webhooks"]), sorted(w["name"] for w in want["webhooks"]),
                   "%s patch covers every webhook" % kind)
        s.check(all(w["clientConfig"]["caBundle"] == ca_b64 for w in got["webhooks"]), "%s caBundle is the CA" % kind)
    k = ic.load_docs(os.path.join(out, "kustomization.yaml"))[0]
    s.check_eq(os.path.realpath(os.path.join(out, k["resources"][0])), os.path.realpath(s.path("manifests")),
               "the kustomization builds on manifests/")
    cmd = ic.kubectl_kustomize()
    if not cmd:
        s.skip("kustomize build of --out", "no kubectl/kustomize")
        return
    r = ic.run(cmd + [out])
    s.require(r.returncode == 0, "kubectl kustomize DIR builds", r.stderr)
    built = [d for d in ic.yaml.safe_load_all(r.stdout) if d]
    for o in built:
        if o["kind"].endswith("WebhookConfiguration"):
            for w in o["webhooks"]:
                s.check_eq(w["clientConfig"].get("caBundle"), ca_b64, "built %s has caBundle" % w["name"])
                s.check("service" in w["clientConfig"], "built %s keeps its service" % w["name"])
                s.check(w.get("failurePolicy") in ("Fail", "Ignore"), "built %s keeps its other fields" % w["name"])
    s.check(any(o["kind"] == "Secret" for o in built), "built output includes the Secret")
    s.check_eq(len(built), len(objs) + 1, "built output is manifests/ plus the Secret")


@suite.test
def served_certificate_verifies(s):
    out = s.tempdir("served")
    r = gen(s, "--out", out)
    s.require(r.returncode == 0, "gen-certs.sh --out succeeds", r.stderr)
    ca = os.path.join(out, "ca.crt")
    other = s.tempdir("other")
    r = gen(s, "--out", other)
    s.require(r.returncode == 0, "a second CA", r.stderr)
    with ic.Server(s, https_cert=os.path.join(out, "tls.crt"), https_key=os.path.join(out, "tls.key")) as srv:
        for name in DNS_NAMES:
            try:
                der, status = handshake(srv.https_port, ca, name)
                s.check_eq(der, pem_to_der(os.path.join(out, "tls.crt")), "the server serves tls.crt (%s)" % name)
                s.check("200" in status, "GET /healthz over verified TLS as %s" % name, status)
            except (ssl.SSLError, OSError) as e:
                s.check(False, "TLS to %s verifies against the generated CA" % name, str(e))
        for bad in ("gpu-quota-admission.kube-system.svc", "evil." + NAMESPACE + ".svc"):
            try:
                handshake(srv.https_port, ca, bad)
                s.check(False, "a wrong name (%s) is refused" % bad)
            except ssl.SSLCertVerificationError:
                s.check(True, "a wrong name (%s) is refused" % bad)
        try:
            handshake(srv.https_port, os.path.join(other, "ca.crt"), DNS_NAMES[2])
            s.check(False, "another CA does not verify the certificate")
        except ssl.SSLCertVerificationError:
            s.check(True, "another CA does not verify the certificate")
    s.check_eq(srv.proc.returncode, 0, "the server stops cleanly")


@suite.test
def rerun_keeps_the_ca(s):
    out = s.tempdir("rerun")
    s.require(gen(s, "--out", out).returncode == 0, "first run")
    ca1, leaf1 = fingerprint(os.path.join(out, "ca.crt")), fingerprint(os.path.join(out, "tls.crt"))
    r = gen(s, "--out", out, "--days", "30")
    s.require(r.returncode == 0, "second run", r.stderr)
    s.check_eq(fingerprint(os.path.join(out, "ca.crt")), ca1, "the CA is kept")
    s.check(fingerprint(os.path.join(out, "tls.crt")) != leaf1, "a new serving certificate")
    s.check("kept the CA" in r.stderr, "it says so", r.stderr)
    r = openssl("x509", "-noout", "-checkend", str(31 * 86400), "-in", os.path.join(out, "tls.crt"))
    s.check(r.returncode != 0, "--days 30 is honoured")
    r = gen(s, "--out", out, "--new-ca")
    s.require(r.returncode == 0, "--new-ca", r.stderr)
    s.check(fingerprint(os.path.join(out, "ca.crt")) != ca1, "--new-ca makes a new CA")
    r = openssl("verify", "-CAfile", os.path.join(out, "ca.crt"), os.path.join(out, "tls.crt"))
    s.check(r.returncode == 0, "and signs with it")
    # A CA that would expire before the new certificate is replaced.
    short = s.tempdir("short")
    s.require(gen(s, "--out", short, "--ca-days", "10", "--days", "5").returncode == 0, "short CA")
    ca_short = fingerprint(os.path.join(short, "ca.crt"))
    r = gen(s, "--out", short, "--days", "365")
    s.check(r.returncode == 0 and fingerprint(os.path.join(short, "ca.crt")) != ca_short,
            "an expiring CA is replaced", r.stderr)
    # Options.
    dom = s.tempdir("domain")
    r = gen(s, "--out", dom, "--cluster-domain", "corp.internal", "--namespace", "gpu-system")
    s.require(r.returncode == 0, "--cluster-domain and --namespace", r.stderr)
    text = cert_text(os.path.join(dom, "tls.crt"))
    s.check("DNS:%s.gpu-system.svc.corp.internal" % SERVICE in text, "custom domain and namespace in SAN")
    s.check_eq(ic.load_docs(os.path.join(dom, "secret.yaml"))[0]["metadata"]["namespace"], "gpu-system",
               "Secret in that namespace")
    for bad in (["--out", s.tempdir("b1"), "--days", "0"], ["--out", s.tempdir("b2"), "--namespace", "Bad_NS"],
                ["--bogus"], ["--out"]):
        r = gen(s, *bad)
        s.check_eq(r.returncode, 2, "gen-certs.sh %s is refused" % " ".join(bad))
    # Who may reach port 3456: required with --out, checked, and kept on a re-run.
    nocidr = os.path.join(s.tempdir("nocidr"), "certs")
    r = gen(s, "--out", nocidr, cidr=None)
    s.check(r.returncode == 2 and "--control-plane-cidr" in r.stderr and not os.path.exists(nocidr),
            "--out without --control-plane-cidr is refused before anything is written", r.stderr)
    for bad in ("10.0.0.0", "10.0.0.256/24", "10.0.0.0/33", "fd00::/129", "x/8", "10.0.0.0/24;rm"):
        r = gen(s, "--out", s.tempdir("badcidr"), cidr=bad)
        s.check(r.returncode == 2 and "is not a CIDR" in r.stderr, "--control-plane-cidr %s is refused" % bad,
                r.stderr)
    nets = s.tempdir("nets")
    r = gen(s, "--out", nets, "--control-plane-cidr", "fd00::/64", "--monitoring-namespace", "prom")
    s.require(r.returncode == 0, "two CIDRs and a monitoring namespace", r.stderr)
    patch = ic.load_docs(os.path.join(nets, "networkpolicy-sources.yaml"))[0]
    s.check_eq(patch, [{"op": "replace", "path": "/spec/ingress/0/from", "value": [
        {"ipBlock": {"cidr": "fd00::/64"}}, {"ipBlock": {"cidr": CIDR}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prom"}}}]}],
        "the sources patch lists the CIDRs and the monitoring namespace")
    k = ic.load_docs(os.path.join(nets, "kustomization.yaml"))[0]
    s.check({"path": "networkpolicy-sources.yaml", "target": {"kind": "NetworkPolicy", "name": "gpu-quota-admission"}}
            in k["patches"], "the kustomization applies it to the NetworkPolicy", k)
    r = gen(s, "--out", nets, cidr=None)
    s.check(r.returncode == 0 and ic.load_docs(os.path.join(nets, "networkpolicy-sources.yaml"))[0] == patch,
            "a re-run without the flag keeps the sources", r.stderr)
    inside = os.path.join(s.tmp_root, "copy")
    # --out inside the manifests directory: no self-including kustomization.
    ic.shutil.copytree(s.path("manifests"), os.path.join(inside, "manifests"))
    r = gen(s, "--out", os.path.join(inside, "manifests", "certs"), "--manifests", os.path.join(inside, "manifests"))
    s.check(r.returncode == 0 and not os.path.exists(os.path.join(inside, "manifests", "certs", "kustomization.yaml")),
            "no kustomization inside manifests/", r.stderr)


FAKE_KUBECTL = r'''
import json, os, sys
state_path = sys.argv[1]
with open(state_path) as f:
    st = json.load(f)
args = sys.argv[2:]
st["calls"].append(args)

def save():
    with open(state_path, "w") as f:
        json.dump(st, f)

def fail(msg):
    save()
    sys.stderr.write(msg + "\n")
    sys.exit(1)

if not st.get("reachable", True):
    fail("The connection to the server was refused")
if args[:2] == ["get", "namespace"]:
    save(); print("namespace/" + args[2]); sys.exit(0)
if args[0] == "get" and args[1] in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
    cfg = st["configs"].get(args[1])
    if cfg is None or cfg["name"] != args[2]:
        fail('Error from server (NotFound): %s "%s" not found' % (args[1], args[2]))
    out = args[args.index("-o") + 1]
    if out == "name":
        print("%s/%s" % (args[1], args[2]))
    elif out.startswith("jsonpath={range .webhooks[*]}{.name}"):
        sys.stdout.write("".join(w["name"] + "\n" for w in cfg["webhooks"]))
    elif out == "jsonpath={.webhooks[0].clientConfig.caBundle}":
        sys.stdout.write(cfg["webhooks"][0].get("caBundle", ""))
    else:
        fail("fake kubectl: unexpected -o " + out)
    save(); sys.exit(0)
if args[0] == "patch":
    cfg = st["configs"][args[1]]
    ops = json.loads(args[args.index("-p") + 1])
    for op in ops:
        parts = op["path"].split("/")
        assert op["op"] == "add" and parts[1] == "webhooks" and parts[3:] == ["clientConfig", "caBundle"], op
        cfg["webhooks"][int(parts[2])]["caBundle"] = op["value"]
    save(); print("patched"); sys.exit(0)
if args[0] == "apply":
    with open(args[args.index("-f") + 1]) as f:
        st["applied"].append({"args": args, "content": f.read()})
    save(); print("applied"); sys.exit(0)
fail("fake kubectl: unexpected " + " ".join(args))
'''


def fake_cluster(s, name, configs=True, reachable=True):
    d = s.tempdir(name)
    script = os.path.join(d, "kubectl.py")
    with open(script, "w") as f:
        f.write(FAKE_KUBECTL)
    state = os.path.join(d, "state.json")
    objs = ic.manifest_objects(s.src)
    cfgs = {}
    if configs:
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            o = ic.find(objs, kind, "gpu-quota-admission")
            cfgs[kind.lower()] = {"name": "gpu-quota-admission", "webhooks": [{"name": w["name"]} for w in o["webhooks"]]}
    with open(state, "w") as f:
        json.dump({"configs": cfgs, "calls": [], "applied": [], "reachable": reachable}, f)
    return "%s %s %s" % (sys.executable, script, state), state


def read_state(path):
    with open(path) as f:
        return json.load(f)


def bundle_certs(b64):
    pem = base64.b64decode(b64).decode()
    return [c for c in pem.split("-----END CERTIFICATE-----") if "BEGIN CERTIFICATE" in c]


@suite.test
def cluster_mode(s):
    kubectl, state = fake_cluster(s, "cluster")
    r = gen(s, "--kubectl", kubectl)
    s.require(r.returncode == 0, "cluster mode succeeds", r.stderr)
    st = read_state(state)
    s.check_eq(len(st["applied"]), 1, "the Secret is applied once")
    applied = st["applied"][0]
    s.check("--server-side" in applied["args"], "server-side apply (no last-applied copy of the key)", applied["args"])
    secret = ic.yaml.safe_load(applied["content"])
    s.check_eq((secret["kind"], secret["metadata"]["name"]), ("Secret", "gpu-quota-admission-webhook-tls"), "Secret")
    ca_b64 = secret["data"]["ca.crt"]
    for kind, cfg in st["configs"].items():
        for w in cfg["webhooks"]:
            s.check_eq(w.get("caBundle"), ca_b64, "%s %s: caBundle is the new CA" % (kind, w["name"]))
    order = [c[0] for c in st["calls"] if c[0] in ("patch", "apply")]
    s.check_eq(order, ["patch", "patch", "apply"], "caBundle is patched before the Secret changes")
    # The temporary directory is gone.
    s.check("wrote" not in r.stderr, "nothing written locally without --out")

    # A second run makes a new CA (nothing kept locally): both CAs are trusted.
    r = gen(s, "--kubectl", kubectl)
    s.require(r.returncode == 0, "second cluster-mode run", r.stderr)
    st2 = read_state(state)
    new_ca = base64.b64decode(ic.yaml.safe_load(st2["applied"][-1]["content"])["data"]["ca.crt"]).decode()
    old_ca = base64.b64decode(ca_b64).decode()
    for kind, cfg in st2["configs"].items():
        for w in cfg["webhooks"]:
            certs = bundle_certs(w["caBundle"])
            s.check_eq(len(certs), 2, "%s %s: new and previous CA in the bundle" % (kind, w["name"]))
            pem = base64.b64decode(w["caBundle"]).decode()
            s.check(pem.startswith(new_ca.strip()) and old_ca.strip() in pem, "%s: new CA first, then the old one" % kind)
    # A third run drops the oldest: never more than two.
    s.require(gen(s, "--kubectl", kubectl).returncode == 0, "third run")
    st3 = read_state(state)
    s.check(all(len(bundle_certs(w["caBundle"])) == 2 for cfg in st3["configs"].values() for w in cfg["webhooks"]),
            "the bundle keeps at most the previous CA")

    # --out DIR --apply: the CA is kept, so the bundle is that one CA.
    kubectl, state = fake_cluster(s, "cluster-out")
    out = s.tempdir("cluster-out-dir")
    s.require(gen(s, "--out", out, "--apply", "--kubectl", kubectl).returncode == 0, "--out --apply, first")
    s.require(gen(s, "--out", out, "--apply", "--kubectl", kubectl).returncode == 0, "--out --apply, second")
    st = read_state(state)
    with open(os.path.join(out, "ca.crt"), "rb") as f:
        ca_b64 = base64.b64encode(f.read()).decode()
    s.check(all(w["caBundle"] == ca_b64 for cfg in st["configs"].values() for w in cfg["webhooks"]),
            "with a kept CA the bundle is just that CA")

    # No webhook configurations yet: cluster mode only renews. It changes
    # nothing (a Secret ahead of the manifests invites the unsafe order) and
    # prints the install order.
    for args in ((), ("--out", s.tempdir("bare-out"), "--apply")):
        kubectl, state = fake_cluster(s, "cluster-bare", configs=False)
        r = gen(s, *args, "--kubectl", kubectl)
        st = read_state(state)
        s.check_eq(r.returncode, 2, "cluster mode %s without webhook configurations is refused" % " ".join(args))
        s.check_eq((st["applied"], [c for c in st["calls"] if c[0] == "patch"]), ([], []),
                   "nothing is applied or patched %s" % " ".join(args))
        s.check("--out ../gqa-certs --control-plane-cidr CIDR && kubectl apply -k ../gqa-certs" in r.stderr,
                "it prints the install order", r.stderr)

    # Offline mode never calls kubectl.
    kubectl, state = fake_cluster(s, "offline")
    s.require(gen(s, "--out", s.tempdir("offline-dir"), "--kubectl", kubectl).returncode == 0, "offline run")
    s.check_eq(read_state(state)["calls"], [], "offline mode does not touch the cluster")

    # An unreachable cluster is an error.
    kubectl, state = fake_cluster(s, "down", reachable=False)
    r = gen(s, "--kubectl", kubectl)
    s.check_eq(r.returncode, 2, "an unreachable cluster is refused")


if __name__ == "__main__":
    sys.exit(suite.main())
