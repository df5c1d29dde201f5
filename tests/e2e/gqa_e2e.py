"""Shared helpers for the gpu-quota-admission end-to-end tests.

Every tests/e2e/test_*.py script is standalone: CTest runs it as
`python3 SCRIPT --binary PATH --source-dir REPO`. A script builds a Suite,
registers test functions with @suite.test, and calls suite.main(). Checks are
soft (a failed check is recorded and the test goes on); an exception ends the
test function that raised it and counts as one failure. The last line printed
is "N passed, M failed"; the exit code is 0 only when M is 0.

Servers are started with Server(...): a free port, the given flags and state
file, readiness by polling /readyz, stop by SIGTERM with exit code 0 asserted,
and the server's stderr scanned for sanitizer reports (any is a failure).

Python 3 standard library only.
"""

import argparse
import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib

SANITIZER_PATTERNS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "LeakSanitizer",
    "runtime error:",
    "ERROR: ThreadSanitizer",
    "WARNING: ThreadSanitizer",
)

# Generous: a sanitizer build starts and answers several times slower.
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 40.0
REQUEST_TIMEOUT_S = 30.0


class TestFailure(Exception):
    """A failed require(): ends the current test function."""


def sanitizer_report(text):
    """The first line of text that looks like a sanitizer report, or None."""
    for line in text.splitlines():
        for pat in SANITIZER_PATTERNS:
            if pat in line:
                return line.strip()
    return None


# ---------------------------------------------------------------------------
# The suite: soft checks, counting, the final line
# ---------------------------------------------------------------------------

class Suite:
    def __init__(self, name):
        self.name = name
        self.tests = []
        self.passed = 0
        self.failed = 0
        self.current = None
        self.lock = threading.Lock()
        self.args = None
        self.tmp_root = None
        self.verbose = False

    # -- registration -------------------------------------------------------
    def test(self, fn):
        self.tests.append(fn)
        return fn

    # -- checks -------------------------------------------------------------
    def check(self, cond, what, detail=None):
        """Record one check. Returns cond so callers can branch on it."""
        with self.lock:
            if cond:
                self.passed += 1
                if self.verbose:
                    print("  ok   %s" % what)
            else:
                self.failed += 1
                msg = "  FAIL [%s] %s" % (self.current, what)
                if detail is not None:
                    d = detail if isinstance(detail, str) else repr(detail)
                    if len(d) > 3000:
                        d = d[:3000] + "...(truncated)"
                    msg += "\n        " + d.replace("\n", "\n        ")
                print(msg, flush=True)
        return bool(cond)

    def check_eq(self, got, want, what, detail=None):
        d = "got %r, want %r" % (got, want)
        if detail is not None:
            d += "\n" + (detail if isinstance(detail, str) else repr(detail))
        return self.check(got == want, what, d)

    def check_in(self, needle, haystack, what):
        return self.check(haystack is not None and needle in haystack, what,
                          "%r not found in %r" % (needle, haystack))

    def require(self, cond, what, detail=None):
        if not self.check(cond, what, detail):
            raise TestFailure(what)

    # -- running ------------------------------------------------------------
    def parse_args(self):
        ap = argparse.ArgumentParser(description=self.name)
        ap.add_argument("--binary", required=True, help="path to gpu-quota-admission")
        ap.add_argument("--source-dir", required=True, help="repository root")
        ap.add_argument("--verbose", "-v", action="store_true")
        ap.add_argument("--keep-temp", action="store_true", help="keep temporary files")
        ap.add_argument("-k", dest="only", default=None, help="run only tests whose name contains this")
        self.args = ap.parse_args()
        self.args.binary = os.path.abspath(self.args.binary)
        self.args.source_dir = os.path.abspath(self.args.source_dir)
        self.verbose = self.args.verbose

    @property
    def binary(self):
        return self.args.binary

    @property
    def source_dir(self):
        return self.args.source_dir

    def path(self, *parts):
        return os.path.join(self.args.source_dir, *parts)

    @property
    def demo_state(self):
        return self.path("examples", "demo-state.yaml")

    def tempdir(self, prefix="t"):
        return tempfile.mkdtemp(prefix=prefix + "-", dir=self.tmp_root)

    def main(self):
        self.parse_args()
        if not os.access(self.binary, os.X_OK):
            print("binary %s is not executable" % self.binary)
            print("0 passed, 1 failed")
            sys.exit(1)
        self.tmp_root = tempfile.mkdtemp(prefix="gqa-e2e-")
        t0 = time.monotonic()
        try:
            for fn in self.tests:
                if self.args.only and self.args.only not in fn.__name__:
                    continue
                self.current = fn.__name__
                start = time.monotonic()
                before = self.failed
                try:
                    fn(self)
                except TestFailure:
                    pass
                except Exception:
                    self.check(False, "%s raised" % fn.__name__, traceback.format_exc())
                status = "ok" if self.failed == before else "FAILED"
                print("%-50s %-6s (%.2fs)" % (fn.__name__, status, time.monotonic() - start), flush=True)
        finally:
            if self.args.keep_temp:
                print("temporary files kept in %s" % self.tmp_root)
            else:
                shutil.rmtree(self.tmp_root, ignore_errors=True)
        print("%s: %.1fs" % (self.name, time.monotonic() - t0))
        print("%d passed, %d failed" % (self.passed, self.failed), flush=True)
        sys.exit(0 if self.failed == 0 else 1)


