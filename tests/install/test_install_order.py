#!/usr/bin/env python3
"""The install order: one order, written identically in README.md,
docs/install.md, manifests/kustomization.yaml and scripts/gen-certs.sh, and
safe at every step on an empty cluster.

Each install is carried out as documented against the API simulator (an empty
cluster: only the default namespaces, with namespaces enforced): step 1 as
written, then the real `kubectl apply -k DIR` pointed at the simulator. The
simulator's history then gives the order in which kubectl created the objects,
and every object is checked against what existed just before it:

- a pod template's Secrets, ConfigMaps and ServiceAccount exist;
- a (Cluster)RoleBinding's role and ServiceAccount subjects exist;
- a webhook configuration carries caBundle, its Service exists, and the
  serving certificate in the Secret mounted by the pods behind that Service
  verifies against that caBundle for the Service's DNS name.

Both installs are covered: with the webhooks (certificates from
scripts/gen-certs.sh) and without them (components/no-webhooks). The old
order (`kubectl apply -k manifests/` first) is applied too, and the same
checks must catch it, so the checks are known to bite.

Needs kubectl (kustomize inside it); skipped with a message without it."""

import base64
import glob
import os
import re
import shutil
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_install_order")

ORDER_FILES = ("README.md", "docs/install.md", "manifests/kustomization.yaml", "scripts/gen-certs.sh")
BLOCK_START = "Install order (the same in"
BLOCK_END = "Secret that does not exist while GPU pods stay Pending."
# An empty cluster has these (kube-node-lease and default included).
EMPTY_CLUSTER_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job")


# ---------------------------------------------------------------------------
# The documented order
# ---------------------------------------------------------------------------

