"""Shared helpers for the install tests (tests/install/test_*.py).

Every test script is standalone: `python3 SCRIPT --binary PATH --source-dir REPO`
(Debian's /usr/bin/python3, for PyYAML from python3-yaml). A script makes a
Suite, registers test functions with @suite.test and calls suite.main().
Checks are soft (a failed check is recorded and the test goes on); an
exception ends the test function that raised it and counts as one failure.
The last line printed is "N passed, M failed"; the exit code is 0 only when
M is 0.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

try:
    import yaml
except ImportError:  # pragma: no cover - reported by main()
    yaml = None


class TestFailure(Exception):
    """A failed require(): ends the current test function."""


class Suite:
    def __init__(self, name):
        self.name = name
        self.tests = []
        self.passed = 0
        self.failed = 0
        self.current = None
        self.args = None
        self.tmp_root = None
        self.verbose = False

    def test(self, fn):
        self.tests.append(fn)
        return fn

    def check(self, cond, what, detail=None):
        if cond:
            self.passed += 1
            if self.verbose:
                print("  ok   %s" % what)
        else:
            self.failed += 1
            msg = "  FAIL [%s] %s" % (self.current, what)
            if detail is not None:
                d = detail if isinstance(detail, str) else repr(detail)
                if len(d) > 4000:
                    d = d[:4000] + "...(truncated)"
                msg += "\n        " + d.replace("\n", "\n        ")
            print(msg, flush=True)
        return bool(cond)

    def check_eq(self, got, want, what):
        return self.check(got == want, what, "got %r, want %r" % (got, want))

    def require(self, cond, what, detail=None):
        if not self.check(cond, what, detail):
            raise TestFailure(what)

    def skip(self, what, why):
        print("  skip [%s] %s: %s" % (self.current, what, why), flush=True)

    @property
    def src(self):
        return self.args.source_dir

    def path(self, *parts):
        return os.path.join(self.args.source_dir, *parts)

    def tempdir(self, name):
        d = os.path.join(self.tmp_root, name)
        os.makedirs(d, exist_ok=True)
        return d

    def main(self):
        ap = argparse.ArgumentParser(description=self.name)
        ap.add_argument("--binary", required=True, help="path to gpu-quota-admission")
        ap.add_argument("--source-dir", required=True, help="repository root")
        ap.add_argument("-v", "--verbose", action="store_true")
        ap.add_argument("-k", dest="only", help="run only tests whose name contains this")
        self.args = ap.parse_args()
        self.args.source_dir = os.path.abspath(self.args.source_dir)
        self.args.binary = os.path.abspath(self.args.binary)
        self.verbose = self.args.verbose
        if yaml is None:
            print("PyYAML is missing: run with Debian's /usr/bin/python3 (python3-yaml)")
            print("0 passed, 1 failed")
            return 1
        self.tmp_root = tempfile.mkdtemp(prefix="gqa-install-")
        started = time.monotonic()
        try:
            for fn in self.tests:
                if self.args.only and self.args.only not in fn.__name__:
                    continue
                self.current = fn.__name__
                print("[%s] %s" % (self.name, fn.__name__), flush=True)
                try:
                    fn(self)
                except TestFailure:
                    pass
                except Exception:  # noqa: BLE001 - any crash is a failure of this test
                    self.failed += 1
                    print("  FAIL [%s] raised:\n%s" % (fn.__name__, traceback.format_exc()), flush=True)
        finally:
            shutil.rmtree(self.tmp_root, ignore_errors=True)
        print("[%s] %.1f s" % (self.name, time.monotonic() - started))
        print("%d passed, %d failed" % (self.passed, self.failed), flush=True)
        return 0 if self.failed == 0 else 1


# ---------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------

def load_docs(path):
    """Every non-empty document of a YAML file."""
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def yaml_files(root, *subdirs):
    out = []
    for sub in subdirs:
        base = os.path.join(root, sub)
        for pattern in ("**/*.yaml", "**/*.yml"):
            out.extend(glob.glob(os.path.join(base, pattern), recursive=True))
    return sorted(set(out))


def kustomization_resources(directory, seen=None):
    """Files a kustomization directory includes, following sub-directories
    (resources and components), as (path, is_component_dir) pairs."""
    seen = seen if seen is not None else set()
    directory = os.path.abspath(directory)
    if directory in seen:
        return []
    seen.add(directory)
    kfile = os.path.join(directory, "kustomization.yaml")
    k = load_docs(kfile)[0]
    files = []
    for entry in (k.get("resources") or []) + (k.get("components") or []):
        p = os.path.normpath(os.path.join(directory, entry))
        if os.path.isdir(p):
            files.extend(kustomization_resources(p, seen))
        else:
            files.append(p)
    return files


def manifest_objects(src):
    """The objects `kubectl apply -k manifests/` creates (from the files the
    kustomization lists, without kustomize), each as (file, doc)."""
    out = []
    for f in kustomization_resources(os.path.join(src, "manifests")):
        for d in load_docs(f):
            out.append((f, d))
    return out


def find(objs, kind, name, namespace=None):
    for _, o in objs:
        md = o.get("metadata") or {}
        if o.get("kind") == kind and md.get("name") == name and (namespace is None or md.get("namespace") == namespace):
            return o
    return None


def labels_match(selector, labels):
    """A LabelSelector (matchLabels/matchExpressions) against a label map."""
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in vals:
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# ---------------------------------------------------------------------------
# The binary
# ---------------------------------------------------------------------------

def help_text(binary):
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def help_flags(binary):
    """{flag name: default text or None} from --help."""
    flags = {}
    for line in help_text(binary).splitlines():
        m = re.match(r"\s+--([a-z0-9-]+)(?:\s+(\S+))?\s*(.*)", line)
        if m:
            d = re.search(r"\(default ([^;)]+)", m.group(3))
            flags[m.group(1)] = d.group(1).strip() if d else None
    return flags


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """The real binary on the bundled demo state, HTTP (and HTTPS when given
    a certificate), stopped with SIGTERM."""

    def __init__(self, suite, https_cert=None, https_key=None, extra=()):
        self.suite = suite
        self.http_port = free_port()
        self.https_port = free_port() if https_cert else None
        args = [suite.args.binary, "--state-file", suite.path("examples", "demo-state.yaml"),
                "--listen-http", "127.0.0.1:%d" % self.http_port, "--log-level", "warn"]
        if https_cert:
            args += ["--listen-https", "127.0.0.1:%d" % self.https_port, "--tls-cert", https_cert,
                     "--tls-key", https_key]
        args += list(extra)
        self.log = open(os.path.join(suite.tmp_root, "server-%d.log" % self.http_port), "w+")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GQA_")}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early (%d): %s" % (self.proc.returncode, self.output()))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.http_port, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not become ready: %s" % self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def request(self, method, path, body=None, timeout=10):
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.http_port, path), data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run(cmd, **kw)


def kubectl_kustomize():
    """A command that renders a kustomization offline, or None."""
    kubectl = shutil.which("kubectl")
    if kubectl:
        r = run([kubectl, "kustomize", "--help"])
        if r.returncode == 0:
            return [kubectl, "kustomize"]
    kustomize = shutil.which("kustomize")
    if kustomize:
        return [kustomize, "build"]
    return None


def json_dumps(o):
    return json.dumps(o, sort_keys=True)