# ---------------------------------------------------------------------------
# Ports and HTTP
# ---------------------------------------------------------------------------

def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # dict, lower-case names
        self.body = body                # bytes

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        b = self.text
        if len(b) > 600:
            b = b[:600] + "..."
        return "<%d %s>" % (self.status, b)


def http_request(host, port, method, path, body=None, headers=None, tls_context=None,
                 timeout=REQUEST_TIMEOUT_S, server_hostname=None):
    """One request on a fresh connection. body may be bytes, str, or a JSON-able object."""
    if body is not None and not isinstance(body, (bytes, bytearray)):
        body = body.encode("utf-8") if isinstance(body, str) else json.dumps(body).encode("utf-8")
    hdrs = {"Connection": "close"}
    if body is not None:
        hdrs["Content-Type"] = "application/json"
    if headers:
        hdrs.update(headers)
    if tls_context is not None:
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=tls_context)
        if server_hostname:
            conn.host = server_hostname
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def raw_exchange(port, request_bytes, chunks=(), chunk_delay=0.0, timeout=REQUEST_TIMEOUT_S, host="127.0.0.1"):
    """Send request_bytes and then each of chunks over a plain socket, tolerating
    the server closing early (EPIPE/ECONNRESET), and parse the response."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        try:
            s.sendall(request_bytes)
            for c in chunks:
                if chunk_delay:
                    time.sleep(chunk_delay)
                s.sendall(c)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_http_response(s)
    finally:
        s.close()


def read_http_response(src):
    """Parse one HTTP/1.1 response (Content-Length or close-delimited) from a
    socket, or from a binary file made by sock.makefile("rb") when several
    responses are read from one connection (pipelining)."""
    f = src.makefile("rb") if isinstance(src, socket.socket) else src
    try:
        status_line = f.readline(65537)
    except (ConnectionResetError, socket.timeout):
        status_line = b""
    if not status_line.startswith(b"HTTP/"):
        raise IOError("no HTTP response (got %r)" % status_line[:200])
    status = int(status_line.split()[1])
    headers = {}
    while True:
        line = f.readline(65537)
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    body = b""
    try:
        if "content-length" in headers:
            want = int(headers["content-length"])
            while len(body) < want:
                d = f.read(want - len(body))
                if not d:
                    break
                body += d
        elif status >= 200 and status not in (204, 304):
            body = f.read()
    except ConnectionResetError:
        pass
    return Response(status, headers, body)


# ---------------------------------------------------------------------------
# The server under test
# ---------------------------------------------------------------------------

_LIVE = set()


def _kill_leftovers():
    for proc in list(_LIVE):
        if proc.poll() is None:
            proc.kill()
            proc.wait()


atexit.register(_kill_leftovers)


def _die_with_parent():
    """preexec_fn: the server gets SIGKILL if this test process dies (CTest timeout)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Server:
    """The binary, serving. Use as a context manager:

        with Server(suite, state, ["--placement", "bind"]) as srv:
            r = srv.post("/scheduler/filter", args)

    On exit: SIGTERM, the exit code must be 0, and stderr must carry no
    sanitizer report (both are checks)."""

    def __init__(self, suite, state_file=None, flags=(), env=None, https=False, tls=None,
                 client_ca=False, http=True, threads=None, name="server", port=None):
        self.suite = suite
        self.state_file = state_file or suite.demo_state
        self.flags = list(flags)
        self.env = env
        self.https = https
        self.tls = tls
        self.client_ca = client_ca
        self.want_http = http
        self.threads = threads
        self.name = name
        self.proc = None
        self.fixed_port = port
        self.port = None
        self.https_port = None
        self.stderr_path = None
        self.stopped = False

    # -- lifecycle ------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False

    def cluster_flags(self):
        """Where the cluster comes from: the state file (LiveServer: a kubeconfig)."""
        return ["--state-file", self.state_file]

    def command(self):
        cmd = [self.suite.binary] + self.cluster_flags()
        cmd += ["--listen-http", "127.0.0.1:%d" % self.port if self.want_http else ""]
        if self.https:
            cmd += ["--listen-https", "127.0.0.1:%d" % self.https_port,
                    "--tls-cert", self.tls.server_cert, "--tls-key", self.tls.server_key]
            if self.client_ca:
                cmd += ["--tls-client-ca", self.tls.ca_cert]
        if self.threads:
            cmd += ["--threads", str(self.threads)]
        # "{port}" in a flag is the port of this start: a retry after "cannot listen" (another test took
        # the free port first) moves that flag too.
        return cmd + [f.replace("{port}", str(self.port)) if isinstance(f, str) else f for f in self.flags]

    def start(self):
        last = None
        for _attempt in range(4):
            self.port = self.fixed_port or free_port()
            self.https_port = free_port() if self.https else None
            d = self.suite.tempdir(self.name)
            self.stderr_path = os.path.join(d, "stderr.log")
            env = dict(os.environ)
            for k in list(env):
                if k.startswith("GQA_"):
                    del env[k]
            env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
            env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
            if self.env:
                env.update(self.env)
            self.errf = open(self.stderr_path, "wb")
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=self.errf,
                                         stderr=self.errf, env=env, preexec_fn=_die_with_parent)
            _LIVE.add(self.proc)
            ok, why = self._wait_ready()
            if ok:
                self.stopped = False
                return self
            last = why
            self._kill()
            if "cannot listen" not in self.stderr() or self.fixed_port:
                break
        self.stopped = True
        self.suite.require(False, "%s starts and becomes ready" % self.name,
                           "%s\ncommand: %s\nstderr:\n%s" % (last, " ".join(self.command()), self.stderr()))

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, "exited early with code %d" % self.proc.returncode
            # The port came from free_port(): make sure it is this process
            # that listens there (its log says so) before trusting a probe.
            if "--log-level" not in self.flags and "listening on" not in self.stderr():
                time.sleep(0.01)
                continue
            try:
                r = self.ready_probe()
                if r.status == 200 and self.proc.poll() is None:
                    return True, None
            except (OSError, http.client.HTTPException, ssl.SSLError):
                pass
            time.sleep(0.02)
        return False, "not ready after %.0fs" % READY_TIMEOUT_S

    # start() waits for 200 from this path (LiveServer may wait for /healthz only).
    ready_path = "/readyz"

    def ready_probe(self):
        if self.want_http:
            return http_request("127.0.0.1", self.port, "GET", self.ready_path, timeout=2)
        ctx = self.tls.client_context(with_cert=self.client_ca)
        return http_request("127.0.0.1", self.https_port, "GET", self.ready_path, tls_context=ctx, timeout=2)

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.errf:
            self.errf.close()
            self.errf = None

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=STOP_TIMEOUT_S):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, expect_code=0):
        """SIGTERM (unless already signalled), wait, check the exit code and stderr."""
        if self.stopped or self.proc is None:
            return
        self.stopped = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.wait_exit()
        if code is None:
            self._kill()
        if self.errf:
            self.errf.close()
            self.errf = None
        err = self.stderr()
        self.suite.check(code == expect_code, "%s exits %d when stopped" % (self.name, expect_code),
                         "exit code %r; stderr:\n%s" % (code, tail(err)))
        self.check_sanitizers()

    def check_sanitizers(self):
        err = self.stderr()
        rep = sanitizer_report(err)
        self.suite.check(rep is None, "%s: no sanitizer report in stderr" % self.name,
                         "%s\nstderr:\n%s" % (rep, tail(err, 6000)))

    # -- requests -------------------------------------------------------------
    def request(self, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT_S):
        return http_request("127.0.0.1", self.port, method, path, body, headers, timeout=timeout)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def get_json(self, path):
        r = self.get(path)
        self.suite.require(r.status == 200, "GET %s answers 200" % path, r)
        return r.json()

    def post_json(self, path, body):
        r = self.post(path, body)
        self.suite.require(r.status == 200, "POST %s answers 200" % path, "%r\nstderr:\n%s" % (r, tail(self.stderr())))
        try:
            return r.json()
        except ValueError as e:
            self.suite.require(False, "POST %s answers JSON" % path, "%s: %r" % (e, r))

    def filter(self, pod, names, path="/scheduler/filter"):
        return self.post_json(path, {"Pod": pod, "NodeNames": names})

    def prioritize(self, pod, names, path="/scheduler/prioritize"):
        return self.post_json(path, {"Pod": pod, "NodeNames": names})

    def scores(self, pod, names):
        """{name: score} of every name sent, from a prioritize answer (scores_of)."""
        return scores_of(self.prioritize(pod, names), names)

    def explain(self, pod):
        return self.post_json("/inspect/explain", pod)

    def inspect(self, node=None):
        return self.get_json("/inspect/nodes" + ("/" + node if node else ""))

    def metrics(self):
        r = self.get("/metrics")
        self.suite.require(r.status == 200, "GET /metrics answers 200", r)
        return r


