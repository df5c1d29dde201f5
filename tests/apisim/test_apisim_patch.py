#!/usr/bin/env python3
"""apisim: JSON merge patch, strategic merge patch (subset), JSON patch, resourceVersion preconditions."""
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402
from apisim import json_patch, merge_patch, strategic_merge_patch, ApiError  # noqa: E402

TOKEN = "p"
P = "/api/v1/namespaces/default/pods"


def new_sim(**kw):
    kw.setdefault("tokens", [TOKEN])
    sim = apisim.APISim(**kw).start()
    c = apisim.Client(sim.url, token=TOKEN)
    r = c.post(P, {"metadata": {"name": "p", "labels": {"app": "a"}, "annotations": {"keep": "1", "drop": "2"}},
                   "spec": {"containers": [{"name": "c1", "image": "i1"}, {"name": "c2", "image": "i2"}]}})
    assert r.status == 201
    return sim, c, r.json


def test_merge_patch_rfc7386_examples():
    # the examples of RFC 7386 appendix A (facts about the algorithm)
    cases = [({"a": "b"}, {"a": "c"}, {"a": "c"}), ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
             ({"a": "b"}, {"a": None}, {}), ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
             ({"a": ["b"]}, {"a": "c"}, {"a": "c"}), ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
             ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
             ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}), (["a", "b"], ["c", "d"], ["c", "d"]),
             ({"a": "b"}, ["c"], ["c"]), ({"a": "foo"}, None, None), ({"a": "foo"}, "bar", "bar"),
             ({"e": None}, {"a": 1}, {"e": None, "a": 1}), ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
             ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}})]
    for target, patch, want in cases:
        assert merge_patch(target, patch) == want, (target, patch)


