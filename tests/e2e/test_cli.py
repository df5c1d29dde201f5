#!/usr/bin/env python3
"""The command line (design.md section 8): --help lists every flag and each listed
flag is accepted; --version; bad flags and bad values exit 2 with one line
naming the flag; GQA_* environment twins (flags win over them); start-up
failures; the `simulate` subcommand's output and exit codes (0 fits, 1 fits
nowhere, 2 bad input)."""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_cli")

# Every flag of design.md section 8 that this build serves.
EXPECTED_FLAGS = ["listen-http", "listen-https", "tls-cert", "tls-key", "tls-client-ca", "state-file", "pod",
                  "placement", "gpu-policy", "node-policy", "assume-ttl", "threads", "max-body-bytes", "log-level",
                  "log-format", "version", "help", "kubeconfig", "crl-namespace", "quota-configmap",
                  "leader-elect", "lease-namespace", "lease-name", "gpu-model-label", "gpu-pool-label",
                  "tls-min-version", "tls-cipher-suites", "body-budget", "max-connections",
                  "max-connections-per-ip", "read-timeout", "v", "vcuda-shares"]


def help_flags(text):
    """{flag: placeholder or None} from --help output."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s+--([a-z][a-z0-9-]*)(?:[ =](\S+))?\s{2,}\S", line) or \
            re.match(r"^\s+--([a-z][a-z0-9-]*)(?: (\S+))?\s*\S*", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def sample(flag, placeholder, files):
    if placeholder is None:
        return []
    if "|" in placeholder:
        return [placeholder.split("|")[0]]
    return [{"ADDR:PORT": "127.0.0.1:3999", "FILE": files, "DURATION": "30s", "N": "3",
             "BYTES": "1Mi", "NAMESPACE/NAME": "kube-system/gpu-quota", "NAMESPACE": "kube-system",
             "NAME": "gpu-quota-admission", "LABEL": "example.com/gpu-model", "FACTOR": "1.5", "MIB": "4096",
             "PERCENT": "20", "VERSION": "VersionTLS13",
             "SUITE,...": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}.get(placeholder, "x")]


def one_line_error(s, r, flag, label):
    s.check_eq(r.code, 2, "%s: exit 2" % label, r)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    s.check_eq(len(lines), 1, "%s: exactly one line on stderr" % label, r.err)
    s.check_in(flag, r.err, "%s: the message names %s" % (label, flag))
    s.check_eq(r.out, "", "%s: nothing on stdout" % label)


@suite.test
def help_lists_every_flag(s):
    r = g.run_binary(s, ["--help"])
    s.check_eq(r.code, 0, "--help exits 0", r)
    s.check_in("Usage", r.out, "--help prints usage on stdout")
    s.check_in("simulate", r.out, "--help mentions the simulate subcommand")
    s.check_in("GQA_", r.out, "--help mentions the GQA_* environment twins")
    listed = help_flags(r.out)
    for f in EXPECTED_FLAGS:
        s.check(f in listed, "--help lists --%s" % f, r.out)
    for line in r.out.splitlines():
        if line.strip().startswith("--"):
            s.check(len(line.split()) >= 3, "help line for %s has a description" % line.split()[0], line)
    # Every listed flag is accepted (with a sample value; dependencies added).
    files = s.demo_state
    for f, ph in sorted(listed.items()):
        args = ["--" + f] + sample(f, ph, files)
        if f in ("listen-https", "tls-client-ca", "tls-min-version", "tls-cipher-suites"):
            args += ["--tls-cert", files, "--tls-key", files]
        if f in ("tls-client-ca", "tls-min-version", "tls-cipher-suites"):
            args += ["--listen-https", "127.0.0.1:3998"]
        if f != "help":
            args += ["--help"]
        rr = g.run_binary(s, args)
        if f == "version":
            s.check_eq(rr.code, 0, "--version --help is accepted", rr)
            continue
        s.check_eq(rr.code, 0, "--%s is accepted (%s)" % (f, " ".join(args)), rr)
        s.check_in("Usage", rr.out, "--%s ... --help still prints help" % f)
    # --flag=value works as well as --flag value.
    rr = g.run_binary(s, ["--threads=3", "--placement=bind", "--assume-ttl=2m", "--help"])
    s.check_eq(rr.code, 0, "--flag=value syntax is accepted", rr)
    r2 = g.run_binary(s, ["simulate", "--help"])
    s.check_eq(r2.code, 0, "simulate --help exits 0", r2)
    s.check_in("--pod", r2.out, "simulate --help lists --pod")


@suite.test
def version(s):
    r = g.run_binary(s, ["--version"])
    s.check_eq(r.code, 0, "--version exits 0", r)
    s.check(re.match(r"^gpu-quota-admission \d+\.\d+\.\d+", r.out), "--version prints the name and a version", r.out)
    s.check_eq(len(r.out.strip().splitlines()), 1, "--version prints one line")
    s.check_eq(r.err, "", "--version prints nothing on stderr")


@suite.test
def bad_flags(s):
    st = ["--state-file", s.demo_state]
    r = g.run_binary(s, st + ["--bogus"])
    one_line_error(s, r, "--bogus", "unknown flag")
    r = g.run_binary(s, st + ["--bogus=1"])
    one_line_error(s, r, "--bogus", "unknown flag with =value")
    r = g.run_binary(s, st + ["-h"])
    one_line_error(s, r, "-h", "single-dash argument")
    r = g.run_binary(s, st + ["serve"])
    one_line_error(s, r, "serve", "unexpected positional argument")
    r = g.run_binary(s, st + ["--threads"])
    one_line_error(s, r, "--threads", "missing value")
    r = g.run_binary(s, st + ["--help=yes"])
    one_line_error(s, r, "--help", "a switch given a value")
    bad_values = [("--placement", "sideways"), ("--placement", ""), ("--gpu-policy", "random"),
                  ("--node-policy", "roundrobin"), ("--assume-ttl", "soon"), ("--assume-ttl", "-5s"),
                  ("--assume-ttl", "0"), ("--assume-ttl", "10x"), ("--threads", "-1"), ("--threads", "many"),
                  ("--threads", "2x"), ("--threads", "100000"), ("--max-body-bytes", "lots"),
                  ("--max-body-bytes", "100"), ("--max-body-bytes", "-1Mi"), ("--max-body-bytes", "0.5"),
                  ("--log-level", "loud"), ("--log-format", "xml"), ("--listen-http", "nonsense"),
                  ("--listen-http", "127.0.0.1:99999"), ("--listen-http", "127.0.0.1:"),
                  ("--listen-http", "::1:80"), ("--listen-http", "127.0.0.1:http")]
    for flag, value in bad_values:
        r = g.run_binary(s, st + [flag, value])
        one_line_error(s, r, flag, "%s %r" % (flag, value))
        s.check(value == "" or value in r.err, "%s %r: the message quotes the value" % (flag, value), r.err)
    r = g.run_binary(s, [])
    one_line_error(s, r, "--state-file", "no --state-file")
    r = g.run_binary(s, st + ["--listen-http", ""])
    one_line_error(s, r, "--listen-http", "nothing to serve")


@suite.test
def environment_twins(s):
    st = ["--state-file", s.demo_state]
    for env, value, name in (("GQA_THREADS", "abc", "GQA_THREADS"), ("GQA_PLACEMENT", "maybe", "GQA_PLACEMENT"),
                             ("GQA_MAX_BODY_BYTES", "12", "GQA_MAX_BODY_BYTES"),
                             ("GQA_LISTEN_HTTP", "nowhere", "GQA_LISTEN_HTTP")):
        r = g.run_binary(s, st, env={env: value})
        one_line_error(s, r, name, "bad %s" % env)
    r = g.run_binary(s, [], env={"GQA_STATE_FILE": s.demo_state, "GQA_LISTEN_HTTP": "", "GQA_THREADS": "2"})
    one_line_error(s, r, "--listen-http", "GQA_LISTEN_HTTP=\"\" and no HTTPS")

    topo = g.topology(2)
    state = g.write_state(s, [g.node("e-0", {"nvidia.com/gpu": 2}, topo), g.node("e-1", {"nvidia.com/gpu": 2}, topo)])
    pod = g.pod("envpod", g.pgpu(1))
    with g.Server(s, state, env={"GQA_PLACEMENT": "bind"}) as srv:
        res = srv.filter(pod, ["e-0", "e-1"])
        s.check_eq(res["NodeNames"], ["e-0", "e-1"], "GQA_PLACEMENT=bind: every feasible node answered")
    with g.Server(s, state, ["--placement", "filter"], env={"GQA_PLACEMENT": "bind"}) as srv:
        res = srv.filter(pod, ["e-0", "e-1"])
        s.check_eq(len(res["NodeNames"]), 1, "--placement filter beats GQA_PLACEMENT=bind")
    with g.Server(s, state, env={"GQA_MAX_BODY_BYTES": "2Ki"}) as srv:
        r = srv.post("/scheduler/filter", {"Pod": pod, "NodeNames": ["e-0"], "pad": "x" * 3000})
        s.check_eq(r.status, 413, "GQA_MAX_BODY_BYTES=2Ki caps bodies")
        r = srv.post("/scheduler/filter", {"Pod": pod, "NodeNames": ["e-0"]})
        s.check_eq(r.status, 200, "small bodies still pass under GQA_MAX_BODY_BYTES")
    with g.Server(s, state, env={"GQA_GPU_POLICY": "spread", "GQA_VCUDA_SHARES": "refuse"}) as srv:
        res = srv.filter(g.pod("v", g.vcuda(10, 1)), ["e-0"])
        s.check_in("--vcuda-shares refuse", res.get("Error"), "GQA_VCUDA_SHARES=refuse is honoured")
    r = g.run_binary(s, ["--state-file", state], env={"GQA_GPU_POLICY": "spread"}, timeout=30)
    s.check_eq(r.code, 2, "GQA_GPU_POLICY=spread is honoured: refused at start without --vcuda-shares refuse", r)
    # GQA_LISTEN_HTTP alone decides where the server listens.
    port = g.free_port()
    env = dict(os.environ, GQA_LISTEN_HTTP="127.0.0.1:%d" % port)
    err_path = os.path.join(s.tempdir("env"), "stderr.log")
    with open(err_path, "wb") as ef:
        p = subprocess.Popen([s.binary, "--state-file", state], stdout=ef, stderr=ef, env=env)
        ok = False
        deadline = time.monotonic() + g.READY_TIMEOUT_S
        while time.monotonic() < deadline and p.poll() is None:
            try:
                ok = g.http_request("127.0.0.1", port, "GET", "/readyz", timeout=2).status == 200
            except OSError:
                ok = False
            if ok:
                break
            time.sleep(0.02)
        s.check(ok, "GQA_LISTEN_HTTP sets the listen address")
        p.terminate()
        s.check_eq(p.wait(30), 0, "exit 0 after SIGTERM")
    with open(err_path, "rb") as ef:
        err = ef.read().decode("utf-8", "replace")
    s.check(g.sanitizer_report(err) is None, "no sanitizer report", err[-3000:])


@suite.test
def startup_failures(s):
    r = g.run_binary(s, ["--state-file", os.path.join(s.tmp_root, "missing.yaml"), "--listen-http",
                         "127.0.0.1:%d" % g.free_port()])
    s.check(r.code not in (0, None), "a missing state file stops the server", r)
    s.check_in("missing.yaml", r.err, "the message names the state file")
    bad = g.write_file(s, "bad.yaml", "items: [\n")
    r = g.run_binary(s, ["--state-file", bad, "--listen-http", "127.0.0.1:%d" % g.free_port()])
    s.check(r.code not in (0, None), "an unparsable state file stops the server", r)
    s.check_in("line", r.err, "the message gives the line")
    # Port already taken by a running server.
    with g.Server(s) as srv:
        r = g.run_binary(s, ["--state-file", s.demo_state, "--listen-http", "127.0.0.1:%d" % srv.port], timeout=20)
        s.check(r.code not in (0, None), "a port in use stops the second server", r)
        s.check_in(str(srv.port), r.err, "the message names the address")
        s.check_in("already in use", r.err, "and says the port is in use")
        s.check_eq(srv.get("/healthz").status, 200, "the first server is unaffected")
        port = srv.port
        for _ in range(5):      # closed connections leave TIME_WAIT sockets behind
            srv.filter(g.demo_pod("gpu-4"), ["gpu-v100-0"])
    # An address that is not this host's.
    r = g.run_binary(s, ["--state-file", s.demo_state, "--listen-http", "192.0.2.1:%d" % g.free_port()], timeout=20)
    s.check(r.code not in (0, None), "an address not of this host stops the server", r)
    s.check_in("not one of this host's", r.err, "and the message says so")
    # A restart on the same port right after the stop works.
    with g.Server(s, port=port, name="restarted") as srv:
        s.check_eq(srv.get("/healthz").status, 200, "a restarted server binds the same port at once")


def simulate(s, pod_path, *extra, state=None):
    return g.run_binary(s, ["simulate", "--state-file", state or s.demo_state, "--pod", pod_path] + list(extra))


@suite.test
def simulate_subcommand(s):
    pods_dir = s.path("examples", "pods")
    expect_best = {"gpu-4.yaml": "gpu-v100-0", "mps-share.yaml": "gpu-t4-0", "vcuda-share.yaml": "gpu-a100-0",
                   "vcuda-two-containers.yaml": "gpu-a100-0", "vcuda-whole-4.yaml": "gpu-a100-0"}
    for fname in sorted(os.listdir(pods_dir)):
        if not fname.endswith(".yaml"):
            continue
        r = simulate(s, os.path.join(pods_dir, fname))
        try:
            ans = json.loads(r.out)
        except ValueError:
            s.check(False, "simulate %s prints JSON" % fname, r)
            continue
        if fname == "vcuda-no-memory.yaml":
            s.check_eq(r.code, 1, "simulate %s (fits nowhere): exit 1" % fname, r)
            s.check(all(not n["fits"] and "tencent.com/vcuda-memory" in n["reason"] for n in ans["nodes"]),
                    "every node explains the missing vcuda-memory", ans)
            continue
        if fname == "six-a100.yaml":  # the README's pod that fits nowhere: one A100 short
            s.check_eq(r.code, 1, "simulate %s (fits nowhere): exit 1" % fname, r)
            s.check_eq((ans["nearMiss"] or {}).get("node"), "gpu-a100-0", "simulate %s: the nearest miss" % fname)
            continue
        s.check_eq(r.code, 0, "simulate %s: exit 0" % fname, r)
        s.check_eq(ans["pod"], "default/" + fname[:-5], "simulate %s names the pod" % fname)
        s.check_eq(sorted(n["node"] for n in ans["nodes"]), g.DEMO_NODES, "simulate %s covers every node" % fname)
        s.check_eq((ans["nodes"][0]["node"], ans["nodes"][0]["fits"]), (expect_best[fname], True),
                   "simulate %s: best node first" % fname)
        s.check(g.ranked_ok(ans), "simulate %s: ranked" % fname, ans)

    # simulate answers exactly what /inspect/explain answers for the same pod.
    with g.Server(s) as srv:
        for name in sorted(g.DEMO_PODS):
            r = simulate(s, os.path.join(pods_dir, name + ".yaml"))
            via_http = srv.post("/inspect/explain", g.demo_pod(name))
            s.check_eq(json.loads(r.out), via_http.json(), "simulate and POST /inspect/explain agree for %s" % name)

    # A JSON pod file, and flags simulate shares with the server.
    pj = g.write_file(s, "pod.json", json.dumps(g.pod("j", g.pgpu(2))))
    r = simulate(s, pj)
    s.check_eq(r.code, 0, "simulate with a JSON pod: exit 0", r)
    s.check_eq(len(json.loads(r.out)["nodes"][0]["gpus"].get("main", [])), 2, "two GPUs for nvidia.com/gpu: 2")
    r = simulate(s, os.path.join(pods_dir, "vcuda-share.yaml"), "--gpu-policy", "spread")
    s.check_eq(r.code, 2, "simulate with --gpu-policy spread and vcuda shares placed: exit 2", r)
    s.check_in("--vcuda-shares refuse", r.err, "the message names the fix")
    r = simulate(s, os.path.join(pods_dir, "vcuda-share.yaml"), "--gpu-policy", "spread", "--vcuda-shares", "refuse")
    s.check_eq(r.code, 1, "simulate a vcuda share with --vcuda-shares refuse: exit 1", r)
    s.check_in("--vcuda-shares refuse", json.loads(r.out).get("error", "") if r.out else "",
               "and the answer carries the error")
    r = simulate(s, os.path.join(pods_dir, "mps-share.yaml"), "--gpu-policy", "spread", "--vcuda-shares", "refuse",
                 "--placement", "bind")
    s.check_eq(r.code, 0, "simulate MPS with spread: exit 0", r)
    s.check_eq(json.loads(r.out)["nodes"][0]["gpus"], {"worker": [0]}, "spread puts the MPS share on idle GPU 0")
    r = g.run_binary(s, ["simulate", "--pod", pj], env={"GQA_STATE_FILE": s.demo_state})
    s.check_eq(r.code, 0, "simulate takes GQA_STATE_FILE from the environment", r)
    with open(pj, "rb") as f:
        r = g.run_binary(s, ["simulate", "--state-file", s.demo_state, "--pod", "-"], stdin_data=f.read())
    s.check_eq(r.code, 0, "simulate --pod - reads the pod from standard input", r)
    s.check_eq(json.loads(r.out)["pod"], "default/j", "and places that pod")

    # Bad input: exit 2 with a message, nothing on stdout.
    cases = [("missing pod file", [os.path.join(s.tmp_root, "nope.yaml")], "nope.yaml"),
             ("invalid YAML", [g.write_file(s, "bad.yaml", "metadata: [1, 2\n")], "bad.yaml"),
             ("empty file", [g.write_file(s, "empty.yaml", "")], "empty.yaml"),
             ("a YAML list", [g.write_file(s, "list.yaml", "- a\n- b\n")], "list.yaml"),
             ("a JSON string", [g.write_file(s, "str.json", "\"pod\"")], "str.json"),
             ("malformed JSON", [g.write_file(s, "bad.json", "{\"metadata\": ")], "bad.json"),
             ("no metadata.name", [g.write_file(s, "noname.yaml", "kind: Pod\nmetadata:\n  namespace: x\n")],
              "metadata.name")]
    for label, args, needle in cases:
        r = simulate(s, *args)
        s.check_eq(r.code, 2, "simulate, %s: exit 2" % label, r)
        s.check_in(needle, r.err, "simulate, %s: message says %s" % (label, needle))
        s.check_eq(r.out, "", "simulate, %s: nothing on stdout" % label)
    r = g.run_binary(s, ["simulate", "--state-file", s.demo_state])
    one_line_error(s, r, "--pod", "simulate without --pod")
    r = g.run_binary(s, ["simulate", "--pod", pj])
    one_line_error(s, r, "--state-file", "simulate without --state-file")
    r = g.run_binary(s, ["simulate", "--state-file", s.demo_state, "--pod", pj, "--threads", "2"])
    one_line_error(s, r, "--threads", "simulate with a server-only flag")
    r = g.run_binary(s, ["simulate", "--state-file", s.demo_state, "--pod", pj, "--gpu-policy", "x"])
    one_line_error(s, r, "--gpu-policy", "simulate with a bad value")
    r = simulate(s, pj, state=g.write_file(s, "badstate.yaml", "items: [\n"))
    s.check_eq(r.code, 2, "simulate with an unparsable state file: exit 2", r)
    r = simulate(s, pj, state=os.path.join(s.tmp_root, "nostate.yaml"))
    s.check_eq(r.code, 2, "simulate with a missing state file: exit 2", r)
    s.check_in("nostate.yaml", r.err, "and the message names it")


if __name__ == "__main__":
    suite.main()
