#!/usr/bin/env python3
"""HAMi decisions end to end (docs/hami.md, "Decisions").

The real binary against the API simulator, with the stand-in for HAMi's
device plugin (tests/hamisim/hamiplugin.py) on every HAMi node. The test
plays kube-scheduler: filter, prioritize, bind, and bind again later when
the answer says the node is locked.

  - a mixed cluster of GPU-Manager, MPS, whole-GPU and HAMi nodes schedules
    each family only where it belongs, and the plugin accepts every HAMi
    pod (the annotations it reads are the ones written);
  - the node lock is taken at bind and released by the plugin once it has
    allocated the pod; another pod's unexpired lock is respected (nothing
    written), an expired one or one whose pod is gone is taken over, an
    unreadable one is left alone;
  - two binds racing on one node never interleave: one waits for the
    other's lock to go, as the API server's log of lock writes shows;
  - filling two nodes, every decision is one the plugin accepts, the pod
    that no longer fits is refused by the filter, and /inspect/nodes agrees
    with the plugin's own accounting;
  - a failed Binding leaves bind-phase failed, the lock released and the
    reservation undone;
  - in filter placement the filter writes the decision, and the bind verb
    takes the lock and marks the pod.

Standalone: python3 test_hami_decisions.py --binary PATH --source-dir REPO
"""

import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_hami_decisions")

LOCK = "hami.io/mutex.lock"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
VGPU_NODE = "hami.io/vgpu-node"
VGPU_TIME = "hami.io/vgpu-time"
PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
HAMI_KEYS = (TO_ALLOCATE, ALLOCATED, VGPU_NODE, VGPU_TIME, PHASE, BIND_TIME)
NS = "t"


class Env:
    """A cluster with HAMi nodes (each with its plugin) and the service."""

    def __init__(self, hami_nodes=("hami-0",), devices=2, memory=16384, split=10, other_nodes=(), flags=(),
                 run_plugins=True):
        self.spec = (hami_nodes, devices, memory, split, other_nodes, flags, run_plugins)
        self.plugins = {}
        self.clients = []

    def __enter__(self):
        hami_nodes, devices, memory, split, other_nodes, flags, run_plugins = self.spec
        hp = g.import_hamiplugin(suite)
        self.cluster = g.Cluster(suite).start()
        c = self.cluster
        for obj in other_nodes:
            c.add_node(obj)
        for name in hami_nodes:
            client = c.apisim.Client(c.sim.url, token=c.tokens[0], ca=c.ca_file)
            self.clients.append(client)
            devs = [hp.Device(g.hami_uuid(name, i), memory, split=split, index=i) for i in range(devices)]
            plugin = hp.Plugin(client, name, devs)
            if run_plugins:
                plugin.start()
            else:
                plugin.register()
            self.plugins[name] = plugin
        self.srv = g.LiveServer(suite, c.kubeconfig(), list(flags)).__enter__()
        everyone = list(hami_nodes) + [o["metadata"]["name"] for o in other_nodes]
        ok = g.wait_until(lambda: all(self.devices(n) is not None for n in hami_nodes)
                          and {x["node"] for x in self.srv.inspect()} >= set(everyone), 15)
        suite.require(ok, "every node, HAMi devices included, reaches the service", self.srv.inspect())
        return self

    def __exit__(self, *exc):
        for p in self.plugins.values():
            p.stop()
        self.srv.__exit__(*exc)
        for client in self.clients:
            client.close()
        self.cluster.stop()
        return False

    # -- views ------------------------------------------------------------------
    def devices(self, node):
        n = [x for x in self.srv.inspect() if x["node"] == node]
        h = n[0].get("hami") if n else None
        return h["devices"] if h and h.get("usable") else None

    def tasks(self, node):
        return sum(d["tasks"] for d in self.devices(node))

    def node_annotations(self, node):
        return dict(self.cluster.sim.get("nodes", node)["metadata"].get("annotations") or {})

    def annotations(self, name):
        return self.cluster.annotations(name, NS)

    def verdict(self, name):
        """The plugins' verdict on pod t/name, or None."""
        for p in self.plugins.values():
            for key, result, reason in list(p.decisions):
                if key == "%s/%s" % (NS, name):
                    return result, reason, p.node
        return None

    def accepted(self, name, timeout=15):
        got = g.wait_until(lambda: self.verdict(name) is not None, timeout)
        suite.require(got, "HAMi's plugin has a verdict on %s" % name, self.plugins_log())
        result, reason, _ = self.verdict(name)
        suite.check_eq(result, "success", "the plugin accepts %s (%s)" % (name, reason))
        return result == "success"

    def hami_binds(self):
        samples, _, _ = g.parse_metrics(self.srv.metrics().text)
        return {r: g.metric(samples, "gqa_hami_binds_total", result=r) for r in ("bound", "locked", "failed")}

    def plugins_log(self):
        return {n: p.decisions for n, p in self.plugins.items()}

    # -- kube-scheduler ---------------------------------------------------------
    def create(self, name, containers, annotations=None, init=None):
        pod = g.pod(name, containers, namespace=NS, annotations=annotations)
        if init:
            pod["spec"]["initContainers"] = [{"name": n, "image": "registry.example.com/%s:1" % n} for n in init]
        self.cluster.create_pod(pod)
        return self.cluster.get_pod(name, NS)

    def bind(self, name, node):
        pod = self.cluster.get_pod(name, NS)
        return self.srv.post_json("/scheduler/bind", {"PodName": name, "PodNamespace": NS,
                                                      "PodUID": pod["metadata"]["uid"], "Node": node})

    def bind_retrying(self, name, node, timeout=15):
        """Bind as kube-scheduler would: again after a "locked" answer."""
        answers = []

        def attempt():
            answers.append(self.bind(name, node))
            return not answers[-1].get("Error")

        ok = g.wait_until(attempt, timeout, interval=0.1)
        suite.check(ok, "pod %s binds to %s" % (name, node), answers[-3:])
        locked = [a for a in answers if "locked for HAMi" in (a.get("Error") or "")]
        suite.check_eq(len(locked) + (1 if ok else 0), len(answers),
                       "%s: the only refusals are a held node lock" % name, answers[-3:])
        return ok

    def schedule(self, name, names):
        """Filter, prioritize, bind on the best node. The node, or None (with the filter answer)."""
        pod = self.cluster.get_pod(name, NS)
        f = self.srv.filter(pod, names)
        fits = f.get("NodeNames") or []
        if not fits:
            return None, f
        scores = self.srv.scores(pod, fits)
        best = sorted(fits, key=lambda n: (-scores[n], n))[0]
        return (best if self.bind_retrying(name, best) else None), f


