"""A real Kubernetes control plane on loopback, for the realcp test tier.

Starts etcd, kube-apiserver and kube-scheduler (real binaries, upstream code)
from the directory named by KUBEBUILDER_ASSETS (envtest's convention: the
files kube-apiserver, kube-scheduler, optionally kube-scheduler-v1.27.16 and
kube-scheduler-plugins, and etcd there or on PATH), on free loopback ports,
in a temporary directory, and stops everything it started (at exit, on
SIGTERM/SIGINT, and through PR_SET_PDEATHSIG if the test process dies).

What kubelet and kube-controller-manager would do is done by hand here:
default ServiceAccounts, Node status (capacity, allocatable, Ready) and the
removal of the not-ready taint, Endpoints for the extender Services naming a
stand-in Pod whose status.podIPs carries a fake address (FAKE_POD_IP). The
API server reaches that address through its egress selector: an HTTP CONNECT
proxy on a Unix socket (ConnectProxy) that maps FAKE_POD_IP:PORT to
127.0.0.1:PORT and refuses everything else.

    from controlplane import ControlPlane, skip_unless_assets
    skip_unless_assets()                      # exit 77 (CTest SKIP) without binaries
    with ControlPlane() as cp:
        cp.add_node("gpu-0", {"tencent.com/vcuda-core": "400"})
        sched = cp.start_scheduler(config_dict)
        cp.create_pod(cp.pod("p", {"tencent.com/vcuda-core": "50"}))
        cp.wait_for(lambda: cp.get_pod("p")["spec"].get("nodeName"), 60, "p bound")

Python 3 standard library (python3-yaml only for scheduler configs, optional).
"""

import atexit
import http.client
import json
import os
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

SKIP_CODE = 77
FAKE_POD_IP = "10.96.100.10"
SERVICE_CIDR = "10.0.0.0/24"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
REQUEST_TIMEOUT_S = 30.0


class NotReady(Exception):
    """A wait_for deadline passed."""


# ---------------------------------------------------------------------------
# Finding the binaries
# ---------------------------------------------------------------------------

def assets_dir():
    return os.environ.get("KUBEBUILDER_ASSETS", "")


def find_binary(name, required=True):
    """name in KUBEBUILDER_ASSETS, else on PATH (etcd, kubectl)."""
    d = assets_dir()
    if d:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    p = shutil.which(name)
    if p:
        return p
    if required:
        raise FileNotFoundError("%s not found in KUBEBUILDER_ASSETS=%r or on PATH" % (name, d))
    return None


def missing_binaries(extra=()):
    """What is missing for this tier: a list of plain sentences (empty: all there)."""
    d = assets_dir()
    if not d:
        return ["KUBEBUILDER_ASSETS is not set"]
    missing = []
    for name in ("kube-apiserver", "kube-scheduler") + tuple(extra):
        if not os.access(os.path.join(d, name), os.X_OK):
            missing.append("%s/%s is missing" % (d, name))
    for name in ("etcd", "kubectl", "openssl"):
        if find_binary(name, required=False) is None:
            missing.append("%s is not in KUBEBUILDER_ASSETS or on PATH" % name)
    return missing


def skip_unless_assets(extra=()):
    """Exit with SKIP_CODE and a plain message when the tier cannot run."""
    missing = missing_binaries(extra)
    if missing:
        print("real control-plane tier SKIPPED: %s; set KUBEBUILDER_ASSETS=DIR with kube-apiserver, "
              "kube-scheduler%s (see tests/realcp/README.md)"
              % ("; ".join(missing), "".join(", " + e for e in extra)), flush=True)
        sys.exit(SKIP_CODE)


# ---------------------------------------------------------------------------
# Processes: every child dies with us
# ---------------------------------------------------------------------------

_PLANES = []


def _die_with_parent():
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop_all():
    for cp in list(_PLANES):
        cp.stop()


def _on_signal(signum, _frame):
    _stop_all()
    sys.exit(128 + signum)


