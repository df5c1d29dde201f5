#!/usr/bin/env python3
"""manifests/components/own-scheduler and scheduler-name-webhook, rendered
with `kubectl kustomize` as an operator would (issue 27 item 1):

  - they render alone, together, with the other components, and with
    no-webhooks after own-scheduler; in the other order the build stops
    (the "test" operations) rather than remove the wrong arguments;
  - the pod: the service without leader election, with --placement bind;
    kube-scheduler beside it from the documented image, whose tag an
    overlay's `images:` changes, hardened like the service, probed on 10259,
    reading the generated ConfigMap;
  - the KubeSchedulerConfiguration in that ConfigMap is valid for
    kube-scheduler (every field known, its extender rules) and is the
    recommended extender on loopback, one profile gpu-scheduler, its own Lease;
  - RBAC: the permissions the rendered objects grant are exactly the base
    install's (less the service's Lease) plus the built-in roles upstream's
    multiple-schedulers guide binds (their rules as kube-apiserver v1.32
    has them, fixtures/builtin-scheduler-roles.json) plus get/update of the
    scheduler's own Lease; broader grants are caught;
  - the webhook: the service gets --set-scheduler-name (the profile's name),
    the webhook entry calls /admission/mutate-scheduler-name for pod
    creations outside kube-system, Fail, with matchConditions naming the
    profile's managedResources.

Standalone: python3 test_own_scheduler.py --binary PATH --source-dir REPO
"""

import copy
import json
import os
import re
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import install_common as ic  # noqa: E402
import test_rbac  # noqa: E402  (its permission arithmetic)
import test_scheduler_config as tsc  # noqa: E402  (kube-scheduler's validation rules)

suite = ic.Suite("test_own_scheduler")

PROFILE = "gpu-scheduler"
SA = "kube-system/gpu-quota-admission"
LEADER_FLAGS = ("leader-elect", "lease-namespace", "lease-name")
# k8s.io/component-base/config/v1alpha1 LeaderElectionConfiguration and
# k8s.io/kube-scheduler/config/v1 KubeSchedulerProfile.
LEADER_ELECTION_FIELDS = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
                          "resourceName", "resourceNamespace"}
PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}


def strict_errors(cfg):
    """kube-scheduler's rules (test_scheduler_config) plus known fields of
    leaderElection and profiles, which that file's variants do not have."""
    errs = tsc.kube_scheduler_validation(cfg)
    le = cfg.get("leaderElection") or {}
    errs += ["unknown leaderElection.%s" % k for k in le if k not in LEADER_ELECTION_FIELDS]
    for k in ("leaseDuration", "renewDeadline", "retryPeriod"):
        if k in le and tsc.go_duration_s(le[k]) is None:
            errs.append("leaderElection.%s: not a duration" % k)
    if le.get("leaderElect") and not (tsc.go_duration_s(le.get("leaseDuration", "15s")) >
                                      tsc.go_duration_s(le.get("renewDeadline", "10s")) >
                                      tsc.go_duration_s(le.get("retryPeriod", "2s"))):
        errs.append("leaderElection: want leaseDuration > renewDeadline > retryPeriod")
    names = set()
    for i, p in enumerate(cfg.get("profiles") or []):
        errs += ["profiles[%d]: unknown field %s" % (i, k) for k in p if k not in PROFILE_FIELDS]
        if not p.get("schedulerName") or p["schedulerName"] in names:
            errs.append("profiles[%d].schedulerName: empty or repeated" % i)
        names.add(p.get("schedulerName"))
    return errs


def render(s, components, extra=""):
    """The objects `kubectl kustomize` makes of manifests/ with these
    components, or (None, stderr) when it refuses."""
    cmd = ic.kubectl_kustomize()
    s.require(cmd is not None, "kubectl kustomize is installed (/usr/bin/kubectl)")
    work = s.tempdir("overlay")
    comp = os.path.relpath(s.path("manifests", "components"), work)
    with open(os.path.join(work, "kustomization.yaml"), "w") as f:
        f.write("resources:\n- %s\ncomponents:\n%s%s" % (
            os.path.relpath(s.path("manifests"), work), "".join("- %s/%s\n" % (comp, c) for c in components), extra))
    r = ic.run(cmd + [work])
    if r.returncode != 0:
        return None, r.stderr
    return [d for d in ic.yaml.safe_load_all(r.stdout) if d], r.stderr


