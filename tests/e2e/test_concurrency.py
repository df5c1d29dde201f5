#!/usr/bin/env python3
"""Concurrency: many threads at once.

- mixed filter/prioritize/inspect/explain traffic from 12 threads (HTTP and
  HTTPS) in bind mode answers byte-for-byte what the same requests answered
  one at a time;
- in filter mode, threads re-filtering one pod all get the same node and the
  pod is charged once;
- threads racing filters for different pods that each need the last free
  whole GPUs (nvidia.com/gpu: 1, vcuda-core 100) or the last share of one GPU:
  exactly as many win as there is capacity, never two pods on one GPU, and an
  /inspect poller running during the race never sees a GPU past 100 cores."""

import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_concurrency")


def run_threads(n, fn):
    """Run fn(i) in n threads started together; returns the exceptions raised."""
    errors = []
    barrier = threading.Barrier(n)

    def body(i):
        try:
            barrier.wait(30)
            fn(i)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors.append("thread %d: %r" % (i, e))

    ts = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    return errors


@suite.test
def mixed_traffic_is_consistent(s):
    m = g.TLSMaterial(s.tempdir("tls"))
    with g.Server(s, flags=["--placement", "bind", "--threads", "6"], https=True, tls=m) as srv:
        objs = g.full_node_objects(srv.inspect())
        reqs = []
        for name in sorted(g.DEMO_PODS):
            args = json.dumps({"Pod": g.demo_pod(name), "NodeNames": g.DEMO_ARGS_ORDER})
            reqs.append(("POST", "/scheduler/filter", args))
            reqs.append(("POST", "/scheduler/predicates", args))
            reqs.append(("POST", "/scheduler/prioritize", args))
            reqs.append(("POST", "/inspect/explain", json.dumps(g.demo_pod(name))))
        nodes_args = json.dumps({"Pod": g.demo_pod("gpu-4"),
                                 "Nodes": {"kind": "NodeList", "apiVersion": "v1", "items": objs}})
        reqs.append(("POST", "/scheduler/filter", nodes_args))
        reqs.append(("POST", "/scheduler/priorities", nodes_args))
        reqs.append(("POST", "/scheduler/filter", "{broken"))
        reqs.append(("GET", "/inspect/nodes", None))
        reqs.append(("GET", "/inspect/nodes/gpu-t4-0", None))
        reqs.append(("GET", "/inspect/nodes/missing", None))
        reqs.append(("GET", "/healthz", None))
        reqs.append(("GET", "/version", None))

        baseline = []
        for method, path, body in reqs:
            r = srv.request(method, path, body)
            baseline.append((r.status, r.body))
        s.check(all(st in (200, 404) for st, _ in baseline), "baseline answers are 200 (404 for the missing node)",
                [st for st, _ in baseline])

        ctx = m.client_context()
        mismatches = []
        done = [0]
        lock = threading.Lock()

        def worker(i):
            rnd = random.Random(i)
            for k in range(30):
                j = rnd.randrange(len(reqs))
                method, path, body = reqs[j]
                if i % 2:
                    r = g.http_request("127.0.0.1", srv.https_port, method, path, body, tls_context=ctx)
                else:
                    r = srv.request(method, path, body)
                with lock:
                    done[0] += 1
                    if (r.status, r.body) != baseline[j]:
                        mismatches.append((i, method, path, r.status, r.body[:300], baseline[j][1][:300]))
                if k % 10 == 0:
                    mr = srv.get("/metrics")
                    if mr.status != 200:
                        with lock:
                            mismatches.append((i, "GET", "/metrics", mr.status, mr.body[:200], b""))

        t0 = time.monotonic()
        errors = run_threads(12, worker)
        s.check_eq(errors, [], "no request failed")
        s.check_eq(done[0], 12 * 30, "every request answered")
        s.check_eq(mismatches[:5], [], "concurrent answers equal the one-at-a-time answers")
        s.check(time.monotonic() - t0 < 120, "mixed traffic finished in time", time.monotonic() - t0)
        r = srv.get("/inspect/nodes")
        s.check_eq((r.status, r.body), baseline[reqs.index(("GET", "/inspect/nodes", None))],
                   "state unchanged after bind-mode traffic")


