#!/usr/bin/env python3
"""HAMi's ResourceQuota checked at scheduling time (docs/hami.md,
"ResourceQuota on gpumem and gpucores").

The real binary against the API simulator, HAMi nodes registered by the
stand-in for HAMi's device plugin (tests/hamisim/hamiplugin.py). The test
plays kube-scheduler.

  - a pod over a namespace's limits.nvidia.com/gpumem is refused on every
    node with the quota, the namespace, used, asked and the limit; a pod
    within it is placed; the smallest of two quotas is the one that counts,
    and a scoped quota and a malformed one are left out (the malformed one
    logged and counted as skipped);
  - two pods decided back to back with room for one: one is placed, the
    other refused with what the first holds as used;
  - limits.nvidia.com/gpucores, and an explicit 0 that admits no vGPU;
  - the quota's deletion reaches the service through the watch;
  - in bind placement, a bind over the quota is refused with the reason;
  - /inspect/informers and /readyz count the resourcequotas informer, and
    --hami-resource-quota off starts none and checks nothing.

Standalone: python3 test_hami_quota.py --binary PATH --source-dir REPO
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_hami_quota")
NODES = ["hami-0", "hami-1"]
MEM = "limits.nvidia.com/gpumem"
CORES = "limits.nvidia.com/gpucores"


def quota(ns, name, hard, scopes=None):
    obj = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
           "spec": {"hard": {k: str(v) for k, v in hard.items()}}}
    if scopes:
        obj["spec"]["scopes"] = scopes
    return obj


class Env:
    """Two HAMi nodes (two 16384 MiB GPUs each) and the service."""

    def __init__(self, flags=(), quotas=()):
        self.flags = list(flags)
        self.quotas = list(quotas)
        self.clients = []

    def __enter__(self):
        hp = g.import_hamiplugin(suite)
        self.cluster = g.Cluster(suite).start()
        c = self.cluster
        for q in self.quotas:
            c.sim.create("resourcequotas", q, ns=q["metadata"]["namespace"])
        for name in NODES:
            client = c.apisim.Client(c.sim.url, token=c.tokens[0], ca=c.ca_file)
            self.clients.append(client)
            hp.Plugin(client, name, [hp.Device(g.hami_uuid(name, i), 16384, split=10, index=i) for i in range(2)]).register()
        self.srv = g.LiveServer(suite, c.kubeconfig(), self.flags).__enter__()
        ok = g.wait_until(lambda: all(self.usable(n) for n in NODES), 15)
        suite.require(ok, "both HAMi nodes reach the service", self.srv.inspect())
        return self

    def __exit__(self, *exc):
        self.srv.__exit__(*exc)
        for client in self.clients:
            client.close()
        self.cluster.stop()
        return False

    def usable(self, node):
        n = [x for x in self.srv.inspect() if x["node"] == node]
        return bool(n and (n[0].get("hami") or {}).get("usable"))

    def create(self, ns, name, containers):
        self.cluster.create_pod(g.pod(name, containers, namespace=ns))
        return self.cluster.get_pod(name, ns)

    def filter(self, ns, name, containers):
        """Create the pod and filter it over both nodes: (placed node or None, answer)."""
        f = self.srv.filter(self.create(ns, name, containers), NODES)
        fits = f.get("NodeNames") or []
        return (fits[0] if fits else None), f


def refused_everywhere(f, want, what):
    failed = f.get("FailedNodes") or {}
    suite.check(not f.get("NodeNames") and set(failed) == set(NODES), "%s: every node refuses" % what, f)
    for node in NODES:
        suite.check_eq(failed.get(node), want, "%s: %s says why" % (what, node), f)


@suite.test
def memory_quota_in_filter_mode(_s):
    quotas = [quota("t", "gpu-quota", {MEM: 10240}),
              quota("t", "roomy", {MEM: 40960, "limits.cpu": "100"}),
              quota("t", "scoped", {MEM: 1}, scopes=["BestEffort"]),
              quota("t", "broken", {MEM: "ten gigs"}),
              quota("t", "cpu-only", {"limits.cpu": "4"})]
    with Env(quotas=quotas) as env:
        inf = env.srv.informers()
        suite.check("resourcequotas" in inf and inf["resourcequotas"]["synced"],
                    "/inspect/informers has the synced resourcequotas informer", inf)
        suite.check_eq(env.srv.get("/readyz").status, 200, "ready with the resourcequotas informer synced")
        samples, _, _ = g.parse_metrics(env.srv.metrics().text)
        suite.check(g.metric(samples, "gqa_objects_skipped_total", kind="resourcequota", reason="invalid") >= 1,
                    "the malformed quota is counted as skipped", env.srv.metrics().text[-2000:])
        suite.check("t/broken" in env.srv.stderr() and "ten gigs" in env.srv.stderr(),
                    "the malformed quota is logged with its reason", env.srv.stderr()[-2000:])

        node, f = env.filter("t", "big", g.vgpu(1, 12000))
        refused_everywhere(f, 'namespace t quota "gpu-quota" limits.nvidia.com/gpumem: 0 used + 12000 asked > 10240',
                           "12000 MiB over a 10240 quota")

        node, f = env.filter("t", "first", g.vgpu(1, 6000))
        suite.check(node in NODES, "a pod within the quota is placed", f)
        node, f = env.filter("t", "second", g.vgpu(1, 6000))
        refused_everywhere(f, 'namespace t quota "gpu-quota" limits.nvidia.com/gpumem: 6000 used + 6000 asked > 10240',
                           "back to back, the second of two pods with room for one")
        node, f = env.filter("t", "small", g.vgpu(1, 4000))
        suite.check(node in NODES, "what is left of the quota still takes a pod", f)

        node, f = env.filter("u", "elsewhere", g.vgpu(1, 12000))
        suite.check(node in NODES, "another namespace is not limited", f)

        ex = env.srv.explain(env.cluster.get_pod("second", "t"))
        suite.check("gpu-quota" in str(ex) and "hami_quota" in str(ex), "explain shows the quota refusal", ex)

        env.cluster.sim.delete("resourcequotas", "gpu-quota", "t")
        ok = g.wait_until(lambda: env.srv.filter(env.cluster.get_pod("second", "t"), NODES).get("NodeNames"), 10)
        suite.check(ok, "once the quota is deleted, the next-smallest (40960) lets the pod fit")


@suite.test
def racing_pods_get_one_placement(_s):
    """Two filters at once for two pods with room for one: the decision is
    re-checked under the cache's write lock, so exactly one is placed."""
    import threading
    with Env(quotas=[quota("r", "gpu-quota", {MEM: 10240})]) as env:
        pods = [env.create("r", "race-%d" % i, g.vgpu(1, 6000)) for i in range(2)]
        answers = [None, None]
        start = threading.Barrier(2)

        def run(i):
            start.wait()
            answers[i] = env.srv.filter(pods[i], NODES)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        placed = [a for a in answers if a and a.get("NodeNames")]
        suite.check_eq(len(placed), 1, "exactly one of the racing pods is placed", answers)
        refused = [a for a in answers if a and not a.get("NodeNames")]
        suite.check(refused and all("6000 used + 6000 asked > 10240" in r for r in
                                    (refused[0].get("FailedNodes") or {}).values()),
                    "the other is refused with the first one's 6000 MiB as used", answers)


