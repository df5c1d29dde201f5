"""What the realcp test files share: a Suite (tests/e2e/gqa_e2e.py's soft
checks and final line) that skips with exit 77 when the binaries are not
there, starts one ControlPlane for the whole file and stops it; the demo
cluster's GPU nodes; shipped scheduler-config files made runnable here.

A test file:

    suite = RealcpSuite("realcp placement")
    @suite.test
    def test_x(s):
        s.cp.add_node(...)
    suite.main()
"""

import copy
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

import controlplane  # noqa: E402
from controlplane import ControlPlane, skip_unless_assets  # noqa: E402,F401
import gqa_e2e  # noqa: E402

try:
    import yaml
except ImportError:   # python3-yaml is a build dependency; say so plainly
    yaml = None


class RealcpSuite(gqa_e2e.Suite):
    """A Suite with one control plane (self.cp) for all its tests."""

    def __init__(self, name, extra_binaries=()):
        super().__init__(name)
        self.extra_binaries = tuple(extra_binaries)
        self.cp = None
        self.skip_reasons = []     # what did not run for want of a binary

    def end_round(self, sched, prod, label="gpu-quota-admission", ns="default"):
        """A test's teardown: stop kube-scheduler, delete the pods of ns, and
        check that the extender exits 0 (label names it in the check)."""
        self.cp.stop_scheduler(sched)   # without leader election it exits 1 ("finished without leader elect")
        self.cp.delete_all_pods(ns=ns)
        self.check_eq(self.cp.stop_product(prod), 0, "%s exits 0" % label, prod.log())

    def main(self):
        skip_unless_assets(self.extra_binaries)
        if yaml is None:
            print("real control-plane tier SKIPPED: python3-yaml is missing (see tests/realcp/README.md)")
            sys.exit(controlplane.SKIP_CODE)
        tests = list(self.tests)

        def start_cp(s):
            s.cp = ControlPlane()
            s.cp.start()
            print("control plane up in %.1fs (%s)" % (s.cp.startup_seconds, s.cp.dir), flush=True)
        start_cp.__name__ = "start_control_plane"

        def stop_cp(s):
            if s.cp is not None:
                # Every product process this file started must exit cleanly.
                for p in list(s.cp.procs):
                    if getattr(p, "port", None) is not None and p.alive():
                        s.check_eq(s.cp.stop_product(p), 0, "%s exits 0 on SIGTERM" % p.name, p.log())
                s.cp.stop()
        stop_cp.__name__ = "stop_control_plane"
        self.tests = [start_cp] + tests + [stop_cp]

        # A failed start ends the file: the other tests have nothing to run on.
        def guarded(fn):
            def run(s):
                if fn is not start_cp and fn is not stop_cp and (s.cp is None or not s.cp.started):
                    s.require(False, "control plane is up")
                return fn(s)
            run.__name__ = fn.__name__
            return run
        self.tests = [guarded(fn) for fn in self.tests]
        try:
            super().main()
        except SystemExit as e:
            # Part of the file could not run (a binary it needs is missing):
            # a clean run is reported Skipped, not passed.
            if e.code == 0 and self.skip_reasons:
                print("real control-plane tier SKIPPED in part: %s; set KUBEBUILDER_ASSETS=DIR with them "
                      "(see tests/realcp/README.md)" % "; ".join(self.skip_reasons), flush=True)
                sys.exit(controlplane.SKIP_CODE)
            raise
        finally:
            if self.cp is not None:
                self.cp.stop()

    def parse_args(self):
        super().parse_args()
        if self.args.only:
            # -k keeps the start and stop of the control plane.
            only = self.args.only
            self.args.only = None
            self.tests = [t for t in self.tests if only in t.__name__ or t.__name__ in
                          ("start_control_plane", "stop_control_plane")]


# ---------------------------------------------------------------------------
# The demo cluster's nodes (examples/demo-state.yaml) on the real API server
# ---------------------------------------------------------------------------

def demo_nodes(source_dir):
    """The Node objects of examples/demo-state.yaml."""
    with open(os.path.join(source_dir, "examples", "demo-state.yaml")) as f:
        doc = yaml.safe_load(f)
    return [o for o in doc["items"] if o.get("kind") == "Node"]


