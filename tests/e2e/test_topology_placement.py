#!/usr/bin/env python3
"""Topology-aware placement end to end (design.md section 5, issue 4).

Nodes carry gpu-admission.io/topology annotations made by the gpu-topology
binary from the nvidia-smi fixtures (tests/fixtures/nvidia-smi), some with
tencent.com/vcuda capacity, some with nvidia.com/gpu. The expected answers
are written down from the link tables:

  - DGX-1 (hybrid cube-mesh): 4 GPUs on an empty node take one of the fully
    NVLinked quads {0,1,2,3} or {4,5,6,7}; a second 4-GPU pod takes the other;
    with GPU 0 busy, 2 GPUs take an NV2 pair and 4 GPUs take {4,5,6,7};
  - 8x PCIe on two sockets: 2 GPUs take a PIX pair on one NUMA node;
  - 4x T4: 2 GPUs take the PHB pair {0,1}; HGX H100: 4 GPUs take one NUMA
    node's quad; DGX A100: 2 GPUs take a pair on one NUMA node;
  - with busy GPUs chosen so that idle GPUs in device order would be a poor
    set, every shape still gets its best set (NV2 pair, intact quad, PIX
    pair on one NUMA node, ...); a pair on an empty DGX-1 leaves a quad whole;
  - device minors that differ from indices (gpu-topology --proc-dir) are
    what the answers and the busy pod's annotation speak;
  - prioritize ranks a DGX-1 that can give an NVLinked quad above one whose
    quads are all broken by busy GPUs, and above the PCIe server; the filter
    (filter mode) picks that node and records the quad.

Each answer is checked through /inspect/explain (gpus per container,
gpuSetScore, gpuSetBest; the scores recomputed here from the documented link
weights, the best by brute force) and through filter-mode decisions
(/inspect/nodes: the pod on each chosen GPU); /inspect/nodes shows each
node's topology.

gpu-topology is looked for next to --binary.
Standalone: python3 test_topology_placement.py --binary PATH --source-dir REPO
"""

import itertools
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_topology_placement")

ANNOTATION = "gpu-admission.io/topology"

# From tests/fixtures/nvidia-smi/dgx1-v100.topo.txt.
DGX1_QUADS = [{0, 1, 2, 3}, {4, 5, 6, 7}]
DGX1_NV2_PAIRS = [{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}]
# From tests/fixtures/nvidia-smi/pcie8-2socket.topo.txt: PIX pairs, NUMA 0 then 1.
PCIE_PIX_PAIRS = [{0, 1}, {2, 3}, {4, 5}, {6, 7}]
# docs/reference.md: link weights and the NUMA bonus.
NUMA_BONUS = 15
WEIGHTS = {"PIX": 50, "PXB": 40, "PHB": 30, "NODE": 20, "SYS": 10}


def weight(link):
    if link.startswith("NV"):
        return 100 + 20 * int(link[2:])
    return WEIGHTS[link]


def set_score(topo, gset):
    gset = sorted(gset)
    total = sum(weight(topo["links"][a][b]) for a, b in itertools.combinations(gset, 2))
    numas = {topo["gpus"][i]["numa"] for i in gset}
    if len(numas) == 1 and min(numas) >= 0:
        total += NUMA_BONUS
    return total


def best_score(topo, k, free=None):
    free = sorted(free if free is not None else range(len(topo["gpus"])))
    return max(set_score(topo, c) for c in itertools.combinations(free, k))


# ---------------------------------------------------------------------------
# Annotations from the gpu-topology binary
# ---------------------------------------------------------------------------

_ANNOTATIONS = {}


def fake_proc(s, buses, minors):
    d = s.tempdir("proc")
    for bus, minor in zip(buses, minors):
        os.makedirs(os.path.join(d, bus))
        with open(os.path.join(d, bus, "information"), "w") as f:
            f.write("Model: \t\t Test GPU\nBus Type: \t PCIe\nBus Location: \t %s\nDevice Minor: \t %d\n"
                    % (bus, minor))
    return d


