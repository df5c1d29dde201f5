#!/usr/bin/env python3
"""RBAC: the permissions the manifests grant are exactly design.md section 9's.

Every (subject, scope, apiGroup, resource, verb, resourceName) the Roles,
ClusterRoles and bindings under manifests/ grant is computed and compared with
the expected set as a set: a rule that adds a verb, a resource, a namespace, a
wildcard, drops a resourceName or binds another role is a difference, and the
test fails. A self-check makes such broader rules on purpose and verifies that
the comparison catches each of them.

Expected (namespaces and names follow the Deployment's flags and the server's
defaults):
  gpu-quota-admission: nodes get/list/watch/patch (HAMi's node lock);
    pods get/list/watch/patch;
    pods/binding create (cluster-wide); resourcequotas list/watch
    (cluster-wide, HAMi's quota); configmaps get/list/watch in the CRL
    namespace; the quota ConfigMap get/list/watch in the quota namespace;
    leases create, and get/update of its Lease, in the lease namespace.
  gpu-topology: nodes get, patch.
"""

import copy
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_rbac")
ANY = "*"
CLUSTER = "(cluster)"


def settings(s, objs):
    """CRL namespace, quota namespace/name and lease namespace/name the
    Deployment runs with (its flags and GQA_ variables, else --help defaults)."""
    flags = ic.help_flags(s.args.binary)
    dep = ic.find(objs, "Deployment", "gpu-quota-admission", "kube-system")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    given = {}
    for e in c.get("env") or []:
        if e["name"].startswith("GQA_") and "value" in e:
            given[e["name"][4:].lower().replace("_", "-")] = e["value"]
    for a in c.get("args") or []:
        name, eq, value = a[2:].partition("=")
        given[name] = value if eq else True

    def get(name, fallback):
        return given.get(name) or flags.get(name) or fallback

    quota = get("quota-configmap", "kube-system/gpu-quota")
    qns, qname = quota.split("/", 1)
    return {
        "crl_ns": get("crl-namespace", "kube-public"),
        "quota_ns": qns, "quota_name": qname,
        "lease_ns": get("lease-namespace", "kube-system"),
        "lease_name": get("lease-name", "gpu-quota-admission"),
    }


def expected(cfg):
    sa = "kube-system/gpu-quota-admission"
    topo = "kube-system/gpu-topology"
    out = set()
    for v in ("get", "list", "watch", "patch"):
        out.add((sa, CLUSTER, "", "nodes", v, ANY))
    for v in ("get", "list", "watch", "patch"):
        out.add((sa, CLUSTER, "", "pods", v, ANY))
    out.add((sa, CLUSTER, "", "pods/binding", "create", ANY))
    for v in ("list", "watch"):
        out.add((sa, CLUSTER, "", "resourcequotas", v, ANY))
    for v in ("get", "list", "watch"):
        out.add((sa, cfg["crl_ns"], "", "configmaps", v, ANY))
        out.add((sa, cfg["quota_ns"], "", "configmaps", v, cfg["quota_name"]))
    out.add((sa, cfg["lease_ns"], "coordination.k8s.io", "leases", "create", ANY))
    for v in ("get", "update"):
        out.add((sa, cfg["lease_ns"], "coordination.k8s.io", "leases", v, cfg["lease_name"]))
    out.add((topo, CLUSTER, "", "nodes", "get", ANY))
    out.add((topo, CLUSTER, "", "nodes", "patch", ANY))
    return out


def granted(objs):
    """The permission tuples, and problems that make a set impossible to compute."""
    roles = {}
    problems = []
    for _, o in objs:
        if o.get("kind") in ("Role", "ClusterRole"):
            roles[(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])] = o
            if o.get("aggregationRule"):
                problems.append("%s %s aggregates other roles" % (o["kind"], o["metadata"]["name"]))
    out = set()
    for _, b in objs:
        if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = b["roleRef"]
        bns = b["metadata"].get("namespace")
        role = roles.get((ref["kind"], bns if ref["kind"] == "Role" else None, ref["name"]))
        if role is None:
            problems.append("%s %s binds %s %s, which the manifests do not define (e.g. a built-in role)"
                            % (b["kind"], b["metadata"]["name"], ref["kind"], ref["name"]))
            continue
        scope = CLUSTER if b["kind"] == "ClusterRoleBinding" else bns
        for sub in b.get("subjects") or []:
            if sub.get("kind") != "ServiceAccount":
                problems.append("%s %s binds a %s" % (b["kind"], b["metadata"]["name"], sub.get("kind")))
                continue
            who = "%s/%s" % (sub.get("namespace"), sub["name"])
            for r in role.get("rules") or []:
                if r.get("nonResourceURLs"):
                    problems.append("%s grants nonResourceURLs" % role["metadata"]["name"])
                names = r.get("resourceNames") or [ANY]
                for g in r.get("apiGroups") or []:
                    for res in r.get("resources") or []:
                        for v in r.get("verbs") or []:
                            for n in names:
                                if ANY in (g, res, v):
                                    problems.append("%s grants a wildcard (%s %s %s)" % (role["metadata"]["name"], g, res, v))
                                out.add((who, scope, g, res, v, n))
    return out, problems


