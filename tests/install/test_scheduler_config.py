#!/usr/bin/env python3
"""scheduler-config/: the KubeSchedulerConfiguration variants for v1, v1beta3
and v1beta2 are valid for their API version (known fields, kube-scheduler's
own validation rules for extenders); the drop-in variant is semantically equal
to the documented blocks (../shared/reference/scheduler-config-documented.yaml)
apart from the filled-in endpoint; the recommended variant has every verb,
every resource of design.md section 3 and sane timeouts; the hami variant is
the recommended one plus HAMi's per-vGPU resources, ignored by kube-scheduler's
own fit check (no node advertises them); the Services, ports and
paths the urlPrefixes name exist in manifests/ and the real server answers
every verb there; and render.sh writes the documented urlPrefix for given and
discovered endpoints (discovery through a stand-in kubectl)."""

import os
import re
import shutil
import stat
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_scheduler_config")

VERSIONS = ("v1", "v1beta3", "v1beta2")
VARIANTS = ("drop-in", "recommended", "hami")
# HAMi's per-vGPU resources and its task priority, ignoredByScheduler as HAMi's chart lists them.
HAMI_RESOURCES = ["nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores", "nvidia.com/priority"]
PLACEHOLDER = "${kube-apiserver}"
DESIGN_RESOURCES = ["tencent.com/vcuda-core", "tencent.com/vcuda-memory", "nvidia.com/mps-core",
                    "nvidia.com/mps-memory", "nvidia.com/gpu"]

# Fields of KubeSchedulerConfiguration and its Extender per API version
# (k8s.io/kube-scheduler/config/<version>/types.go).
TOP_FIELDS = {
    "v1beta2": {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "healthzBindAddress",
                "metricsBindAddress", "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
                "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders"},
    "v1beta3": {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
                "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
                "podMaxBackoffSeconds", "profiles", "extenders"},
    "v1": {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
           "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
           "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"},
}
CLIENT_CONNECTION_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
                   "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable"}
TLS_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
MANAGED_FIELDS = {"name", "ignoredByScheduler"}
EXT_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
URL_PREFIX = re.compile(r"^https://(?P<host>[^/]+)/api/v1/namespaces/(?P<ns>[^/]+)/services/(?P<svc>[^/:]+)/proxy(?P<path>/.*)$")


def go_duration_s(text):
    """Seconds of a Go time.Duration string, or None."""
    if not isinstance(text, str) or not re.match(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$", text):
        return None
    unit = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * unit[u] for n, _, u in re.findall(r"([0-9]+(\.[0-9]+)?)(ns|us|µs|ms|s|m|h)", text))


def template(s, version, variant):
    return s.path("scheduler-config", version, variant + ".yaml")


def load(path, endpoint=None):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if endpoint is not None:
        text = text.replace(PLACEHOLDER, endpoint)
    return ic.yaml.safe_load(text)


def reference_path(s):
    """../shared/reference/scheduler-config-documented.yaml, or the copy in
    fixtures/ when ../shared is absent (the two must be equal)."""
    shared = os.path.join(os.path.dirname(s.src), "shared", "reference", "scheduler-config-documented.yaml")
    copy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "scheduler-config-documented.yaml")
    if os.path.exists(shared):
        s.check_eq(load(copy), load(shared), "fixtures/ holds the documented blocks as ../shared has them")
        return shared
    return copy