def rendered(s, components=("own-scheduler",), extra=""):
    objs, err = render(s, components, extra)
    s.require(objs is not None, "kustomize builds manifests/ with %s" % ", ".join(components), err)
    return objs


def find(objs, kind, name=None):
    return [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def pod_spec(objs):
    return find(objs, "Deployment", "gpu-quota-admission")[0]["spec"]["template"]["spec"]


def containers(objs):
    return {c["name"]: c for c in pod_spec(objs)["containers"]}


def arg_map(args):
    out = {}
    for a in args or []:
        name, eq, value = a[2:].partition("=")
        out[name] = value if eq else True
    return out


def scheduler_config(s, objs):
    """(config dict, ConfigMap) the kube-scheduler container reads."""
    sched = containers(objs)["kube-scheduler"]
    flags = arg_map(sched["command"][1:])
    path = flags.get("config")
    s.require(isinstance(path, str), "kube-scheduler gets --config", sched["command"])
    mount = next((m for m in sched.get("volumeMounts") or [] if path.startswith(m["mountPath"].rstrip("/") + "/")),
                 None)
    s.require(mount is not None, "--config %s is on a mounted volume" % path)
    vol = next(v for v in pod_spec(objs)["volumes"] if v["name"] == mount["name"])
    cm = find(objs, "ConfigMap", vol["configMap"]["name"])
    s.require(len(cm) == 1, "the volume is the generated ConfigMap %s" % vol["configMap"]["name"])
    key = path[len(mount["mountPath"].rstrip("/")) + 1:]
    s.require(key in cm[0]["data"], "the ConfigMap has %s" % key)
    return ic.yaml.safe_load(cm[0]["data"][key]), cm[0]


def component_tag(s):
    k = ic.load_docs(s.path("manifests", "components", "own-scheduler", "kustomization.yaml"))[0]
    entry = next(i for i in k.get("images") or [] if i["name"] == "registry.k8s.io/kube-scheduler")
    return entry["newTag"]


@suite.test
def renders_with_every_combination(s):
    for comps in (["own-scheduler"], ["own-scheduler", "scheduler-name-webhook"],
                  ["own-scheduler", "scheduler-name-webhook", "placement-bind", "cert-manager", "monitoring"],
                  ["own-scheduler", "no-webhooks"]):
        objs = rendered(s, comps)
        c = containers(objs)
        s.check_eq(sorted(c), ["gpu-quota-admission", "kube-scheduler"], "%s: two containers" % comps)
        s.check(not set(LEADER_FLAGS) & set(arg_map(c["gpu-quota-admission"]["args"])),
                "%s: the service runs without leader election" % comps, c["gpu-quota-admission"]["args"])
    objs = rendered(s, ["own-scheduler", "no-webhooks"])
    s.check_eq(arg_map(containers(objs)["gpu-quota-admission"]["args"]),
               {"listen-http": "[::]:3456", "listen-probes": "[::]:8081",
                "decision-key-file": "/etc/gpu-quota-admission/decision-key/key"},
               "with no-webhooks too: only the HTTP and probe listeners (and the decision key) are left")
    # The wrong order stops the build instead of removing other arguments.
    objs, err = render(s, ["no-webhooks", "own-scheduler"])
    s.check(objs is None and "test" in err.lower(), "no-webhooks before own-scheduler: kustomize refuses", err)
    # The webhook component alone would send pods to a scheduler nobody runs:
    # it renders, but only own-scheduler makes the second container.
    objs = rendered(s, ["scheduler-name-webhook"])
    s.check_eq(sorted(containers(objs)), ["gpu-quota-admission"], "scheduler-name-webhook alone adds no scheduler")


@suite.test
def pod_shape(s):
    objs = rendered(s)
    c = containers(objs)
    svc, sched = c["gpu-quota-admission"], c["kube-scheduler"]
    env = {e["name"]: e.get("value") for e in svc.get("env") or []}
    s.check_eq(env.get("GQA_PLACEMENT"), "bind", "the service places at bind (the profile has bindVerb)")
    tag = component_tag(s)
    s.check(re.fullmatch(r"v1\.(2[5-9]|[3-9][0-9])\.[0-9]+", tag) is not None,
            "the kube-scheduler tag is a v1 release that reads kubescheduler.config.k8s.io/v1", tag)
    s.check_eq(sched["image"], "registry.k8s.io/kube-scheduler:" + tag, "kube-scheduler from the upstream image")
    s.check_eq(sched["command"][0], "kube-scheduler", "the image's binary")
    for name, cont in c.items():
        sc = cont.get("securityContext") or {}
        s.check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
                and sc.get("runAsNonRoot") is True and (sc.get("capabilities") or {}).get("drop") == ["ALL"],
                "%s: hardened securityContext" % name, sc)
        s.check("memory" in ((cont.get("resources") or {}).get("limits") or {}), "%s: a memory limit" % name)
    for probe in ("startupProbe", "livenessProbe"):
        get = (sched.get(probe) or {}).get("httpGet") or {}
        port = next((p["containerPort"] for p in sched.get("ports") or [] if p.get("name") == get.get("port")), None)
        s.check_eq((get.get("path"), get.get("scheme"), port), ("/healthz", "HTTPS", 10259),
                   "kube-scheduler %s on its secure port" % probe)
    # The documented replacement: an overlay's images: entry picks the version.
    objs = rendered(s, extra="images:\n- name: registry.k8s.io/kube-scheduler\n"
                             "  newName: mirror.example.com/kube-scheduler\n  newTag: v1.33.1\n")
    s.check_eq(containers(objs)["kube-scheduler"]["image"], "mirror.example.com/kube-scheduler:v1.33.1",
               "an overlay's images: entry sets the kube-scheduler image")
    s.check_eq(containers(objs)["gpu-quota-admission"]["image"], "registry.example.com/gpu-quota-admission:0.1.0",
               "and leaves the service's image alone")


