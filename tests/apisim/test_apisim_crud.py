#!/usr/bin/env python3
"""apisim: discovery, create/get/list/update/delete, resourceVersion and list semantics."""
import json
import os
import socket
import sys
import tempfile
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

TOKEN = "crud-token"


def pod(name, ns="default", labels=None, node=None, **extra):
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    if node:
        p["spec"]["nodeName"] = node
    p.update(extra)
    return p


def new_sim(**kw):
    kw.setdefault("tokens", [TOKEN])
    sim = apisim.APISim(**kw).start()
    return sim, apisim.Client(sim.url, token=TOKEN)


def assert_status(r, code, reason, msg_part=None):
    assert r.status == code, (r.status, r.body)
    st = r.json
    assert st["kind"] == "Status" and st["apiVersion"] == "v1", st
    assert st["status"] == "Failure" and st["code"] == code and st["reason"] == reason, st
    assert st["metadata"] == {}, st
    if msg_part:
        assert msg_part in st["message"], st["message"]
    assert r.headers["Content-Type"] == "application/json"
    return st


def test_discovery():
    sim, c = new_sim()
    try:
        r = c.get("/api")
        assert r.status == 200 and r.json["kind"] == "APIVersions" and r.json["versions"] == ["v1"]
        r = c.get("/api/v1")
        names = {x["name"] for x in r.json["resources"]}
        assert {"nodes", "pods", "pods/binding", "pods/status", "configmaps", "nodes/status"} <= names, names
        r = c.get("/apis")
        assert r.json["kind"] == "APIGroupList"
        assert "coordination.k8s.io" in [g["name"] for g in r.json["groups"]], r.json
        r = c.get("/apis/coordination.k8s.io/v1")
        assert [x["name"] for x in r.json["resources"]] == ["leases"]
        r = c.get("/version", token="")
        assert r.status == 200 and r.json["major"] == "1" and r.json["gitVersion"].startswith("v1.")
        r = c.get("/healthz", token="")
        assert r.status == 200 and r.body == b"ok"
        assert_status(c.get("/api/v1/widgets"), 404, "NotFound", "could not find the requested resource")
        assert_status(c.get("/apis/batch/v1/jobs"), 404, "NotFound")
        assert_status(c.post("/api/v1/pods", pod("x")), 405, "MethodNotAllowed")
    finally:
        sim.stop()


def test_create_get_delete_pod():
    sim, c = new_sim()
    try:
        r = c.post("/api/v1/namespaces/default/pods", pod("p1", labels={"app": "a"}))
        assert r.status == 201, r
        p = r.json
        assert p["kind"] == "Pod" and p["apiVersion"] == "v1"
        m = p["metadata"]
        assert m["namespace"] == "default" and len(m["uid"]) == 36 and m["creationTimestamp"].endswith("Z")
        rv1 = int(m["resourceVersion"])
        r = c.get("/api/v1/namespaces/default/pods/p1")
        assert r.status == 200 and r.json == p
        st = assert_status(c.post("/api/v1/namespaces/default/pods", pod("p1")), 409, "AlreadyExists",
                           'pods "p1" already exists')
        assert st["details"] == {"name": "p1", "kind": "pods"}, st
        r = c.delete("/api/v1/namespaces/default/pods/p1")
        assert r.status == 200 and r.json["kind"] == "Pod" and r.json["metadata"]["name"] == "p1", r
        assert int(r.json["metadata"]["resourceVersion"]) == rv1  # last stored state
        assert int(c.get("/api/v1/pods").json["metadata"]["resourceVersion"]) == rv1 + 1  # the deletion took an RV
        st = assert_status(c.get("/api/v1/namespaces/default/pods/p1"), 404, "NotFound", 'pods "p1" not found')
        assert st["details"] == {"name": "p1", "kind": "pods"}
        assert_status(c.delete("/api/v1/namespaces/default/pods/p1"), 404, "NotFound")
        # same name in another namespace is another object
        assert c.post("/api/v1/namespaces/other/pods", pod("p1", ns="other")).status == 201
        assert_status(c.get("/api/v1/namespaces/default/pods/p1"), 404, "NotFound")
    finally:
        sim.stop()


