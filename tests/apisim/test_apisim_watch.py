#!/usr/bin/env python3
"""apisim: watch semantics (replay, initial events, bookmarks, timeouts, 410, selector transitions, framing)."""
import json
import os
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

TOKEN = "w"


def new_sim(**kw):
    kw.setdefault("tokens", [TOKEN])
    sim = apisim.APISim(**kw).start()
    return sim, apisim.Client(sim.url, token=TOKEN)


def pod(name, node=None, labels=None):
    p = {"metadata": {"name": name, "labels": labels or {}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    if node:
        p["spec"]["nodeName"] = node
    return p


def rv_of(obj):
    return int(obj["metadata"]["resourceVersion"])


def quiet(w, secs=0.3):
    """True if nothing arrives on the watch for secs."""
    try:
        ev = w.next(secs)
    except socket.timeout:
        return True
    raise AssertionError("unexpected event %r" % (ev,))


def summary(evs):
    return [(e["type"], e["object"]["metadata"].get("name"), rv_of(e["object"])) for e in evs]


def test_replay_from_resource_version():
    sim, c = new_sim()
    try:
        P = "/api/v1/namespaces/default/pods"
        a = c.post(P, pod("a")).json
        start = rv_of(a)
        b = c.post(P, pod("b")).json
        a2 = c.patch(P + "/a", {"metadata": {"annotations": {"k": "v"}}}).json
        d = c.delete(P + "/b").json
        c.post("/api/v1/nodes", {"metadata": {"name": "n"}})  # other resource: not in this watch
        w = c.watch(P, resourceVersion=str(start), timeoutSeconds="1")
        assert w.status == 200 and w.headers.get("Transfer-Encoding") == "chunked"
        assert w.headers["Content-Type"] == "application/json"
        evs = w.events(10, timeout=3)
        # DELETED carries the deletion's RV; the DELETE answer carried the last stored state
        assert summary(evs) == [("ADDED", "b", rv_of(b)), ("MODIFIED", "a", rv_of(a2)),
                                ("DELETED", "b", rv_of(a2) + 1)], summary(evs)
        assert rv_of(d) == rv_of(b)
        assert evs[0]["object"]["kind"] == "Pod" and evs[0]["object"]["apiVersion"] == "v1"
        assert evs[1]["object"]["metadata"]["annotations"] == {"k": "v"}
        assert w.ended == "clean"
        # a watch from the current RV sees only what follows
        now = c.get(P).json["metadata"]["resourceVersion"]
        w = c.watch(P, resourceVersion=now, timeoutSeconds="2")
        cnew = c.post(P, pod("c")).json
        ev = w.next(3)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "c" and rv_of(ev["object"]) == rv_of(cnew)
        w.close()
    finally:
        sim.stop()


def test_initial_events_for_rv_zero_and_absent():
    sim, c = new_sim()
    try:
        P = "/api/v1/namespaces/default/pods"
        for n in ("x", "y"):
            c.post(P, pod(n))
        c.post("/api/v1/namespaces/other/pods", pod("z"))
        for params in ({"resourceVersion": "0"}, {}):
            w = c.watch(P, timeoutSeconds="2", **params)
            evs = w.events(2, timeout=3)
            assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "x"), ("ADDED", "y")]
            c.patch(P + "/x", {"metadata": {"labels": {"n": str(time.time())}}})
            ev = w.next(3)
            assert ev["type"] == "MODIFIED" and ev["object"]["metadata"]["name"] == "x"
            w.close()
        # all namespaces
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="5")
        assert sorted(e["object"]["metadata"]["name"] for e in w.events(3, timeout=3)) == ["x", "y", "z"]
        assert quiet(w)
        w.close()
    finally:
        sim.stop()


