#!/usr/bin/env python3
"""apisim: watch events held back (hold_watches / release_watches), in-process and through /_sim/faults.

While a hold covers a resource, writes happen and lists show them, but open and new watches of that
resource send nothing except bookmarks; when the hold ends they send everything they missed, in order.
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

TOKEN = "h"
BOOKMARK_S = 0.2  # bookmarks are the heartbeat: a socket timeout would end the stream for good
PODS = "/api/v1/namespaces/default/pods"


def new_sim(**kw):
    kw.setdefault("tokens", [TOKEN])
    kw.setdefault("bookmark_interval", BOOKMARK_S)
    sim = apisim.APISim(**kw).start()
    return sim, apisim.Client(sim.url, token=TOKEN)


def pod(name):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def rv_of(obj):
    return int(obj["metadata"]["resourceVersion"])


def next_event(w, timeout):
    """The next event that is not a bookmark, or None when timeout passes first. Needs a watch with
    allowWatchBookmarks on a simulator with bookmark_interval BOOKMARK_S."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ev = w.next(BOOKMARK_S * 10)
        if ev is None or ev["type"] != "BOOKMARK":
            return ev
    return None


def watch(c, path, **params):
    return c.watch(path, allowWatchBookmarks="true", timeoutSeconds="30", **params)


def test_hold_then_release_delivers_in_order():
    sim, c = new_sim()
    try:
        start = int(c.get(PODS).json["metadata"]["resourceVersion"])
        w = watch(c, PODS, resourceVersion=str(start))
        assert sim.wait_for_watches(1)
        hid = sim.hold_watches("pods")
        assert isinstance(hid, int)
        a = c.post(PODS, pod("a")).json
        c.patch(PODS + "/a", {"metadata": {"labels": {"x": "1"}}})
        c.post(PODS, pod("b"))
        # Writes happened: reads and lists show them at once.
        assert sorted(p["metadata"]["name"] for p in c.get(PODS).json["items"]) == ["a", "b"]
        assert c.get(PODS + "/a").json["metadata"]["labels"] == {"x": "1"}
        # The watch sends nothing while held.
        assert next_event(w, 0.8) is None, "an event was sent during the hold"
        sim.release_watches()
        evs = [next_event(w, 3) for _ in range(3)]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
            ("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b")], evs
        assert rv_of(evs[0]["object"]) == rv_of(a)
        # Released: live events flow again at once.
        c.post(PODS, pod("c"))
        ev = next_event(w, 3)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "c", ev
        w.close()
    finally:
        sim.stop()


def test_hold_covers_one_resource_and_keeps_bookmarks():
    sim, c = new_sim()
    try:
        pw = watch(c, PODS, resourceVersion="0")
        nw = watch(c, "/api/v1/nodes", resourceVersion="0")
        assert sim.wait_for_watches(2)
        held_at = int(c.get(PODS).json["metadata"]["resourceVersion"])
        sim.hold_watches("pods")
        c.post(PODS, pod("p"))
        c.post("/api/v1/nodes", {"metadata": {"name": "n"}})
        ev = next_event(nw, 3)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "n", "nodes are not held: %r" % (ev,)
        # The held pods watch stays alive with bookmarks that do not move past what it has sent.
        for _ in range(2):
            bm = pw.next(3)
            assert bm["type"] == "BOOKMARK", "only bookmarks during the hold, got %r" % (bm,)
            assert rv_of(bm["object"]) <= held_at, bm
        assert sim.active_holds() and sim.active_holds()[0]["resource"] == "pods"
        sim.release_watches("pods")
        ev = next_event(pw, 3)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "p", ev
        assert sim.active_holds() == []
        pw.close()
        nw.close()
    finally:
        sim.stop()


def test_hold_for_seconds_ends_by_itself():
    sim, c = new_sim()
    try:
        w = watch(c, PODS, resourceVersion="0")
        assert sim.wait_for_watches(1)
        t0 = time.monotonic()
        sim.hold_watches(seconds=0.6)  # every resource
        c.post(PODS, pod("late"))
        ev = next_event(w, 5)
        took = time.monotonic() - t0
        assert ev is not None and ev["object"]["metadata"]["name"] == "late", ev
        assert took >= 0.55, "delivered after %.2fs, during the hold" % took
        assert sim.active_holds() == []
        w.close()
    finally:
        sim.stop()


def test_watch_started_during_hold_waits_too():
    sim, c = new_sim()
    try:
        c.post(PODS, pod("before"))
        sim.hold_watches("pods")
        c.post(PODS, pod("during"))
        fresh = watch(c, PODS, resourceVersion="0")  # initial ADDED events wait as well
        assert sim.wait_for_watches(1)
        assert next_event(fresh, 0.6) is None, "a new watch sent events during the hold"
        sim.release_watches()
        names = [next_event(fresh, 3)["object"]["metadata"]["name"] for _ in range(2)]
        assert sorted(names) == ["before", "during"], names
        fresh.close()
    finally:
        sim.stop()


def test_control_ops_and_reset():
    sim, c = new_sim()
    try:
        ctl = apisim.Client(sim.url)
        r = ctl.post("/_sim/faults", {"op": "hold_watches", "resource": "pods"})
        assert r.status == 200 and isinstance(r.json["results"][0]["id"], int), r.json
        assert ctl.get("/_sim/state").json["holds"][0]["resource"] == "pods"
        assert ctl.post("/_sim/faults", {"op": "hold_watches", "resource": "nope"}).status == 400
        assert ctl.post("/_sim/faults", {"op": "release_watches"}).status == 200
        assert ctl.get("/_sim/state").json["holds"] == []
        sim.hold_watches()
        sim.reset()
        assert sim.active_holds() == [], "reset ends every hold"
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