@suite.test
def cores_and_explicit_zero(_s):
    quotas = [quota("c", "cores", {CORES: 60}), quota("z", "none", {MEM: 0})]
    with Env(quotas=quotas) as env:
        node, f = env.filter("c", "c1", g.vgpu(1, 1000, cores=40))
        suite.check(node in NODES, "40 of 60 cores: placed", f)
        node, f = env.filter("c", "c2", g.vgpu(1, 1000, cores=40))
        refused_everywhere(f, 'namespace c quota "cores" limits.nvidia.com/gpucores: 40 used + 40 asked > 60',
                           "cores over the quota")
        node, f = env.filter("z", "z1", g.vgpu(1, 1))
        refused_everywhere(f, 'namespace z quota "none" limits.nvidia.com/gpumem: 0 admits no HAMi vGPU (1 asked)',
                           "an explicit 0")


@suite.test
def bind_refuses_over_quota(_s):
    with Env(flags=["--placement", "bind"], quotas=[quota("t", "gpu-quota", {MEM: 10240})]) as env:
        pod = env.create("t", "big", g.vgpu(1, 12000))
        r = env.srv.post_json("/scheduler/bind", {"PodName": "big", "PodNamespace": "t",
                                                  "PodUID": pod["metadata"]["uid"], "Node": "hami-0"})
        err = r.get("Error") or ""
        suite.check('quota "gpu-quota" limits.nvidia.com/gpumem: 0 used + 12000 asked > 10240' in err,
                    "bind over the quota is refused with the reason", r)
        suite.check(not env.cluster.get_pod("big", "t")["spec"].get("nodeName"), "the pod is not bound")


@suite.test
def off_checks_nothing(_s):
    with Env(flags=["--hami-resource-quota", "off"], quotas=[quota("t", "gpu-quota", {MEM: 10240})]) as env:
        suite.check("resourcequotas" not in env.srv.informers(), "no resourcequotas informer when off")
        node, f = env.filter("t", "big", g.vgpu(1, 12000))
        suite.check(node in NODES, "with the check off the quota is HAMi's webhook's business only", f)


if __name__ == "__main__":
    suite.main()
