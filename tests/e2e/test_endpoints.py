#!/usr/bin/env python3
"""Every endpoint of design.md section 2 that this build serves, on the demo state:
health, readiness, version, metrics (Prometheus text, counters and the latency
histogram moving with traffic), inspect (all nodes, one node, 404), explain,
filter and prioritize under both of their paths, and both ExtenderArgs forms
(NodeNames and a full v1 NodeList)."""

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_endpoints")


@suite.test
def health_and_version(s):
    with g.Server(s) as srv:
        for path in ("/healthz", "/livez", "/readyz"):
            r = srv.get(path)
            s.check_eq(r.status, 200, "GET %s status" % path)
            s.check_eq(r.text.strip(), "ok", "GET %s body" % path)
        r = srv.request("HEAD", "/healthz")
        s.check_eq(r.status, 200, "HEAD /healthz status")
        s.check_eq(r.body, b"", "HEAD /healthz has no body")
        for path in ("/metrics", "/inspect/nodes", "/version", "/readyz"):
            r = srv.request("HEAD", path)
            s.check_eq((r.status, r.body), (200, b""), "HEAD %s: 200 without a body" % path)
        r = srv.get("/healthz?verbose=1")
        s.check_eq(r.status, 200, "a query string does not change the route")
        r = srv.get("/version")
        s.check_eq(r.status, 200, "GET /version status")
        s.check_in("application/json", r.header("content-type"), "/version is JSON")
        v = r.json()
        for k in ("version", "gitCommit", "buildDate"):
            s.check(isinstance(v.get(k), str) and v[k], "/version has a non-empty %s" % k, v)
        cli = g.run_binary(s, ["--version"])
        s.check_eq(cli.code, 0, "--version exits 0")
        s.check(v.get("version", "?") in cli.out and v.get("gitCommit", "?") in cli.out,
                "--version and /version agree", (cli.out, v))


@suite.test
def metrics_prometheus(s):
    with g.Server(s) as srv:
        text0 = srv.metrics()
        s.check_in("text/plain", text0.header("content-type"), "/metrics content type")
        s.check_in("version=0.0.4", text0.header("content-type"), "/metrics is text format 0.0.4")
        samples0, types0, bad0 = g.parse_metrics(text0.text)
        s.check_eq(bad0, [], "every /metrics line parses")
        s.check_eq(types0.get("gqa_http_requests_total"), "counter", "gqa_http_requests_total is a counter")
        s.check_eq(types0.get("gqa_http_request_duration_seconds"), "histogram",
                   "gqa_http_request_duration_seconds is a histogram")

        # Traffic: filters, prioritizes, explains, inspects, a 404 and a 405.
        args = {"Pod": g.demo_pod("mps-share"), "NodeNames": g.DEMO_ARGS_ORDER}
        for _ in range(3):
            s.check_eq(srv.post("/scheduler/filter", args).status, 200, "filter for metrics")
        for _ in range(2):
            s.check_eq(srv.post("/scheduler/prioritize", args).status, 200, "prioritize for metrics")
        srv.post("/inspect/explain", g.demo_pod("gpu-4"))
        srv.get("/inspect/nodes")
        srv.get("/inspect/nodes/nope")
        srv.get("/no/such/path")
        srv.request("GET", "/scheduler/filter")
        want = {("filter", "200"): 3, ("prioritize", "200"): 2, ("explain", "200"): 1, ("inspect", "200"): 1,
                ("inspect", "404"): 1, ("other", "404"): 1, ("filter", "405"): 1}

        # Requests are counted when their connection completes, which may
        # trail the client's read by a moment.
        deadline = time.monotonic() + 5
        while True:
            samples, types, bad = g.parse_metrics(srv.metrics().text)
            got = {k: g.metric(samples, "gqa_http_requests_total", verb=k[0], code=k[1]) -
                   g.metric(samples0, "gqa_http_requests_total", verb=k[0], code=k[1]) for k in want}
            if all(got[k] >= want[k] for k in want) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        for k, n in want.items():
            s.check_eq(got[k], n, "gqa_http_requests_total{verb=%s,code=%s} went up by %d" % (k[0], k[1], n))
        s.check(g.metric(samples, "gqa_http_requests_total", verb="metrics", code="200") >= 1,
                "earlier scrapes are counted under verb=metrics")
        s.check_eq(bad, [], "every /metrics line parses after traffic")

        # The histogram: cumulative buckets, +Inf = _count = requests of the verb.
        for verb in ("filter", "prioritize", "explain", "inspect"):
            buckets = sorted(((float(dict(lbl)["le"]), v) for (name, lbl), v in samples.items()
                              if name == "gqa_http_request_duration_seconds_bucket" and dict(lbl).get("verb") == verb),
                             key=lambda x: x[0])
            s.check(len(buckets) >= 5, "histogram for %s has buckets" % verb, buckets)
            if not buckets:
                continue
            s.check(all(buckets[i][1] <= buckets[i + 1][1] for i in range(len(buckets) - 1)),
                    "histogram buckets for %s are cumulative" % verb, buckets)
            s.check_eq(buckets[-1][0], float("inf"), "last bucket for %s is +Inf" % verb)
            count = g.metric(samples, "gqa_http_request_duration_seconds_count", verb=verb)
            s.check_eq(buckets[-1][1], count, "+Inf bucket equals _count for %s" % verb)
            total = sum(v for (name, lbl), v in samples.items()
                        if name == "gqa_http_requests_total" and dict(lbl).get("verb") == verb)
            s.check_eq(count, total, "_count equals requests_total over codes for %s" % verb)
            s.check(("gqa_http_request_duration_seconds_sum", frozenset({("verb", verb)})) in samples,
                    "histogram _sum for %s present" % verb)
        fsum = g.metric(samples, "gqa_http_request_duration_seconds_sum", verb="filter")
        s.check(0 < fsum < 60, "filter latency sum is plausible", fsum)
        s.check_eq(g.metric(samples, "gqa_cache_nodes"), 4.0, "gqa_cache_nodes counts the demo nodes")
        s.check_eq(g.metric(samples, "gqa_decisions_total"), 1.0,
                   "three filters of one pod are one decision (the re-filters answer the same node)")