def annotation(s, name, minors=None):
    """The annotation text gpu-topology prints for a fixture (and its CSV)."""
    key = (name, tuple(minors) if minors else None)
    if key in _ANNOTATIONS:
        return _ANNOTATIONS[key]
    args = [g.topo_binary(s), "--topo-file", g.smi_fixture(s, name, "topo.txt")]
    if os.path.exists(g.smi_fixture(s, name, "query.csv")):
        args += ["--query-file", g.smi_fixture(s, name, "query.csv")]
    if minors:
        buses = ["0000:%02x:00.0" % (0x10 + i) for i in range(len(minors))]
        args += ["--proc-dir", fake_proc(s, buses, minors)]
    p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out, err = p.stdout.decode(), p.stderr.decode()
    s.check(g.sanitizer_report(err) is None, "gpu-topology %s: no sanitizer report" % name, err[-3000:])
    s.require(p.returncode == 0 and len(out.splitlines()) == 1, "gpu-topology prints the %s annotation" % name,
              "exit %d\nstdout %s\nstderr %s" % (p.returncode, out[:500], err[-2000:]))
    text = out.strip()
    _ANNOTATIONS[key] = text
    return text


def topo_of(s, name, minors=None):
    return json.loads(annotation(s, name, minors))


def gpu_node(s, name, fixture_name, kind, minors=None):
    """A Node with the fixture's annotation; kind "vcuda" or "gpu" decides its capacity."""
    topo = topo_of(s, fixture_name, minors)
    n = len(topo["gpus"])
    if kind == "vcuda":
        blocks = topo["gpus"][0]["memoryMiB"] // 256
        obj = g.node(name, g.vcuda(100 * n, blocks * n))
    else:
        obj = g.node(name, g.pgpu(n))
    obj["metadata"]["annotations"] = {ANNOTATION: annotation(s, fixture_name, minors)}
    return obj


def busy_pod(name, node, kind, minors, phase="Running"):
    """A bound pod holding whole GPUs named by device minor in its index annotation."""
    idx = ",".join(str(m) for m in minors)
    if kind == "vcuda":
        ann = {"tencent.com/predicate-gpu-idx-0": idx, "tencent.com/predicate-node": node,
               "tencent.com/gpu-assigned": "true", "tencent.com/predicate-time": "1763700000000000000",
               "gpu-admission.io/gpu-idx-0": idx, "gpu-admission.io/node": node,
               "gpu-admission.io/time": "1763700000000000000"}
        limits = g.vcuda(100 * len(minors), 128 * len(minors))
    else:
        ann = {"gpu-admission.io/gpu-idx-0": idx, "gpu-admission.io/node": node,
               "gpu-admission.io/time": "1763700000000000000"}
        limits = g.pgpu(len(minors))
    return g.pod(name, [("busy", limits)], node=node, annotations=ann, phase=phase,
                 uid="%s-0000-4000-8000-000000000002" % name)


def whole_pod(name, kind, k, containers=("trainer",), memory_blocks=128):
    limits = g.vcuda(100 * k, memory_blocks * k) if kind == "vcuda" else g.pgpu(k)
    return g.pod(name, [(c, dict(limits)) for c in containers], uid="%s-0000-4000-8000-000000000003" % name)


def minor_to_index(topo):
    return {gp["minor"]: gp["index"] for gp in topo["gpus"]}


def explained_set(s, answer, node, container, topo, label):
    """The GPU indices explain gives container on node (it speaks minors)."""
    n = g.explain_node(answer, node)
    s.require(n is not None, "%s: explain lists %s" % (label, node), answer)
    s.require(n["fits"], "%s: fits on %s" % (label, node), n)
    minors = n["gpus"].get(container)
    s.require(isinstance(minors, list), "%s: explain gives the GPUs of %s" % (label, container), n)
    m2i = minor_to_index(topo)
    return {m2i[m] for m in minors}, n


def decided_set(s, inspect_node, pod_key):
    return {gp["index"] for gp in inspect_node["gpus"] if pod_key in gp["pods"]}


def check_scores(s, n, topo, gset, k, label, free=None):
    """gpuSetScore is the chosen set's score; gpuSetBest the best k-set on the empty node; and the
    chosen set is the best the free GPUs allow."""
    want = set_score(topo, gset)
    s.check_eq(n.get("gpuSetScore"), want, "%s: gpuSetScore is the set's score (%s)" % (label, sorted(gset)))
    s.check_eq(n.get("gpuSetBest"), best_score(topo, k), "%s: gpuSetBest is the best %d-set on this shape"
               % (label, k))
    s.check_eq(want, best_score(topo, k, free), "%s: the set is the best the free GPUs allow" % label)


