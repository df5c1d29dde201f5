#!/usr/bin/env python3
"""Live mode: two replicas with --leader-elect (issue 9, item 4).

Two binaries follow one API simulator and compete for one Lease. Each runs
"in a pod": POD_NAME/POD_NAMESPACE name a Pod object in the simulator, as
the downward API would. Readiness means synced: both replicas answer
/readyz 200. Routing follows the Lease: the leader labels its own pod
gpu-admission.io/leader=true (what the extender Service selects on), the
follower's pod never carries it, and the follower answers filter and bind
with the kube-scheduler error form ("not the leader"). A sampler polls both
replicas' gqa_leader all along: never 1 on both at once.

  * SIGTERM on the leader: it takes its label off, releases the Lease, and
    the other replica holds the Lease and its label within 3 s.
  * SIGKILL on the leader: its label stays behind until the other replica
    takes the expired Lease (15 s), labels itself and clears the dead
    one's label.

Each replica has its own token, so the simulator's request log tells whose
request was whose.

Standalone: python3 test_live_leader.py --binary PATH --source-dir REPO
"""

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-leader")

LEASE_NS, LEASE_NAME = "kube-system", "gqa-live-test"
POD_NS = "kube-system"
LABEL = "gpu-admission.io/leader"
TOKENS = {"a": "aaaa-replica-a", "b": "bbbb-replica-b"}
USERS = {"a": "token:aaaa...", "b": "token:bbbb..."}
SIGTERM_HANDOVER_S = 3.0   # the bound: release, a follower look (1 s + 20%), label
SIGKILL_TAKEOVER_S = 30.0  # the 15 s lease must expire first; generous for a loaded machine
FIRST_LEADER_S = 15.0


class Sampler(threading.Thread):
    """Polls gqa_leader of both replicas; remembers every sample."""

    def __init__(self, servers):
        super().__init__(daemon=True)
        self.servers = servers
        self.samples = []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            vals = {k: (g.leader_gauge(srv) if srv.proc and srv.proc.poll() is None else None)
                    for k, srv in self.servers.items()}
            self.samples.append((time.monotonic(), vals))
            self.halt.wait(0.05)

    def both_leading(self):
        return [(t, v) for t, v in self.samples if all(x == 1 for x in v.values())]


def lease(c):
    try:
        return c.sim.get("leases", LEASE_NAME, LEASE_NS)
    except Exception:  # noqa: BLE001 - the simulator's ApiError (404) before the first write
        return None


def labelled(c):
    """Names of the pods of POD_NS that carry the leader label."""
    return sorted(p["metadata"]["name"] for p in c.sim.objects_of("pods", POD_NS)
                  if ((p["metadata"].get("labels") or {}).get(LABEL)) == "true")


def writes_by(c, user, since, kinds=("PATCH", "POST", "PUT", "DELETE")):
    return [(r["method"], r["path"], r["status"]) for r in c.sim.requests(since)
            if r["user"] == user and r["method"] in kinds]


def decision_writes(c, user, since):
    """Writes of decisions: not the Lease, not the leader label on the replicas' own pods."""
    return [w for w in writes_by(c, user, since)
            if "/leases" not in w[1] and not w[1].startswith("/api/v1/namespaces/%s/pods/gqa-" % POD_NS)]


def replica_pod(name):
    return g.pod(name, {"cpu": "100m"}, namespace=POD_NS)