def kube_scheduler_validation(cfg):
    """kube-scheduler's validateExtenders, and field names by version."""
    errs = []
    version = cfg.get("apiVersion", "").rpartition("/")[2]
    for k in cfg:
        if k not in TOP_FIELDS.get(version, ()):
            errs.append("unknown field %s for %s" % (k, version))
    for k in cfg.get("clientConnection") or {}:
        if k not in CLIENT_CONNECTION_FIELDS:
            errs.append("unknown clientConnection.%s" % k)
    binders = 0
    seen = set()
    for i, e in enumerate(cfg.get("extenders") or []):
        for k in e:
            if k not in EXTENDER_FIELDS:
                errs.append("extenders[%d]: unknown field %s" % (i, k))
        for k in e.get("tlsConfig") or {}:
            if k not in TLS_FIELDS:
                errs.append("extenders[%d].tlsConfig: unknown field %s" % (i, k))
        if not isinstance(e.get("urlPrefix"), str) or not e["urlPrefix"]:
            errs.append("extenders[%d]: urlPrefix" % i)
        if e.get("prioritizeVerb") and not (isinstance(e.get("weight"), int) and e["weight"] > 0):
            errs.append("extenders[%d].weight: must have a positive weight applied to it" % i)
        if e.get("bindVerb"):
            binders += 1
        if "httpTimeout" in e and go_duration_s(e["httpTimeout"]) is None:
            errs.append("extenders[%d].httpTimeout: not a duration" % i)
        for j, m in enumerate(e.get("managedResources") or []):
            for k in m:
                if k not in MANAGED_FIELDS:
                    errs.append("extenders[%d].managedResources[%d]: unknown field %s" % (i, j, k))
            name = m.get("name", "")
            if not EXT_RESOURCE.match(name) or name.split("/")[0].endswith("kubernetes.io"):
                errs.append("extenders[%d].managedResources[%d].name %r is not an extended resource" % (i, j, name))
            if name in seen:
                errs.append("duplicate extender managed resource name %s" % name)
            seen.add(name)
        for b in ("enableHTTPS", "nodeCacheCapable", "ignorable"):
            if b in e and not isinstance(e[b], bool):
                errs.append("extenders[%d].%s: want a boolean" % (i, b))
        if e.get("urlPrefix", "").startswith("https://") and not e.get("enableHTTPS"):
            errs.append("extenders[%d]: https urlPrefix without enableHTTPS" % i)
    if binders > 1:
        errs.append("only one extender can implement bind, found %d" % binders)
    return errs


@suite.test
def variants_are_valid(s):
    for v in VERSIONS:
        for var in VARIANTS:
            path = template(s, v, var)
            s.require(os.path.exists(path), "%s/%s.yaml exists" % (v, var))
            cfg = load(path, "10.0.0.1:6443")
            s.check_eq(cfg.get("apiVersion"), "kubescheduler.config.k8s.io/" + v, "%s/%s apiVersion" % (v, var))
            s.check_eq(cfg.get("kind"), "KubeSchedulerConfiguration", "%s/%s kind" % (v, var))
            errs = kube_scheduler_validation(cfg)
            s.check(not errs, "%s/%s passes kube-scheduler's validation" % (v, var), "\n".join(errs))
            with open(path) as f:
                text = f.read()
            s.check(text.count(PLACEHOLDER) == len(cfg["extenders"]), "%s/%s: one placeholder per urlPrefix" % (v, var))
            s.check(text.lstrip().startswith("#") and "Needs:" in text, "%s/%s says what it needs" % (v, var))
    # The checker itself refuses what kube-scheduler refuses.
    bad = load(template(s, "v1", "recommended"), "h:1")
    bad["extenders"].append(dict(bad["extenders"][0]))
    bad["extenders"][0]["weight"] = 0
    bad["extenders"][0]["urlPrefx"] = "x"
    errs = kube_scheduler_validation(bad)
    s.check(any("bind" in e for e in errs) and any("weight" in e for e in errs) and any("duplicate" in e for e in errs)
            and any("urlPrefx" in e for e in errs), "the validation catches two binders, weight 0, duplicates, typos", errs)