def diff(objs, want):
    got, problems = granted(objs)
    extra = sorted(got - want)
    missing = sorted(want - got)
    return extra, missing, problems


def fmt(rows):
    return "\n".join("%s in %s: %s/%s %s (name %s)" % r for r in rows)


@suite.test
def rules_are_exactly_design_section_9(s):
    objs = ic.manifest_objects(s.src)
    cfg = settings(s, objs)
    want = expected(cfg)
    extra, missing, problems = diff(objs, want)
    s.check(not extra, "no permission beyond design.md section 9", fmt(extra))
    s.check(not missing, "every permission design.md section 9 needs is granted", fmt(missing))
    s.check(not problems, "no wildcard, aggregation, foreign role or non-ServiceAccount subject", "\n".join(problems))
    s.check_eq(cfg["crl_ns"], "kube-public", "CRL namespace")
    s.check_eq((cfg["quota_ns"], cfg["quota_name"]), ("kube-system", "gpu-quota"), "quota ConfigMap")
    s.check_eq((cfg["lease_ns"], cfg["lease_name"]), ("kube-system", "gpu-quota-admission"), "Lease")


@suite.test
def roles_are_namespaced_where_design_says(s):
    objs = ic.manifest_objects(s.src)
    for _, o in objs:
        if o.get("kind") == "ClusterRole":
            for r in o["rules"]:
                s.check("configmaps" not in r["resources"] and "leases" not in r["resources"],
                        "ClusterRole %s grants no ConfigMaps or Leases (Roles do)" % o["metadata"]["name"])
        if o.get("kind") == "RoleBinding":
            s.check(o["roleRef"]["kind"] == "Role", "RoleBinding %s binds a Role" % o["metadata"]["name"])
    # Each workload runs as the account the rules are for.
    dep = ic.find(objs, "Deployment", "gpu-quota-admission", "kube-system")
    ds = ic.find(objs, "DaemonSet", "gpu-topology", "kube-system")
    s.check_eq(dep["spec"]["template"]["spec"].get("serviceAccountName"), "gpu-quota-admission",
               "the Deployment runs as gpu-quota-admission")
    s.check_eq(ds["spec"]["template"]["spec"].get("serviceAccountName"), "gpu-topology",
               "the DaemonSet runs as gpu-topology")
    for o in (dep, ds):
        s.check(o["spec"]["template"]["spec"].get("automountServiceAccountToken", True) is True,
                "%s mounts its token (it calls the API server)" % o["metadata"]["name"])


def mutate(objs, kind, name, fn):
    objs = copy.deepcopy(objs)
    for _, o in objs:
        if o.get("kind") == kind and o["metadata"]["name"] == name:
            fn(o)
    return objs


@suite.test
def broader_rules_are_caught(s):
    objs = ic.manifest_objects(s.src)
    want = expected(settings(s, objs))
    cases = {
        "a verb added (delete pods)":
            mutate(objs, "ClusterRole", "gpu-quota-admission", lambda o: o["rules"][1]["verbs"].append("delete")),
        "a resource added (secrets)":
            mutate(objs, "ClusterRole", "gpu-quota-admission", lambda o: o["rules"].append(
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})),
        "ConfigMaps cluster-wide":
            mutate(objs, "ClusterRole", "gpu-quota-admission", lambda o: o["rules"].append(
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]})),
        "the quota ConfigMap's name dropped":
            mutate(objs, "Role", "gpu-quota-admission-quota", lambda o: o["rules"][0].pop("resourceNames")),
        "the Lease's name dropped":
            mutate(objs, "Role", "gpu-quota-admission-leader-election", lambda o: o["rules"][1].pop("resourceNames")),
        "wildcard verbs":
            mutate(objs, "ClusterRole", "gpu-topology", lambda o: o["rules"][0].__setitem__("verbs", ["*"])),
        "gpu-topology may list nodes":
            mutate(objs, "ClusterRole", "gpu-topology", lambda o: o["rules"][0]["verbs"].append("list")),
        "a Role turned cluster-wide":
            mutate(objs, "RoleBinding", "gpu-quota-admission-crl", lambda o: o.update(
                {"kind": "ClusterRoleBinding"})),
    }
    extra_binding = copy.deepcopy(objs)
    extra_binding.append(("(test)", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "gpu-quota-admission-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "gpu-quota-admission", "namespace": "kube-system"}]}))
    cases["cluster-admin bound"] = extra_binding
    for what, changed in cases.items():
        extra, missing, problems = diff(changed, want)
        s.check(bool(extra or problems), "caught: %s" % what, "no difference found")


if __name__ == "__main__":
    sys.exit(suite.main())
