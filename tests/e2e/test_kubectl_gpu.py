#!/usr/bin/env python3
"""kubectl-gpu, the kubectl plugin, against the running service: offline with
--server (golden tables on the demo state), and live through the API
simulator's service proxy with a kubeconfig, as a user would run it.

Golden files are tests/e2e/golden/*.txt; GQA_UPDATE_GOLDEN=1 rewrites them
(then read the diff: they are the specification of the tables)."""
import json
import os
import subprocess
import sys

try:
    import yaml  # the demo state is YAML; Debian's python3-yaml
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("PyYAML is missing: apt-get install -y python3-yaml\n0 passed, 1 failed")
    sys.exit(1)

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as e2e  # noqa: E402

suite = e2e.Suite("kubectl-gpu")
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")

QUOTA_CM = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gpu-quota", "namespace": "kube-system"},
            "data": {"gpu_quota": json.dumps({"team-a": {"pool": ["public"], "quota": {"A100": 2}},
                                              "team-b": {"pool": ["public", "training"],
                                                         "quota": {"A100": 4, "V100": 2}}})}}


def plugin_path():
    return os.path.join(os.path.dirname(suite.binary), "kubectl-gpu")


def kubectl_gpu(args, env=None, stdin=None):
    e = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    e["HOME"] = suite.tempdir("home")  # no ~/.kube/config of the machine's
    if env:
        e.update(env)
    p = subprocess.run([plugin_path()] + list(args), input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=e, timeout=60)
    r = e2e.Run(p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"))
    rep = e2e.sanitizer_report(r.err)
    suite.check(rep is None, "no sanitizer report from kubectl-gpu %s" % " ".join(args)[:80], r.err[-3000:])
    return r


def check_golden(name, text):
    path = os.path.join(GOLDEN, name)
    if os.environ.get("GQA_UPDATE_GOLDEN"):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        want = f.read()
    suite.check(text == want, "output matches golden/%s" % name, "got:\n%s\nwant:\n%s" % (text, want))


def demo_objects():
    with open(suite.demo_state) as f:
        return yaml.safe_load(f)["items"]


def pod_file(name, limits, namespace="default"):
    p = e2e.pod(name, [("main", limits)], namespace=namespace)
    return e2e.write_file(suite, name + ".json", json.dumps(p))


def server_flag(srv):
    return ["--server", "http://127.0.0.1:%d" % srv.port, "--color", "never"]


@suite.test
def top_tables_on_the_demo_state(s):
    with e2e.Server(s) as srv:
        r = kubectl_gpu(["top"] + server_flag(srv))
        s.check_eq(r.code, 0, "top exits 0", r)
        check_golden("top-nodes.txt", r.out)
        r = kubectl_gpu(server_flag(srv) + ["top", "nodes", "-o", "wide"])
        check_golden("top-nodes-wide.txt", r.out)
        r = kubectl_gpu(["top", "gpus", "-owide"] + server_flag(srv))
        check_golden("top-gpus-wide.txt", r.out)
        r = kubectl_gpu(["top", "gpus"] + server_flag(srv))
        check_golden("top-gpus.txt", r.out)
        # the known pod on its known GPU
        row = [ln for ln in kubectl_gpu(["top", "gpus", "-o", "wide"] + server_flag(srv)).out.splitlines()
               if ln.startswith("gpu-a100-0   0 ")]
        s.check(len(row) == 1 and "team-a/inference-1,team-a/notebook-1" in row[0], "A100 GPU 0 lists its pods", row)


@suite.test
def top_filters_and_data_output(s):
    with e2e.Server(s) as srv:
        r = kubectl_gpu(["top", "-l", "tkestack.io/gpu-pool=training"] + server_flag(srv))
        names = [ln.split()[0] for ln in r.out.splitlines()[1:]]
        s.check_eq(names, ["gpu-v100-0"], "-l selects nodes by label", r)
        r = kubectl_gpu(["top", "-l", "tkestack.io/gpu-pool in (public),tkestack.io/gpu-model!=A100"] + server_flag(srv))
        s.check_eq([ln.split()[0] for ln in r.out.splitlines()[1:]], ["gpu-t4-0"], "set-based selector", r)
        r = kubectl_gpu(["top", "--model", "A100"] + server_flag(srv))
        s.check_eq([ln.split()[0] for ln in r.out.splitlines()[1:]], ["gpu-a100-0"], "--model", r)
        r = kubectl_gpu(["top", "-l", "no such=label"] + server_flag(srv))
        s.check(r.code == 1 and "label selector" in r.err and r.out == "", "a bad selector is an error", r)
        r = kubectl_gpu(["top", "--model", "H100"] + server_flag(srv))
        s.check(r.code == 0 and r.out == "" and "No GPU nodes found" in r.err, "no match: kubectl's message", r)
        r = kubectl_gpu(["top", "-o", "json"] + server_flag(srv))
        s.check_eq(json.loads(r.out), srv.get_json("/inspect/nodes?topology=false"), "-o json is the service's answer")
        r = kubectl_gpu(["top", "-o", "yaml"] + server_flag(srv))
        s.check_eq(yaml.safe_load(r.out), srv.get_json("/inspect/nodes?topology=false"),
                   "-o yaml reads back as the same data")




def mig_objects():
    """The demo state, a MIG-only node with one 3g.20gb instance held by a
    bound pod, and a node with 4 whole GPUs beside its MIG instances."""
    held = e2e.pod("mig-job", {"nvidia.com/mig-3g.20gb": "1"}, namespace="team-a", node="dgx-a100-mixed",
                   phase="Running")
    return demo_objects() + [e2e.mig_node(suite, "dgx-a100-mixed", gpus=0),
            e2e.mig_node(suite, "dgx-a100-half", gpus=4), held]


@suite.test
def top_shows_mig_instances(s):
    """issue 28: MIG instances per node and profile, in a table after the GPU table."""
    with e2e.Server(s, e2e.write_state(s, mig_objects())) as srv:
        r = kubectl_gpu(["top"] + server_flag(srv))
        s.check_eq(r.code, 0, "top exits 0 with MIG nodes", r)
        check_golden("top-mig.txt", r.out)
        rows = [ln.split() for ln in r.out.splitlines()]
        s.check_in(["dgx-a100-mixed", "NVIDIA-A100-SXM4-40GB", "mig-3g.20gb", "1/8", "[#---------]", "12%"], rows,
                   "the bound pod holds one of 8 3g.20gb instances")
        s.check_in(["dgx-a100-mixed", "NVIDIA-A100-SXM4-40GB", "mig-1g.5gb", "0/14", "[----------]", "0%"], rows,
                   "every profile of the node has its row")
        s.check_eq([x[0] for x in rows if x and x[0] == "dgx-a100-half"].count("dgx-a100-half"), 4,
                   "a node with GPUs and MIG: its GPU row and a row per profile")
        s.check_eq([x[2] for x in rows if x and x[0] == "dgx-a100-mixed"], ["mig-1g.5gb", "mig-2g.10gb", "mig-3g.20gb"],
                   "a MIG-only node: a row per profile and no GPU row", r.out)
        check_golden("top-mig-wide.txt", kubectl_gpu(["top", "-o", "wide"] + server_flag(srv)).out)
        r = kubectl_gpu(["top", "gpus"] + server_flag(srv))
        check_golden("top-gpus-mig.txt", r.out)
        r = kubectl_gpu(["top", "-l", "kubernetes.io/hostname=dgx-a100-mixed"] + server_flag(srv))
        s.check_eq(r.out.splitlines()[0].split(), ["NODE", "MODEL", "PROFILE", "INSTANCES", "USE%"],
                   "only MIG nodes matched: the MIG table alone", r)
        s.check_eq(r.code, 0, "... exit 0", r)
        r = kubectl_gpu(["top", "-o", "json"] + server_flag(srv))
        units = {n["node"]: n["units"] for n in json.loads(r.out)}
        s.check_in({"resource": "nvidia.com/mig-3g.20gb", "total": 8, "used": 1}, units["dgx-a100-mixed"],
                   "-o json carries the instances as the service answers")
        s.check_eq(units["gpu-a100-0"], [], "... and none for a node without MIG")
        coloured = kubectl_gpu(["top", "--server", "http://127.0.0.1:%d" % srv.port, "--color", "always"]).out
        import re
        s.check_eq(re.sub(r"\033\[[0-9;]*m", "", coloured), kubectl_gpu(["top"] + server_flag(srv)).out,
                   "colour does not shift the MIG columns")
    # The same cluster without MIG: the tables are those of the demo state, byte for byte.
    with e2e.Server(s) as srv:
        with open(os.path.join(GOLDEN, "top-nodes.txt")) as f:
            s.check_eq(kubectl_gpu(["top"] + server_flag(srv)).out, f.read(), "no MIG: no MIG table")


@suite.test
def mig_text_is_escaped(s):
    """A MIG node's name and product label come from the cluster: no raw
    control character reaches the terminal from the MIG table."""
    odd = e2e.mig_node(suite, "mig\x1b[31mred\x7f", gpus=0)
    odd["metadata"]["labels"]["nvidia.com/gpu.product"] = "A100" + CONTROL
    state = e2e.write_state(s, [odd])
    with e2e.Server(s, state) as srv:
        for args in (["top"], ["top", "-o", "wide"], ["top", "gpus"]):
            r = kubectl_gpu(args + server_flag(srv))
            s.check_eq(r.code, 0, "kubectl gpu %s exits 0" % " ".join(args), r)
            s.check(no_controls(r.out) and no_controls(r.err), "no control character in kubectl gpu %s" % " ".join(args),
                    repr(r.out[:800]))
            s.check_in("mig\\x1b[31mred\\x7f", r.out, "the MIG node's name shows its escapes")
            s.check_in("mig-3g.20gb", r.out, "its instances are shown")


@suite.test
def explain_groups_and_near_miss(s):
    with e2e.Server(s) as srv:
        r = kubectl_gpu(["explain", "-f", s.path("examples", "pods", "vcuda-share.yaml")] + server_flag(srv))
        s.check_eq(r.code, 0, "explain exits 0", r)
        check_golden("explain-vcuda-share.txt", r.out)
        # 6 whole A100s: 5 idle, one held for the unassigned pod -> short by 2
        big = pod_file("six", {"tencent.com/vcuda-core": "600", "tencent.com/vcuda-memory": "1920"})
        r = kubectl_gpu(["explain", "-f", big] + server_flag(srv))
        check_golden("explain-whole-6.txt", r.out)
        r = kubectl_gpu(["explain", "-f", big, "-o", "wide"] + server_flag(srv))
        check_golden("explain-whole-6-wide.txt", r.out)
        r = kubectl_gpu(["explain", "-f", big, "-o", "json"] + server_flag(srv))
        ans = json.loads(r.out)
        s.check_eq(ans["nearMiss"]["node"], "gpu-a100-0", "-o json: near miss")
        s.check_eq(ans["nearMiss"]["shortBy"], 2, "-o json: short by two GPUs")
        s.check_eq([g["reason"] for g in ans["summary"]], ["no_capacity", "no_gpu", "whole_gpus"],
                   "-o json: groups, largest first")
        # stdin, and -n filling in a pod without a namespace
        with open(s.path("examples", "pods", "vcuda-share.yaml")) as f:
            obj = yaml.safe_load(f)
        r = kubectl_gpu(["explain", "-f", "-", "-n", "team-z"] + server_flag(srv), stdin=yaml.safe_dump(obj).encode())
        s.check(r.code == 1 and "does not match -n team-z" in r.err, "-n must agree with the pod's namespace", r)
        del obj["metadata"]["namespace"]
        r = kubectl_gpu(["explain", "-f", "-", "-n", "team-z"] + server_flag(srv), stdin=yaml.safe_dump(obj).encode())
        s.check(r.out.startswith("Pod team-z/vcuda-share fits 1 of 4 nodes"), "-f - with -n fills the namespace", r)
        r = kubectl_gpu(["explain", "pending-1"] + server_flag(srv))
        s.check(r.code == 1 and "pod default/pending-1 is not among the pods the service holds" in r.err,
                "explain POD with --server alone: a pod the service does not hold is named", r)


@suite.test
def explain_with_server_alone_stdin_and_exit_codes(s):
    with e2e.Server(s) as srv:
        # --server and no kubeconfig at all (HOME is empty): the service explains a pod it holds
        r = kubectl_gpu(["explain", "notebook-1", "-n", "team-a"] + server_flag(srv))
        s.check(r.code == 0 and r.out.startswith("Pod team-a/notebook-1 fits 1 of 4 nodes"),
                "explain POD with --server alone", r)
        big = pod_file("six", {"tencent.com/vcuda-core": "600", "tencent.com/vcuda-memory": "1920"})
        r = kubectl_gpu(["explain", "-f", big] + server_flag(srv))
        s.check_eq(r.code, 3, "a pod that fits nowhere: exit 3", r)
        s.check(r.out.startswith("Pod default/six fits none of 4 nodes"), "... and the answer is still printed", r)
        r = kubectl_gpu(["explain", "-f", big, "-o", "json"] + server_flag(srv))
        s.check_eq(r.code, 3, "-o json: exit 3 as well", r)
        s.check_eq(r.out, json.dumps(json.loads(r.out), indent=2, ensure_ascii=False) + "\n",
                   "-o json is indented with two spaces, one member per line, as kubectl prints it")
        r = kubectl_gpu(["top", "-o", "json"] + server_flag(srv))
        s.check_eq(r.out, json.dumps(json.loads(r.out), indent=2, ensure_ascii=False) + "\n", "top -o json too")
        # "-" as the pod: standard input, as -f - is
        with open(big) as f:
            text = f.read()
        r = kubectl_gpu(["explain", "-"] + server_flag(srv), stdin=text.encode())
        s.check(r.code == 3 and r.out.startswith("Pod default/six fits none"), "explain - reads standard input", r)
        with open(s.path("examples", "pods", "vcuda-share.yaml")) as f:
            text = f.read()
        r = kubectl_gpu(["explain", "-"] + server_flag(srv), stdin=text.encode())
        s.check(r.code == 0 and "fits 1 of 4 nodes" in r.out, "explain - with a pod that fits: exit 0", r)
        r = kubectl_gpu(["explain", "x", "-f", big] + server_flag(srv))
        s.check(r.code == 1 and "not both" in r.err, "a pod name and -f together are refused", r)
        r = srv.request("PUT", "/inspect/explain", b"{}")
        s.check_eq(r.header("allow"), "GET, HEAD, POST", "/inspect/explain answers GET and POST")


@suite.test
def quota_table_and_quota_refusals(s):
    state = e2e.write_state(s, demo_objects() + [QUOTA_CM])
    with e2e.Server(s, state) as srv:
        r = kubectl_gpu(["quota"] + server_flag(srv))
        s.check_eq(r.code, 0, "quota exits 0", r)
        check_golden("quota.txt", r.out)
        r = kubectl_gpu(["quota", "-n", "team-a"] + server_flag(srv))
        s.check_eq([ln.split()[0] for ln in r.out.splitlines()[1:]], ["team-a"], "quota -n keeps one namespace", r)
        r = kubectl_gpu(["quota", "-n", "nobody"] + server_flag(srv))
        s.check(r.code == 0 and r.out == "" and "No GPU quota found for namespace nobody" in r.err, "quota -n none", r)
        # team-b holds its 2 V100s: 2 more are refused by quota, with the hint to raise it
        p = pod_file("resnet-2", {"nvidia.com/gpu": "2"}, namespace="team-b")
        r = kubectl_gpu(["explain", "-f", p] + server_flag(srv))
        check_golden("explain-quota.txt", r.out)


@suite.test
def quota_warning_is_escaped_with_data_output(s):
    cm = json.loads(json.dumps(QUOTA_CM))
    cm["data"]["gpu_quota"] = json.dumps({"team\x1b]0;owned\x07": {"pool": ["public"], "quota": {"A100": "many"}}})
    state = e2e.write_state(s, demo_objects() + [cm])
    with e2e.Server(s, state) as srv:
        for fmt in ("json", "yaml"):
            r = kubectl_gpu(["quota", "-o", fmt] + server_flag(srv))
            s.check("Warning: the quota ConfigMap" in r.err and "\x1b" not in r.err,
                    "-o %s: the warning about a broken quota ConfigMap shows no raw control character" % fmt,
                    repr(r.err))


@suite.test
def to_fit_hint_respects_quota(s):
    # team-a uses 0.8 of 4 A100s: 3.2 left. Six whole A100s miss gpu-a100-0 by two
    # GPUs; "ask for 4" would then be refused by quota, so the hint asks for 3.
    cm = json.loads(json.dumps(QUOTA_CM))
    cm["data"]["gpu_quota"] = json.dumps({"team-a": {"pool": ["public"], "quota": {"A100": 4}}})
    state = e2e.write_state(s, demo_objects() + [cm])
    with e2e.Server(s, state) as srv:
        p = pod_file("six", {"tencent.com/vcuda-core": "600", "tencent.com/vcuda-memory": "1920"}, namespace="team-a")
        r = kubectl_gpu(["explain", "-f", p] + server_flag(srv))
        s.check_eq(r.code, 3, "fits nowhere", r)
        s.check_in("To fit:  ask for 3 (namespace team-a has 3.2 GPUs of quota left for this node's model), "
                   "or free 2 more whole GPUs on gpu-a100-0 and raise that quota by 2.8 GPUs", r.out,
                   "the hint never asks for more than the quota leaves")
        s.check("ask for 4" not in r.out, "no hint past the quota", r)
        # a namespace without quota keeps the capacity-only hint
        p = pod_file("six-b", {"tencent.com/vcuda-core": "600", "tencent.com/vcuda-memory": "1920"}, namespace="team-z")
        r = kubectl_gpu(["explain", "-f", p] + server_flag(srv))
        s.check_in("To fit:  free 2 more whole GPUs on gpu-a100-0, or ask for 4", r.out, "no quota: capacity hint")
        # a quota of 1 A100 (0.2 left): no smaller request fits, the quota must grow
        cm["data"]["gpu_quota"] = json.dumps({"team-a": {"pool": ["public"], "quota": {"A100": 1}}})
    state = e2e.write_state(s, demo_objects() + [cm])
    with e2e.Server(s, state) as srv:
        p = pod_file("six", {"tencent.com/vcuda-core": "600", "tencent.com/vcuda-memory": "1920"}, namespace="team-a")
        r = kubectl_gpu(["explain", "-f", p] + server_flag(srv))
        s.check_in("To fit:  free 2 more whole GPUs on gpu-a100-0 and raise namespace team-a's GPU quota for this "
                   "node's model by 5.8 GPUs (0.2 left)", r.out, "quota too small for any whole GPU")


@suite.test
def colour_only_when_asked_or_on_a_terminal(s):
    with e2e.Server(s) as srv:
        url = ["--server", "http://127.0.0.1:%d" % srv.port]
        s.check("\033[" not in kubectl_gpu(["top"] + url).out, "no colour into a pipe")
        s.check("\033[32m" in kubectl_gpu(["top", "--color", "always"] + url).out, "--color always colours the bars")
        plain = kubectl_gpu(["top", "--color", "never"] + url).out
        import re
        coloured = re.sub(r"\033\[[0-9;]*m", "", kubectl_gpu(["top", "--color", "always"] + url).out)
        s.check_eq(coloured, plain, "colour does not shift the columns")


@suite.test
def command_line_errors(s):
    r = kubectl_gpu(["frobnicate"])
    s.check(r.code == 2 and "unknown command" in r.err, "unknown command: exit 2", r)
    r = kubectl_gpu(["top", "-z"])
    s.check(r.code == 2 and "unknown flag -z" in r.err, "unknown short flag: exit 2", r)
    r = kubectl_gpu(["top", "-o", "table"])
    s.check(r.code == 2 and "--output" in r.err, "bad -o value: exit 2", r)
    r = kubectl_gpu(["top"])
    s.check(r.code == 1 and "kubeconfig" in r.err, "no kubeconfig: exit 1 saying so", r)
    r = kubectl_gpu(["--help"])
    s.check(r.code == 0 and "kubectl gpu top" in r.out, "--help", r)


@suite.test
def live_through_the_service_proxy(s):
    with e2e.Cluster(s) as c:
        for obj in demo_objects():
            c.sim.upsert(obj)
        pending = e2e.pod("pending-1", [("main", {"tencent.com/vcuda-core": "600",
                                                    "tencent.com/vcuda-memory": "1920"})], namespace="team-a")
        c.create_pod(pending)
        kubeconfig = c.kubeconfig()
        env = {"KUBECONFIG": kubeconfig}
        r = kubectl_gpu(["top", "--color", "never"], env=env)
        s.check(r.code == 1 and 'services "gpu-quota-admission" not found' in r.err,
                "without the Service: the API server's 404 is reported", r)
        with e2e.LiveServer(s, kubeconfig) as srv:
            c.sim.add_service_proxy("kube-system", "gpu-quota-admission", "http://127.0.0.1:%d" % srv.port)
            r = kubectl_gpu(["top", "--color", "never"], env=env)
            s.check_eq(r.code, 0, "live top exits 0", r)
            with open(os.path.join(GOLDEN, "top-nodes.txt")) as f:
                s.check_eq(r.out, f.read(), "live top through the proxy shows what the offline demo shows")
            r = kubectl_gpu(["explain", "pending-1", "-n", "team-a", "--color", "never"], env=env)
            s.check(r.code == 3 and r.out.startswith("Pod team-a/pending-1 fits none of 4 nodes"),
                    "explain reads the pod with the user's kubeconfig", r)
            s.check_in("To fit:  free 2 more whole GPUs on gpu-a100-0, or ask for 4", r.out, "live explain hint")
            proxied = [q for q in c.sim.requests() if "/services/gpu-quota-admission/proxy/" in q["path"]]
            s.check(any(q["path"].endswith("/proxy/inspect/explain") and q["method"] == "POST" for q in proxied),
                    "explain went through the service proxy", [q["path"] for q in proxied])
            s.check(any(q["path"] == "/api/v1/namespaces/team-a/pods/pending-1" for q in c.sim.requests()),
                    "the pod was read from the API server")
            r = kubectl_gpu(["explain", "nobody", "--color", "never"], env=env)
            s.check(r.code == 1 and 'pods "nobody" not found' in r.err, "a missing pod: the API's message", r)
            # --service and port forms
            r = kubectl_gpu(["top", "--service", "kube-system/gpu-quota-admission:http"], env=env)
            s.check_eq(r.code, 0, "--service NS/NAME:PORT", r)
            c.sim.add_service_proxy("kube-system", "gpu-quota-admission", None)
            r = kubectl_gpu(["top"], env=env)
            s.check(r.code == 1 and "no endpoints available" in r.err, "no endpoints: the API server's 503", r)


# ---- exec credential plugins ------------------------------------------------

EXEC_V1 = "client.authentication.k8s.io/v1"


def exec_plugin(s, body):
    """A credential plugin script in a fresh directory: it counts its runs in
    DIR/runs, keeps what it was told (argv, KUBERNETES_EXEC_INFO, an env
    variable) and then runs body. Returns the directory."""
    d = s.tempdir("exec")
    script = ("#!/bin/sh\n"
              "n=$(cat '{d}/runs' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '{d}/runs'\n"
              "printf '%s\\n' \"$@\" > '{d}/args'\n"
              "printf '%s' \"$KUBERNETES_EXEC_INFO\" > '{d}/info'\n"
              "printf '%s' \"$GQA_TEST_REGION\" > '{d}/env'\n"
              "{body}\n").format(d=d, body=body)
    path = os.path.join(d, "plugin")
    with open(path, "w") as f:
        f.write(script)
    os.chmod(path, 0o755)
    return d


def exec_runs(d):
    try:
        with open(os.path.join(d, "runs")) as f:
            return int(f.read().strip() or 0)
    except FileNotFoundError:
        return 0


def credential(token, expiry=None):
    status = {"token": token}
    if expiry:
        status["expirationTimestamp"] = expiry
    return json.dumps({"apiVersion": EXEC_V1, "kind": "ExecCredential", "status": status})


def print_credential(token_shell, expiry=None):
    """Shell printing an ExecCredential whose token is token_shell (may use $n)."""
    text = credential("@TOKEN@", expiry).replace("@TOKEN@", "'\"" + token_shell + "\"'")
    return "echo '%s'" % text


def exec_kubeconfig(c, d, provide_cluster_info=True):
    path = os.path.join(d, "kubeconfig.yaml")
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "eks",
           "clusters": [{"name": "eks", "cluster": {"server": c.sim.url, "certificate-authority": c.ca_file}}],
           "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "eks-user"}}],
           "users": [{"name": "eks-user", "user": {"exec": {
               "apiVersion": EXEC_V1, "command": "./plugin", "args": ["eks", "get-token", "--cluster-name", "gpu a"],
               "env": [{"name": "GQA_TEST_REGION", "value": "eu-west-1"}], "interactiveMode": "IfAvailable",
               "provideClusterInfo": provide_cluster_info}}}]}
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return path