def test_global_resource_version():
    sim, c = new_sim(initial_rv=500)
    try:
        rvs = []
        rvs.append(c.post("/api/v1/nodes", {"metadata": {"name": "n1"}}).json["metadata"]["resourceVersion"])
        rvs.append(c.post("/api/v1/namespaces/kube-system/configmaps",
                          {"metadata": {"name": "q"}, "data": {"a": "1"}}).json["metadata"]["resourceVersion"])
        rvs.append(c.post("/api/v1/namespaces/default/pods", pod("p")).json["metadata"]["resourceVersion"])
        assert [int(x) for x in rvs] == [501, 502, 503], rvs
        for path in ("/api/v1/nodes", "/api/v1/pods", "/api/v1/namespaces/kube-system/configmaps"):
            lst = c.get(path).json
            assert lst["metadata"]["resourceVersion"] == "503", lst["metadata"]
            assert len(lst["items"]) == 1
            # list items carry no kind/apiVersion, as from the real server
            assert "kind" not in lst["items"][0] and "apiVersion" not in lst["items"][0]
        assert c.get("/api/v1/nodes").json["kind"] == "NodeList"
        assert c.get("/api/v1/namespaces/default/configmaps").json == {
            "kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "503"}, "items": []}
        # the object's RV is that of its last change
        r = c.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"x": "y"}}})
        assert r.json["metadata"]["resourceVersion"] == "504"
        assert c.get("/api/v1/nodes/n1").json["metadata"]["resourceVersion"] == "504"
        assert c.get("/api/v1/namespaces/default/pods/p").json["metadata"]["resourceVersion"] == "503"
    finally:
        sim.stop()


def test_pod_create_rules():
    sim, c = new_sim()
    try:
        p = pod("p1", status={"phase": "Running"})
        r = c.post("/api/v1/namespaces/default/pods", p)
        assert r.json["status"] == {"phase": "Pending"}, r.json  # status is reset on create
        assert r.json["spec"]["schedulerName"] == "default-scheduler"
        bad = pod("p2")
        bad["spec"]["containers"] = []
        st = assert_status(c.post("/api/v1/namespaces/default/pods", bad), 422, "Invalid", "spec.containers")
        assert st["details"]["causes"][0]["field"] == "spec.containers"
        bad = pod("p2")
        del bad["spec"]["containers"][0]["image"]
        assert_status(c.post("/api/v1/namespaces/default/pods", bad), 422, "Invalid", "image")
        withrv = pod("p3")
        withrv["metadata"]["resourceVersion"] = "5"
        assert_status(c.post("/api/v1/namespaces/default/pods", withrv), 500, "InternalError",
                      "resourceVersion should not be set")
        gen = pod("")
        gen["metadata"]["generateName"] = "worker-"
        r = c.post("/api/v1/namespaces/default/pods", gen)
        assert r.status == 201 and r.json["metadata"]["name"].startswith("worker-") and len(r.json["metadata"]["name"]) == 12
        assert_status(c.post("/api/v1/namespaces/default/pods", pod("")), 422, "Invalid", "name or generateName")
        assert_status(c.post("/api/v1/namespaces/default/pods", pod("Bad_Name")), 422, "Invalid")
        assert_status(c.post("/api/v1/namespaces/default/pods", pod("p4", ns="other")), 400, "BadRequest",
                      "namespace of the provided object does not match")
        wrongkind = pod("p5")
        wrongkind["kind"] = "Node"
        assert_status(c.post("/api/v1/namespaces/default/pods", wrongkind), 400, "BadRequest", "kind")
        assert_status(c.post("/api/v1/namespaces/default/pods", b"{not json"), 400, "BadRequest")
        assert_status(c.post("/api/v1/namespaces/default/pods", pod("p6"),
                             content_type="application/x-www-form-urlencoded"), 415, "UnsupportedMediaType")
        # content type with charset parameter is fine
        assert c.post("/api/v1/namespaces/default/pods", pod("p7"),
                      content_type="application/json; charset=utf-8").status == 201
    finally:
        sim.stop()