@suite.test
def answers_by_outcome(s):
    """A 200 answer whose Error is set counts as an error; a filter that keeps no node as unschedulable."""
    with g.Server(s) as srv:
        def answers(verb, outcome):
            samples, _t, _b = g.parse_metrics(srv.metrics().text)
            return g.metric(samples, "gqa_extender_answers_total", verb=verb, outcome=outcome)

        base = {(v, o): answers(v, o) for v in ("filter", "prioritize", "bind") for o in ("fit", "unschedulable",
                                                                                          "error")}
        fits = {"Pod": g.demo_pod("mps-share"), "NodeNames": g.DEMO_ARGS_ORDER}
        s.check_eq(srv.post("/scheduler/filter", fits).status, 200, "a filter that fits")
        nowhere = {"Pod": g.demo_pod("mps-share"), "NodeNames": ["cpu-0"]}
        s.check_eq(srv.post("/scheduler/filter", nowhere).status, 200, "a filter that fits nowhere")
        r = srv.post("/scheduler/filter", '{"Pod":')
        s.check(r.status == 200 and r.json().get("Error"), "a malformed filter answers 200 with Error", r.text)
        r = srv.post("/scheduler/prioritize", '{"Pod":')
        s.check_eq(r.status, 500, "a malformed prioritize answers 500")
        r = srv.post("/scheduler/bind", {"PodName": "nope", "PodNamespace": "default", "PodUID": "u", "Node": "n"})
        s.check(r.status == 200 and r.json().get("Error"), "a bind that fails answers 200 with Error", r.text)
        want = {("filter", "fit"): 1, ("filter", "unschedulable"): 1, ("filter", "error"): 1,
                ("prioritize", "error"): 1, ("bind", "error"): 1, ("bind", "fit"): 0}
        for k, n in want.items():
            s.check_eq(answers(*k) - base[k], n, "gqa_extender_answers_total{verb=%s,outcome=%s} went up by %d"
                       % (k[0], k[1], n))
        samples, types, _b = g.parse_metrics(srv.metrics().text)
        s.check_eq(types.get("gqa_build_info"), "gauge", "gqa_build_info is a gauge")
        info = [dict(lbl) for (name, lbl), v in samples.items() if name == "gqa_build_info" and v == 1]
        version = srv.get("/version").json()
        s.check(len(info) == 1 and info[0].get("version") == version.get("version"),
                "gqa_build_info carries the version /version reports", (info, version))