@suite.test
def drop_in_equals_documented_blocks(s):
    ref_path = reference_path(s)
    if not os.path.exists(ref_path):
        s.check(False, "the documented blocks are at %s" % ref_path)
        return
    endpoint = "192.0.2.10:6443"
    ref = load(ref_path, endpoint)
    s.check(all(PLACEHOLDER not in e["urlPrefix"] for e in ref["extenders"]), "reference placeholder substituted")
    for v in VERSIONS:
        got = load(template(s, v, "drop-in"), endpoint)
        want = dict(ref, apiVersion="kubescheduler.config.k8s.io/" + v)
        s.check_eq(got, want, "%s drop-in == documented blocks (apiVersion %s)" % (v, v))
    # Byte-level check of what matters most: the documented urlPrefixes.
    for v in VERSIONS:
        got = load(template(s, v, "drop-in"), endpoint)
        s.check_eq([e["urlPrefix"] for e in got["extenders"]],
                   ["https://%s/api/v1/namespaces/kube-system/services/%s/proxy/scheduler" % (endpoint, svc)
                    for svc in ("gpu-quota-admission", "nvidia-mps-scheduler-plugin")], "%s drop-in urlPrefixes" % v)


@suite.test
def recommended_variant(s):
    design = os.path.join(s.src, "docs", "design.md")
    resources = list(DESIGN_RESOURCES)
    if os.path.exists(design):
        with open(design, encoding="utf-8") as f:
            text = f.read()
        section = text.split("## 3.", 1)[1].split("\n## ", 1)[0]
        from_design = re.findall(r"^\| `([a-z0-9.]+/[a-z0-9-]+)` \|", section, re.M)
        s.check_eq(sorted(from_design), sorted(DESIGN_RESOURCES), "docs/design.md section 3 lists the expected resources")
        resources = from_design or resources
    for v in VERSIONS:
        cfg = load(template(s, v, "recommended"), "h:1")
        s.require(len(cfg["extenders"]) == 1, "%s: one extender (only one may bind)" % v)
        e = cfg["extenders"][0]
        s.check_eq((e.get("filterVerb"), e.get("prioritizeVerb"), e.get("bindVerb"), e.get("preemptVerb")),
                   ("predicates", "priorities", "bind", "preemption"), "%s: every verb" % v)
        s.check(isinstance(e.get("weight"), int) and 1 <= e["weight"] <= 10, "%s: a positive weight" % v)
        s.check(e.get("nodeCacheCapable") is True, "%s: nodeCacheCapable true" % v)
        s.check(e.get("ignorable") is False, "%s: ignorable false" % v)
        s.check_eq(sorted(m["name"] for m in e.get("managedResources") or []), sorted(resources),
                   "%s: managedResources = design.md section 3" % v)
        s.check(all(m.get("ignoredByScheduler") is False for m in e["managedResources"]),
                "%s: ignoredByScheduler false (the device plugins advertise them)" % v)
        t = go_duration_s(e.get("httpTimeout"))
        s.check(t is not None and 1 <= t <= 5, "%s: httpTimeout of a few seconds (%r)" % (v, e.get("httpTimeout")))
        s.check(e["urlPrefix"].endswith("/services/gpu-quota-admission/proxy/scheduler"), "%s: through the proxy" % v)
        s.check_eq(e.get("tlsConfig"), load(template(s, v, "drop-in"), "h:1")["extenders"][0]["tlsConfig"],
                   "%s: the same client certificate as the drop-in" % v)
    # It needs --placement bind, which the component sets.
    comp = ic.load_docs(s.path("manifests", "components", "placement-bind", "kustomization.yaml"))[0]
    s.check("GQA_PLACEMENT" in str(comp) and "bind" in str(comp), "components/placement-bind sets placement bind")
    flags = ic.help_flags(s.args.binary)
    s.check("placement" in flags, "the server has --placement")


@suite.test
def hami_variant(s):
    for v in VERSIONS:
        rec = load(template(s, v, "recommended"), "h:1")["extenders"][0]
        cfg = load(template(s, v, "hami"), "h:1")
        s.require(len(cfg["extenders"]) == 1, "%s hami: one extender" % v)
        e = cfg["extenders"][0]
        managed = {m["name"]: m.get("ignoredByScheduler") for m in e.get("managedResources") or []}
        s.check_eq(managed, dict({m["name"]: False for m in rec["managedResources"]},
                                 **{r: True for r in HAMI_RESOURCES}),
                   "%s hami: recommended's resources, plus HAMi's ignored by kube-scheduler's fit check" % v)
        e = dict(e, managedResources=None)
        s.check_eq(e, dict(rec, managedResources=None), "%s hami: otherwise the recommended extender" % v)


