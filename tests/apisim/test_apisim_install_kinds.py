#!/usr/bin/env python3
"""apisim: the kinds an install applies (Secrets, Services, ServiceAccounts,
Deployments, DaemonSets, RBAC, PodDisruptionBudgets, NetworkPolicies,
Validating/MutatingWebhookConfigurations), served like the real API server:
discovery, their group/version paths, namespaced or cluster scope, create,
get, list, patch (including the JSON patch scripts/gen-certs.sh sends for
caBundle), delete; and the require_namespaces setting (404 for a namespace
that does not exist)."""
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

TOKEN = "install-token"

# (collection path, kind, apiVersion, namespaced)
KINDS = [
    ("/api/v1/namespaces/kube-system/secrets", "Secret", "v1", True),
    ("/api/v1/namespaces/kube-system/services", "Service", "v1", True),
    ("/api/v1/namespaces/kube-system/serviceaccounts", "ServiceAccount", "v1", True),
    ("/apis/apps/v1/namespaces/kube-system/deployments", "Deployment", "apps/v1", True),
    ("/apis/apps/v1/namespaces/kube-system/daemonsets", "DaemonSet", "apps/v1", True),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public/roles", "Role", "rbac.authorization.k8s.io/v1", True),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public/rolebindings", "RoleBinding",
     "rbac.authorization.k8s.io/v1", True),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole", "rbac.authorization.k8s.io/v1", False),
    ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "ClusterRoleBinding",
     "rbac.authorization.k8s.io/v1", False),
    ("/apis/policy/v1/namespaces/kube-system/poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", True),
    ("/apis/networking.k8s.io/v1/namespaces/kube-system/networkpolicies", "NetworkPolicy", "networking.k8s.io/v1",
     True),
    ("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
     "admissionregistration.k8s.io/v1", False),
    ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
     "admissionregistration.k8s.io/v1", False),
]


def new_sim(**kw):
    kw.setdefault("tokens", [TOKEN])
    sim = apisim.APISim(**kw).start()
    return sim, apisim.Client(sim.url, token=TOKEN)


def test_discovery_lists_the_install_kinds():
    sim, c = new_sim()
    try:
        groups = {g["name"]: g for g in c.get("/apis").json["groups"]}
        for group in ("apps", "rbac.authorization.k8s.io", "policy", "networking.k8s.io",
                      "admissionregistration.k8s.io", "coordination.k8s.io"):
            assert group in groups, groups
            r = c.get("/apis/%s" % group)
            assert r.status == 200 and r.json["kind"] == "APIGroup" and r.json["preferredVersion"]["version"] == "v1"
        for path, kind, api, namespaced in KINDS:
            gv = "/api/v1" if api == "v1" else "/apis/" + api
            res = {x["name"]: x for x in c.get(gv).json["resources"]}
            plural = path.rsplit("/", 1)[1]
            assert plural in res and res[plural]["kind"] == kind and res[plural]["namespaced"] == namespaced, res
        assert c.get("/apis/nope.example.com").status == 404
    finally:
        sim.stop()


def test_create_get_list_delete_each_kind():
    sim, c = new_sim()
    try:
        for path, kind, api, namespaced in KINDS:
            body = {"apiVersion": api, "kind": kind, "metadata": {"name": "gqa", "labels": {"app": "gqa"}}}
            r = c.post(path, body)
            assert r.status == 201, (path, r.status, r.body)
            got = r.json
            assert (got["kind"], got["apiVersion"]) == (kind, api), got
            assert got["metadata"]["uid"] and got["metadata"]["resourceVersion"]
            assert ("namespace" in got["metadata"]) == namespaced, got
            r = c.get(path + "/gqa")
            assert r.status == 200 and r.json["metadata"]["uid"] == got["metadata"]["uid"], r.body
            r = c.get(path + "?labelSelector=app%3Dgqa")
            assert r.status == 200 and r.json["kind"] == kind + "List" and len(r.json["items"]) == 1, r.body
            assert c.post(path, body).status == 409, "a second create is AlreadyExists"
            wrong = dict(body, kind="ConfigMap")
            assert c.post(path, wrong).status == 400, "a body of another kind is refused"
            r = c.delete(path + "/gqa")
            assert r.status == 200, r.body
            assert c.get(path + "/gqa").status == 404
        # Cluster-scoped kinds have no namespaced path.
        r = c.get("/apis/admissionregistration.k8s.io/v1/namespaces/kube-system/validatingwebhookconfigurations")
        assert r.status == 404, r.status
        # The in-process API reaches them by kind too.
        sim.create("Secret", {"metadata": {"name": "s"}, "type": "kubernetes.io/tls",
                              "data": {"tls.crt": "", "tls.key": ""}}, "kube-system")
        assert sim.get("secrets", "s", "kube-system")["type"] == "kubernetes.io/tls"
        r = c.get("/api/v1/secrets?fieldSelector=type%3Dkubernetes.io%2Ftls")
        assert [i["metadata"]["name"] for i in r.json["items"]] == ["s"], r.body
    finally:
        sim.stop()


def test_patches_as_the_install_tools_send_them():
    sim, c = new_sim()
    try:
        vwc = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
        c.post(vwc, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                     "metadata": {"name": "w"},
                     "webhooks": [{"name": "a.example.com", "clientConfig": {"service": {"name": "s"}}},
                                  {"name": "b.example.com", "clientConfig": {"service": {"name": "s"}}}]})
        # scripts/gen-certs.sh: one JSON patch adding caBundle to every webhook.
        ops = [{"op": "add", "path": "/webhooks/%d/clientConfig/caBundle" % i, "value": "Q0E="} for i in (0, 1)]
        r = c.patch(vwc + "/w", ops, ptype="json")
        assert r.status == 200, r.body
        assert [w["clientConfig"]["caBundle"] for w in r.json["webhooks"]] == ["Q0E=", "Q0E="]
        # A Deployment's container env by strategic merge (merged by name).
        dep = "/apis/apps/v1/namespaces/kube-system/deployments"
        c.post(dep, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                     "spec": {"template": {"spec": {"containers": [
                         {"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}]}]}}}})
        r = c.patch(dep + "/d", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "env": [{"name": "B", "value": "2"}]}]}}}}, ptype="strategic")
        assert r.status == 200, r.body
        env = r.json["spec"]["template"]["spec"]["containers"][0]["env"]
        assert env == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], env
    finally:
        sim.stop()


def test_require_namespaces():
    sim, c = new_sim(require_namespaces=True)
    try:
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
        r = c.post("/api/v1/namespaces/nowhere/secrets", secret)
        assert r.status == 404 and r.json["reason"] == "NotFound", r.body
        assert r.json["message"] == 'namespaces "nowhere" not found', r.json
        r = c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nowhere"}})
        assert r.status == 201, r.body
        assert c.post("/api/v1/namespaces/nowhere/secrets", secret).status == 201
        # Cluster-scoped objects need no namespace.
        r = c.post("/apis/rbac.authorization.k8s.io/v1/clusterroles",
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}})
        assert r.status == 201, r.body
    finally:
        sim.stop()
    # Off by default: existing tests create pods in namespaces never created.
    sim, c = new_sim()
    try:
        r = c.post("/api/v1/namespaces/anywhere/secrets", {"apiVersion": "v1", "kind": "Secret",
                                                           "metadata": {"name": "s"}})
        assert r.status == 201, r.body
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
