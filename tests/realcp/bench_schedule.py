#!/usr/bin/env python3
"""Scheduling throughput with the real kube-scheduler (issue 24): the same
nodes and pods scheduled by kube-scheduler alone, then with the extender in
--placement bind (filter + prioritize + bind verbs) and --placement filter
(filter verb only). For each round it prints

  pods/s          pods bound / seconds from the first bind to the last
                  (kube-scheduler's "Successfully bound" log lines; a bind
                  kube-scheduler gave up on is only in "API: N bound");
  verbs/pod       the extender's filter and bind calls per pod (its /metrics):
                  1.00 means every pod was placed at its first attempt;
  bind p50/p99    the extender's bind latency (its histogram, interpolated);
  writes/pod      API writes to pods during the round (the API server's
                  apiserver_request_total: PATCH, PUT, POST binding);
  refused         the extender's Error answers to filter and bind.

and, per round, where the CPU went (robust to a shared, loaded machine,
where pods/s is not): CPU ms per pod bound of etcd, kube-apiserver,
kube-scheduler, the extender and this script (utime+stime from
/proc/<pid>/stat, from just before kube-scheduler starts to the last pod
bound; kube-scheduler's own count starts at its exec, so it includes its
initial list of nodes and pods, the same in every round); the extender's
requests, request and answer bytes per verb and the connections it
accepted (its /metrics); kube-scheduler's mean scheduling attempt,
scheduling algorithm (where extender calls happen) and per extension
point times (its /metrics on its secure port, opened to anonymous
scrapes with --authorization-always-allow-paths).

Default: 500 nodes x tencent.com/vcuda-core 800 (8 GPUs), 3,000 pods asking
vcuda-core 50 / vcuda-memory 10, kube-scheduler started after the pods
exist (--burst: started first, the pods created while it runs).

--workload picks the devices (the same nodes and pods in every round):
  share   the default above (GPU-Manager vcuda shares);
  whole   nodes with nvidia.com/gpu 8 and the gpu-admission.io/topology
          annotation of a DGX-1 V100 (NVLink hybrid cube mesh, made by the
          gpu-topology binary next to --binary from the recorded nvidia-smi
          output), pods asking nvidia.com/gpu --gpus (default 2);
  hami    HAMi vGPU nodes (hami.io/node-nvidia-register: 8 V100 32 GB, split
          10), pods asking nvidia.com/gpu 1, gpumem 3000, gpucores 10; the
          nodes also advertise gpumem and gpucores so that kube-scheduler
          alone can count them. HAMi's bind takes a node lock that its device
          plugin releases after it allocated the pod: this script plays the
          plugin (it watches the round's pods and, once one is bound,
          releases the lock that names it), so HAMi rounds carry the
          protocol's own writes (lock, pod annotations, Binding, release).

  python3 tests/realcp/bench_schedule.py --binary build/release/gpu-quota-admission [--nodes 50 --pods 300]

The protocol's floor: --alt-binary null=build/.../tests/bench/null-extender
and modes like bind@null run an extender that decides nothing (filter echoes
the nodes, prioritize answers nothing, bind posts a plain Binding), wired
exactly as the product: what any extender could reach on this machine.

Needs the real binaries (tests/realcp/README.md: KUBEBUILDER_ASSETS). The
smoke test test_bench_schedule.py runs it with tens of pods, without
timing assertions. Figures depend on the machine: compare rounds of one run.
"""

import argparse
import json
import os
import http.client
import re
import ssl
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from controlplane import ControlPlane, http_get, pod_path, skip_unless_assets  # noqa: E402
from realcp_suite import direct_extender  # noqa: E402

MODES = ("none", "bind", "filter")
# "watch": kube-scheduler alone, with the extender running (its watches and
# caches) but not in kube-scheduler's configuration: what the extender costs
# the control plane without any call.
EXTRA_MODES = ("watch",)
BOUND = re.compile(r'^I\d{4} (\d\d):(\d\d):(\d\d\.\d+)\s.*"Successfully bound pod to node" pod="([^"]+)"')
SETUP_THREADS = 8
WORKLOADS = ("share", "whole", "hami")
HAMI_GPUS, HAMI_SPLIT, HAMI_MEM, HAMI_CORES = 8, 10, 32768, 100
HAMI_POD = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "10"}
TOPOLOGY_FIXTURE = "dgx1-v100"


