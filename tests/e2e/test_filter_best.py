#!/usr/bin/env python3
"""--filter-best N (bind placement; docs/behaviour.md, "Answering the best
nodes only"): a filter answers at most N feasible nodes, the best by the
extender's score (ties by name), and leaves the other feasible nodes out of
both failed maps; nodes that do not fit keep their reasons; a pod that fits
fewer than N nodes, or none, is answered as without the flag; prioritize
ranks what it is sent; the flag is range-checked."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_filter_best")


def nodes(n):
    return [g.node("n%02d" % i, g.vcuda(800, 8 * 64)) for i in range(n)]


def failed(res):
    out = dict(res.get("FailedNodes") or {})
    out.update(res.get("FailedAndUnresolvableNodes") or {})
    return out


@suite.test
def only_the_best_feasible_nodes_are_answered(s):
    busy = [g.pod("busy-%d" % i, g.vcuda(50, 10), node="n%02d" % i, phase="Running",
                  annotations={"tencent.com/predicate-gpu-idx-0": "0", "tencent.com/predicate-node": "n%02d" % i,
                               "tencent.com/gpu-assigned": "true"}) for i in (3, 7)]
    state = g.write_state(s, nodes(10) + [g.node("cpu", {})] + busy)
    names = ["n%02d" % i for i in range(10)] + ["cpu"]
    want = g.pod("want", g.vcuda(50, 10))
    with g.Server(s, state, ["--placement", "bind"]) as plain, \
            g.Server(s, state, ["--placement", "bind", "--filter-best", "2"], name="best") as best:
        all_fit = plain.filter(want, names)
        s.check_eq(len(all_fit["NodeNames"]), 10, "without the flag every feasible node is answered")
        res = best.filter(want, names)
        # binpack: the two nodes that already hold a share score highest.
        s.check_eq(sorted(res["NodeNames"]), ["n03", "n07"], "the two best nodes are answered")
        s.check_eq(list(failed(res)), ["cpu"], "left-out nodes are in no failed map; refused ones keep theirs")
        s.check_in("no GPUs", failed(res)["cpu"], "with their reason")
        pri = best.prioritize(want, res["NodeNames"])
        s.check_eq(len(pri) <= 2, True, "prioritize ranks what it was sent")
        none = best.filter(g.pod("huge", g.vcuda(900)), names)
        s.check_eq(none["NodeNames"] or [], [], "a pod that fits nowhere")
        s.check_eq(len(failed(none)), 11, "keeps every node's reason")
        one = best.filter(want, ["n01", "cpu"])
        s.check_eq(one["NodeNames"], ["n01"], "fewer feasible nodes than N: all of them")


@suite.test
def the_flag_is_range_checked(s):
    for bad in ("-1", "1001", "two"):
        r = g.run_binary(s, ["--filter-best", bad, "--state-file", s.demo_state, "--placement", "bind"])
        s.check_eq(r.code, 2, "--filter-best %s refused at start" % bad, r.err)


if __name__ == "__main__":
    suite.main()