def test_put_update_and_conflict():
    sim, c = new_sim()
    try:
        cm = c.post("/api/v1/namespaces/ns/configmaps", {"metadata": {"name": "cm"}, "data": {"a": "1"}}).json
        rv = cm["metadata"]["resourceVersion"]
        cm["data"]["a"] = "2"
        r = c.put("/api/v1/namespaces/ns/configmaps/cm", cm)
        assert r.status == 200 and r.json["data"] == {"a": "2"} and int(r.json["metadata"]["resourceVersion"]) == int(rv) + 1
        assert r.json["metadata"]["uid"] == cm["metadata"]["uid"]
        # stale resourceVersion: 409 Conflict
        cm["data"]["a"] = "3"
        st = assert_status(c.put("/api/v1/namespaces/ns/configmaps/cm", cm), 409, "Conflict",
                           'Operation cannot be fulfilled on configmaps "cm": the object has been modified')
        assert st["details"] == {"name": "cm", "kind": "configmaps"}
        # no resourceVersion: unconditional update (configmaps allow it)
        del cm["metadata"]["resourceVersion"]
        r = c.put("/api/v1/namespaces/ns/configmaps/cm", cm)
        assert r.status == 200 and r.json["data"] == {"a": "3"}
        rv3 = r.json["metadata"]["resourceVersion"]
        # a no-op update does not change the resourceVersion
        r = c.put("/api/v1/namespaces/ns/configmaps/cm", r.json)
        assert r.status == 200 and r.json["metadata"]["resourceVersion"] == rv3
        assert_status(c.put("/api/v1/namespaces/ns/configmaps/nope", {"metadata": {"name": "nope"}}), 404, "NotFound")
        assert_status(c.put("/api/v1/namespaces/ns/configmaps/cm", dict(r.json, metadata={"name": "other"})),
                      400, "BadRequest", "does not match the name on the URL")
        # uid / creationTimestamp cannot be changed
        cur = c.get("/api/v1/namespaces/ns/configmaps/cm").json
        cur["metadata"]["uid"] = "forged"
        cur["data"] = {"b": "1"}
        r = c.put("/api/v1/namespaces/ns/configmaps/cm", cur)
        assert r.json["metadata"]["uid"] != "forged"
    finally:
        sim.stop()


def test_pod_update_strategy_and_status_subresource():
    sim, c = new_sim()
    try:
        p = c.post("/api/v1/namespaces/default/pods", pod("p")).json
        # PUT on the pod ignores status
        p["status"] = {"phase": "Running"}
        p["metadata"]["labels"] = {"l": "1"}
        r = c.put("/api/v1/namespaces/default/pods/p", p)
        assert r.status == 200 and r.json["status"]["phase"] == "Pending" and r.json["metadata"]["labels"] == {"l": "1"}
        # spec is immutable except a few fields (nodeName among the refused)
        q = r.json
        q["spec"]["nodeName"] = "n1"
        assert_status(c.put("/api/v1/namespaces/default/pods/p", q), 422, "Invalid", "pod updates may not change")
        assert_status(c.patch("/api/v1/namespaces/default/pods/p", {"spec": {"nodeName": "n1"}}), 422, "Invalid")
        r = c.patch("/api/v1/namespaces/default/pods/p", {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}},
                    ptype="strategic")
        assert r.status == 200 and r.json["spec"]["containers"][0]["image"] == "busybox:2"
        # status subresource changes status only
        s = c.get("/api/v1/namespaces/default/pods/p/status").json
        s["status"]["phase"] = "Running"
        s["metadata"]["labels"] = {"ignored": "yes"}
        r = c.put("/api/v1/namespaces/default/pods/p/status", s)
        assert r.status == 200 and r.json["status"]["phase"] == "Running" and r.json["metadata"]["labels"] == {"l": "1"}
        r = c.patch("/api/v1/namespaces/default/pods/p/status", {"status": {"phase": "Succeeded"}})
        assert r.json["status"]["phase"] == "Succeeded"
        assert c.get("/api/v1/namespaces/default/pods/p").json["status"]["phase"] == "Succeeded"
        assert_status(c.get("/api/v1/namespaces/default/pods/p/log"), 404, "NotFound")
        assert_status(c.get("/api/v1/namespaces/default/configmaps/x/status"), 404, "NotFound")
        # in-process helper
        sim.set_pod_phase("default", "p", "Failed")
        assert sim.get("pods", "p", "default")["status"]["phase"] == "Failed"
    finally:
        sim.stop()