def order_block(path):
    """The install-order lines of one file, comment markers removed, or None."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, line in enumerate(lines) if BLOCK_START in line), None)
    if start is None:
        return None
    end = next((i for i in range(start, len(lines)) if BLOCK_END in lines[i]), None)
    if end is None:
        return None
    out = []
    for line in lines[start:end + 1]:
        if path.endswith((".yaml", ".sh")):
            if not line.startswith("#"):
                return None
            line = line[2:] if line.startswith("# ") else line[1:]
        out.append(line.rstrip())
    return out


def documented_steps(block):
    """(steps with the webhooks, steps without), each a list of step texts."""
    split = next(i for i, line in enumerate(block) if line.startswith("Without the admission webhooks"))
    steps = [[], []]
    for i, line in enumerate(block):
        m = re.match(r"^  (\d)\. (.+)$", line)
        if m:
            steps[i > split].append(m.group(2).strip())
    return steps


def readme_block(s):
    block = order_block(s.path("README.md"))
    s.require(block is not None, "README.md has the install order")
    return block


@suite.test
def written_identically(s):
    readme = readme_block(s)
    for name in ORDER_FILES[1:]:
        got = order_block(s.path(name))
        s.require(got is not None, "%s has the install order block" % name)
        s.check_eq(got, readme, "%s writes the install order exactly as README.md does" % name)
    with_webhooks, without = documented_steps(readme)
    s.check(len(with_webhooks) == 2, "two steps with the webhooks", with_webhooks)
    s.check(len(without) == 2, "two steps without them", without)


# ---------------------------------------------------------------------------
# The simulator and kubectl
# ---------------------------------------------------------------------------

def import_apisim(s):
    sys.path.insert(0, s.path("tests", "apisim"))
    import apisim  # noqa: E402
    return apisim


def kubectl_or_skip(s, what):
    kubectl = shutil.which("kubectl")
    if kubectl and ic.run([kubectl, "kustomize", "--help"]).returncode == 0:
        return kubectl
    s.skip(what, "kubectl (with kustomize) is not installed: cannot render or apply the manifests")
    return None


class EmptyCluster:
    """The API simulator holding what a new cluster has, namespaces enforced."""

    def __init__(self, s):
        apisim = import_apisim(s)
        self.sim = apisim.APISim(require_namespaces=True).start()
        for ns in EMPTY_CLUSTER_NAMESPACES:
            self.sim.create("namespaces", {"metadata": {"name": ns}})
        self.start_rv = self.sim.rv
        d = s.tempdir("kubeconfig-%d" % self.sim.port)
        self.kubeconfig = self.sim.write_kubeconfig(os.path.join(d, "config"))

    def apply(self, kubectl, directory):
        """`kubectl apply -k directory`, the real client, against this cluster."""
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        return ic.run([kubectl, "apply", "-k", directory, "--validate=false"], env=env, timeout=180)

    def created(self):
        """Every object created since the start, in creation order."""
        with self.sim.cond:
            return [ev.obj for ev in self.sim.history if ev.rv > self.start_rv and ev.type == "ADDED"]

    def stop(self):
        self.sim.stop()


# ---------------------------------------------------------------------------
# What an object refers to, against what exists before it
# ---------------------------------------------------------------------------

def key(obj):
    md = obj.get("metadata") or {}
    return (obj.get("kind"), md.get("namespace") or "", md.get("name"))


def pod_template_refs(obj):
    """(kind, name) of every Secret, ConfigMap and ServiceAccount a workload's
    pods need to start (optional ones left out)."""
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    refs = []
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if sa and sa != "default":
        refs.append(("ServiceAccount", sa))
    for v in spec.get("volumes") or []:
        sec, cm = v.get("secret"), v.get("configMap")
        if sec and not sec.get("optional"):
            refs.append(("Secret", sec.get("secretName")))
        if cm and not cm.get("optional"):
            refs.append(("ConfigMap", cm.get("name")))
        for src in (v.get("projected") or {}).get("sources") or []:
            for kind, field in (("Secret", "secret"), ("ConfigMap", "configMap")):
                ref = src.get(field)
                if ref and not ref.get("optional"):
                    refs.append((kind, ref.get("name")))
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for e in c.get("env") or []:
            vf = e.get("valueFrom") or {}
            for kind, field in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                ref = vf.get(field)
                if ref and not ref.get("optional"):
                    refs.append((kind, ref.get("name")))
        for ef in c.get("envFrom") or []:
            for kind, field in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
                ref = ef.get(field)
                if ref and not ref.get("optional"):
                    refs.append((kind, ref.get("name")))
    return refs


def openssl_verify(s, bundle_pem, cert_pem, hostname):
    d = s.tempdir("verify")
    with open(os.path.join(d, "bundle.pem"), "w") as f:
        f.write(bundle_pem)
    with open(os.path.join(d, "cert.pem"), "w") as f:
        f.write(cert_pem)
    r = ic.run(["openssl", "verify", "-CAfile", os.path.join(d, "bundle.pem"), "-verify_hostname", hostname,
                "-purpose", "sslserver", os.path.join(d, "cert.pem")])
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def webhook_problems(s, obj, state):
    out = []
    for w in obj.get("webhooks") or []:
        where = "%s %s" % (obj["kind"], w.get("name"))
        cc = w.get("clientConfig") or {}
        bundle_b64 = cc.get("caBundle") or ""
        try:
            bundle = base64.b64decode(bundle_b64, validate=True).decode()
        except ValueError:
            bundle = ""
        if "BEGIN CERTIFICATE" not in bundle:
            out.append("%s: no caBundle (the API server cannot trust the webhook; failurePolicy %s)"
                       % (where, w.get("failurePolicy", "Fail")))
        svc_ref = cc.get("service")
        if not svc_ref:
            continue
        ns, name = svc_ref.get("namespace"), svc_ref.get("name")
        svc = state.get(("Service", ns, name))
        if svc is None:
            out.append("%s: Service %s/%s does not exist" % (where, ns, name))
            continue
        port = svc_ref.get("port", 443)
        if port not in [p.get("port") for p in (svc.get("spec") or {}).get("ports") or []]:
            out.append("%s: Service %s/%s has no port %s" % (where, ns, name, port))
        selector = {"matchLabels": (svc.get("spec") or {}).get("selector") or {}}
        backends = [o for (kind, ons, _), o in state.items() if kind in WORKLOADS and ons == ns and
                    ic.labels_match(selector, ((o["spec"].get("template") or {}).get("metadata") or {}).get("labels"))]
        if not backends:
            out.append("%s: no workload behind Service %s/%s" % (where, ns, name))
            continue
        for wl in backends:
            secrets = [n for kind, n in pod_template_refs(wl) if kind == "Secret"]
            if not secrets:
                out.append("%s: %s %s mounts no serving certificate" % (where, wl["kind"], wl["metadata"]["name"]))
            for sec_name in secrets:
                secret = state.get(("Secret", ns, sec_name))
                crt = ((secret or {}).get("data") or {}).get("tls.crt")
                if not crt or "BEGIN CERTIFICATE" not in bundle:
                    out.append("%s: no certificate in Secret %s/%s to check against caBundle" % (where, ns, sec_name))
                    continue
                ok, why = openssl_verify(s, bundle, base64.b64decode(crt).decode(), "%s.%s.svc" % (name, ns))
                if not ok:
                    out.append("%s: the certificate in Secret %s/%s does not verify against caBundle for %s.%s.svc: %s"
                               % (where, ns, sec_name, name, ns, why))
    return out


def problems_at(s, obj, state):
    """What obj refers to that does not exist in state (the objects created before it)."""
    kind, ns, name = key(obj)
    out = []
    if ns and ns not in EMPTY_CLUSTER_NAMESPACES and ("Namespace", "", ns) not in state:
        out.append("namespace %s does not exist" % ns)
    if kind in WORKLOADS:
        for rkind, rname in pod_template_refs(obj):
            if (rkind, ns, rname) not in state:
                out.append("%s %s/%s: its pods need %s %s/%s, which does not exist yet"
                           % (kind, ns, name, rkind, ns, rname))
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        ref = obj.get("roleRef") or {}
        rns = ns if ref.get("kind") == "Role" else ""
        if (ref.get("kind"), rns, ref.get("name")) not in state:
            out.append("%s %s: roleRef %s %s does not exist yet" % (kind, name, ref.get("kind"), ref.get("name")))
        for sub in obj.get("subjects") or []:
            if sub.get("kind") == "ServiceAccount" and ("ServiceAccount", sub.get("namespace"), sub.get("name")) \
                    not in state:
                out.append("%s %s: ServiceAccount %s/%s does not exist yet"
                           % (kind, name, sub.get("namespace"), sub.get("name")))
    if kind.endswith("WebhookConfiguration"):
        out += webhook_problems(s, obj, state)
    return out


def walk(s, objs):
    """Every problem, object by object in creation order, and the final state."""
    state, problems = {}, []
    for o in objs:
        problems += problems_at(s, o, state)
        state[key(o)] = o
    return problems, state


def rendered(s, kubectl, directory):
    r = ic.run([kubectl, "kustomize", directory])
    s.require(r.returncode == 0, "kubectl kustomize %s renders" % directory, r.stderr)
    return [d for d in ic.yaml.safe_load_all(r.stdout) if d]


def install(s, kubectl, directory, label):
    """Apply directory to an empty cluster; (objects in creation order, problems, state)."""
    cluster = EmptyCluster(s)
    try:
        r = cluster.apply(kubectl, directory)
        s.require(r.returncode == 0, "%s: kubectl apply -k succeeds on an empty cluster" % label,
                  r.stdout + r.stderr)
        objs = cluster.created()
    finally:
        cluster.stop()
    want = sorted(key(o) for o in rendered(s, kubectl, directory))
    s.check_eq(sorted(key(o) for o in objs), want, "%s: every rendered object was created" % label)
    problems, state = walk(s, objs)
    return objs, problems, state


# ---------------------------------------------------------------------------
# The installs
# ---------------------------------------------------------------------------

INSTALL_CIDR = "198.51.100.0/24"


def verb_sources(np):
    """The ipBlock CIDRs the NetworkPolicy admits on port 3456."""
    return [src["ipBlock"]["cidr"] for r in np["spec"].get("ingress") or []
            if any(p.get("port") == 3456 for p in r.get("ports") or [])
            for src in r.get("from") or [] if "ipBlock" in src]


def args_of(dep):
    return dep["spec"]["template"]["spec"]["containers"][0].get("args") or []


@suite.test
def with_webhooks(s):
    kubectl = kubectl_or_skip(s, "install with the webhooks")
    if not kubectl:
        return
    step1, step2 = documented_steps(readme_block(s))[0]
    m1 = re.fullmatch(r"scripts/gen-certs\.sh --out (\S+) --control-plane-cidr CIDR", step1)
    m2 = re.fullmatch(r"kubectl apply -k (\S+)", step2)
    s.require(m1 and m2 and m1.group(1) == m2.group(1),
              "step 1 writes the directory that step 2 applies", (step1, step2))
    certs = os.path.join(s.tempdir("install"), os.path.basename(m1.group(1)))
    # Step 1 without the CIDR: refused, and nothing written (the NetworkPolicy would admit nobody).
    r = ic.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", certs], cwd=s.src)
    s.check(r.returncode != 0 and "--control-plane-cidr" in r.stderr, "step 1 without a CIDR is refused, saying "
            "which flag is missing", r.stderr)
    s.check(not os.path.exists(certs), "and writes nothing")
    # Step 1, as written (the directory is a fresh one outside the repository).
    r = ic.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", certs, "--control-plane-cidr", INSTALL_CIDR],
               cwd=s.src)
    s.require(r.returncode == 0, "step 1: %s" % step1, r.stderr)
    # Step 2 against an empty cluster.
    objs, problems, state = install(s, kubectl, certs, "with webhooks")
    np = state.get(("NetworkPolicy", "kube-system", "gpu-quota-admission"))
    s.require(np is not None, "the NetworkPolicy is installed")
    s.check_eq(verb_sources(np), [INSTALL_CIDR], "port 3456 admits the control-plane CIDR of step 1 (and no "
               "placeholder)")
    s.check_eq(problems, [], "with webhooks: nothing refers to a Secret, CA or object that does not exist yet")
    kinds = [o["kind"] for o in objs]
    s.check(kinds.index("Secret") < kinds.index("Deployment"), "the Secret is created before the Deployment", kinds)
    for k in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        s.require(k in kinds, "%s is installed" % k, kinds)
        s.check(kinds.index(k) > max(i for i, x in enumerate(kinds) if not x.endswith("WebhookConfiguration")),
                "%s comes after everything it calls or checks" % k, kinds)
        s.check(all(w["clientConfig"].get("caBundle") for w in state[(k, "", "gpu-quota-admission")]["webhooks"]),
                "%s is created with caBundle on every webhook" % k)
    crl_first = [i for i, o in enumerate(objs) if o["kind"] == "ConfigMap" and
                 o["metadata"]["name"].startswith("cf-crl-")]
    s.check(crl_first and max(crl_first) < kinds.index("ValidatingWebhookConfiguration"),
            "the CRL ConfigMaps exist before the webhook that checks them", kinds)


@suite.test
def without_webhooks(s):
    kubectl = kubectl_or_skip(s, "install without the webhooks")
    if not kubectl:
        return
    step1, step2 = documented_steps(readme_block(s))[1]
    s.require(step1.startswith("enable components/no-webhooks (in manifests/kustomization.yaml"),
              "step 1 enables components/no-webhooks in manifests/kustomization.yaml", step1)
    s.require(step2.startswith("kubectl apply -k manifests/"), "step 2 applies manifests/", step2)
    # Step 1, as written: in a copy of manifests/, enable the component.
    copy = os.path.join(s.tempdir("no-webhooks"), "manifests")
    shutil.copytree(s.path("manifests"), copy)
    kfile = os.path.join(copy, "kustomization.yaml")
    k = ic.load_docs(kfile)[0]
    k["components"] = (k.get("components") or []) + ["components/no-webhooks"]
    with open(kfile, "w") as f:
        ic.yaml.safe_dump(k, f, sort_keys=False)
    s.require("put the control-plane CIDR in manifests/networkpolicy-sources.yaml" in " ".join(
        line.strip() for line in readme_block(s)), "step 1 says where the control-plane CIDR goes")
    sfile = os.path.join(copy, "networkpolicy-sources.yaml")
    sources = ic.load_docs(sfile)[0]
    sources[0]["value"][0]["ipBlock"]["cidr"] = INSTALL_CIDR
    with open(sfile, "w") as f:
        ic.yaml.safe_dump(sources, f, sort_keys=False)
    objs, problems, state = install(s, kubectl, copy, "without webhooks")
    s.check_eq(verb_sources(state[("NetworkPolicy", "kube-system", "gpu-quota-admission")]), [INSTALL_CIDR],
               "without webhooks: port 3456 admits the CIDR put in networkpolicy-sources.yaml")
    s.check_eq(problems, [], "without webhooks: nothing refers to anything that does not exist yet")
    kinds = {o["kind"] for o in objs}
    s.check(not {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} & kinds,
            "no webhook configuration is installed", sorted(kinds))
    s.check(("Service", "kube-system", "gpu-quota-admission-webhook") not in state, "no webhook Service")
    for (kind, ns, name), o in state.items():
        if kind in WORKLOADS:
            s.check_eq([r for r in pod_template_refs(o) if r[0] == "Secret"], [],
                       "%s %s refers to no Secret (no certificate to make)" % (kind, name))
    dep = state[("Deployment", "kube-system", "gpu-quota-admission")]
    args = args_of(dep)
    s.check(not [a for a in args if a.startswith(("--listen-https", "--tls-"))], "no HTTPS listener", args)
    s.check("--listen-http=[::]:3456" in args, "the extender listener stays", args)
    flags = ic.help_flags(s.args.binary)
    for a in args:
        s.check(a[2:].partition("=")[0] in flags, "flag %s is one the binary knows" % a)
    ports = [p["containerPort"] for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]]
    s.check_eq(ports, [3456, 8081], "only the HTTP and probe ports are declared")
    # Every Service that stays points at a declared port of the pods.
    names = {p.get("name") for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]}
    for (kind, ns, name), o in state.items():
        if kind == "Service":
            for p in o["spec"]["ports"]:
                s.check(p.get("targetPort") in names | set(ports), "Service %s targets a port the pods have" % name)


@suite.test
def unsafe_order_is_caught(s):
    """`kubectl apply -k manifests/` first (the order gen-certs.sh once
    documented): the checks above must flag it."""
    kubectl = kubectl_or_skip(s, "the unsafe order")
    if not kubectl:
        return
    _, problems, _ = install(s, kubectl, s.path("manifests"), "manifests/ alone")
    text = "\n".join(problems)
    s.check("need Secret kube-system/gpu-quota-admission-webhook-tls, which does not exist yet" in text,
            "the Deployment waiting for a Secret that does not exist is caught", text)
    s.check("ValidatingWebhookConfiguration crl-configmaps.gpu-admission.io: no caBundle" in text,
            "the CRL webhook without caBundle is caught", text)


@suite.test
def kustomize_versions_agree(s):
    """kubectl picks its kustomize by version (the one on this machine
    dispatches to kubectl.1.NN by the server's version): every version here
    renders both installs, and alike. kustomize before v5.1 refuses a patch
    file with two documents, which once broke step 2 on kubectl 1.27-1.30."""
    kubectl = kubectl_or_skip(s, "kustomize versions")
    if not kubectl:
        return
    versions = sorted(glob.glob(os.path.join(os.path.dirname(os.path.realpath(kubectl)), "kubectl.1.*")))
    if not versions:
        s.skip("kustomize versions", "only one kubectl here")
        return
    certs = os.path.join(s.tempdir("versions"), "gqa-certs")
    s.require(ic.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", certs, "--control-plane-cidr", "10.0.0.0/24"]).returncode == 0, "gen-certs.sh")
    overlay = s.tempdir("versions-overlay")
    with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
        f.write("resources:\n- %s\ncomponents:\n- %s\n" % (
            os.path.relpath(s.path("manifests"), overlay),
            os.path.relpath(s.path("manifests", "components", "no-webhooks"), overlay)))
    for directory in (certs, overlay):
        want = ic.run([kubectl, "kustomize", directory]).stdout
        for v in versions:
            r = ic.run([v, "kustomize", directory])
            s.check(r.returncode == 0 and r.stdout == want, "%s renders %s as kubectl does"
                    % (os.path.basename(v), os.path.basename(directory)), r.stderr[-600:])


if __name__ == "__main__":
    sys.exit(suite.main())