class Pair:
    """The simulator, two replicas a and b in their own pods, and the sampler."""

    def __init__(self, s, c):
        # One decision key for both, as the manifests' Secret gives them: the
        # new leader honours the old one's decisions.
        key_file, _ = g.decision_key_file(s)
        flags = ["--leader-elect", "--lease-namespace", LEASE_NS, "--lease-name", LEASE_NAME,
                 "--decision-key-file", key_file]
        self.c = c
        self.srv = {}
        for k, tok in TOKENS.items():
            c.create_pod(replica_pod("gqa-" + k))
            kc = c.kubeconfig(token=tok, name="kubeconfig-%s.json" % k)
            self.srv[k] = g.LiveServer(s, kc, flags, name="replica-" + k,
                                       env={"POD_NAME": "gqa-" + k, "POD_NAMESPACE": POD_NS})
        self.sampler = Sampler(self.srv)

    def start(self):
        for srv in self.srv.values():
            srv.start()        # ready = synced, leader or not
        self.sampler.start()

    def leader(self, timeout=FIRST_LEADER_S):
        """(leader key, follower key) once exactly one replica leads and only its pod is labelled."""
        def one():
            gauges = {k: g.leader_gauge(srv) for k, srv in self.srv.items()}
            lead = [k for k, v in gauges.items() if v == 1]
            if len(lead) == 1 and labelled(self.c) == ["gqa-" + lead[0]]:
                return lead[0]
            return None
        k = g.wait_until(one, timeout)
        return (k, "b" if k == "a" else "a") if k else (None, None)

    def seen_both(self):
        return sum(1 for _t, v in list(self.sampler.samples) if all(x is not None for x in v.values()))

    def sampled(self):
        """Wait until the sampler has seen both replicas a few times (before one goes)."""
        return g.wait_until(lambda: self.seen_both() >= 5, 10)

    def stop(self, s):
        self.sampler.halt.set()
        if self.sampler.is_alive():
            self.sampler.join(5)
        for srv in self.srv.values():
            srv.stop()
        s.check(self.seen_both() >= 5, "the sampler saw both replicas answer", self.sampler.samples[:10])
        s.check_eq(self.sampler.both_leading(), [], "never both replicas leading at once")


def check_follower_refuses(s, c, follower, pod_name):
    mark = c.last_seq()
    r = follower.filter(c.get_pod(pod_name), ["n1"])
    s.check("not the leader" in (r.get("Error") or ""), "the follower answers filter with the Error form", r)
    s.check(not r.get("NodeNames"), "and places nothing", r)
    b = follower.post_json("/scheduler/bind", {"PodName": pod_name, "PodNamespace": "default",
                                                "PodUID": c.get_pod(pod_name)["metadata"]["uid"], "Node": "n1"})
    s.check("not the leader" in (b.get("Error") or ""), "and bind with the Error form", b)
    return mark