def test_nodes_cluster_scoped():
    sim, c = new_sim()
    try:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {"gpu": "true"}},
                "status": {"capacity": {"tencent.com/vcuda-core": "800"},
                           "allocatable": {"tencent.com/vcuda-core": "800"}}}
        r = c.post("/api/v1/nodes", node)
        assert r.status == 201 and r.json["status"] == node["status"]  # node status may be set on create
        assert "namespace" not in r.json["metadata"]
        # PUT keeps status
        n = r.json
        n["status"] = {}
        n["metadata"]["annotations"] = {"a": "b"}
        r = c.put("/api/v1/nodes/gpu-1", n)
        assert r.json["status"] == node["status"] and r.json["metadata"]["annotations"] == {"a": "b"}
        r = c.delete("/api/v1/nodes/gpu-1")
        assert r.status == 200 and r.json["kind"] == "Status" and r.json["status"] == "Success", r.json
        assert r.json["details"]["name"] == "gpu-1" and r.json["details"]["kind"] == "nodes"
        assert_status(c.get("/api/v1/nodes/gpu-1"), 404, "NotFound", 'nodes "gpu-1" not found')
    finally:
        sim.stop()


def test_delete_options_and_collection():
    sim, c = new_sim()
    try:
        p = c.post("/api/v1/namespaces/default/pods", pod("p")).json
        assert_status(c.delete("/api/v1/namespaces/default/pods/p", {"preconditions": {"uid": "nope"}}),
                      409, "Conflict", "Precondition failed: UID")
        assert_status(c.delete("/api/v1/namespaces/default/pods/p", {"preconditions": {"resourceVersion": "1"}}),
                      409, "Conflict", "Precondition failed: ResourceVersion")
        assert c.delete("/api/v1/namespaces/default/pods/p",
                        {"preconditions": {"uid": p["metadata"]["uid"]}}).status == 200
        for i in range(4):
            c.post("/api/v1/namespaces/default/pods", pod("q%d" % i, labels={"del": "yes" if i % 2 else "no"}))
        r = c.delete("/api/v1/namespaces/default/pods?labelSelector=del%3Dyes")
        assert r.status == 200 and r.json["kind"] == "PodList"
        assert sorted(i["metadata"]["name"] for i in r.json["items"]) == ["q1", "q3"]
        assert sorted(o["metadata"]["name"] for o in sim.objects_of("pods")) == ["q0", "q2"]
        # graceful deletion of a bound pod, when enabled
        sim.configure(graceful_delete=True)
        c.post("/api/v1/namespaces/default/pods", pod("b", node="n1"))
        r = c.delete("/api/v1/namespaces/default/pods/b")
        assert r.status == 200 and r.json["metadata"]["deletionTimestamp"] and r.json["metadata"]["deletionGracePeriodSeconds"] == 30
        assert c.get("/api/v1/namespaces/default/pods/b").status == 200
        assert c.delete("/api/v1/namespaces/default/pods/b?gracePeriodSeconds=0").status == 200
        assert c.get("/api/v1/namespaces/default/pods/b").status == 404
        # unbound pods go at once
        assert c.delete("/api/v1/namespaces/default/pods/q0").status == 200
        assert c.get("/api/v1/namespaces/default/pods/q0").status == 404
    finally:
        sim.stop()


