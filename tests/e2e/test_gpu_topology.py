#!/usr/bin/env python3
"""The gpu-topology binary (design.md section 5, issue 4 item 4).

  - --help lists every flag; bad flags exit 2 with one line naming the flag;
  - every nvidia-smi fixture (tests/fixtures/nvidia-smi), with its CSV where
    there is one, prints an annotation that parses, has the fixture's link
    classes (read here independently, plus hand-written expectations from the
    link tables), NUMA nodes and CSV facts, and that the service accepts;
  - malformed input: exit 1 with the file, line and column in the message;
  - device minors from a fake /proc/driver/nvidia/gpus (--proc-dir): by PCI
    bus order, by UUID when the CSV gives UUIDs, ignored when they do not fit;
  - a fake nvidia-smi (a shell script) through --nvidia-smi and through PATH,
    with the exact arguments; its failures, a missing one and a hanging one;
  - --patch-node against the API simulator: exactly one merge patch, none when
    the value is unchanged, other annotations kept, in-cluster config, retry
    on a 500, a missing node, a refused patch;
  - --interval: repeats, patches only changes, survives a failed round, stops
    on SIGTERM with exit 0 (also while nvidia-smi hangs).

gpu-topology is looked for next to --binary (the gpu-quota-admission binary).
Standalone: python3 test_gpu_topology.py --binary PATH --source-dir REPO
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_gpu_topology")

ANNOTATION = "gpu-admission.io/topology"
QUERY_ARGS = ["--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader"]
FLAGS = ["topo-file", "query-file", "nvidia-smi", "proc-dir", "patch-node", "kubeconfig", "interval", "once",
         "timeout", "log-level", "v", "log-format", "version", "help"]
FIXTURES = ["dgx1-v100", "dgx-a100", "hgx-h100", "pcie8-2socket", "t4x4", "gh200x4", "p100x4-legacy"]
LINK_RE = re.compile(r"^(X|NV[1-9][0-9]*|PIX|PXB|PHB|NODE|SYS)$")

# Written down from the link tables of the fixtures (nvidia-smi topo -m).
EXPECTED = {
    "dgx1-v100": {"count": 8, "numa": [-1] * 8, "links": {(0, 1): "NV1", (0, 2): "NV1", (0, 3): "NV2", (0, 4): "NV2",
                                                       (0, 5): "SYS", (1, 2): "NV2", (1, 5): "NV2", (2, 6): "NV1",
                                                       (3, 7): "NV1", (4, 7): "NV2", (5, 6): "NV2", (6, 7): "NV2",
                                                       (3, 4): "SYS"},
                  "model": "Tesla V100-SXM2-32GB", "memory": 32768},
    "dgx-a100": {"count": 8, "numa": [3, 3, 1, 1, 7, 7, 5, 5], "all": "NV12",
                 "model": "NVIDIA A100-SXM4-80GB", "memory": 81920},
    "hgx-h100": {"count": 8, "numa": [0, 0, 0, 0, 1, 1, 1, 1], "all": "NV18",
                 "model": "NVIDIA H100 80GB HBM3", "memory": 81559},
    "pcie8-2socket": {"count": 8, "numa": [0, 0, 0, 0, 1, 1, 1, 1],
                      "links": {(0, 1): "PIX", (2, 3): "PIX", (4, 5): "PIX", (6, 7): "PIX", (0, 2): "PXB",
                                (1, 3): "PXB", (4, 6): "NODE", (5, 7): "NODE", (0, 4): "SYS", (3, 7): "SYS"},
                      "model": "NVIDIA L40S", "memory": 46068},
    "t4x4": {"count": 4, "numa": [0, 0, 1, 1], "links": {(0, 1): "PHB", (2, 3): "NODE", (0, 2): "SYS", (1, 3): "SYS"},
             "model": "Tesla T4", "memory": 15360},
    # NUMA Affinity (0..3), not GPU NUMA ID (4, 12, 20, 28).
    "gh200x4": {"count": 4, "numa": [0, 1, 2, 3], "all": "NV6", "model": "NVIDIA GH200 480GB", "memory": 97871},
    # SOC (pre-NODE drivers) reads as SYS; no NUMA column, no CSV.
    "p100x4-legacy": {"count": 4, "numa": [-1] * 4, "links": {(0, 1): "PHB", (2, 3): "PHB", (0, 2): "SYS",
                                                              (1, 3): "SYS"}},
}


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def has_csv(s, name):
    return os.path.exists(g.smi_fixture(s, name, "query.csv"))


def run(s, args, env=None, timeout=60, what=None):
    """Run gpu-topology; checks that stderr carries no sanitizer report."""
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("GQA_") or k.startswith("KUBERNETES_"):
            del e[k]
    e.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    if env:
        e.update(env)
    p = subprocess.run([g.topo_binary(s)] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=e, timeout=timeout)
    r = g.Run(p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"))
    rep = g.sanitizer_report(r.err)
    s.check(rep is None, "no sanitizer report from gpu-topology %s" % (what or " ".join(args))[:100],
            "%s\n%s" % (rep, r.err[-4000:]))
    return r


def fixture_args(s, name, csv=True):
    args = ["--topo-file", g.smi_fixture(s, name, "topo.txt")]
    if csv and has_csv(s, name):
        args += ["--query-file", g.smi_fixture(s, name, "query.csv")]
    return args


def annotation_of(s, name, csv=True, extra=()):
    r = run(s, fixture_args(s, name, csv) + list(extra))
    s.require(r.code == 0, "%s: exit 0" % name, r)
    lines = r.out.splitlines()
    s.require(len(lines) == 1, "%s: one line on stdout" % name, r)
    return lines[0], json.loads(lines[0])


def read_matrix(path):
    """The GPU-to-GPU link classes of a topo -m text, read independently of
    the C parser: the header's GPU<n> columns, then each GPU<n> row's first
    cells. SOC is the old name of SYS."""
    with open(path) as f:
        lines = f.read().splitlines()
    header = lines[0].split()
    ngpu = sum(1 for w in header if re.match(r"^GPU\d+$", w))
    rows = []
    for ln in lines[1:]:
        cells = ln.split()
        if cells and re.match(r"^GPU\d+$", cells[0]):
            rows.append(["SYS" if c == "SOC" else c for c in cells[1:ngpu + 1]])
    return rows


def read_csv(path):
    out = {}
    with open(path) as f:
        for ln in f:
            if ln.strip():
                idx, uuid, name, mem = [x.strip() for x in ln.split(",")]
                out[int(idx)] = (uuid, name, int(mem.split()[0]))
    return out


def write_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_smi(s, topo, csv, name="nvidia-smi", exit_code=0, extra=""):
    """A shell script that prints topo for `topo -m` and csv for the query,
    appending its arguments to args.log beside it."""
    d = s.tempdir("fake-smi")
    log = os.path.join(d, "args.log")
    script = """#!/bin/sh
