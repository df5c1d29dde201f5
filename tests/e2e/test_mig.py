#!/usr/bin/env python3
"""MIG under NVIDIA's device plugin, mixed strategy (issue 28; docs/mig.md).

Nodes advertise nvidia.com/mig-<profile> with GPU Feature Discovery's labels
(tests/fixtures/mig/node-a100-mixed.json); pods ask for them as the device
plugin serves them. The extender counts free instances per node and
profile (bound pods, its own decisions), so pods go where their profile
has room and are refused elsewhere with the free instances named; a node
without MIG says so; quota counts an instance of g slices as g/7 of the
parent GPU's model; /inspect/nodes lists the instances per profile."""

import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_mig")
MIG_NODE = "dgx-a100-mixed"


def mig_node(**allocatable):
    return g.mig_node(suite, MIG_NODE, allocatable={k.replace("_", "."): v for k, v in allocatable.items()})


def mig(profile, count=1):
    return {"nvidia.com/mig-" + profile: count}


def units(srv, node):
    return {u["resource"]: (u["total"], u["used"]) for u in srv.inspect(node)["units"]}


@suite.test
def filter_counts_instances_and_explains(s):
    plain = g.node("plain-a100", g.pgpu(8))
    running = g.pod("running", mig("3g.20gb"), node=MIG_NODE, phase="Running")
    state = g.write_state(s, [mig_node(), plain, running])
    with g.Server(s, state, ["--placement", "bind"]) as srv:
        s.check_eq(units(srv, MIG_NODE)["nvidia.com/mig-3g.20gb"], (8, 1), "a bound pod holds one 3g.20gb")
        res = srv.filter(g.pod("want", mig("3g.20gb")), [MIG_NODE, "plain-a100"])
        s.check_eq(res["NodeNames"], [MIG_NODE], "only the MIG node fits")
        s.check_in("no MIG instances", g.failed_reason(res, "plain-a100"), "the plain node says why")
        big = srv.filter(g.pod("big", mig("3g.20gb", 8)), [MIG_NODE])
        reason = g.failed_reason(big, MIG_NODE)
        s.check_in("needs 8 nvidia.com/mig-3g.20gb", reason, "the refusal names the profile and count")
        s.check_in("3g.20gb 7/8", reason, "and the free instances per profile")
        other = srv.filter(g.pod("other", mig("7g.40gb")), [MIG_NODE])
        s.check_in("7g.40gb", g.failed_reason(other, MIG_NODE), "a profile the node lacks is refused")
        vc = srv.filter(g.pod("vc", g.vcuda(50, 10)), [MIG_NODE])
        s.check_in("no GPUs", g.failed_reason(vc, MIG_NODE), "a share pod finds no GPU on a MIG-only node")


@suite.test
def metrics_and_capacity_show_instances(s):
    running = g.pod("running", mig("3g.20gb"), node=MIG_NODE, phase="Running")
    state = g.write_state(s, [mig_node(), running])
    with g.Server(s, state) as srv:
        samples, _, bad = g.parse_metrics(srv.metrics().text)
        s.check_eq(bad, [], "every metrics line parses")
        labels = {"resource": "nvidia.com/mig-3g.20gb", "model": "NVIDIA-A100-SXM4-40GB", "pool": "none"}
        s.check_eq(g.metric(samples, "gqa_instances_allocatable", **labels), 8.0, "instances offered per profile")
        s.check_eq(g.metric(samples, "gqa_instances_allocated", **labels), 1.0, "instances held per profile")
        cap = srv.get_json("/inspect/capacity")
        s.check_eq(cap["total"]["units"].get("nvidia.com/mig-3g.20gb"), {"total": 8, "used": 1},
                   "/inspect/capacity sums the instances")


@suite.test
def decisions_hold_instances_until_the_profile_is_used_up(s):
    state = g.write_state(s, [mig_node(**{"2g_10gb": 3})])
    with g.Server(s, state) as srv:  # filter placement: each answer is a decision
        for i in range(3):
            res = srv.filter(g.pod("p%d" % i, mig("2g.10gb")), [MIG_NODE])
            s.check_eq(res["NodeNames"], [MIG_NODE], "pod %d of 3 placed" % i)
        s.check_eq(units(srv, MIG_NODE)["nvidia.com/mig-2g.10gb"], (3, 3), "three decisions hold three instances")
        res = srv.filter(g.pod("p3", mig("2g.10gb")), [MIG_NODE])
        s.check_eq(res["NodeNames"] or [], [], "the fourth finds none free")
        s.check_in("2g.10gb 0/3", g.failed_reason(res, MIG_NODE), "and says so")
        again = srv.filter(g.pod("p0", mig("2g.10gb")), [MIG_NODE])
        s.check_eq(again["NodeNames"], [MIG_NODE], "a re-filter of a decided pod does not collide with itself")