def tail(text, n=3000):
    return text if len(text) <= n else "..." + text[-n:]


# ---------------------------------------------------------------------------
# Running the binary as a command
# ---------------------------------------------------------------------------

class Run:
    def __init__(self, code, out, err):
        self.code = code
        self.out = out
        self.err = err

    def __repr__(self):
        return "<exit %r stdout=%r stderr=%r>" % (self.code, tail(self.out, 800), tail(self.err, 1500))


def run_binary(suite, args, env=None, timeout=60, stdin_data=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("GQA_"):
            del e[k]
    if env:
        e.update(env)
    stdin = {"input": stdin_data} if stdin_data is not None else {"stdin": subprocess.DEVNULL}
    p = subprocess.run([suite.binary] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       timeout=timeout, **stdin)
    r = Run(p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"))
    rep = sanitizer_report(r.err)
    suite.check(rep is None, "no sanitizer report from: %s" % " ".join(args)[:120], "%s\n%s" % (rep, r.err[-4000:]))
    return r


# ---------------------------------------------------------------------------
# TLS material (openssl CLI)
# ---------------------------------------------------------------------------

class TLSMaterial:
    """A CA, a server certificate for 127.0.0.1/localhost, a client certificate
    from that CA and a client certificate from an unrelated CA."""

    def __init__(self, directory):
        self.dir = directory
        p = lambda n: os.path.join(directory, n)  # noqa: E731
        self.ca_key, self.ca_cert = p("ca.key"), p("ca.crt")
        self.other_ca_key, self.other_ca_cert = p("other-ca.key"), p("other-ca.crt")
        self.server_key, self.server_cert = p("server.key"), p("server.crt")
        self.client_key, self.client_cert = p("client.key"), p("client.crt")
        self.rogue_key, self.rogue_cert = p("rogue.key"), p("rogue.crt")
        self._generate()

    def _ossl(self, *args, stdin=None):
        p = subprocess.run(["openssl"] + list(args), cwd=self.dir, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, input=stdin, timeout=60)
        if p.returncode != 0:
            raise RuntimeError("openssl %s failed: %s" % (" ".join(args), p.stderr.decode()))

    def _key(self, path):
        self._ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)

    def _ca(self, key, cert, cn):
        self._key(key)
        self._ossl("req", "-x509", "-new", "-key", key, "-sha256", "-days", "2", "-subj", "/CN=" + cn,
                   "-addext", "basicConstraints=critical,CA:TRUE",
                   "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", cert)

    def _leaf(self, key, cert, cn, ca_key, ca_cert, ext_lines):
        self._key(key)
        csr = cert + ".csr"
        ext = cert + ".ext"
        with open(ext, "w") as f:
            f.write("\n".join(ext_lines) + "\n")
        self._ossl("req", "-new", "-key", key, "-subj", "/CN=" + cn, "-out", csr)
        self._ossl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
                   "-days", "2", "-sha256", "-extfile", ext, "-out", cert)

    def _generate(self):
        self._ca(self.ca_key, self.ca_cert, "gqa-e2e-ca")
        self._ca(self.other_ca_key, self.other_ca_cert, "gqa-e2e-other-ca")
        self._leaf(self.server_key, self.server_cert, "gpu-quota-admission", self.ca_key, self.ca_cert,
                   ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
                    "extendedKeyUsage=serverAuth", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        client_ext = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature",
                      "extendedKeyUsage=clientAuth"]
        self._leaf(self.client_key, self.client_cert, "kube-scheduler", self.ca_key, self.ca_cert, client_ext)
        self._leaf(self.rogue_key, self.rogue_cert, "kube-scheduler", self.other_ca_key, self.other_ca_cert,
                   client_ext)

    def client_context(self, with_cert=False, cert=None, key=None, min_version=None, max_version=None,
                       verify=True):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if verify:
            ctx.load_verify_locations(self.ca_cert)
            ctx.check_hostname = True
        else:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if min_version is not None:
            ctx.minimum_version = min_version
        if max_version is not None:
            ctx.maximum_version = max_version
        if cert or with_cert:
            ctx.load_cert_chain(cert or self.client_cert, key or self.client_key)
        return ctx


