#!/usr/bin/env python3
"""apisim: fault injection, in-process and through the /_sim control endpoint."""
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

TOKEN = "f"


def new_sim(**kw):
    kw.setdefault("tokens", [TOKEN])
    sim = apisim.APISim(**kw).start()
    return sim, apisim.Client(sim.url, token=TOKEN)


def test_fail_next_n_requests():
    sim, c = new_sim()
    try:
        sim.fail(500, count=2)
        r = c.get("/api/v1/nodes")
        assert r.status == 500 and r.json["reason"] == "InternalError" and r.json["kind"] == "Status", r
        assert r.json["code"] == 500
        assert c.get("/api/v1/pods").status == 500
        assert c.get("/api/v1/nodes").status == 200
        assert sim.active_faults() == []
        # only for some paths and methods
        sim.fail(503, count=5, path=r"^/api/v1/nodes", method="GET")
        assert c.get("/api/v1/pods").status == 200
        assert c.post("/api/v1/nodes", {"metadata": {"name": "n"}}).status == 201
        r = c.get("/api/v1/nodes/n")
        assert r.status == 503 and r.json["reason"] == "ServiceUnavailable"
        assert sim.active_faults()[0]["count"] == 4
        sim.clear_faults()
        assert c.get("/api/v1/nodes/n").status == 200
        # failures can target watches only
        sim.fail(500, count=1, watch=True)
        assert c.get("/api/v1/nodes").status == 200
        w = c.watch("/api/v1/nodes", resourceVersion="0")
        assert w.status == 500
        w.close()
        # any status: a 409 Conflict for the next PATCH (drives retry-on-conflict code)
        sim.fail(409, count=1, method="PATCH")
        r = c.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}})
        assert r.status == 409 and r.json["reason"] == "Conflict"
        assert c.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}}).status == 200
        # injected failures still require authentication first
        sim.fail(500, count=1)
        assert c.get("/api/v1/nodes", token="bad").status == 401
        assert c.get("/api/v1/nodes").status == 500
    finally:
        sim.stop()


def test_fail_for_one_user():
    sim, c = new_sim(tokens=[TOKEN, "other-token"])
    try:
        other = apisim.Client(sim.url, token="other-token")
        sim.fail(403, path="^/api/v1/pods$", user="token:othe...")
        assert c.get("/api/v1/pods").status == 200
        r = other.get("/api/v1/pods")
        assert r.status == 403 and r.json["reason"] == "Forbidden", r
        assert other.get("/api/v1/nodes").status == 200
        assert [f["user"] for f in sim.active_faults()] == ["token:othe..."]
    finally:
        sim.stop()


def test_list_garbage():
    sim, c = new_sim()
    try:
        c.post("/api/v1/namespaces/kube-public/configmaps", {"metadata": {"name": "good"}})
        sim.add_list_garbage("configmaps", {"metadata": {"namespace": "kube-public"}}, ns="kube-public")
        sim.add_list_garbage("configmaps", 42)
        items = c.get("/api/v1/namespaces/kube-public/configmaps").json["items"]
        assert [i.get("metadata", {}).get("name") if isinstance(i, dict) else i for i in items] == \
            ["good", None, 42], items
        # only the namespace it was added for (or every one), and only lists
        assert c.get("/api/v1/namespaces/default/configmaps").json["items"] == [42]
        assert c.get("/api/v1/namespaces/kube-public/configmaps/good").status == 200
        assert len(c.get("/api/v1/configmaps").json["items"]) == 3
        assert c.get("/api/v1/nodes").json["items"] == []
        sim.clear_faults()
        assert len(c.get("/api/v1/namespaces/kube-public/configmaps").json["items"]) == 1
        sim.add_list_garbage("nodes", {"kind": "Node"})
        sim.reset()
        assert c.get("/api/v1/nodes").json["items"] == []
        # through the control endpoint
        sim.control({"op": "list_garbage", "resource": "pods", "item": "x"})
        assert c.get("/api/v1/pods").json["items"] == ["x"]
    finally:
        sim.stop()


def test_fail_for_seconds_and_429():
    sim, c = new_sim()
    try:
        sim.fail(429, seconds=0.4, retry_after=2, path="/api/v1/pods")
        r = c.get("/api/v1/pods")
        assert r.status == 429 and r.headers["Retry-After"] == "2"
        assert r.json["reason"] == "TooManyRequests" and r.json["details"]["retryAfterSeconds"] == 2
        assert c.get("/api/v1/nodes").status == 200
        assert c.get("/api/v1/pods").status == 429
        time.sleep(0.45)   # time must pass: the rule lasts 0.4 s; any delay beyond only helps
        assert c.get("/api/v1/pods").status == 200
        sim.fail(500, message="etcdserver: request timed out", count=1)
        assert c.get("/api/v1/pods").json["message"] == "etcdserver: request timed out"
    finally:
        sim.stop()