@suite.test
def exec_credential_plugin_live(s):
    with e2e.Cluster(s, tokens=("exec-tok-1", "exec-tok-2", "exec-tok-3", "exec-tok-4", "service-tok")) as c:
        for obj in demo_objects():
            c.sim.upsert(obj)
        c.create_pod(e2e.pod("pending-1", [("main", {"tencent.com/vcuda-core": "600",
                                                      "tencent.com/vcuda-memory": "1920"})], namespace="team-a"))
        with e2e.LiveServer(s, c.kubeconfig(token="service-tok")) as srv:
            c.sim.add_service_proxy("kube-system", "gpu-quota-admission", "http://127.0.0.1:%d" % srv.port)

            # A credential valid for years: one run serves both requests of explain POD.
            d = exec_plugin(s, print_credential("exec-tok-$n", "2200-01-01T00:00:00Z"))
            env = {"KUBECONFIG": exec_kubeconfig(c, d)}
            r = kubectl_gpu(["explain", "pending-1", "-n", "team-a", "--color", "never"], env=env)
            s.check(r.code == 3 and r.out.startswith("Pod team-a/pending-1 fits none of 4 nodes"),
                    "explain through an exec credential plugin", r)
            s.check_eq(exec_runs(d), 1, "the plugin ran once for two requests")
            with open(os.path.join(d, "args")) as f:
                s.check_eq(f.read(), "eks\nget-token\n--cluster-name\ngpu a\n", "argv as configured, no shell")
            with open(os.path.join(d, "env")) as f:
                s.check_eq(f.read(), "eu-west-1", "the kubeconfig's env reaches the plugin")
            with open(os.path.join(d, "info")) as f:
                info = json.load(f)
            s.check_eq((info["apiVersion"], info["kind"], info["spec"]["interactive"]),
                       (EXEC_V1, "ExecCredential", False), "KUBERNETES_EXEC_INFO: version, kind, not interactive")
            s.check_eq(info["spec"]["cluster"]["server"], c.sim.url, "provideClusterInfo: the server")
            import base64
            with open(c.ca_file, "rb") as f:
                s.check_eq(info["spec"]["cluster"]["certificate-authority-data"], base64.b64encode(f.read()).decode(),
                           "provideClusterInfo: the CA, base64")

            # Expired as soon as printed: every request runs it again.
            d = exec_plugin(s, print_credential("exec-tok-$n", "2001-01-01T00:00:00Z"))
            env = {"KUBECONFIG": exec_kubeconfig(c, d, provide_cluster_info=False)}
            r = kubectl_gpu(["explain", "pending-1", "-n", "team-a"], env=env)
            s.check_eq(r.code, 3, "an expired credential still serves the request it was made for", r)
            s.check_eq(exec_runs(d), 2, "expired: the plugin ran again for the second request")
            with open(os.path.join(d, "info")) as f:
                s.check("cluster" not in json.load(f)["spec"], "without provideClusterInfo: no spec.cluster")

            # Refused (401): run again and retry once. Only tokens 3 and 4 are still accepted.
            c.sim.set_tokens(["exec-tok-3", "exec-tok-4", "service-tok"])
            d = exec_plugin(s, "[ $n -ge 3 ] || { " + print_credential("revoked-$n") + "; exit 0; }\n"
                            + print_credential("exec-tok-$n"))
            env = {"KUBECONFIG": exec_kubeconfig(c, d)}
            r = kubectl_gpu(["top", "--color", "never"], env=env)
            s.check_eq(r.code, 1, "a revoked token is reported after one retry", r)
            s.check_in("401", r.err, "the 401 is shown")
            s.check_eq(exec_runs(d), 2, "401: the plugin ran again once for the retry")
            r = kubectl_gpu(["top", "--color", "never"], env=env)
            s.check_eq(r.code, 0, "the plugin's next token is let in", r)
            with open(os.path.join(GOLDEN, "top-nodes.txt")) as f:
                s.check_eq(r.out, f.read(), "top through the proxy with an exec credential")

            # A failing plugin: its stderr's first line, the exit status; nothing sent without a credential.
            d = exec_plugin(s, "printf 'error: SSO session has \\033[31mexpired\\033[0m, run aws sso login\\n' >&2\n"
                               "echo 'second line' >&2\nexit 255")
            env = {"KUBECONFIG": exec_kubeconfig(c, d)}
            before = len(c.sim.requests())
            r = kubectl_gpu(["top"], env=env)
            s.check(r.code == 1 and "exec plugin ./plugin: exited with status 255: error: SSO session has "
                    "\\x1b[31mexpired\\x1b[0m, run aws sso login" in r.err and "second line" not in r.err,
                    "a failing plugin says why: its stderr's first line, control characters shown escaped", r)
            s.check("\033" not in r.err, "no raw escape from the plugin reaches the terminal", repr(r.err))
            s.check_eq(len(c.sim.requests()), before, "no request without a credential")
            # A plugin that is not installed: installHint.
            cfg_path = exec_kubeconfig(c, d)
            with open(cfg_path) as f:
                cfg = yaml.safe_load(f)
            cfg["users"][0]["user"]["exec"]["command"] = "gqa-no-such-auth-plugin"
            cfg["users"][0]["user"]["exec"]["installHint"] = "install it: https://example.invalid/plugin"
            with open(cfg_path, "w") as f:
                yaml.safe_dump(cfg, f)
            r = kubectl_gpu(["top"], env={"KUBECONFIG": cfg_path})
            s.check(r.code == 1 and "executable not found: install it: https://example.invalid/plugin" in r.err,
                    "a missing plugin: its installHint", r)
            # A plugin that hangs: the request deadline ends it.
            d = exec_plugin(s, "exec sleep 60")
            r = kubectl_gpu(["top", "--request-timeout", "1s"], env={"KUBECONFIG": exec_kubeconfig(c, d)})
            s.check(r.code == 1 and "did not finish within 1000 ms (killed)" in r.err, "a hanging plugin is killed", r)


