#!/usr/bin/env python3
"""hamiplugin: a stand-in for HAMi's NVIDIA device plugin, for the tests.

Written from HAMi's protocol as docs/hami.md records it (no code of HAMi's).
It talks to a Kubernetes API server (the project's apisim) the way HAMi's
plugin does, through annotations:

- register(): the node's hami.io/node-nvidia-register (7-field, 9-field or
  JSON form) and a Reported_ handshake; the node is created first when it
  does not exist, with nvidia.com/gpu allocatable as the kubelet would
  advertise it (split count x devices, or what `allocatable` says).
- answer_handshake(): a Requesting_ value on the handshake key is answered
  with Reported_<time> (the plugin's reply to a scheduler's request).
- allocate_pending(): what the kubelet's Allocate call makes the plugin do:
  for each pod bound to this node with hami.io/bind-phase: allocating and
  hami.io/vgpu-node naming this node, read hami.io/vgpu-devices-to-allocate
  container by container (init containers first, as HAMi v2.9 and later
  list them), check every device against its own devices (one of
  them, healthy, not MIG, the container's nvidia.com/gpu count, memory and
  cores within the device, and, beyond what HAMi's plugin checks, the split
  count, memory and cores still free given the pods it already accepted),
  empty each container's entry once it is served, then set bind-phase
  success, or failed at the first problem; either way release the node lock
  hami.io/mutex.lock when this pod holds it.

Every verdict is kept in `decisions` as (namespace/name, "success" or
"failed", reason) so a test can compare the extender's choices with what the
plugin accepted. Standard library only; `Plugin.start()` runs the three steps
in a thread until `stop()`.
"""
import json
import threading
import time
import urllib.parse

REGISTER = "hami.io/node-nvidia-register"
HANDSHAKE = "hami.io/node-handshake"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
VGPU_NODE = "hami.io/vgpu-node"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
NODE_LOCK = "hami.io/mutex.lock"
TIME_LAYOUT = "%Y-%m-%d %H:%M:%S"  # Go's time.DateTime, local time


class Device:
    def __init__(self, uuid, memory, split=10, cores=100, type="NVIDIA-Tesla V100-PCIE-32GB", numa=0,
                 healthy=True, index=0, mode="hami-core"):
        self.uuid, self.memory, self.split, self.cores = uuid, memory, split, cores
        self.type, self.numa, self.healthy, self.index, self.mode = type, numa, healthy, index, mode

    def entry(self, fields=9):
        f = [self.uuid, str(self.split), str(self.memory), str(self.cores), self.type, str(self.numa),
             "true" if self.healthy else "false"]
        if fields == 9:
            f += [str(self.index), self.mode]
        return ",".join(f) + ":"

    def json(self):
        return {"id": self.uuid, "index": self.index, "count": self.split, "devmem": self.memory,
                "devcore": self.cores, "type": self.type, "numa": self.numa, "mode": self.mode,
                "health": self.healthy}


def encode_register(devices, form="9"):
    """The registration value in one of the three forms ("7", "9", "json")."""
    if form == "json":
        return json.dumps([d.json() for d in devices], separators=(",", ":"))
    return "".join(d.entry(7 if form == "7" else 9) for d in devices)


def decode_allocation(text):
    """[[(uuid, vendor, mem, cores), ...] per container]; ValueError when malformed."""
    if not text:
        return []
    parts = text.split(";")
    if text.endswith(";"):
        parts = parts[:-1]
    out = []
    for part in parts:
        devs = []
        for entry in part.split(":"):
            if not entry:
                continue
            f = entry.split(",")
            if len(f) < 4 or not f[0]:
                raise ValueError("device entry %r" % entry)
            devs.append((f[0], f[1], int(f[2]), int(f[3])))
        out.append(devs)
    return out


def encode_allocation(containers):
    return "".join("".join("%s,%s,%d,%d:" % d for d in c) + ";" for c in containers)


def gpus_asked(container):
    res = container.get("resources") or {}
    amounts = res.get("limits") or res.get("requests") or {}
    try:
        return int(str(amounts.get("nvidia.com/gpu", "0")))
    except ValueError:
        return -1


