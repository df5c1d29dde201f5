"""Install on the real API server (issue 23 item 2):

- `kubectl kustomize manifests/` renders, and so do its optional components;
  the API server accepts all of it (server-side dry run), and the install
  of README/docs (scripts/gen-certs.sh, then `kubectl apply -k` on its
  output) applies for real;
- the product runs with exactly the rights its ClusterRole and Roles grant
  (a token of its ServiceAccount from `kubectl create token`), with leader
  election on the real Lease and the leader label on its (stand-in) pod;
- with one rule removed it fails clearly: /readyz names what is forbidden,
  or it exits non-zero;
- the webhooks registered from the manifests are called by the real API
  server through the service proxy path (Endpoints of the webhook Service,
  the CONNECT egress), the product serving HTTPS with the certificate from
  scripts/gen-certs.sh: an invalid CustomResourceLimitation ConfigMap is
  refused by `kubectl apply`, a valid one is accepted, and a pod gets its
  CRL defaults from the mutating webhook.

python3 test_install.py --binary build/release/gpu-quota-admission --source-dir .
"""

import json
import os
import subprocess
import time

from realcp_suite import RealcpSuite, sa_kubeconfig, yaml
from controlplane import http_get

suite = RealcpSuite("realcp install")

NS = "kube-system"
SA = "gpu-quota-admission"
POD = "gpu-quota-admission-0"        # stand-in for the Deployment's pod


def kustomize(s, path):
    r = s.cp.kubectl("kustomize", path, check=False)
    s.check_eq(r.returncode, 0, "kubectl kustomize %s renders" % os.path.relpath(path, s.source_dir), r.err)
    return r.out


@suite.test
def test_kustomize_renders_and_dry_runs(s):
    cp = s.cp
    out = kustomize(s, s.path("manifests"))
    kinds = sorted({d["kind"] for d in yaml.safe_load_all(out) if d})
    for k in ("ClusterRole", "Deployment", "Service", "ValidatingWebhookConfiguration",
              "MutatingWebhookConfiguration", "ConfigMap", "NetworkPolicy", "DaemonSet"):
        s.check_in(k, kinds, "manifests/ renders a %s" % k)
    r = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=out, check=False)
    s.check_eq(r.returncode, 0, "the API server accepts manifests/ (server-side dry run)", r.err + r.out)
    # The optional components, each on top of manifests/ as the docs enable them.
    comps = os.path.join(s.source_dir, "manifests", "components")
    for comp in sorted(os.listdir(comps)):
        if comp == "monitoring" or comp == "cert-manager":
            continue   # need prometheus-operator / cert-manager CRDs this cluster does not have
        d = os.path.join(cp.dir, "overlay-" + comp)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\n"
                    "components:\n- %s\n" % (os.path.relpath(s.path("manifests"), d),
                                              os.path.relpath(os.path.join(comps, comp), d)))
        text = kustomize(s, d)
        r = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False)
        s.check_eq(r.returncode, 0, "the API server accepts manifests/ with components/%s (dry run)" % comp,
                   r.err + r.out)


@suite.test
def test_install_applies(s):
    """Install step 1 and 2 as the README says: gen-certs.sh, apply -k."""
    cp = s.cp
    s.certs = os.path.join(cp.dir, "gqa-certs")
    r = subprocess.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", s.certs,
                        "--control-plane-cidr", "127.0.0.1/32", "--manifests", s.path("manifests")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    s.require(r.returncode == 0, "scripts/gen-certs.sh --out DIR", r.stdout.decode())
    r = cp.kubectl("apply", "-k", s.certs, check=False)
    s.require(r.returncode == 0, "kubectl apply -k gqa-certs applies to the real API server", r.err + r.out)
    vwc = cp.admin.get("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpu-quota-admission")
    s.check(all(w["clientConfig"].get("caBundle") for w in vwc["webhooks"]),
            "the validating webhooks carry the caBundle")
    s.installed = True


def start_as_sa(s, kubeconfig, wait_ready=True, name="gqa-sa"):
    cp = s.cp
    return cp.start_product(
        s.binary, kubeconfig=kubeconfig, name=name, wait_ready=wait_ready,
        tls=(os.path.join(s.certs, "tls.crt"), os.path.join(s.certs, "tls.key")),
        flags=["--leader-elect", "--lease-namespace", NS, "--lease-name", "gpu-quota-admission"],
        env={"POD_NAME": POD, "POD_NAMESPACE": NS, "GQA_PLACEMENT": "filter"})


