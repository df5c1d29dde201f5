#!/usr/bin/env python3
"""hamiplugin: the HAMi device plugin stand-in against apisim.

Each test starts an apisim in-process, plays HAMi's scheduler by hand
(decision and bind annotations, node lock, Binding, as docs/hami.md records
them) and checks what the stand-in does with it.
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "apisim"))
import apisim  # noqa: E402
import hamiplugin  # noqa: E402
from hamiplugin import Device, Plugin  # noqa: E402

U0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
U1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
NODE = "hami-0"
P = "/api/v1/namespaces/t/pods"


def setup(devices=None, form="9", **kw):
    sim = apisim.APISim().start()
    devices = devices or [Device(U0, 32768, index=0), Device(U1, 32768, index=1)]
    plugin = Plugin(apisim.Client(sim.url), NODE, devices, form=form, **kw)
    return sim, apisim.Client(sim.url), plugin


def node_annotations(c, name=NODE):
    return c.get("/api/v1/nodes/" + name).json["metadata"].get("annotations") or {}


def pod_annotations(c, name):
    return c.get(P + "/" + name).json["metadata"].get("annotations") or {}


def wait_for(pred, what, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def make_pod(c, name, containers, to_allocate, node=NODE, lock=True, bind=True):
    """What HAMi's scheduler does: decision annotations, node lock, bind-phase, Binding."""
    body = {"metadata": {"name": name, "annotations": {
        hamiplugin.TO_ALLOCATE: to_allocate, hamiplugin.ALLOCATED: to_allocate,
        hamiplugin.VGPU_NODE: node, "hami.io/vgpu-time": str(int(time.time()))}},
        "spec": {"containers": [{"name": "c%d" % i, "image": "i", "resources": {"limits": lim}}
                                for i, lim in enumerate(containers)]}}
    assert c.post(P, body).status == 201
    if lock:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        c.patch("/api/v1/nodes/" + node, {"metadata": {"annotations": {hamiplugin.NODE_LOCK: "%s,t,%s" % (stamp, name)}}})
    c.patch(P + "/" + name, {"metadata": {"annotations": {
        hamiplugin.BIND_PHASE: "allocating", hamiplugin.BIND_TIME: str(int(time.time()))}}})
    if bind:
        r = c.post(P + "/%s/binding" % name, {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}})
        assert r.status == 201, r


def test_register_forms():
    sim, c, plugin = setup()
    try:
        plugin.register()
        node = c.get("/api/v1/nodes/" + NODE).json
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "20"  # as the kubelet advertises vGPUs
        ann = node["metadata"]["annotations"]
        assert ann[hamiplugin.REGISTER] == (
            U0 + ",10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true,0,hami-core:"
            + U1 + ",10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true,1,hami-core:")
        assert ann[hamiplugin.HANDSHAKE].startswith("Reported_")
        time.strptime(ann[hamiplugin.HANDSHAKE][len("Reported_"):], hamiplugin.TIME_LAYOUT)
        # the seven-field form is HAMi's documented example, word for word
        seven = hamiplugin.encode_register([Device(U0, 32768), Device(U1, 32768)], "7")
        assert seven == (U0 + ",10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
                         + U1 + ",10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:")
        js = hamiplugin.encode_register([Device(U0, 24576, split=5, type="NVIDIA-A10", numa=1, index=3)], "json")
        assert js == ('[{"id":"' + U0 + '","index":3,"count":5,"devmem":24576,"devcore":100,"type":"NVIDIA-A10",'
                      '"numa":1,"mode":"hami-core","health":true}]')
        # an existing node keeps its status; the other key can be used
        p2 = Plugin(apisim.Client(sim.url), NODE, [Device(U0, 1024)], form="7",
                    handshake_key="hami.io/node-handshake-nvidia", allocatable=3)
        p2.register()
        ann = node_annotations(c)
        assert ann[hamiplugin.REGISTER] == U0 + ",10,1024,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
        assert ann["hami.io/node-handshake-nvidia"].startswith("Reported_")
        assert c.get("/api/v1/nodes/" + NODE).json["status"]["allocatable"]["nvidia.com/gpu"] == "20"
    finally:
        sim.stop()