def add_demo_nodes(cp, source_dir, suffix=""):
    """gpu-a100-0 (8 A100, vcuda), gpu-t4-0 (4 T4, MPS), gpu-v100-0 (8 V100
    DGX-1, nvidia.com/gpu), cpu-0: Ready, with their labels, topology
    annotations and GPU resources. Returns their names."""
    names = []
    for n in demo_nodes(source_dir):
        meta = n["metadata"]
        res = {k: v for k, v in (n.get("status", {}).get("allocatable") or {}).items() if "/" in k}
        name = meta["name"] + suffix
        labels = dict(meta.get("labels") or {})
        labels["kubernetes.io/hostname"] = name
        cp.add_node(name, res, labels=labels, annotations=meta.get("annotations"))
        names.append(name)
    return names


# ---------------------------------------------------------------------------
# Shipped scheduler-config files, made runnable on loopback
# ---------------------------------------------------------------------------

def load_shipped_config(source_dir, api_version, variant):
    with open(os.path.join(source_dir, "scheduler-config", api_version, variant + ".yaml")) as f:
        return f.read()


def runnable_config(cp, text, direct_port=None, client=None):
    """A shipped KubeSchedulerConfiguration with only what is site-specific
    changed: the API server's HOST:PORT for ${kube-apiserver} (what
    render.sh does), the /etc/kubernetes paths for this cluster's files,
    leader election off. With direct_port the urlPrefix goes straight to
    http://127.0.0.1:PORT/scheduler instead of the service proxy.
    client = (key, crt) of the extender client certificate. Returns the YAML
    text (the scheduler decodes it strictly: only known fields)."""
    text = text.replace("${kube-apiserver}", "127.0.0.1:%d" % cp.api_port)
    cfg = yaml.safe_load(text)
    cfg["clientConnection"]["kubeconfig"] = cp.scheduler_kubeconfig
    cfg["leaderElection"] = {"leaderElect": False}
    for ext in cfg.get("extenders") or []:
        if direct_port is not None:
            ext["urlPrefix"] = "http://127.0.0.1:%d/scheduler" % direct_port
            ext["enableHTTPS"] = False
            ext.pop("tlsConfig", None)
        else:
            tls = ext.get("tlsConfig") or {}
            if client:
                tls["keyFile"], tls["certFile"] = client
            tls["caFile"] = cp.pki.ca_crt
            ext["tlsConfig"] = tls
    return yaml.safe_dump(cfg, sort_keys=False)


def direct_extender(port, bind=True, node_cache=True, timeout="10s"):
    """The recommended extender block, straight to 127.0.0.1:port."""
    ext = {"urlPrefix": "http://127.0.0.1:%d/scheduler" % port, "filterVerb": "predicates",
           "prioritizeVerb": "priorities", "weight": 5, "enableHTTPS": False, "httpTimeout": timeout,
           "nodeCacheCapable": node_cache, "ignorable": False,
           "managedResources": [{"name": r, "ignoredByScheduler": False} for r in
                                ("tencent.com/vcuda-core", "tencent.com/vcuda-memory", "nvidia.com/mps-core",
                                 "nvidia.com/mps-memory", "nvidia.com/gpu")]}
    if bind:
        ext["bindVerb"] = "bind"
        ext["preemptVerb"] = "preemption"
    return copy.deepcopy(ext)


def gpu_indices(value):
    """'0,1' -> [0, 1]; None or junk -> None."""
    if value is None:
        return None
    try:
        return [int(x) for x in value.split(",")]
    except ValueError:
        return None


def annotations(cp, name, ns="default"):
    return cp.get_pod(name, ns)["metadata"].get("annotations") or {}


def sa_kubeconfig(s, ns, sa, name="sa.kubeconfig"):
    """A kubeconfig (file name `name`) for ServiceAccount ns/sa, with a token from `kubectl create token`."""
    token = s.cp.token_for(ns, sa)
    s.check(token.count(".") == 2, "kubectl create token gives a JWT for the ServiceAccount")
    return s.cp.write_kubeconfig(name, token=token, namespace=ns)


def wait_annotated(cp, name, key, ns="default", timeout=60):
    """The pod's annotations once key is among them."""
    return cp.wait_for(lambda: (annotations(cp, name, ns).get(key) is not None) and annotations(cp, name, ns),
                       timeout, "annotation %s on %s/%s" % (key, ns, name))


def now():
    return time.monotonic()