@suite.test
def inspect_nodes(s):
    with g.Server(s) as srv:
        r = srv.get("/inspect/nodes")
        s.check_eq(r.status, 200, "GET /inspect/nodes status")
        s.check_in("application/json", r.header("content-type"), "/inspect/nodes is JSON")
        nodes = r.json()
        s.require(isinstance(nodes, list), "/inspect/nodes is a list", nodes)
        s.check_eq([n["node"] for n in nodes], g.DEMO_NODES, "every demo node, by name")
        by = {n["node"]: n for n in nodes}
        for n in nodes:
            for gpu in n["gpus"]:
                for k in ("index", "coreUsed", "coreTotal", "memoryUsed", "memoryTotal", "pods"):
                    s.check(k in gpu, "%s GPU %s has %s" % (n["node"], gpu.get("index"), k), gpu)
            s.check("unattributed" in n and "topology" in n, "%s has unattributed and topology" % n["node"], n)
        a100 = by["gpu-a100-0"]
        s.check_eq(len(a100["gpus"]), 8, "gpu-a100-0 has 8 GPUs")
        g0 = a100["gpus"][0]
        s.check_eq((g0["coreUsed"], g0["coreTotal"], g0["memoryUsed"], g0["memoryTotal"]), (80, 100, 140, 320),
                   "gpu-a100-0 GPU 0: notebook-1 (50/100) + inference-1 (30/40) of 100 cores / 320 blocks")
        s.check_eq(sorted(g0["pods"]), ["team-a/inference-1", "team-a/notebook-1"], "gpu-a100-0 GPU 0 pods")
        for i in (2, 3):
            gi = a100["gpus"][i]
            s.check_eq((gi["coreUsed"], gi["memoryUsed"], gi["pods"]), (100, 320, ["team-b/trainer-1"]),
                       "gpu-a100-0 GPU %d holds trainer-1 whole" % i)
        s.check_eq(a100["gpus"][7]["pods"], [], "a Succeeded pod holds no GPU (finished-1 on GPU 7)")
        s.check_eq(a100["gpus"][7]["coreUsed"], 0, "gpu-a100-0 GPU 7 is idle")
        ua = a100["unattributed"]
        s.check_eq((ua.get("cores"), ua.get("vcudaMemory"), ua.get("pods")), (20, 20, ["team-c/legacy-1"]),
                   "legacy-1 (no index annotations) is unattributed on gpu-a100-0")
        t4 = by["gpu-t4-0"]
        s.check_eq(len(t4["gpus"]), 4, "gpu-t4-0 has 4 GPUs")
        s.check_eq((t4["gpus"][1]["coreUsed"], t4["gpus"][1]["memoryUsed"], t4["gpus"][1]["memoryTotal"]),
                   (50, 8, 15), "gpu-t4-0 GPU 1: mps-worker-1 50 cores, 8 of 15 mps-memory")
        s.check_eq(t4["gpus"][1]["pods"], ["team-b/mps-worker-1"], "gpu-t4-0 GPU 1 pods")
        v100 = by["gpu-v100-0"]
        s.check_eq([gp["coreUsed"] for gp in v100["gpus"]], [100, 0, 0, 100, 0, 0, 0, 0],
                   "gpu-v100-0: resnet-1 holds GPUs 0 and 3")
        s.check_eq(v100["gpus"][3]["pods"], ["team-b/resnet-1"], "gpu-v100-0 GPU 3 pods")
        s.check_eq(by["cpu-0"]["gpus"], [], "cpu-0 has no GPUs")
        s.check(a100["topology"] and len(a100["topology"].get("gpus", [])) == 8, "gpu-a100-0 topology reported",
                a100["topology"])
        s.check(by["cpu-0"]["topology"] is None, "cpu-0 has no topology")

        for name in g.DEMO_NODES:
            r = srv.get("/inspect/nodes/" + name)
            s.check_eq(r.status, 200, "GET /inspect/nodes/%s status" % name)
            s.check_eq(r.json(), by[name], "/inspect/nodes/%s equals its entry in the list" % name)
        for bad in ("/inspect/nodes/no-such-node", "/inspect/nodes/gpu-a100-0x", "/inspect/nodes/"):
            r = srv.get(bad)
            s.check_eq(r.status, 404, "GET %s is 404" % bad)
            s.check_in("application/json", r.header("content-type"), "%s 404 is JSON" % bad)
            try:
                err = r.json().get("error")
            except ValueError:
                err = None
            s.check(isinstance(err, str) and err, "%s 404 carries an error message" % bad, r)
        r = srv.get("/inspect/nodes/no-such-node")
        s.check_in("no-such-node", r.json().get("error"), "the 404 names the node")