# ---------------------------------------------------------------------------
# Kubernetes objects
# ---------------------------------------------------------------------------

def pod(name, containers, namespace="default", node=None, annotations=None, phase="Pending", uid=None):
    """containers: list of (name, {resource: quantity}) pairs, or one dict of limits."""
    if isinstance(containers, dict):
        containers = [("main", containers)]
    meta = {"name": name, "namespace": namespace, "uid": uid or ("%s-0000-4000-8000-%012d" % (name, 1))}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec = {"containers": [{"name": cn, "image": "registry.example.com/%s:1" % cn,
                            "resources": {"limits": {k: str(v) for k, v in lim.items()}}}
                           for cn, lim in containers]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def vcuda(cores, memory=None):
    d = {"tencent.com/vcuda-core": cores}
    if memory is not None:
        d["tencent.com/vcuda-memory"] = memory
    return d


def vcuda_node(name, gpus, mem_per_gpu=64):
    """A node with `gpus` vcuda GPUs of mem_per_gpu memory units each."""
    return node(name, vcuda(gpus * 100, gpus * mem_per_gpu))


def vgpu(n=1, mem=None, pct=None, cores=None):
    """A HAMi container's limits: nvidia.com/gpu and its optional companions."""
    d = {"nvidia.com/gpu": n}
    if mem is not None:
        d["nvidia.com/gpumem"] = mem
    if pct is not None:
        d["nvidia.com/gpumem-percentage"] = pct
    if cores is not None:
        d["nvidia.com/gpucores"] = cores
    return d


def pod_path(name, ns="default"):
    """The API path of one pod."""
    return "/api/v1/namespaces/%s/pods/%s" % (ns, name)


def topo_binary(suite):
    """The gpu-topology binary, built next to gpu-quota-admission."""
    return os.path.join(os.path.dirname(suite.binary), "gpu-topology")


def smi_fixture(suite, name, ext):
    """A recorded nvidia-smi output under tests/fixtures/nvidia-smi."""
    return suite.path("tests", "fixtures", "nvidia-smi", "%s.%s" % (name, ext))


def mps(cores, memory):
    return {"nvidia.com/mps-core": cores, "nvidia.com/mps-memory": memory}


def pgpu(n):
    return {"nvidia.com/gpu": n}


def topology(gpu_count, model="Test GPU", memory_mib=16384, minors=None, numa=None, link="NV1"):
    gpus = []
    for i in range(gpu_count):
        gpus.append({"index": i, "minor": minors[i] if minors else i, "uuid": "GPU-test-%02d" % i,
                     "model": model, "memoryMiB": memory_mib,
                     "numa": numa[i] if numa else 0})
    links = [["X" if i == j else link for j in range(gpu_count)] for i in range(gpu_count)]
    return {"version": 1, "gpus": gpus, "links": links}


def node(name, resources, topo=None, labels=None):
    """resources: extended resources as {name: quantity}."""
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    if labels:
        meta["labels"].update(labels)
    if topo is not None:
        meta["annotations"] = {"gpu-admission.io/topology": json.dumps(topo, separators=(",", ":"))}
    cap = {"cpu": "64", "memory": "256Gi"}
    cap.update({k: str(v) for k, v in resources.items()})
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"capacity": dict(cap), "allocatable": dict(cap)}}


