#!/usr/bin/env python3
"""The scheduler-name webhook end to end (issue 27 item 1,
manifests/components/scheduler-name-webhook): POST
/admission/mutate-scheduler-name with --set-scheduler-name NAME.

  - a pod asking for a managed GPU resource (each of the five, in limits or
    requests, in a container or only in an init container), naming no
    scheduler or default-scheduler: allowed with a base64 JSONPatch that,
    applied, sets spec.schedulerName NAME and changes nothing else;
  - every other pod is allowed with no patch: CPU only, another extended
    resource, a GPU named only in annotations, another scheduler, already
    NAME; and so are UPDATE, DELETE and other kinds;
  - over HTTPS, as the API server calls it; GQA_SET_SCHEDULER_NAME works as
    the manifests set it;
  - without the flag the path answers 404 with a JSON error (a configured
    webhook with a forgotten flag fails loudly), and /admission/mutate is
    unchanged; a malformed review gets 400; a bad name is refused at start.

Standalone: python3 test_scheduler_name.py --binary PATH --source-dir REPO
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402
from test_admission import (apply_json_patch, decode_patch, expect_allowed, mkpod,  # noqa: E402
                            review)

suite = g.Suite("scheduler_name")

PATH = "/admission/mutate-scheduler-name"
NAME = "gpu-scheduler"
MANAGED = ["tencent.com/vcuda-core", "tencent.com/vcuda-memory", "nvidia.com/mps-core", "nvidia.com/mps-memory",
           "nvidia.com/gpu"]


def ctr(name, limits=None, requests=None):
    res = {}
    if limits:
        res["limits"] = dict(limits)
    if requests:
        res["requests"] = dict(requests)
    return {"name": name, "image": "registry.invalid/x:1", "resources": res}


def gpu_pods():
    """(what, pod) for every pod the webhook must send to NAME."""
    out = []
    for r in MANAGED:
        out.append(("%s in limits" % r, mkpod("l", [ctr("main", {r: "1"})])))
        out.append(("%s in requests" % r, mkpod("r", [ctr("main", requests={r: "1"})])))
    p = mkpod("init", [ctr("main", {"cpu": "1"})])
    p["spec"]["initContainers"] = [ctr("warmup", {"nvidia.com/gpu": "1"})]
    out.append(("a GPU in an init container only", p))
    p = mkpod("second", [ctr("a", {"cpu": "1"}), ctr("b", {"memory": "1Gi", "nvidia.com/mps-core": "25"})])
    out.append(("a GPU in the second container", p))
    p = mkpod("dflt", [ctr("main", {"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "8"})])
    p["spec"]["schedulerName"] = "default-scheduler"
    out.append(("schedulerName default-scheduler (the API server's default)", p))
    return out


def other_pods():
    """(what, pod) for pods the webhook must leave alone."""
    out = [("CPU only", mkpod("cpu", [ctr("main", {"cpu": "2", "memory": "1Gi"})])),
           ("another extended resource", mkpod("fpga", [ctr("main", {"example.com/fpga": "1"})])),
           ("no resources at all", mkpod("bare", [{"name": "main", "image": "x"}]))]
    p = mkpod("ann", [ctr("main", {"cpu": "1"})])
    p["metadata"]["annotations"] = {"nvidia.com/gpu": "1"}
    out.append(("a GPU named only in an annotation", p))
    for sched in ("hami-scheduler", "volcano", NAME):
        p = mkpod("own-" + sched, [ctr("main", {"nvidia.com/gpu": "1"})])
        p["spec"]["schedulerName"] = sched
        out.append(("a GPU pod naming schedulerName %s" % sched, p))
    return out


def check_sets_name(s, srv, pod, what):
    resp = expect_allowed(s, srv, PATH, review(pod), what)
    ops = decode_patch(s, resp, what)
    s.check_eq(ops, [{"op": "add", "path": "/spec/schedulerName", "value": NAME}],
               "%s: one operation setting spec.schedulerName" % what)
    got = apply_json_patch(pod, ops)
    want = copy.deepcopy(pod)
    want["spec"]["schedulerName"] = NAME
    s.check_eq(got, want, "%s: the patched pod differs only in schedulerName" % what)


def check_untouched(s, srv, body, what):
    resp = expect_allowed(s, srv, PATH, body, what)
    s.check("patch" not in resp and "patchType" not in resp, "%s: no patch" % what, resp)


@suite.test
def test_gpu_pods_get_the_name(s):
    with g.Server(s, flags=["--set-scheduler-name", NAME]) as srv:
        for what, pod in gpu_pods():
            check_sets_name(s, srv, pod, what)


@suite.test
def test_other_pods_are_untouched(s):
    with g.Server(s, flags=["--set-scheduler-name", NAME]) as srv:
        for what, pod in other_pods():
            check_untouched(s, srv, review(pod), what)
        gpu = mkpod("g", [ctr("main", {"nvidia.com/gpu": "1"})])
        check_untouched(s, srv, review(gpu, operation="UPDATE", old=gpu), "UPDATE of a GPU pod")
        check_untouched(s, srv, review(gpu, operation="DELETE", old=gpu), "DELETE of a GPU pod")
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
              "data": {"nvidia.com/gpu": "1"}}
        check_untouched(s, srv, review(cm), "a ConfigMap")
        # Malformed reviews: 400 with a JSON error, and the server goes on.
        r = srv.post(PATH, b"{not json")
        s.check_eq(r.status, 400, "a body that is not JSON: 400", r)
        s.check("error" in (r.json() or {}), "the 400 says why", r)
        bad = review(gpu)
        bad["request"]["uid"] = ""
        s.check_eq(srv.post(PATH, bad).status, 400, "an empty uid: 400")
        check_sets_name(s, srv, gpu, "after malformed reviews")


@suite.test
def test_over_https_and_from_the_environment(s):
    tls = g.TLSMaterial(s.tempdir("tls"))
    with g.Server(s, https=True, tls=tls, env={"GQA_SET_SCHEDULER_NAME": NAME}) as srv:
        pod = mkpod("g", [ctr("main", {"nvidia.com/gpu": "2"})])
        r = g.http_request("127.0.0.1", srv.https_port, "POST", PATH, review(pod, uid="tls-1"),
                           tls_context=tls.client_context())
        s.require(r.status == 200, "HTTPS %s answers 200" % PATH, r)
        resp = r.json()["response"]
        s.check_eq((resp.get("uid"), resp.get("allowed")), ("tls-1", True), "HTTPS: allowed, uid echoed", resp)
        s.check_eq(apply_json_patch(pod, decode_patch(s, resp, "HTTPS"))["spec"].get("schedulerName"), NAME,
                   "HTTPS: GQA_SET_SCHEDULER_NAME is the name written")


@suite.test
def test_off_without_the_flag(s):
    with g.Server(s) as srv:
        pod = mkpod("g", [ctr("main", {"nvidia.com/gpu": "1"})])
        r = srv.post(PATH, review(pod))
        s.check_eq(r.status, 404, "without --set-scheduler-name the path answers 404", r)
        s.check_in("--set-scheduler-name", (r.json() or {}).get("error", ""), "the error names the flag")
        resp = expect_allowed(s, srv, "/admission/mutate", review(pod), "the CRL mutate webhook still answers")
        s.check("patch" not in resp, "and sets no scheduler name", resp)


@suite.test
def test_bad_names_refused_at_start(s):
    for bad in ("GPU-Scheduler", "-gpu", "gpu_scheduler", ""):
        r = g.run_binary(s, ["--state-file", s.demo_state, "--set-scheduler-name", bad])
        s.check(r.code != 0, "--set-scheduler-name %r is refused" % bad, r)
        s.check_in("--set-scheduler-name", r.err, "the error names the flag (%r)" % bad)


if __name__ == "__main__":
    suite.main()
