#!/usr/bin/env python3
"""Live mode: how many pod watch events per second the cache applies.

Target (issue): >= 50,000 events/s. Two measurements, both end to end
through the binary's real informer path (TLS, HTTP/1.1 chunked watch,
line framing, JSON parse, pod_info, cache update), read from the pods
informer's event counter (/inspect/informers, the same counter as
gqa_informer_events_total{informer="pods"}) polled every 10 ms:

  * replay: a stand-in API server (below) that answers the lists and then
    streams a pre-encoded watch of N events (ADDED, MODIFIED, DELETED of
    realistic GPU pods bound over 100 nodes), one chunk per event as the
    real API server writes them. Encoding is done before the clock starts,
    so the sender costs only TLS writes and the binary is the bottleneck.
    This is the figure compared with the target.
  * apisim: the API simulator replays its history after a reconnect. The
    simulator encodes every event in Python, so this measures the
    simulator rather than the binary; it is printed for comparison only.

The figures are printed. What is checked is a floor of 2,000/s (500/s
with sanitizers, which also replay fewer events), which catches anything
pathological (a quadratic cache, a stall per event). The 50,000/s target itself is checked
only with GQA_LIVE_ENFORCE_TARGET=1 and an optimised build without
sanitizers: CTest runs tests in parallel on a 2-core machine, where a hard
rate threshold would be flaky. Below the target, the line says so.

Standalone: python3 test_live_throughput.py --binary PATH --source-dir REPO
"""

import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-throughput")

TARGET_PER_S = 50000
FLOOR_PER_S = {"release": 2000, "debug": 2000, "sanitizer": 500}
NODES = 100
REPLAY_PODS = {"release": 20000, "debug": 20000, "sanitizer": 5000}   # x3 events (ADDED, MODIFIED, DELETED)
APISIM_PODS = 3000


def build_kind(binary):
    """'sanitizer', 'debug' or 'release', from the binary and its CMake cache."""
    with open(binary, "rb") as f:
        data = f.read()
    if b"AddressSanitizer" in data or b"__ubsan_handle" in data:
        return "sanitizer"
    cache = os.path.join(os.path.dirname(binary), "CMakeCache.txt")
    try:
        with open(cache) as f:
            m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(\w*)", f.read(), re.M)
        if m and m.group(1) in ("Release", "RelWithDebInfo", "MinSizeRel"):
            return "release"
    except OSError:
        pass
    return "debug"


# ---------------------------------------------------------------------------
# Realistic objects, encoded once
# ---------------------------------------------------------------------------

def node_json(i):
    n = g.node("node-%03d" % i, g.vcuda(800, 8 * 64))
    n["metadata"]["resourceVersion"] = "10"
    n["metadata"]["uid"] = "node-uid-%06d" % i
    return n


POD_TEMPLATE = None