def all_nv(topo, gset):
    return all(topo["links"][a][b].startswith("NV") for a, b in itertools.combinations(sorted(gset), 2))


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

@suite.test
def binary_is_built(s):
    s.require(os.access(g.topo_binary(s), os.X_OK), "gpu-topology is built next to gpu-quota-admission",
              g.topo_binary(s))


@suite.test
def inspect_nodes_shows_each_topology(s):
    names = {"dgx1": "dgx1-v100", "a100": "dgx-a100", "h100": "hgx-h100", "pcie": "pcie8-2socket", "t4": "t4x4",
             "gh200": "gh200x4", "p100": "p100x4-legacy"}
    objs = [gpu_node(s, n, f, "gpu" if i % 2 else "vcuda") for i, (n, f) in enumerate(sorted(names.items()))]
    objs.append(g.node("plain", g.pgpu(4)))
    with g.Server(s, g.write_state(s, objs)) as srv:
        nodes = {n["node"]: n for n in srv.inspect()}
        for n, f in names.items():
            want = topo_of(s, f)
            got = nodes.get(n, {}).get("topology")
            s.check_eq(got, want, "%s: /inspect/nodes shows the annotation gpu-topology made" % n)
            s.check_eq(nodes.get(n, {}).get("gpuCount"), len(want["gpus"]), "%s: GPU count" % n)
            one = srv.inspect(n)
            s.check_eq(one.get("topology"), want, "%s: /inspect/nodes/%s shows it too" % (n, n))
            s.check_eq([gp["numa"] for gp in one["gpus"]], [gp["numa"] for gp in want["gpus"]],
                       "%s: per-GPU NUMA nodes" % n)
        s.check(nodes["plain"].get("topology") is None, "a node without the annotation shows no topology",
                nodes["plain"])


@suite.test
def dgx1_four_gpus_take_an_nvlinked_quad(s):
    topo = topo_of(s, "dgx1-v100")
    for kind in ("vcuda", "gpu"):
        node = "dgx1-%s" % kind
        state = g.write_state(s, [gpu_node(s, node, "dgx1-v100", kind)])
        with g.Server(s, state) as srv:
            label = "DGX-1 %s, 4 GPUs, empty" % kind
            ans = srv.explain(whole_pod("quad-a", kind, 4))
            gset, n = explained_set(s, ans, node, "trainer", topo, label)
            s.check(gset in DGX1_QUADS, "%s: explain gives a fully NVLinked quad" % label, sorted(gset))
            s.check(all_nv(topo, gset), "%s: every pair of the set is NVLink" % label, sorted(gset))
            check_scores(s, n, topo, gset, 4, label)

            # Filter mode records the same set.
            res = srv.filter(whole_pod("quad-a", kind, 4), [node])
            s.check_eq(res["NodeNames"], [node], "%s: the filter answers the node" % label, res)
            first = decided_set(s, srv.inspect(node), "default/quad-a")
            s.check_eq(first, gset, "%s: the decision (/inspect/nodes) is the explained quad" % label)

            # The next 4-GPU pod takes the other quad: the first pick left it intact.
            label2 = "DGX-1 %s, second 4-GPU pod" % kind
            ans = srv.explain(whole_pod("quad-b", kind, 4))
            gset2, n2 = explained_set(s, ans, node, "trainer", topo, label2)
            s.check_eq(gset2, ({0, 1, 2, 3, 4, 5, 6, 7} - first), "%s: explain gives the other quad" % label2)
            check_scores(s, n2, topo, gset2, 4, label2, free=set(range(8)) - first)
            res = srv.filter(whole_pod("quad-b", kind, 4), [node])
            s.check_eq(res["NodeNames"], [node], "%s: the filter answers the node" % label2, res)
            s.check_eq(decided_set(s, srv.inspect(node), "default/quad-b"), gset2,
                       "%s: the decision is the other quad" % label2)


