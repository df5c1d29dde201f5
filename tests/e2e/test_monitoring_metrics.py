#!/usr/bin/env python3
"""manifests/components/monitoring: every metric name the Grafana dashboard and
the PrometheusRule use is one the binary exports. The binary runs live (leader
election on, against the API simulator) so the informer and leader series exist,
and with --metrics-per-node; its /metrics is scraped and histogram families
count with their _bucket, _sum and _count series. Also: the dashboard is valid
JSON with the panels the issue asks for, every alert has a runbook section in
docs/troubleshooting.md, and the component builds with kubectl kustomize."""
import json
import os
import re
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("PyYAML is missing: apt-get install -y python3-yaml\n0 passed, 1 failed")
    sys.exit(1)

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as e2e  # noqa: E402

suite = e2e.Suite("monitoring-metrics")

# Series Prometheus makes itself, not the binary.
PROMETHEUS_OWN = {"up"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
                "offset", "le", "inf", "nan"}


def component(*parts):
    return suite.path("manifests", "components", "monitoring", *parts)


def expressions():
    """(where, expr) for every alert and every dashboard target."""
    out = []
    with open(component("prometheusrule.yaml")) as f:
        rule = yaml.safe_load(f)
    for g in rule["spec"]["groups"]:
        for r in g["rules"]:
            out.append(("alert " + r["alert"], r["expr"]))
    with open(component("dashboard.json")) as f:
        dash = json.load(f)
    for p in dash["panels"]:
        for t in p.get("targets") or []:
            out.append(("panel " + p["title"], t["expr"]))
    for v in dash["templating"]["list"]:
        if v.get("type") == "query":
            out.append(("variable " + v["name"], v["query"]))
    return out


def metric_names(expr):
    """Metric names an expression selects: identifiers that are not functions,
    keywords, label names in matchers or grouping, strings or durations."""
    e = re.sub(r"label_values\(([^,()]+),[^)]*\)", r"(\1)", expr)  # Grafana: label_values(metric, label)
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', e)            # strings
    e = re.sub(r"\{[^}]*\}", "", e)                       # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                      # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)  # grouping labels
    e = re.sub(r"\$\w+", "", e)                            # dashboard variables
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        word = m.group(0)
        if rest.startswith("(") or word.lower() in PROMQL_WORDS or re.match(r"^\d", word):
            continue
        names.add(word)
    return names


def exported_names(text):
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            names.add(name)
            if kind == "histogram":
                names.update({name + "_bucket", name + "_sum", name + "_count"})
            elif kind == "summary":
                names.update({name + "_sum", name + "_count"})
        elif line and not line.startswith("#"):
            names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return names


@suite.test
def extraction_understands_promql(s):
    s.check_eq(metric_names('histogram_quantile(0.99, sum by (le, verb) (rate(a_bucket{verb=~"x|y"}[5m]))) > 4'),
               {"a_bucket"}, "functions, grouping, matchers and ranges are not metrics")
    s.check_eq(metric_names("max by (model) (b) > 0.5 and on () sum(c{reason=\"q\"}) > 0 / vector($t)"), {"b", "c"},
               "binary operators and variables")
    s.check_eq(metric_names("label_values(gqa_cache_nodes, job)"), {"gqa_cache_nodes"}, "Grafana's label_values")


@suite.test
def every_metric_used_is_exported(s):
    with e2e.Cluster(s) as c:
        c.add_node(e2e.node("n1", e2e.vcuda(400, 256), labels={"tkestack.io/gpu-model": "A100"}))
        with e2e.LiveServer(s, c.kubeconfig(), flags=["--leader-elect", "--metrics-per-node", "--metrics-per-pod"]) as srv:
            # one filter that fits and one that does not, so every family has series
            srv.filter(e2e.pod("small", e2e.vcuda(10, 8)), ["n1"])
            srv.filter(e2e.pod("huge", e2e.vcuda(800, 512)), ["n1"])
            text = srv.metrics().text
    exported = exported_names(text)
    used = {}
    for where, expr in expressions():
        for name in metric_names(expr):
            used.setdefault(name, where)
    s.check(len(used) >= 15, "the dashboard and rules use the service's metrics", sorted(used))
    for name, where in sorted(used.items()):
        s.check(name in exported or name in PROMETHEUS_OWN, "%s (%s) is exported by the binary" % (name, where),
                "exported: %s" % sorted(n for n in exported if n.startswith("gqa_")))
    with open(s.path("docs", "reference.md")) as f:
        doc = f.read()
    shorthand = re.findall(r"`(_[a-z_]+)`", doc)  # "`gqa_informer_events_total`, `_relists_total`"
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    for family in sorted(families):
        s.check(family in doc or any(family.endswith(t) for t in shorthand),
                "%s is documented in docs/reference.md" % family)
    for family in ("gqa_resource_allocatable", "gqa_gpu_fragmentation_ratio", "gqa_resource_stranded",
                   "gqa_pending_pods", "gqa_filter_unschedulable_total", "gqa_node_gpus"):
        s.check(family in exported, "%s is exported" % family)