@suite.test
def explain(s):
    with g.Server(s) as srv:
        before = srv.inspect()
        ans = srv.explain(g.demo_pod("vcuda-two-containers"))
        s.check_eq(ans.get("pod"), "default/vcuda-two-containers", "explain names the pod NS/NAME")
        s.check_eq(sorted(n["node"] for n in ans["nodes"]), g.DEMO_NODES, "explain covers every node")
        s.check(g.ranked_ok(ans), "explain lists the best node first", ans)
        best = ans["nodes"][0]
        s.check_eq((best["node"], best["fits"]), ("gpu-a100-0", True), "best node for vcuda-two-containers")
        s.check_eq(best["gpus"], {"model": [1], "tokenizer": [0]},
                   "GPUs per container (GPU-Manager binpack: tokenizer's 20 cores fit GPU 0's last 20; no sidecar)")
        s.check(1 <= best["score"] <= 10, "a fitting node scores 1..10", best)
        s.check_eq(best["reason"], "", "a fitting node has no reason")
        for n in ans["nodes"][1:]:
            s.check(not n["fits"] and n["score"] == 0 and n["gpus"] == {} and n["reason"],
                    "non-fitting %s: score 0, no GPUs, a reason" % n["node"], n)
        s.check_in("tencent.com/vcuda-core", g.explain_node(ans, "gpu-v100-0")["reason"],
                   "gpu-v100-0's reason names the resource")
        s.check_in("no GPUs", g.explain_node(ans, "cpu-0")["reason"], "cpu-0's reason says it has no GPUs")

        ans = srv.explain(g.demo_pod("gpu-4"))
        s.check_eq(ans["nodes"][0]["node"], "gpu-v100-0", "gpu-4 goes to gpu-v100-0")
        got = ans["nodes"][0]["gpus"].get("trainer", [])
        s.check(len(got) == 4 and len(set(got)) == 4 and set(got) <= {1, 2, 4, 5, 6, 7},
                "gpu-4: four distinct GPUs, none of resnet-1's 0 and 3", got)
        s.check_eq(srv.inspect(), before, "explain records nothing")
        r = srv.post("/inspect/explain", g.demo_pod("gpu-4"))
        s.check_in("application/json", r.header("content-type"), "explain answers JSON")


@suite.test
def filter_and_prioritize_paths(s):
    with g.Server(s, flags=["--placement", "bind"]) as srv:
        for name in ("gpu-4", "mps-share", "vcuda-share"):
            with open(s.path("examples", "requests", "filter-%s.json" % name), "rb") as f:
                body = f.read()
            answers = {}
            for path in ("/scheduler/predicates", "/scheduler/filter"):
                r = srv.post(path, body)
                s.check_eq(r.status, 200, "POST %s (%s) status" % (path, name))
                s.check_in("application/json", r.header("content-type"), "%s answers JSON" % path)
                answers[path] = r.body
            s.check_eq(answers["/scheduler/predicates"], answers["/scheduler/filter"],
                       "/scheduler/predicates and /scheduler/filter answer alike (%s)" % name)
            res = json.loads(answers["/scheduler/filter"])
            for k in ("Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"):
                s.check(k in res, "ExtenderFilterResult has %s" % k, res)
            expect = {"gpu-4": "gpu-v100-0", "mps-share": "gpu-t4-0", "vcuda-share": "gpu-a100-0"}[name]
            s.check_eq(res["NodeNames"], [expect], "filter %s keeps only %s" % (name, expect))
            s.check_eq(res["Error"], "", "no Error for %s" % name)
            s.check(res["Nodes"] is None, "NodeNames form answers Nodes null")
            failed = dict(res["FailedNodes"] or {}, **(res["FailedAndUnresolvableNodes"] or {}))
            s.check_eq(sorted(failed), sorted(set(g.DEMO_NODES) - {expect}), "every other node failed (%s)" % name)

            pr = {}
            for path in ("/scheduler/priorities", "/scheduler/prioritize"):
                r = srv.post(path, body)
                s.check_eq(r.status, 200, "POST %s (%s) status" % (path, name))
                pr[path] = r.body
            s.check_eq(pr["/scheduler/priorities"], pr["/scheduler/prioritize"],
                       "/scheduler/priorities and /scheduler/prioritize answer alike (%s)" % name)
            hp = json.loads(pr["/scheduler/prioritize"])
            s.check(isinstance(hp, list), "HostPriorityList is a list", hp)
            s.check(all(isinstance(h.get("Score"), int) and 1 <= h["Score"] <= 10 for h in hp),
                    "scores are integers 1..10 (the lowest, 0 after taking it away, is left out)", hp)
            # The non-fitting nodes score 0, the lowest: only the fitting node is answered.
            s.check_eq([h.get("Host") for h in hp], [expect], "only the node above the lowest (%s)" % name)
            scores = g.scores_of(hp, g.DEMO_ARGS_ORDER)
            s.check(scores is not None and scores[expect] >= 1, "the fitting node scores above 0 (%s)" % name, hp)
            ex = srv.explain(json.loads(body)["Pod"])
            s.check_eq(g.explain_node(ex, expect)["score"], scores[expect], "prioritize and explain agree on the score")