def test_list_limit_continue():
    sim, c = new_sim()
    try:
        for i in range(5):
            c.post("/api/v1/namespaces/ns/configmaps", {"metadata": {"name": "cm%d" % i}})
        r = c.get("/api/v1/namespaces/ns/configmaps?limit=2").json
        assert [i["metadata"]["name"] for i in r["items"]] == ["cm0", "cm1"]
        assert r["metadata"]["remainingItemCount"] == 3 and r["metadata"]["continue"]
        list_rv = r["metadata"]["resourceVersion"]
        # changes after the first page do not show up in later pages (consistent snapshot)
        c.delete("/api/v1/namespaces/ns/configmaps/cm3")
        c.post("/api/v1/namespaces/ns/configmaps", {"metadata": {"name": "cm5"}})
        names = [i["metadata"]["name"] for i in r["items"]]
        cont = r["metadata"]["continue"]
        while cont:
            r = c.get("/api/v1/namespaces/ns/configmaps?limit=2&continue=" + urllib.parse.quote(cont)).json
            assert r["metadata"]["resourceVersion"] == list_rv
            names += [i["metadata"]["name"] for i in r["items"]]
            cont = r["metadata"].get("continue")
        assert names == ["cm0", "cm1", "cm2", "cm3", "cm4"], names
        assert len(c.get("/api/v1/namespaces/ns/configmaps").json["items"]) == 5
        # limit is ignored with resourceVersion=0
        assert len(c.get("/api/v1/namespaces/ns/configmaps?limit=2&resourceVersion=0").json["items"]) == 5
        # bad token and RV together with continue
        assert_status(c.get("/api/v1/namespaces/ns/configmaps?limit=2&continue=garbage!"), 400, "BadRequest")
        first = c.get("/api/v1/namespaces/ns/configmaps?limit=2").json["metadata"]["continue"]
        assert_status(c.get("/api/v1/namespaces/ns/configmaps?resourceVersion=1&continue=" + first), 400, "BadRequest")
        # after compaction an old continue token is 410 Expired
        sim.compact()
        c.post("/api/v1/namespaces/ns/configmaps", {"metadata": {"name": "cm9"}})
        sim.compact()
        assert_status(c.get("/api/v1/namespaces/ns/configmaps?limit=2&continue=" + first), 410, "Expired",
                      "continue parameter is too old")
    finally:
        sim.stop()