@suite.test
def names_ports_and_paths_match(s):
    objs = ic.manifest_objects(s.src)
    dep = ic.find(objs, "Deployment", "gpu-quota-admission", "kube-system")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    listen = next(a.split("=", 1)[1] for a in c["args"] if a.startswith("--listen-http="))
    http_port = int(listen.rsplit(":", 1)[1])
    cports = {p["name"]: p["containerPort"] for p in c["ports"]}
    flags = ic.help_flags(s.args.binary)
    s.check_eq(int((flags.get("listen-http") or "x:0").rsplit(":", 1)[1]), http_port,
               "the Deployment's HTTP port is the server's default port")
    verbs = set()
    for v in VERSIONS:
        for var in VARIANTS:
            cfg = load(template(s, v, var), "10.0.0.1:6443")
            for e in cfg["extenders"]:
                m = URL_PREFIX.match(e["urlPrefix"])
                s.require(m is not None, "%s/%s: urlPrefix goes through the service proxy" % (v, var), e["urlPrefix"])
                svc = ic.find(objs, "Service", m.group("svc"), m.group("ns"))
                s.require(svc is not None, "%s/%s: Service %s/%s exists" % (v, var, m.group("ns"), m.group("svc")))
                ports = svc["spec"]["ports"]
                unnamed = [p for p in ports if not p.get("name")]
                s.check(len(ports) == 1 and len(unnamed) == 1,
                        "%s/%s: %s has the single unnamed port services/NAME/proxy dials" % (v, var, m.group("svc")))
                t = ports[0].get("targetPort", ports[0]["port"])
                s.check_eq(cports.get(t, t), http_port, "%s/%s: %s reaches the plain-HTTP listener" % (v, var, m.group("svc")))
                # The extender Services select the leader: the pod that also carries its label.
                leader = dict(dep["spec"]["template"]["metadata"]["labels"], **{"gpu-admission.io/leader": "true"})
                s.check(ic.labels_match({"matchLabels": svc["spec"]["selector"]}, leader),
                        "%s/%s: %s selects the service's leader pod" % (v, var, m.group("svc")))
                s.check_eq(m.group("path"), "/scheduler", "%s/%s: path prefix /scheduler" % (v, var))
                for k in ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb"):
                    if e.get(k):
                        verbs.add((k, m.group("path") + "/" + e[k]))
    # The real server answers each verb at that path.
    with open(s.path("examples", "requests", "filter-vcuda-share.json")) as f:
        filter_body = f.read()
    import json
    pod = json.loads(filter_body)["Pod"]
    bodies = {
        "filterVerb": filter_body,
        "prioritizeVerb": filter_body,
        "bindVerb": json.dumps({"PodName": "nobody", "PodNamespace": "default", "PodUID": "u-1", "Node": "gpu-a100-0"}),
        "preemptVerb": json.dumps({"Pod": pod, "NodeNameToVictims": {}, "NodeNameToMetaVictims": {}}),
    }
    with ic.Server(s, extra=["--placement", "bind"]) as srv:
        for k, path in sorted(verbs):
            status, body = srv.call("POST", path, bodies[k])
            s.check_eq(status, 200, "POST %s (%s) is served" % (path, k))
            try:
                json.loads(body)
                s.check(True, "POST %s answers JSON" % path)
            except ValueError:
                s.check(False, "POST %s answers JSON" % path, body)
        status, _ = srv.call("POST", "/scheduler/no-such-verb", "{}")
        s.check_eq(status, 404, "an unknown verb is 404 (so the checks above mean something)")
        for probe in ("/livez", "/readyz", "/metrics"):
            status, _ = srv.call("GET", probe)
            s.check_eq(status, 200, "GET %s (probes, scrapes) is served" % probe)
    s.check({k for k, _ in verbs} == {"filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb"}, "all verbs were tried")