def pod_template():
    """A bound vcuda pod the size of a real one (~2.6 KB), with %-placeholders."""
    amounts = {"cpu": "8", "memory": "32Gi", "tencent.com/vcuda-core": "@CORES@", "tencent.com/vcuda-memory": "16"}
    p = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "@NAME@", "namespace": "team-a", "uid": "@UID@", "resourceVersion": "@RV@",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "generateName": "trainer-",
                     "labels": {"app": "trainer", "pod-template-hash": "5d9c8b7f6", "team": "a"},
                     "annotations": {"tencent.com/predicate-gpu-idx-0": "@IDX@",
                                     "tencent.com/predicate-node": "@NODE@",
                                     "tencent.com/gpu-assigned": "true",
                                     "tencent.com/predicate-time": "1767225600000000000",
                                     "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-5d9c8b7f6",
                                          "uid": "00000000-1111-2222-3333-444444444444", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"nodeName": "@NODE@", "schedulerName": "default-scheduler", "restartPolicy": "Always",
                 "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "trainer", "image": "registry.example.com/ml/trainer:2.4.1",
                                 "command": ["python", "-m", "train", "--epochs", "100"],
                                 "env": [{"name": "NCCL_DEBUG", "value": "INFO"},
                                         {"name": "OMP_NUM_THREADS", "value": "8"}],
                                 "resources": {"limits": dict(amounts), "requests": dict(amounts)},
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                                  {"name": "kube-api-access", "readOnly": True,
                                                   "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "training-data"}},
                             {"name": "kube-api-access", "projected": {"sources": [
                                 {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "hostIP": "10.0.0.10", "podIP": "10.244.1.23", "qosClass": "Guaranteed",
                   "startTime": "2026-01-01T00:00:01Z",
                   "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}
                                  for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
                   "containerStatuses": [{"name": "trainer", "ready": True, "restartCount": 0, "started": True,
                                          "image": "registry.example.com/ml/trainer:2.4.1",
                                          "imageID": "registry.example.com/ml/trainer@sha256:" + "ab" * 32,
                                          "containerID": "containerd://" + "cd" * 32,
                                          "state": {"running": {"startedAt": "2026-01-01T00:00:03Z"}}}]},
    }
    text = json.dumps(p, separators=(",", ":"))
    for k in ("NAME", "UID", "RV", "IDX", "NODE"):
        text = text.replace("@%s@" % k, "%%(%s)s" % k.lower())
    return text.replace('"@CORES@"', '"%(cores)s"')


def encode_events(npods):
    """ADDED, then MODIFIED (GPU-Manager's rewrite), then DELETED for each pod,
    interleaved in waves of 1000 so the cache holds up to ~1000 pods. Each
    event is one HTTP chunk. Returns (bytes, number of events)."""
    tpl = pod_template()
    chunks = bytearray()
    rv = 1000
    wave = 1000
    count = [0]

    def event(typ, i, idx):
        nonlocal rv
        rv += 1
        obj = tpl % {"name": "trainer-%06d" % i, "uid": "uid-%06d" % i, "rv": rv, "idx": idx,
                     "node": "node-%03d" % (i % NODES), "cores": 10}
        line = ('{"type":"%s","object":%s}\n' % (typ, obj)).encode()
        chunks.extend(b"%x\r\n%s\r\n" % (len(line), line))
        count[0] += 1

    for start in range(0, npods, wave):
        ids = range(start, min(npods, start + wave))
        for i in ids:
            event("ADDED", i, i % 8)
        for i in ids:
            event("MODIFIED", i, (i + 1) % 8)
        for i in ids:
            event("DELETED", i, (i + 1) % 8)
    return chunks, count[0]


# ---------------------------------------------------------------------------
# A stand-in API server that replays a pre-encoded pod watch
# ---------------------------------------------------------------------------

class ReplayServer:
    def __init__(self, pki, nodes_body, pods_stream):
        self.nodes_body = nodes_body
        self.stream = pods_stream
        self.sent_at = None          # monotonic time the stream started
        self.done_at = None
        self.stop = threading.Event()
        self.go = threading.Event()  # the pod events flow once the test is ready to time them
        self.stream_once = threading.Lock()
        self.streamed = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(u.query)
                if q.get("watch", [""])[0] in ("1", "true"):
                    return outer.watch(self, u.path)
                body = outer.nodes_body if u.path == "/api/v1/nodes" else \
                    b'{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1000"},"items":[]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(pki, "server.crt"), os.path.join(pki, "server.key"))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def watch(self, h, path):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.flush()
        if path == "/api/v1/pods":
            with self.stream_once:
                first = not self.streamed
                self.streamed = True
            if first:
                while not self.go.wait(0.1):
                    if self.stop.is_set():
                        return
                self.sent_at = time.monotonic()
                h.wfile.write(self.stream)
                h.wfile.flush()
                self.done_at = time.monotonic()
        # Then idle until the test ends (the informer's watch stays open).
        while not self.stop.wait(0.2):
            pass
        try:
            h.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def kubeconfig_for(suite_, pki, url):
    d = suite_.tempdir("replay")
    path = os.path.join(d, "kubeconfig.json")
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "replay",
           "clusters": [{"name": "replay", "cluster": {"server": url,
                                                        "certificate-authority": os.path.join(pki, "ca.crt")}}],
           "users": [{"name": "replay", "user": {"token": "replay-token"}}],
           "contexts": [{"name": "replay", "context": {"cluster": "replay", "user": "replay"}}]}
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def cpu_seconds(pid):
    """User + system CPU time of a process, from /proc (0 where there is none)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def events_applied(srv):
    """The pods informer's event count, from /inspect/informers: the same
    counter as gqa_informer_events_total{informer="pods"}, and much cheaper to
    poll every 10 ms than rendering all of /metrics."""
    r = srv.get("/inspect/informers", timeout=5)
    return int(next(i["events"] for i in json.loads(r.body) if i["name"] == "pods"))


def events_metric(srv):
    samples, _t, _b = g.parse_metrics(srv.get("/metrics", timeout=5).text)
    return int(g.metric(samples, "gqa_informer_events_total", informer="pods"))


def measure(srv, want, timeout, started=lambda: True):
    """Poll the counter every 10 ms; (events, seconds from the first to the last
    increase, seconds from `started` to the end) or None on timeout."""
    deadline = time.monotonic() + timeout
    first_t = None
    last = 0
    while time.monotonic() < deadline:
        n = events_applied(srv)
        now = time.monotonic()
        if n > 0 and first_t is None:
            first_t = now
        if n >= want:
            return n, now, first_t
        last = n
        time.sleep(0.01)
    return None if not last else (last, None, first_t)


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

@suite.test
def test_replay_watch_events_per_second(s):
    kind = build_kind(s.binary)
    pki = g.live_pki(s)
    nodes = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1000"},
             "items": [node_json(i) for i in range(NODES)]}
    t0 = time.monotonic()
    stream, nevents = encode_events(REPLAY_PODS[kind])
    print("  encoded %d events (%.1f MB, %.0f bytes/event) in %.1fs" %
          (nevents, len(stream) / 1e6, len(stream) / nevents, time.monotonic() - t0))
    rs = ReplayServer(pki, json.dumps(nodes).encode(), stream)
    try:
        kc = kubeconfig_for(s, pki, "https://127.0.0.1:%d" % rs.port)
        with g.LiveServer(s, kc, ["--log-level", "warn"]) as srv:
            cpu0 = cpu_seconds(srv.proc.pid)
            rs.go.set()
            res = measure(srv, nevents, 120)
            cpu = cpu_seconds(srv.proc.pid) - cpu0
            s.require(res is not None and res[1] is not None, "all %d events are applied" % nevents,
                      "%r; stderr:\n%s" % (res, g.tail(srv.stderr())))
            n, end, _first = res
            secs = end - rs.sent_at
            rate = n / secs
            send_secs = (rs.done_at or end) - rs.sent_at
            print("  replay: %d pod events applied in %.3fs = %.0f events/s, %.0f MB/s (%s build; the sender "
                  "finished writing after %.3fs)" % (n, secs, rate, len(stream) / secs / 1e6, kind, send_secs))
            s.check_eq(sum(sum(v) for v in srv.cores().values()), 0,
                       "after ADDED, MODIFIED, DELETED of every pod the cache is empty again")
            inf = srv.informers()["pods"]
            s.check_eq(inf["events"], nevents, "/inspect/informers counts every event once", inf)
            s.check_eq(events_metric(srv), nevents, "gqa_informer_events_total{informer=\"pods\"} says the same")
            print("  the binary used %.2f CPU-seconds: %.0f events per CPU-second (less sensitive to other load "
                  "on the machine than the wall-clock rate)" % (cpu, n / cpu if cpu > 0 else float("inf")))
            print("  %s the %d/s target (%s build)" % ("meets" if rate >= TARGET_PER_S else "BELOW", TARGET_PER_S,
                                                        kind))
            floor = FLOOR_PER_S[kind]
            s.check(rate >= floor, "the cache applies >= %d pod events/s" % floor, "%.0f/s" % rate)
            if os.environ.get("GQA_LIVE_ENFORCE_TARGET") == "1" and kind == "release":
                s.check(rate >= TARGET_PER_S, "the cache applies >= %d pod events/s" % TARGET_PER_S, "%.0f/s" % rate)
    finally:
        rs.close()


@suite.test
def test_apisim_replay_events_per_second(s):
    """For comparison: the simulator replays its history after a reconnect.
    Bounded by the simulator (Python encodes every event)."""
    with g.Cluster(s, history_size=APISIM_PODS * 2 + 100) as c:
        for i in range(10):
            c.add_node(g.node("node-%03d" % i, g.vcuda(800, 512)))
        with g.LiveServer(s, c.kubeconfig(), ["--log-level", "warn"]) as srv:
            c.sim.wait_for_watches(4, timeout=5)
            base = events_applied(srv)
            c.sim.fail(503, path=r"^/api/v1/pods$", watch=True)
            c.sim.drop_watches()
            tpl = json.loads(pod_template() % {"name": "x", "uid": "x", "rv": "1", "idx": 0, "node": "node-000",
                                               "cores": 10})
            for i in range(APISIM_PODS):
                p = json.loads(json.dumps(tpl))
                p["metadata"].update(name="trainer-%06d" % i, uid="uid-%06d" % i)
                ann = p["metadata"]["annotations"]
                p["spec"]["nodeName"] = ann["tencent.com/predicate-node"] = "node-%03d" % (i % 10)
                ann["tencent.com/predicate-gpu-idx-0"] = str(i // 10 % 8)
                c.sim.upsert(p)
            t_release = time.monotonic()
            c.sim.clear_faults()
            res = measure(srv, base + APISIM_PODS, 60)
            s.require(res is not None and res[1] is not None, "the simulator's replay is applied", res)
            n, end, first = res
            rate = (n - base) / (end - first) if end > first else float("inf")
            print("  apisim: %d events replayed by the simulator in %.3fs after the first = %.0f events/s "
                  "(%.2fs including the reconnect backoff); bounded by the simulator's Python encoding"
                  % (n - base, end - first, rate, end - t_release))
            s.check_eq(sum(len(x) for gpus in srv.pods_on().values() for x in gpus), APISIM_PODS,
                       "every replayed pod is in the cache once")


if __name__ == "__main__":
    suite.main()