def test_bookmarks():
    sim, c = new_sim(bookmark_interval=0.3)
    try:
        P = "/api/v1/nodes"
        n = c.post(P, {"metadata": {"name": "n1"}}).json
        w = c.watch(P, resourceVersion=n["metadata"]["resourceVersion"], allowWatchBookmarks="true", timeoutSeconds="2")
        t0 = time.time()
        ev = w.next(3)
        assert ev == {"type": "BOOKMARK", "object": {"kind": "Node", "apiVersion": "v1",
                                                     "metadata": {"resourceVersion": n["metadata"]["resourceVersion"]}}}, ev
        assert 0.2 <= time.time() - t0 < 1.5
        # the bookmark RV follows the global RV, even for changes to other resources
        cm = c.post("/api/v1/namespaces/d/configmaps", {"metadata": {"name": "cm"}}).json
        ev = w.next(3)
        assert ev["type"] == "BOOKMARK" and ev["object"]["metadata"]["resourceVersion"] == cm["metadata"]["resourceVersion"]
        w.close()
        # no bookmarks unless asked for
        w = c.watch(P, resourceVersion=cm["metadata"]["resourceVersion"], timeoutSeconds="1")
        assert w.events(5, timeout=3) == [] and w.ended == "clean"
        # interval can be changed at runtime
        sim.configure(bookmark_interval=0.1)
        t0 = time.time()
        w = c.watch(P, resourceVersion="0", allowWatchBookmarks="1", timeoutSeconds="5")
        evs = w.events(6, timeout=3)
        assert evs[0]["type"] == "ADDED" and [e["type"] for e in evs[1:]] == ["BOOKMARK"] * 5, summary(evs)
        assert time.time() - t0 < 2.0
        w.close()
    finally:
        sim.stop()


def test_timeout_seconds_ends_stream():
    sim, c = new_sim()
    try:
        t0 = time.time()
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="1")
        assert w.next(5) is None and w.ended == "clean"
        el = time.time() - t0
        assert 0.9 <= el < 2.0, el
        assert sim.watch_count() == 0
        # request log marks the watch
        r = [x for x in sim.requests() if x["watch"]][-1]
        assert r["status"] == 200 and r["params"]["timeoutSeconds"] == "1"
    finally:
        sim.stop()


def test_410_after_compaction_and_trim():
    sim, c = new_sim(history_size=5)
    try:
        P = "/api/v1/namespaces/default/configmaps"
        first = c.post(P, {"metadata": {"name": "cm0"}}).json
        c.post(P, {"metadata": {"name": "cm1"}})
        # still in history: fine
        w = c.watch(P, resourceVersion=first["metadata"]["resourceVersion"], timeoutSeconds="5")
        assert [e["type"] for e in w.events(1, 3)] == ["ADDED"] and quiet(w, 0.2)
        w.close()
        compacted = sim.compact()
        w = c.watch(P, resourceVersion=first["metadata"]["resourceVersion"], timeoutSeconds="5")
        assert w.status == 200
        ev = w.next(3)
        assert ev["type"] == "ERROR", ev
        st = ev["object"]
        assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired" and st["status"] == "Failure"
        assert st["message"].startswith("too old resource version: %s (%d)" % (first["metadata"]["resourceVersion"], compacted)), st
        assert w.next(3) is None and w.ended == "clean"  # the stream ends after the error
        # the compacted RV itself is still fine
        w = c.watch(P, resourceVersion=str(compacted), timeoutSeconds="5")
        assert quiet(w, 0.2)
        w.close()
        # physical history bound: more than history_size events behind is too old as well
        start = c.get(P).json["metadata"]["resourceVersion"]
        for i in range(8):
            c.post(P, {"metadata": {"name": "x%d" % i}})
        w = c.watch(P, resourceVersion=start, timeoutSeconds="1")
        assert w.next(3)["object"]["code"] == 410
        # a plain exact list from there: HTTP 410
        r = c.get(P + "?resourceVersionMatch=Exact&resourceVersion=" + start)
        assert r.status == 410 and r.json["reason"] == "Expired"
    finally:
        sim.stop()