@suite.test
def quota_counts_slices_of_the_parent_model(s):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-quota", "namespace": "kube-system"},
          "data": {"gpu_quota": json.dumps({"team-a": {"quota": {"NVIDIA-A100-SXM4-40GB": 1}}})}}
    state = g.write_state(s, [mig_node(), cm])
    with g.Server(s, state) as srv:
        placed = [srv.filter(g.pod("q%d" % i, mig("3g.20gb"), namespace="team-a"), [MIG_NODE])["NodeNames"]
                  for i in range(3)]
        # 3 of 7 slices is 43 cores: two fit one GPU of quota (86), a third does not (129).
        s.check_eq([bool(p) for p in placed], [True, True, False], "two 3g instances fit a quota of one GPU")
        res = srv.filter(g.pod("q3", mig("3g.20gb"), namespace="team-a"), [MIG_NODE])
        s.check_in("NVIDIA-A100-SXM4-40GB", g.failed_reason(res, MIG_NODE), "the refusal names the model quota")


@suite.test
def single_strategy_is_shown_as_such(s):
    with open(suite.path("tests", "fixtures", "mig", "node-a100-single.json")) as f:
        single = json.load(f)
    state = g.write_state(s, [single, mig_node()])
    with g.Server(s, state, ["--placement", "bind"]) as srv:
        n = srv.inspect(single["metadata"]["name"])
        s.check_eq(n["mig"], {"strategy": "single", "single": True, "product": "NVIDIA-A100-SXM4-40GB"},
                   "a single-strategy node says so")
        s.check_eq(n["model"], "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "its model names the instances, as GFD does")
        s.check_eq(n["gpuCount"], 56, "nvidia.com/gpu counts its instances")
        s.check_eq(n["units"], [], "no per-profile units: kube-scheduler counts them as nvidia.com/gpu")
        mixed = srv.inspect(MIG_NODE)
        s.check_eq(mixed["mig"]["strategy"], "mixed", "a mixed-strategy node says so")
        res = srv.filter(g.pod("whole", g.pgpu(1)), [single["metadata"]["name"], MIG_NODE])
        s.check_eq(res["NodeNames"], [single["metadata"]["name"]], "nvidia.com/gpu pods fit the single-strategy node")


@suite.test
def a_quota_line_may_name_a_profile(s):
    line = "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"
    quota = {"team-b": {"quota": {line: 2}},
             "team-c": {"quota": {line: 5, "NVIDIA-A100-SXM4-40GB": 1}}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-quota", "namespace": "kube-system"},
          "data": {"gpu_quota": json.dumps(quota)}}
    state = g.write_state(s, [mig_node(), cm])
    with g.Server(s, state) as srv:
        placed = [bool(srv.filter(g.pod("b%d" % i, mig("3g.20gb"), namespace="team-b"), [MIG_NODE])["NodeNames"])
                  for i in range(3)]
        s.check_eq(placed, [True, True, False], "a line of 2 for the profile allows two instances")
        res = srv.filter(g.pod("b3", mig("3g.20gb"), namespace="team-b"), [MIG_NODE])
        s.check_in(line, g.failed_reason(res, MIG_NODE) or "", "the refusal names the profile's line")
        other = srv.filter(g.pod("b4", mig("2g.10gb"), namespace="team-b"), [MIG_NODE])
        s.check_eq(other["NodeNames"] or [], [], "a profile without a line, and no model line, is refused")
        placed = [bool(srv.filter(g.pod("c%d" % i, mig("3g.20gb"), namespace="team-c"), [MIG_NODE])["NodeNames"])
                  for i in range(3)]
        s.check_eq(placed, [True, True, False], "with both lines the model line of one GPU caps 3g at two")
        q = srv.get_json("/inspect/quota")
        s.check_in(line, json.dumps(q), "/inspect/quota shows the profile line")


@suite.test
def hostile_requests_are_refused_with_a_reason(s):
    state = g.write_state(s, [mig_node()])
    with g.Server(s, state, ["--placement", "bind"]) as srv:
        two = g.pod("two", {"nvidia.com/mig-1g.5gb": 1, "nvidia.com/mig-2g.10gb": 1})
        s.check_in("two MIG profiles", g.failed_reason(srv.filter(two, [MIG_NODE]), MIG_NODE), "two profiles in one container")
        bad = g.pod("bad", {"nvidia.com/mig-9x.zz": 1})
        s.check_in("not a MIG profile", g.failed_reason(srv.filter(bad, [MIG_NODE]), MIG_NODE), "a malformed profile")
        many = g.pod("many", {"nvidia.com/mig-1g.5gb": 100000})
        s.check_in("at most", g.failed_reason(srv.filter(many, [MIG_NODE]), MIG_NODE), "an absurd count")
        mixed = g.pod("mixed", {"nvidia.com/mig-1g.5gb": 1, "nvidia.com/gpu": 1})
        s.check_in("mixes GPU resources", g.failed_reason(srv.filter(mixed, [MIG_NODE]), MIG_NODE), "MIG and whole GPUs in one container")
        zero = g.pod("zero", {"nvidia.com/mig-1g.5gb": 0})
        s.check_eq(srv.filter(zero, [MIG_NODE])["NodeNames"], [MIG_NODE], "an instance count of 0 asks for nothing")


if __name__ == "__main__":
    suite.main()
