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

Default: 500 nodes x tencent.com/vcuda-core 800 (8 GPUs), 3,000 pods asking
vcuda-core 50 / vcuda-memory 10, kube-scheduler started after the pods
exist (--burst: started first, the pods created while it runs).

  python3 tests/realcp/bench_schedule.py --binary build/release/gpu-quota-admission [--nodes 50 --pods 300]

Needs the real binaries (tests/realcp/README.md: KUBEBUILDER_ASSETS). The
smoke test test_bench_schedule.py runs it with tens of pods, without
timing assertions. Figures depend on the machine: compare rounds of one run.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from controlplane import ControlPlane, http_get, pod_path, skip_unless_assets  # noqa: E402
from realcp_suite import direct_extender  # noqa: E402

MODES = ("none", "bind", "filter")
BOUND = re.compile(r'^I\d{4} (\d\d):(\d\d):(\d\d\.\d+)\s.*"Successfully bound pod to node" pod="([^"]+)"')
SETUP_THREADS = 8


def log_seconds(h, m, s):
    return int(h) * 3600 + int(m) * 60 + float(s)


def bound_times(log_path):
    """pod -> the time of day (s) kube-scheduler logged it bound."""
    out = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = BOUND.match(line)
            if m and m.group(4) not in out:
                out[m.group(4)] = log_seconds(m.group(1), m.group(2), m.group(3))
    return out


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


def pod_writes(cp):
    """API writes to existing pods so far, by verb (and subresource)."""
    status, body = cp.admin.request("GET", "/metrics", raw=True)
    tot = {}
    for name, lab, v in parse_metrics(body.decode("utf-8", "replace")):
        if name != "apiserver_request_total" or lab.get("resource") != "pods":
            continue
        verb = lab.get("verb", "")
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


def extender_errors(proc):
    """Error answers the extender logged (refused binds, failed decisions)."""
    with open(proc.log_path, errors="replace") as f:
        return sum(1 for line in f if " warn " in line and ("bind " in line or "recording" in line))