@suite.test
def node_names_form(s):
    with g.Server(s, flags=["--placement", "bind"]) as srv:
        pod = g.demo_pod("mps-share")
        res = srv.filter(pod, ["gpu-t4-0", "cpu-0"])
        s.check_eq(res["NodeNames"], ["gpu-t4-0"], "only a sent name comes back")
        s.check(res["Nodes"] is None, "Nodes is null in the NodeNames form")
        mentioned = set(res["NodeNames"]) | set(res["FailedNodes"] or {}) | set(res["FailedAndUnresolvableNodes"] or {})
        s.check_eq(mentioned, {"gpu-t4-0", "cpu-0"}, "nodes not sent are never mentioned")
        res = srv.filter(pod, ["cpu-0"])
        s.check_eq(res["NodeNames"], [], "no fit among the names sent: empty NodeNames")
        res = srv.filter(pod, [])
        s.check_eq(res["NodeNames"], [], "empty NodeNames in, empty out")
        s.check_eq(res["Error"], "", "empty NodeNames is not an error")
        hp = srv.prioritize(pod, ["cpu-0", "gpu-t4-0"])
        s.check_eq([h["Host"] for h in hp], ["gpu-t4-0"],
                   "prioritize answers the names sent above the lowest score (cpu-0: 0, left out)")


def refused(res):
    return set(res.get("FailedNodes") or {}) | set(res.get("FailedAndUnresolvableNodes") or {})


def list_memo(srv, outcome):
    samples, _types, _bad = g.parse_metrics(srv.metrics().body.decode("utf-8"))
    return g.metric(samples, "gqa_name_list_memo_total", outcome=outcome)


@suite.test
def repeated_node_list(s):
    """A NodeNames array byte for byte the last one is taken from its parse
    (the metric counts a hit) and answers exactly as a scanned one; an
    array one byte apart, or longer, is scanned; the node states behind the
    names are read afresh every time."""
    with g.Server(s, flags=["--placement", "bind"]) as srv:
        pod = g.demo_pod("mps-share")
        names = ["gpu-t4-0", "cpu-0", "gpu-a100-0"]
        body = lambda p, ns: json.dumps({"Pod": p, "NodeNames": ns}).encode("utf-8")
        first = srv.post("/scheduler/filter", body(pod, names))
        hits, misses = list_memo(srv, "hit"), list_memo(srv, "miss")
        again = srv.post("/scheduler/filter", body(g.demo_pod("mps-share"), names))
        s.check_eq(again.body, first.body, "the same array answers the same bytes")
        s.check_eq(list_memo(srv, "hit") - hits, 1, "and was not scanned again")
        other = srv.post("/scheduler/filter", body(pod, ["gpu-t4-0", "cpu-1", "gpu-a100-0"])).json()
        s.check_eq(other["NodeNames"], ["gpu-t4-0"], "one byte apart: its own names")
        s.check("cpu-1" in refused(other), "the unknown name is refused by name")
        longer = srv.post("/scheduler/filter", body(pod, names + ["gpu-v100-0"])).json()
        s.check_eq(longer["NodeNames"], ["gpu-t4-0"], "a longer array: its own answer")
        s.check("gpu-v100-0" in refused(longer), "with the last name read too")
        s.check_eq(list_memo(srv, "miss") - misses, 2, "both were scanned")
        hp = srv.prioritize(pod, names + ["gpu-v100-0"])
        s.check_eq([h["Host"] for h in hp], ["gpu-t4-0"], "prioritize takes the remembered array too")
        s.check_eq(list_memo(srv, "hit") - hits, 2, "counted as a hit")