def test_field_selector_transitions():
    sim, c = new_sim()
    try:
        P = "/api/v1/namespaces/default/pods"
        c.post(P, pod("p", node="n1"))
        sim.set_pod_phase("default", "p", "Running")
        before = c.get(P + "/p").json
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="3",
                    fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
        assert w.next(3)["type"] == "ADDED"
        after = sim.set_pod_phase("default", "p", "Succeeded")
        ev = w.next(3)
        # no longer matching: DELETED, carrying the last matching content with the new RV
        assert ev["type"] == "DELETED", ev
        assert ev["object"]["status"]["phase"] == "Running"
        assert ev["object"]["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]
        assert ev["object"]["metadata"]["uid"] == before["metadata"]["uid"]
        # changes while not matching are not sent; becoming a match again is ADDED
        c.patch(P + "/p", {"metadata": {"labels": {"ignored": "1"}}})
        sim.set_pod_phase("default", "p", "Running")
        ev = w.next(3)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["labels"] == {"ignored": "1"}, ev
        w.close()
        # binding makes an unbound pod leave "spec.nodeName=" and enter "spec.nodeName=n2"
        c.post(P, pod("u"))
        wu = c.watch(P, resourceVersion="0", timeoutSeconds="3", fieldSelector="spec.nodeName=")
        wb = c.watch(P, resourceVersion="0", timeoutSeconds="3", fieldSelector="spec.nodeName=n2")
        assert wu.next(3)["object"]["metadata"]["name"] == "u"
        r = c.post(P + "/u/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "u"},
                                      "target": {"kind": "Node", "name": "n2"}})
        assert r.status == 201
        ev = wu.next(3)
        assert ev["type"] == "DELETED" and ev["object"]["metadata"]["name"] == "u" and not ev["object"]["spec"].get("nodeName")
        ev = wb.next(3)
        assert ev["type"] == "ADDED" and ev["object"]["spec"]["nodeName"] == "n2"
        # label selector transitions work the same way
        wl = c.watch(P, resourceVersion="0", timeoutSeconds="3", labelSelector="team=a")
        c.patch(P + "/u", {"metadata": {"labels": {"team": "a"}}})
        assert wl.next(3)["type"] == "ADDED"
        c.patch(P + "/u", {"metadata": {"labels": {"team": "b"}}})
        assert wl.next(3)["type"] == "DELETED"
        # a real deletion is DELETED too, and nothing for an object that never matched
        c.delete(P + "/p")
        ev = wb.next(3)
        assert ev is None or ev["object"]["metadata"]["name"] != "p"
    finally:
        sim.stop()


def test_namespaces_and_other_resources():
    sim, c = new_sim()
    try:
        w1 = c.watch("/api/v1/namespaces/ns1/configmaps", resourceVersion="0", timeoutSeconds="2")
        wl = c.watch("/apis/coordination.k8s.io/v1/namespaces/ns1/leases", resourceVersion="0", timeoutSeconds="2")
        wn = c.watch("/api/v1/nodes", resourceVersion="0", timeoutSeconds="2")
        assert sim.wait_for_watches(3)
        assert sim.watch_count("nodes") == 1
        c.post("/api/v1/namespaces/ns2/configmaps", {"metadata": {"name": "other"}})
        c.post("/api/v1/namespaces/ns1/configmaps", {"metadata": {"name": "mine"}})
        c.post("/apis/coordination.k8s.io/v1/namespaces/ns1/leases", {"metadata": {"name": "l"}, "spec": {}})
        c.post("/api/v1/nodes", {"metadata": {"name": "n"}})
        ev = w1.next(3)
        assert ev["object"]["metadata"]["name"] == "mine", ev
        ev = wl.next(3)
        assert ev["object"]["kind"] == "Lease" and ev["object"]["apiVersion"] == "coordination.k8s.io/v1"
        assert wn.next(3)["object"]["metadata"]["name"] == "n"
        assert quiet(w1)  # nothing else for ns1
    finally:
        sim.stop()


