#!/usr/bin/env python3
"""apisim: label and field selectors (parser, matching, lists and watches)."""
import os
import sys
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402
from apisim import ApiError, labels_match, parse_field_selector, parse_label_selector  # noqa: E402

PODS = apisim.resource_type("pods")


def expect_400(fn, *a):
    try:
        fn(*a)
    except ApiError as e:
        assert e.code == 400 and e.reason == "BadRequest", (e.code, e.reason)
        return e
    raise AssertionError("expected 400 for %r" % (a,))


def test_label_selector_parser():
    assert parse_label_selector("") == [] and parse_label_selector(None) == []
    assert parse_label_selector("a=b") == [("a", "=", ["b"])]
    assert parse_label_selector("a==b") == [("a", "=", ["b"])]
    assert parse_label_selector(" a != b ") == [("a", "!=", ["b"])]
    assert parse_label_selector("env in (prod, dev),tier notin(web),gpu,!spot") == [
        ("env", "in", ["prod", "dev"]), ("tier", "notin", ["web"]), ("gpu", "exists", None), ("spot", "!exists", None)]
    assert parse_label_selector("tencent.com/gpu=true,app.kubernetes.io/name=x") == [
        ("tencent.com/gpu", "=", ["true"]), ("app.kubernetes.io/name", "=", ["x"])]
    assert parse_label_selector("a=") == [("a", "=", [""])]
    assert parse_label_selector("n>3,m<10") == [("n", "gt", ["3"]), ("m", "lt", ["10"])]
    # the key "index" starts with "in": still a key, not the operator
    assert parse_label_selector("index in (1)") == [("index", "in", ["1"])]
    for bad in ("a=b,", "a b", "a in b", "a in (b", "=b", "a=b c", "n>x", "a in (b c)"):
        expect_400(parse_label_selector, bad)


def test_label_matching():
    L = {"env": "prod", "gpu": "true", "n": "5"}
    cases = [("env=prod", True), ("env=dev", False), ("env!=dev", True), ("missing!=x", True),
             ("env in (dev,prod)", True), ("env in (dev)", False), ("env notin (dev)", True),
             ("missing notin (dev)", True), ("missing in (dev)", False), ("gpu", True), ("missing", False),
             ("!missing", True), ("!gpu", False), ("env=prod,gpu=true", True), ("env=prod,gpu=false", False),
             ("n>4", True), ("n>5", False), ("n<6", True), ("missing>1", False), ("", True)]
    for sel, want in cases:
        assert labels_match(parse_label_selector(sel), L) is want, sel
    assert labels_match(parse_label_selector("!a"), None)


def test_field_selector_parser():
    assert parse_field_selector("spec.nodeName=n1", PODS) == [("spec.nodeName", "=", "n1")]
    assert parse_field_selector("spec.nodeName==n1", PODS) == [("spec.nodeName", "=", "n1")]
    assert parse_field_selector("status.phase!=Succeeded,status.phase!=Failed", PODS) == [
        ("status.phase", "!=", "Succeeded"), ("status.phase", "!=", "Failed")]
    assert parse_field_selector("spec.nodeName=", PODS) == [("spec.nodeName", "=", "")]
    assert parse_field_selector(r"metadata.name=a\,b\=c\\d", PODS) == [("metadata.name", "=", "a,b=c\\d")]
    e = expect_400(parse_field_selector, "spec.foo=bar", PODS)
    assert e.message == "field label not supported: spec.foo", e.message
    expect_400(parse_field_selector, "spec.nodeName", PODS)
    expect_400(parse_field_selector, "metadata.namespace=x", apisim.resource_type("nodes"))
    expect_400(parse_field_selector, r"metadata.name=a\q", PODS)