def decision_keys(ann):
    return sorted(k for k in ann if k in HAMI_KEYS)


def allocation_of(text):
    """[[uuid, ...] per container] of an allocation annotation."""
    hp = g.import_hamiplugin(suite)
    return [[d[0] for d in c] for c in hp.decode_allocation(text)]


# ---------------------------------------------------------------------------


@suite.test
def mixed_cluster(_s):
    others = [g.node("vcuda-0", g.vcuda(400, 128)), g.node("mps-0", g.mps(400, 64)),
              g.node("whole-0", g.pgpu(4))]
    with Env(("hami-0", "hami-1"), other_nodes=others, flags=["--placement", "bind"]) as env:
        names = ["vcuda-0", "mps-0", "whole-0", "hami-0", "hami-1"]
        cases = [("vc", g.vcuda(50, 8), {"vcuda-0"}),
                 ("mp", g.mps(50, 4), {"mps-0"}),
                 ("wg", g.pgpu(1), {"whole-0", "hami-0", "hami-1"}),
                 # HAMi's webhook (v2.7+) adds gpucores: 100 to a plain nvidia.com/gpu container:
                 # still whole GPUs on a node without HAMi (issue 25 item 6).
                 ("wc", {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 100}, {"whole-0", "hami-0", "hami-1"}),
                 ("hv", g.vgpu(1, 4000, cores=25), {"hami-0", "hami-1"}),
                 ("h2", [("main", g.vgpu(2, pct=50, cores=10)), ("side", {"cpu": "1"})], {"hami-0", "hami-1"})]
        for name, containers, where in cases:
            # h2 has an init container without GPUs: HAMi v2.9+ reads entry 0 as it (issue 25 item 4).
            env.create(name, containers, init=["fetch"] if name == "h2" else None)
            pod = env.cluster.get_pod(name, NS)
            f = env.srv.filter(pod, names)
            suite.check_eq(set(f.get("NodeNames") or []), where, "%s fits exactly where its family is" % name, f)
            node, _ = env.schedule(name, names)
            suite.require(node in where, "%s is bound to one of its nodes" % name, node)
            ann = env.annotations(name)
            if not node.startswith("hami-"):
                suite.check_eq(decision_keys(ann), [], "%s on %s carries no HAMi annotation" % (name, node), ann)
                continue
            env.accepted(name)
            ann = env.annotations(name)
            suite.check_eq(ann.get(VGPU_NODE), node, "%s: hami.io/vgpu-node names the node" % name, ann)
            labels = env.cluster.get_pod(name, NS)["metadata"].get("labels") or {}
            suite.check_eq(labels.get(VGPU_NODE), node, "%s: labelled hami.io/vgpu-node as HAMi does" % name, labels)
            suite.check_eq(ann.get(PHASE), "success", "%s: the plugin marked it allocated" % name, ann)
            suite.check(ann.get(VGPU_TIME, "").isdigit() and ann.get(BIND_TIME, "").isdigit(),
                        "%s: vgpu-time and bind-time are Unix seconds" % name, ann)
            alloc = allocation_of(ann.get(ALLOCATED, ""))
            spec_all = env.cluster.get_pod(name, NS)["spec"]
            spec = (spec_all.get("initContainers") or []) + spec_all["containers"]
            suite.check_eq(len(alloc), len(spec), "%s: one allocation entry per container" % name, ann)
            own = {d["uuid"] for d in env.devices(node)}
            for i, c in enumerate(spec):
                want = int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", "0"))
                suite.check(len(alloc[i]) == want and len(set(alloc[i])) == want and set(alloc[i]) <= own,
                            "%s container %d: %d distinct devices of %s" % (name, i, want, node), alloc)
            suite.check(LOCK not in env.node_annotations(node), "the plugin released %s's lock" % node,
                        env.node_annotations(node))
        h2 = env.annotations("h2")
        suite.check(h2.get(ALLOCATED, "").endswith(":;;"), "a container without vGPUs has an empty entry", h2)
        dev = {d["uuid"]: d for d in env.devices(env.verdict("h2")[2])}
        for u in allocation_of(h2[ALLOCATED])[0]:
            suite.check(dev[u]["memoryUsedMiB"] >= 8192 and "%s/h2" % NS in dev[u]["pods"],
                        "h2's 50%% of a 16384 MiB GPU is charged to %s" % u, dev[u])
        suite.check("--placement filter" not in env.srv.stderr(), "no bindVerb warning in bind placement")


