#!/usr/bin/env python3
"""HAMi vGPUs end to end, without decisions (docs/hami.md).

Offline, a mixed cluster of GPU-Manager, MPS, whole-GPU and HAMi nodes (one
with a malformed registration beside GPU-Manager resources):
  - each family's pod fits only where it belongs, with the documented
    reasons elsewhere; nvidia.com/gpu alone fits whole-GPU and HAMi nodes;
  - the explanation of a HAMi misfit names the GPU, its UUID and the numbers;
  - /inspect/nodes shows the HAMi GPUs by index and UUID with memory in MiB,
    the pods holding them, and why a registration is unusable;
  - --hami-* flags take effect, and bad values are refused (exit 2).
Live, against the API simulator with the stand-in for HAMi's device plugin
(tests/hamisim) registering a node:
  - the registration, a pod's allocation and its end reach /inspect/nodes;
  - with --hami-handshake write, the service writes the requests, and a
    plugin that leaves them unanswered loses its devices;
  - a handshake left unanswered past --hami-handshake-timeout with no
    nvidia.com/gpu advertised takes the devices away (unresolvable filter
    answer with the reason) until the plugin answers again.

Standalone: python3 test_hami.py --binary PATH --source-dir REPO
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_hami")

U = ["GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec", "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448",
     "GPU-2c2c2c2c-0000-0000-0000-000000000002", "GPU-3d3d3d3d-0000-0000-0000-000000000003"]
V100 = "NVIDIA-Tesla V100-PCIE-32GB"
REGISTER = "hami.io/node-nvidia-register"


def register(devices):
    """9-field entries: (uuid, memory MiB, index)."""
    return "".join("%s,10,%d,100,%s,0,true,%d,hami-core:" % (u, mem, V100, i) for u, mem, i in devices)


def hami_node(name, reg, vgpus=40, extra=None):
    n = g.node(name, dict({"nvidia.com/gpu": vgpus}, **(extra or {})))
    n["metadata"]["annotations"] = {REGISTER: reg, "hami.io/node-handshake": "Reported_2025-11-20 10:00:00"}
    return n


def mixed_state():
    held = g.pod("held", g.vgpu(1, 30000, cores=30), namespace="t", node="hami-0", phase="Running",
                 annotations={"hami.io/vgpu-devices-allocated": U[1] + ",NVIDIA,30000,30:;",
                              "hami.io/vgpu-devices-to-allocate": ";", "hami.io/vgpu-node": "hami-0"})
    return g.write_state(suite, [
        g.node("vcuda-0", g.vcuda(400, 128)),
        g.node("mps-0", g.mps(400, 64)),
        g.node("whole-0", g.pgpu(4)),
        hami_node("hami-0", register([(U[0], 32768, 0), (U[1], 32768, 2)]), vgpus=20),
        hami_node("broken-0", U[2] + ",10,lots,100," + V100 + ",0,true:", extra=g.vcuda(200, 64)),
        held,
    ])


NAMES = ["vcuda-0", "mps-0", "whole-0", "hami-0", "broken-0"]
NOT_HAMI = ("node is not a HAMi node (no hami.io/node-nvidia-register annotation); container \"main\" asks for "
            "HAMi vGPUs (nvidia.com/gpumem, nvidia.com/gpumem-percentage or nvidia.com/gpucores)")
BROKEN = ("the HAMi registration (hami.io/node-nvidia-register) is unusable: entry 0: memory \"lots\" is not a MiB "
          "count in 1..16777216")


def filter_answer(srv, limits):
    body = srv.filter(g.pod("new", limits, namespace="t"), NAMES)
    suite.check_eq(body.get("Error"), "", "filter answers without Error")
    return body


@suite.test
def families_fit_where_they_belong(_s):
    with g.Server(suite, mixed_state(), ["--placement", "bind"]) as srv:
        a = filter_answer(srv, g.vcuda(50, 8))
        suite.check_eq(sorted(a["NodeNames"]), ["broken-0", "vcuda-0"],
                       "a vcuda pod fits the GPU-Manager nodes, the broken HAMi one included")
        a = filter_answer(srv, g.mps(50, 8))
        suite.check_eq(a["NodeNames"], ["mps-0"], "an MPS pod fits the MPS node only")
        a = filter_answer(srv, g.vgpu(1, 2000, cores=20))
        suite.check_eq(a["NodeNames"], ["hami-0"], "a vGPU pod with gpumem fits the HAMi node only")
        unres = a["FailedAndUnresolvableNodes"]
        for n in ("vcuda-0", "mps-0", "whole-0"):
            suite.check_eq(unres.get(n), NOT_HAMI, "%s is not a HAMi node" % n)
        suite.check_eq(unres.get("broken-0"), BROKEN, "the malformed registration is the reason on broken-0")
        a = filter_answer(srv, g.vgpu(1))
        suite.check_eq(sorted(a["NodeNames"]), ["hami-0", "whole-0"],
                       "nvidia.com/gpu alone: a whole GPU, or a vGPU with the whole memory on a HAMi node")
        suite.check("broken-0" in a["FailedAndUnresolvableNodes"],
                    "nvidia.com/gpu never counts whole GPUs on a HAMi node, even a broken one")
        # 6000 MiB: GPU 0 has all its 32768 MiB, GPU 2 only 2768 left.
        e = srv.explain(g.pod("big", g.vgpu(2, 6000, cores=10), namespace="t"))
        hami = [n for n in e["nodes"] if n["node"] == "hami-0"][0]
        suite.check_eq(hami["reason"],
                       "container \"main\" needs 2 vGPUs on different GPUs, each with 6000 MiB and 10% cores; only 1 "
                       "GPU can take one: GPU 2 (GPU-0fc3\u2026) has 2768 MiB free, container needs 6000",
                       "the explanation names the GPU, its UUID and the numbers")
        suite.check(not hami["fits"], "two 6000 MiB vGPUs do not fit")


@suite.test
def inspect_shows_hami_gpus(_s):
    with g.Server(suite, mixed_state(), ["--placement", "bind"]) as srv:
        n = srv.get_json("/inspect/nodes/hami-0")
        suite.check_eq(n["gpuCount"], 0, "no whole GPUs on the HAMi node")
        h = n.get("hami") or {}
        suite.check_eq(h.get("usable"), True, "the HAMi devices are usable")
        devs = h.get("devices") or []
        suite.check_eq([(d["index"], d["uuid"]) for d in devs], [(0, U[0]), (2, U[1])], "GPUs by index and UUID")
        suite.check_eq([(d["memoryUsedMiB"], d["memoryTotalMiB"], d["tasks"], d["split"], d["coreUsed"]) for d in devs],
                       [(0, 32768, 0, 10, 0), (30000, 32768, 1, 10, 30)], "memory in MiB, tasks and cores per GPU")
        suite.check_eq(devs[1]["pods"], ["t/held"], "the pod holding GPU 2")
        b = srv.get_json("/inspect/nodes/broken-0")
        suite.check_eq((b["hami"]["usable"], b["hami"]["reason"], b["gpuCount"]), (False, BROKEN, 2),
                       "a malformed registration: unusable with its reason, the vcuda GPUs stay")
        suite.check("hami" not in srv.get_json("/inspect/nodes/whole-0"), "other nodes have no hami part")


@suite.test
def flags(_s):
    state = mixed_state()
    # Whole-GPU memory by default: the held GPU cannot take a second vGPU...
    with g.Server(suite, state, ["--placement", "bind"]) as srv:
        a = filter_answer(srv, g.vgpu(2, cores=0))
        suite.check("hami-0" not in (a["NodeNames"] or []), "default memory: the whole GPU, so 2 vGPUs do not fit")
    # ...with --hami-default-memory 2000 it can.
    with g.Server(suite, state, ["--placement", "bind", "--hami-default-memory", "2000"]) as srv:
        a = filter_answer(srv, g.vgpu(2, cores=0))
        suite.check("hami-0" in (a["NodeNames"] or []), "--hami-default-memory 2000: 2 vGPUs of 2000 MiB fit")
    for flag, value in (("--hami-gpu-policy", "fullest"), ("--hami-memory-scaling", "0"),
                        ("--hami-split-count", "0"), ("--hami-default-cores", "101"),
                        ("--hami-handshake", "sometimes"), ("--hami-handshake-timeout", "soon"),
                        ("--hami-handshake-interval", "1ms"), ("--hami-handshake-interval", "2h")):
        r = g.run_binary(suite, ["--state-file", state, flag, value])
        suite.check_eq(r.code, 2, "%s %s is refused" % (flag, value), r)
        suite.check(flag in r.err, "the error names %s" % flag, r)


def import_hamiplugin():
    d = suite.path("tests", "hamisim")
    if d not in sys.path:
        sys.path.insert(0, d)
    import hamiplugin  # noqa: E402
    return hamiplugin


@suite.test
def live_registration_and_handshake(_s):
    hp = import_hamiplugin()
    with g.Cluster(suite) as c:
        client = c.apisim.Client(c.sim.url, token=c.tokens[0], ca=c.ca_file)
        plugin = hp.Plugin(client, "hami-live", [hp.Device(U[0], 16384, index=0), hp.Device(U[1], 16384, index=1)])
        plugin.register()
        with g.LiveServer(suite, c.kubeconfig(), ["--placement", "bind", "--hami-handshake-timeout", "2s"]) as srv:
            def devices():
                n = [x for x in srv.inspect() if x["node"] == "hami-live"]
                return n[0]["hami"] if n and "hami" in n[0] else None

            h = g.wait_until(lambda: devices() and len(devices()["devices"]) == 2, 15)
            suite.require(h, "the plugin's registration reaches /inspect/nodes", srv.stderr())
            c.create_pod(g.pod("run", g.vgpu(1, 4000, cores=25), namespace="t",
                               annotations={"hami.io/vgpu-devices-allocated": U[1] + ",NVIDIA,4000,25:;",
                                            "hami.io/vgpu-node": "hami-live"}), node="hami-live", phase="Running")
            got = g.wait_until(lambda: devices()["devices"][1]["memoryUsedMiB"] == 4000, 15)
            suite.check(got, "the pod's allocation is charged to GPU 1", devices())
            c.sim.set_pod_phase("t", "run", "Succeeded")
            got = g.wait_until(lambda: devices()["devices"][1]["memoryUsedMiB"] == 0, 15)
            suite.check(got, "a finished pod gives its vGPU back", devices())

            # The plugin is gone: the kubelet advertises no vGPUs, a scheduler's request goes unanswered.
            c.sim.patch("nodes", "hami-live", "merge", {"status": {"allocatable": {"nvidia.com/gpu": "0"}}},
                        subresource="status")
            stale = "Requesting_" + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 10))
            c.sim.patch("nodes", "hami-live", "merge", {"metadata": {"annotations": {hp.HANDSHAKE: stale}}})
            got = g.wait_until(lambda: devices()["usable"] is False, 15)
            suite.require(got, "an unanswered handshake makes the devices unusable", devices())
            suite.check("has not answered the handshake" in devices()["reason"], "the reason says why", devices())
            r = srv.filter(g.pod("new", g.vgpu(1, 1000), namespace="t"), ["hami-live"])
            reason = r["FailedAndUnresolvableNodes"].get("hami-live", "")
            suite.check("HAMi's device plugin has not answered the handshake" in reason,
                        "the filter answers the node unresolvable with the reason", r)

            plugin.answer_handshake()
            got = g.wait_until(lambda: devices()["usable"] is True, 15)
            suite.check(got, "the plugin's answer brings the devices back", devices())
            r = srv.filter(g.pod("new", g.vgpu(1, 1000), namespace="t"), ["hami-live"])
            suite.check_eq(r["NodeNames"], ["hami-live"], "and the node fits again")
        client.close()


@suite.test
def live_handshake_write(_s):
    """--hami-handshake write: the service writes Requesting_ where no request is pending; a plugin that
    answers keeps its devices, one that stays silent loses them once the node advertises no vGPUs."""
    hp = import_hamiplugin()
    with g.Cluster(suite) as c:
        clients = [c.apisim.Client(c.sim.url, token=c.tokens[0], ca=c.ca_file) for _ in range(2)]
        live = hp.Plugin(clients[0], "hs-live", [hp.Device(U[0], 16384, index=0)])
        mute = hp.Plugin(clients[1], "hs-mute", [hp.Device(U[1], 16384, index=0)], allocatable=0)
        live.start()  # answers every request
        mute.register()  # registers once, never answers
        flags = ["--placement", "bind", "--hami-handshake", "write", "--hami-handshake-interval", "200ms",
                 "--hami-handshake-timeout", "2s"]
        with g.LiveServer(suite, c.kubeconfig(), flags) as srv:
            def hami(node):
                n = [x for x in srv.inspect() if x["node"] == node]
                return n[0].get("hami") if n else None

            def annotation(node):
                return (c.sim.get("nodes", node)["metadata"].get("annotations") or {}).get(hp.HANDSHAKE, "")

            got = g.wait_until(lambda: annotation("hs-mute").startswith("Requesting_"), 15)
            suite.require(got, "the service writes a Requesting_ request", annotation("hs-mute"))
            when = annotation("hs-mute")[len("Requesting_"):]
            suite.check(time.strptime(when, "%Y-%m-%d %H:%M:%S") is not None, "in HAMi's time layout", when)
            got = g.wait_until(lambda: live.handshakes_answered >= 2, 15)
            suite.check(got, "requests keep coming to a plugin that answers them", live.handshakes_answered)
            got = g.wait_until(lambda: (hami("hs-mute") or {}).get("usable") is False, 15)
            suite.require(got, "an unanswered request takes the silent node's devices away", hami("hs-mute"))
            suite.check("has not answered the handshake" in hami("hs-mute")["reason"], "with the reason",
                        hami("hs-mute"))
            suite.check_eq((hami("hs-live") or {}).get("usable"), True, "the answering node keeps its devices",
                           hami("hs-live"))
            # The live node's answered requests clock the passes: two more passes write nothing to the
            # silent node, whose request is still pending.
            writes = lambda: [r for r in c.sim.requests(0) if r["method"] == "PATCH"  # noqa: E731
                              and r["path"] == "/api/v1/nodes/hs-mute" and "Requesting_" in (r["body"] or "")]
            before, answered = len(writes()), live.handshakes_answered
            g.wait_until(lambda: live.handshakes_answered >= answered + 2, 15)
            suite.check_eq(len(writes()), before, "a pending request is not rewritten")
            mute.answer_handshake()
            got = g.wait_until(lambda: (hami("hs-mute") or {}).get("usable") is True, 15)
            suite.check(got, "the answer brings the devices back", hami("hs-mute"))
        live.stop()
        for client in clients:
            client.close()


def big_type_list(count, width):
    """count distinct GPU type names, each width bytes, comma-separated."""
    return ",".join(("X%0" + str(width - 1) + "d") % i for i in range(count))


@suite.test
def type_lists_are_bounded(_s):
    """issue 22 item 8: a 252 kB nvidia.com/nouse-gputype made each filter
    over 2,000 HAMi nodes take 3 s (every entry searched in every device's
    type). Lists are bounded (docs/behaviour.md): the largest allowed list is
    handled, a larger one refuses the pod with a reason naming the bound.
    The filter times are printed, not asserted."""
    nodes = ["hami-%04d" % i for i in range(2000)]
    devices = [(U[k % 4][:-4] + "%04d" % k, 32768, k) for k in range(8)]
    state = g.write_state(suite, [hami_node(n, register(devices), vgpus=80) for n in nodes])
    with g.Server(suite, state, ["--placement", "bind"]) as srv:
        def timed_filter(annotations):
            pod = g.pod("new", g.vgpu(1, 2000, cores=10), namespace="t", annotations=annotations)
            t0 = time.monotonic()
            body = srv.filter(pod, nodes)
            return body, time.monotonic() - t0

        maximal = big_type_list(63, 63) + ",TESLA V100"  # 64 entries, 4 kB; the last excludes the V100s
        suite.check(len(maximal) <= 4096, "the maximal list is within 4096 bytes", len(maximal))
        body, secs = timed_filter({"nvidia.com/nouse-gputype": maximal})
        print("    filter over 2000 HAMi nodes, nouse-gputype of 64 entries (%d bytes): %.3f s" % (len(maximal), secs))
        suite.check_eq(body.get("NodeNames"), [], "a maximal list is read whole: its last entry excludes every GPU")
        reasons = set(body.get("FailedNodes", {}).values()) | set(body.get("FailedAndUnresolvableNodes", {}).values())
        suite.check(len(reasons) == 1 and "type" in next(iter(reasons)), "refused for the GPU type", reasons)
        body, secs = timed_filter({"nvidia.com/use-gputype": big_type_list(63, 63) + ",V100"})
        print("    filter over 2000 HAMi nodes, use-gputype of 64 entries: %.3f s" % secs)
        suite.check_eq(len(body.get("NodeNames") or []), 2000, "a maximal use list that names V100 fits every node")

        huge = big_type_list(252 * 1024 // 11, 10)
        body, secs = timed_filter({"nvidia.com/nouse-gputype": huge})
        print("    filter over 2000 HAMi nodes, nouse-gputype of %d bytes: %.3f s" % (len(huge), secs))
        suite.check_eq(body.get("NodeNames"), [], "an oversize list places nothing")
        want = "annotation nvidia.com/nouse-gputype is %d bytes long (at most 4096)" % len(huge)
        text = json.dumps(body)
        suite.check(want in text, "the reason names the annotation, its size and the bound", text[:400])
        body, _ = timed_filter({"nvidia.com/use-gputype": big_type_list(65, 8)})
        suite.check("annotation nvidia.com/use-gputype has 65 entries (at most 64)" in json.dumps(body),
                    "65 entries are refused by count", json.dumps(body)[:400])


if __name__ == "__main__":
    suite.main()