@suite.test
def test_both_ready_label_follows_lease_sigterm(s):
    with g.Cluster(s, tokens=tuple(TOKENS.values())) as c:
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        for name in ("p1", "p2", "p3"):
            c.create_pod(g.pod(name, g.vcuda(30, 8)))
        pair = Pair(s, c)
        try:
            pair.start()
            lk, fk = pair.leader()
            s.require(lk is not None, "exactly one replica leads and only its pod carries %s=true" % LABEL,
                      "labelled %r, gauges %r" % (labelled(c), {k: g.leader_gauge(v) for k, v in pair.srv.items()}))
            lead, follow = pair.srv[lk], pair.srv[fk]
            for k, srv in pair.srv.items():
                r = srv.readyz()
                s.check_eq(r.status, 200, "replica %s (%s) is ready" % (k, "leader" if k == lk else "follower"), r)
            holder = ((lease(c) or {}).get("spec") or {}).get("holderIdentity")
            s.check(bool(holder), "the Lease has a holder", lease(c))

            mark = check_follower_refuses(s, c, follow, "p1")
            r = lead.filter(c.get_pod("p1"), ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "the leader decides", r)
            s.check_eq(decision_writes(c, USERS[fk], mark), [], "the follower wrote nothing")
            s.check_eq(len(decision_writes(c, USERS[lk], mark)), 1, "the leader wrote one patch")
            m, _t, _b = g.parse_metrics(lead.metrics().text)
            s.check(g.metric(m, "gqa_api_writes_total", write="leader_label", result="ok") >= 1,
                    "the leader's label write is counted (gqa_api_writes_total)")
            s.check_eq(g.metric(m, "gqa_api_writes_total", write="decision_patch", result="ok"), 1.0,
                       "and its decision patch")

            # SIGTERM: label off, Lease released, the other replica takes both over.
            s.check(pair.sampled(), "the sampler sees both replicas")
            mark = c.last_seq()
            t0 = time.monotonic()
            lead.signal(signal.SIGTERM)
            took = g.wait_until(lambda: labelled(c) == ["gqa-" + fk] and g.leader_gauge(follow) == 1
                                and time.monotonic(), SIGTERM_HANDOVER_S + 10, interval=0.02)
            s.require(took, "after SIGTERM the other replica leads and only its pod is labelled",
                      "labelled %r, gauge %r" % (labelled(c), g.leader_gauge(follow)))
            print("  handover after SIGTERM: %.2fs" % (took - t0))
            s.check(took - t0 < SIGTERM_HANDOVER_S, "the handover after SIGTERM takes under %.0f s" %
                    SIGTERM_HANDOVER_S, "%.2fs" % (took - t0))
            lead.stop()
            own = "/api/v1/namespaces/%s/pods/gqa-%s" % (POD_NS, lk)
            old = writes_by(c, USERS[lk], mark)
            unlabel = [i for i, w in enumerate(old) if w[:2] == ("PATCH", own) and w[2] == 200]
            release = [i for i, w in enumerate(old) if w[0] == "PUT" and "/leases/" in w[1] and w[2] == 200]
            s.check(unlabel and release and unlabel[0] < release[0],
                    "the old leader took its own label off, then released the Lease", old)
            s.check_eq(follow.readyz().status, 200, "the new leader is ready")
            new_holder = ((lease(c) or {}).get("spec") or {}).get("holderIdentity")
            s.check(new_holder not in (None, "", holder), "the Lease has a new holder", lease(c))
            mark = c.last_seq()
            r = follow.filter(c.get_pod("p2"), ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "the new leader decides", r)
            s.check_eq(c.annotations("p2").get("tencent.com/predicate-node"), "n1", "and records the decision")
            s.check_eq([w[0] for w in decision_writes(c, USERS[fk], mark)], ["PATCH"], "with its own token")
            cores = g.wait_until(lambda: sum(follow.cores()["n1"]) == 60 and follow.cores(), 5)
            s.check(cores, "the new leader counts both decisions", follow.cores())
        finally:
            pair.stop(s)


@suite.test
def test_sigkill_leader_label_cleared_by_successor(s):
    with g.Cluster(s, tokens=tuple(TOKENS.values())) as c:
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        c.create_pod(g.pod("q1", g.vcuda(30, 8)))
        pair = Pair(s, c)
        try:
            pair.start()
            lk, fk = pair.leader()
            s.require(lk is not None, "one replica leads and labels its pod", labelled(c))
            lead, follow = pair.srv[lk], pair.srv[fk]
            s.check(pair.sampled(), "the sampler sees both replicas")
            t0 = time.monotonic()
            lead.signal(signal.SIGKILL)
            lead.wait_exit()
            s.check_eq(labelled(c), ["gqa-" + lk], "a killed leader leaves its label behind")
            s.check_eq(follow.readyz().status, 200, "the follower stays ready")
            took = g.wait_until(lambda: labelled(c) == ["gqa-" + fk] and g.leader_gauge(follow) == 1
                                and time.monotonic(), SIGKILL_TAKEOVER_S, interval=0.1)
            s.require(took, "the other replica takes the expired Lease, labels itself and clears the dead "
                      "one's label", "labelled %r, lease %r" % (labelled(c), lease(c)))
            print("  takeover after SIGKILL: %.2fs (the lease lasts 15 s)" % (took - t0))
            r = follow.filter(c.get_pod("q1"), ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "the new leader decides", r)
            lead.stop(expect_code=-signal.SIGKILL)
        finally:
            pair.stop(s)


