#!/usr/bin/env python3
"""apisim: pods/binding and coordination.k8s.io/v1 leases."""
import os
import sys
import threading

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

TOKEN = "b"
P = "/api/v1/namespaces/team/pods"
L = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


def new_sim(**kw):
    kw.setdefault("tokens", [TOKEN])
    sim = apisim.APISim(**kw).start()
    return sim, apisim.Client(sim.url, token=TOKEN)


def pod(name):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def binding(name, node, **meta):
    m = {"name": name}
    m.update(meta)
    return {"apiVersion": "v1", "kind": "Binding", "metadata": m, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def test_binding_sets_node_once():
    sim, c = new_sim()
    try:
        p = c.post(P, pod("gpu-pod")).json
        r = c.post(P + "/gpu-pod/binding", binding("gpu-pod", "node-a", annotations={"from-binding": "yes"}))
        assert r.status == 201, r
        assert r.json == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        got = c.get(P + "/gpu-pod").json
        assert got["spec"]["nodeName"] == "node-a"
        assert int(got["metadata"]["resourceVersion"]) == int(p["metadata"]["resourceVersion"]) + 1
        assert got["metadata"]["annotations"] == {"from-binding": "yes"}  # binding annotations are copied
        assert [x["type"] for x in got["status"]["conditions"]] == ["PodScheduled"]
        assert got["status"]["conditions"][0]["status"] == "True"
        # second bind: 409 Conflict, nodeName unchanged
        r = c.post(P + "/gpu-pod/binding", binding("gpu-pod", "node-b"))
        assert r.status == 409 and r.json["reason"] == "Conflict" and r.json["kind"] == "Status", r
        assert 'pod gpu-pod is already assigned to node "node-a"' in r.json["message"]
        assert c.get(P + "/gpu-pod").json["spec"]["nodeName"] == "node-a"
        # errors
        r = c.post(P + "/missing/binding", binding("missing", "node-a"))
        assert r.status == 404 and r.json["reason"] == "NotFound"
        c.post(P, pod("p2"))
        r = c.post(P + "/p2/binding", binding("other-name", "node-a"))
        assert r.status == 400
        r = c.post(P + "/p2/binding", {"metadata": {"name": "p2"}, "target": {}})
        assert r.status == 422
        r = c.post(P + "/p2/binding", binding("p2", "node-a", uid="not-the-uid"))
        assert r.status == 409 and "Precondition failed: UID" in r.json["message"]
        r = c.get(P + "/p2/binding")
        assert r.status == 405
        # the legacy bindings collection
        r = c.post("/api/v1/namespaces/team/bindings", binding("p2", "node-c"))
        assert r.status == 201 and c.get(P + "/p2").json["spec"]["nodeName"] == "node-c"
        # a terminating pod cannot be bound
        c.post(P, pod("p3"))
        p3 = sim.get("pods", "p3", "team")
        p3["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
        sim.upsert(p3)
        r = c.post(P + "/p3/binding", binding("p3", "node-a"))
        assert r.status == 409 and "being deleted" in r.json["message"]
    finally:
        sim.stop()


def test_concurrent_binds_one_wins():
    sim, c = new_sim()
    try:
        c.post(P, pod("race"))
        results = []

        def bind(node):
            cc = apisim.Client(sim.url, token=TOKEN)
            results.append((node, cc.post(P + "/race/binding", binding("race", node)).status))
        ts = [threading.Thread(target=bind, args=("n%d" % i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(s for _, s in results) == [201] + [409] * 7, results
        winner = [n for n, s in results if s == 201][0]
        assert c.get(P + "/race").json["spec"]["nodeName"] == winner
    finally:
        sim.stop()


def lease(name, holder, rv=None):
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "acquireTime": "2024-01-01T00:00:00.000000Z", "renewTime": "2024-01-01T00:00:00.000000Z",
                     "leaseTransitions": 0}}
    if rv:
        body["metadata"]["resourceVersion"] = rv
    return body


def test_lease_lifecycle_and_conflict():
    sim, c = new_sim()
    try:
        r = c.get(L + "/gqa-leader")
        assert r.status == 404 and r.json["message"] == 'leases.coordination.k8s.io "gqa-leader" not found'
        assert r.json["details"] == {"name": "gqa-leader", "group": "coordination.k8s.io", "kind": "leases"}
        r = c.post(L, lease("gqa-leader", "a"))
        assert r.status == 201 and r.json["apiVersion"] == "coordination.k8s.io/v1" and r.json["kind"] == "Lease"
        rv = r.json["metadata"]["resourceVersion"]
        r = c.post(L, lease("gqa-leader", "b"))
        assert r.status == 409 and r.json["reason"] == "AlreadyExists"
        assert r.json["message"] == 'leases.coordination.k8s.io "gqa-leader" already exists'
        # renew by a: update with the current RV
        body = c.get(L + "/gqa-leader").json
        body["spec"]["renewTime"] = "2024-01-01T00:00:05.000000Z"
        r = c.put(L + "/gqa-leader", body)
        assert r.status == 200 and int(r.json["metadata"]["resourceVersion"]) > int(rv)
        # b tries to take over with the stale RV: conflict
        r = c.put(L + "/gqa-leader", lease("gqa-leader", "b", rv=rv))
        assert r.status == 409 and r.json["reason"] == "Conflict"
        assert r.json["message"].startswith('Operation cannot be fulfilled on leases.coordination.k8s.io "gqa-leader"')
        assert c.get(L + "/gqa-leader").json["spec"]["holderIdentity"] == "a"
        # leases refuse unconditional updates
        r = c.put(L + "/gqa-leader", lease("gqa-leader", "b"))
        assert r.status == 422 and "must be specified for an update" in r.json["message"]
        # ... but allow create on update
        r = c.put(L + "/other", lease("other", "x"))
        assert r.status == 201 and r.json["spec"]["holderIdentity"] == "x"
        lst = c.get(L).json
        assert lst["kind"] == "LeaseList" and [i["metadata"]["name"] for i in lst["items"]] == ["gqa-leader", "other"]
        # merge patch works on leases too, with the RV precondition
        cur = c.get(L + "/gqa-leader").json["metadata"]["resourceVersion"]
        r = c.patch(L + "/gqa-leader", {"metadata": {"resourceVersion": cur}, "spec": {"holderIdentity": "b"}})
        assert r.status == 200 and r.json["spec"]["holderIdentity"] == "b"
        r = c.delete(L + "/other")
        assert r.status == 200 and r.json["status"] == "Success"
        assert c.get("/api/v1/namespaces/kube-system/leases").status == 404  # wrong group
    finally:
        sim.stop()


def test_lease_election_race():
    """Two candidates doing get / update-with-RV: exactly one wins each round."""
    sim, c = new_sim()
    try:
        c.post(L, lease("race", "nobody"))
        for rnd in range(5):
            cur = c.get(L + "/race").json
            wins = []

            def take(who, body):
                body = dict(body, spec=dict(body["spec"], holderIdentity=who))
                r = apisim.Client(sim.url, token=TOKEN).put(L + "/race", body)
                if r.status == 200:
                    wins.append(who)
                else:
                    assert r.status == 409, r
            ts = [threading.Thread(target=take, args=("cand%d-round%d" % (i, rnd), cur)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            assert len(wins) == 1, wins
            assert c.get(L + "/race").json["spec"]["holderIdentity"] == wins[0]
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