atexit.register(_stop_all)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    try:
        signal.signal(_sig, _on_signal)
    except (ValueError, OSError):
        pass


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Process:
    """One child process with its log file."""

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.logf = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf,
                                     env=env, preexec_fn=_die_with_parent)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def log(self, tail=4000):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return data[-tail:] if tail else data

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Stop it (SIGTERM, then SIGKILL after timeout); returns the exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        return self.proc.returncode

    def kill(self):
        return self.stop(signal.SIGKILL, timeout=5)


def wait_for(fn, timeout, what, interval=0.1):
    """Poll fn() until it returns something truthy; returns that. Raises
    NotReady(what) after timeout seconds. Exceptions from fn count as not yet."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:   # noqa: BLE001 - polled condition, retried
            last_exc = e
        if time.monotonic() >= deadline:
            raise NotReady("%s: not after %.0fs%s" % (what, timeout,
                                                     " (last error: %s)" % last_exc if last_exc else ""))
        time.sleep(interval)
        interval = min(interval * 1.5, 1.0)


# ---------------------------------------------------------------------------
# PKI with openssl
# ---------------------------------------------------------------------------

class PKI:
    """A cluster CA, the API server's serving certificate, client certificates,
    the front-proxy CA for the requestheader flags, the service-account keys."""

    def __init__(self, directory):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.ca_key, self.ca_crt = self._ca("ca", "realcp-ca")
        self.fp_ca_key, self.fp_ca_crt = self._ca("front-proxy-ca", "realcp-front-proxy-ca")
        self.server_key, self.server_crt = self.leaf(
            "apiserver", "kube-apiserver", server_names=["127.0.0.1", "localhost", "kubernetes",
                                                         "kubernetes.default", "kubernetes.default.svc",
                                                         "kubernetes.default.svc.cluster.local", "10.0.0.1"])
        self.fp_key, self.fp_crt = self.leaf("front-proxy-client", "front-proxy-client",
                                             ca=(self.fp_ca_key, self.fp_ca_crt))
        self.sa_key = self.path("sa.key")
        self.sa_pub = self.path("sa.pub")
        self._ossl("genrsa", "-out", self.sa_key, "2048")
        self._ossl("rsa", "-in", self.sa_key, "-pubout", "-out", self.sa_pub)

    def path(self, name):
        return os.path.join(self.dir, name)

    def _ossl(self, *args):
        r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError("openssl %s: %s" % (" ".join(args), r.stderr.decode()))

    def _key(self, path):
        self._ossl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path)

    def _ca(self, name, cn):
        key, crt = self.path(name + ".key"), self.path(name + ".crt")
        self._key(key)
        self._ossl("req", "-x509", "-new", "-key", key, "-out", crt, "-days", "2", "-subj", "/CN=" + cn,
                   "-addext", "basicConstraints=critical,CA:TRUE",
                   "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
        return key, crt

    def leaf(self, name, cn, orgs=(), server_names=(), ca=None):
        """A certificate signed by the cluster CA (or ca=(key, crt)): a server
        certificate when server_names are given (IPs or DNS names), else a
        client certificate. Returns (key, crt) paths."""
        ca_key, ca_crt = ca or (self.ca_key, self.ca_crt)
        key, csr, crt = self.path(name + ".key"), self.path(name + ".csr"), self.path(name + ".crt")
        ext = self.path(name + ".ext")
        subj = "".join("/O=%s" % o for o in orgs) + "/CN=" + cn
        self._key(key)
        self._ossl("req", "-new", "-key", key, "-out", csr, "-subj", subj)
        lines = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"]
        if server_names:
            sans = []
            for n in server_names:
                sans.append(("IP:" if all(c.isdigit() or c in ".:" for c in n) else "DNS:") + n)
            lines += ["extendedKeyUsage=serverAuth", "subjectAltName=" + ",".join(sans)]
        else:
            lines += ["extendedKeyUsage=clientAuth"]
        with open(ext, "w") as f:
            f.write("\n".join(lines) + "\n")
        self._ossl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
                   "-out", crt, "-days", "2", "-extfile", ext)
        return key, crt


# ---------------------------------------------------------------------------
# The egress CONNECT proxy on a Unix socket
# ---------------------------------------------------------------------------

class ConnectProxy:
    """HTTP CONNECT on a Unix socket: FAKE_POD_IP:PORT goes to 127.0.0.1:PORT,
    anything else is refused with 403. Counts what it carried and refused."""

    def __init__(self, path, fake_ip=FAKE_POD_IP):
        self.path = path
        self.fake_ip = fake_ip
        self.lock = threading.Lock()
        self.tunnels = []      # "ip:port" carried
        self.refused = []      # targets refused
        self.sent = {}         # "ip:port" -> bytes the API server sent through
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                proxy._handle(self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        if os.path.exists(path):
            os.unlink(path)
        self.server = Server(path, Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="connect-proxy", daemon=True)
        self.thread.start()

    def _handle(self, conn):
        conn.settimeout(REQUEST_TIMEOUT_S)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 16384:
                d = conn.recv(4096)
                if not d:
                    return
                head += d
        except OSError:
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split()
        target = parts[1] if len(parts) == 3 and parts[0] == "CONNECT" else None
        host, _, port = (target or "").rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if target is None or host != self.fake_ip or not port.isdigit() or not 0 < int(port) < 65536:
            with self.lock:
                self.refused.append(target or line)
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        try:
            up = socket.create_connection(("127.0.0.1", int(port)), timeout=REQUEST_TIMEOUT_S)
        except OSError:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        with self.lock:
            self.tunnels.append(target)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            up.sendall(rest)
        conn.settimeout(None)
        up.settimeout(None)
        t = threading.Thread(target=self._pump, args=(up, conn), daemon=True)
        t.start()
        self._pump(conn, up, target)
        t.join()
        conn.close()
        up.close()

    def _pump(self, src, dst, count_as=None):
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    break
                if count_as:
                    with self.lock:
                        self.sent[count_as] = self.sent.get(count_as, 0) + len(d)
                dst.sendall(d)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def carried(self, port=None):
        """The tunnels opened (to port, or all)."""
        with self.lock:
            return [t for t in self.tunnels if port is None or t.endswith(":%d" % port)]

    def bytes_sent(self, port):
        """Bytes the API server sent through tunnels to port (tunnels are
        kept alive and reused, so this, not the tunnel count, grows with
        every proxied request)."""
        with self.lock:
            return sum(n for t, n in self.sent.items() if t.endswith(":%d" % port))

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


# ---------------------------------------------------------------------------
# The API, as a client with a certificate or a token
# ---------------------------------------------------------------------------

class APIError(Exception):
    def __init__(self, status, body, what):
        self.status = status
        self.body = body
        super().__init__("%s: HTTP %d %s" % (what, status, body[:600]))


class Client:
    """JSON requests to the API server with one identity."""

    def __init__(self, port, ca, cert=None, key=None, token=None):
        self.port = port
        self.ctx = ssl.create_default_context(cafile=ca)
        if cert:
            self.ctx.load_cert_chain(cert, key)
        self.token = token

    def request(self, method, path, body=None, content_type="application/json", ok=(200, 201), raw=False,
                timeout=REQUEST_TIMEOUT_S):
        hdrs = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            hdrs["Content-Type"] = content_type
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            out = r.read()
        finally:
            conn.close()
        if ok and r.status not in ok:
            raise APIError(r.status, out.decode("utf-8", "replace"), "%s %s" % (method, path))
        if raw:
            return r.status, out
        return json.loads(out) if out else None

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def merge_patch(self, path, body, **kw):
        return self.request("PATCH", path, body, content_type="application/merge-patch+json", **kw)

    def json_patch(self, path, ops, **kw):
        return self.request("PATCH", path, ops, content_type="application/json-patch+json", **kw)

    def delete(self, path, body=None, **kw):
        kw.setdefault("ok", (200, 202, 404))
        return self.request("DELETE", path, body, **kw)


def pod_path(ns, name=""):
    return "/api/v1/namespaces/%s/pods%s" % (ns, "/" + name if name else "")


# ---------------------------------------------------------------------------
# The control plane
# ---------------------------------------------------------------------------

class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler processes on demand)."""

    def __init__(self, workdir=None, keep=False, apiserver_flags=()):
        skip_unless_assets()
        self.keep = keep or bool(os.environ.get("REALCP_KEEP"))
        # Short: the Unix socket path must fit in sun_path (108 bytes).
        self.dir = workdir or tempfile.mkdtemp(prefix="realcp-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                                                else None)
        self.apiserver_flags = list(apiserver_flags)
        self.procs = []
        self.schedulers = []
        self.proxy = None
        self.etcd = None
        self.apiserver = None
        self.started = False
        self.stopped = False
        self.api_port = None
        self.etcd_port = None

    # -- lifecycle ---------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def start(self):
        _PLANES.append(self)
        t0 = time.monotonic()
        self.pki = PKI(self.path("pki"))
        self.admin_key, self.admin_crt = self.pki.leaf("admin", "realcp-admin", orgs=["system:masters"])
        self.sched_key, self.sched_crt = self.pki.leaf("scheduler", "system:kube-scheduler")
        self.proxy = ConnectProxy(self.path("egress.sock"))
        self._start_etcd()
        self._start_apiserver()
        self.admin = Client(self.api_port, self.pki.ca_crt, self.admin_crt, self.admin_key)
        self.admin_kubeconfig = self.write_kubeconfig("admin.kubeconfig", cert=self.admin_crt, key=self.admin_key)
        self.scheduler_kubeconfig = self.write_kubeconfig("scheduler.kubeconfig", cert=self.sched_crt,
                                                          key=self.sched_key)
        for ns in ("default", "kube-system", "kube-public"):
            self.wait_for(lambda ns=ns: self.admin.get("/api/v1/namespaces/" + ns, ok=(200,)), 30,
                          "namespace %s exists" % ns)
            self.ensure_service_account(ns)
        self.started = True
        self.startup_seconds = time.monotonic() - t0
        return self

    def _start_etcd(self):
        etcd = find_binary("etcd")
        for _attempt in range(3):
            self.etcd_port, peer = free_port(), free_port()
            data = self.path("etcd-data")
            shutil.rmtree(data, ignore_errors=True)
            argv = [etcd, "--data-dir", data, "--name", "default",
                    "--listen-client-urls", "http://127.0.0.1:%d" % self.etcd_port,
                    "--advertise-client-urls", "http://127.0.0.1:%d" % self.etcd_port,
                    "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                    "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                    "--initial-cluster", "default=http://127.0.0.1:%d" % peer,
                    "--log-level", "warn", "--logger", "zap"]
            env = dict(os.environ, ETCD_UNSUPPORTED_ARCH=os.environ.get("ETCD_UNSUPPORTED_ARCH", ""))
            self.etcd = Process("etcd", argv, self.path("etcd.log"), env=env)
            self.procs.append(self.etcd)
            try:
                self.wait_for(self._etcd_healthy, 30, "etcd healthy")
                return
            except NotReady:
                if self.etcd.alive():
                    raise
                self.procs.remove(self.etcd)
                self.etcd.stop()
        raise RuntimeError("etcd did not start:\n" + self.etcd.log())

    def _etcd_healthy(self):
        if not self.etcd.alive():
            raise RuntimeError("etcd exited:\n" + self.etcd.log())
        c = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=5)
        try:
            c.request("GET", "/health")
            r = c.getresponse()
            return r.status == 200 and b"true" in r.read()
        finally:
            c.close()

    def egress_config(self):
        p = self.path("egress.yaml")
        with open(p, "w") as f:
            f.write("apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\n"
                    "egressSelections:\n- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n"
                    "    transport:\n      uds:\n        udsName: %s\n" % self.proxy.path)
        return p

    def _apiserver_argv(self):
        pki = self.pki
        return [find_binary("kube-apiserver"),
                "--etcd-servers=http://127.0.0.1:%d" % self.etcd_port,
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                "--secure-port=%d" % self.api_port,
                "--tls-cert-file=" + pki.server_crt, "--tls-private-key-file=" + pki.server_key,
                "--client-ca-file=" + pki.ca_crt,
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-account-key-file=" + pki.sa_pub,
                "--service-account-signing-key-file=" + pki.sa_key,
                "--service-cluster-ip-range=" + SERVICE_CIDR,
                "--authorization-mode=RBAC",
                "--requestheader-client-ca-file=" + pki.fp_ca_crt,
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--proxy-client-cert-file=" + pki.fp_crt, "--proxy-client-key-file=" + pki.fp_key,
                "--egress-selector-config-file=" + self.egress_config(),
                # Webhooks that name a Service are dialled at an Endpoints
                # address (the fake pod IP the CONNECT proxy knows), not at
                # the ClusterIP that nothing here routes.
                "--enable-aggregator-routing=true",
                # No "kubernetes" Endpoints with a loopback address (refused).
                "--endpoint-reconciler-type=none",
                "--profiling=false", "--v=1"] + self.apiserver_flags

    def _start_apiserver(self):
        for _attempt in range(3):
            self.api_port = free_port()
            self.apiserver = Process("kube-apiserver", self._apiserver_argv(), self.path("kube-apiserver.log"))
            self.procs.append(self.apiserver)
            try:
                self.wait_for(self._apiserver_ready, START_TIMEOUT_S, "kube-apiserver /readyz")
                return
            except NotReady:
                if self.apiserver.alive():
                    raise RuntimeError("kube-apiserver not ready:\n" + self.apiserver.log())
                log = self.apiserver.log()
                self.procs.remove(self.apiserver)
                self.apiserver.stop()
                if "address already in use" not in log:
                    raise RuntimeError("kube-apiserver exited:\n" + log)
        raise RuntimeError("kube-apiserver did not start")

    def restart_apiserver(self):
        """Stop the API server and start it again on the same port and etcd."""
        self.apiserver.stop()
        self.procs.remove(self.apiserver)
        self.apiserver = Process("kube-apiserver", self._apiserver_argv(), self.path("kube-apiserver.log.2"))
        self.procs.append(self.apiserver)
        self.wait_for(self._apiserver_ready, START_TIMEOUT_S, "kube-apiserver /readyz after restart")

    def _apiserver_ready(self):
        if not self.apiserver.alive():
            raise NotReady("kube-apiserver exited")
        ctx = ssl.create_default_context(cafile=self.pki.ca_crt)
        c = http.client.HTTPSConnection("127.0.0.1", self.api_port, context=ctx, timeout=5)
        try:
            c.request("GET", "/readyz")
            r = c.getresponse()
            r.read()
            return r.status == 200
        finally:
            c.close()

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        for p in reversed(self.procs):
            try:
                p.stop()
            except Exception:   # noqa: BLE001 - best effort while tearing down
                pass
        if self.proxy:
            self.proxy.stop()
        if self in _PLANES:
            _PLANES.remove(self)
        if self.keep:
            print("control plane files kept in %s" % self.dir, flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def server(self):
        return "https://127.0.0.1:%d" % self.api_port

    # -- identities ----------------------------------------------------------
    def write_kubeconfig(self, name, cert=None, key=None, token=None, namespace="default"):
        user = {}
        if cert:
            user = {"client-certificate": cert, "client-key": key}
        if token:
            user = {"token": token}
        cfg = {"apiVersion": "v1", "kind": "Config",
               "clusters": [{"name": "realcp", "cluster": {"server": self.server,
                                                           "certificate-authority": self.pki.ca_crt}}],
               "users": [{"name": "u", "user": user}],
               "contexts": [{"name": "realcp", "context": {"cluster": "realcp", "user": "u",
                                                           "namespace": namespace}}],
               "current-context": "realcp"}
        p = self.path(name)
        with open(p, "w") as f:
            json.dump(cfg, f, indent=1)
        return p

    def client_cert(self, name, cn, orgs=()):
        """(key, crt) of a client certificate for user cn."""
        return self.pki.leaf(name, cn, orgs=orgs)

    def kubectl(self, *args, input=None, kubeconfig=None, check=True, timeout=120):
        argv = [find_binary("kubectl"), "--kubeconfig", kubeconfig or self.admin_kubeconfig] + list(args)
        r = subprocess.run(argv, input=input.encode() if isinstance(input, str) else input,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        r.out = r.stdout.decode("utf-8", "replace")
        r.err = r.stderr.decode("utf-8", "replace")
        if check and r.returncode != 0:
            raise RuntimeError("kubectl %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.out, r.err))
        return r

    def token_for(self, namespace, service_account, seconds=3600):
        return self.kubectl("-n", namespace, "create", "token", service_account,
                            "--duration", "%ds" % seconds).out.strip()

    # -- what controllers and kubelets would do ---------------------------
    def wait_for(self, fn, timeout, what, interval=0.1):
        return wait_for(fn, timeout, what, interval)

    def ensure_namespace(self, name):
        self.admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": name}}, ok=(201, 409))
        self.ensure_service_account(name)

    def ensure_service_account(self, ns, name="default"):
        self.admin.post("/api/v1/namespaces/%s/serviceaccounts" % ns,
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
                        ok=(201, 409))

    def add_node(self, name, resources=None, labels=None, annotations=None, cpu="64", memory="256Gi",
                 pods="110"):
        """A Ready, schedulable Node with resources (name -> quantity string)
        in capacity and allocatable."""
        lab = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        lab.update(labels or {})
        meta = {"name": name, "labels": lab}
        if annotations:
            meta["annotations"] = annotations
        self.admin.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {}})
        self.set_node_resources(name, resources or {}, cpu=cpu, memory=memory, pods=pods)
        # Admission (TaintNodesByCondition) put node.kubernetes.io/not-ready on it.
        self.admin.merge_patch("/api/v1/nodes/" + name, {"spec": {"taints": None}})
        return self.admin.get("/api/v1/nodes/" + name)

    def set_node_resources(self, name, resources, cpu="64", memory="256Gi", pods="110"):
        res = {"cpu": cpu, "memory": memory, "pods": pods}
        res.update(resources)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"capacity": res, "allocatable": res,
                  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                  "message": "realcp: no kubelet, marked ready by the test harness",
                                  "lastHeartbeatTime": now, "lastTransitionTime": now}],
                  "addresses": [{"type": "Hostname", "address": name}]}
        self.admin.merge_patch("/api/v1/nodes/%s/status" % name, {"status": status})

    @staticmethod
    def pod(name, limits=None, namespace="default", annotations=None, labels=None, init_limits=None,
            scheduler_name=None, node_name=None, priority_class=None, extra_spec=None):
        """A Pod object: one container with these limits (and an init
        container with init_limits, if given)."""
        c = {"name": "main", "image": "registry.invalid/realcp:1",
             "resources": {"limits": dict(limits)} if limits else {}}
        spec = {"containers": [c], "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False}
        if init_limits is not None:
            spec["initContainers"] = [{"name": "init", "image": "registry.invalid/realcp:1",
                                       "resources": {"limits": dict(init_limits)}}]
        if scheduler_name:
            spec["schedulerName"] = scheduler_name
        if node_name:
            spec["nodeName"] = node_name
        if priority_class:
            spec["priorityClassName"] = priority_class
        spec.update(extra_spec or {})
        meta = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = annotations
        if labels:
            meta["labels"] = labels
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def create_pod(self, obj):
        ns = obj["metadata"].get("namespace", "default")
        return self.admin.post(pod_path(ns), obj)

    def get_pod(self, name, ns="default"):
        return self.admin.get(pod_path(ns, name))

    def delete_pod(self, name, ns="default"):
        """Force deletion: no kubelet will ever confirm a graceful one."""
        return self.admin.delete(pod_path(ns, name) + "?gracePeriodSeconds=0",
                                 {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})

    def delete_all_pods(self, ns="default", wait=True):
        for p in self.admin.get(pod_path(ns))["items"]:
            self.delete_pod(p["metadata"]["name"], ns)
        if wait:
            self.wait_for(lambda: not self.admin.get(pod_path(ns))["items"], 30, "pods in %s deleted" % ns)

    def start_reaper(self, ns="default"):
        """What a kubelet would do for pods being deleted gracefully (e.g.
        preemption victims): confirm it, by deleting them with grace 0.
        Runs until the control plane stops."""
        def reap():
            while not self.stopped:
                try:
                    for p in self.admin.get(pod_path(ns))["items"]:
                        if p["metadata"].get("deletionTimestamp"):
                            self.delete_pod(p["metadata"]["name"], ns)
                except Exception:   # noqa: BLE001 - API server restarting or stopped
                    pass
                time.sleep(0.2)   # a poll interval, not a synchronisation
        t = threading.Thread(target=reap, name="reaper", daemon=True)
        t.start()
        return t

    def wait_bound(self, name, ns="default", timeout=60):
        """The node the pod was bound to (waits for spec.nodeName)."""
        return self.wait_for(lambda: self.get_pod(name, ns)["spec"].get("nodeName"), timeout,
                             "pod %s/%s bound" % (ns, name))

    def pod_events(self, name, ns="default"):
        sel = urllib.parse.quote("involvedObject.name=%s,involvedObject.kind=Pod" % name)
        # events.k8s.io/v1 serves the same objects (as note/regarding):
        # reading both would count every event twice.
        evs = self.admin.get("/api/v1/namespaces/%s/events?fieldSelector=%s" % (ns, sel))["items"]
        return [{"reason": e.get("reason"), "message": e.get("message", ""), "count": e.get("count", 1)}
                for e in evs]

    def wait_event(self, name, reason, substring, ns="default", timeout=60):
        """The first event of the pod with this reason whose message holds substring."""
        def found():
            for e in self.pod_events(name, ns):
                if e["reason"] == reason and substring in e["message"]:
                    return e
            return None
        try:
            return self.wait_for(found, timeout, "event %s with %r on %s/%s" % (reason, substring, ns, name))
        except NotReady as e:
            raise NotReady("%s; its events: %s" % (e, json.dumps(self.pod_events(name, ns))[:3000]))

    # -- the service proxy and webhooks: a Service reaching 127.0.0.1 ------
    def stand_in_pod(self, ns="kube-system", name="realcp-stand-in", labels=None, ip=FAKE_POD_IP):
        """A Pod whose status.podIPs is ip: the API server proxies only to
        Endpoints addresses that are some Pod's IP."""
        self.ensure_service_account(ns)
        obj = self.pod(name, namespace=ns, labels=labels, node_name="realcp-no-such-node")
        self.admin.post(pod_path(ns), obj, ok=(201, 409))
        self.admin.merge_patch(pod_path(ns, name) + "/status",
                               {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                                           "hostIP": "10.96.100.1", "hostIPs": [{"ip": "10.96.100.1"}],
                                           "conditions": [{"type": "Ready", "status": "True"}]}})
        return name

    def ensure_service(self, name, ns="kube-system", port=3456, port_name=None, target_port=None):
        """A ClusterIP Service without a selector (nothing would keep its
        Endpoints: no endpoints controller runs), unless it exists."""
        p = {"port": port, "protocol": "TCP"}
        if port_name:
            p["name"] = port_name
        if target_port is not None:
            p["targetPort"] = target_port
        self.admin.post("/api/v1/namespaces/%s/services" % ns,
                        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                         "spec": {"type": "ClusterIP", "ports": [p]}}, ok=(201, 409))

    def point_service_at(self, name, local_port, ns="kube-system", port_name=None, stand_in="realcp-stand-in"):
        """Endpoints of Service ns/name: FAKE_POD_IP:local_port (the CONNECT
        proxy takes it to 127.0.0.1:local_port), naming the stand-in Pod."""
        self.stand_in_pod(ns, stand_in)
        port = {"port": local_port, "protocol": "TCP"}
        if port_name:
            port["name"] = port_name
        ep = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": ns},
              "subsets": [{"addresses": [{"ip": FAKE_POD_IP, "targetRef": {"kind": "Pod", "namespace": ns,
                                                                            "name": stand_in}}],
                           "ports": [port]}]}
        path = "/api/v1/namespaces/%s/endpoints/%s" % (ns, name)
        status, _ = self.admin.request("GET", path, ok=None, raw=True)
        if status == 200:
            self.admin.put(path, ep)
        else:
            self.admin.post("/api/v1/namespaces/%s/endpoints" % ns, ep)

    def service_proxy_url(self, name, ns="kube-system", suffix="/scheduler"):
        return "%s/api/v1/namespaces/%s/services/%s/proxy%s" % (self.server, ns, name, suffix)

    # -- kube-scheduler ------------------------------------------------------
    def scheduler_config(self, extenders=(), profiles=None, api_version="kubescheduler.config.k8s.io/v1"):
        cfg = {"apiVersion": api_version, "kind": "KubeSchedulerConfiguration",
               "clientConnection": {"kubeconfig": self.scheduler_kubeconfig},
               "leaderElection": {"leaderElect": False}}
        if extenders:
            cfg["extenders"] = list(extenders)
        if profiles:
            cfg["profiles"] = profiles
        return cfg

    def start_scheduler(self, config, binary="kube-scheduler", name=None, extra_args=()):
        """Start kube-scheduler (binary from KUBEBUILDER_ASSETS) with config, a
        dict (written as JSON, which is YAML) or the text of a file. Waits
        for its /healthz; returns the Process (stop it with stop_scheduler)."""
        name = name or "%s-%d" % (binary, len(self.schedulers))
        cfg_path = self.path(name + ".yaml")
        with open(cfg_path, "w") as f:
            f.write(config if isinstance(config, str) else json.dumps(config, indent=1))
        port = free_port()
        argv = [find_binary(binary), "--config", cfg_path, "--bind-address=127.0.0.1", "--secure-port=%d" % port,
                "--authentication-kubeconfig", self.scheduler_kubeconfig,
                "--authorization-kubeconfig", self.scheduler_kubeconfig, "--v=2"] + list(extra_args)
        proc = Process(name, argv, self.path(name + ".log"))
        proc.health_port = port
        proc.config_path = cfg_path
        self.procs.append(proc)
        self.schedulers.append(proc)

        def healthy():
            if not proc.alive():
                raise RuntimeError("%s exited with %s:\n%s" % (name, proc.proc.returncode, proc.log()))
            ctx = ssl._create_unverified_context()
            c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            try:
                c.request("GET", "/healthz")
                r = c.getresponse()
                r.read()
                return r.status == 200
            finally:
                c.close()
        try:
            self.wait_for(healthy, START_TIMEOUT_S, "%s /healthz" % name)
        except RuntimeError:
            self.procs.remove(proc)
            self.schedulers.remove(proc)
            raise
        return proc

    def stop_scheduler(self, proc):
        code = proc.stop()
        if proc in self.procs:
            self.procs.remove(proc)
        if proc in self.schedulers:
            self.schedulers.remove(proc)
        return code

    # -- the product ---------------------------------------------------------
    def start_product(self, binary, kubeconfig=None, flags=(), name="gqa", port=None, https_port=None,
                      tls=None, wait_ready=True, timeout=60, env=None):
        """gpu-quota-admission in live mode; waits for /readyz 200 unless
        wait_ready is False. Returns the Process with .port (HTTP)."""
        port = port or free_port()
        argv = [binary, "--kubeconfig", kubeconfig or self.admin_kubeconfig,
                "--listen-http", "127.0.0.1:%d" % port]
        if tls:
            https_port = https_port or free_port()
            argv += ["--listen-https", "127.0.0.1:%d" % https_port, "--tls-cert", tls[0], "--tls-key", tls[1]]
        argv += list(flags)
        penv = {k: v for k, v in os.environ.items() if not k.startswith("GQA_") and k != "KUBERNETES_SERVICE_HOST"}
        penv.update(env or {})
        proc = Process(name, argv, self.path(name + "-%d.log" % port), env=penv)
        proc.port = port
        proc.https_port = https_port
        self.procs.append(proc)
        if wait_ready:
            def ready():
                if not proc.alive():
                    raise RuntimeError("%s exited with %s:\n%s" % (name, proc.proc.returncode, proc.log()))
                return http_get(port, "/readyz")[0] == 200
            self.wait_for(ready, timeout, "%s /readyz" % name)
        return proc

    def stop_product(self, proc):
        code = proc.stop()
        if proc in self.procs:
            self.procs.remove(proc)
        return code


def http_get(port, path, timeout=10):
    """(status, body text) of a plain-HTTP GET on 127.0.0.1:port."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


if __name__ == "__main__":
    # Smoke run: bring it up, place one plain pod with kube-scheduler, stop.
    skip_unless_assets()
    with ControlPlane() as cp:
        print("up in %.1fs at %s (dir %s)" % (cp.startup_seconds, cp.server, cp.dir))
        cp.add_node("n1")
        s = cp.start_scheduler(cp.scheduler_config())
        cp.create_pod(cp.pod("plain"))
        print("plain bound to", cp.wait_bound("plain"))