def test_delay():
    sim, c = new_sim()
    try:
        sim.delay(600, count=1, path="/api/v1/nodes")
        t0 = time.time()
        assert c.get("/api/v1/pods").status == 200
        assert time.time() - t0 < 0.4
        t0 = time.time()
        assert c.get("/api/v1/nodes").status == 200
        assert time.time() - t0 >= 0.59
        t0 = time.time()
        assert c.get("/api/v1/nodes").status == 200
        assert time.time() - t0 < 0.4
        # delay for a time window, combined with a client timeout
        sim.delay(1500, seconds=5)
        slow = apisim.Client(sim.url, token=TOKEN, timeout=0.3)
        try:
            slow.get("/api/v1/nodes")
        except socket.timeout:
            pass
        else:
            raise AssertionError("expected the client to time out")
        sim.clear_faults()
    finally:
        sim.stop()


def test_drop_and_expire_watches():
    sim, c = new_sim()
    try:
        ws = [c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="30") for _ in range(2)]
        assert sim.wait_for_watches(2)
        sim.drop_watches()  # abrupt: connection cut, no terminating chunk
        for w in ws:
            assert w.next(3) is None and w.ended == "error", w.ended
        assert sim.wait_for_watches(0) or sim.watch_count() == 0
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="30")
        assert sim.wait_for_watches(1)
        sim.drop_watches(graceful=True)
        assert w.next(3) is None and w.ended == "clean"
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="30")
        assert sim.wait_for_watches(1)
        sim.expire_watches()
        ev = w.next(3)
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired"
        assert w.next(3) is None and w.ended == "clean"
        # new watches work after a drop
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="30")
        sim.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, ns="d")
        assert w.next(3)["type"] == "ADDED"
        w.close()
    finally:
        sim.stop()


def test_compaction_fault():
    sim, c = new_sim()
    try:
        old = c.get("/api/v1/pods").json["metadata"]["resourceVersion"]
        c.post("/api/v1/nodes", {"metadata": {"name": "n"}})
        r = apisim.Client(sim.url).post("/_sim/faults", {"op": "compact"})
        compacted = r.json["results"][0]["compactedResourceVersion"]
        assert int(compacted) > int(old)
        ev = c.watch("/api/v1/pods", resourceVersion=old, timeoutSeconds="5").next(3)
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
        # watches from the compacted RV or later are fine; relist + watch from the list RV works
        lst = c.get("/api/v1/pods").json
        w = c.watch("/api/v1/pods", resourceVersion=lst["metadata"]["resourceVersion"], timeoutSeconds="5")
        sim.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, ns="d")
        assert w.next(3)["type"] == "ADDED"
        w.close()
    finally:
        sim.stop()


def test_down_and_up():
    sim, c = new_sim()
    try:
        port = sim.port
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="30")
        assert sim.wait_for_watches(1)
        sim.down()
        assert not sim.is_up
        assert w.next(3) is None and w.ended == "error"
        try:
            apisim.Client(sim.url, token=TOKEN).get("/healthz")
        except ConnectionRefusedError:
            pass
        else:
            raise AssertionError("expected connection refused while down")
        # keep-alive connections were cut too
        try:
            r = c.get("/api/v1/pods")
        except (ConnectionError, OSError):
            pass
        else:
            raise AssertionError("old connection answered while down: %r" % r)
        sim.up()
        assert sim.port == port and c.get("/api/v1/pods").status == 200
        # down for a while, then back by itself
        sim.down(seconds=0.4)
        t0 = time.time()
        while True:
            try:
                if apisim.Client(sim.url, token=TOKEN).get("/healthz").status == 200:
                    break
            except ConnectionRefusedError:
                pass
            assert time.time() - t0 < 30, "did not come back"
            time.sleep(0.05)
        assert time.time() - t0 >= 0.35   # not before its time (no upper bound: a loaded machine is slow)
    finally:
        sim.stop()


def test_down_at_start():
    sim = apisim.APISim(tokens=[TOKEN])
    sim.start(down_seconds=0.4)
    try:
        assert sim.port != 0 and not sim.is_up
        try:
            apisim.Client(sim.url).get("/healthz")
        except ConnectionRefusedError:
            pass
        else:
            raise AssertionError("should be down at start")
        t0 = time.time()
        while not sim.is_up and time.time() - t0 < 3:
            time.sleep(0.05)
        assert apisim.Client(sim.url, token=TOKEN).get("/api/v1/nodes").status == 200
    finally:
        sim.stop()