def test_handshake_answered():
    sim, c, plugin = setup()
    try:
        plugin.start()
        c.patch("/api/v1/nodes/" + NODE, {"metadata": {"annotations": {hamiplugin.HANDSHAKE: "Requesting_2024-05-14 07:07:33"}}})
        wait_for(lambda: node_annotations(c)[hamiplugin.HANDSHAKE].startswith("Reported_"), "the Reported_ answer")
        assert plugin.handshakes_answered >= 1
        # a Deleted_ mark is not a request: left alone
        c.patch("/api/v1/nodes/" + NODE, {"metadata": {"annotations": {hamiplugin.HANDSHAKE: "Deleted_2024-05-14 07:07:33"}}})
        n, turns = plugin.handshakes_answered, plugin.steps
        wait_for(lambda: plugin.steps >= turns + 3, "three more loop turns")
        assert node_annotations(c)[hamiplugin.HANDSHAKE] == "Deleted_2024-05-14 07:07:33"
        assert plugin.handshakes_answered == n
    finally:
        plugin.stop()
        sim.stop()


def test_allocation_success():
    sim, c, plugin = setup()
    try:
        plugin.register()
        alloc = ";" + U1 + ",NVIDIA,3000,30:" + U0 + ",NVIDIA,3000,30:;"
        make_pod(c, "ok", [{"cpu": "1"}, {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000"}], alloc)
        assert plugin.allocate_pending() == 1
        ann = pod_annotations(c, "ok")
        assert ann[hamiplugin.BIND_PHASE] == "success", plugin.decisions
        assert ann[hamiplugin.TO_ALLOCATE] == ";;"  # every served container emptied
        assert ann[hamiplugin.ALLOCATED] == alloc    # what the pod holds stays
        assert hamiplugin.NODE_LOCK not in node_annotations(c)
        assert plugin.decisions == [("t/ok", "success", None)]
        # served once: a second pass finds nothing to do
        assert plugin.allocate_pending() == 0
    finally:
        sim.stop()


def test_allocation_failures():
    devices = [Device(U0, 32768, split=2, index=0), Device(U1, 16384, healthy=False, index=1),
               Device("GPU-mig", 40960, index=2, mode="mig")]
    sim, c, plugin = setup(devices)
    try:
        plugin.register()
        gpu1 = [{"nvidia.com/gpu": "1"}]
        cases = [
            ("unknown", gpu1, "GPU-nope,NVIDIA,1000,0:;", "unknown device GPU-nope"),
            ("count", [{"nvidia.com/gpu": "2"}], U0 + ",NVIDIA,1000,0:;", "container 0 asks for 2 GPUs"),
            ("memory", gpu1, U0 + ",NVIDIA,40000,0:;", "has 32768 MiB free, 40000 asked"),
            ("cores", gpu1, U0 + ",NVIDIA,1000,150:;", "has 100% cores free, 150 asked"),
            ("sick", gpu1, U1 + ",NVIDIA,1000,0:;", "is unhealthy"),
            ("mig", gpu1, "GPU-mig,NVIDIA,1000,0:;", "a MIG device"),
            ("containers", gpu1, U0 + ",NVIDIA,1000,0:;;", "the annotation lists 2 containers, the pod has 1"),
            ("nodevices", gpu1, ";", "asks for 1 GPUs, the annotation gives none"),
            ("twice", [{"nvidia.com/gpu": "2"}], U0 + ",NVIDIA,1,0:" + U0 + ",NVIDIA,1,0:;", "one GPU twice"),
            ("vendor", gpu1, U0 + ",MLU,1000,0:;", "is not NVIDIA"),
            ("garbled", gpu1, U0 + ",NVIDIA,lots,0:;", "malformed"),
        ]
        for name, limits, alloc, why in cases:
            make_pod(c, name, limits, alloc)
            assert plugin.allocate_pending() == 1
            assert pod_annotations(c, name)[hamiplugin.BIND_PHASE] == "failed", name
            assert hamiplugin.NODE_LOCK not in node_annotations(c), name
            got = plugin.decisions[-1]
            assert got[0] == "t/" + name and got[1] == "failed" and why in got[2], (name, got)
        # capacity: the split count of 2 and the memory are shared with accepted pods
        make_pod(c, "a", gpu1, U0 + ",NVIDIA,20000,10:;")
        make_pod(c, "b", gpu1, U0 + ",NVIDIA,12768,10:;")
        assert plugin.allocate_pending() == 2
        assert [d[1] for d in plugin.decisions[-2:]] == ["success", "success"]
        make_pod(c, "c", gpu1, U0 + ",NVIDIA,1,0:;")
        plugin.allocate_pending()
        assert plugin.decisions[-1][2] == "device %s holds 2 of 2 tasks" % U0
        # a finished pod gives its share back
        sim.set_pod_phase("t", "b", "Succeeded")
        make_pod(c, "d", gpu1, U0 + ",NVIDIA,12768,0:;")
        plugin.allocate_pending()
        assert plugin.decisions[-1] == ("t/d", "success", None)
        make_pod(c, "e", [{"nvidia.com/gpu": "1"}], U0 + ",NVIDIA,1,0:;")  # split count again
        plugin.allocate_pending()
        assert plugin.decisions[-1][1] == "failed"
    finally:
        sim.stop()


def test_pods_left_alone():
    sim, c, plugin = setup()
    try:
        plugin.register()
        alloc = U0 + ",NVIDIA,1000,0:;"
        make_pod(c, "unbound", [{"nvidia.com/gpu": "1"}], alloc, bind=False)  # the kubelet has not seen it
        make_pod(c, "elsewhere", [{"nvidia.com/gpu": "1"}], alloc, node="hami-1", lock=False)
        assert plugin.allocate_pending() == 0
        assert pod_annotations(c, "unbound")[hamiplugin.BIND_PHASE] == "allocating"
        # a lock held by another pod is not released by this one's allocation
        make_pod(c, "mine", [{"nvidia.com/gpu": "1"}], alloc, lock=False)
        c.patch("/api/v1/nodes/" + NODE, {"metadata": {"annotations": {hamiplugin.NODE_LOCK: "2026-06-14T15:05:03Z,t,other"}}})
        assert plugin.allocate_pending() == 1
        assert pod_annotations(c, "mine")[hamiplugin.BIND_PHASE] == "success"
        assert node_annotations(c)[hamiplugin.NODE_LOCK] == "2026-06-14T15:05:03Z,t,other"
    finally:
        sim.stop()


def test_background_loop():
    sim, c, plugin = setup()
    try:
        plugin.start()
        make_pod(c, "bg", [{"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"}], U1 + ",NVIDIA,8000,50:;")
        wait_for(lambda: pod_annotations(c, "bg").get(hamiplugin.BIND_PHASE) == "success", "bind-phase success")
        wait_for(lambda: hamiplugin.NODE_LOCK not in node_annotations(c), "the lock released")
        assert [d for d in plugin.decisions if d[1] == "error"] == []
    finally:
        plugin.stop()
        sim.stop()


def test_allocation_codec():
    text = U0 + ",NVIDIA,3000,30:" + U1 + ",NVIDIA,3000,30:;;"
    got = hamiplugin.decode_allocation(text)
    assert got == [[(U0, "NVIDIA", 3000, 30), (U1, "NVIDIA", 3000, 30)], []]
    assert hamiplugin.encode_allocation(got) == text
    assert hamiplugin.decode_allocation("") == []
    assert hamiplugin.decode_allocation("a,NVIDIA,1,2:") == [[("a", "NVIDIA", 1, 2)]]
    for bad in ("a,NVIDIA,1:;", ",NVIDIA,1,1:;", "a,NVIDIA,x,1:;"):
        try:
            hamiplugin.decode_allocation(bad)
        except ValueError:
            continue
        raise AssertionError("%r must not decode" % bad)


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([test_register_forms, test_handshake_answered, test_allocation_success, test_allocation_failures,
                      test_pods_left_alone, test_background_loop, test_allocation_codec], only=args.only)