@suite.test
def scheduler_config_is_valid_and_recommended(s):
    objs = rendered(s)
    cfg, cm = scheduler_config(s, objs)
    s.check_eq(cfg.get("apiVersion"), "kubescheduler.config.k8s.io/v1", "apiVersion v1")
    s.check_eq(cfg.get("kind"), "KubeSchedulerConfiguration", "kind")
    errs = strict_errors(cfg)
    s.check(not errs, "passes kube-scheduler's validation, every field known", "\n".join(errs))
    s.check(re.fullmatch(r"gpu-scheduler-config-[a-z0-9]{10}", cm["metadata"]["name"]) is not None,
            "the ConfigMap name carries kustomize's hash: a changed config rolls the pods", cm["metadata"]["name"])
    s.check_eq(cm["metadata"].get("namespace"), "kube-system", "the ConfigMap lives beside the Deployment")
    s.check_eq([p.get("schedulerName") for p in cfg.get("profiles") or []], [PROFILE], "one profile, gpu-scheduler")
    s.check_eq(cfg.get("clientConnection", {}).get("kubeconfig"), "", "in-cluster credentials")
    le = cfg.get("leaderElection") or {}
    s.check_eq((le.get("leaderElect"), le.get("resourceLock"), le.get("resourceNamespace"), le.get("resourceName")),
               (True, "leases", "kube-system", PROFILE), "leader election on its own Lease kube-system/gpu-scheduler")
    s.check(le.get("resourceName") not in ("kube-scheduler", "gpu-quota-admission"),
            "a Lease neither the cluster's scheduler nor the service takes")
    s.require(len(cfg.get("extenders") or []) == 1, "one extender")
    ext = cfg["extenders"][0]
    port = arg_map(containers(objs)["gpu-quota-admission"]["args"])["listen-http"].rpartition(":")[2]
    s.check_eq(ext.get("urlPrefix"), "http://127.0.0.1:%s/scheduler" % port,
               "the extender is the service beside it, on loopback, at its HTTP port")
    s.check(ext.get("enableHTTPS") is False and "tlsConfig" not in ext, "plain HTTP inside the pod")
    rec = tsc.load(tsc.template(s, "v1", "recommended"), "h:1")["extenders"][0]
    for k in ("urlPrefix", "enableHTTPS", "tlsConfig"):
        rec.pop(k, None)
        ext = dict(ext)
        ext.pop(k, None)
    s.check_eq(ext, rec, "verbs, weight, timeout, nodeCacheCapable, ignorable and managedResources are the "
                         "recommended scheduler-config's")
    # The checker refuses what kube-scheduler's strict decoding refuses.
    for what, change in (("a misspelt profile field", lambda c: c["profiles"][0].update({"schedulerNmae": "x"})),
                         ("a misspelt leaderElection field", lambda c: c["leaderElection"].update({"leaseName": "x"})),
                         ("a repeated profile", lambda c: c["profiles"].append(dict(c["profiles"][0]))),
                         ("renewDeadline over leaseDuration", lambda c: c["leaderElection"].update(
                             {"renewDeadline": "20s"})),
                         ("two binders", lambda c: c["extenders"].append(dict(c["extenders"][0])))):
        bad = copy.deepcopy(cfg)
        change(bad)
        s.check(bool(strict_errors(bad)), "the validation catches %s" % what)