@suite.test
def refilter_same_pod_concurrently(s):
    with g.Server(s, flags=["--threads", "8"]) as srv:
        pod = g.demo_pod("vcuda-share")
        answers = []
        lock = threading.Lock()

        def worker(i):
            for _ in range(5):
                res = srv.filter(pod, g.DEMO_ARGS_ORDER if i % 2 else list(reversed(g.DEMO_ARGS_ORDER)))
                with lock:
                    # One decision per pod at a time: a filter that arrives while the
                    # pod's decision is being taken is told to retry (an Error).
                    busy = "a decision for pod default/vcuda-share is in progress; retry" in (res.get("Error") or "")
                    answers.append("retry" if busy else tuple(res["NodeNames"] or []))

        errors = run_threads(10, worker)
        s.check_eq(errors, [], "no request failed")
        s.check_eq(set(answers) - {"retry"}, {("gpu-a100-0",)},
                   "all 50 concurrent filters of one pod answer the same node (or, while it is decided, retry)")
        a = srv.inspect("gpu-a100-0")
        holders = [i for i, gp in enumerate(a["gpus"]) if "default/vcuda-share" in gp["pods"]]
        s.check_eq(holders, [1], "the pod holds exactly one GPU")
        s.check_eq((a["gpus"][1]["coreUsed"], a["gpus"][1]["memoryUsed"]), (50, 64), "and is charged once")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        s.check_eq(g.metric(samples, "gqa_decisions_total"), 1.0, "one decision")


def race_state(s):
    objs = []
    for k in range(3):
        objs.append(g.node("pg-%d" % k, {"nvidia.com/gpu": 2}, g.topology(2)))
        objs.append(g.node("vc-%d" % k, {"tencent.com/vcuda-core": 200, "tencent.com/vcuda-memory": 128},
                           g.topology(2, memory_mib=16384)))
    objs.append(g.node("pg-big-0", {"nvidia.com/gpu": 2}, g.topology(2)))
    objs.append(g.node("pg-big-1", {"nvidia.com/gpu": 2}, g.topology(2)))
    objs.append(g.node("sh-0", {"tencent.com/vcuda-core": 100, "tencent.com/vcuda-memory": 64},
                       g.topology(1, memory_mib=16384)))
    objs.append(g.node("mp-0", {"nvidia.com/mps-core": 100, "nvidia.com/mps-memory": 16}, g.topology(1)))
    return g.write_state(s, objs)


class Poller:
    """Reads /inspect/nodes in a loop and remembers any overcommitted GPU."""

    def __init__(self, srv):
        self.srv = srv
        self.stop_flag = threading.Event()
        self.violations = []
        self.reads = 0
        self.errors = []
        self.t = threading.Thread(target=self.run)

    def run(self):
        while not self.stop_flag.is_set():
            try:
                r = self.srv.get("/inspect/nodes")
                nodes = json.loads(r.body)
                self.reads += 1
                for n in nodes:
                    for gp in n["gpus"]:
                        if gp["coreUsed"] > 100 or gp["memoryUsed"] > gp["memoryTotal"]:
                            self.violations.append((n["node"], gp))
            except Exception as e:  # noqa: BLE001
                self.errors.append(repr(e))

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.t.join(60)