def test_strategic_merge_subset():
    orig = {"metadata": {"annotations": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c1", "image": "i1", "env": [{"name": "E", "value": "1"}]},
                                    {"name": "c2", "image": "i2"}],
                     "tolerations": [{"key": "k1"}], "sel": {"k": "v", "z": "1"}},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Other", "status": "True"}]}}
    out = strategic_merge_patch(orig, {
        "metadata": {"annotations": {"a": None, "c": "3"}, "finalizers": ["y"]},
        "spec": {"containers": [{"name": "c2", "image": "i2b"}, {"name": "c3", "image": "i3"},
                                {"name": "c1", "env": [{"name": "F", "value": "2"}]}],
                 "tolerations": [{"key": "k2"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert out["metadata"]["annotations"] == {"b": "2", "c": "3"}
    assert out["metadata"]["finalizers"] == ["x", "y"]  # primitive list merged
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [("c1", "i1"), ("c2", "i2b"), ("c3", "i3")]
    assert out["spec"]["containers"][0]["env"] == [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]
    assert out["spec"]["tolerations"] == [{"key": "k2"}]  # no merge key: replaced
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "True"}]
    assert orig["metadata"]["annotations"] == {"a": "1", "b": "2"}  # input untouched
    # directives
    out = strategic_merge_patch(orig, {"spec": {"containers": [{"name": "c1", "$patch": "delete"}],
                                                "sel": {"$patch": "replace", "only": "this"}}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["c2"] and out["spec"]["sel"] == {"only": "this"}
    out = strategic_merge_patch(orig, {"spec": {"containers": [{"name": "n", "image": "x"}, {"$patch": "replace"}]}})
    assert out["spec"]["containers"] == [{"name": "n", "image": "x"}]
    out = strategic_merge_patch(orig, {"spec": {"sel": {"$patch": "delete"}}})
    assert "sel" not in out["spec"]
    out = strategic_merge_patch(orig, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}})
    assert out["metadata"]["finalizers"] == []
    out = strategic_merge_patch(orig, {"spec": {"$setElementOrder/containers": [{"name": "c2"}, {"name": "c1"}],
                                                "containers": [{"name": "c2", "image": "z"}]}})
    assert [c["image"] for c in out["spec"]["containers"]] == ["i1", "z"]
    out = strategic_merge_patch(orig, {"spec": {"sel": {"$retainKeys": ["k"], "k": "w"}}})
    assert out["spec"]["sel"] == {"k": "w"}
    try:
        strategic_merge_patch(orig, {"spec": {"containers": [{"image": "no-name"}]}})
    except ApiError as e:
        assert e.code == 400
    else:
        raise AssertionError("merge key missing must fail")


def test_json_patch_ops():
    doc = {"metadata": {"annotations": {"a/b": "1", "t~x": "2"}}, "list": [1, 2, 3]}
    out = json_patch(doc, [
        {"op": "add", "path": "/metadata/annotations/tencent.com~1predicate-node", "value": "n1"},
        {"op": "remove", "path": "/metadata/annotations/a~1b"},
        {"op": "replace", "path": "/metadata/annotations/t~0x", "value": "3"},
        {"op": "add", "path": "/list/1", "value": 9},
        {"op": "add", "path": "/list/-", "value": 4},
        {"op": "remove", "path": "/list/0"},
        {"op": "copy", "from": "/list", "path": "/copy"},
        {"op": "move", "from": "/copy", "path": "/moved"},
        {"op": "test", "path": "/moved/0", "value": 9},
    ])
    assert out == {"metadata": {"annotations": {"tencent.com/predicate-node": "n1", "t~x": "3"}},
                   "list": [9, 2, 3, 4], "moved": [9, 2, 3, 4]}, out
    assert doc["list"] == [1, 2, 3]
    for bad in ([{"op": "test", "path": "/list/0", "value": 2}], [{"op": "remove", "path": "/nope"}],
                [{"op": "replace", "path": "/nope", "value": 1}], [{"op": "add", "path": "/x/y", "value": 1}],
                [{"op": "test", "path": "/list/0", "value": True}]):  # 1 is not true in JSON
        try:
            json_patch({"list": [1]}, bad)
        except ApiError as e:
            assert e.code == 422, (bad, e.code)
        else:
            raise AssertionError("expected failure for %r" % bad)
    for bad in ({"op": "add"}, [{"op": "frobnicate", "path": "/a"}], [{"op": "add", "path": "/a"}]):
        try:
            json_patch({}, bad)
        except ApiError as e:
            assert e.code == 400, (bad, e.code)
        else:
            raise AssertionError("expected 400 for %r" % (bad,))


def test_merge_patch_over_http():
    sim, c, p = new_sim()
    try:
        rv0 = int(p["metadata"]["resourceVersion"])
        r = c.patch(P + "/p", {"metadata": {"annotations": {"tencent.com/predicate-node": "n1", "drop": None}}})
        assert r.status == 200, r
        assert r.json["metadata"]["annotations"] == {"keep": "1", "tencent.com/predicate-node": "n1"}
        assert int(r.json["metadata"]["resourceVersion"]) == rv0 + 1
        # merge patch replaces lists whole: containers list without c2 is a spec change -> refused for pods
        r = c.patch(P + "/p", {"spec": {"containers": [{"name": "c1", "image": "x"}]}})
        assert r.status == 422
        # resourceVersion in the patch is a precondition
        cur = r = c.get(P + "/p").json["metadata"]["resourceVersion"]
        r = c.patch(P + "/p", {"metadata": {"resourceVersion": cur, "labels": {"v": "1"}}})
        assert r.status == 200 and r.json["metadata"]["labels"] == {"app": "a", "v": "1"}
        r = c.patch(P + "/p", {"metadata": {"resourceVersion": cur, "labels": {"v": "2"}}})
        assert r.status == 409 and r.json["reason"] == "Conflict" and r.json["kind"] == "Status"
        assert 'Operation cannot be fulfilled on pods "p"' in r.json["message"]
        assert c.get(P + "/p").json["metadata"]["labels"]["v"] == "1"
        # a no-op patch does not bump the RV
        now = c.get(P + "/p").json["metadata"]["resourceVersion"]
        r = c.patch(P + "/p", {"metadata": {"labels": {"v": "1"}}})
        assert r.status == 200 and r.json["metadata"]["resourceVersion"] == now
        # status via the main resource is ignored; via /status it applies
        r = c.patch(P + "/p", {"status": {"phase": "Running"}})
        assert r.json["status"]["phase"] == "Pending"
        r = c.patch(P + "/p/status", {"status": {"phase": "Running"}})
        assert r.json["status"]["phase"] == "Running"
        # errors
        r = c.patch(P + "/nope", {"metadata": {}})
        assert r.status == 404 and r.json["reason"] == "NotFound"
        r = c.patch(P + "/p", b"[1,2]", ptype="merge")
        assert r.status == 400
        r = c.patch(P + "/p", b"{bad", ptype="merge")
        assert r.status == 400
        r = c.request("PATCH", P + "/p", {"metadata": {}}, content_type="application/json")
        assert r.status == 415 and r.json["reason"] == "UnsupportedMediaType"
        r = c.request("PATCH", P + "/p", b"metadata: {}", content_type="application/apply-patch+yaml")
        assert r.status == 415
        log = [x for x in sim.requests() if x["method"] == "PATCH"]
        assert log[0]["contentType"] == "application/merge-patch+json" and log[0]["status"] == 200
        assert '"tencent.com/predicate-node"' in log[0]["body"]
    finally:
        sim.stop()


def test_strategic_patch_over_http():
    sim, c, p = new_sim()
    try:
        r = c.patch(P + "/p", {"metadata": {"annotations": {"x": "y", "keep": None}, "labels": {"l": "2"}},
                               "spec": {"containers": [{"name": "c2", "image": "i2-new"}]}}, ptype="strategic")
        assert r.status == 200, r
        assert r.json["metadata"]["annotations"] == {"drop": "2", "x": "y"}
        assert r.json["metadata"]["labels"] == {"app": "a", "l": "2"}
        assert [(x["name"], x["image"]) for x in r.json["spec"]["containers"]] == [("c1", "i1"), ("c2", "i2-new")]
        rv = r.json["metadata"]["resourceVersion"]
        r = c.patch(P + "/p", {"metadata": {"resourceVersion": "1", "labels": {"l": "3"}}}, ptype="strategic")
        assert r.status == 409
        r = c.patch(P + "/p", {"metadata": {"resourceVersion": rv, "labels": {"l": "3"}}}, ptype="strategic")
        assert r.status == 200
        # node conditions merge by type through nodes/status
        c.post("/api/v1/nodes", {"metadata": {"name": "n"}, "status": {"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]}})
        r = c.patch("/api/v1/nodes/n/status", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                    ptype="strategic")
        assert r.json["status"]["conditions"] == [{"type": "Ready", "status": "False"},
                                                  {"type": "MemoryPressure", "status": "False"}]
    finally:
        sim.stop()


def test_json_patch_over_http():
    sim, c, p = new_sim()
    try:
        rv = p["metadata"]["resourceVersion"]
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
               {"op": "add", "path": "/metadata/annotations/gpu-admission.io~1node", "value": "n1"},
               {"op": "remove", "path": "/metadata/annotations/drop"}]
        r = c.patch(P + "/p", ops, ptype="json")
        assert r.status == 200, r
        assert r.json["metadata"]["annotations"] == {"keep": "1", "gpu-admission.io/node": "n1"}
        # the same test op now fails: 422
        r = c.patch(P + "/p", ops, ptype="json")
        assert r.status == 422 and r.json["reason"] == "Invalid" and r.json["kind"] == "Status"
        # replacing resourceVersion with a stale value is a precondition failure: 409
        r = c.patch(P + "/p", [{"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
                               {"op": "add", "path": "/metadata/labels/z", "value": "1"}], ptype="json")
        assert r.status == 409 and r.json["reason"] == "Conflict"
        r = c.patch(P + "/p", {"op": "add"}, ptype="json")
        assert r.status == 400
        assert c.get(P + "/p").json["metadata"]["annotations"]["gpu-admission.io/node"] == "n1"
    finally:
        sim.stop()


def test_patch_events():
    sim, c, p = new_sim()
    try:
        w = c.watch(P, resourceVersion=p["metadata"]["resourceVersion"], timeoutSeconds="5")
        c.patch(P + "/p", {"metadata": {"annotations": {"k": "1"}}})
        c.patch(P + "/p", {"metadata": {"annotations": {"k": "1"}}})  # no-op: no event
        c.patch(P + "/p", {"metadata": {"annotations": {"k": "2"}}}, ptype="strategic")
        evs = w.events(2, 3)
        assert [(e["type"], e["object"]["metadata"]["annotations"]["k"]) for e in evs] == [("MODIFIED", "1"), ("MODIFIED", "2")]
        assert int(evs[1]["object"]["metadata"]["resourceVersion"]) == int(evs[0]["object"]["metadata"]["resourceVersion"]) + 1
        w.close()
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