@suite.test
def dgx1_gpu0_busy(s):
    topo = topo_of(s, "dgx1-v100")
    for kind in ("vcuda", "gpu"):
        node = "dgx1-%s" % kind
        state = g.write_state(s, [gpu_node(s, node, "dgx1-v100", kind), busy_pod("holder", node, kind, [0])])
        with g.Server(s, state) as srv:
            insp = srv.inspect(node)
            s.check_eq(insp["gpus"][0]["pods"], ["default/holder"], "DGX-1 %s: GPU 0 is busy" % kind)
            free = set(range(1, 8))

            label = "DGX-1 %s, GPU 0 busy, 2 GPUs" % kind
            gset, n = explained_set(s, srv.explain(whole_pod("pair", kind, 2)), node, "trainer", topo, label)
            s.check(gset in DGX1_NV2_PAIRS and 0 not in gset, "%s: explain gives an NV2 pair" % label, sorted(gset))
            a, b = sorted(gset)
            s.check_eq(topo["links"][a][b], "NV2", "%s: the pair's link is NV2" % label)
            check_scores(s, n, topo, gset, 2, label, free=free)

            label4 = "DGX-1 %s, GPU 0 busy, 4 GPUs" % kind
            gset4, n4 = explained_set(s, srv.explain(whole_pod("quad", kind, 4)), node, "trainer", topo, label4)
            s.check_eq(gset4, {4, 5, 6, 7}, "%s: explain gives the intact quad {4,5,6,7}" % label4)
            check_scores(s, n4, topo, gset4, 4, label4, free=free)

            # Two containers of 2 GPUs each: two disjoint NV2 pairs.
            label2c = "DGX-1 %s, GPU 0 busy, two 2-GPU containers" % kind
            ans = srv.explain(whole_pod("two", kind, 2, containers=("left", "right")))
            left, _ = explained_set(s, ans, node, "left", topo, label2c)
            right, _ = explained_set(s, ans, node, "right", topo, label2c)
            s.check(not (left & right), "%s: disjoint sets" % label2c, (sorted(left), sorted(right)))
            s.check(left in DGX1_NV2_PAIRS and right in DGX1_NV2_PAIRS and 0 not in left | right,
                    "%s: each container gets an NV2 pair" % label2c, (sorted(left), sorted(right)))

            # Filter mode: the decision is the explained pair.
            res = srv.filter(whole_pod("pair", kind, 2), [node])
            s.check_eq(res["NodeNames"], [node], "%s: the filter answers the node" % label, res)
            s.check_eq(decided_set(s, srv.inspect(node), "default/pair"), gset,
                       "%s: the decision (/inspect/nodes) is the explained NV2 pair" % label)


@suite.test
def minors_that_differ_from_indices(s):
    # /dev/nvidia minors reversed: index i is minor 7 - i. The busy pod names minor 7 (index 0).
    minors = [7, 6, 5, 4, 3, 2, 1, 0]
    topo = topo_of(s, "dgx1-v100", minors)
    s.require([gp["minor"] for gp in topo["gpus"]] == minors, "gpu-topology read the minors", topo["gpus"])
    node = "dgx1-minors"
    state = g.write_state(s, [gpu_node(s, node, "dgx1-v100", "gpu", minors), busy_pod("holder", node, "gpu", [7])])
    with g.Server(s, state) as srv:
        insp = srv.inspect(node)
        s.check_eq((insp["gpus"][0]["minor"], insp["gpus"][0]["pods"]), (7, ["default/holder"]),
                   "minor 7 is index 0, and it is busy")
        label = "DGX-1 with reversed minors, index 0 busy, 2 GPUs"
        ans = srv.explain(whole_pod("pair", "gpu", 2))
        gset, n = explained_set(s, ans, node, "trainer", topo, label)
        s.check(gset in DGX1_NV2_PAIRS and 0 not in gset, "%s: an NV2 pair by index" % label, sorted(gset))
        s.check_eq(sorted(g.explain_node(ans, node)["gpus"]["trainer"]), sorted(minors[i] for i in gset),
                   "%s: explain speaks minors" % label)
        check_scores(s, n, topo, gset, 2, label, free=set(range(1, 8)))
        res = srv.filter(whole_pod("pair", "gpu", 2), [node])
        s.check_eq(res["NodeNames"], [node], "%s: the filter answers the node" % label, res)
        s.check_eq(decided_set(s, srv.inspect(node), "default/pair"), gset, "%s: the decision is that pair" % label)