class Bench:
    def __init__(self, cp, binary, nodes, pods, cores, memory, ext_flags=(), timeout=600, quiet=False,
                 prioritize=True):
        self.cp, self.binary, self.prioritize = cp, binary, prioritize
        self.nodes, self.pods, self.cores, self.memory = nodes, pods, cores, memory
        self.ext_flags, self.timeout, self.quiet = list(ext_flags), timeout, quiet

    def say(self, *a):
        if not self.quiet:
            print(*a, flush=True)

    def make_nodes(self):
        res = {"tencent.com/vcuda-core": "800", "tencent.com/vcuda-memory": "256"}
        with ThreadPoolExecutor(SETUP_THREADS) as ex:
            list(ex.map(lambda i: self.cp.add_node("bench-n%04d" % i, res), range(self.nodes)))

    def make_pods(self, ns):
        limits = {"tencent.com/vcuda-core": str(self.cores), "tencent.com/vcuda-memory": str(self.memory)}
        with ThreadPoolExecutor(SETUP_THREADS) as ex:
            list(ex.map(lambda i: self.cp.create_pod(self.cp.pod("p%05d" % i, limits, namespace=ns)),
                        range(self.pods)))

    def delete_pods(self, ns):
        names = [p["metadata"]["name"] for p in self.cp.admin.get(pod_path(ns))["items"]]
        with ThreadPoolExecutor(SETUP_THREADS) as ex:
            list(ex.map(lambda n: self.cp.delete_pod(n, ns), names))

    def round(self, mode, burst=False):
        """One round: returns a dict of figures."""
        cp = self.cp
        ns = "bench-%s-%d" % (mode, int(time.time() * 1000) % 100000)
        cp.ensure_namespace(ns)
        cp.ensure_service_account(ns)
        ext_proc, extenders = None, []
        if mode != "none":
            ext_proc = cp.start_product(self.binary, flags=["--placement", mode] + self.ext_flags,
                                        name="bench-" + mode)
            ext = direct_extender(ext_proc.port, bind=(mode == "bind"), timeout="3s")
            ext.pop("preemptVerb", None)
            if not self.prioritize:
                ext.pop("prioritizeVerb", None)
            extenders = [ext]
        cfg = cp.scheduler_config(extenders)
        cfg["clientConnection"]["qps"] = 2000
        cfg["clientConnection"]["burst"] = 4000
        if not burst:
            self.make_pods(ns)
        writes0 = pod_writes(cp)
        sched = cp.start_scheduler(cfg, name="bench-sched-%s" % mode)
        if burst:
            self.make_pods(ns)
        deadline = time.monotonic() + self.timeout
        prefix = ns + "/"
        times = {}
        while time.monotonic() < deadline:
            times = {k: v for k, v in bound_times(sched.log_path).items() if k.startswith(prefix)}
            if len(times) >= self.pods:
                break
            time.sleep(0.25)   # a poll interval for progress, not a synchronisation
        writes1 = pod_writes(cp)
        fig = {"mode": mode, "bound": len(times), "pods": self.pods, "nodes": self.nodes}
        # Binds kube-scheduler gave up on (its httpTimeout) but the extender
        # completed are in the API server, not in kube-scheduler's log.
        fig["bound_api"] = sum(1 for p in cp.admin.get(pod_path(ns))["items"] if p["spec"].get("nodeName"))
        if len(times) >= 2:
            span = max(times.values()) - min(times.values())
            fig["pods_per_s"] = len(times) / span if span > 0 else float("inf")
        fig["writes"] = {k: writes1[k] - writes0.get(k, 0) for k in writes1 if writes1[k] - writes0.get(k, 0)}
        fig["writes_per_pod"] = sum(fig["writes"].values()) / max(len(times), 1)
        if ext_proc is not None:
            calls, hist = extender_figures(ext_proc.port)
            fig["filter_per_pod"] = calls.get("filter", 0) / self.pods
            fig["bind_per_pod"] = calls.get("bind", 0) / self.pods
            for verb in ("bind", "filter", "prioritize"):
                buckets, count = hist.get(verb, ([], 0))
                fig[verb + "_p50"] = quantile(buckets, count, 0.5)
                fig[verb + "_p99"] = quantile(buckets, count, 0.99)
            fig["refused"] = extender_errors(ext_proc)
        cp.stop_scheduler(sched)
        if ext_proc is not None:
            fig["extender_exit"] = cp.stop_product(ext_proc)
        self.delete_pods(ns)
        return fig


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
                                       json.dumps(fig["writes"], sort_keys=True)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--cores", type=int, default=50)
    ap.add_argument("--memory", type=int, default=10)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, of none,bind,filter")
    ap.add_argument("--burst", action="store_true", help="create the pods while kube-scheduler runs")
    ap.add_argument("--extender-flag", action="append", default=[], help="one more flag for the extender")
    ap.add_argument("--timeout", type=int, default=600, help="seconds a round may take")
    ap.add_argument("--no-prioritize", action="store_true", help="leave out prioritizeVerb (to see its share)")
    a = ap.parse_args()
    skip_unless_assets()
    with ControlPlane() as cp:
        print("control plane up in %.1fs (%s)" % (cp.startup_seconds, cp.dir), flush=True)
        b = Bench(cp, os.path.abspath(a.binary), a.nodes, a.pods, a.cores, a.memory, a.extender_flag, a.timeout,
                  prioritize=not a.no_prioritize)
        t0 = time.monotonic()
        b.make_nodes()
        print("%d nodes in %.1fs" % (a.nodes, time.monotonic() - t0), flush=True)
        for mode in a.modes.split(","):
            print(fmt(b.round(mode.strip(), a.burst)), flush=True)


if __name__ == "__main__":
    main()
