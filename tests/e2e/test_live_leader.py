#!/usr/bin/env python3
"""Live mode: two replicas with --leader-elect never both decide (test 7 of
the issue).

Two binaries follow one API simulator and compete for one Lease. Exactly
one is ready with gqa_leader 1; the other is unready (/readyz 503 "not the
leader"), has gqa_leader 0 and answers filter and bind with an Error. The
leader is stopped with SIGTERM: it releases the Lease, and the other takes
over within a few seconds and decides. A sampler polls both replicas'
gqa_leader all along: never 1 on both at once.

Each replica has its own token, so the simulator's request log tells whose
request was whose.

Standalone: python3 test_live_leader.py --binary PATH --source-dir REPO
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-leader")

LEASE_NS, LEASE_NAME = "kube-system", "gqa-live-test"
TOKENS = {"a": "aaaa-replica-a", "b": "bbbb-replica-b"}
USERS = {"a": "token:aaaa...", "b": "token:bbbb..."}
TAKEOVER_S = 6.0     # retry period 2 s (+20% jitter) after the release, with margin


def leader_gauge(srv):
    try:
        r = srv.get("/metrics", timeout=3)
        samples, _t, _b = g.parse_metrics(r.text)
        return int(g.metric(samples, "gqa_leader"))
    except (OSError, ValueError):
        return None


class Sampler(threading.Thread):
    """Polls gqa_leader of both replicas; remembers every sample."""

    def __init__(self, servers):
        super().__init__(daemon=True)
        self.servers = servers
        self.samples = []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            vals = {k: (leader_gauge(srv) if srv.proc and srv.proc.poll() is None else None)
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


def writes_by(c, user, since, kinds=("PATCH", "POST", "PUT", "DELETE"), lease_too=False):
    out = []
    for r in c.sim.requests(since):
        if r["user"] != user or r["method"] not in kinds:
            continue
        if not lease_too and "/leases" in r["path"]:
            continue
        out.append((r["method"], r["path"], r["status"]))
    return out


@suite.test
def test_two_replicas_one_leader(s):
    with g.Cluster(s, tokens=tuple(TOKENS.values())) as c:
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        for name in ("p1", "p2", "p3"):
            c.create_pod(g.pod(name, g.vcuda(30, 8)))
        flags = ["--leader-elect", "--lease-namespace", LEASE_NS, "--lease-name", LEASE_NAME]
        kc = {k: c.kubeconfig(token=t, name="kubeconfig-%s.json" % k) for k, t in TOKENS.items()}
        a = g.LiveServer(s, kc["a"], flags, name="replica-a")
        b = g.LiveServer(s, kc["b"], flags, wait_ready=False, name="replica-b")
        sampler = Sampler({"a": a, "b": b})
        try:
            a.start()             # ready = synced and leading
            b.start()             # serving; it must stay a follower
            sampler.start()
            synced = g.wait_until(lambda: all(i["synced"] for i in b.informers().values()), 10)
            s.check(synced, "the follower's informers sync too", b.informers())
            time.sleep(2.5)       # more than one retry period: the follower has tried the lease
            ra, rb = a.readyz(), b.readyz()
            s.check_eq(ra.status, 200, "the leader is ready", ra)
            s.check_eq(rb.status, 503, "the follower is not ready", rb)
            s.check("not the leader" in rb.text, "its reason says it is not the leader", rb.text)
            s.check_eq((leader_gauge(a), leader_gauge(b)), (1, 0), "gqa_leader: 1 on the leader, 0 on the follower")
            ls = lease(c)
            holder = ((ls or {}).get("spec") or {}).get("holderIdentity")
            s.check(bool(holder), "the Lease has a holder", ls)

            mark = c.last_seq()
            rb = b.filter(c.get_pod("p1"), ["n1"])
            s.check("not the leader" in (rb.get("Error") or ""), "the follower answers filter with an Error", rb)
            s.check(not rb.get("NodeNames"), "and places nothing", rb)
            bb = b.post_json("/scheduler/bind", {"PodName": "p1", "PodNamespace": "default",
                                                  "PodUID": c.get_pod("p1")["metadata"]["uid"], "Node": "n1"})
            s.check("not the leader" in (bb.get("Error") or ""), "and bind with an Error", bb)
            ra = a.filter(c.get_pod("p1"), ["n1"])
            s.check_eq(ra.get("NodeNames"), ["n1"], "the leader decides", ra)
            s.check_eq(writes_by(c, USERS["b"], mark), [], "the follower wrote nothing")
            s.check_eq(len(writes_by(c, USERS["a"], mark)), 1, "the leader wrote one patch")

            # The leader goes away: it gives the Lease back on SIGTERM.
            mark = c.last_seq()
            t_stop = time.monotonic()
            a.stop()
            took = g.wait_until(lambda: b.readyz().status == 200 and time.monotonic(), TAKEOVER_S + 10)
            s.check(took, "the follower becomes ready after the leader stopped", b.readyz())
            if took:
                print("  takeover after SIGTERM: %.2fs" % (took - t_stop))
                s.check(took - t_stop <= TAKEOVER_S, "the takeover takes at most %.0fs (the Lease was released, "
                        "not left to expire)" % TAKEOVER_S, "%.2fs" % (took - t_stop))
            released = [w for w in writes_by(c, USERS["a"], mark, lease_too=True) if "/leases" in w[1]]
            s.check(released and all(st < 300 for _m, _p, st in released), "the old leader wrote the Lease on its "
                    "way out (release)", released)
            ls = lease(c)
            s.check(((ls or {}).get("spec") or {}).get("holderIdentity") not in (None, "", holder),
                    "the Lease has a new holder", ls)
            s.check_eq(leader_gauge(b), 1, "gqa_leader is 1 on the new leader")
            mark = c.last_seq()
            rb = b.filter(c.get_pod("p2"), ["n1"])
            s.check_eq(rb.get("NodeNames"), ["n1"], "the new leader decides", rb)
            s.check_eq(c.annotations("p2").get("tencent.com/predicate-node"), "n1", "and records the decision")
            s.check_eq([w[0] for w in writes_by(c, USERS["b"], mark)], ["PATCH"], "with its own token")
            # p1's decision by the old leader is still counted by the new one.
            cores = g.wait_until(lambda: sum(b.cores()["n1"]) == 60 and b.cores(), 5)
            s.check(cores, "the new leader counts both decisions", b.cores())
        finally:
            sampler.halt.set()
            if sampler.is_alive():
                sampler.join(5)
            a.stop()
            b.stop()
        s.check(len(sampler.samples) > 20, "the sampler saw the replicas", len(sampler.samples))
        s.check_eq(sampler.both_leading(), [], "never both replicas leading at once")


if __name__ == "__main__":
    suite.main()