@suite.test
def test_runs_with_its_own_rights(s):
    cp = s.cp
    s.require(getattr(s, "installed", False), "installed")
    cp.stand_in_pod(NS, POD, labels={"app.kubernetes.io/name": "gpu-quota-admission"})
    s.kubeconfig = sa_kubeconfig(s, NS, SA)
    s.prod = start_as_sa(s, s.kubeconfig)
    s.check_eq(http_get(s.prod.port, "/readyz")[0], 200, "ready with the ServiceAccount's token")
    lease = cp.wait_for(lambda: cp.admin.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/gpu-quota-admission"
                                             % NS, ok=(200,)), 60, "the Lease exists")
    s.check(lease["spec"].get("holderIdentity"), "the Lease has a holder", lease)
    labels = cp.wait_for(lambda: (cp.get_pod(POD, NS)["metadata"].get("labels") or {}).get(
        "gpu-admission.io/leader") == "true" and True, 60, "the leader labels its pod")
    s.check(labels, "the leader labelled its pod gpu-admission.io/leader=true")
    log = s.prod.log(0)
    s.check("forbidden" not in log.lower(), "no 'forbidden' in the service's log", log[-3000:])


@suite.test
def test_webhooks_called_by_the_api_server(s):
    cp = s.cp
    s.require(getattr(s, "prod", None) is not None, "the service runs")
    # The webhook Service: named port https; Endpoints to the HTTPS listener.
    cp.point_service_at("gpu-quota-admission-webhook", s.prod.https_port, ns=NS, port_name="https", stand_in=POD)
    before = cp.proxy.bytes_sent(s.prod.https_port)
    bad = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cf-crl-realcp-widget", "namespace": "kube-public",
                        "labels": {"features.alauda.io/type": "CustomResourceLimitation",
                                   "features.alauda.io/group": "realcp", "features.alauda.io/enabled": "true"}},
           "data": {"key": "realcp.example.com/widget", "dataType": "integer", "defaultValue": "not-a-number",
                    "group": "realcp", "limits": "optional", "requests": "disabled"}}

    def refused():
        r = cp.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
        return r if r.returncode != 0 and "denied the request" in r.err else None
    r = cp.wait_for(refused, 60, "kubectl apply of an invalid CRL is refused by the webhook")
    s.check_in('admission webhook "crl-configmaps.gpu-admission.io" denied the request', r.err,
               "kubectl apply names the CRL webhook")
    print("    kubectl apply (invalid CRL): %s" % r.err.strip(), flush=True)
    s.check(cp.proxy.bytes_sent(s.prod.https_port) > before,
            "the API server reached the webhook through the egress CONNECT proxy")
    s.check_eq(cp.admin.request("GET", "/api/v1/namespaces/kube-public/configmaps/cf-crl-realcp-widget",
                                ok=None, raw=True)[0], 404, "the invalid CRL was not stored")
    good = json.loads(json.dumps(bad))
    good["data"]["defaultValue"] = "3"
    r = cp.kubectl("apply", "-f", "-", input=json.dumps(good), check=False)
    s.check_eq(r.returncode, 0, "a valid CRL ConfigMap is accepted", r.err)
    # The mutating webhook: vcuda-core alone gets vcuda-memory's default (the gpu-manager group).
    cp.create_pod(cp.pod("crl-defaults", {"tencent.com/vcuda-core": "20"}))
    lim = cp.get_pod("crl-defaults")["spec"]["containers"][0]["resources"].get("limits", {})
    s.check("tencent.com/vcuda-memory" in lim, "the mutating webhook added vcuda-memory's default", lim)
    cp.delete_pod("crl-defaults")


