"""A scheduler of its own (issue 27 item 1, manifests/components/own-scheduler
and scheduler-name-webhook) on a real control plane. The real kube-scheduler
binary stands for the registry.k8s.io/kube-scheduler image, the product binary
for the service beside it in the pod:

- the install: manifests/ with both components, through scripts/gen-certs.sh
  --manifests OVERLAY and `kubectl apply -k`, is accepted by the API server;
  both mutating webhooks get the caBundle; the built-in roles the component
  binds have, on this API server, exactly the rules
  tests/install/fixtures/builtin-scheduler-roles.json records;
- kube-scheduler runs with the component's KubeSchedulerConfiguration as
  rendered (only the kubeconfig, standing for the in-cluster token, and the
  extender's loopback port changed) and the ServiceAccount's token, so with
  exactly the component's RBAC: it takes its own Lease kube-system/gpu-scheduler
  and logs nothing forbidden; the service runs with the Deployment's flags
  and variables (no leader election, --placement bind,
  --set-scheduler-name gpu-scheduler) under the same token;
- pods with schedulerName gpu-scheduler are bound through it with their GPU
  decisions (the Scheduled event comes from gpu-scheduler); the cluster's own
  kube-scheduler, also running, binds the other pods, which carry no GPU
  decision;
- the webhook, called by the real API server: a GPU pod created without a
  scheduler name gets gpu-scheduler (and lands through it); a CPU pod, a pod
  naming another scheduler and a GPU pod in kube-system are left as they
  are; while the webhook cannot be reached, GPU pods are refused
  (failurePolicy Fail) and every other pod is still created (matchConditions).

python3 test_own_scheduler.py --binary build/release/gpu-quota-admission --source-dir .
"""

import json
import os
import subprocess
import time

from realcp_suite import RealcpSuite, add_demo_nodes, annotations, gpu_indices, sa_kubeconfig, yaml
from controlplane import http_get

suite = RealcpSuite("realcp own scheduler")

NS = "kube-system"
SA = "gpu-quota-admission"
PROFILE = "gpu-scheduler"
STAND_IN = "gpu-quota-admission-0"      # the Deployment's pod, for the webhook Service's Endpoints
ROLES = "/apis/rbac.authorization.k8s.io/v1"


def rendered(s):
    r = s.cp.kubectl("kustomize", s.certs)
    return [d for d in yaml.safe_load_all(r.out) if d]


def find(objs, kind, name=None):
    return [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


@suite.test
def test_install_with_both_components(s):
    cp = s.cp
    overlay = os.path.join(cp.dir, "overlay")
    os.makedirs(overlay, exist_ok=True)
    comps = os.path.relpath(s.path("manifests", "components"), overlay)
    with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
        f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\n"
                "components:\n- %s/own-scheduler\n- %s/scheduler-name-webhook\n"
                % (os.path.relpath(s.path("manifests"), overlay), comps, comps))
    s.certs = os.path.join(cp.dir, "gqa-certs")
    r = subprocess.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", s.certs, "--manifests", overlay,
                        "--control-plane-cidr", "127.0.0.1/32"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    s.require(r.returncode == 0, "scripts/gen-certs.sh --manifests OVERLAY --out DIR", r.stdout.decode())
    r = cp.kubectl("apply", "-k", s.certs, check=False)
    s.require(r.returncode == 0, "kubectl apply -k gqa-certs (both components) applies", r.err + r.out)
    mwc = cp.admin.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpu-quota-admission")
    s.check_eq(sorted((w["name"], bool(w["clientConfig"].get("caBundle"))) for w in mwc["webhooks"]),
               [("pod-defaults.gpu-admission.io", True), ("scheduler-name.gpu-admission.io", True)],
               "both mutating webhooks are registered with the caBundle")
    s.objs = rendered(s)
    # The built-in roles the component binds, as this API server has them.
    with open(s.path("tests", "install", "fixtures", "builtin-scheduler-roles.json")) as f:
        fixture = json.load(f)["roles"]
    for role in fixture:
        ns = role["metadata"].get("namespace")
        path = "%s/%sclusterroles/%s" % (ROLES, "", role["metadata"]["name"]) if role["kind"] == "ClusterRole" \
            else "%s/namespaces/%s/roles/%s" % (ROLES, ns, role["metadata"]["name"])
        live = cp.admin.get(path)

        def norm(rules):
            return sorted(json.dumps({k: sorted(v) for k, v in r.items()}, sort_keys=True) for r in rules)
        s.check_eq(norm(live["rules"]), norm(role["rules"]),
                   "%s %s has the rules the install test assumes" % (role["kind"], role["metadata"]["name"]))


