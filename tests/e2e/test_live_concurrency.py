#!/usr/bin/env python3
"""Live mode against a slow API server (issue 9, item 1): no lock is held
across a write to the API server, and health endpoints never wait on one.

The simulator holds pod PATCHes and Bindings at a gate (or delays them, in
the race tests). The binary runs with its default --threads (the machine's
cores: 2 here), so the libmicrohttpd threads are fewer than the decisions in
flight.

  * 8 concurrent filter-mode decisions for 8 pods that all fit are all
    written at once: the simulator holds each write at a gate and sees all 8
    waiting together (were a lock held across a write, it would see one),
    while /livez keeps answering (it would wait for ever behind a held
    decision: the gate opens only after the probes);
  * the same with 8 concurrent binds in bind mode;
  * two pods racing for the last free GPU: exactly one wins; when the
    winner's write fails (500, or 409 on every attempt) its reservation is
    taken back and the GPU is free again;
  * a second request for a pod whose decision is still being written is
    told to retry instead of deciding again;
  * SIGTERM while decisions wait (running or queued for a worker): the
    drain lets each finish and the process exits 0.

No assertion is on elapsed time: concurrency is seen as requests waiting
together at the simulator's gate, which holds on a loaded machine too. The
latencies are printed for the reader.

Standalone: python3 test_live_concurrency.py --binary PATH --source-dir REPO
"""

import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-concurrency")

DELAY_MS = 1000
NPODS = 8
GATE_WAIT_S = 60.0
SETTLE_S = 10.0
POD_PATCH = r"^/api/v1/namespaces/[^/]+/pods/[^/]+$"
BINDING = r"/binding$"


def slow_api(c):
    c.sim.delay(DELAY_MS, path=POD_PATCH, method="PATCH")
    c.sim.delay(DELAY_MS, path=BINDING, method="POST")


@suite.test
def test_binds_wait_for_a_worker(s):
    """kube-scheduler binds each pod in a goroutine of its own: more binds than workers and --decision-queue
    wait for a worker (the queue holds every admitted connection) instead of being refused; one that waited
    past the bound (2 s, inside kube-scheduler's httpTimeout) is answered without being taken."""
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 4))
        names = ["q-%d" % i for i in range(4)]
        uids = {n: c.create_pod(g.pod(n, g.vcuda(30, 8)))["metadata"]["uid"] for n in names}
        args = ["--placement", "bind", "--decision-workers", "1", "--decision-queue", "1"]
        with g.LiveServer(s, c.kubeconfig(), args) as srv:
            c.sim.delay(150, path=BINDING, method="POST")
            results, _ = concurrently([
                lambda n=n: srv.post_json("/scheduler/bind", {"PodName": n, "PodNamespace": "default",
                                                              "PodUID": uids[n], "Node": "n1"})
                for n in names])
            s.check_eq([r for r in results if not isinstance(r, dict) or r.get("Error")], [],
                       "4 binds on 1 worker with a queue of 1: each waits its turn, none is refused", results)
            for n in names:
                s.check_eq(decided(c, n), ("n1", "n1"), "%s is annotated and bound" % n)
            c.sim.clear_faults()
            late = ["late-0", "late-1"]
            uids = {n: c.create_pod(g.pod(n, g.vcuda(30, 8)))["metadata"]["uid"] for n in late}
            c.sim.delay(2500, path=BINDING, method="POST")
            results, _ = concurrently([
                lambda n=n: srv.post_json("/scheduler/bind", {"PodName": n, "PodNamespace": "default",
                                                              "PodUID": uids[n], "Node": "n1"})
                for n in late])
            errors = sorted((r or {}).get("Error") or "" for r in results)
            s.check(errors[0] == "" and "waited more than" in errors[1],
                    "of two binds behind a 2.5 s Binding, the one that waited past the bound is not taken", results)
            c.sim.clear_faults()


def concurrently(calls):
    """Run the callables at once (behind a barrier); (results, seconds from release to the last answer)."""
    barrier = threading.Barrier(len(calls) + 1)
    results, threads = start_all([lambda call=call: (barrier.wait(30), call())[1] for call in calls])
    barrier.wait(30)
    t0 = time.monotonic()
    for t in threads:
        t.join(60)
    return results, time.monotonic() - t0