def builtin_roles(s):
    with open(os.path.join(HERE, "fixtures", "builtin-scheduler-roles.json"), encoding="utf-8") as f:
        roles = json.load(f)["roles"]
    for r in roles:
        r["apiVersion"] = "rbac.authorization.k8s.io/v1"
    return [("(built-in)", r) for r in roles]


def grants_of(objs, builtins):
    return test_rbac.granted([("(rendered)", o) for o in objs] + builtins)


def role_grants(builtins, kind, name, who, scope):
    out = set()
    for _, r in builtins:
        if r["kind"] == kind and r["metadata"]["name"] == name:
            for rule in r["rules"]:
                for g in rule["apiGroups"]:
                    for res in rule["resources"]:
                        for v in rule["verbs"]:
                            for n in rule.get("resourceNames") or [test_rbac.ANY]:
                                out.add((who, scope, g, res, v, n))
    return out


def expected(s, objs, builtins):
    base = test_rbac.expected(test_rbac.settings(s, ic.manifest_objects(s.src)))
    # The service's Lease goes with its leader election.
    want = {p for p in base if not (p[0] == SA and p[3] == "leases")}
    want |= role_grants(builtins, "ClusterRole", "system:kube-scheduler", SA, test_rbac.CLUSTER)
    want |= role_grants(builtins, "ClusterRole", "system:volume-scheduler", SA, test_rbac.CLUSTER)
    want |= role_grants(builtins, "Role", "extension-apiserver-authentication-reader", SA, "kube-system")
    lease = scheduler_config(s, objs)[0]["leaderElection"]
    for v in ("get", "update"):
        want.add((SA, lease["resourceNamespace"], "coordination.k8s.io", "leases", v, lease["resourceName"]))
    return want


@suite.test
def rbac_is_least_privilege(s):
    builtins = builtin_roles(s)
    s.check_eq(sorted((o["kind"], o["metadata"]["name"]) for _, o in builtins),
               [("ClusterRole", "system:kube-scheduler"), ("ClusterRole", "system:volume-scheduler"),
                ("Role", "extension-apiserver-authentication-reader")], "the built-in roles' rules are known")
    for comps in (["own-scheduler"], ["own-scheduler", "scheduler-name-webhook"]):
        objs = rendered(s, comps)
        want = expected(s, objs, builtins)
        got, problems = grants_of(objs, builtins)
        s.check(not sorted(got - want), "%s: no permission beyond the scheduler's and the service's" % comps,
                test_rbac.fmt(sorted(got - want)))
        s.check(not sorted(want - got), "%s: every permission the scheduler needs is granted" % comps,
                test_rbac.fmt(sorted(want - got)))
        s.check(not problems, "%s: no wildcard, aggregation or unknown role" % comps, "\n".join(problems))
    objs = rendered(s)
    s.check(not find(objs, "Role", "gpu-quota-admission-leader-election")
            and not find(objs, "RoleBinding", "gpu-quota-admission-leader-election"),
            "the service's Lease Role is gone (nothing takes that Lease)")
    # The leases the scheduler may update: its own only.
    leases = {p[5] for p in grants_of(objs, builtins)[0] if p[3] == "leases" and p[4] == "update"}
    s.check_eq(leases, {"kube-scheduler", PROFILE}, "update of Leases named kube-scheduler (built-in) and its own")
    # Broader grants are caught.
    want = expected(s, objs, builtins)

    def changed(fn):
        o2 = copy.deepcopy(objs)
        fn(o2)
        return o2

    def role(o2, name):
        return next(o for o in o2 if o["kind"] == "Role" and o["metadata"]["name"] == name)

    cases = {
        "the Lease's name dropped": changed(lambda o2: role(o2, "gpu-scheduler-leader-election")["rules"][0].pop(
            "resourceNames")),
        "list of Leases added": changed(lambda o2: role(o2, "gpu-scheduler-leader-election")["rules"][0]["verbs"]
                                        .append("list")),
        "cluster-admin bound instead": changed(lambda o2: next(
            o for o in o2 if o["metadata"]["name"] == "gpu-quota-admission-as-volume-scheduler")["roleRef"].update(
            {"name": "cluster-admin"})),
        "the Lease Role bound cluster-wide": changed(lambda o2: o2.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "gpu-scheduler-leader-election"},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]})
            or o2.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                          "metadata": {"name": "x"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": "gpu-scheduler-leader-election"},
                          "subjects": [{"kind": "ServiceAccount", "name": "gpu-quota-admission",
                                        "namespace": "kube-system"}]})),
    }
    for what, o2 in cases.items():
        got, problems = grants_of(o2, builtins)
        s.check(bool(got - want or problems), "caught: %s" % what)