def test_list_resource_version_semantics():
    sim, c = new_sim(too_large_rv_wait=0.3)
    try:
        rv_a = c.post("/api/v1/nodes", {"metadata": {"name": "a"}}).json["metadata"]["resourceVersion"]
        c.post("/api/v1/nodes", {"metadata": {"name": "b"}})
        c.patch("/api/v1/nodes/a", {"metadata": {"labels": {"v": "2"}}})
        # Exact: the state at that RV, rebuilt from history
        r = c.get("/api/v1/nodes?resourceVersion=%s&resourceVersionMatch=Exact" % rv_a).json
        assert r["metadata"]["resourceVersion"] == rv_a
        assert [(i["metadata"]["name"], i["metadata"].get("labels")) for i in r["items"]] == [("a", None)]
        # NotOlderThan (default without limit): current data
        cur = c.get("/api/v1/nodes").json["metadata"]["resourceVersion"]
        r = c.get("/api/v1/nodes?resourceVersion=%s" % rv_a).json
        assert r["metadata"]["resourceVersion"] == cur and len(r["items"]) == 2
        # RV in the future: waits, then 504 Timeout "Too large resource version"
        st = assert_status(c.get("/api/v1/nodes?resourceVersion=%d" % (int(cur) + 100)), 504, "Timeout",
                           "Too large resource version")
        assert st["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
        # after compaction: exact and limit-with-RV lists of an old RV are 410 Gone; NotOlderThan is fine
        sim.compact()
        c.post("/api/v1/nodes", {"metadata": {"name": "c"}})
        assert_status(c.get("/api/v1/nodes?resourceVersion=%s&resourceVersionMatch=Exact" % rv_a), 410, "Expired",
                      "too old")
        assert_status(c.get("/api/v1/nodes?resourceVersion=%s&limit=1" % rv_a), 410, "Expired")
        assert c.get("/api/v1/nodes?resourceVersion=%s" % rv_a).status == 200
        assert_status(c.get("/api/v1/nodes?resourceVersion=abc"), 400, "BadRequest")
        assert_status(c.get("/api/v1/nodes?resourceVersionMatch=Exact"), 422, "Invalid")
    finally:
        sim.stop()


def test_keepalive_and_chunked_request():
    sim, c = new_sim()
    try:
        s = socket.create_connection((sim.host, sim.port))
        f = s.makefile("rb")
        body = json.dumps({"metadata": {"name": "cm"}, "data": {"k": "v"}}).encode()
        chunked = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (5, body[:5], len(body) - 5, body[5:])
        reqs = [
            b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % TOKEN.encode(),
            b"POST /api/v1/namespaces/d/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" % TOKEN.encode() + chunked,
            b"GET /api/v1/namespaces/d/configmaps/cm HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer bad\r\n\r\n",
            b"GET /api/v1/namespaces/d/configmaps/cm HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % TOKEN.encode(),
        ]
        statuses = []
        for req in reqs:  # four requests, one after the other, on one connection
            s.sendall(req)
            line = f.readline()
            statuses.append(int(line.split()[1]))
            length = 0
            while True:
                h = f.readline()
                if h in (b"\r\n", b""):
                    break
                k, v = h.decode().split(":", 1)
                if k.lower() == "content-length":
                    length = int(v)
            data = f.read(length)
        assert statuses == [200, 201, 401, 200], statuses
        assert json.loads(data)["data"] == {"k": "v"}
        s.close()
    finally:
        sim.stop()


def test_state_file():
    with tempfile.TemporaryDirectory() as d:
        state = {"kind": "List", "apiVersion": "v1", "items": [
            {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}},
            {"kind": "PodList", "apiVersion": "v1", "items": [
                {"metadata": {"name": "running", "namespace": "team"}, "spec": {"nodeName": "n1", "containers": []},
                 "status": {"phase": "Running"}}]},
            {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "gpu-quota", "namespace": "kube-system"},
             "data": {"q": "1"}},
            {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
             "metadata": {"name": "l", "namespace": "kube-system"}, "spec": {"holderIdentity": "x"}},
        ]}
        path = os.path.join(d, "state.json")
        with open(path, "w") as f:
            json.dump(state, f)
        sim, c = new_sim(state=path)
        try:
            p = c.get("/api/v1/namespaces/team/pods/running").json
            assert p["status"]["phase"] == "Running" and p["spec"]["nodeName"] == "n1"  # loaded as is
            assert p["kind"] == "Pod" and p["metadata"]["uid"]
            assert c.get("/api/v1/nodes/n1").json["status"]["allocatable"] == {"cpu": "4"}
            assert c.get("/api/v1/namespaces/kube-system/configmaps/gpu-quota").json["data"] == {"q": "1"}
            assert c.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l").status == 200
            # the loaded objects are the reset point
            c.delete("/api/v1/nodes/n1")
            sim.reset()
            assert c.get("/api/v1/nodes/n1").status == 200
        finally:
            sim.stop()
        try:
            import yaml  # noqa: F401  (optional)
        except ImportError:
            return
        ypath = os.path.join(d, "state.yaml")
        with open(ypath, "w") as f:
            f.write("kind: Node\napiVersion: v1\nmetadata:\n  name: y1\n---\nkind: ConfigMap\napiVersion: v1\n"
                    "metadata:\n  name: c\n  namespace: x\ndata:\n  k: v\n")
        sim, c = new_sim(state=ypath)
        try:
            assert c.get("/api/v1/nodes/y1").status == 200
            assert c.get("/api/v1/namespaces/x/configmaps/c").json["data"] == {"k": "v"}
        finally:
            sim.stop()