@suite.test
def pcie_two_gpus_take_a_pix_pair_on_one_numa_node(s):
    topo = topo_of(s, "pcie8-2socket")
    for kind in ("vcuda", "gpu"):
        node = "pcie-%s" % kind
        state = g.write_state(s, [gpu_node(s, node, "pcie8-2socket", kind)])
        with g.Server(s, state) as srv:
            label = "PCIe %s, 2 GPUs" % kind
            gset, n = explained_set(s, srv.explain(whole_pod("pair", kind, 2)), node, "trainer", topo, label)
            a, b = sorted(gset)
            s.check(gset in PCIE_PIX_PAIRS, "%s: explain gives a PIX pair" % label, sorted(gset))
            s.check_eq(topo["links"][a][b], "PIX", "%s: the pair's link is PIX" % label)
            s.check_eq(topo["gpus"][a]["numa"], topo["gpus"][b]["numa"], "%s: one NUMA node" % label)
            check_scores(s, n, topo, gset, 2, label)
            res = srv.filter(whole_pod("pair", kind, 2), [node])
            s.check_eq(res["NodeNames"], [node], "%s: the filter answers the node" % label, res)
            taken = decided_set(s, srv.inspect(node), "default/pair")
            s.check_eq(taken, gset, "%s: the decision is the explained PIX pair" % label)
            # The next pair is PIX on one NUMA node too.
            label2 = "PCIe %s, second 2-GPU pod" % kind
            gset2, n2 = explained_set(s, srv.explain(whole_pod("pair-2", kind, 2)), node, "trainer", topo, label2)
            s.check(gset2 in PCIE_PIX_PAIRS and not (gset2 & taken), "%s: another PIX pair" % label2, sorted(gset2))
            check_scores(s, n2, topo, gset2, 2, label2, free=set(range(8)) - taken)


@suite.test
def other_shapes(s):
    cases = [
        # (fixture, kind, k, allowed sets, what)
        ("t4x4", "vcuda", 2, [{0, 1}], "the PHB pair on NUMA 0 over the NODE pair"),
        ("hgx-h100", "gpu", 4, [{0, 1, 2, 3}, {4, 5, 6, 7}], "one NUMA node's NV18 quad"),
        ("dgx-a100", "gpu", 2, [{0, 1}, {2, 3}, {4, 5}, {6, 7}], "an NV12 pair on one NUMA node"),
        ("gh200x4", "gpu", 2, None, "an NV6 pair"),
    ]
    objs = [gpu_node(s, "%s-node" % f, f, kind) for f, kind, _k, _a, _w in cases]
    with g.Server(s, g.write_state(s, objs)) as srv:
        for f, kind, k, allowed, what in cases:
            node = "%s-node" % f
            topo = topo_of(s, f)
            label = "%s, %d GPUs" % (f, k)
            ans = srv.explain(whole_pod("p-%s" % f, kind, k))
            gset, n = explained_set(s, ans, node, "trainer", topo, label)
            if allowed is not None:
                s.check(gset in allowed, "%s: %s" % (label, what), sorted(gset))
            s.check_eq(len(gset), k, "%s: %d GPUs" % (label, k))
            check_scores(s, n, topo, gset, k, label)


# Cases where taking idle GPUs in device order would be wrong: the busy GPUs
# (by minor = index) make the first idle ones a poor set.
# (fixture, kind, busy, k, allowed sets, what, device order's pick)
BEYOND_DEVICE_ORDER = [
    ("dgx1-v100", "gpu", [1], 4, [{4, 5, 6, 7}], "the intact quad", {0, 2, 3, 4}),
    ("dgx1-v100", "vcuda", [0, 2], 2, [{1, 5}, {4, 7}, {5, 6}, {6, 7}], "an NV2 pair", {1, 3}),
    ("pcie8-2socket", "gpu", [1], 2, [{2, 3}, {4, 5}, {6, 7}], "a PIX pair on one NUMA node", {0, 2}),
    ("pcie8-2socket", "vcuda", [1, 3], 2, [{4, 5}, {6, 7}], "a PIX pair on NUMA node 1", {0, 2}),
    ("t4x4", "vcuda", [1], 2, [{2, 3}], "the NODE pair on NUMA 1 over a SYS pair", {0, 2}),
    ("hgx-h100", "gpu", [1], 4, [{4, 5, 6, 7}], "the quad on NUMA node 1", {0, 2, 3, 4}),
    ("dgx-a100", "gpu", [1], 2, [{2, 3}, {4, 5}, {6, 7}], "an NV12 pair on one NUMA node", {0, 2}),
]