@suite.test
def node_lock(_s):
    with Env(("hami-0",), flags=["--placement", "bind"], run_plugins=False) as env:
        plugin = env.plugins["hami-0"]
        sim = env.cluster.sim

        def set_lock(value):
            # The service reads the Node at bind time: no need to wait for its watch.
            sim.patch("nodes", "hami-0", "merge", {"metadata": {"annotations": {LOCK: value}}})

        env.create("holder", {"cpu": "1"})
        env.create("p1", g.vgpu(1, 2000))
        set_lock("2099-01-01T00:00:00Z,%s,holder" % NS)
        a = env.bind("p1", "hami-0")
        suite.check("locked for HAMi" in (a.get("Error") or ""), "another pod's unexpired lock is respected", a)
        suite.check_eq(decision_keys(env.annotations("p1")), [], "and nothing is written on the pod",
                       env.annotations("p1"))
        suite.check_eq(env.tasks("hami-0"), 0, "nor reserved")

        set_lock("no time here")
        a = env.bind("p1", "hami-0")
        suite.check("does not read as" in (a.get("Error") or ""), "an unreadable lock is not taken over", a)

        for name, value, what in (("p2", "2020-01-01T00:00:00Z,%s,holder" % NS, "an expired lock"),
                                  ("p3", "2099-01-01T00:00:00+08:00,%s,gone" % NS, "a lock whose pod is gone")):
            set_lock(value)
            env.create(name, g.vgpu(1, 2000))
            a = env.bind(name, "hami-0")
            suite.check_eq(a.get("Error") or "", "", "%s is taken over" % what, a)
            lock = env.node_annotations("hami-0").get(LOCK, "")
            suite.check(lock.endswith(",%s,%s" % (NS, name)), "the lock names the bound pod", lock)
            suite.check_eq(env.annotations(name).get(PHASE), "allocating", "the pod waits for the plugin",
                           env.annotations(name))
            plugin.allocate_pending()
            env.accepted(name)
            suite.check(LOCK not in env.node_annotations("hami-0"), "the plugin released the lock")

        # gqa_api_writes_total (issue 27): the two lock writes and the decisions are counted; a new
        # decision carries the bind-phase mark in its own PATCH, so no separate bind-phase write
        m, _types, _bad = g.parse_metrics(env.srv.metrics().text)
        writes = {k: v for k, v in m.items() if k[0] == "gqa_api_writes_total"}
        suite.check(g.metric(m, "gqa_api_writes_total", write="hami_lock", result="ok") >= 2,
                    "the node lock writes are counted", writes)
        suite.check(g.metric(m, "gqa_api_writes_total", write="decision_patch", result="ok") >= 2,
                    "the decision writes (with the bind-phase mark) are counted", writes)
        suite.check_eq(g.metric(m, "gqa_api_writes_total", write="hami_phase", result="ok") or 0, 0,
                       "no separate bind-phase write for a new decision", writes)
        suite.check(g.metric(m, "gqa_api_writes_total", write="binding", result="ok") >= 2, "the Bindings are counted")