echo "$*" >> '%s'
%s
case "$1" in
  topo) cat '%s' ;;
  --query-gpu=*) cat '%s' ;;
  *) echo "unexpected arguments: $*" >&2; exit 64 ;;
esac
exit %d
""" % (log, extra, topo, csv, exit_code)
    return write_exec(os.path.join(d, name), script), log


def read_log(path):
    try:
        with open(path) as f:
            return [ln.rstrip("\n") for ln in f]
    except OSError:
        return []


INFO_TEMPLATE = """Model: \t\t %(model)s
IRQ:   \t\t %(irq)d
GPU UUID: \t %(uuid)s
Video BIOS: \t 88.00.4f.00.09
Bus Type: \t PCIe
DMA Size: \t 47 bits
DMA Mask: \t 0x7fffffffffff
Bus Location: \t %(bus)s
Device Minor: \t %(minor)d
GPU Excluded:\t No
"""


def fake_proc(s, entries):
    """entries: list of (bus, minor, uuid); one DIR/<bus>/information each."""
    d = s.tempdir("proc")
    for i, (bus, minor, uuid) in enumerate(entries):
        os.makedirs(os.path.join(d, bus))
        with open(os.path.join(d, bus, "information"), "w") as f:
            f.write(INFO_TEMPLATE % {"model": "Tesla V100-SXM2-32GB", "irq": 90 + i, "uuid": uuid, "bus": bus,
                                     "minor": minor})
    return d


# The API simulator, in-process (tests/apisim/apisim.py, standard library only).
TOKEN = "topology-token-1"


wait_until = g.wait_until


class Cluster:
    """The simulator over HTTPS with one bearer token; .kubeconfig() points at it."""

    def __init__(self, s, tokens=(TOKEN,)):
        self.apisim = g.import_apisim(s)
        pki = getattr(s, "_topo_pki", None)
        if pki is None:
            pki = s.tempdir("pki")
            self.apisim.make_pki(pki)
            s._topo_pki = pki
        self.ca_file = os.path.join(pki, "ca.crt")
        self.dir = s.tempdir("cluster")
        self.tokens = list(tokens)
        self.sim = self.apisim.APISim(tokens=self.tokens, tls_cert=os.path.join(pki, "server.crt"),
                                      tls_key=os.path.join(pki, "server.key"))

    def __enter__(self):
        self.sim.start()
        return self

    def __exit__(self, *exc):
        self.sim.stop()
        return False

    def kubeconfig(self):
        return self.sim.write_kubeconfig(os.path.join(self.dir, "kubeconfig.json"), token=self.tokens[0],
                                         ca_file=self.ca_file)

    def add_node(self, obj):
        return self.sim.create("nodes", json.loads(json.dumps(obj)))

    def requests_since(self, seq):
        return self.sim.requests(seq)

    def last_seq(self):
        reqs = self.sim.requests(0)
        return reqs[-1]["seq"] if reqs else 0


def node_obj(name, annotations=None):
    n = g.node(name, g.pgpu(8))
    if annotations:
        n["metadata"]["annotations"] = dict(annotations)
    return n


def api_calls(reqs, node):
    path = "/api/v1/nodes/" + node
    return [r for r in reqs if r["path"] == path]


def patches(reqs, node):
    return [r for r in api_calls(reqs, node) if r["method"] == "PATCH"]


def gets(reqs, node):
    return [r for r in api_calls(reqs, node) if r["method"] == "GET"]


def node_annotation(c, name):
    return (c.sim.get("nodes", name)["metadata"].get("annotations") or {}).get(ANNOTATION)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

@suite.test
def binary_is_built(s):
    s.require(os.access(g.topo_binary(s), os.X_OK), "gpu-topology is built next to gpu-quota-admission",
              g.topo_binary(s))


@suite.test
def help_lists_every_flag(s):
    r = run(s, ["--help"])
    s.check_eq(r.code, 0, "--help exits 0", r)
    listed = set(re.findall(r"^\s+--([a-z][a-z0-9-]*)", r.out, re.M))
    for f in FLAGS:
        s.check(f in listed, "--help lists --%s" % f, r.out)
    s.check(listed <= set(FLAGS), "--help lists no flag the test does not know", sorted(listed - set(FLAGS)))
    s.check_in("Exit codes", r.out, "--help explains the exit codes")
    v = run(s, ["--version"])
    s.check(v.code == 0 and v.out.startswith("gpu-topology "), "--version prints the version", v)


@suite.test
def bad_flags_exit_2_with_one_line(s):
    topo = g.smi_fixture(s, "t4x4", "topo.txt")
    cases = [
        (["--bogus"], "--bogus"),
        (["--topo-file"], "--topo-file"),
        (["--interval", "soon"], "--interval"),
        (["--interval", "10ms"], "--interval"),
        (["--interval=-1s"], "--interval"),
        (["--timeout", "0"], "--timeout"),
        (["--patch-node", "Not_A_Node"], "--patch-node"),
        (["--patch-node", "-node"], "--patch-node"),
        (["--log-level", "loud"], "--log-level"),
        (["--log-format", "xml"], "--log-format"),
        (["--once=yes"], "--once"),
        (["--once", "--interval", "1m", "--topo-file", topo], "--once"),
        (["--kubeconfig", "/nonexistent", "--topo-file", topo], "--kubeconfig"),
        (["--nvidia-smi", ""], "--nvidia-smi"),
        (["stray", "--topo-file", topo], "stray"),
    ]
    for args, name in cases:
        r = run(s, args)
        label = " ".join(args)
        s.check_eq(r.code, 2, "%s: exit 2" % label, r)
        lines = [ln for ln in r.err.splitlines() if ln.strip()]
        s.check_eq(len(lines), 1, "%s: exactly one line on stderr" % label, r.err)
        s.check_in(name, r.err, "%s: the message names %s" % (label, name))
        s.check_eq(r.out, "", "%s: nothing on stdout" % label)
    # Forms that are fine.
    for args in (["--interval", "0"] + fixture_args(s, "t4x4"), ["--once", "--timeout=5s"] + fixture_args(s, "t4x4"),
                 ["--log-format", "json", "--log-level", "debug"] + fixture_args(s, "t4x4")):
        r = run(s, args)
        s.check_eq(r.code, 0, "%s: exit 0" % " ".join(args), r)


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------

@suite.test
def fixtures_print_the_expected_annotation(s):
    for name in FIXTURES:
        text, ann = annotation_of(s, name)
        exp = EXPECTED[name]
        s.check_eq(ann.get("version"), 1, "%s: version 1" % name)
        s.check_eq(len(ann["gpus"]), exp["count"], "%s: GPU count" % name)
        s.check_eq(text, json.dumps(ann, separators=(",", ":"), ensure_ascii=False), "%s: compact JSON" % name)
        links = ann["links"]
        s.check_eq(links, read_matrix(g.smi_fixture(s, name, "topo.txt")), "%s: links are the fixture's matrix" % name)
        for i, row in enumerate(links):
            for j, cell in enumerate(row):
                s.check(bool(LINK_RE.match(cell)), "%s: links[%d][%d] %r is a known class" % (name, i, j, cell))
                s.check((cell == "X") == (i == j), "%s: X exactly on the diagonal at [%d][%d]" % (name, i, j))
                s.check_eq(cell, links[j][i], "%s: links[%d][%d] symmetric" % (name, i, j))
        for (i, j), want in exp.get("links", {}).items():
            s.check_eq(links[i][j], want, "%s: GPU%d-GPU%d is %s" % (name, i, j, want))
        if "all" in exp:
            off = {links[i][j] for i in range(exp["count"]) for j in range(exp["count"]) if i != j}
            s.check_eq(off, {exp["all"]}, "%s: every pair is %s" % (name, exp["all"]))
        s.check_eq([gp["numa"] for gp in ann["gpus"]], exp["numa"], "%s: NUMA nodes" % name)
        s.check_eq([gp["index"] for gp in ann["gpus"]], list(range(exp["count"])), "%s: indices" % name)
        s.check_eq([gp["minor"] for gp in ann["gpus"]], list(range(exp["count"])), "%s: minor = index" % name)
        if has_csv(s, name):
            csv = read_csv(g.smi_fixture(s, name, "query.csv"))
            for gp in ann["gpus"]:
                uuid, model, mem = csv[gp["index"]]
                s.check_eq((gp.get("uuid"), gp.get("model"), gp.get("memoryMiB")), (uuid, model, mem),
                           "%s: GPU %d uuid, model, memory from the CSV" % (name, gp["index"]))
            s.check_eq(model, exp["model"], "%s: model" % name)
            s.check_eq(mem, exp["memory"], "%s: memory" % name)
        else:
            s.check(all("uuid" not in gp for gp in ann["gpus"]), "%s: no CSV, no uuid" % name, ann["gpus"])
        # Without the CSV the links are the same.
        if has_csv(s, name):
            _, bare = annotation_of(s, name, csv=False)
            s.check_eq(bare["links"], links, "%s: same links without the CSV" % name)


@suite.test
def the_service_accepts_what_it_prints(s):
    objs = []
    printed = {}
    for name in FIXTURES:
        text, ann = annotation_of(s, name)
        printed[name] = ann
        n = g.node(name, g.pgpu(len(ann["gpus"])))
        n["metadata"]["annotations"] = {ANNOTATION: text}
        objs.append(n)
    state = g.write_state(s, objs)
    with g.Server(s, state) as srv:
        nodes = {n["node"]: n for n in srv.inspect()}
        for name in FIXTURES:
            s.require(name in nodes, "%s is in /inspect/nodes" % name, sorted(nodes))
            topo = nodes[name].get("topology")
            s.check(topo is not None, "%s: /inspect/nodes shows a topology" % name, nodes[name])
            if topo:
                s.check_eq(topo.get("links"), printed[name]["links"], "%s: the service read the links" % name)
                s.check_eq([x.get("numa") for x in topo.get("gpus", [])], [x["numa"] for x in printed[name]["gpus"]],
                           "%s: the service read the NUMA nodes" % name)


# ---------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------

@suite.test
def malformed_input_exits_1_with_line_and_column(s):
    with open(g.smi_fixture(s, "dgx1-v100", "topo.txt")) as f:
        lines = f.read().split("\n")
    # Line 5 is GPU3's row; its fifth cell (GPU3-GPU4, "SYS") becomes "NVX".
    row = lines[4].split("\t")
    s.require(row[0] == "GPU3" and row[5] == "SYS", "fixture row as expected", row)
    col = len("\t".join(row[:5])) + 2
    row[5] = "NVX"
    lines[4] = "\t".join(row)
    bad = g.write_file(s, "bad.topo.txt", "\n".join(lines))
    r = run(s, ["--topo-file", bad, "--query-file", g.smi_fixture(s, "dgx1-v100", "query.csv")])
    s.check_eq(r.code, 1, "bad link: exit 1", r)
    s.check_eq(r.out, "", "bad link: nothing on stdout")
    s.check_in("line 5, column %d" % col, r.err, "bad link: the message names line 5 and the column")
    s.check_in("bad.topo.txt", r.err, "bad link: the message names the file")
    s.check_in("NVX", r.err, "bad link: the message shows the token")

    # Asymmetric matrix.
    lines2 = open(g.smi_fixture(s, "t4x4", "topo.txt")).read().split("\n")
    lines2[2] = lines2[2].replace("PHB", "PIX", 1)      # GPU1-GPU0 differs from GPU0-GPU1
    bad2 = g.write_file(s, "asym.topo.txt", "\n".join(lines2))
    r = run(s, ["--topo-file", bad2])
    s.check_eq(r.code, 1, "asymmetric: exit 1", r)
    s.check(re.search(r"line 3, column \d+", r.err) is not None, "asymmetric: line 3 and a column", r.err)

    # A CSV with a bad memory field (line 2, the 4th field).
    csv = open(g.smi_fixture(s, "t4x4", "query.csv")).read().split("\n")
    csv[1] = csv[1].replace("15360 MiB", "lots")
    bad3 = g.write_file(s, "bad.query.csv", "\n".join(csv))
    r = run(s, ["--topo-file", g.smi_fixture(s, "t4x4", "topo.txt"), "--query-file", bad3])
    s.check_eq(r.code, 1, "bad CSV: exit 1", r)
    s.check(re.search(r"bad\.query\.csv: query CSV line 2, column \d+", r.err) is not None,
            "bad CSV: file, line 2 and a column", r.err)

    # A CSV of another machine (4 GPUs against 8).
    r = run(s, ["--topo-file", g.smi_fixture(s, "dgx1-v100", "topo.txt"), "--query-file", g.smi_fixture(s, "t4x4", "query.csv")])
    s.check_eq(r.code, 1, "CSV of the wrong size: exit 1", r)
    s.check_in("4 GPUs", r.err, "CSV of the wrong size: says so")

    # Not nvidia-smi output at all; an empty file; a missing file.
    for label, text in (("garbage", "hello world\n"), ("empty", "")):
        p = g.write_file(s, label + ".txt", text)
        r = run(s, ["--topo-file", p])
        s.check_eq(r.code, 1, "%s: exit 1" % label, r)
        s.check(re.search(r"line \d+, column \d+", r.err) is not None or "empty" in r.err,
                "%s: a located message" % label, r.err)
    r = run(s, ["--topo-file", "/nonexistent/topo.txt"])
    s.check_eq(r.code, 1, "missing file: exit 1", r)
    s.check_in("/nonexistent/topo.txt", r.err, "missing file: named")


# ---------------------------------------------------------------------------
# Device minors
# ---------------------------------------------------------------------------

DGX1_BUSES = ["0000:06:00.0", "0000:07:00.0", "0000:0a:00.0", "0000:0b:00.0", "0000:85:00.0", "0000:86:00.0",
              "0000:89:00.0", "0000:8a:00.0"]


@suite.test
def minors_from_proc(s):
    csv = read_csv(g.smi_fixture(s, "dgx1-v100", "query.csv"))
    uuids = [csv[i][0] for i in range(8)]
    minors = [3, 2, 1, 0, 7, 6, 5, 4]
    # By bus order (no CSV, so no UUIDs to match); directories created in a scrambled order.
    entries = [(DGX1_BUSES[i], minors[i], uuids[i]) for i in (5, 0, 7, 2, 1, 4, 6, 3)]
    proc = fake_proc(s, entries)
    _, ann = annotation_of(s, "dgx1-v100", csv=False, extra=["--proc-dir", proc])
    s.check_eq([x["minor"] for x in ann["gpus"]], minors, "minors by PCI bus order")

    # With the CSV, UUIDs decide even when bus order says otherwise.
    swapped = [(DGX1_BUSES[i], minors[i], uuids[7 - i]) for i in range(8)]
    proc2 = fake_proc(s, swapped)
    _, ann = annotation_of(s, "dgx1-v100", extra=["--proc-dir", proc2])
    s.check_eq([x["minor"] for x in ann["gpus"]], list(reversed(minors)), "minors matched by UUID")

    # Upper-case hex and an 8-digit domain parse too.
    odd = [("%08X:%s" % (0, b[5:].upper()), m, u) for b, m, u in entries]
    _, ann = annotation_of(s, "dgx1-v100", csv=False, extra=["--proc-dir", fake_proc(s, odd)])
    s.check_eq([x["minor"] for x in ann["gpus"]], minors, "minors with upper-case, 8-digit bus ids")

    # Seven GPUs in /proc for eight in the matrix: ignored with a warning.
    proc3 = fake_proc(s, entries[:7])
    r = run(s, fixture_args(s, "dgx1-v100") + ["--proc-dir", proc3])
    s.check_eq(r.code, 0, "a short /proc: still exit 0", r)
    s.check_eq([x["minor"] for x in json.loads(r.out)["gpus"]], list(range(8)), "a short /proc: minor = index")
    s.check_in("7 GPUs", r.err, "a short /proc: warned")

    # An information file without Device Minor: ignored with a warning.
    proc4 = fake_proc(s, entries)
    with open(os.path.join(proc4, DGX1_BUSES[2], "information"), "w") as f:
        f.write("Model: \t Tesla V100\nBus Location: \t %s\n" % DGX1_BUSES[2])
    r = run(s, fixture_args(s, "dgx1-v100") + ["--proc-dir", proc4])
    s.check_eq(r.code, 0, "no Device Minor: exit 0", r)
    s.check_eq([x["minor"] for x in json.loads(r.out)["gpus"]], list(range(8)), "no Device Minor: minor = index")
    s.check_in("Device Minor", r.err, "no Device Minor: warned")

    # Duplicate minors would break the annotation's rules: not used.
    dup = [(b, 0, u) for b, _m, u in entries]
    r = run(s, fixture_args(s, "dgx1-v100") + ["--proc-dir", fake_proc(s, dup)])
    s.check_eq(r.code, 0, "duplicate minors: exit 0", r)
    s.check_eq([x["minor"] for x in json.loads(r.out)["gpus"]], list(range(8)), "duplicate minors: minor = index")

    # A missing directory is the normal case on a machine without the driver: quiet.
    r = run(s, fixture_args(s, "dgx1-v100") + ["--proc-dir", os.path.join(proc, "nope")])
    s.check_eq(r.code, 0, "missing /proc dir: exit 0", r)
    s.check_eq(r.err.strip(), "", "missing /proc dir: nothing logged at info level", r.err)


# ---------------------------------------------------------------------------
# Running nvidia-smi
# ---------------------------------------------------------------------------

@suite.test
def fake_nvidia_smi(s):
    for name in ("dgx-a100", "pcie8-2socket"):
        topo, csv = g.smi_fixture(s, name, "topo.txt"), g.smi_fixture(s, name, "query.csv")
        smi, log = fake_smi(s, topo, csv)
        nodir = os.path.join(s.tempdir("noproc"), "gpus")
        r = run(s, ["--nvidia-smi", smi, "--proc-dir", nodir])
        s.check_eq(r.code, 0, "%s via --nvidia-smi: exit 0" % name, r)
        want, _ = annotation_of(s, name)
        s.check_eq(r.out.strip(), want, "%s via --nvidia-smi: same annotation as from the files" % name)
        s.check_eq(read_log(log), ["topo -m", " ".join(QUERY_ARGS)], "%s: nvidia-smi called with the exact arguments"
                   % name)

    # Found through PATH when no --nvidia-smi is given; the default proc dir
    # does not exist here, or its minors are this machine's, so only links are compared.
    topo, csv = g.smi_fixture(s, "hgx-h100", "topo.txt"), g.smi_fixture(s, "hgx-h100", "query.csv")
    smi, log = fake_smi(s, topo, csv)
    r = run(s, [], env={"PATH": os.path.dirname(smi) + os.pathsep + os.environ.get("PATH", "")})
    s.check_eq(r.code, 0, "nvidia-smi from PATH: exit 0", r)
    if r.code == 0:
        s.check_eq(json.loads(r.out)["links"], read_matrix(topo), "nvidia-smi from PATH: the links")
    s.check_eq(len(read_log(log)), 2, "nvidia-smi from PATH: run twice", read_log(log))

    # nvidia-smi fails the way it does without a driver (message on stdout, exit 9).
    d = s.tempdir("smi-fail")
    bad = write_exec(os.path.join(d, "nvidia-smi"), "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't "
                     "communicate with the NVIDIA driver.\"\nexit 9\n")
    r = run(s, ["--nvidia-smi", bad])
    s.check_eq(r.code, 1, "failing nvidia-smi: exit 1", r)
    s.check_eq(r.out, "", "failing nvidia-smi: nothing on stdout")
    s.check_in("status 9", r.err, "failing nvidia-smi: the exit status is reported")
    s.check_in("couldn't communicate with the NVIDIA driver", r.err, "failing nvidia-smi: its message is reported")

    # topo -m works but the query fails (stderr message).
    smi, _ = fake_smi(s, topo, "/nonexistent.csv")
    r = run(s, ["--nvidia-smi", smi, "--proc-dir", ""])
    s.check_eq(r.code, 1, "failing query: exit 1", r)
    s.check_in("--query-gpu", r.err, "failing query: says which run failed")

    # Malformed output from nvidia-smi itself: located too.
    garbage = g.write_file(s, "garbage.txt", "\tGPU0\tGPU1\nGPU0\t X \tNVZ\nGPU1\tNVZ\t X \n")
    smi, _ = fake_smi(s, garbage, csv)
    r = run(s, ["--nvidia-smi", smi, "--proc-dir", ""])
    s.check_eq(r.code, 1, "malformed nvidia-smi output: exit 1", r)
    s.check(re.search(r"nvidia-smi topo -m: line 2, column \d+", r.err) is not None,
            "malformed nvidia-smi output: line and column", r.err)

    # Missing, and not executable.
    r = run(s, ["--nvidia-smi", os.path.join(d, "absent")])
    s.check_eq(r.code, 1, "missing nvidia-smi: exit 1", r)
    s.check_in("No such file", r.err, "missing nvidia-smi: says why")
    noexec = g.write_file(s, "nvidia-smi", "#!/bin/sh\n")
    r = run(s, ["--nvidia-smi", noexec])
    s.check_eq(r.code, 1, "non-executable nvidia-smi: exit 1", r)
    s.check_in("Permission denied", r.err, "non-executable nvidia-smi: says why")

    # A hanging nvidia-smi is killed after --timeout.
    smi, _ = fake_smi(s, topo, csv, extra="sleep 30")
    t0 = time.monotonic()
    r = run(s, ["--nvidia-smi", smi, "--timeout", "500ms"])
    took = time.monotonic() - t0
    s.check_eq(r.code, 1, "hanging nvidia-smi: exit 1", r)
    s.check(took < 10, "hanging nvidia-smi: gives up after the timeout", "%.1fs" % took)
    s.check_in("no answer", r.err, "hanging nvidia-smi: says so")


# ---------------------------------------------------------------------------
# --patch-node
# ---------------------------------------------------------------------------

@suite.test
def patch_node_against_the_simulator(s):
    with Cluster(s) as c:
        c.add_node(node_obj("gpu-node-1", {"keep.example.com/me": "yes"}))
        c.add_node(node_obj("gpu-node-2"))
        kc = c.kubeconfig()
        seq = c.last_seq()
        args = fixture_args(s, "dgx1-v100") + ["--patch-node", "gpu-node-1", "--kubeconfig", kc]
        r = run(s, args)
        s.check_eq(r.code, 0, "first run: exit 0", r)
        printed = r.out.strip()
        s.check_eq(node_annotation(c, "gpu-node-1"), printed, "the node carries the printed annotation")
        ann = c.sim.get("nodes", "gpu-node-1")["metadata"]["annotations"]
        s.check_eq(ann.get("keep.example.com/me"), "yes", "other annotations are kept")
        s.check(node_annotation(c, "gpu-node-2") is None, "the other node is untouched")
        reqs = c.requests_since(seq)
        p = patches(reqs, "gpu-node-1")
        s.check_eq(len(p), 1, "exactly one PATCH", reqs)
        if p:
            s.check_eq(p[0]["contentType"], "application/merge-patch+json", "the PATCH is a JSON merge patch")
            body = p[0]["body"]
            body = json.loads(body) if isinstance(body, str) else body
            s.check_eq(body, {"metadata": {"annotations": {ANNOTATION: printed}}}, "the patch carries only the annotation")
        s.check_eq(len(gets(reqs, "gpu-node-1")), 1, "one GET of the node first")
        s.check_eq(len([q for q in reqs if q["method"] not in ("GET",)]), 1, "no other write", reqs)
        s.check_in("added", r.err, "logged as added")

        # Unchanged: no PATCH.
        seq = c.last_seq()
        rv = c.sim.get("nodes", "gpu-node-1")["metadata"]["resourceVersion"]
        r = run(s, args)
        s.check_eq(r.code, 0, "second run: exit 0", r)
        reqs = c.requests_since(seq)
        s.check_eq(len(patches(reqs, "gpu-node-1")), 0, "second run: no PATCH", reqs)
        s.check_eq(len(gets(reqs, "gpu-node-1")), 1, "second run: one GET")
        s.check_eq(c.sim.get("nodes", "gpu-node-1")["metadata"]["resourceVersion"], rv,
                   "second run: the node's resourceVersion is unchanged")
        s.check_in("unchanged", r.err, "second run: logged as unchanged")

        # A stale value (another machine's) is replaced.
        c.sim.patch("nodes", "gpu-node-1", "merge", {"metadata": {"annotations": {ANNOTATION: '{"version":1}'}}})
        seq = c.last_seq()
        r = run(s, args)
        s.check_eq(r.code, 0, "stale value: exit 0", r)
        s.check_eq(len(patches(c.requests_since(seq), "gpu-node-1")), 1, "stale value: one PATCH")
        s.check_eq(node_annotation(c, "gpu-node-1"), printed, "stale value: replaced")
        s.check_in("updated", r.err, "stale value: logged as updated")

        # A different machine's topology on node 2 through a fake nvidia-smi.
        smi, _ = fake_smi(s, g.smi_fixture(s, "t4x4", "topo.txt"), g.smi_fixture(s, "t4x4", "query.csv"))
        r = run(s, ["--nvidia-smi", smi, "--proc-dir", "", "--patch-node", "gpu-node-2", "--kubeconfig", kc])
        s.check_eq(r.code, 0, "fake nvidia-smi + patch: exit 0", r)
        s.check_eq(node_annotation(c, "gpu-node-2"), annotation_of(s, "t4x4")[0], "node 2 has the T4 topology")

        # A transient 500 is retried; the node still gets its value.
        c.sim.patch("nodes", "gpu-node-2", "merge", {"metadata": {"annotations": {ANNOTATION: None}}})
        c.sim.fail(status=500, count=1, path="/api/v1/nodes/gpu-node-2", method="PATCH")
        seq = c.last_seq()
        r = run(s, fixture_args(s, "t4x4") + ["--patch-node", "gpu-node-2", "--kubeconfig", kc])
        s.check_eq(r.code, 0, "a 500 then success: exit 0", r)
        s.check_eq(len(patches(c.requests_since(seq), "gpu-node-2")), 2, "a 500 then success: two PATCHes")
        s.check(node_annotation(c, "gpu-node-2") is not None, "a 500 then success: annotation written")
        c.sim.clear_faults()

        # A refused PATCH (403) is not retried and fails the run.
        c.sim.patch("nodes", "gpu-node-2", "merge", {"metadata": {"annotations": {ANNOTATION: None}}})
        c.sim.fail(status=403, path="/api/v1/nodes/gpu-node-2", method="PATCH", message="nodes is forbidden")
        seq = c.last_seq()
        r = run(s, fixture_args(s, "t4x4") + ["--patch-node", "gpu-node-2", "--kubeconfig", kc])
        s.check_eq(r.code, 1, "403: exit 1", r)
        s.check_in("403", r.err, "403: reported")
        s.check_eq(len(patches(c.requests_since(seq), "gpu-node-2")), 1, "403: not retried")
        s.check(r.out.strip() != "", "403: the annotation is still printed")
        c.sim.clear_faults()

        # A node that does not exist.
        r = run(s, fixture_args(s, "t4x4") + ["--patch-node", "no-such-node", "--kubeconfig", kc])
        s.check_eq(r.code, 1, "missing node: exit 1", r)
        s.check_in("no-such-node not found", r.err, "missing node: reported")

        # A malformed fixture never reaches the API server.
        seq = c.last_seq()
        bad = g.write_file(s, "bad.txt", "\tGPU0\nGPU0\tNV0\n")
        r = run(s, ["--topo-file", bad, "--patch-node", "gpu-node-1", "--kubeconfig", kc])
        s.check_eq(r.code, 1, "malformed input with --patch-node: exit 1", r)
        s.check_eq(api_calls(c.requests_since(seq), "gpu-node-1"), [], "malformed input: no API request")

        # A kubeconfig that does not exist: exit 1, no crash.
        r = run(s, fixture_args(s, "t4x4") + ["--patch-node", "gpu-node-1", "--kubeconfig", "/nonexistent/kc"])
        s.check_eq(r.code, 1, "missing kubeconfig: exit 1", r)


@suite.test
def patch_node_in_cluster_config(s):
    with Cluster(s, tokens=("sa-token-1",)) as c:
        c.add_node(node_obj("gpu-node-3"))
        sa = s.tempdir("serviceaccount")
        shutil.copy(c.ca_file, os.path.join(sa, "ca.crt"))
        with open(os.path.join(sa, "token"), "w") as f:
            f.write("sa-token-1")
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(c.sim.port),
               "GQA_SERVICEACCOUNT_DIR": sa}
        r = run(s, fixture_args(s, "hgx-h100") + ["--patch-node", "gpu-node-3"], env=env)
        s.check_eq(r.code, 0, "in-cluster: exit 0", r)
        s.check_eq(node_annotation(c, "gpu-node-3"), r.out.strip(), "in-cluster: annotation written")
        # Outside a pod: exit 1 with the reason.
        r = run(s, fixture_args(s, "hgx-h100") + ["--patch-node", "gpu-node-3"])
        s.check_eq(r.code, 1, "no in-cluster environment: exit 1", r)
        s.check_in("KUBERNETES_SERVICE_HOST", r.err, "no in-cluster environment: says why")


# ---------------------------------------------------------------------------
# --interval
# ---------------------------------------------------------------------------

def start(s, args, env=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("GQA_") or k.startswith("KUBERNETES_"):
            del e[k]
    e.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    if env:
        e.update(env)
    d = s.tempdir("interval")
    out, err = os.path.join(d, "stdout"), os.path.join(d, "stderr")
    fo, fe = open(out, "wb"), open(err, "wb")
    p = subprocess.Popen([g.topo_binary(s)] + list(args), stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, env=e,
                         preexec_fn=g._die_with_parent)
    fo.close()
    fe.close()
    return p, out, err


def stop(s, p, label, within=10.0):
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        code = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        code = p.wait()
    took = time.monotonic() - t0
    s.check_eq(code, 0, "%s: exit 0 on SIGTERM" % label)
    s.check(took < within, "%s: stops promptly" % label, "%.2fs" % took)


def text_of(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


@suite.test
def interval_repeats_and_patches_changes_only(s):
    with Cluster(s) as c:
        c.add_node(node_obj("gpu-node-4"))
        kc = c.kubeconfig()
        d = s.tempdir("switch")
        current = os.path.join(d, "current")
        with open(current, "w") as f:
            f.write("dgx1-v100")
        fx = os.path.dirname(g.smi_fixture(s, "t4x4", "topo.txt"))
        smi = write_exec(os.path.join(d, "nvidia-smi"), """#!/bin/sh