def race(s, srv, label, names, limits, npods, capacity, prefix):
    pods = [g.pod("%s-%d" % (prefix, i), limits, namespace="race") for i in range(npods)]
    won = {}
    lock = threading.Lock()

    def worker(i):
        res = srv.filter(pods[i], names)
        with lock:
            won[pods[i]["metadata"]["name"]] = (res["NodeNames"] or [], res)

    with Poller(srv) as poller:
        errors = run_threads(npods, worker)
    s.check_eq(errors, [], "%s: no request failed" % label)
    winners = {p: v[0][0] for p, v in won.items() if v[0]}
    s.check(len(winners) == capacity, "%s: exactly %d of %d pods placed" % (label, capacity, npods),
            {p: v[0] for p, v in won.items()})
    s.check(all(len(v[0]) <= 1 for v in won.values()), "%s: never more than one node answered" % label)
    for p, (ns, res) in won.items():
        if not ns:
            s.check(all(g.failed_reason(res, n) for n in names), "%s: loser %s has a reason per node" % (label, p), res)
    s.check_eq(poller.violations[:3], [], "%s: no GPU ever seen past 100 cores (%d polls)" % (label, poller.reads))
    s.check_eq(poller.errors[:3], [], "%s: inspect poller had no errors" % label)
    s.check(poller.reads > 0, "%s: poller ran" % label)
    # Who holds what, according to /inspect.
    holders = {}
    for n in names:
        ins = srv.inspect(n)
        for i, gp in enumerate(ins["gpus"]):
            race_pods = [x for x in gp["pods"] if x.startswith("race/%s-" % prefix)]
            holders[(n, i)] = race_pods
            s.check(gp["coreUsed"] <= 100, "%s: %s GPU %d coreUsed <= 100" % (label, n, i), gp)
    return winners, holders


@suite.test
def race_for_last_whole_gpus(s):
    state = race_state(s)
    with g.Server(s, state, ["--threads", "8"]) as srv:
        for k, (kind, limits) in enumerate((("nvidia.com/gpu", g.pgpu(1)), ("vcuda-core 100", g.vcuda(100, 64)))):
            for rnd in range(3):
                node = ("pg-%d" if k == 0 else "vc-%d") % rnd
                label = "%s round %d" % (kind, rnd)
                prefix = "w%d%d" % (k, rnd)
                winners, holders = race(s, srv, label, [node], limits, 6, 2, prefix)
                s.check_eq(sorted(len(v) for v in holders.values()), [1, 1],
                           "%s: each of the 2 GPUs holds exactly one pod" % label, holders)
                held = sorted(p for v in holders.values() for p in v)
                s.check_eq(held, sorted("race/" + p for p in winners), "%s: the GPUs hold exactly the winners" % label)
                # The losers stay out on a second try.
                again = srv.filter(g.pod("%s-late" % prefix, limits, namespace="race"), [node])
                s.check_eq(again["NodeNames"], [], "%s: a late pod finds no GPU" % label)
                for p in winners:
                    res = srv.filter(g.pod(p, limits, namespace="race"), [node])
                    s.check_eq(res["NodeNames"], [node], "%s: winner %s re-filters to its node" % (label, p))

        # Two nodes offered, 10 pods, 4 GPUs in all.
        winners, holders = race(s, srv, "two nodes", ["pg-big-0", "pg-big-1"], g.pgpu(1), 10, 4, "two")
        s.check_eq(sorted(len(v) for v in holders.values()), [1, 1, 1, 1], "two nodes: one pod per GPU", holders)
        s.check_eq(sorted(winners.values()), ["pg-big-0", "pg-big-0", "pg-big-1", "pg-big-1"],
                   "two nodes: two winners on each node")

        # Shares of one GPU: 8 pods of 30 cores, room for 3.
        winners, holders = race(s, srv, "vcuda shares", ["sh-0"], g.vcuda(30, 8), 8, 3, "share")
        ins = srv.inspect("sh-0")
        s.check_eq((ins["gpus"][0]["coreUsed"], ins["gpus"][0]["memoryUsed"]), (90, 24), "shares: 3 x 30 cores charged")
        s.check_eq(len(holders[("sh-0", 0)]), 3, "shares: three pods on the GPU")
        winners, holders = race(s, srv, "MPS shares", ["mp-0"], g.mps(40, 5), 8, 2, "mps")
        ins = srv.inspect("mp-0")
        s.check_eq((ins["gpus"][0]["coreUsed"], ins["gpus"][0]["memoryUsed"]), (80, 10), "MPS: 2 x 40 cores charged")


if __name__ == "__main__":
    suite.main()