@suite.test
def test_restarted_follower_takes_its_stale_label_off(s):
    """A container that restarts in the same pod after a crash finds its pod still labelled; as a
    follower (the Lease is held by someone else) it takes the label off at once, so the Service does not
    route to it until the Lease expires."""
    with g.Cluster(s, tokens=(TOKENS["a"],)) as c:
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        stale = replica_pod("gqa-a")
        stale["metadata"]["labels"] = {LABEL: "true"}
        c.create_pod(stale)
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        c.sim.create("leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": LEASE_NAME, "namespace": LEASE_NS},
                                "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 60,
                                         "acquireTime": now, "renewTime": now}}, ns=LEASE_NS)
        s.require(labelled(c) == ["gqa-a"], "the pod starts out labelled (left by a crashed run)", labelled(c))
        flags = ["--leader-elect", "--lease-namespace", LEASE_NS, "--lease-name", LEASE_NAME]
        with g.LiveServer(s, c.kubeconfig(), flags, name="replica-a",
                          env={"POD_NAME": "gqa-a", "POD_NAMESPACE": POD_NS}) as srv:
            gone = g.wait_until(lambda: labelled(c) == [], 5)
            s.check(gone, "the restarted replica takes the label off its own pod", labelled(c))
            s.check_eq(g.leader_gauge(srv), 0, "it is a follower (the Lease is someone else's)")
            s.check_eq(srv.readyz().status, 200, "and ready: it is synced")


def lease_requests(c, user):
    return [(r["method"], r["status"]) for r in c.sim.requests(0) if r["user"] == user and "/leases" in r["path"]]


@suite.test
def test_replica_that_cannot_sync_does_not_campaign(s):
    """A replica whose pods list is forbidden (RBAC missing) never syncs: it must not take the Lease and
    label itself leader, deciding nothing while the ready replica stands by (docs/behaviour.md, "Only a
    ready replica leads"). Once the permission is there it syncs and campaigns like any other."""
    with g.Cluster(s, tokens=tuple(TOKENS.values())) as c:
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        c.sim.fail(403, path="^/api/v1/pods$", method="GET", user=USERS["a"],
                   message='pods is forbidden: User "system:serviceaccount:kube-system:gqa-a" cannot list '
                           'resource "pods" in API group "" at the cluster scope')
        flags = ["--leader-elect", "--lease-namespace", LEASE_NS, "--lease-name", LEASE_NAME]
        srv = {}
        for k, tok in TOKENS.items():
            c.create_pod(replica_pod("gqa-" + k))
            srv[k] = g.LiveServer(s, c.kubeconfig(token=tok, name="kubeconfig-%s.json" % k), flags,
                                  wait_ready=False, name="replica-" + k,
                                  env={"POD_NAME": "gqa-" + k, "POD_NAMESPACE": POD_NS})
        try:
            srv["a"].start()   # alone: nothing else would stop it taking the Lease
            s.require(g.wait_until(lambda: "not campaigning" in srv["a"].stderr(), 20),
                      "the replica that cannot sync says it does not campaign", g.tail(srv["a"].stderr()))
            s.check_eq(srv["a"].readyz().status, 503, "it is not ready")
            s.check_eq(lease_requests(c, USERS["a"]), [], "it sent no Lease request")
            s.check_eq(lease(c), None, "there is no Lease")
            s.check_eq(g.leader_gauge(srv["a"]), 0, "gqa_leader is 0")
            s.check_eq(labelled(c), [], "its pod is not labelled leader")

            srv["b"].start()
            lead_b = g.wait_until(lambda: g.leader_gauge(srv["b"]) == 1 and labelled(c) == ["gqa-b"],
                                  FIRST_LEADER_S)
            s.check(lead_b, "the replica that can serve leads and labels its pod", labelled(c))
            s.check_eq(lease_requests(c, USERS["a"]), [], "the unsynced replica still sent no Lease request")

            c.sim.clear_faults()
            s.check(g.wait_until(lambda: srv["a"].readyz().status == 200, 30),
                    "with the permission back it syncs and is ready", srv["a"].readyz())
            s.check(g.wait_until(lambda: lease_requests(c, USERS["a"]), 20),
                    "and then campaigns (reads the Lease)")
            s.check_eq(g.leader_gauge(srv["a"]), 0, "as a follower: the Lease is held")
            s.check_eq(labelled(c), ["gqa-b"], "the leader's label stays where it is")
        finally:
            for v in srv.values():
                v.stop()


if __name__ == "__main__":
    suite.main()