def check_livez(s, srv, what):
    """While every decision waits at the gate, /livez answers: a health check that waited behind one
    would not answer until the gate opens, which happens only after this."""
    times = []
    for _ in range(5):
        t0 = time.monotonic()
        r = srv.get("/livez", timeout=GATE_WAIT_S / 2)
        times.append(time.monotonic() - t0)
        s.check_eq(r.status, 200, "/livez answers 200 while %s" % what)
    print("  /livez while %s: %d samples, median %.1f ms, worst %.1f ms" %
          (what, len(times), statistics.median(times) * 1e3, max(times) * 1e3))


def gated_together(s, c, gate, count, what):
    """Wait until `count` requests wait at the gate at once."""
    s.require(g.wait_until(lambda: c.sim.gate_waiting(gate) >= count, GATE_WAIT_S, interval=0.02),
              "%d %s wait on the API server at once" % (count, what), c.sim.gate_waiting(gate))


def start_all(calls):
    """Run the callables at once, each in its own thread; returns (results, threads)."""
    results = [None] * len(calls)

    def run(i):
        try:
            results[i] = calls[i]()
        except Exception as e:  # noqa: BLE001 - recorded as the answer
            results[i] = {"exception": repr(e)}

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    return results, threads


def run_gated(s, c, srv, gate, calls, what):
    """Run the calls at once while the gate holds their writes: all of them must wait there together and
    /livez must answer meanwhile; then open the gate and return the answers."""
    t0 = time.monotonic()
    results, threads = start_all(calls)
    try:
        gated_together(s, c, gate, len(calls), what + " writes")
        check_livez(s, srv, "%d %s wait on the API server" % (len(calls), what))
    finally:
        c.sim.open_gate(gate)
        for t in threads:
            t.join(60)
    print("  %d %s written together: %.2fs in total" % (len(calls), what, time.monotonic() - t0))
    return results


def decided(c, name):
    return (c.annotations(name).get("gpu-admission.io/node"), c.get_pod(name)["spec"].get("nodeName"))


@suite.test
def test_parallel_filter_decisions(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 4))
        c.add_node(g.vcuda_node("n2", 4))
        names = ["f-%d" % i for i in range(NPODS)]
        for n in names:
            c.create_pod(g.pod(n, g.vcuda(30, 8)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            pods = [c.get_pod(n) for n in names]
            gate = c.sim.gate(path=POD_PATCH, method="PATCH")
            results = run_gated(s, c, srv, gate, [lambda p=p: srv.filter(p, ["n1", "n2"]) for p in pods],
                                "filter-mode decisions")
            s.check_eq([r for r in results if not (isinstance(r, dict) and len(r.get("NodeNames") or []) == 1
                                                   and not r.get("Error"))], [],
                       "every filter answers one node and no Error")
            for n, r in zip(names, results):
                s.check_eq(c.annotations(n).get("gpu-admission.io/node"), (r.get("NodeNames") or [None])[0],
                           "%s carries the decision it was answered" % n)


@suite.test
def test_parallel_binds(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 4))
        c.add_node(g.vcuda_node("n2", 4))
        names = ["b-%d" % i for i in range(NPODS)]
        uids = {n: c.create_pod(g.pod(n, g.vcuda(30, 8)))["metadata"]["uid"] for n in names}
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "bind"]) as srv:
            # Whichever write a bind starts with (a PATCH of the annotations, or a Binding that
            # carries them), all 8 must wait on the API server together.
            gate = c.sim.gate(path=POD_PATCH + "|" + BINDING, method=["PATCH", "POST"])
            results = run_gated(s, c, srv, gate, [
                lambda n=n, i=i: srv.post_json("/scheduler/bind", {"PodName": n, "PodNamespace": "default",
                                                                   "PodUID": uids[n], "Node": "n%d" % (i % 2 + 1)})
                for i, n in enumerate(names)], "binds")
            s.check_eq([r for r in results if not isinstance(r, dict) or r.get("Error")], [],
                       "every bind succeeds")
            for i, n in enumerate(names):
                s.check_eq(decided(c, n), ("n%d" % (i % 2 + 1),) * 2, "%s is annotated and bound" % n)