def test_control_endpoint():
    sim, c = new_sim(state=[{"kind": "Node", "metadata": {"name": "initial"}}])
    try:
        ctl = apisim.Client(sim.url)  # control needs no token and is never faulted or logged
        r = ctl.post("/_sim/faults", [{"op": "fail", "status": 500, "count": 1, "path": "^/api/v1/pods$"},
                                      {"op": "delay", "ms": 10, "count": 3}])
        assert r.status == 200 and len(r.json["results"]) == 2
        faults = ctl.get("/_sim/faults").json["items"]
        assert [f["kind"] for f in faults] == ["fail", "delay"] and faults[0]["status"] == 500
        assert c.get("/api/v1/pods").status == 500
        assert c.get("/api/v1/pods").status == 200
        assert ctl.delete("/_sim/faults").status == 200 and ctl.get("/_sim/faults").json["items"] == []
        assert ctl.post("/_sim/faults", {"op": "bogus"}).status == 400
        assert ctl.post("/_sim/faults", {"op": "fail", "bogus": 1}).status == 400
        # request log
        ctl.delete("/_sim/requests")
        c.patch("/api/v1/nodes/initial", {"metadata": {"annotations": {"a": "b"}}})
        c.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
        items = ctl.get("/_sim/requests").json["items"]
        assert [(x["method"], x["path"], x["status"]) for x in items] == [
            ("PATCH", "/api/v1/nodes/initial", 200), ("GET", "/api/v1/pods", 200)], items
        assert items[0]["contentType"] == "application/merge-patch+json"
        assert items[1]["query"] == "fieldSelector=spec.nodeName%3Dn1"
        assert items[1]["params"] == {"fieldSelector": "spec.nodeName=n1"}
        since = items[0]["seq"]
        assert [x["method"] for x in ctl.get("/_sim/requests?since=%d" % since).json["items"]] == ["GET"]
        # watches
        w = c.watch("/api/v1/nodes", resourceVersion="0", labelSelector="a=b", timeoutSeconds="30")
        assert sim.wait_for_watches(1)
        ws = ctl.get("/_sim/watches").json
        assert ws["count"] == 1 and ws["items"][0]["resource"] == "nodes" and ws["items"][0]["labelSelector"] == "a=b"
        ctl.post("/_sim/faults", {"op": "drop_watches"})
        assert w.next(3) is None
        # objects: raw upsert and dump
        r = ctl.post("/_sim/objects", {"kind": "List", "items": [
            {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "raw", "namespace": "x"},
             "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}]})
        assert r.status == 200
        assert c.get("/api/v1/namespaces/x/pods/raw").json["status"]["phase"] == "Running"
        dump = ctl.get("/_sim/objects").json
        assert sorted(o["metadata"]["name"] for o in dump["items"]) == ["initial", "raw"]
        st = ctl.get("/_sim/state").json
        assert st["up"] is True and st["resourceVersion"] == dump["metadata"]["resourceVersion"]
        # settings
        r = ctl.post("/_sim/faults", {"op": "settings", "bookmark_interval": 0.2})
        assert r.json["results"][0]["settings"]["bookmark_interval"] == 0.2
        assert ctl.post("/_sim/faults", {"op": "settings", "nope": 1}).status == 400
        # reset: initial objects back, faults and log gone, old RVs too old
        old_rv = dump["metadata"]["resourceVersion"]
        ctl.post("/_sim/faults", [{"op": "fail", "count": 100}, {"op": "expire_token", "token": TOKEN}])
        assert c.get("/api/v1/nodes").status == 401
        assert ctl.post("/_sim/reset", {}).status == 200
        assert ctl.get("/_sim/requests").json["items"] == []
        lst = c.get("/api/v1/pods").json
        assert lst["items"] == [] and int(lst["metadata"]["resourceVersion"]) > int(old_rv)
        assert [n["metadata"]["name"] for n in c.get("/api/v1/nodes").json["items"]] == ["initial"]
        ev = c.watch("/api/v1/nodes", resourceVersion=old_rv, timeoutSeconds="5").next(3)
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
        assert ctl.get("/_sim/nothing").status == 404
        # down through the control endpoint on the main port, with automatic return
        # Polled, not slept: it goes down 50 ms after the answer and stays
        # down a second, long enough not to be missed on a loaded machine.
        ctl.post("/_sim/faults", {"op": "down", "seconds": 1.0})
        t0 = time.time()
        while sim.is_up and time.time() - t0 < 10:
            time.sleep(0.01)
        assert not sim.is_up
        t0 = time.time()
        while not sim.is_up and time.time() - t0 < 10:
            time.sleep(0.05)
        assert c.get("/api/v1/nodes", fresh=True).status == 200
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