@suite.test
def racing_binds(_s):
    with Env(("hami-0",), flags=["--placement", "bind"], run_plugins=False) as env:
        plugin = env.plugins["hami-0"]
        for name in ("r1", "r2"):
            env.create(name, g.vgpu(1, 3000, cores=20))
        mark = env.cluster.last_seq()
        answers = {}
        go = threading.Barrier(2)

        def race(name):
            go.wait()
            answers[name] = env.bind(name, "hami-0")

        threads = [threading.Thread(target=race, args=(n,)) for n in ("r1", "r2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        won = sorted(n for n, a in answers.items() if not a.get("Error"))
        suite.require(len(won) == 1, "exactly one of two racing binds gets the node", answers)
        winner, loser = won[0], ({"r1", "r2"} - set(won)).pop()
        suite.check("locked for HAMi" in answers[loser]["Error"], "the other is told the node is locked", answers)
        suite.check_eq(decision_keys(env.annotations(loser)), [], "the loser carries nothing",
                       env.annotations(loser))
        suite.check_eq(env.tasks("hami-0"), 1, "only the winner is reserved")
        plugin.allocate_pending()
        env.accepted(winner)
        env.bind_retrying(loser, "hami-0")
        plugin.allocate_pending()
        env.accepted(loser)

        # The API server's log of lock writes: taken and released in turn.
        writes = []
        for r in env.cluster.requests_since(mark):
            if r["method"] != "PATCH" or r["path"] != "/api/v1/nodes/hami-0" or r.get("status") != 200:
                continue
            ann = (json.loads(r["body"] or "{}").get("metadata") or {}).get("annotations") or {}
            if LOCK in ann:
                writes.append(None if ann[LOCK] is None else ann[LOCK].rsplit(",", 1)[-1])
        suite.check_eq(writes, [winner, None, loser, None], "lock writes never interleave", writes)
        suite.check_eq(env.tasks("hami-0"), 2, "both pods hold their vGPU")
        binds = env.hami_binds()
        suite.check(binds["bound"] == 2 and binds["locked"] >= 1 and binds["failed"] == 0,
                    "gqa_hami_binds_total counts two binds and the refusal", binds)


@suite.test
def decisions_match_the_plugin(_s):
    with Env(("hami-0", "hami-1"), devices=2, memory=16384, split=4, flags=["--placement", "bind"]) as env:
        shapes = [g.vgpu(1, 6000, cores=30), g.vgpu(1, pct=25, cores=20), g.vgpu(2, 3000, cores=10),
                  g.vgpu(1, 5000), g.vgpu(1, cores=100)]
        placed, refused = [], []
        for i in range(60):
            name = "fill-%02d" % i
            env.create(name, shapes[i % len(shapes)])
            node, f = env.schedule(name, ["hami-0", "hami-1"])
            if node is None:
                refused.append((name, f))
                if len(refused) == len(shapes):
                    break  # no shape fits any more
                continue
            refused = []
            placed.append(name)
            env.accepted(name)
        suite.check(len(placed) >= 10, "the two nodes take many vGPUs before they are full", (placed, refused))
        suite.require(len(refused) == len(shapes), "the filter refuses every shape once the nodes are full", placed)
        for name, f in refused:
            reasons = f.get("FailedNodes") or {}
            reasons.update(f.get("FailedAndUnresolvableNodes") or {})
            suite.check(set(reasons) == {"hami-0", "hami-1"} and all("GPU" in r for r in reasons.values()),
                        "the refusal of %s names the GPUs on both nodes" % name, f)
        failed = [d for p in env.plugins.values() for d in p.decisions if d[1] != "success"]
        suite.check_eq(failed, [], "the plugin accepted every decision")
        for node, plugin in env.plugins.items():
            plugin.stop()  # its client is one connection: no second user while its thread runs
            use = plugin._in_use(plugin._pods_here())
            ok = g.wait_until(lambda: {d["uuid"]: [d["tasks"], d["memoryUsedMiB"], d["coreUsed"]]
                                       for d in env.devices(node)} == use, 15)
            suite.check(ok, "/inspect/nodes/%s agrees with the plugin's accounting" % node,
                        (env.devices(node), use))


@suite.test
def failed_binding(_s):
    with Env(("hami-0",), flags=["--placement", "bind"]) as env:
        env.create("fb", g.vgpu(1, 2000, cores=10))
        rule = env.cluster.sim.fail(status=500, count=1, path=r"/binding$", method="POST")
        a = env.bind("fb", "hami-0")
        env.cluster.sim.clear_faults()
        suite.check("binding pod" in (a.get("Error") or ""), "the failed Binding is the answer's Error", a)
        ann = env.annotations("fb")
        suite.check_eq(ann.get(PHASE), "failed", "bind-phase says failed", ann)
        suite.check(TO_ALLOCATE not in ann and VGPU_NODE not in ann, "the decision is taken off", ann)
        suite.check(LOCK not in env.node_annotations("hami-0"), "the lock is released",
                    env.node_annotations("hami-0"))
        suite.check(g.wait_until(lambda: env.tasks("hami-0") == 0, 5), "the reservation is undone",
                    env.devices("hami-0"))
        suite.check(rule is not None, "the fault was armed")
        env.bind_retrying("fb", "hami-0")
        env.accepted("fb")
        suite.check_eq(env.hami_binds(), {"bound": 1, "locked": 0, "failed": 1},
                       "gqa_hami_binds_total counts the failure and the bind")


@suite.test
def filter_placement(_s):
    with Env(("hami-0",)) as env:
        env.create("fm", g.vgpu(1, 4000, cores=20))
        f = env.srv.filter(env.cluster.get_pod("fm", NS), ["hami-0"])
        suite.check_eq(f.get("NodeNames"), ["hami-0"], "the filter decides", f)
        ann = env.annotations("fm")
        suite.check_eq(decision_keys(ann), sorted([TO_ALLOCATE, ALLOCATED, VGPU_NODE, VGPU_TIME]),
                       "the filter writes HAMi's decision, and no bind-phase", ann)
        suite.check_eq(ann[TO_ALLOCATE], ann[ALLOCATED], "-to-allocate and -allocated agree", ann)
        suite.check(g.wait_until(lambda: env.tasks("hami-0") == 1, 5), "the decision is charged",
                    env.devices("hami-0"))
        # Once the watch delivers the written decision it is proven (the
        # proof covers the HAMi devices as they read back) and still held.
        suite.check(env.srv.seen_rv("pods", str(env.cluster.sim.rv)), "the watch delivered the decision")
        suite.check_eq(env.tasks("hami-0"), 1, "the written decision still holds its vGPU")
        suite.check("cannot prove" not in env.srv.stderr(), "the service proves its own HAMi decision",
                    env.srv.stderr()[-2000:])
        env.bind_retrying("fm", "hami-0")
        env.accepted("fm")
        env.create("fm2", g.vgpu(1, 4000, cores=20))
        f = env.srv.filter(env.cluster.get_pod("fm2", NS), ["hami-0"])
        suite.check_eq(f.get("NodeNames"), ["hami-0"], "a second HAMi pod is decided", f)
        said = env.srv.stderr().count("decided onto HAMi devices in --placement filter")
        suite.check_eq(said, 1, "the bindVerb warning is logged once, at the first HAMi decision",
                       env.srv.stderr()[-2000:])



@suite.test
def device_cordon(_s):
    """HAMi v2.10's hami.io/device-cordon: the listed GPUs take no new vGPU."""
    with Env(("hami-0",), devices=2) as env:
        sim = env.cluster.sim
        sim.patch("nodes", "hami-0", "merge", {"metadata": {"annotations": {
            "hami.io/device-cordon": " %s , " % g.hami_uuid("hami-0", 1)}}})
        ok = g.wait_until(lambda: [d.get("cordoned") for d in env.devices("hami-0") or []] == [False, True], 10)
        suite.require(ok, "/inspect/nodes shows GPU 1 cordoned", env.devices("hami-0"))
        env.create("two", g.vgpu(2, 1000))
        f = env.srv.filter(env.cluster.get_pod("two", NS), ["hami-0"])
        # No eviction frees a cordoned GPU: unresolvable, so no preemption for it.
        reason = (f.get("FailedAndUnresolvableNodes") or {}).get("hami-0", "")
        suite.check("1 cordoned by hami.io/device-cordon" in reason, "two vGPUs no longer fit, and why", f)
        env.create("one", g.vgpu(1, 1000))
        node, f = env.schedule("one", ["hami-0"])
        suite.check_eq(node, "hami-0", "one vGPU still fits", f)
        suite.check_eq(allocation_of(env.annotations("one").get(ALLOCATED, ""))[-1], [g.hami_uuid("hami-0", 0)],
                       "on the GPU that is not cordoned", env.annotations("one"))


if __name__ == "__main__":
    suite.main()