def mig_node(suite, name, gpus=None, allocatable=None):
    """A node as NVIDIA's device plugin (mixed strategy) and GFD write it
    (tests/fixtures/mig/node-a100-mixed.json), named name; gpus: that many
    whole GPUs (nvidia.com/gpu) besides the MIG instances; allocatable:
    {profile: count} overriding the instances it offers."""
    with open(suite.path("tests", "fixtures", "mig", "node-a100-mixed.json")) as f:
        n = json.load(f)
    n["metadata"]["name"] = name
    n["metadata"]["labels"]["kubernetes.io/hostname"] = name
    for part in ("capacity", "allocatable"):
        if gpus is not None:
            n["status"][part]["nvidia.com/gpu"] = str(gpus)
    for profile, count in (allocatable or {}).items():
        n["status"]["allocatable"]["nvidia.com/mig-" + profile] = str(count)
    return n


def write_state(suite, objects, name="state.json"):
    d = suite.tempdir("state")
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}, f,
                  indent=1)
    return path


def write_file(suite, name, text):
    d = suite.tempdir("file")
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def full_node_objects(inspect_nodes):
    """Full v1 Node objects rebuilt from /inspect/nodes of a server serving the
    demo state: the same names, extended resources and topology annotation,
    plus the bulk a real kube-scheduler NodeList carries (conditions, images,
    addresses, nodeInfo)."""
    out = []
    for i, n in enumerate(inspect_nodes):
        name = n["node"]
        res = {k: str(v) for k, v in n.get("resources", {}).items() if v}
        cap = {"cpu": "128", "memory": "1056Gi", "pods": "110", "ephemeral-storage": "1Ti"}
        cap.update(res)
        meta = {"name": name, "uid": "node-uid-%04d" % i, "resourceVersion": str(1000 + i),
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                           "node.kubernetes.io/instance-type": "gpu-large"},
                "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                "volumes.kubernetes.io/controller-managed-attach-detach": "true"}}
        if n.get("topology"):
            meta["annotations"]["gpu-admission.io/topology"] = json.dumps(n["topology"], separators=(",", ":"))
        out.append({
            "kind": "Node", "apiVersion": "v1", "metadata": meta,
            "spec": {"podCIDR": "10.244.%d.0/24" % i, "providerID": "test://%s" % name},
            "status": {
                "capacity": cap, "allocatable": dict(cap),
                "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                                "lastTransitionTime": "2026-01-01T00:00:00Z",
                                "reason": "Kubelet" + t, "message": "kubelet says \"%s\"" % t}
                               for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.%d" % (i + 10)},
                              {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": "v1.30.0", "osImage": "Ubuntu 22.04", "architecture": "amd64",
                             "containerRuntimeVersion": "containerd://1.7.0"},
                "images": [{"names": ["registry.example.com/image-%d@sha256:%064d" % (k, k)],
                            "sizeBytes": 1000000 + k} for k in range(20)],
            },
        })
    return out