class Plugin:
    """One node's plugin. `client` is an apisim.Client of its own (a Client
    is one connection and not shared between threads)."""

    def __init__(self, client, node, devices, form="9", handshake_key=HANDSHAKE, allocatable=None):
        self.c = client
        self.node = node
        self.devices = {d.uuid: d for d in devices}
        self.order = list(devices)
        self.form = form
        self.handshake_key = handshake_key
        self.allocatable = sum(d.split for d in devices) if allocatable is None else allocatable
        self.decisions = []
        self.handshakes_answered = 0
        self.steps = 0  # loop turns done by start()'s thread
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()

    # ---- API helpers ----------------------------------------------------------

    def _node_path(self):
        return "/api/v1/nodes/" + self.node

    def _patch_pod(self, ns, name, annotations):
        r = self.c.patch("/api/v1/namespaces/%s/pods/%s" % (ns, name), {"metadata": {"annotations": annotations}})
        if r.status != 200:
            raise RuntimeError("patch pod %s/%s: %d %s" % (ns, name, r.status, r.body[:200]))

    def _patch_node(self, annotations):
        r = self.c.patch(self._node_path(), {"metadata": {"annotations": annotations}})
        if r.status != 200:
            raise RuntimeError("patch node %s: %d" % (self.node, r.status))

    def _now(self):
        return time.strftime(TIME_LAYOUT, time.localtime())

    # ---- registration and handshake ----------------------------------------------

    def register(self):
        if self.c.get(self._node_path()).status == 404:
            body = {"metadata": {"name": self.node},
                    "status": {"allocatable": {"nvidia.com/gpu": str(self.allocatable), "cpu": "8"},
                               "capacity": {"nvidia.com/gpu": str(self.allocatable), "cpu": "8"}}}
            r = self.c.post("/api/v1/nodes", body)
            if r.status != 201:
                raise RuntimeError("create node %s: %d" % (self.node, r.status))
        self._patch_node({REGISTER: encode_register(self.order, self.form),
                          self.handshake_key: "Reported_" + self._now()})

    def answer_handshake(self):
        r = self.c.get(self._node_path())
        ann = ((r.json.get("metadata") or {}).get("annotations") or {}) if r.status == 200 else {}
        if str(ann.get(self.handshake_key, "")).startswith("Requesting_"):
            self._patch_node({self.handshake_key: "Reported_" + self._now()})
            self.handshakes_answered += 1

    # ---- allocation --------------------------------------------------------------------

    def _pods_here(self):
        q = urllib.parse.urlencode({"fieldSelector": "spec.nodeName=" + self.node})
        r = self.c.get("/api/v1/pods?" + q)
        return (r.json.get("items") or []) if r.status == 200 else []

    def _in_use(self, pods):
        """Per device: [tasks, memory, cores] of the pods this plugin accepted and that still run."""
        use = {u: [0, 0, 0] for u in self.devices}
        for p in pods:
            ann = p["metadata"].get("annotations") or {}
            if ann.get(BIND_PHASE) != "success" or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            try:
                containers = decode_allocation(ann.get(ALLOCATED, ""))
            except ValueError:
                continue
            for c in containers:
                for uuid, _, mem, cores in c:
                    if uuid in use:
                        use[uuid][0] += 1
                        use[uuid][1] += mem
                        use[uuid][2] += cores
        return use

    def _check(self, pod, containers, use):
        # HAMi v2.9 and later: entry i is InitContainers[i], then the app containers.
        spec = pod.get("spec") or {}
        spec_containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
        if len(containers) != len(spec_containers):
            return "the annotation lists %d containers, the pod has %d" % (len(containers), len(spec_containers))
        for i, devs in enumerate(containers):
            want = gpus_asked(spec_containers[i])
            if devs and len(devs) != want:
                return "container %d asks for %d GPUs, the annotation gives %d" % (i, want, len(devs))
            if want > 0 and not devs:
                return "container %d asks for %d GPUs, the annotation gives none" % (i, want)
            if len({d[0] for d in devs}) != len(devs):
                return "container %d has one GPU twice" % i
            for uuid, vendor, mem, cores in devs:
                dev = self.devices.get(uuid)
                if dev is None:
                    return "unknown device %s" % uuid
                if vendor != "NVIDIA":
                    return "device type %s is not NVIDIA" % vendor
                if not dev.healthy or dev.mode == "mig":
                    return "device %s is %s" % (uuid, "unhealthy" if not dev.healthy else "a MIG device")
                u = use[uuid]
                if u[0] + 1 > dev.split:
                    return "device %s holds %d of %d tasks" % (uuid, u[0], dev.split)
                if u[1] + mem > dev.memory:
                    return "device %s has %d MiB free, %d asked" % (uuid, dev.memory - u[1], mem)
                if u[2] + cores > dev.cores:
                    return "device %s has %d%% cores free, %d asked" % (uuid, dev.cores - u[2], cores)
                u[0] += 1
                u[1] += mem
                u[2] += cores
        return None

    def _release_lock(self, ns, name):
        r = self.c.get(self._node_path())
        if r.status != 200:
            return
        lock = ((r.json.get("metadata") or {}).get("annotations") or {}).get(NODE_LOCK)
        if lock is not None and lock.endswith(",%s,%s" % (ns, name)):
            self._patch_node({NODE_LOCK: None})

    def _allocate(self, pod, use):
        meta = pod["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        ann = meta.get("annotations") or {}
        try:
            containers = decode_allocation(ann.get(TO_ALLOCATE, ""))
            reason = self._check(pod, containers, use)
        except ValueError as e:
            containers, reason = [], "malformed %s: %s" % (TO_ALLOCATE, e)
        if reason is None:
            # Serve the containers one by one, emptying each entry as HAMi's plugin does.
            for i in range(len(containers)):
                if containers[i]:
                    containers[i] = []
                    self._patch_pod(ns, name, {TO_ALLOCATE: encode_allocation(containers)})
            self._patch_pod(ns, name, {BIND_PHASE: "success"})
        else:
            self._patch_pod(ns, name, {BIND_PHASE: "failed"})
        self._release_lock(ns, name)
        self.decisions.append(("%s/%s" % (ns, name), "success" if reason is None else "failed", reason))

    def allocate_pending(self):
        """Serve every bound pod waiting for this node's devices. Returns how many were handled."""
        with self._lock:
            pods = self._pods_here()
            use = self._in_use(pods)
            handled = 0
            for p in pods:
                ann = p["metadata"].get("annotations") or {}
                if ann.get(BIND_PHASE) != "allocating" or BIND_TIME not in ann or ann.get(VGPU_NODE) != self.node:
                    continue
                self._allocate(p, use)
                handled += 1
            return handled

    # ---- background loop ---------------------------------------------------------------

    def step(self):
        self.answer_handshake()
        self.allocate_pending()
        self.steps += 1

    def start(self, interval=0.05):
        self.register()

        def loop():
            while not self._stop.wait(interval):
                try:
                    self.step()
                except Exception as e:  # keep serving; the test sees missing decisions
                    self.decisions.append(("", "error", str(e)))

        self._thread = threading.Thread(target=loop, name="hamiplugin-" + self.node, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(5)