def deployment_container(s, name):
    dep = find(s.objs, "Deployment", "gpu-quota-admission")[0]
    return next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def start_service(s, kubeconfig):
    """The service with the Deployment's flags and GQA_ variables, less the
    listeners and certificate paths the harness chooses."""
    c = deployment_container(s, "gpu-quota-admission")
    flags = [a for a in c.get("args") or []
             if a.partition("=")[0] not in ("--listen-http", "--listen-https", "--listen-probes", "--tls-cert", "--tls-key")]
    s.check(not [a for a in flags if a.startswith("--leader-elect") or a.startswith("--lease-")],
            "the service runs without leader election of its own", flags)
    env = {e["name"]: e["value"] for e in c.get("env") or [] if e["name"].startswith("GQA_") and "value" in e}
    s.check_eq((env.get("GQA_PLACEMENT"), env.get("GQA_SET_SCHEDULER_NAME")), ("bind", PROFILE),
               "--placement bind and --set-scheduler-name gpu-scheduler from the Deployment")
    env.update({"POD_NAME": STAND_IN, "POD_NAMESPACE": NS})
    return s.cp.start_product(s.binary, kubeconfig=kubeconfig, name="gqa-own", flags=flags, env=env,
                              tls=(os.path.join(s.certs, "tls.crt"), os.path.join(s.certs, "tls.key")))


def scheduler_config_text(s, kubeconfig, port):
    """The rendered KubeSchedulerConfiguration, with the kubeconfig (the
    in-cluster token here) and the loopback port (3456 in the pod, a free
    port here) changed; nothing else."""
    sched = deployment_container(s, "kube-scheduler")
    cm_name = next(v["configMap"]["name"] for v in find(s.objs, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]
                   if "configMap" in v)
    text = find(s.objs, "ConfigMap", cm_name)[0]["data"]["config.yaml"]
    s.check_in("--config=/etc/gpu-scheduler/config.yaml", sched["command"], "kube-scheduler reads the ConfigMap")
    cfg = yaml.safe_load(text)
    s.check_eq(cfg["clientConnection"]["kubeconfig"], "", "in the pod: the in-cluster token")
    s.check_eq(cfg["extenders"][0]["urlPrefix"], "http://127.0.0.1:3456/scheduler", "in the pod: loopback 3456")
    text = text.replace('kubeconfig: ""', "kubeconfig: %s" % kubeconfig)
    text = text.replace("http://127.0.0.1:3456/scheduler", "http://127.0.0.1:%d/scheduler" % port)
    return text