@suite.test
def service_runs_with_an_exec_credential(s):
    """The service itself, started with a kubeconfig whose user is an exec plugin."""
    with e2e.Cluster(s, tokens=("svc-exec-1",)) as c:
        for obj in demo_objects():
            c.sim.upsert(obj)
        d = exec_plugin(s, print_credential("svc-exec-$n", "2200-01-01T00:00:00Z"))
        with e2e.LiveServer(s, exec_kubeconfig(c, d)) as srv:
            nodes = srv.get_json("/inspect/nodes?topology=false")
            s.check_eq(sorted(n["node"] for n in nodes), ["cpu-0", "gpu-a100-0", "gpu-t4-0", "gpu-v100-0"],
                       "the service lists and watches with the plugin's token")
            s.check_eq(exec_runs(d), 1, "one run serves every informer and client of the service")


CONTROL = "\x1b]0;owned\x07\x1b[2J\x9b31m\x7f"  # OSC title, clear screen, C1 CSI, DEL


def no_controls(text):
    """No C0 control but newline and tab (cJSON indents with tabs), no DEL, no C1 control."""
    return not [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f]


@suite.test
def cluster_text_is_escaped(s):
    """issue 22 item 8: escapes from the topology annotation's model, node
    names and quota ConfigMap keys reached the terminal. The model is refused
    when the annotation is parsed; everything else the plugin prints from the
    cluster shows control characters escaped (\x1b, \u009b, \x7f)."""
    topo = e2e.topology(2, model="A100" + CONTROL)
    bad_topo = e2e.node("n-topo", e2e.vcuda(200, 32), topo=topo, labels={"tkestack.io/gpu-model": "A100"})
    odd = e2e.node("n\x1b[31mred\x7f", e2e.vcuda(200, 32), topo=e2e.topology(2),
                   labels={"tkestack.io/gpu-model": "M" + CONTROL, "tkestack.io/gpu-pool": "public"})
    quota = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-quota", "namespace": "kube-system"},
             "data": {"gpu_quota": json.dumps({"team" + CONTROL: {"pool": ["public"], "quota": {"A100": 2}}})}}
    state = e2e.write_state(s, [bad_topo, odd, quota])
    with e2e.Server(s, state) as srv:
        node = srv.inspect("n-topo")
        err = json.dumps(node)
        s.check("gpus[0].model: control characters" in err, "the topology annotation is refused for its model",
                err[:600])
        for args in (["top"], ["top", "-o", "wide"], ["top", "gpus", "-o", "wide"], ["quota"]):
            r = kubectl_gpu(args + server_flag(srv))
            s.check_eq(r.code, 0, "kubectl gpu %s exits 0" % " ".join(args), r)
            s.check(no_controls(r.out) and no_controls(r.err), "no control character in kubectl gpu %s" % " ".join(args),
                    repr(r.out[:800]))
        r = kubectl_gpu(["top"] + server_flag(srv))
        s.check("n\\x1b[31mred\\x7f" in r.out, "the node name shows its escapes", repr(r.out))
        s.check("M\\x1b]0;owned\\x07\\x1b[2J\\u009b31m\\x7f" in r.out, "the model label shows its escapes",
                repr(r.out))
        r = kubectl_gpu(["quota"] + server_flag(srv))
        s.check("team\\x1b]0;owned" in r.out, "the quota key shows its escapes", repr(r.out))
        for fmt in ("json", "yaml"):
            r = kubectl_gpu(["top", "-o", fmt] + server_flag(srv))
            s.check(no_controls(r.out), "-o %s has no raw control character" % fmt, repr(r.out[:800]))
            data = json.loads(r.out) if fmt == "json" else yaml.safe_load(r.out)
            s.check_eq(data, srv.get_json("/inspect/nodes?topology=false"), "-o %s is still the same data" % fmt)


if __name__ == "__main__":
    suite.main()