def raw_items(text, start):
    """The exact text of each element of the JSON array opening at text[start]."""
    dec = json.JSONDecoder()
    assert text[start] == "["
    i, out = start + 1, []
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out
        _, end = dec.raw_decode(text, i)
        out.append(text[i:end])
        i = end


def node_item_texts(objs):
    """Each Node as JSON text in a different hand: Go's compact form, spaces,
    escaped and raw non-ASCII, '\\/', numbers a re-serialiser would rewrite
    (1.0e3, -0). Byte identity of the answer holds only if it copies them."""
    out = []
    for i, o in enumerate(objs):
        o = json.loads(json.dumps(o))
        o["metadata"]["labels"]["example.com/zone"] = "z\u00e9-%d" % i
        o["metadata"]["annotations"]["example.com/note"] = "caf\u00e9 \u2603 a/b \"q\""
        o["status"]["capacity"]["example.com/widgets"] = "1k"
        if i % 2:
            text = json.dumps(o, ensure_ascii=False, indent=1)
        else:
            text = json.dumps(o, separators=(",", ":")).replace("a/b", "a\\/b")
        out.append(re.sub(r'("sizeBytes":\s?)1000000(?=\D)', r"\g<1>1.0e6", text, count=1))
    return out


def nodes_form_checks(s, srv, mode):
    objs = g.full_node_objects(srv.inspect())
    s.check_eq(sorted(o["metadata"]["name"] for o in objs), g.DEMO_NODES, "full Node objects for every demo node")
    texts = node_item_texts(objs)
    by_name = {json.loads(t)["metadata"]["name"]: t for t in texts}
    node_list = ('{"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "12345"}, "items": [%s]}'
                 % ",\n ".join(texts))
    body = '{"Pod": %s, "Nodes": %s, "NodeNames": null}' % (json.dumps(g.demo_pod("gpu-4")), node_list)
    body = body.encode("utf-8")
    for path in ("/scheduler/filter", "/scheduler/predicates"):
        r = srv.post(path, body)
        s.check_eq(r.status, 200, "%s Nodes form (%s mode) status" % (path, mode))
        res = r.json()
        s.check(res.get("NodeNames") is None, "Nodes form answers NodeNames null (%s)" % mode, res)
        s.check_eq(res.get("Error"), "", "Nodes form: no Error (%s)" % mode)
        items = (res.get("Nodes") or {}).get("items")
        s.require(isinstance(items, list), "Nodes form answers Nodes.items (%s)" % mode, res)
        s.check_eq([it.get("metadata", {}).get("name") for it in items], ["gpu-v100-0"],
                   "Nodes.items keeps only the fitting node (%s)" % mode)
        # nodeCacheCapable: false: kube-scheduler hands the returned Node
        # objects to its score plugins, so each must be the request's node,
        # byte for byte (labels, annotations, status), not a rebuilt one.
        answer = r.body.decode("utf-8")
        got = raw_items(answer, answer.index('"items":[') + len('"items":'))
        s.check_eq(got, [by_name[it["metadata"]["name"]] for it in items],
                   "every kept item is byte-identical to the request's item (%s)" % mode)
        for it in items:
            s.check_eq(it["metadata"]["labels"].get("example.com/zone"),
                       json.loads(by_name[it["metadata"]["name"]])["metadata"]["labels"]["example.com/zone"],
                       "labels reach the answer (%s)" % mode)
            s.check("conditions" in it.get("status", {}), "status reaches the answer (%s)" % mode)
        failed = set(res.get("FailedNodes") or {}) | set(res.get("FailedAndUnresolvableNodes") or {})
        s.check_eq(failed, {"cpu-0", "gpu-a100-0", "gpu-t4-0"}, "the other nodes failed, by name (%s)" % mode)
    r = srv.post("/scheduler/prioritize", body)
    s.check_eq(r.status, 200, "prioritize Nodes form status (%s)" % mode)
    hp = r.json()
    s.check_eq([h["Host"] for h in hp], ["gpu-v100-0"],
               "prioritize in Nodes form: the fitting node, the others (0, the lowest) left out")
    # Nodes form without the NodeNames key at all, and a node without GPU pods in a big list.
    plain = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "12345"}, "items": objs}
    body2 = json.dumps({"Pod": g.demo_pod("mps-share"), "Nodes": plain})
    r = srv.post("/scheduler/filter", body2)
    res = r.json()
    s.check_eq([it["metadata"]["name"] for it in res["Nodes"]["items"]], ["gpu-t4-0"],
               "Nodes form without a NodeNames key (%s)" % mode)
    answer = r.body.decode("utf-8")
    want = next(json.dumps(o) for o in objs if o["metadata"]["name"] == "gpu-t4-0")
    s.check_eq(raw_items(answer, answer.index('"items":[') + len('"items":')), [want],
               "Python's json.dumps item comes back as sent (%s)" % mode)