@suite.test
def test_scheduler_and_service_run_with_the_component_rights(s):
    cp = s.cp
    s.require(getattr(s, "objs", None) is not None, "installed")
    add_demo_nodes(cp, s.source_dir)
    cp.stand_in_pod(NS, STAND_IN, labels={"app.kubernetes.io/name": "gpu-quota-admission"})
    kubeconfig = sa_kubeconfig(s, NS, SA)
    s.prod = start_service(s, kubeconfig)
    text = scheduler_config_text(s, kubeconfig, s.prod.port)
    # The ServiceAccount's token for the secure port's delegated
    # authentication and authorization too (the in-cluster default).
    s.sched = cp.start_scheduler(text, name=PROFILE, extra_args=[
        "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig])
    lease = cp.wait_for(lambda: (cp.admin.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (NS, PROFILE),
                                              ok=(200, 404)).get("spec") or {}).get("holderIdentity"),
                        60, "kube-scheduler holds the Lease kube-system/gpu-scheduler")
    s.check(bool(lease), "the gpu-scheduler Lease has a holder: %s" % lease)
    s.check_eq(cp.admin.request("GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/gpu-quota-admission" % NS,
                                ok=None, raw=True)[0], 404, "the service takes no Lease of its own")
    # The cluster's own scheduler, for every pod that is not gpu-scheduler's.
    s.default = cp.start_scheduler(cp.scheduler_config(), name="default-scheduler")
    # What the token may do: its own Lease, not another; no Secrets.
    as_sa = ["--as", "system:serviceaccount:%s:%s" % (NS, SA)]
    for verb, what, want, extra in (("update", "leases/gpu-scheduler", "yes", ()),
                                    ("update", "leases/kube-controller-manager", "no", ()),
                                    ("get", "secrets", "no", ()), ("create", "pods", "yes", ("--subresource=binding",)),
                                    ("delete", "pods", "yes", ()), ("create", "pods", "no", ())):
        r = cp.kubectl("auth", "can-i", verb, what, "-n", NS, *(as_sa + list(extra)), check=False)
        what = what + "".join(" " + e for e in extra)
        s.check_eq(r.out.strip(), want, "the ServiceAccount may %s %s: %s" % (verb, what, want))


def scheduled_by(cp, name, ns="default"):
    """reportingController of the pod's Scheduled event (the profile's name)."""
    for e in cp.admin.get("/apis/events.k8s.io/v1/namespaces/%s/events" % ns)["items"]:
        if (e.get("regarding") or {}).get("name") == name and e.get("reason") == "Scheduled":
            return e.get("reportingController")
    return None


def wait_scheduled_by(cp, name, ns="default"):
    return cp.wait_for(lambda: scheduled_by(cp, name, ns), 60, "the Scheduled event of %s/%s" % (ns, name))


@suite.test
def test_webhook_unreachable_refuses_gpu_pods_only(s):
    """Before the webhook Service has Endpoints: failurePolicy Fail for GPU
    pods, and matchConditions keep every other pod away from the webhook."""
    cp = s.cp
    s.require(getattr(s, "sched", None) is not None, "the schedulers run")
    r = cp.admin.request("POST", "/api/v1/namespaces/default/pods",
                         cp.pod("gpu-early", {"nvidia.com/gpu": "1"}), ok=None, raw=True)
    s.check(r[0] >= 400 and "scheduler-name.gpu-admission.io" in str(r[1]),
            "a GPU pod is refused while the webhook cannot be reached (Fail)", r)
    cp.create_pod(cp.pod("cpu-early", {"cpu": "1"}))
    s.check_eq(cp.get_pod("cpu-early")["spec"].get("schedulerName"), "default-scheduler",
               "a CPU pod is created meanwhile, untouched")
    s.check(bool(cp.wait_bound("cpu-early")), "and bound")
    s.check_eq(wait_scheduled_by(cp, "cpu-early"), "default-scheduler", "by the cluster's scheduler")


@suite.test
def test_pods_land_through_their_scheduler(s):
    cp = s.cp
    s.require(getattr(s, "sched", None) is not None, "the schedulers run")
    cp.point_service_at("gpu-quota-admission-webhook", s.prod.https_port, ns=NS, port_name="https",
                        stand_in=STAND_IN)
    before = cp.proxy.bytes_sent(s.prod.https_port)

    def create_when_webhook_answers(pod):
        def created():
            r = cp.admin.request("POST", "/api/v1/namespaces/%s/pods" % pod["metadata"]["namespace"], pod,
                                 ok=None, raw=True)
            return r[0] == 201 or None
        cp.wait_for(created, 60, "%s created (the webhook answers)" % pod["metadata"]["name"])

    # Named by its author.
    cp.create_pod(cp.pod("named", {"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "40"},
                         scheduler_name=PROFILE))
    # Named by the webhook.
    create_when_webhook_answers(cp.pod("mutated", {"nvidia.com/gpu": "4"}))
    s.check(cp.proxy.bytes_sent(s.prod.https_port) > before, "the API server called the webhook through the proxy")
    s.check_eq(cp.get_pod("mutated")["spec"].get("schedulerName"), PROFILE,
               "a GPU pod created without a scheduler name gets gpu-scheduler from the webhook")
    init_only = cp.pod("init-gpu", {"cpu": "1"}, init_limits={"nvidia.com/mps-core": "25", "nvidia.com/mps-memory": "2"})
    cp.create_pod(init_only)
    s.check_eq(cp.get_pod("init-gpu")["spec"].get("schedulerName"), PROFILE,
               "a GPU in an init container only: gpu-scheduler too")
    cp.delete_pod("init-gpu")
    # Left alone.
    cp.create_pod(cp.pod("cpu", {"cpu": "1"}))
    cp.create_pod(cp.pod("other", {"nvidia.com/gpu": "1"}, scheduler_name="volcano"))
    cp.create_pod(cp.pod("gpu-sys", {"nvidia.com/gpu": "1"}, namespace=NS))
    s.check_eq(cp.get_pod("cpu")["spec"].get("schedulerName"), "default-scheduler", "a CPU pod keeps default-scheduler")
    s.check_eq(cp.get_pod("other")["spec"].get("schedulerName"), "volcano", "a pod naming volcano keeps it")
    s.check_eq(cp.get_pod("gpu-sys", NS)["spec"].get("schedulerName"), "default-scheduler",
               "a GPU pod in kube-system (left out) keeps default-scheduler")

    for name, node, key in (("named", "gpu-a100-0", "tencent.com/predicate-gpu-idx-0"),
                            ("mutated", "gpu-v100-0", "gpu-admission.io/gpu-idx-0")):
        s.check_eq(cp.wait_bound(name, timeout=90), node, "%s bound to %s" % (name, node))
        s.check_eq(wait_scheduled_by(cp, name), PROFILE, "%s: scheduled by gpu-scheduler" % name)
        a = annotations(cp, name)
        s.check_eq(a.get("gpu-admission.io/node"), node, "%s: the GPU decision names the node" % name, a)
        idx = gpu_indices(a.get(key))
        s.check(idx is not None and len(idx) == (4 if name == "mutated" else 1), "%s: %s lists its GPUs" % (name, key),
                a)
    for name, ns in (("cpu", "default"), ("gpu-sys", NS)):
        cp.wait_bound(name, ns)
        s.check_eq(wait_scheduled_by(cp, name, ns), "default-scheduler", "%s: scheduled by the cluster's scheduler"
                   % name)
        a = annotations(cp, name, ns)
        s.check(not [k for k in a if k.startswith("gpu-admission.io/") or k.startswith("tencent.com/")],
                "%s: no GPU decision (gpu-scheduler and the extender never saw it)" % name, a)
    # Nobody runs volcano: the pod is still Pending after the others were bound.
    s.check_eq(cp.get_pod("other")["spec"].get("nodeName"), None, "the pod naming volcano is left to volcano")
    log = s.sched.log(0)
    s.check("forbidden" not in log.lower(), "no 'forbidden' in gpu-scheduler's log: its RBAC suffices",
            "\n".join(line for line in log.splitlines() if "forbidden" in line.lower())[:3000])
    s.check("forbidden" not in s.prod.log(0).lower(), "no 'forbidden' in the service's log")


def bind_calls(prod):
    """How many bind verbs the service answered (its /metrics)."""
    status, text = http_get(prod.port, "/metrics")
    for line in text.splitlines():
        if line.startswith('gqa_http_request_duration_seconds_count{verb="bind"}'):
            return int(float(line.split()[-1]))
    return 0


def lease_holder(cp):
    r = cp.admin.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (NS, PROFILE), ok=(200, 404))
    return (r.get("spec") or {}).get("holderIdentity")


@suite.test
def test_second_replica_takes_over(s):
    """Two replicas, as the Deployment runs them: only the pod whose
    kube-scheduler holds the Lease gets verbs; when that pod goes, the other
    pod's kube-scheduler takes the Lease and its own service decides."""
    cp = s.cp
    s.require(getattr(s, "sched", None) is not None, "the schedulers run")
    kubeconfig = sa_kubeconfig(s, NS, SA)
    prod2 = start_service(s, kubeconfig)
    sched2 = cp.start_scheduler(scheduler_config_text(s, kubeconfig, prod2.port), name=PROFILE + "-2", extra_args=[
        "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig])
    first = lease_holder(cp)
    before = (bind_calls(s.prod), bind_calls(prod2))
    cp.create_pod(cp.pod("ha-1", {"nvidia.com/gpu": "1"}, scheduler_name=PROFILE))
    s.check_eq(cp.wait_bound("ha-1", timeout=90), "gpu-v100-0", "ha-1 bound while the first replica leads")
    s.check_eq(lease_holder(cp), first, "the first kube-scheduler still holds the Lease")
    s.check_eq((bind_calls(s.prod) - before[0], bind_calls(prod2) - before[1]), (1, 0),
               "the leader's service bound ha-1; the other replica's service got no verb")
    # The leading pod goes: both of its containers stop.
    t0 = time.monotonic()
    cp.stop_scheduler(s.sched)
    s.sched = None
    s.check_eq(cp.stop_product(s.prod), 0, "the first replica's service exits 0")
    second = cp.wait_for(lambda: (lease_holder(cp) not in (None, first)) and lease_holder(cp), 90,
                         "the second kube-scheduler takes the Lease")
    print("    the Lease moved %.1f s after the leading pod's SIGTERM" % (time.monotonic() - t0), flush=True)
    s.check(second != first, "the Lease moved to the second replica (%s)" % second)
    cp.create_pod(cp.pod("ha-2", {"nvidia.com/gpu": "2"}, scheduler_name=PROFILE))
    s.check_eq(cp.wait_bound("ha-2", timeout=90), "gpu-v100-0", "ha-2 bound after the takeover")
    s.check_eq(wait_scheduled_by(cp, "ha-2"), PROFILE, "ha-2: scheduled by gpu-scheduler")
    s.check(bind_calls(prod2) - before[1] == 1, "the second replica's service bound ha-2")
    idx = gpu_indices(annotations(cp, "ha-2").get("gpu-admission.io/gpu-idx-0"))
    one = gpu_indices(annotations(cp, "ha-1").get("gpu-admission.io/gpu-idx-0"))
    s.check(idx is not None and len(idx) == 2 and not set(idx) & set(one or []),
            "ha-2's GPUs are not ha-1's: the new leader's service counts what the old one decided", (one, idx))
    s.sched = sched2
    s.prod = prod2


@suite.test
def test_cleanup(s):
    cp = s.cp
    for p in (getattr(s, "sched", None), getattr(s, "default", None)):
        if p is not None:
            cp.stop_scheduler(p)
    for ns in ("default", NS):
        for p in cp.admin.get("/api/v1/namespaces/%s/pods" % ns)["items"]:
            if p["metadata"]["name"] != STAND_IN:
                cp.delete_pod(p["metadata"]["name"], ns)


if __name__ == "__main__":
    suite.main()