name=$(cat '%s')
[ "$name" = fail ] && { echo "GPU is lost" >&2; exit 3; }
case "$1" in
  topo) cat '%s'/"$name".topo.txt ;;
  *) cat '%s'/"$name".query.csv ;;
esac
""" % (current, fx, fx))
        seq = c.last_seq()
        p, out, err = start(s, ["--nvidia-smi", smi, "--proc-dir", "", "--interval", "200ms",
                                "--patch-node", "gpu-node-4", "--kubeconfig", kc])
        try:
            first = c.sim.wait_for_request(lambda q: q["method"] == "PATCH" and q["path"].endswith("/gpu-node-4"),
                                           timeout=15, since=seq)
            s.require(first is not None, "interval: the first round patches", text_of(err))
            # Several unchanged rounds: GETs, no PATCH.
            ok = wait_until(lambda: len(gets(c.requests_since(first["seq"]), "gpu-node-4")) >= 3, timeout=15)
            s.check(ok, "interval: rounds repeat (GETs)", text_of(err))
            s.check_eq(len(patches(c.requests_since(seq), "gpu-node-4")), 1, "interval: unchanged rounds do not patch")
            s.check_eq(node_annotation(c, "gpu-node-4"), annotation_of(s, "dgx1-v100")[0], "interval: DGX-1 value")
            # A failing round is logged; the loop goes on.
            with open(current, "w") as f:
                f.write("fail")
            s.check(wait_until(lambda: "GPU is lost" in text_of(err), timeout=15), "interval: a failed round is logged")
            s.check(p.poll() is None, "interval: still running after a failed round")
            # The hardware "changes": exactly one more PATCH with the new value.
            with open(current, "w") as f:
                f.write("dgx-a100")
            want = annotation_of(s, "dgx-a100")[0]
            s.check(wait_until(lambda: node_annotation(c, "gpu-node-4") == want, timeout=15),
                    "interval: the new value is published")
            # Two more rounds (each GETs the node) after the second PATCH: neither patches again.
            second = patches(c.requests_since(seq), "gpu-node-4")[-1]
            s.check(wait_until(lambda: len(gets(c.requests_since(second["seq"]), "gpu-node-4")) >= 2, timeout=15),
                    "interval: rounds go on after the change", text_of(err))
            s.check_eq(len(patches(c.requests_since(seq), "gpu-node-4")), 2, "interval: one PATCH per change")
        finally:
            stop(s, p, "interval")
        printed = [ln for ln in text_of(out).splitlines() if ln.strip()]
        s.check_eq(len(printed), 2, "interval: stdout has each distinct value once", printed)
        rep = g.sanitizer_report(text_of(err))
        s.check(rep is None, "interval: no sanitizer report", "%s\n%s" % (rep, text_of(err)[-4000:]))


@suite.test
def interval_stops_while_nvidia_smi_hangs(s):
    smi, calls = fake_smi(s, g.smi_fixture(s, "t4x4", "topo.txt"), g.smi_fixture(s, "t4x4", "query.csv"), extra="sleep 60")
    p, out, err = start(s, ["--nvidia-smi", smi, "--interval", "1s", "--timeout", "60s", "--proc-dir", ""])
    s.check(wait_until(lambda: read_log(calls), timeout=15), "hanging nvidia-smi: it has been started")
    s.check(p.poll() is None, "hanging nvidia-smi: still running")
    stop(s, p, "hanging nvidia-smi", within=5.0)
    s.check_in("received", text_of(err), "hanging nvidia-smi: the stop is logged")
    rep = g.sanitizer_report(text_of(err))
    s.check(rep is None, "hanging nvidia-smi: no sanitizer report", "%s\n%s" % (rep, text_of(err)[-4000:]))


if __name__ == "__main__":
    suite.main()