@suite.test
def nodes_form(s):
    with g.Server(s, flags=["--placement", "bind"]) as srv:
        nodes_form_checks(s, srv, "bind")
    with g.Server(s) as srv:
        nodes_form_checks(s, srv, "filter")
        ins = srv.inspect("gpu-v100-0")
        held = sorted(p for gp in ins["gpus"] for p in gp["pods"] if p == "default/gpu-4")
        s.check_eq(len(held), 4, "filter mode with the Nodes form records the decision (4 GPUs of gpu-4)")


def splits(srv, outcome):
    samples, _types, _bad = g.parse_metrics(srv.metrics().body.decode("utf-8"))
    return g.metric(samples, "gqa_nodes_form_splits_total", outcome=outcome)


@suite.test
def large_nodes_form_on_two_threads(s):
    """A Nodes form of 2 MiB or more is scanned on two threads (the second
    half from a guessed boundary between items); the kept node, which lies
    in the second half, comes back byte for byte, and the metric counts it."""
    with g.Server(s, flags=["--placement", "bind"]) as srv:
        objs = {o["metadata"]["name"]: o for o in g.full_node_objects(srv.inspect())}
        compact = lambda o: json.dumps(o, separators=(",", ":"))
        ghosts = []
        for i in range(3000):
            o = json.loads(compact(objs["gpu-a100-0"]))
            o["metadata"]["name"] = "ghost-%04d" % i
            ghosts.append(compact(o))
        kept = compact(objs["gpu-v100-0"])
        texts = [compact(objs["cpu-0"])] + ghosts[:2000] + [kept] + ghosts[2000:]
        body = '{"Pod":%s,"Nodes":{"metadata":{},"items":[%s]}}' % (json.dumps(g.demo_pod("gpu-4")), ",".join(texts))
        s.require(len(body) >= 2 << 20, "the body is large enough to split (%d bytes)" % len(body))
        taken = splits(srv, "taken")
        r = srv.post("/scheduler/filter", body.encode("utf-8"))
        s.check_eq(r.status, 200, "large Nodes form status")
        res = r.json()
        s.check_eq(res.get("Error"), "", "large Nodes form: no Error")
        answer = r.body.decode("utf-8")
        s.check_eq(raw_items(answer, answer.index('"items":[') + len('"items":')), [kept],
                   "the kept node from the second half comes back byte for byte")
        failed = res.get("FailedNodes") or {}
        s.check_eq(len(failed) + len(res.get("FailedAndUnresolvableNodes") or {}), 3001,
                   "every other node is refused by name")
        s.check("ghost-2999" in failed or "ghost-2999" in (res.get("FailedAndUnresolvableNodes") or {}),
                "the last item's name was read", sorted(failed)[-3:])
        s.check_eq(splits(srv, "taken") - taken, 1, "the items were scanned on two threads")


if __name__ == "__main__":
    suite.main()