@suite.test
def test_fails_clearly_without_one_rule(s):
    """The quota Role's RoleBinding removed: the service cannot read the
    quota ConfigMap, and must say so (readyz reason or exit), not hang."""
    cp = s.cp
    s.require(getattr(s, "prod", None) is not None, "the service runs")
    s.check_eq(cp.stop_product(s.prod), 0, "the service exits 0 on SIGTERM", s.prod.log())
    s.prod = None
    for rule in ("rolebinding/gpu-quota-admission-quota", "rolebinding/gpu-quota-admission-crl"):
        kind, name = rule.split("/")
        ns = NS if name.endswith("quota") else "kube-public"
        saved = cp.kubectl("-n", ns, "get", kind, name, "-o", "json").out
        cp.kubectl("-n", ns, "delete", kind, name)
        try:
            t0 = time.monotonic()
            prod = start_as_sa(s, s.kubeconfig, wait_ready=False, name="gqa-no-" + name)

            seen = []

            def verdict():
                if not prod.alive():
                    return ("exit", prod.proc.returncode, prod.log())
                st, body = http_get(prod.port, "/readyz")
                if not seen or seen[-1][1] != body:
                    seen.append((round(time.monotonic() - t0, 1), body))
                if st != 200 and "configmaps" in body and ("forbidden" in body.lower() or "403" in body):
                    return ("readyz", st, body)
                if st == 200:
                    return ("ready", st, body)
                return None
            try:
                v = cp.wait_for(verdict, 60, "a verdict without %s" % rule)
            except Exception as e:   # noqa: BLE001 - reported below
                st = http_get(prod.port, "/readyz") if prod.alive() else None
                v = ("silent", st, "%s\n%s" % (e, prod.log()))
            print("    without %s: %s %s" % (rule, v[0], str(v[1])), flush=True)
            for at, body in seen:
                print("      /readyz at %.1fs: %s" % (at, body.strip()[:300]), flush=True)
            s.check(v[0] == "readyz" or (v[0] == "exit" and v[1] != 0),
                    "without %s the service fails clearly (readyz names the forbidden configmaps, or exits "
                    "non-zero)" % rule, v)
            if prod.alive():
                cp.stop_product(prod)
        finally:
            cp.kubectl("apply", "-f", "-", input=saved)


@suite.test
def test_decisions_fail_clearly_without_pod_patch(s):
    """The ClusterRole without `patch` on pods: the service is ready (it can
    list and watch) but cannot record a decision; the GPU pod stays Pending
    and its FailedScheduling event says why (the 403), rather than being
    bound without its GPU annotations."""
    from realcp_suite import direct_extender
    cp = s.cp
    s.require(getattr(s, "installed", False), "installed")
    saved = json.loads(cp.kubectl("get", "clusterrole", "gpu-quota-admission", "-o", "json").out)
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        saved["metadata"].pop(k, None)
    role = json.loads(json.dumps(saved))
    for rule in role["rules"]:
        if rule.get("resources") == ["pods"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    cp.kubectl("replace", "-f", "-", input=json.dumps(role))
    cp.add_node("gpu-rbac-0", {"tencent.com/vcuda-core": "100", "tencent.com/vcuda-memory": "64"})
    prod = None
    sched = None
    try:
        prod = cp.start_product(s.binary, kubeconfig=s.kubeconfig, name="gqa-no-patch",
                                flags=["--placement", "filter"])
        ext = direct_extender(prod.port, bind=False, node_cache=False)
        for k in ("prioritizeVerb", "weight"):
            ext.pop(k)
        sched = cp.start_scheduler(cp.scheduler_config([ext]), name="sched-no-patch")
        cp.create_pod(cp.pod("no-patch", {"tencent.com/vcuda-core": "20", "tencent.com/vcuda-memory": "4"}))
        ev = cp.wait_event("no-patch", "FailedScheduling", "403", timeout=90)
        print("    FailedScheduling without pods patch: %s" % ev["message"][:400], flush=True)
        s.check("forbidden" in ev["message"].lower(), "the event names the refused patch", ev["message"])
        s.check_eq(cp.get_pod("no-patch")["spec"].get("nodeName"), None, "the pod is not bound without its GPUs")
    finally:
        if sched:
            cp.stop_scheduler(sched)
        cp.delete_all_pods()
        if prod:
            s.check_eq(cp.stop_product(prod), 0, "gpu-quota-admission exits 0", prod.log())
        cp.kubectl("replace", "-f", "-", input=json.dumps(saved))


if __name__ == "__main__":
    suite.main()