def test_in_process_api():
    sim = apisim.APISim()  # no tokens, no client CA: anonymous access
    sim.start()
    try:
        sim.create("pods", pod("p"), ns="default")
        sim.upsert({"kind": "Node", "metadata": {"name": "n"}})
        assert [o["metadata"]["name"] for o in sim.objects_of("pods", "default")] == ["p"]
        c = apisim.Client(sim.url)
        assert c.get("/api/v1/nodes/n").json["metadata"]["name"] == "n"
        assert sim.requests()[-1]["user"] == "system:anonymous"
        hit = sim.wait_for_request(lambda r: r["path"] == "/api/v1/nodes/n", timeout=1)
        assert hit and hit["status"] == 200
        assert sim.wait_for_request(lambda r: r["method"] == "PATCH", timeout=0.2) is None
        try:
            sim.get("pods", "missing", "default")
        except apisim.ApiError as e:
            assert e.code == 404 and e.reason == "NotFound"
        else:
            raise AssertionError("expected 404")
        with tempfile.TemporaryDirectory() as d:
            kc = sim.write_kubeconfig(os.path.join(d, "kc"), token="abc")
            cfg = json.load(open(kc))
            assert cfg["clusters"][0]["cluster"]["server"] == sim.url and cfg["users"][0]["user"]["token"] == "abc"
    finally:
        sim.stop()



def test_delete_with_finalizers():
    """A DELETE marks an object with finalizers (deletionTimestamp) and keeps
    it; removing the last finalizer deletes it, as the API server does."""
    sim, c = new_sim()
    try:
        p = pod("held")
        p["metadata"]["finalizers"] = ["example.com/hold"]
        sim.create("pods", p, ns="default")
        body, code = sim.delete("pods", "held", ns="default")
        assert code == 200 and body["metadata"].get("deletionTimestamp"), body
        got = sim.get("pods", "held", "default")
        assert got["metadata"]["deletionTimestamp"] and got["metadata"]["finalizers"] == ["example.com/hold"], got
        again, _ = sim.delete("pods", "held", ns="default")
        assert again["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"], "a second DELETE changes nothing"
        sim.patch("pods", "held", "merge", {"metadata": {"finalizers": None}}, ns="default")
        try:
            sim.get("pods", "held", "default")
        except apisim.ApiError as e:
            assert e.code == 404, e
        else:
            raise AssertionError("the pod is gone once its last finalizer is removed")
    finally:
        sim.stop()


def test_list_bytes_follow_every_write():
    """A list is built from each object's cached encoding; every write,
    historic list and garbage item must still give exactly what encoding the
    list as a whole gives."""
    sim = apisim.APISim(tokens=[TOKEN], state=[pod("p%d" % i, labels={"k": "\u00e9"}) for i in range(6)])
    try:
        def same(params=None):
            got = sim.list_json("pods", None, params)
            assert got == apisim.dumps(sim.list("pods", None, params)), got[:300]
            return json.loads(got)
        rv0 = same()["metadata"]["resourceVersion"]
        sim.patch("pods", "p1", "merge", {"metadata": {"annotations": {"a": "b"}}}, ns="default")
        sim.delete("pods", "p2", ns="default")
        sim.create("pods", pod("p9"), ns="default")
        now = same()
        assert [p["metadata"]["name"] for p in now["items"]] == ["p0", "p1", "p3", "p4", "p5", "p9"], now
        assert now["items"][1]["metadata"]["annotations"] == {"a": "b"}, now["items"][1]
        old = same({"resourceVersion": rv0, "resourceVersionMatch": "Exact"})
        assert "annotations" not in old["items"][1]["metadata"] and len(old["items"]) == 6, old
        assert len(same({"limit": "2"})["items"]) == 2
        sim.add_list_garbage(apisim.resource_type("pods"), {"not": "an object"})
        assert same()["items"][-1] == {"not": "an object"}
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