@suite.test
def choices_device_order_would_get_wrong(s):
    objs = []
    for i, (f, kind, busy, _k, _allowed, _what, _dev) in enumerate(BEYOND_DEVICE_ORDER):
        node = "case-%d" % i
        objs += [gpu_node(s, node, f, kind), busy_pod("holder-%d" % i, node, kind, busy)]
    with g.Server(s, g.write_state(s, objs)) as srv:
        for i, (f, kind, busy, k, allowed, what, dev) in enumerate(BEYOND_DEVICE_ORDER):
            node = "case-%d" % i
            topo = topo_of(s, f)
            free = set(range(len(topo["gpus"]))) - set(busy)
            label = "%s %s, GPUs %s busy, %d GPUs" % (f, kind, busy, k)
            s.check(dev not in allowed and set_score(topo, dev) < best_score(topo, k, free),
                    "%s: (device order would give %s, a worse set)" % (label, sorted(dev)))
            pod = whole_pod("want-%d" % i, kind, k)
            gset, n = explained_set(s, srv.explain(pod), node, "trainer", topo, label)
            s.check(gset in allowed, "%s: explain gives %s" % (label, what), sorted(gset))
            check_scores(s, n, topo, gset, k, label, free=free)
            res = srv.filter(pod, [node])
            s.check_eq(res["NodeNames"], [node], "%s: the filter answers the node" % label, res)
            s.check_eq(decided_set(s, srv.inspect(node), "default/want-%d" % i), gset,
                       "%s: the decision (/inspect/nodes) is the explained set" % label)


@suite.test
def a_pair_on_an_empty_dgx1_keeps_a_quad_free(s):
    topo = topo_of(s, "dgx1-v100")
    node = "dgx1"
    with g.Server(s, g.write_state(s, [gpu_node(s, node, "dgx1-v100", "gpu")])) as srv:
        label = "DGX-1, empty, 2 GPUs"
        gset, n = explained_set(s, srv.explain(whole_pod("pair", "gpu", 2)), node, "trainer", topo, label)
        s.check(gset in DGX1_NV2_PAIRS, "%s: an NV2 pair" % label, sorted(gset))
        check_scores(s, n, topo, gset, 2, label)
        res = srv.filter(whole_pod("pair", "gpu", 2), [node])
        s.check_eq(res["NodeNames"], [node], "%s: the filter answers the node" % label, res)
        s.check_eq(decided_set(s, srv.inspect(node), "default/pair"), gset, "%s: the decision is that pair" % label)
        label4 = "DGX-1 after a pair, 4 GPUs"
        gset4, n4 = explained_set(s, srv.explain(whole_pod("quad", "gpu", 4)), node, "trainer", topo, label4)
        s.check(gset4 in DGX1_QUADS and not (gset4 & gset), "%s: the other quad is still whole" % label4,
                sorted(gset4))
        s.check_eq(n4.get("gpuSetScore"), n4.get("gpuSetBest"), "%s: at the best possible score" % label4)