def render(s, *args, env=None):
    e = dict(os.environ)
    e.pop("KUBECTL", None)
    if env:
        e.update(env)
    return ic.run(["bash", s.path("scheduler-config", "render.sh")] + list(args), env=e)


def documented(endpoint, svc="gpu-quota-admission"):
    return "https://%s/api/v1/namespaces/kube-system/services/%s/proxy/scheduler" % (endpoint, svc)


@suite.test
def render_given_endpoints(s):
    for v in VERSIONS:
        for var in VARIANTS:
            r = render(s, "--api-version", v, "--variant", var, "--endpoint", "10.1.2.3:6443", "--stdout")
            s.require(r.returncode == 0, "render %s %s --stdout" % (v, var), r.stderr)
            s.check(PLACEHOLDER not in r.stdout, "%s %s: no placeholder left" % (v, var))
            cfg = ic.yaml.safe_load(r.stdout)
            s.check_eq(cfg, load(template(s, v, var), "10.1.2.3:6443"), "%s %s: the template with the endpoint" % (v, var))
            s.check_eq(cfg["extenders"][0]["urlPrefix"], documented("10.1.2.3:6443"), "%s %s: documented urlPrefix" % (v, var))
    out = s.tempdir("render")
    r = render(s, "--endpoint", "master-a=10.0.0.1:6443", "--endpoint", "10.0.0.2:6443",
               "--endpoint", "[fd00::3]:6443", "--endpoint", "api.example.com:443", "--out", out)
    s.require(r.returncode == 0, "render several endpoints", r.stderr)
    s.check_eq(sorted(os.listdir(out)), sorted(["master-a", "10.0.0.2", "fd00::3", "api.example.com"]),
               "one directory per master")
    for name, ep in (("master-a", "10.0.0.1:6443"), ("10.0.0.2", "10.0.0.2:6443"), ("fd00::3", "[fd00::3]:6443"),
                     ("api.example.com", "api.example.com:443")):
        cfg = load(os.path.join(out, name, "scheduler-config.yaml"))
        s.check_eq([e["urlPrefix"] for e in cfg["extenders"]],
                   [documented(ep), documented(ep, "nvidia-mps-scheduler-plugin")], "%s: documented urlPrefixes" % name)
    for bad in (["--endpoint", "10.0.0.1"], ["--endpoint", "a b:1"], ["--endpoint", "x:99999"],
                ["--endpoint", "$(id):1"], ["--api-version", "v2", "--endpoint", "h:1"],
                ["--variant", "fast", "--endpoint", "h:1"], ["--bogus"],
                ["--endpoint", "h:1", "--endpoint", "g:2", "--stdout"],
                ["--endpoint", "x=h:1", "--endpoint", "x=g:2", "--out", s.tempdir("dup")]):
        r = render(s, *bad)
        s.check_eq(r.returncode, 2, "render %s is refused" % " ".join(bad))
        s.check(r.stderr.strip() != "", "render %s says why" % " ".join(bad))
    r = render(s, "--help")
    s.check(r.returncode == 0 and "--endpoint" in r.stdout, "render --help")


FAKE_KUBECTL = r"""#!/usr/bin/env bash
# Stand-in kubectl: the answers a 3-master cluster gives to render.sh's queries.
echo "$*" >>"$FAKE_LOG"
case "$*" in
*"get endpoints kubernetes -n default"*'ports[?(@.name=="https")]'*) printf '%s' "$FAKE_PORT" ;;
*"get endpoints kubernetes -n default"*'ports[0]'*) printf '%s' "$FAKE_PORT" ;;
*"get endpoints kubernetes -n default"*addresses*) printf '%b' "$FAKE_IPS" ;;
*"get nodes"*) [ "${FAKE_NODES_FORBIDDEN:-}" = 1 ] && { echo 'Error: forbidden' >&2; exit 1; }
               printf 'master-1\t10.0.0.11 master-1 \nmaster-2\t10.0.0.12 master-2 \nworker-1\t10.0.0.20 worker-1 \n' ;;
*) echo "fake kubectl: unexpected: $*" >&2; exit 1 ;;
esac
"""