def test_legacy_watch_paths():
    sim, c = new_sim()
    try:
        c.post("/api/v1/namespaces/d/pods", pod("one"))
        c.post("/api/v1/namespaces/d/pods", pod("two"))
        w = c.watch("/api/v1/watch/namespaces/d/pods/two", resourceVersion="0", timeoutSeconds="5")
        assert [e["object"]["metadata"]["name"] for e in w.events(1, 3)] == ["two"] and quiet(w, 0.2)
        w = c.watch("/api/v1/namespaces/d/pods/one", resourceVersion="0", timeoutSeconds="5")
        assert [e["object"]["metadata"]["name"] for e in w.events(1, 3)] == ["one"] and quiet(w, 0.2)
        w = c.watch("/api/v1/watch/pods", resourceVersion="0", timeoutSeconds="5")
        assert len(w.events(2, 3)) == 2 and quiet(w, 0.2)
    finally:
        sim.stop()


def test_raw_chunked_framing_and_keepalive():
    sim, c = new_sim()
    try:
        c.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
        s = socket.create_connection((sim.host, sim.port))
        f = s.makefile("rb")
        s.sendall(b"GET /api/v1/nodes?watch=true&resourceVersion=0&timeoutSeconds=1 HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: Bearer w\r\n\r\n")
        assert f.readline().startswith(b"HTTP/1.1 200")
        hdrs = {}
        while True:
            h = f.readline()
            if h == b"\r\n":
                break
            k, v = h.decode().split(":", 1)
            hdrs[k.lower()] = v.strip()
        assert hdrs["transfer-encoding"] == "chunked" and "content-length" not in hdrs
        chunks = []
        while True:
            size = int(f.readline().strip(), 16)
            data = f.read(size)
            assert f.read(2) == b"\r\n"
            if size == 0:
                break
            chunks.append(data)
        assert len(chunks) == 1 and chunks[0].endswith(b"\n")
        ev = json.loads(chunks[0])
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "n1"
        # the connection is reusable after a watch ended by timeout
        s.sendall(b"GET /api/v1/nodes/n1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer w\r\n\r\n")
        assert f.readline().startswith(b"HTTP/1.1 200")
        s.close()
        # events split over many small chunks (fault option) still parse
        sim.configure(watch_chunk_size=7)
        w = c.watch("/api/v1/nodes", resourceVersion="0", timeoutSeconds="5")
        ev = w.next(3)
        assert ev["object"]["metadata"]["name"] == "n1"
        w.close()
    finally:
        sim.stop()


def test_client_disconnect_and_concurrent_writes():
    sim, c = new_sim()
    try:
        w = c.watch("/api/v1/namespaces/d/configmaps", resourceVersion="0", timeoutSeconds="30")
        assert sim.wait_for_watches(1)
        w.close()
        deadline = time.time() + 10
        while sim.watch_count() and time.time() < deadline:
            time.sleep(0.05)
        assert sim.watch_count() == 0, "watcher not noticed gone"
        # many writers, one watcher: every event exactly once, in RV order
        w = c.watch("/api/v1/namespaces/d/configmaps", resourceVersion="0", timeoutSeconds="10")

        def writer(k):
            cc = apisim.Client(sim.url, token=TOKEN)
            for i in range(40):
                cc.post("/api/v1/namespaces/d/configmaps", {"metadata": {"name": "w%d-%d" % (k, i)}})
        ts = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        evs = w.events(160, timeout=5)
        for t in ts:
            t.join()
        rvs = [rv_of(e["object"]) for e in evs]
        assert len(evs) == 160 and rvs == sorted(rvs) and len(set(rvs)) == 160
        assert len({e["object"]["metadata"]["name"] for e in evs}) == 160
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