@suite.test
def error_alert_sees_error_fields(s):
    """The filter and bind answer errors with 200 and Error set: the alert must count those."""
    with open(component("prometheusrule.yaml")) as f:
        text = f.read()
    start = text.index("alert: GpuQuotaAdmissionErrorRatio")
    rule = text[start:text.index("- alert:", start + 1)]
    s.check_in('gqa_extender_answers_total{outcome="error"}', rule, "GpuQuotaAdmissionErrorRatio counts Error answers")


@suite.test
def dashboard_covers_what_operators_watch(s):
    with open(component("dashboard.json")) as f:
        dash = json.load(f)
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p.get("targets") or [])
    for what, needle in (("latency per verb", "gqa_http_request_duration_seconds_bucket"),
                         ("the httpTimeout line", "$http_timeout"), ("decisions", "gqa_decisions_total"),
                         ("errors carried in Error fields", 'gqa_extender_answers_total{job=~"$job",outcome="error"}'),
                         ("errors carried in status codes", 'code!~"200|500"'),
                         ("cache sync", "gqa_informer_synced"),
                         ("watch health", "gqa_informer_errors_total"), ("leader", "gqa_leader"),
                         ("quota use", "gqa_quota_used_gpus"), ("fragmentation", "gqa_gpu_fragmentation_ratio"),
                         ("failed API writes", "gqa_api_writes_total"),
                         ("allocation per GPU", "gqa_gpu_allocated_cores"),
                         ("allocation per pod of the chosen namespaces", 'namespace=~"$namespace"'),
                         ("memory in bytes", "gqa_resource_allocated_memory_bytes")):
        s.check(needle in exprs, "the dashboard shows %s" % what)
    names = [v["name"] for v in dash["templating"]["list"]]
    s.check("namespace" in names, "the dashboard has a namespace variable", names)
    ids = [p["id"] for p in dash["panels"]]
    s.check_eq(len(ids), len(set(ids)), "panel ids are unique")


def anchors(markdown):
    out = set()
    for line in markdown.splitlines():
        m = re.match(r"^#+\s+(.*)$", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


@suite.test
def every_alert_has_a_runbook(s):
    with open(component("prometheusrule.yaml")) as f:
        rule = yaml.safe_load(f)
    with open(s.path("docs", "troubleshooting.md")) as f:
        have = anchors(f.read())
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    names = {r["alert"] for r in alerts}
    for want in ("GpuQuotaAdmissionDown", "GpuQuotaAdmissionErrorRatio", "GpuQuotaAdmissionLatencyNearTimeout",
                 "GpuQuotaAdmissionCachesNotSynced", "GpuQuotaAdmissionLeaderChanges", "GpuQuotaAdmissionQuotaInvalid",
                 "GpuQuotaAdmissionCRLInvalid", "GpuQuotaAdmissionFragmentationHigh",
                 "GpuQuotaAdmissionWritesFailing"):
        s.check(want in names, "alert %s exists" % want)
    for r in alerts:
        url = r["annotations"].get("runbook_url", "")
        anchor = url.split("#", 1)[1] if "#" in url else ""
        s.check(url.startswith("docs/troubleshooting.md#") and anchor == r["alert"].lower(),
                "%s links its runbook" % r["alert"], url)
        s.check(anchor in have, "docs/troubleshooting.md has a section %s" % r["alert"], sorted(have))


@suite.test
def component_builds(s):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        s.check(True, "kubectl is not installed: kustomize build not checked")
        return
    work = s.tempdir("kustomize")
    with open(os.path.join(work, "kustomization.yaml"), "w") as f:
        f.write("resources:\n- %s\ncomponents:\n- %s\n" % (os.path.relpath(s.path("manifests"), work),
                                                          os.path.relpath(component(), work)))
    p = subprocess.run([kubectl, "kustomize", work], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    s.require(p.returncode == 0, "kubectl kustomize with the monitoring component", p.stderr.decode())
    objs = [d for d in yaml.safe_load_all(p.stdout) if d]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    for k in (("ServiceMonitor", "gpu-quota-admission"), ("PrometheusRule", "gpu-quota-admission"),
              ("ConfigMap", "gpu-quota-admission-dashboard"), ("Service", "gpu-quota-admission-metrics")):
        s.check(k in kinds, "the component adds %s %s" % k)
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "gpu-quota-admission-dashboard")
    s.check_eq(cm["metadata"]["labels"].get("grafana_dashboard"), "1", "Grafana's sidecar label")
    json.loads(cm["data"]["gpu-quota-admission.json"])
    svc = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "gpu-quota-admission-metrics")
    sm = next(o for o in objs if o["kind"] == "ServiceMonitor")
    s.check(all(svc["metadata"]["labels"].get(k) == v for k, v in sm["spec"]["selector"]["matchLabels"].items()),
            "the ServiceMonitor selects the metrics Service")
    s.check_eq([p["name"] for p in svc["spec"]["ports"]], [sm["spec"]["endpoints"][0]["port"]],
               "it scrapes the Service's named port")


if __name__ == "__main__":
    suite.main()