@suite.test
def render_discovers_endpoints(s):
    d = s.tempdir("fake")
    kubectl = os.path.join(d, "kubectl")
    with open(kubectl, "w") as f:
        f.write(FAKE_KUBECTL)
    os.chmod(kubectl, os.stat(kubectl).st_mode | stat.S_IEXEC)
    log = os.path.join(d, "log")
    env = {"FAKE_LOG": log, "FAKE_PORT": "6443", "FAKE_IPS": "10.0.0.11\\n10.0.0.12\\n10.0.0.13\\n",
           "PATH": d + os.pathsep + os.environ.get("PATH", "")}
    out = s.tempdir("discovered")
    r = render(s, "--out", out, "--variant", "recommended", "--api-version", "v1beta3", env=env)
    s.require(r.returncode == 0, "render discovers the endpoints", r.stderr)
    s.check_eq(sorted(os.listdir(out)), ["10.0.0.13", "master-1", "master-2"],
               "files named after the master nodes (the address when no node has it)")
    for name, ip in (("master-1", "10.0.0.11"), ("master-2", "10.0.0.12"), ("10.0.0.13", "10.0.0.13")):
        cfg = load(os.path.join(out, name, "scheduler-config.yaml"))
        s.check_eq(cfg["apiVersion"], "kubescheduler.config.k8s.io/v1beta3", "%s: v1beta3" % name)
        s.check_eq(cfg["extenders"][0]["urlPrefix"], documented(ip + ":6443"), "%s: documented urlPrefix" % name)
    with open(log) as f:
        calls = f.read()
    s.check("get endpoints kubernetes -n default" in calls, "read the kubernetes Service's endpoints", calls)
    # --kubectl, a node list that is not allowed, IPv6 endpoints.
    out2 = s.tempdir("discovered6")
    env2 = dict(env, FAKE_IPS="fd00::11\\n", FAKE_NODES_FORBIDDEN="1", PATH=os.environ.get("PATH", ""))
    r = render(s, "--out", out2, "--kubectl", kubectl, env=env2)
    s.require(r.returncode == 0, "render with --kubectl, without node names", r.stderr)
    s.check_eq(os.listdir(out2), ["fd00::11"], "named by address")
    cfg = load(os.path.join(out2, "fd00::11", "scheduler-config.yaml"))
    s.check_eq(cfg["extenders"][0]["urlPrefix"], documented("[fd00::11]:6443"), "IPv6 endpoint in brackets")
    # No endpoints, no port: refused.
    r = render(s, "--out", s.tempdir("none"), "--kubectl", kubectl, env=dict(env, FAKE_IPS=""))
    s.check_eq(r.returncode, 2, "no endpoints is an error")
    r = render(s, "--out", s.tempdir("noport"), "--kubectl", kubectl, env=dict(env, FAKE_PORT=""))
    s.check_eq(r.returncode, 2, "no port is an error")
    r = render(s, "--out", s.tempdir("nokubectl"), "--kubectl", os.path.join(d, "missing"))
    s.check_eq(r.returncode, 2, "no kubectl and no --endpoint is an error")


@suite.test
def shellcheck_scripts(s):
    sc = shutil.which("shellcheck")
    if not sc:
        s.skip("shellcheck", "not installed")
        return
    for script in (s.path("scheduler-config", "render.sh"), s.path("scripts", "gen-certs.sh")):
        r = ic.run([sc, "-x", script])
        s.check(r.returncode == 0, "shellcheck %s" % os.path.relpath(script, s.src), r.stdout + r.stderr)


if __name__ == "__main__":
    sys.exit(suite.main())