# ---------------------------------------------------------------------------
# Answers
# ---------------------------------------------------------------------------

def failed_reason(result, node_name):
    """The reason a filter result gives for node_name, from either failed map, or None."""
    for field in ("FailedNodes", "FailedAndUnresolvableNodes"):
        m = result.get(field) or {}
        if node_name in m:
            return m[node_name]
    return None


def explain_node(answer, node_name):
    for n in answer.get("nodes", []):
        if n.get("node") == node_name:
            return n
    return None


def gpu_of(inspect_node, index):
    return inspect_node["gpus"][index]


def parse_metrics(text):
    """Prometheus text -> {(name, frozenset(labels.items())): float}, plus the # TYPE map."""
    samples = {}
    types = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    bad = []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# TYPE "):
            parts = line.split()
            types[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = line_re.match(line)
        if not m:
            bad.append(line)
            continue
        labels = frozenset(label_re.findall(m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples, types, bad


def metric(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


# ---------------------------------------------------------------------------
# The demo state (examples/demo-state.yaml) and its example pods
# ---------------------------------------------------------------------------

DEMO_NODES = ["cpu-0", "gpu-a100-0", "gpu-t4-0", "gpu-v100-0"]
def scores_of(hp, names):
    """{name: score} of every name sent, from a HostPriorityList: the answer
    is relative to the request's lowest score and leaves the nodes at it out
    (docs/design.md), so a name left out scores 0, as kube-scheduler counts
    it. None when hp is not a list of entries for names sent, in order."""
    if not isinstance(hp, list):
        return None
    hosts = [h.get("Host") for h in hp]
    it = iter(names)
    if not all(any(h == n for n in it) for h in hosts):
        return None   # not a subsequence of the names sent
    got = {h["Host"]: h.get("Score") for h in hp}
    return {n: got.get(n, 0) for n in names}


DEMO_ARGS_ORDER = ["gpu-a100-0", "gpu-t4-0", "gpu-v100-0", "cpu-0"]


def checked_samples(suite, srv):
    """srv's /metrics samples, checking that every line parses."""
    got, _types, bad = parse_metrics(srv.metrics().text)
    suite.check_eq(bad, [], "every /metrics line parses")
    return got


def _example(name, containers):
    p = pod(name, containers, uid="%s-0000-4000-8000-000000000001" % name)
    return p


# The same pods as examples/pods/*.yaml, as JSON objects.
DEMO_PODS = {
    "gpu-4": _example("gpu-4", [("trainer", {"nvidia.com/gpu": "4"})]),
    "mps-share": _example("mps-share", [("worker", {"nvidia.com/mps-core": "25", "nvidia.com/mps-memory": "4"})]),
    "vcuda-no-memory": _example("vcuda-no-memory", [("app", {"tencent.com/vcuda-core": "30"})]),
    "vcuda-share": _example("vcuda-share", [("app", {"tencent.com/vcuda-core": "50",
                                                     "tencent.com/vcuda-memory": "64"})]),
    "vcuda-two-containers": _example("vcuda-two-containers", [
        ("model", {"tencent.com/vcuda-core": "40", "tencent.com/vcuda-memory": "32"}),
        ("sidecar", {"cpu": "100m"}),
        ("tokenizer", {"tencent.com/vcuda-core": "20", "tencent.com/vcuda-memory": "8"})]),
    "vcuda-whole-4": _example("vcuda-whole-4", [("trainer", {"tencent.com/vcuda-core": "400",
                                                             "tencent.com/vcuda-memory": "1280"})]),
}


def demo_pod(name):
    return json.loads(json.dumps(DEMO_PODS[name]))


def ranked_ok(answer):
    """Is an explain answer ordered best node first (fits, then score, then name)?"""
    key = [(not n["fits"], -n["score"], n["node"]) for n in answer["nodes"]]
    return key == sorted(key)


# ---------------------------------------------------------------------------
# Live mode: the Kubernetes API simulator (tests/apisim) and the binary
# following it through a kubeconfig (tests/e2e/test_live_*.py)
# ---------------------------------------------------------------------------

def import_apisim(suite):
    """The simulator module, tests/apisim/apisim.py (standard library only)."""
    d = suite.path("tests", "apisim")
    if d not in sys.path:
        sys.path.insert(0, d)
    import apisim  # noqa: E402
    return apisim


def import_hamiplugin(suite):
    """The HAMi device-plugin stand-in, tests/hamisim/hamiplugin.py."""
    d = suite.path("tests", "hamisim")
    if d not in sys.path:
        sys.path.insert(0, d)
    import hamiplugin  # noqa: E402
    return hamiplugin


def hami_uuid(node, i):
    """A stable GPU UUID for device i of a HAMi node."""
    return "GPU-%08x-0000-4000-8000-%012d" % (zlib.crc32(node.encode()), i)


def live_pki(suite):
    """The simulator's certificates (apisim.make_pki), made once per suite."""
    pki = getattr(suite, "_live_pki", None)
    if pki is None:
        pki = suite.tempdir("apisim-pki")
        import_apisim(suite).make_pki(pki)
        suite._live_pki = pki
    return pki


def wait_until(fn, timeout=10.0, interval=0.05):
    """Call fn until it returns something truthy or timeout passes; returns
    the last value (falsy on timeout). Exceptions count as falsy."""
    deadline = time.monotonic() + timeout
    value = None
    while True:
        try:
            value = fn()
        except (OSError, ValueError, KeyError, http.client.HTTPException):
            value = None
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


class Cluster:
    """An in-process API simulator over HTTPS with bearer tokens, and
    kubeconfigs pointing at it. Use as a context manager:

        with Cluster(suite) as c:
            c.sim.create("nodes", node("n1", vcuda(200, 128)))
            with LiveServer(suite, c.kubeconfig()) as srv:
                ...

    down_at_start: the port is reserved but nothing listens until
    c.sim.up(). Extra keyword arguments are simulator settings
    (graceful_delete, default_watch_timeout, ...)."""

    def __init__(self, suite, tokens=("live-token-1",), down_at_start=False, bookmark_interval=1.0,
                 history_size=20000, **settings):
        self.suite = suite
        self.apisim = import_apisim(suite)
        self.pki = live_pki(suite)
        self.tokens = list(tokens)
        self.down_at_start = down_at_start
        self.dir = suite.tempdir("cluster")
        self.sim = self.apisim.APISim(tokens=self.tokens, tls_cert=os.path.join(self.pki, "server.crt"),
                                      tls_key=os.path.join(self.pki, "server.key"),
                                      bookmark_interval=bookmark_interval, history_size=history_size, **settings)

    @property
    def ca_file(self):
        return os.path.join(self.pki, "ca.crt")

    def start(self):
        self.sim.start(down_seconds=-1 if self.down_at_start else None)
        return self

    def stop(self):
        self.sim.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def kubeconfig(self, token=None, token_file=None, name="kubeconfig.json"):
        """A kubeconfig (JSON) for the simulator: a static token (default the
        first one), or tokenFile, which the service re-reads when it changes."""
        path = os.path.join(self.dir, name)
        if token_file is None:
            return self.sim.write_kubeconfig(path, token=token or self.tokens[0], ca_file=self.ca_file)
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "apisim",
               "clusters": [{"name": "apisim", "cluster": {"server": self.sim.url,
                                                            "certificate-authority": self.ca_file}}],
               "users": [{"name": "apisim", "user": {"tokenFile": os.path.abspath(token_file)}}],
               "contexts": [{"name": "apisim", "context": {"cluster": "apisim", "user": "apisim"}}]}
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        return path

    # -- objects --------------------------------------------------------------
    def add_node(self, obj):
        return self.sim.create("nodes", json.loads(json.dumps(obj)))

    def create_pod(self, obj, node=None, phase=None):
        """Create a pod as a client would (the uid and status are the
        server's). node: create it already bound; phase: then set its phase
        through pods/status (e.g. "Running")."""
        obj = json.loads(json.dumps(obj))
        m = obj["metadata"]
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            m.pop(k, None)
        obj.pop("status", None)
        if node:
            obj["spec"]["nodeName"] = node
        out = self.sim.create("pods", obj, ns=m.get("namespace", "default"))
        if phase:
            out = self.sim.set_pod_phase(m.get("namespace", "default"), m["name"], phase)
        return out

    def get_pod(self, name, ns="default"):
        return self.sim.get("pods", name, ns)

    def annotations(self, name, ns="default"):
        return dict(self.get_pod(name, ns)["metadata"].get("annotations") or {})

    def patch_pod(self, name, patch, ns="default"):
        return self.sim.patch("pods", name, "merge", patch, ns=ns)

    def delete_pod(self, name, ns="default"):
        return self.sim.delete("pods", name, ns)

    def requests_since(self, seq):
        return self.sim.requests(seq)

    def last_seq(self):
        reqs = self.sim.requests(0)
        return reqs[-1]["seq"] if reqs else 0


def leader_gauge(srv):
    """gqa_leader from srv's /metrics, or None when it cannot be read."""
    try:
        samples, _t, _b = parse_metrics(srv.get("/metrics", timeout=3).text)
        return int(metric(samples, "gqa_leader"))
    except (OSError, ValueError, TypeError, http.client.HTTPException):
        return None


def decision_key_file(suite, key=b"e2e-decision-key-0123456789abcdef"):
    """A --decision-key-file holding key (with a trailing newline, as a
    Secret's value often has): (path, key)."""
    path = os.path.join(suite.tempdir("key"), "decision.key")
    with open(path, "wb") as f:
        f.write(key + b"\n")
    return path, key


def decision_proof(key, uid, node, time_ns, idx, hami=""):
    """gpu-admission.io/proof of a decision (cluster/proof.c, written from
    docs/security.md): HMAC-SHA256 over length-prefixed fields. idx is one
    list of GPU minors per container ([] for a container without GPUs)."""
    import hashlib
    import hmac

    def field(name, value):
        v = value.encode()
        return b"%s:%d:%s\n" % (name.encode(), len(v), v)
    msg = (b"gqa-decision-v1\n" + field("uid", uid) + field("node", node) + field("time", str(time_ns))
           + field("idx", ";".join(",".join(str(m) for m in c) for c in idx)) + field("hami", hami))
    return "v1:" + hmac.new(key, msg, hashlib.sha256).hexdigest()


class LiveServer(Server):
    """The binary in live mode: --kubeconfig instead of --state-file.
    wait_ready=False waits only until it serves (/healthz), for replicas that
    are meant to stay unready (followers, an API server that is down)."""

    def __init__(self, suite, kubeconfig, flags=(), wait_ready=True, **kw):
        super().__init__(suite, flags=flags, **kw)
        self.kubeconfig = kubeconfig
        if not wait_ready:
            self.ready_path = "/healthz"

    def cluster_flags(self):
        return ["--kubeconfig", self.kubeconfig]

    def informers(self):
        """/inspect/informers as {name: state}."""
        r = self.get("/inspect/informers", timeout=5)
        self.suite.require(r.status == 200, "GET /inspect/informers answers 200", r)
        return {i["name"]: i for i in r.json()}

    def seen_rv(self, informer, rv, timeout=10.0):
        """Wait until the informer's watch has delivered resourceVersion rv
        (the cache has applied every change up to it). True, or False at the
        deadline."""
        def done():
            got = self.informers()[informer]["resourceVersion"]
            return got.isdigit() and int(got) >= int(rv)
        return bool(wait_until(done, timeout))

    def cores(self):
        """Per-GPU coreUsed from /inspect/nodes: {node: [coreUsed of GPU 0, 1, ...]}."""
        return {n["node"]: [g["coreUsed"] for g in n["gpus"]] for n in self.inspect()}

    def pods_on(self):
        """Per-GPU pods from /inspect/nodes: {node: [[pods on GPU 0], ...]}."""
        return {n["node"]: [sorted(g["pods"]) for g in n["gpus"]] for n in self.inspect()}

    def metric_value(self, name, **labels):
        samples, _types, _bad = parse_metrics(self.metrics().text)
        return metric(samples, name, **labels)

    def readyz(self):
        return self.get("/readyz", timeout=5)
