"""Helpers for the install tests (tests/install/test_*.py): manifests,
kustomize, the binary's --help.

The harness itself (Suite, soft checks, Server, wait_until, free_port) is the
one the end-to-end tests use, tests/e2e/gqa_e2e.py; this module adds what only
the install tests need. Every test script is standalone:
`python3 SCRIPT --binary PATH --source-dir REPO` (Debian's /usr/bin/python3,
for PyYAML from python3-yaml). A script makes a Suite, registers test
functions with @suite.test and calls suite.main(); the last line printed is
"N passed, M failed" and the exit code is 0 only when M is 0.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import types

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import gqa_e2e  # noqa: E402
from gqa_e2e import TestFailure, free_port, wait_until  # noqa: E402,F401 - re-exported for the scripts

try:
    import yaml
except ImportError:  # pragma: no cover - reported by Suite.main()
    yaml = None


class Suite(gqa_e2e.Suite):
    """The e2e suite, plus what the install scripts ask of it."""

    @property
    def src(self):
        return self.args.source_dir

    def skip(self, what, why):
        print("  skip [%s] %s: %s" % (self.current, what, why), flush=True)

    def main(self):
        if yaml is None:
            print("PyYAML is missing: run with Debian's /usr/bin/python3 (python3-yaml)")
            print("0 passed, 1 failed")
            sys.exit(1)
        super().main()


class Server(gqa_e2e.Server):
    """The real binary on the bundled demo state: HTTP, and HTTPS when given a
    certificate and key (paths, which the service re-reads when they change).
    Stopped with SIGTERM; the exit code and sanitizer reports are checked."""

    def __init__(self, suite, https_cert=None, https_key=None, extra=(), env=None):
        tls = types.SimpleNamespace(server_cert=https_cert, server_key=https_key) if https_cert else None
        super().__init__(suite, flags=list(extra), https=bool(https_cert), tls=tls, name="server", env=env)
        self.start()

    @property
    def http_port(self):
        return self.port

    def call(self, method, path, body=None, timeout=10):
        """(status, body text) of one request on the HTTP listener."""
        data = body.encode() if isinstance(body, str) else body
        r = self.request(method, path, data, headers={"Content-Type": "application/json"} if data else None,
                         timeout=timeout)
        return r.status, r.text


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
