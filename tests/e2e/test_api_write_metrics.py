#!/usr/bin/env python3
"""gqa_api_writes_total (issue 27 item 2): every write to the API server is
counted by what it writes and how it ended, so a decision the API server
refuses (broken RBAC: 403) is visible in metrics and not only in a log line.

The service runs live against the API simulator, which is told to refuse
some writes (tests/apisim: POST /_sim/faults); /metrics must then show the
refused writes under their result, and the successful ones under ok.

Standalone: python3 test_api_write_metrics.py --binary PATH --source-dir REPO
"""
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("api-write-metrics")

RESULTS = ("ok", "conflict", "forbidden", "not_found", "invalid", "timeout", "error")
WRITES = ("decision_patch", "binding", "clear", "hami_phase", "hami_lock", "hami_handshake", "leader_label")


def writes(text):
    """{(write, result): value} from the exposition text."""
    out = {}
    for m in re.finditer(r'^gqa_api_writes_total\{write="([a-z_]+)",result="([a-z_]+)"\} (\d+)$', text, re.M):
        out[(m.group(1), m.group(2))] = int(m.group(3))
    return out


@suite.test
def every_write_and_result_is_exported(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            have = writes(srv.metrics().text)
    for w in WRITES:
        for r in RESULTS:
            s.check((w, r) in have, "gqa_api_writes_total{write=%r,result=%r} is exported" % (w, r))
    s.check(all(v == 0 for v in have.values()), "no write was made before any decision", have)


@suite.test
def refused_decision_patches_are_counted(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 4))
        for name in ("fine", "denied", "gone", "bad"):
            c.create_pod(g.pod(name, g.vcuda(30, 8)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            c.sim.fail(403, path=r"/pods/denied$", method="PATCH", message='pods "denied" is forbidden')
            c.sim.fail(404, path=r"/pods/gone$", method="PATCH", message='pods "gone" not found')
            c.sim.fail(422, path=r"/pods/bad$", method="PATCH", message="admission webhook denied the request")
            answers = {}
            for name in ("fine", "denied", "gone", "bad"):
                answers[name] = srv.filter(c.get_pod(name), ["n1"])
            have = writes(srv.metrics().text)
    s.check_eq(answers["fine"].get("NodeNames"), ["n1"], "the pod whose decision is written fits", answers["fine"])
    for name in ("denied", "gone", "bad"):
        s.check(not answers[name].get("NodeNames"), "the pod %s whose write is refused gets no node" % name,
                answers[name])
    s.check_eq(have.get(("decision_patch", "ok")), 1, "one decision written", have)
    s.check_eq(have.get(("decision_patch", "forbidden")), 1, "the 403 counts as forbidden", have)
    s.check_eq(have.get(("decision_patch", "not_found")), 1, "the 404 counts as not_found", have)
    s.check_eq(have.get(("decision_patch", "invalid")), 1, "the 422 counts as invalid", have)


@suite.test
def refused_bindings_are_counted(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        for name in ("b1", "b2", "b3"):
            c.create_pod(g.pod(name, g.vcuda(50, 16)))
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "bind"]) as srv:
            c.sim.fail(403, path=r"/pods/b2/binding$", method="POST", message="pods/binding is forbidden")
            c.sim.fail(500, path=r"/pods/b3/binding$", method="POST", message="apisim: etcd is down")
            errors = {}
            for name in ("b1", "b2", "b3"):
                r = srv.post_json("/scheduler/bind", {"PodName": name, "PodNamespace": "default",
                                                      "PodUID": c.get_pod(name)["metadata"]["uid"], "Node": "n1"})
                errors[name] = r.get("Error") or ""
            have = writes(srv.metrics().text)
    s.check_eq(errors["b1"], "", "the first bind succeeds", errors)
    s.check(errors["b2"] and errors["b3"], "the refused binds answer Error", errors)
    s.check_eq(have.get(("binding", "ok")), 1, "one Binding written", have)
    s.check_eq(have.get(("binding", "forbidden")), 1, "the 403 counts as forbidden", have)
    s.check_eq(have.get(("binding", "error")), 1, "the 500 counts as error", have)


@suite.test
def unanswered_write_counts_as_timeout(s):
    """A decision patch without an answer within the recorder's deadline (3 s):
    result timeout, not error."""
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        c.create_pod(g.pod("slow", g.vcuda(30, 8)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            c.sim.delay(6000, count=1, path=r"/pods/slow$", method="PATCH")
            srv.filter(c.get_pod("slow"), ["n1"])
            have = writes(srv.metrics().text)
    s.check_eq(have.get(("decision_patch", "timeout")), 1, "the unanswered patch counts as timeout", have)
    s.check_eq(have.get(("decision_patch", "error")), 0, "not as error", have)


if __name__ == "__main__":
    suite.main()