def reserved(srv, node="n1"):
    """The GPU's charge in the cache (the reservation of a decision in flight shows there)."""
    return srv.cores()[node][0]


def race(s, c, srv, winner, loser):
    """Start winner's filter; once its reservation shows, filter loser (it must lose). Returns
    (winner's answer, loser's answer)."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("w", srv.filter(c.get_pod(winner), ["n1"])))
    t.start()
    s.check(g.wait_until(lambda: reserved(srv) == 100, 5, interval=0.02),
            "%s's reservation holds the GPU while its write is in flight" % winner, srv.cores())
    out["l"] = srv.filter(c.get_pod(loser), ["n1"])
    t.join(30)
    return out.get("w"), out.get("l")


@suite.test
def test_race_for_the_last_gpu(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 1))
        for n in ("r1", "r2", "r3", "r4", "r5"):
            c.create_pod(g.pod(n, g.vcuda(100, 64)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            slow_api(c)
            # Both at once: exactly one wins.
            results, _took = concurrently([lambda n=n: srv.filter(c.get_pod(n), ["n1"]) for n in ("r1", "r2")])
            winners = [n for n, r in zip(("r1", "r2"), results) if r.get("NodeNames")]
            s.check_eq(len(winners), 1, "exactly one of two racing pods gets the last GPU", results)
            loser = [r for r in results if not r.get("NodeNames")]
            s.check(loser and not loser[0].get("Error") and g.failed_reason(loser[0], "n1"),
                    "the other is told why n1 does not fit", results)
            s.check_eq(sorted(n for n in ("r1", "r2") if c.annotations(n).get("gpu-admission.io/node")), winners,
                       "only the winner carries a decision")
            c.delete_pod(winners[0])
            s.require(g.wait_until(lambda: reserved(srv) == 0, SETTLE_S), "the winner's deletion frees the GPU",
                      srv.cores())

            # The winner's write fails with 500: its reservation goes, the GPU is free again.
            c.sim.fail(500, count=1, path=r"/pods/r3$", method="PATCH", message="apisim: injected 500")
            w, l = race(s, c, srv, "r3", "r4")
            s.check("500" in (w.get("Error") or "") or "injected" in (w.get("Error") or ""),
                    "the failed write is the winner's Error", w)
            s.check(not l.get("NodeNames") and g.failed_reason(l, "n1"),
                    "the other pod lost while the reservation held the GPU", l)
            s.check(g.wait_until(lambda: reserved(srv) == 0, 5), "after the failed write the GPU is free again",
                    srv.cores())
            s.check_eq(c.annotations("r3").get("gpu-admission.io/node"), None, "nothing was written for r3")
            r = srv.filter(c.get_pod("r4"), ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "the other pod now gets the GPU", r)
            c.delete_pod("r4")
            s.require(g.wait_until(lambda: reserved(srv) == 0, SETTLE_S), "r4's deletion frees the GPU",
                      srv.cores())

            # 409 on every attempt: the same.
            c.sim.clear_faults()
            c.sim.delay(DELAY_MS, count=1, path=r"/pods/r3$", method="PATCH")
            c.sim.fail(409, count=10, path=r"/pods/r3$", method="PATCH")
            w, l = race(s, c, srv, "r3", "r5")
            s.check("kept changing" in (w.get("Error") or ""), "409 on every attempt is the winner's Error", w)
            s.check(not l.get("NodeNames"), "the other pod lost meanwhile", l)
            s.check(g.wait_until(lambda: reserved(srv) == 0, 5), "after the conflicts the GPU is free again",
                    srv.cores())
            c.sim.clear_faults()
            r = srv.filter(c.get_pod("r5"), ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "and the other pod gets it", r)


@suite.test
def test_second_request_for_a_pod_in_progress(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        c.create_pod(g.pod("twice", g.vcuda(30, 8)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            c.sim.delay(1500, path=POD_PATCH, method="PATCH")
            pod = c.get_pod("twice")
            mark = c.last_seq()
            out = {}
            t = threading.Thread(target=lambda: out.setdefault("first", srv.filter(pod, ["n1"])))
            t.start()
            s.require(g.wait_until(lambda: sum(srv.cores()["n1"]) == 30, 5, interval=0.02),
                      "the first decision's reservation shows", srv.cores())
            t0 = time.monotonic()
            second = srv.filter(pod, ["n1"])
            quick = time.monotonic() - t0
            s.check("a decision for pod default/twice is in progress; retry" in (second.get("Error") or ""),
                    "the second request is told to retry", second)
            s.check(quick < 1.0, "at once, not after the first one's write", "%.2fs" % quick)
            t.join(30)
            s.check_eq(out.get("first", {}).get("NodeNames"), ["n1"], "the first request decides", out)
            patches = [r for r in c.requests_since(mark) if r["method"] == "PATCH"]
            s.check_eq(len(patches), 1, "one decision was written")
            c.sim.clear_faults()
            mark = c.last_seq()
            third = srv.filter(pod, ["n1"])
            s.check_eq(third.get("NodeNames"), ["n1"], "the retry finds the decision", third)
            s.check_eq([r for r in c.requests_since(mark) if r["method"] == "PATCH"], [], "and writes nothing")


def decisions_accepted(srv):
    """Decisions running or queued for a worker, from /metrics."""
    samples, _, _ = g.parse_metrics(srv.metrics().text)
    return int(g.metric(samples, "gqa_decisions_running") + g.metric(samples, "gqa_decisions_queued"))


@suite.test
def test_sigterm_while_decisions_wait(s):
    """SIGTERM while decisions wait on the API server, two running on the 2 workers (held at a gate in their
    PATCH) and four queued for one: the drain answers every accepted request, no connection is left
    suspended, and the process exits 0. A queued decision is taken, or, when it waited past the 2 s a
    decision may wait for a worker (a loaded machine), answered with that Error and not taken."""
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 4))
        names = ["t-%d" % i for i in range(6)]
        for n in names:
            c.create_pod(g.pod(n, g.vcuda(10, 4)))
        srv = g.LiveServer(s, c.kubeconfig(), ["--decision-workers", "2"])
        srv.start()
        try:
            pods = [c.get_pod(n) for n in names]
            gate = c.sim.gate(path=POD_PATCH, method="PATCH")
            out = {}

            def run(p):
                try:
                    out[p["metadata"]["name"]] = srv.filter(p, ["n1"])
                except Exception as e:  # noqa: BLE001 - recorded as the answer
                    out[p["metadata"]["name"]] = {"exception": repr(e)}

            threads = [threading.Thread(target=run, args=(p,)) for p in pods]
            for t in threads:
                t.start()
            # Two run (each waits at the gate in its PATCH), four wait for a worker.
            gated_together(s, c, gate, 2, "decisions (one per worker)")
            # Every request is accepted (running or queued) before the signal: one still on its way in
            # would meet a closed listener, which is the drain working, not a lost decision.
            s.require(g.wait_until(lambda: decisions_accepted(srv) == len(names), GATE_WAIT_S, interval=0.02),
                      "all six decisions are accepted (2 running, 4 queued)", srv.metrics().text[-1500:])
            srv.signal()
            # The gate opens only once the server is draining, so every decision finishes inside the drain.
            s.require(g.wait_until(lambda: "finishing in-flight requests" in srv.stderr(), GATE_WAIT_S),
                      "the server starts its drain", srv.stderr()[-2000:])
            c.sim.open_gate(gate)
            for t in threads:
                t.join(60)
            decided = sorted(n for n, r in out.items() if r.get("NodeNames") == ["n1"])
            waited = sorted(n for n, r in out.items() if "waited more than" in (r.get("Error") or ""))
            s.check_eq(sorted(decided + waited), names, "every accepted decision was answered during the drain", out)
            s.check(len(decided) >= 2, "the two running decisions were taken", out)
            for n in waited:
                s.check_eq(c.annotations(n).get("gpu-admission.io/node"), None, "%s, not taken, wrote nothing" % n)
            for n in decided:
                s.check_eq(c.annotations(n).get("gpu-admission.io/node"), "n1", "%s's decision was written" % n)
            s.check(srv.wait_exit(30) == 0, "the server exits 0 after the drain", srv.stderr()[-2000:])
        finally:
            srv.stop()


if __name__ == "__main__":
    suite.main()