@suite.test
def scheduler_name_webhook(s):
    objs = rendered(s, ["own-scheduler", "scheduler-name-webhook"])
    cfg = scheduler_config(s, objs)[0]
    svc = containers(objs)["gpu-quota-admission"]
    env = {e["name"]: e.get("value") for e in svc.get("env") or []}
    s.check_eq(env.get("GQA_SET_SCHEDULER_NAME"), cfg["profiles"][0]["schedulerName"],
               "the service writes the profile's schedulerName")
    s.check_in("set-scheduler-name", ic.help_flags(s.args.binary), "--help lists --set-scheduler-name")
    mwc = find(objs, "MutatingWebhookConfiguration", "gpu-quota-admission")[0]
    hooks = {w["name"]: w for w in mwc["webhooks"]}
    s.check_in("pod-defaults.gpu-admission.io", hooks, "the CRL defaults webhook stays")
    s.require("scheduler-name.gpu-admission.io" in hooks, "the scheduler-name webhook is added")
    w = hooks["scheduler-name.gpu-admission.io"]
    s.check_eq(w["clientConfig"]["service"], {"name": "gpu-quota-admission-webhook", "namespace": "kube-system",
                                              "path": "/admission/mutate-scheduler-name", "port": 443},
               "it calls /admission/mutate-scheduler-name through the webhook Service")
    s.check_eq([(r["operations"], r["resources"]) for r in w["rules"]], [(["CREATE"], ["pods"])], "pod creations only")
    s.check_eq((w["failurePolicy"], w["sideEffects"], w["admissionReviewVersions"]), ("Fail", "None", ["v1"]),
               "Fail (GPU pods only, by matchConditions), no side effects, v1 reviews")
    s.check(ic.labels_match(w["namespaceSelector"], {"kubernetes.io/metadata.name": "default"})
            and not ic.labels_match(w["namespaceSelector"], {"kubernetes.io/metadata.name": "kube-system"}),
            "kube-system is left out")
    s.check(not ic.labels_match(w["objectSelector"], {"app.kubernetes.io/name": "gpu-quota-admission"}),
            "the service's own pods are left out")
    conds = {c["name"]: c["expression"] for c in w.get("matchConditions") or []}
    s.check_eq(len(conds), 2, "two matchConditions: no other scheduler, a managed GPU resource")
    gpu = " ".join(v for k, v in conds.items() if "gpu" in k)
    named = set(re.findall(r"'([a-z0-9.-]+/[a-z0-9-]+)'", gpu))
    s.check_eq(named, {m["name"] for m in cfg["extenders"][0]["managedResources"]},
               "the matchCondition names exactly the profile's managedResources")
    for part in ("object.spec.containers", "object.spec.initContainers", "requests", "limits"):
        s.check_in(part, gpu, "the matchCondition looks at %s" % part)
    sched = " ".join(v for k, v in conds.items() if "scheduler" in k)
    s.check_in("'default-scheduler'", sched, "only pods naming no scheduler or default-scheduler are called")


if __name__ == "__main__":
    sys.exit(suite.main())