def hami_register(node_index):
    """hami.io/node-nvidia-register for one bench node: HAMI_GPUS V100s."""
    return "".join("GPU-bench-%04d-%d,%d,%d,%d,NVIDIA-Tesla V100-SXM2-32GB,0,true:" %
                   (node_index, i, HAMI_SPLIT, HAMI_MEM, HAMI_CORES) for i in range(HAMI_GPUS))


def topology_annotation(binary, source_dir):
    """The gpu-admission.io/topology value the gpu-topology binary (built
    next to the extender) makes of a recorded DGX-1 V100 nvidia-smi."""
    tool = os.path.join(os.path.dirname(binary), "gpu-topology")
    fix = os.path.join(source_dir, "tests", "fixtures", "nvidia-smi", TOPOLOGY_FIXTURE)
    r = subprocess.run([tool, "--topo-file", fix + ".topo.txt", "--query-file", fix + ".query.csv",
                        "--proc-dir", ""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (tool, r.returncode, r.stderr.decode("utf-8", "replace")))
    return r.stdout.decode().strip()


def log_seconds(h, m, s):
    return int(h) * 3600 + int(m) * 60 + float(s)


class BoundTail:
    """pod -> the time of day (s) kube-scheduler logged it bound, read as
    the log grows: each poll reads only the new
    lines (a complete line at a time), so the script's own CPU stays small
    next to the processes it measures."""

    def __init__(self, log_path):
        self.f = open(log_path, "rb")
        self.rest = b""
        self.times = {}

    def poll(self):
        data = self.rest + self.f.read()
        cut = data.rfind(b"\n") + 1
        self.rest = data[cut:]
        for line in data[:cut].decode("utf-8", "replace").splitlines():
            m = BOUND.match(line)
            if m and m.group(4) not in self.times:
                self.times[m.group(4)] = log_seconds(m.group(1), m.group(2), m.group(3))
        return self.times

    def close(self):
        self.f.close()


def parse_metrics(text):
    """[(name, {label: value}, float)] of a Prometheus text page."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(4))))
        except ValueError:
            pass
    return out


def api_requests(cp):
    """API requests so far by "VERB resource[/subresource]" (apiserver_request_total),
    and watch events sent by kind (apiserver_watch_events_total)."""
    status, body = cp.admin.request("GET", "/metrics", raw=True)
    tot = {}
    for name, lab, v in parse_metrics(body.decode("utf-8", "replace")):
        if name == "apiserver_request_total":
            k = "%s %s%s" % (lab.get("verb", "?"), lab.get("resource", "?"),
                             "/" + lab["subresource"] if lab.get("subresource") else "")
        elif name == "apiserver_watch_events_total":
            k = "watch-event %s" % lab.get("kind", lab.get("resource", "?"))
        else:
            continue
        tot[k] = tot.get(k, 0) + v
    return tot


def pod_writes(cp):
    """API writes to existing pods so far, by verb (and subresource), and
    writes to nodes ("nodes PATCH": HAMi's lock and its release)."""
    status, body = cp.admin.request("GET", "/metrics", raw=True)
    tot = {}
    for name, lab, v in parse_metrics(body.decode("utf-8", "replace")):
        if name != "apiserver_request_total" or lab.get("resource") not in ("pods", "nodes"):
            continue
        verb = lab.get("verb", "")
        if lab.get("resource") == "nodes":   # HAMi's node lock and its release
            if verb in ("PATCH", "PUT", "APPLY"):
                tot["nodes " + verb] = tot.get("nodes " + verb, 0) + v
            continue
        if verb == "POST" and not lab.get("subresource"):
            continue   # pods created (--burst), not written by scheduling
        if verb in ("PATCH", "PUT", "POST", "APPLY"):
            k = verb + ("/" + lab["subresource"] if lab.get("subresource") else "")
            tot[k] = tot.get(k, 0) + v
    return tot


def quantile(buckets, count, q):
    """Linear interpolation in a cumulative histogram [(le, cum)]."""
    if not count:
        return None
    rank = q * count
    prev_le, prev_cum = 0.0, 0.0
    for le, cum in buckets:
        if cum >= rank:
            if le == float("inf"):
                return prev_le
            span = cum - prev_cum
            return prev_le + (le - prev_le) * ((rank - prev_cum) / span if span else 1.0)
        prev_le, prev_cum = le, cum
    return prev_le


def extender_figures(port):
    """(calls by verb, {verb: (cumulative buckets, count)}) from the extender's /metrics."""
    _, text = http_get(port, "/metrics")
    calls, hist = {}, {}
    for name, lab, v in parse_metrics(text):
        verb = lab.get("verb")
        if name == "gqa_http_requests_total":
            calls[verb] = calls.get(verb, 0) + v
        elif name == "gqa_http_request_duration_seconds_bucket":
            hist.setdefault(verb, ([], [0]))[0].append((float(lab["le"]) if lab["le"] != "+Inf" else float("inf"), v))
        elif name == "gqa_http_request_duration_seconds_count":
            hist.setdefault(verb, ([], [0]))[1][0] = v
    return calls, {verb: (sorted(b), c[0]) for verb, (b, c) in hist.items()}


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of pid (all its threads), seconds; None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is field 3 (state): utime is field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_snapshot(procs):
    """{name: cpu seconds} of the named Process objects (None left out),
    and this script's own (all its threads)."""
    out = {name: cpu_seconds(p.pid) for name, p in procs.items() if p is not None}
    t = os.times()
    out["bench"] = t.user + t.system
    return out


def extender_traffic(port):
    """{verb: (requests, request bytes, answer bytes)} and connections accepted, from the extender's /metrics."""
    _, text = http_get(port, "/metrics")
    per, accepted = {}, None
    for name, lab, v in parse_metrics(text):
        verb = lab.get("verb")
        if name == "gqa_http_requests_total":
            per.setdefault(verb, [0, 0, 0])[0] += v
        elif name == "gqa_http_request_body_bytes_total":
            per.setdefault(verb, [0, 0, 0])[1] += v
        elif name == "gqa_http_response_body_bytes_total":
            per.setdefault(verb, [0, 0, 0])[2] += v
        elif name == "gqa_http_connections_accepted_total":
            accepted = v
    return per, accepted


SCHED_HISTOGRAMS = {
    "scheduler_scheduling_attempt_duration_seconds": "attempt",
    "scheduler_scheduling_algorithm_duration_seconds": "algorithm",
    "scheduler_framework_extension_point_duration_seconds": "ext_point",
}


def scheduler_timings(proc):
    """{key: (sum s, count)} of kube-scheduler's histograms (SCHED_HISTOGRAMS;
    extension points by name), or {} when its /metrics cannot be read."""
    try:
        status, raw = scheduler_get(proc, "/metrics")
    except OSError:
        return {}
    if status != 200:
        return {}
    body = raw.decode("utf-8", "replace")
    out = {}
    for name, lab, v in parse_metrics(body):
        for base, key in SCHED_HISTOGRAMS.items():
            if name not in (base + "_sum", base + "_count"):
                continue
            if key == "ext_point":
                key = lab.get("extension_point", "?")
            elif key == "attempt" and lab.get("result") != "scheduled":
                key += "_" + lab.get("result", "?")
            sc = out.setdefault(key, [0.0, 0.0])
            sc[0 if name.endswith("_sum") else 1] += v
    return out


def scheduler_get(proc, path, timeout=10):
    """(status, bytes) of a GET on kube-scheduler's secure port (anonymous:
    the paths are in --authorization-always-allow-paths)."""
    ctx = ssl._create_unverified_context()
    c = http.client.HTTPSConnection("127.0.0.1", proc.health_port, context=ctx, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Profiler:
    """CPU profiles (Go pprof) of kube-scheduler and kube-apiserver for the
    first `seconds` of a round, saved as DIR/<mode>-<process>.pb.gz
    (pprof_top.py reads them)."""

    def __init__(self, directory, seconds):
        self.dir, self.seconds, self.threads = directory, seconds, []

    def start(self, cp, sched, mode):
        path = "/debug/pprof/profile?seconds=%d" % self.seconds

        def fetch(name, get):
            try:
                status, body = get()
                if status == 200:
                    with open(os.path.join(self.dir, "%s-%s.pb.gz" % (mode, name)), "wb") as f:
                        f.write(body)
                else:
                    print("profile of %s: HTTP %d" % (name, status), flush=True)
            except (OSError, RuntimeError) as e:
                print("profile of %s: %s" % (name, e), flush=True)
        gets = {"kube-scheduler": lambda: scheduler_get(sched, path, timeout=self.seconds + 60),
                "kube-apiserver": lambda: cp.admin.request("GET", path, raw=True, ok=None,
                                                           timeout=self.seconds + 60)}
        for name, get in gets.items():
            t = threading.Thread(target=fetch, args=(name, get), daemon=True)
            t.start()
            self.threads.append(t)

    def wait(self):
        for t in self.threads:
            t.join(self.seconds + 90)
        self.threads = []


def diff_timings(before, after):
    return {k: (s - before.get(k, (0, 0))[0], n - before.get(k, (0, 0))[1]) for k, (s, n) in after.items()
            if n - before.get(k, (0, 0))[1] > 0}


def extender_errors(proc):
    """Error answers the extender logged (refused binds, failed decisions)."""
    with open(proc.log_path, errors="replace") as f:
        return sum(1 for line in f if " warn " in line and ("bind " in line or "recording" in line))


class HamiPlugin(threading.Thread):
    """HAMi's device plugin, as far as a bench round needs it: it watches the
    round's pods and, once one is bound, releases the node lock
    (hami.io/mutex.lock) that names it, with a JSON patch that first tests
    the value (a lock taken over meanwhile is left alone). Keep-alive
    connections, so its requests cost the API server no handshakes."""

    LOCK = "hami.io/mutex.lock"

    def __init__(self, cp, ns):
        super().__init__(daemon=True)
        self.cp, self.ns = cp, ns
        self.ctx = ssl.create_default_context(cafile=cp.pki.ca_crt)
        self.ctx.load_cert_chain(cp.admin_crt, cp.admin_key)
        self.released, self.errors = 0, 0
        self.done = set()
        self.stopping = False
        self.watch_conn = None
        self.started_watch = threading.Event()

    def connect(self, timeout=None):
        return http.client.HTTPSConnection("127.0.0.1", self.cp.api_port, context=self.ctx, timeout=timeout)

    def call(self, conn, method, path, body=None, content_type=None):
        hdrs = {"Accept": "application/json"}
        if content_type:
            hdrs["Content-Type"] = content_type
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read()

    def release(self, conn, node, pod):
        status, body = self.call(conn, "GET", "/api/v1/nodes/" + node)
        if status != 200:
            self.errors += 1
            return
        lock = (json.loads(body)["metadata"].get("annotations") or {}).get(self.LOCK, "")
        if not lock.endswith(",%s,%s" % (self.ns, pod)):
            return
        key = "/metadata/annotations/" + self.LOCK.replace("~", "~0").replace("/", "~1")
        status, _ = self.call(conn, "PATCH", "/api/v1/nodes/" + node,
                              [{"op": "test", "path": key, "value": lock}, {"op": "remove", "path": key}],
                              "application/json-patch+json")
        if status == 200:
            self.released += 1
        else:
            self.errors += 1

    def run(self):
        patcher = self.connect(timeout=30)
        try:
            status, body = self.call(patcher, "GET", "/api/v1/namespaces/%s/pods?limit=1" % self.ns)
            rv = json.loads(body)["metadata"]["resourceVersion"]
            self.watch_conn = self.connect()
            self.watch_conn.request("GET", "/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s" % (self.ns, rv),
                                    headers={"Accept": "application/json"})
            r = self.watch_conn.getresponse()
            self.started_watch.set()
            while not self.stopping:
                line = r.readline()
                if not line:
                    break
                obj = json.loads(line).get("object", {})
                name, node = obj.get("metadata", {}).get("name"), obj.get("spec", {}).get("nodeName")
                if node and name not in self.done:
                    self.done.add(name)
                    self.release(patcher, node, name)
        except (OSError, ValueError, http.client.HTTPException):
            if not self.stopping:
                self.errors += 1
        finally:
            self.started_watch.set()
            patcher.close()

    def stop(self):
        self.stopping = True
        if self.watch_conn is not None and self.watch_conn.sock is not None:
            try:
                self.watch_conn.sock.shutdown(2)
            except OSError:
                pass
        self.join(30)


class Bench:
    def __init__(self, cp, binary, nodes, pods, cores, memory, ext_flags=(), timeout=600, quiet=False,
                 prioritize=True, profiler=None, workload="share", gpus=2, source_dir=None):
        if workload not in WORKLOADS:
            raise ValueError("workload %r: one of %s" % (workload, ", ".join(WORKLOADS)))
        self.cp, self.binary, self.prioritize = cp, binary, prioritize
        self.workload, self.gpus = workload, gpus
        self.source_dir = source_dir or os.path.dirname(os.path.dirname(HERE))
        self.nodes, self.pods, self.cores, self.memory = nodes, pods, cores, memory
        self.ext_flags, self.timeout, self.quiet = list(ext_flags), timeout, quiet
        self.profiler = profiler
        self.alt_binaries = {}
        self.idle_rates = {}

    def measure_idle(self, seconds=5.0):
        """etcd's and the API server's CPU ms per second with nothing to do
        (a measurement window, not a wait for anything)."""
        procs = {"etcd": self.cp.etcd, "kube-apiserver": self.cp.apiserver}
        c0, t0 = cpu_snapshot(procs), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_snapshot(procs), time.monotonic()
        self.idle_rates = {k: (c1[k] - c0[k]) * 1e3 / (t1 - t0) for k in procs}
        return self.idle_rates

    def say(self, *a):
        if not self.quiet:
            print(*a, flush=True)

    def node_spec(self, i):
        """(resources, annotations) of bench node i for the workload."""
        if self.workload == "whole":
            return {"nvidia.com/gpu": "8"}, {"gpu-admission.io/topology": self.topology}
        if self.workload == "hami":
            res = {"nvidia.com/gpu": str(HAMI_GPUS * HAMI_SPLIT), "nvidia.com/gpumem": str(HAMI_GPUS * HAMI_MEM),
                   "nvidia.com/gpucores": str(HAMI_GPUS * HAMI_CORES)}
            return res, {"hami.io/node-nvidia-register": hami_register(i),
                         "hami.io/node-handshake": "Reported " + time.strftime("%Y-%m-%d %H:%M:%S")}
        return {"tencent.com/vcuda-core": "800", "tencent.com/vcuda-memory": "256"}, None

    def pod_limits(self):
        if self.workload == "whole":
            return {"nvidia.com/gpu": str(self.gpus)}
        if self.workload == "hami":
            return dict(HAMI_POD)
        return {"tencent.com/vcuda-core": str(self.cores), "tencent.com/vcuda-memory": str(self.memory)}

    def make_nodes(self):
        if self.workload == "whole":
            self.topology = topology_annotation(self.binary, self.source_dir)

        def add(i):
            res, ann = self.node_spec(i)
            self.cp.add_node("bench-n%04d" % i, res, annotations=ann)
        with ThreadPoolExecutor(SETUP_THREADS) as ex:
            list(ex.map(add, range(self.nodes)))

    def remove_nodes(self):
        """Delete the bench nodes (tests that share one control plane)."""
        with ThreadPoolExecutor(SETUP_THREADS) as ex:
            list(ex.map(lambda i: self.cp.admin.delete("/api/v1/nodes/bench-n%04d" % i), range(self.nodes)))

    def make_pods(self, ns):
        limits = self.pod_limits()
        with ThreadPoolExecutor(SETUP_THREADS) as ex:
            list(ex.map(lambda i: self.cp.create_pod(self.cp.pod("p%05d" % i, limits, namespace=ns)),
                        range(self.pods)))

    def delete_pods(self, ns):
        names = [p["metadata"]["name"] for p in self.cp.admin.get(pod_path(ns))["items"]]
        with ThreadPoolExecutor(SETUP_THREADS) as ex:
            list(ex.map(lambda n: self.cp.delete_pod(n, ns), names))

    def round(self, spec, burst=False):
        """One round of spec, a mode or mode@name (the extender binary given
        as --alt-binary name=PATH, for A/B rounds in one run); returns a dict
        of figures."""
        mode, _, alt = spec.partition("@")
        binary = self.alt_binaries[alt] if alt else self.binary
        cp = self.cp
        ns = "bench-%s-%d" % (mode, int(time.time() * 1000) % 100000)
        cp.ensure_namespace(ns)
        cp.ensure_service_account(ns)
        ext_proc, extenders = None, []
        if mode != "none":
            placement = "bind" if mode == "watch" else mode
            ext_proc = cp.start_product(binary, flags=["--placement", placement] + self.ext_flags,
                                        name="bench-" + mode)
            ext = direct_extender(ext_proc.port, bind=(mode == "bind"), timeout="3s")
            ext.pop("preemptVerb", None)
            if self.workload == "hami":
                ext["managedResources"] += [{"name": r, "ignoredByScheduler": False}
                                            for r in ("nvidia.com/gpumem", "nvidia.com/gpucores")]
            if not self.prioritize:
                ext.pop("prioritizeVerb", None)
            extenders = [ext] if mode != "watch" else []
        cfg = cp.scheduler_config(extenders)
        cfg["clientConnection"]["qps"] = 2000
        cfg["clientConnection"]["burst"] = 4000
        plugin = None
        if self.workload == "hami" and ext_proc is not None:
            plugin = HamiPlugin(cp, ns)
            plugin.start()
            plugin.started_watch.wait(30)
        if not burst:
            self.make_pods(ns)
        writes0 = pod_writes(cp)
        requests0 = api_requests(cp)
        watched = {"etcd": cp.etcd, "kube-apiserver": cp.apiserver, "extender": ext_proc}
        cpu0 = cpu_snapshot(watched)
        window0 = time.monotonic()
        traffic0 = extender_traffic(ext_proc.port) if ext_proc is not None else ({}, None)
        sched = cp.start_scheduler(cfg, name="bench-sched-%s" % mode, extra_args=[
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*"])
        watched["kube-scheduler"] = sched
        if self.profiler:
            self.profiler.start(cp, sched, spec.replace("@", "-"))
        timing0 = scheduler_timings(sched)
        if burst:
            self.make_pods(ns)
        deadline = time.monotonic() + self.timeout
        prefix = ns + "/"
        times = {}
        tail = BoundTail(sched.log_path)
        while time.monotonic() < deadline:
            times = {k: v for k, v in tail.poll().items() if k.startswith(prefix)}
            if len(times) >= self.pods:
                break
            time.sleep(0.25)   # a poll interval for progress, not a synchronisation
        tail.close()
        cpu1 = cpu_snapshot(watched)
        window = time.monotonic() - window0
        cpu1["kube-scheduler"] = cpu1.get("kube-scheduler") or 0.0
        cpu0["kube-scheduler"] = 0.0   # from its exec
        timing1 = scheduler_timings(sched)
        traffic1 = extender_traffic(ext_proc.port) if ext_proc is not None else ({}, None)
        writes1 = pod_writes(cp)
        requests1 = api_requests(cp)
        fig = {"mode": spec, "bound": len(times), "pods": self.pods, "nodes": self.nodes}
        # Binds kube-scheduler gave up on (its httpTimeout) but the extender
        # completed are in the API server, not in kube-scheduler's log.
        fig["bound_api"] = sum(1 for p in cp.admin.get(pod_path(ns))["items"] if p["spec"].get("nodeName"))
        if len(times) >= 2:
            span = max(times.values()) - min(times.values())
            fig["pods_per_s"] = len(times) / span if span > 0 else float("inf")
        fig["writes"] = {k: writes1[k] - writes0.get(k, 0) for k in writes1 if writes1[k] - writes0.get(k, 0)}
        fig["writes_per_pod"] = sum(fig["writes"].values()) / max(len(times), 1)
        nbound = max(len(times), 1)
        fig["cpu_ms_per_pod"] = {k: (cpu1[k] - cpu0[k]) * 1e3 / nbound for k in cpu1
                                 if cpu1.get(k) is not None and cpu0.get(k) is not None}
        fig["sched_timing"] = diff_timings(timing0, timing1)
        # What etcd and the API server spend anyway while the round lasts.
        fig["idle_ms_per_pod"] = {k: r * window / nbound for k, r in self.idle_rates.items()}
        fig["api_per_pod"] = {k: (v - requests0.get(k, 0)) / nbound for k, v in requests1.items()
                              if (v - requests0.get(k, 0)) / nbound >= 0.005}
        if ext_proc is not None:
            per0, acc0 = traffic0
            per1, acc1 = traffic1
            fig["traffic"] = {v: tuple(per1[v][i] - per0.get(v, (0, 0, 0))[i] for i in range(3))
                              for v in per1 if per1[v][0] - per0.get(v, (0, 0, 0))[0] > 0}
            fig["connections"] = (acc1 - acc0) if acc0 is not None and acc1 is not None else None
        if ext_proc is not None:
            calls, hist = extender_figures(ext_proc.port)
            fig["filter_per_pod"] = calls.get("filter", 0) / self.pods
            fig["bind_per_pod"] = calls.get("bind", 0) / self.pods
            for verb in ("bind", "filter", "prioritize"):
                buckets, count = hist.get(verb, ([], 0))
                fig[verb + "_p50"] = quantile(buckets, count, 0.5)
                fig[verb + "_p99"] = quantile(buckets, count, 0.99)
            fig["refused"] = extender_errors(ext_proc)
        if self.profiler:
            self.profiler.wait()
        if plugin is not None:
            plugin.stop()
            fig["locks_released"], fig["plugin_errors"] = plugin.released, plugin.errors
        cp.stop_scheduler(sched)
        if ext_proc is not None:
            fig["extender_exit"] = cp.stop_product(ext_proc)
        self.delete_pods(ns)
        return fig


CPU_ORDER = ("etcd", "kube-apiserver", "kube-scheduler", "extender", "bench")


def fmt_cost(fig):
    """The CPU and traffic lines of a round."""
    cpu = fig.get("cpu_ms_per_pod", {})
    parts = ["%s %.2f" % (k, cpu[k]) for k in CPU_ORDER if k in cpu]
    total = sum(cpu[k] for k in CPU_ORDER if k in cpu and k != "bench")
    lines = ["        cpu ms/pod: %s  (control plane + extender %.2f)" % ("  ".join(parts), total)]
    idle = fig.get("idle_ms_per_pod")
    if idle:
        lines.append("        of which idle work (the rate with nothing to do x the round's length): %s" %
                     "  ".join("%s %.2f" % (k, v) for k, v in sorted(idle.items())))
    if fig.get("traffic"):
        t = ["%s %d req, %.0f B in / %.0f B out each" % (v, n, bi / n, bo / n)
             for v, (n, bi, bo) in sorted(fig["traffic"].items()) if n]
        lines.append("        extender: %s; connections accepted %s" % ("; ".join(t), fig.get("connections")))
    if fig.get("api_per_pod"):
        lines.append("        API requests/pod: %s" % "  ".join(
            "%s %.2f" % (k, v) for k, v in sorted(fig["api_per_pod"].items())))
    st = fig.get("sched_timing", {})
    if st:
        t = ["%s %.2f ms x%d" % (k, s * 1e3 / n, n) for k, (s, n) in sorted(st.items())]
        lines.append("        kube-scheduler mean: %s" % "  ".join(t))
    return "\n".join(lines)


def fmt(fig):
    def num(k, f="%.2f"):
        v = fig.get(k)
        return f % v if isinstance(v, (int, float)) else "-"
    ms = lambda k: ("%.1f ms" % (fig[k] * 1e3)) if isinstance(fig.get(k), float) else "-"  # noqa: E731
    return ("%-7s bound %d/%d (API: %d)  pods/s %s  filter/pod %s  bind/pod %s  bind p50 %s p99 %s  writes/pod %s  "
            "refused %s  filter/prioritize p50 %s/%s  writes %s" % (fig["mode"], fig["bound"], fig["pods"], fig["bound_api"],
                                       num("pods_per_s", "%.1f"),
                                       num("filter_per_pod"), num("bind_per_pod"), ms("bind_p50"),
                                       ms("bind_p99"), num("writes_per_pod"), fig.get("refused", "-"),
                                       ms("filter_p50"), ms("prioritize_p50"),
                                       json.dumps(fig["writes"], sort_keys=True)) +
            ("  HAMi locks released %d (errors %d)" % (fig["locks_released"], fig["plugin_errors"])
             if "locks_released" in fig else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--cores", type=int, default=50)
    ap.add_argument("--memory", type=int, default=10)
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated, of none,bind,filter (and watch: the extender running, not configured)")
    ap.add_argument("--workload", choices=WORKLOADS, default="share",
                    help="share: vcuda shares; whole: nvidia.com/gpu with NVLink topology; hami: HAMi vGPUs")
    ap.add_argument("--gpus", type=int, default=2, help="--workload whole: nvidia.com/gpu per pod")
    ap.add_argument("--burst", action="store_true", help="create the pods while kube-scheduler runs")
    ap.add_argument("--extender-flag", action="append", default=[], help="one more flag for the extender")
    ap.add_argument("--timeout", type=int, default=600, help="seconds a round may take")
    ap.add_argument("--no-prioritize", action="store_true", help="leave out prioritizeVerb (to see its share)")
    ap.add_argument("--alt-binary", action="append", default=[], metavar="NAME=PATH",
                    help="another extender binary, run by modes written mode@NAME (bind@before)")
    ap.add_argument("--profile", metavar="DIR", help="save Go CPU profiles of kube-scheduler and kube-apiserver "
                    "for each round there (read them with pprof_top.py)")
    ap.add_argument("--profile-seconds", type=int, default=3, help="how long each profile runs from the round's start")
    a = ap.parse_args()
    skip_unless_assets()
    # The fixture turns the API server's profiling off; --profile turns it on.
    with ControlPlane(apiserver_flags=["--profiling=true"] if a.profile else ()) as cp:
        print("control plane up in %.1fs (%s)" % (cp.startup_seconds, cp.dir), flush=True)
        profiler = None
        if a.profile:
            os.makedirs(a.profile, exist_ok=True)
            profiler = Profiler(a.profile, a.profile_seconds)
        b = Bench(cp, os.path.abspath(a.binary), a.nodes, a.pods, a.cores, a.memory, a.extender_flag, a.timeout,
                  prioritize=not a.no_prioritize, profiler=profiler, workload=a.workload, gpus=a.gpus,
                  source_dir=a.source_dir)
        for alt in a.alt_binary:
            name, _, path = alt.partition("=")
            b.alt_binaries[name] = os.path.abspath(path)
        t0 = time.monotonic()
        b.make_nodes()
        print("%d nodes in %.1fs (workload %s, pods asking %s)" % (
            a.nodes, time.monotonic() - t0, a.workload, json.dumps(b.pod_limits(), sort_keys=True)), flush=True)
        idle = b.measure_idle()
        print("idle CPU ms/s: %s" % "  ".join("%s %.1f" % kv for kv in sorted(idle.items())), flush=True)
        for mode in a.modes.split(","):
            fig = b.round(mode.strip(), a.burst)
            print(fmt(fig), flush=True)
            print(fmt_cost(fig), flush=True)


if __name__ == "__main__":
    main()