def setup():
    sim = apisim.APISim(tokens=["t"]).start()
    c = apisim.Client(sim.url, token="t")
    pods = [("a", "ns1", {"app": "web", "tier": "fe"}, "n1", "Running"),
            ("b", "ns1", {"app": "db"}, "n2", "Succeeded"),
            ("c", "ns2", {"app": "web", "gpu": "yes"}, None, "Pending"),
            ("d", "ns2", {}, "n1", "Failed"),
            ("e", "ns2", {"app": "batch"}, "n2", "Running")]
    for name, ns, labels, node, phase in pods:
        body = {"metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": "c", "image": "i"}], "hostNetwork": name == "e"}}
        if node:
            body["spec"]["nodeName"] = node
        assert c.post("/api/v1/namespaces/%s/pods" % ns, body).status == 201
        sim.set_pod_phase(ns, name, phase)
    for n, labels in (("n1", {"gpu": "true"}), ("n2", {})):
        c.post("/api/v1/nodes", {"metadata": {"name": n, "labels": labels}, "spec": {"unschedulable": n == "n2"}})
    return sim, c


def names(c, path, **q):
    r = c.get(path + ("?" + urllib.parse.urlencode(q) if q else ""))
    assert r.status == 200, r
    return sorted(i["metadata"]["name"] for i in r.json["items"])


def test_list_with_selectors():
    sim, c = setup()
    try:
        P = "/api/v1/pods"
        assert names(c, P) == ["a", "b", "c", "d", "e"]
        assert names(c, "/api/v1/namespaces/ns1/pods") == ["a", "b"]
        assert names(c, P, fieldSelector="spec.nodeName=n1") == ["a", "d"]
        assert names(c, P, fieldSelector="spec.nodeName=") == ["c"]  # unbound pods
        assert names(c, P, fieldSelector="spec.nodeName!=") == ["a", "b", "d", "e"]
        assert names(c, P, fieldSelector="status.phase!=Succeeded,status.phase!=Failed") == ["a", "c", "e"]
        assert names(c, P, fieldSelector="status.phase==Running,spec.nodeName=n2") == ["e"]
        assert names(c, P, fieldSelector="metadata.namespace=ns2") == ["c", "d", "e"]
        assert names(c, P, fieldSelector="metadata.name=b") == ["b"]
        assert names(c, P, fieldSelector="spec.hostNetwork=true") == ["e"]
        assert names(c, P, labelSelector="app=web") == ["a", "c"]
        assert names(c, P, labelSelector="app in (web,db)") == ["a", "b", "c"]
        assert names(c, P, labelSelector="app notin (web,db)") == ["d", "e"]
        assert names(c, P, labelSelector="app") == ["a", "b", "c", "e"]
        assert names(c, P, labelSelector="!app") == ["d"]
        assert names(c, P, labelSelector="app!=web") == ["b", "d", "e"]
        assert names(c, P, labelSelector="app=web,gpu") == ["c"]
        assert names(c, P, labelSelector="app=web", fieldSelector="spec.nodeName=n1") == ["a"]
        assert names(c, "/api/v1/namespaces/ns2/pods", labelSelector="app=web") == ["c"]
        assert names(c, "/api/v1/nodes", fieldSelector="metadata.name=n2") == ["n2"]
        assert names(c, "/api/v1/nodes", fieldSelector="spec.unschedulable=false") == ["n1"]
        assert names(c, "/api/v1/nodes", labelSelector="gpu=true") == ["n1"]
        r = c.get(P + "?fieldSelector=spec.bogus%3D1")
        assert r.status == 400 and r.json["reason"] == "BadRequest"
        r = c.get(P + "?labelSelector=a%20in%20b")
        assert r.status == 400 and r.json["kind"] == "Status"
        # selectors also limit a watch
        w = c.watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="1",
                    fieldSelector="status.phase!=Succeeded,status.phase!=Failed", labelSelector="app")
        evs = w.events(10, timeout=3)
        assert sorted(e["object"]["metadata"]["name"] for e in evs) == ["a", "c", "e"], evs
        assert all(e["type"] == "ADDED" for e in evs)
        assert w.ended == "clean"
        r = c.get("/api/v1/pods?watch=1&fieldSelector=bad.field%3D1")
        assert r.status == 400
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