@suite.test
def prioritize_prefers_a_node_with_an_nvlinked_set(s):
    topo = topo_of(s, "dgx1-v100")
    pcie = topo_of(s, "pcie8-2socket")
    # GPUs 0 and 4 busy: every fully NVLinked quad ({0,1,2,3}, {4,5,6,7}) is broken.
    for kind in ("gpu", "vcuda"):
        objs = [gpu_node(s, "dgx1-broken", "dgx1-v100", kind), gpu_node(s, "dgx1-intact", "dgx1-v100", kind),
                gpu_node(s, "pcie", "pcie8-2socket", kind),
                busy_pod("holder-0", "dgx1-broken", kind, [0]), busy_pod("holder-4", "dgx1-broken", kind, [4])]
        names = ["dgx1-broken", "pcie", "dgx1-intact"]
        state = g.write_state(s, objs)
        label = "%s, 4 GPUs" % kind
        with g.Server(s, state, ["--placement", "bind"]) as srv:
            pod = whole_pod("quad", kind, 4)
            res = srv.filter(pod, names)
            s.check_eq(sorted(res["NodeNames"]), sorted(names), "%s: bind mode: every node fits" % label, res)
            pr = srv.prioritize(pod, names)
            scores = g.scores_of(pr, names) or {}
            s.check_eq(sorted(scores), sorted(names), "%s: prioritize scores the nodes sent, in order" % label, pr)
            s.check(all(0 <= v <= 10 for v in scores.values()), "%s: scores are 0..10" % label, scores)
            s.check(scores.get("dgx1-intact", -1) > scores.get("dgx1-broken", 99),
                    "%s: the DGX-1 with an NVLinked quad ranks above the broken one" % label, scores)
            s.check(scores.get("dgx1-intact", -1) > scores.get("pcie", 99),
                    "%s: the DGX-1 with an NVLinked quad ranks above the PCIe server" % label, scores)

            ans = srv.explain(pod)
            s.check_eq(ans["nodes"][0]["node"], "dgx1-intact", "%s: explain ranks dgx1-intact first" % label,
                       [(n["node"], n["score"]) for n in ans["nodes"]])
            # Best first by the service's own 0..1000 score, so equal 0..10 scores need not be in name order.
            shown = [n["score"] for n in ans["nodes"]]
            s.check_eq(shown, sorted(shown, reverse=True), "%s: explain is ordered best first" % label)
            # prioritize answers relative to the request's lowest score; explain is absolute.
            low = min(n["score"] for n in ans["nodes"] if n["node"] in names)
            for n in ans["nodes"]:
                s.check_eq(n["score"] - low, scores.get(n["node"]), "%s: explain and prioritize agree on %s"
                           % (label, n["node"]))
            broken, nb = explained_set(s, ans, "dgx1-broken", "trainer", topo, label + " on dgx1-broken")
            s.check(not all_nv(topo, broken), "%s: the broken node can give no fully NVLinked quad" % label,
                    sorted(broken))
            check_scores(s, nb, topo, broken, 4, label + " on dgx1-broken", free={1, 2, 3, 5, 6, 7})
            s.check(nb["gpuSetScore"] < nb["gpuSetBest"], "%s: the broken node's set is below its best" % label, nb)
            intact, ni = explained_set(s, ans, "dgx1-intact", "trainer", topo, label + " on dgx1-intact")
            s.check(intact in DGX1_QUADS, "%s: the intact node gives a quad" % label, sorted(intact))
            s.check_eq(ni["gpuSetScore"], ni["gpuSetBest"], "%s: the intact node's set is its best" % label)
            pset, npc = explained_set(s, ans, "pcie", "trainer", pcie, label + " on pcie")
            check_scores(s, npc, pcie, pset, 4, label + " on pcie")

        # Filter mode picks that node and records a quad there.
        with g.Server(s, state) as srv:
            res = srv.filter(whole_pod("quad", kind, 4), names)
            s.check_eq(res["NodeNames"], ["dgx1-intact"], "%s: filter mode answers dgx1-intact" % label, res)
            s.check_in("dgx1-intact", g.failed_reason(res, "dgx1-broken") or "",
                       "%s: the broken node fails as assigned elsewhere" % label)
            s.check(decided_set(s, srv.inspect("dgx1-intact"), "default/quad") in DGX1_QUADS,
                    "%s: the decision is a quad on dgx1-intact" % label)
            # With the intact node's quads now half taken, the next 4-GPU pod goes where the best set is.
            res = srv.filter(whole_pod("quad-2", kind, 4), names)
            s.check_eq(res["NodeNames"], ["dgx1-intact"], "%s: the second quad fits on dgx1-intact too" % label,
                       res)
            s.check(decided_set(s, srv.inspect("dgx1-intact"), "default/quad-2") in DGX1_QUADS,
                    "%s: the second decision is the other quad" % label)


if __name__ == "__main__":
    suite.main()
