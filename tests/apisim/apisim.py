#!/usr/bin/env python3
"""apisim: a Kubernetes API server simulator for tests (Python 3 standard library only).

It serves the part of the kube-apiserver API that a scheduler extender uses:
core/v1 nodes, pods (+ pods/binding, pods/status), configmaps, resourcequotas
(stored, no usage accounting), namespaces and coordination.k8s.io/v1 leases, with a global resourceVersion counter, list with
label/field selectors and limit/continue, watch with replay from a bounded
history, bookmarks, 410 Expired after compaction, merge / strategic-merge /
JSON patches with resourceVersion preconditions, bearer-token and client
certificate authentication, and fault injection.

Use it in-process:

    sim = APISim(tokens=["t0"]); sim.start(); ... sim.fail(500, count=2) ...; sim.stop()

or as a subprocess:

    python3 apisim.py --port 0 --token t0 --port-file /tmp/port

and drive the faults through POST /_sim/faults (see README.md beside this file).
"""

import argparse
import base64
import bisect
import copy
import datetime
import http.client
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import string
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"
SIM_VERSION = "apisim/1"

# --------------------------------------------------------------------------
# Status objects and errors
# --------------------------------------------------------------------------

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(code, reason, message, details=None):
    st = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        st["details"] = details
    st["code"] = code
    return st


def success_status(code=200, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        st["details"] = details
    st["code"] = code
    return st


class ApiError(Exception):
    """An error answered as a Kubernetes Status object."""

    def __init__(self, code, message, reason=None, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self):
        return status_body(self.code, self.reason, self.message, self.details)


# --------------------------------------------------------------------------
# Resource types
# --------------------------------------------------------------------------


class ResourceType:
    def __init__(self, plural, singular, kind, group="", version="v1", namespaced=True,
                 unconditional_update=True, create_on_update=False, status_sub=False,
                 fields=(), returns_deleted_object=False, short_names=()):
        self.plural = plural
        self.singular = singular
        self.kind = kind
        self.group = group
        self.version = version
        self.namespaced = namespaced
        self.unconditional_update = unconditional_update
        self.create_on_update = create_on_update
        self.status_sub = status_sub
        self.returns_deleted_object = returns_deleted_object
        self.short_names = list(short_names)
        self.api_version = "%s/%s" % (group, version) if group else version
        self.qualified = "%s.%s" % (plural, group) if group else plural
        self.list_kind = kind + "List"
        base = {"metadata.name"}
        if namespaced:
            base.add("metadata.namespace")
        self.fields = base | set(fields)

    def details(self, name):
        d = {"name": name}
        if self.group:
            d["group"] = self.group
        d["kind"] = self.plural
        return d

    def not_found(self, name):
        return ApiError(404, '%s "%s" not found' % (self.qualified, name), "NotFound", self.details(name))

    def conflict(self, name, why=None):
        why = why or "the object has been modified; please apply your changes to the latest version and try again"
        return ApiError(409, 'Operation cannot be fulfilled on %s "%s": %s' % (self.qualified, name, why),
                        "Conflict", self.details(name))

    def already_exists(self, name):
        return ApiError(409, '%s "%s" already exists' % (self.qualified, name), "AlreadyExists", self.details(name))

    def invalid(self, name, causes):
        msg = '%s "%s" is invalid: %s' % (self.kind, name, ", ".join("%s: %s" % c for c in causes))
        det = self.details(name)
        det["causes"] = [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes]
        return ApiError(422, msg, "Invalid", det)


RESOURCE_TYPES = [
    ResourceType("nodes", "node", "Node", namespaced=False, status_sub=True,
                 fields=("spec.unschedulable",), short_names=("no",)),
    ResourceType("pods", "pod", "Pod", namespaced=True, status_sub=True, returns_deleted_object=True,
                 fields=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                         "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                         "status.podIP", "status.nominatedNodeName"), short_names=("po",)),
    ResourceType("configmaps", "configmap", "ConfigMap", namespaced=True, short_names=("cm",)),
    ResourceType("resourcequotas", "resourcequota", "ResourceQuota", namespaced=True, status_sub=True,
                 short_names=("quota",)),
    ResourceType("namespaces", "namespace", "Namespace", namespaced=False, status_sub=True,
                 fields=("status.phase",), short_names=("ns",)),
    ResourceType("leases", "lease", "Lease", group="coordination.k8s.io", namespaced=True,
                 unconditional_update=False, create_on_update=True),
    # What an install applies (tests/install/test_install_order.py): stored
    # and served like any object, with no controller behind them (no pods
    # from Deployments, no endpoints from Services, no webhook calls).
    ResourceType("secrets", "secret", "Secret", namespaced=True, fields=("type",)),
    ResourceType("services", "service", "Service", namespaced=True, status_sub=True, short_names=("svc",)),
    ResourceType("serviceaccounts", "serviceaccount", "ServiceAccount", namespaced=True, short_names=("sa",)),
    ResourceType("deployments", "deployment", "Deployment", group="apps", namespaced=True, status_sub=True,
                 short_names=("deploy",)),
    ResourceType("daemonsets", "daemonset", "DaemonSet", group="apps", namespaced=True, status_sub=True,
                 short_names=("ds",)),
    ResourceType("roles", "role", "Role", group="rbac.authorization.k8s.io", namespaced=True),
    ResourceType("rolebindings", "rolebinding", "RoleBinding", group="rbac.authorization.k8s.io", namespaced=True),
    ResourceType("clusterroles", "clusterrole", "ClusterRole", group="rbac.authorization.k8s.io", namespaced=False),
    ResourceType("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", group="rbac.authorization.k8s.io",
                 namespaced=False),
    ResourceType("poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", group="policy",
                 namespaced=True, status_sub=True, short_names=("pdb",)),
    ResourceType("networkpolicies", "networkpolicy", "NetworkPolicy", group="networking.k8s.io", namespaced=True,
                 short_names=("netpol",)),
    ResourceType("validatingwebhookconfigurations", "validatingwebhookconfiguration",
                 "ValidatingWebhookConfiguration", group="admissionregistration.k8s.io", namespaced=False),
    ResourceType("mutatingwebhookconfigurations", "mutatingwebhookconfiguration", "MutatingWebhookConfiguration",
                 group="admissionregistration.k8s.io", namespaced=False),
]
BY_PLURAL = {(rt.group, rt.plural): rt for rt in RESOURCE_TYPES}
BY_KIND = {rt.kind: rt for rt in RESOURCE_TYPES}
GROUP_VERSIONS = {(rt.group, rt.version) for rt in RESOURCE_TYPES}
API_GROUPS = sorted({rt.group for rt in RESOURCE_TYPES if rt.group})


def resource_type(name):
    """Find a ResourceType by plural, singular, short name or kind."""
    for rt in RESOURCE_TYPES:
        if name in (rt.plural, rt.singular, rt.kind) or name in rt.short_names:
            return rt
    raise KeyError(name)


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_SCALARS = (str, int, float, bool, type(None))


def deep(obj):
    """A deep copy of JSON data; about five times faster than copy.deepcopy,
    which matters when a test loads 180,000 objects."""
    t = type(obj)
    if t is dict:
        return {k: deep(v) for k, v in obj.items()}
    if t is list:
        return [deep(v) for v in obj]
    if t in _SCALARS:
        return obj
    return copy.deepcopy(obj)


def json_equal(a, b):
    """JSON equality (True != 1, unlike Python's ==)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return a == b


def meta(obj):
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = {}
        obj["metadata"] = m
    return m


def obj_key(obj):
    m = obj.get("metadata") or {}
    return (m.get("namespace") or "", m.get("name") or "")


def typed(obj, rt):
    """The object with kind and apiVersion first, as the real server orders them; empty label and
    annotation maps are left out, as Go's omitempty leaves them (a merge patch that nulls a pod's
    only annotation leaves no `annotations` at all)."""
    out = {"kind": rt.kind, "apiVersion": rt.api_version}
    for k, v in obj.items():
        if k not in ("kind", "apiVersion"):
            out[k] = v
    m = out.get("metadata")
    if isinstance(m, dict):
        for k in ("labels", "annotations"):
            if m.get(k) == {}:
                del m[k]
    return out


def dumps(obj):
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def field_value(obj, field):
    cur = obj
    for part in field.split("."):
        if not isinstance(cur, dict):
            cur = None
            break
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


# --------------------------------------------------------------------------
# Label and field selectors
# --------------------------------------------------------------------------

_LKEY = re.compile(r"[A-Za-z0-9_./-]+")
_LVAL = re.compile(r"[A-Za-z0-9_.-]*")


def parse_label_selector(text):
    """Parse a label selector into [(key, op, values)]; op in = != in notin exists !exists gt lt."""
    if text is None:
        return []
    s = text
    n = len(s)
    i = 0
    reqs = []

    def bad(msg):
        raise ApiError(400, "unable to parse requirement: %s (selector %r)" % (msg, text), "BadRequest")

    def ws(j):
        while j < n and s[j] in " \t":
            j += 1
        return j

    i = ws(i)
    if i >= n:
        return []
    while True:
        i = ws(i)
        neg = False
        if i < n and s[i] == "!":
            neg = True
            i = ws(i + 1)
        m = _LKEY.match(s, i)
        if not m:
            bad("expected a key at position %d" % i)
        key = m.group(0)
        i = ws(m.end())
        if neg:
            reqs.append((key, "!exists", None))
        elif i >= n or s[i] == ",":
            reqs.append((key, "exists", None))
        elif s.startswith("==", i) or s.startswith("!=", i) or s[i] in "=<>":
            if s.startswith("==", i):
                op, i = "=", i + 2
            elif s.startswith("!=", i):
                op, i = "!=", i + 2
            elif s[i] == "=":
                op, i = "=", i + 1
            elif s[i] == ">":
                op, i = "gt", i + 1
            else:
                op, i = "lt", i + 1
            i = ws(i)
            v = _LVAL.match(s, i)
            val = v.group(0)
            if op in ("gt", "lt"):
                try:
                    int(val)
                except ValueError:
                    bad("for 'Gt', 'Lt' operators, the value must be an integer")
            reqs.append((key, op, [val]))
            i = ws(v.end())
        else:
            m2 = re.compile(r"(notin|in)\b|(notin|in)(?=\()").match(s, i)
            if not m2:
                bad("found '%s', expected: '=', '!=', '==', 'in', notin'" % s[i:i + 8])
            op = m2.group(1) or m2.group(2)
            i = ws(m2.end())
            if i >= n or s[i] != "(":
                bad("expected '(' after '%s'" % op)
            j = s.find(")", i)
            if j < 0:
                bad("expected ')'")
            vals = [v.strip() for v in s[i + 1:j].split(",")]
            if vals == [""]:
                vals = []
            for v in vals:
                if not _LVAL.fullmatch(v):
                    bad("invalid label value %r" % v)
            reqs.append((key, op, vals))
            i = ws(j + 1)
        if i >= n:
            break
        if s[i] != ",":
            bad("expected ',' at position %d" % i)
        i += 1
        if ws(i) >= n:
            bad("trailing ','")
    return reqs


def labels_match(reqs, labels):
    labels = labels or {}
    for key, op, vals in reqs:
        has = key in labels
        v = labels.get(key)
        if op == "exists":
            ok = has
        elif op == "!exists":
            ok = not has
        elif op == "=":
            ok = has and v == vals[0]
        elif op == "!=":
            ok = (not has) or v != vals[0]
        elif op == "in":
            ok = has and v in vals
        elif op == "notin":
            ok = (not has) or v not in vals
        elif op in ("gt", "lt"):
            try:
                iv = int(v)
            except (TypeError, ValueError):
                ok = False
            else:
                ok = iv > int(vals[0]) if op == "gt" else iv < int(vals[0])
        else:
            ok = False
        if not ok:
            return False
    return True


def _split_unescaped(s, sep):
    out, cur, i = [], [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            continue
        if c == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _unescape_field_value(v):
    out, i = [], 0
    while i < len(v):
        if v[i] == "\\":
            if i + 1 >= len(v) or v[i + 1] not in "\\,=":
                raise ApiError(400, "invalid field selector: invalid escape sequence in %r" % v, "BadRequest")
            out.append(v[i + 1])
            i += 2
        else:
            out.append(v[i])
            i += 1
    return "".join(out)


def parse_field_selector(text, rt=None):
    """Parse a field selector into [(field, op, value)] with op '=' or '!='."""
    if not text:
        return []
    reqs = []
    for term in _split_unescaped(text, ","):
        if term == "":
            continue
        # find the first unescaped operator
        i, op, at = 0, None, -1
        while i < len(term):
            if term[i] == "\\":
                i += 2
                continue
            if term.startswith("!=", i):
                op, at, width = "!=", i, 2
                break
            if term.startswith("==", i):
                op, at, width = "=", i, 2
                break
            if term[i] == "=":
                op, at, width = "=", i, 1
                break
            i += 1
        if op is None:
            raise ApiError(400, "invalid selector: '%s'; can't understand '%s'" % (text, term), "BadRequest")
        field = term[:at].strip()
        value = _unescape_field_value(term[at + width:])
        if rt is not None and field not in rt.fields:
            raise ApiError(400, "field label not supported: %s" % field, "BadRequest")
        reqs.append((field, op, value))
    return reqs


def fields_match(reqs, obj):
    for field, op, value in reqs:
        v = field_value(obj, field)
        if op == "=" and v != value:
            return False
        if op == "!=" and v == value:
            return False
    return True


class Filter:
    def __init__(self, rt, namespace, label_reqs, field_reqs):
        self.rt = rt
        self.namespace = namespace
        self.label_reqs = label_reqs
        self.field_reqs = field_reqs

    def in_scope(self, obj):
        return self.namespace is None or (obj.get("metadata") or {}).get("namespace") == self.namespace

    def matches(self, obj):
        return (labels_match(self.label_reqs, (obj.get("metadata") or {}).get("labels"))
                and fields_match(self.field_reqs, obj))


# --------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return deep(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# list field name -> merge key, for the strategic merge patch subset
SMP_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "ports": "containerPort", "conditions": "type", "ownerReferences": "uid",
    "imagePullSecrets": "name", "addresses": "type", "hostAliases": "ip",
    "resourceClaims": "name", "topologySpreadConstraints": "topologyKey",
}
SMP_PRIMITIVE_MERGE = {"finalizers"}
_SMP_DELETE = object()


def _smp_clean(v):
    """A new value from a strategic patch: drop nulls and directives in maps."""
    if isinstance(v, dict):
        return {k: _smp_clean(x) for k, x in v.items()
                if x is not None and not k.startswith("$")}
    if isinstance(v, list):
        return [_smp_clean(x) for x in v if not (isinstance(x, dict) and x.get("$patch") == "delete")]
    return v


def _smp_list(orig, patch, key):
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [_smp_clean(e) for e in patch if not (isinstance(e, dict) and e.get("$patch") == "replace")]
    result = [deep(e) for e in orig]
    for elem in patch:
        if not isinstance(elem, dict) or key not in elem:
            raise ApiError(400, "strategic merge patch: list element without merge key %r" % key, "BadRequest")
        idx = next((i for i, e in enumerate(result) if isinstance(e, dict) and e.get(key) == elem[key]), None)
        if elem.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append(_smp_clean(elem))
        else:
            result[idx] = strategic_merge_patch(result[idx], elem)
    return result


def strategic_merge_patch(orig, patch):
    """The subset of Kubernetes' strategic merge patch documented in README.md."""
    if not isinstance(patch, dict):
        return deep(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _smp_clean(patch)
    if directive == "delete":
        return _SMP_DELETE
    if directive is not None:
        raise ApiError(400, "strategic merge patch: unknown $patch directive %r" % directive, "BadRequest")
    result = dict(orig) if isinstance(orig, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(v, list):
                result[field] = [x for x in result[field] if x not in v]
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            merged = strategic_merge_patch(result.get(k), v)
            if merged is _SMP_DELETE:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list) and k in SMP_MERGE_KEYS and isinstance(result.get(k), list):
            result[k] = _smp_list(result[k], v, SMP_MERGE_KEYS[k])
        elif isinstance(v, list) and k in SMP_PRIMITIVE_MERGE and isinstance(result.get(k), list):
            merged = list(result[k])
            for x in v:
                if x not in merged:
                    merged.append(x)
            result[k] = merged
        else:
            result[k] = _smp_clean(v)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


class JsonPatchError(Exception):
    pass


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError("invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve_parent(doc, parts, path):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict):
            if p not in cur:
                raise JsonPatchError("path %s does not exist" % path)
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                idx = int(p)
            except ValueError:
                raise JsonPatchError("invalid array index %r in %s" % (p, path))
            if not 0 <= idx < len(cur):
                raise JsonPatchError("array index %d out of range in %s" % (idx, path))
            cur = cur[idx]
        else:
            raise JsonPatchError("path %s does not exist" % path)
    return cur


def _jp_get(doc, path):
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _resolve_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError("path %s does not exist" % path)
        return parent[last]
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError:
            raise JsonPatchError("invalid array index in %s" % path)
        if not 0 <= idx < len(parent):
            raise JsonPatchError("array index out of range in %s" % path)
        return parent[idx]
    raise JsonPatchError("path %s does not exist" % path)


def _jp_add(doc, path, value):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _resolve_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise JsonPatchError("invalid array index in %s" % path)
            if not 0 <= idx <= len(parent):
                raise JsonPatchError("array index out of range in %s" % path)
            parent.insert(idx, value)
    else:
        raise JsonPatchError("path %s does not exist" % path)
    return doc


def _jp_remove(doc, path):
    parts = _pointer(path)
    if not parts:
        raise JsonPatchError("cannot remove the whole document")
    parent = _resolve_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError("unable to remove nonexistent key: %s" % path)
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError:
            raise JsonPatchError("invalid array index in %s" % path)
        if not 0 <= idx < len(parent):
            raise JsonPatchError("array index out of range in %s" % path)
        return parent.pop(idx)
    raise JsonPatchError("path %s does not exist" % path)


def json_patch(doc, ops):
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a JSON array of operations", "BadRequest")
    doc = deep(doc)
    try:
        for op in ops:
            if not isinstance(op, dict) or "op" not in op or "path" not in op:
                raise ApiError(400, "invalid json patch operation %r" % (op,), "BadRequest")
            kind, path = op["op"], op["path"]
            if kind in ("add", "replace", "test") and "value" not in op:
                raise ApiError(400, "json patch %s operation needs a value" % kind, "BadRequest")
            if kind == "add":
                doc = _jp_add(doc, path, deep(op["value"]))
            elif kind == "remove":
                _jp_remove(doc, path)
            elif kind == "replace":
                if _pointer(path):
                    _jp_remove(doc, path)
                    doc = _jp_add(doc, path, deep(op["value"]))
                else:
                    doc = deep(op["value"])
            elif kind == "move":
                frm = op.get("from")
                if frm is None:
                    raise ApiError(400, "json patch move needs 'from'", "BadRequest")
                val = _jp_remove(doc, frm)
                doc = _jp_add(doc, path, val)
            elif kind == "copy":
                frm = op.get("from")
                if frm is None:
                    raise ApiError(400, "json patch copy needs 'from'", "BadRequest")
                doc = _jp_add(doc, path, deep(_jp_get(doc, frm)))
            elif kind == "test":
                if not json_equal(_jp_get(doc, path), op["value"]):
                    raise JsonPatchError("testing value %s failed" % path)
            else:
                raise ApiError(400, "unknown json patch operation %r" % kind, "BadRequest")
    except JsonPatchError as e:
        raise ApiError(422, str(e), "Invalid")
    return doc


PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


# --------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------


# The longest a request waits at a gate that nobody opens (a test that failed
# half-way must not leave the product's calls hanging for ever).
GATE_MAX_S = 120.0


class FaultRule:
    _ids = 0

    def __init__(self, kind, status=500, ms=0, count=None, seconds=None, path=None, method=None,
                 watch=None, retry_after=None, message=None, user=None):
        FaultRule._ids += 1
        self.id = FaultRule._ids
        self.kind = kind  # "fail", "delay" or "gate"
        self.waiting = 0  # gate: requests waiting behind it now
        self.opened = False
        self.status = int(status)
        self.ms = float(ms or 0)
        self.count = None if count is None else int(count)
        self.until = None if seconds is None else time.monotonic() + float(seconds)
        self.path = path
        self.path_re = re.compile(path) if path else None
        self.methods = None if not method else {m.upper() for m in ([method] if isinstance(method, str) else method)}
        self.watch = watch
        self.retry_after = retry_after
        self.message = message
        self.user = user  # only this caller's requests, as the request log names it ("token:abcd...")

    def alive(self, now):
        if self.count is not None and self.count <= 0:
            return False
        if self.until is not None and now >= self.until:
            return False
        return True

    def matches(self, method, path, is_watch, user=None):
        if self.user is not None and user != self.user:
            return False
        if self.methods and method not in self.methods:
            return False
        if self.path_re and not self.path_re.search(path):
            return False
        if self.watch is not None and bool(self.watch) != is_watch:
            return False
        return True

    def describe(self):
        d = {"id": self.id, "kind": self.kind, "path": self.path,
             "method": sorted(self.methods) if self.methods else None, "watch": self.watch,
             "count": self.count, "user": self.user,
             "seconds": None if self.until is None else max(0.0, self.until - time.monotonic())}
        if self.kind == "fail":
            d.update(status=self.status, retryAfter=self.retry_after, message=self.message)
        elif self.kind == "gate":
            d.update(waiting=self.waiting, opened=self.opened)
        else:
            d["ms"] = self.ms
        return d


class WatchHold:
    """Watch events of one resource (or all) held back: stored and replayable,
    but not sent on open watches until the hold ends."""
    _ids = 0

    def __init__(self, resource=None, seconds=None):
        WatchHold._ids += 1
        self.id = WatchHold._ids
        self.resource = resource
        self.until = None if seconds is None else time.monotonic() + float(seconds)

    def alive(self, now):
        return self.until is None or now < self.until

    def covers(self, rt):
        return self.resource is None or self.resource == rt.plural

    def describe(self):
        return {"id": self.id, "resource": self.resource,
                "seconds": None if self.until is None else max(0.0, self.until - time.monotonic())}


# --------------------------------------------------------------------------
# The simulator state
# --------------------------------------------------------------------------


class Event:
    __slots__ = ("rv", "type", "rt", "key", "obj", "prev")

    def __init__(self, rv, typ, rt, key, obj, prev):
        self.rv = rv
        self.type = typ
        self.rt = rt
        self.key = key
        self.obj = obj
        self.prev = prev


class Watcher:
    def __init__(self, rt, filt, params, user):
        self.rt = rt
        self.filter = filt
        self.params = params
        self.user = user
        self.started = time.time()
        self.dropped = None  # None, "abrupt", "graceful", "expired"
        self.events_sent = 0

    def describe(self):
        return {"resource": self.rt.plural, "namespace": self.filter.namespace,
                "labelSelector": self.params.get("labelSelector"),
                "fieldSelector": self.params.get("fieldSelector"),
                "resourceVersion": self.params.get("resourceVersion"),
                "allowWatchBookmarks": self.params.get("allowWatchBookmarks"),
                "user": self.user, "since": self.started, "eventsSent": self.events_sent}


DEFAULT_SETTINGS = {
    "bookmark_interval": 60.0,     # seconds between BOOKMARK events (allowWatchBookmarks=true)
    "default_watch_timeout": 1800.0,  # watch length when timeoutSeconds is absent
    "graceful_delete": False,      # bound pods get deletionTimestamp instead of vanishing
    "watch_chunk_size": 0,         # >0: split every watch event over chunks of at most N bytes
    "too_large_rv_wait": 3.0,      # list with a future resourceVersion waits this long, then 504
    "require_namespaces": False,   # creating in a namespace with no Namespace object: 404, as the real server
}


class APISim:
    """The simulated API server. Thread-safe; see README.md for the API."""

    def __init__(self, port=0, tls_cert=None, tls_key=None, client_ca=None, require_client_cert=False,
                 tokens=None, state=None, history_size=2000, initial_rv=100, control_port=None,
                 verbose=False, **settings):
        self.host = HOST
        self.port = int(port)
        self.control_port = control_port
        self.tls_cert, self.tls_key, self.client_ca = tls_cert, tls_key, client_ca
        self.require_client_cert = require_client_cert
        self.initial_tokens = list(tokens or [])
        self.tokens = set(self.initial_tokens)
        self.auth_required = bool(self.initial_tokens) or bool(client_ca)
        self.verbose = verbose
        self.history_size = int(history_size)
        unknown = set(settings) - set(DEFAULT_SETTINGS)
        if unknown:
            raise TypeError("unknown settings: %s" % ", ".join(sorted(unknown)))
        self.initial_settings = dict(DEFAULT_SETTINGS, **settings)
        self.settings = dict(self.initial_settings)

        self.cond = threading.Condition(threading.RLock())
        self.rv = int(initial_rv)
        self.objects = {rt.plural: {} for rt in RESOURCE_TYPES}
        self.history = []       # Events, ascending rv
        self.history_rvs = []   # their rvs, for bisect
        self.compacted_rv = self.rv  # watches/exact lists from an RV below this get 410
        self.trimmed_rv = self.rv    # highest RV dropped from the physical history
        self.watchers = set()
        self.faults = []
        self.holds = []         # WatchHold rules: watch events held back
        self.list_garbage = []  # (plural, namespace or None, raw item) appended to list answers
        self.request_log = []
        self.request_seq = 0
        self.tls_errors = []
        self.service_proxies = {}  # (namespace, service) -> {"target": URL or None, "port": str or None}
        self.initial_objects = []
        if state is not None:
            self.initial_objects = load_state(state) if isinstance(state, str) else _flatten_objects(state)
        for obj in self.initial_objects:
            self.upsert(obj)
        # (plural -> key -> (stored object, its JSON in a list item)): the
        # real API server answers a 240 MB list in about a second from its
        # watch cache; Python's json.dumps needs several times that, which
        # would make every large-cluster sync measure the simulator.
        self.encoded = {rt.plural: {} for rt in RESOURCE_TYPES}
        for rt in RESOURCE_TYPES:
            for key, obj in self._store(rt).items():
                self._list_item_json(rt, key, obj)

        self.ssl_ctx = None
        if tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls_cert, tls_key)
            if client_ca:
                ctx.load_verify_locations(client_ca)
                ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
            self.ssl_ctx = ctx
        elif client_ca:
            raise ValueError("client_ca needs TLS (tls_cert/tls_key)")

        self._listen_lock = threading.RLock()
        self._server = None
        self._thread = None
        self._control = None
        self._up_timer = None
        self._stopped = False

    # ---- lifecycle -------------------------------------------------------

    @property
    def scheme(self):
        return "https" if self.ssl_ctx else "http"

    @property
    def url(self):
        return "%s://%s:%d" % (self.scheme, self.host, self.port)

    @property
    def control_url(self):
        if self._control is None:
            return self.url
        return "http://%s:%d" % (self.host, self._control.server_address[1])

    def start(self, down_seconds=None):
        """Start listening. down_seconds: reserve the port but stay down that long (None/0: up now; <0: down until up())."""
        if self.control_port is not None and self._control is None:
            self._control = _Server((self.host, int(self.control_port)), self, None, control_only=True)
            threading.Thread(target=self._control.serve_forever, name="apisim-control", daemon=True).start()
        if down_seconds:
            if self.port == 0:
                s = socket.socket()
                s.bind((self.host, 0))
                self.port = s.getsockname()[1]
                s.close()
            if down_seconds > 0:
                self._schedule_up(down_seconds)
            return self
        self.up()
        return self

    def up(self):
        with self._listen_lock:
            if self._up_timer is not None:
                self._up_timer.cancel()
                self._up_timer = None
            if self._server is not None or self._stopped:
                return
            last = None
            for _ in range(50):
                try:
                    srv = _Server((self.host, self.port), self, self.ssl_ctx)
                    break
                except OSError as e:  # port in TIME_WAIT use by a closing socket
                    last = e
                    time.sleep(0.05)
            else:
                raise last
            self.port = srv.server_address[1]
            self._server = srv
            self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                                            name="apisim-serve", daemon=True)
            self._thread.start()

    def down(self, seconds=None):
        """Stop listening and cut every open connection; come back after `seconds` if given."""
        with self._listen_lock:
            srv, self._server = self._server, None
            if srv is not None:
                srv.shutdown()
                srv.server_close()
                self._mark_watchers("abrupt")
                srv.kill_connections()
            if seconds is not None and seconds > 0:
                self._schedule_up(seconds)

    def _schedule_up(self, seconds):
        with self._listen_lock:
            if self._up_timer is not None:
                self._up_timer.cancel()
            self._up_timer = threading.Timer(seconds, self.up)
            self._up_timer.daemon = True
            self._up_timer.start()

    @property
    def is_up(self):
        return self._server is not None

    def stop(self):
        with self._listen_lock:
            self._stopped = True
            if self._up_timer is not None:
                self._up_timer.cancel()
        self.down()
        if self._control is not None:
            self._control.shutdown()
            self._control.server_close()
            self._control.kill_connections()
            self._control = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- store internals -------------------------------------------------

    def _next_rv(self):
        self.rv += 1
        return self.rv

    def _record(self, typ, rt, key, obj, prev):
        ev = Event(self.rv, typ, rt, key, obj, prev)
        self.history.append(ev)
        self.history_rvs.append(ev.rv)
        excess = len(self.history) - self.history_size
        if excess > 0:
            self.trimmed_rv = max(self.trimmed_rv, self.history[excess - 1].rv)
            self.compacted_rv = max(self.compacted_rv, self.trimmed_rv)
            del self.history[:excess]
            del self.history_rvs[:excess]
        self.cond.notify_all()

    def _store(self, rt):
        return self.objects[rt.plural]

    def _state_at(self, rt, rv):
        objs = dict(self._store(rt))
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            if ev.rt is rt:
                if ev.prev is None:
                    objs.pop(ev.key, None)
                else:
                    objs[ev.key] = ev.prev
        return objs

    def _events_after(self, rv):
        i = bisect.bisect_right(self.history_rvs, rv)
        return self.history[i:]

    def _mark_watchers(self, how):
        with self.cond:
            for w in self.watchers:
                if w.dropped is None:
                    w.dropped = how
            self.cond.notify_all()

    # ---- object operations (all raise ApiError) --------------------------

    def _check_body(self, rt, body):
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request must be a JSON object", "BadRequest")
        kind = body.get("kind")
        if kind not in (None, "", rt.kind):
            raise ApiError(400, "the kind in the data (%s) does not match the expected kind (%s)" % (kind, rt.kind),
                           "BadRequest")
        av = body.get("apiVersion")
        if av not in (None, "", rt.api_version):
            raise ApiError(400, "the API version in the data (%s) does not match the expected API version (%s)"
                           % (av, rt.api_version), "BadRequest")
        if not isinstance(body.get("metadata", {}), dict):
            raise ApiError(400, "metadata must be an object", "BadRequest")

    def _scope(self, rt, ns, obj):
        m = meta(obj)
        if rt.namespaced:
            bns = m.get("namespace")
            if bns and ns and bns != ns:
                raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request",
                               "BadRequest")
            if not (ns or bns):
                raise ApiError(400, "the namespace of the object must be set", "BadRequest")
            m["namespace"] = ns or bns
        else:
            m.pop("namespace", None)

    def create(self, rt, body, ns=None):
        """POST semantics (strategies and validation). Returns the stored object."""
        if isinstance(rt, str):
            rt = resource_type(rt)
        self._check_body(rt, body)
        obj = deep(body)
        self._scope(rt, ns, obj)
        m = meta(obj)
        if m.get("resourceVersion"):
            raise ApiError(500, "resourceVersion should not be set on objects to be created", "InternalError")
        if not m.get("name"):
            if m.get("generateName"):
                m["name"] = m["generateName"] + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            else:
                raise rt.invalid("", [("metadata.name", "Required value: name or generateName is required")])
        name = m["name"]
        if not isinstance(name, str) or len(name) > 253 or not NAME_RE.match(name):
            raise rt.invalid(name, [("metadata.name", "Invalid value: %r: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'" % name)])
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            m.pop(k, None)
        if rt.plural == "pods":
            self._pod_prepare_create(obj)
        elif rt.plural == "namespaces":
            obj["status"] = {"phase": "Active"}
        obj = typed(obj, rt)
        m = obj["metadata"]
        key = obj_key(obj)
        with self.cond:
            if rt.namespaced and self.settings["require_namespaces"] and \
                    ("", m["namespace"]) not in self.objects["namespaces"]:
                raise BY_PLURAL[("", "namespaces")].not_found(m["namespace"])
            if key in self._store(rt):
                raise rt.already_exists(name)
            m["uid"] = str(uuid.uuid4())
            m["creationTimestamp"] = now_rfc3339()
            m["resourceVersion"] = str(self._next_rv())
            self._store(rt)[key] = obj
            self._record("ADDED", rt, key, obj, None)
            return deep(obj)

    def _pod_prepare_create(self, obj):
        spec = obj.get("spec")
        name = meta(obj).get("name", "")
        if not isinstance(spec, dict):
            raise BY_PLURAL[("", "pods")].invalid(name, [("spec", "Required value")])
        ctrs = spec.get("containers")
        if not isinstance(ctrs, list) or not ctrs:
            raise BY_PLURAL[("", "pods")].invalid(name, [("spec.containers", "Required value")])
        for i, c in enumerate(ctrs):
            if not isinstance(c, dict) or not c.get("name"):
                raise BY_PLURAL[("", "pods")].invalid(name, [("spec.containers[%d].name" % i, "Required value")])
            if not c.get("image"):
                raise BY_PLURAL[("", "pods")].invalid(name, [("spec.containers[%d].image" % i, "Required value")])
        # As the API server defaults them: requests missing from a container's limits take the limits.
        for c in ctrs + [c for c in spec.get("initContainers") or [] if isinstance(c, dict)]:
            res = c.get("resources")
            if isinstance(res, dict) and isinstance(res.get("limits"), dict):
                req = res.setdefault("requests", {})
                if isinstance(req, dict):
                    for k, v in res["limits"].items():
                        req.setdefault(k, v)
        spec.setdefault("priority", 0)
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        obj["status"] = {"phase": "Pending"}

    def upsert(self, obj, rt=None):
        """Store an object as given (like writing etcd directly): no strategy, no validation beyond kind."""
        obj = deep(obj)
        if rt is None:
            rt = BY_KIND.get(obj.get("kind"))
            if rt is None:
                raise ApiError(400, "unknown kind %r" % obj.get("kind"), "BadRequest")
        elif isinstance(rt, str):
            rt = resource_type(rt)
        obj = typed(obj, rt)
        m = meta(obj)
        if rt.namespaced:
            m.setdefault("namespace", "default")
        else:
            m.pop("namespace", None)
        if not m.get("name"):
            raise ApiError(400, "object without metadata.name", "BadRequest")
        key = obj_key(obj)
        with self.cond:
            prev = self._store(rt).get(key)
            m.setdefault("uid", prev["metadata"]["uid"] if prev else str(uuid.uuid4()))
            m.setdefault("creationTimestamp", prev["metadata"]["creationTimestamp"] if prev else now_rfc3339())
            m["resourceVersion"] = str(self._next_rv())
            self._store(rt)[key] = obj
            self._record("MODIFIED" if prev else "ADDED", rt, key, obj, prev)
            return deep(obj)

    def get(self, rt, name, ns=None):
        if isinstance(rt, str):
            rt = resource_type(rt)
        with self.cond:
            obj = self._store(rt).get(((ns or "") if rt.namespaced else "", name))
            if obj is None:
                raise rt.not_found(name)
            return deep(obj)

    def objects_of(self, rt, ns=None):
        if isinstance(rt, str):
            rt = resource_type(rt)
        with self.cond:
            return [deep(o) for k, o in sorted(self._store(rt).items()) if ns is None or k[0] == ns]

    def _delete_pending_finalizers(self, rt, key, cur):
        """DELETE of an object with finalizers: it stays, marked with a
        deletionTimestamp, until an update removes the last finalizer (as the
        API server does). Caller holds the lock."""
        if cur["metadata"].get("deletionTimestamp"):
            return deep(cur)
        new = deep(cur)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["metadata"]["resourceVersion"] = str(self._next_rv())
        self._store(rt)[key] = new
        self._record("MODIFIED", rt, key, new, cur)
        return deep(new)

    def _write_update(self, rt, cur, new):
        """Store `new` over `cur` unless nothing changed. Caller holds the lock.
        An object being deleted goes once its last finalizer is removed."""
        a = deep(new)
        b = cur
        a["metadata"]["resourceVersion"] = b["metadata"]["resourceVersion"]
        if json_equal(a, b):
            return deep(cur), False
        a["metadata"]["resourceVersion"] = str(self._next_rv())
        key = obj_key(a)
        if a["metadata"].get("deletionTimestamp") and not a["metadata"].get("finalizers"):
            del self._store(rt)[key]
            self._record("DELETED", rt, key, a, cur)
            return deep(a), True
        self._store(rt)[key] = a
        self._record("MODIFIED", rt, key, a, cur)
        return deep(a), True

    def _prepare_update(self, rt, cur, new, subresource, patch):
        """Apply the update strategy; returns the object to store."""
        name = cur["metadata"]["name"]
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise ApiError(400, "the body of the request must be a JSON object", "BadRequest")
        self._check_body(rt, new)
        new = deep(new)
        m = meta(new)
        if m.get("name") not in (None, "", name) or (not patch and not m.get("name")):
            raise ApiError(400, "the name of the object (%s) does not match the name on the URL (%s)"
                           % (m.get("name"), name), "BadRequest")
        if rt.namespaced and m.get("namespace") not in (None, "", cur["metadata"]["namespace"]):
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request",
                           "BadRequest")
        rv = m.get("resourceVersion")
        if rv in (None, ""):
            if not patch and not rt.unconditional_update:
                raise rt.invalid(name, [("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")])
        elif str(rv) != cur["metadata"]["resourceVersion"]:
            raise rt.conflict(name)
        if subresource == "status":
            out = deep(cur)
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            return out
        cm = cur["metadata"]
        m["name"] = name
        if rt.namespaced:
            m["namespace"] = cm["namespace"]
        else:
            m.pop("namespace", None)
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generateName"):
            if k in cm:
                m[k] = cm[k]
            else:
                m.pop(k, None)
        new = typed(new, rt)
        if rt.status_sub:
            if "status" in cur:
                new["status"] = deep(cur["status"])
            else:
                new.pop("status", None)
        if rt.plural == "pods":
            self._pod_validate_update(name, cur.get("spec"), new.get("spec"))
        return new

    @staticmethod
    def _pod_spec_fixed_part(spec):
        spec = deep(spec) if isinstance(spec, dict) else spec
        if isinstance(spec, dict):
            for k in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"):
                spec.pop(k, None)
            for lk in ("containers", "initContainers"):
                for c in spec.get(lk) or []:
                    if isinstance(c, dict):
                        c.pop("image", None)
        return spec

    def _pod_validate_update(self, name, old_spec, new_spec):
        if not json_equal(self._pod_spec_fixed_part(old_spec), self._pod_spec_fixed_part(new_spec)):
            raise BY_PLURAL[("", "pods")].invalid(name, [(
                "spec", "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions "
                "to existing tolerations), `spec.terminationGracePeriodSeconds`")])

    def update(self, rt, name, body, ns=None, subresource=None):
        """PUT semantics. Returns (object, created)."""
        if isinstance(rt, str):
            rt = resource_type(rt)
        key = ((ns or "") if rt.namespaced else "", name)
        with self.cond:
            cur = self._store(rt).get(key)
            if cur is None:
                if rt.create_on_update and subresource is None:
                    if isinstance(body, dict):
                        body = deep(body)
                        meta(body).pop("resourceVersion", None)
                        if meta(body).get("name") not in (None, "", name):
                            raise ApiError(400, "the name of the object (%s) does not match the name on the URL (%s)"
                                           % (meta(body).get("name"), name), "BadRequest")
                        meta(body)["name"] = name
                    return self.create(rt, body, ns), True
                raise rt.not_found(name)
            new = self._prepare_update(rt, cur, body, subresource, patch=False)
            return self._write_update(rt, cur, new)[0], False

    def patch(self, rt, name, patch_type, patch_body, ns=None, subresource=None):
        if isinstance(rt, str):
            rt = resource_type(rt)
        key = ((ns or "") if rt.namespaced else "", name)
        with self.cond:
            cur = self._store(rt).get(key)
            if cur is None:
                raise rt.not_found(name)
            if patch_type == "merge":
                if not isinstance(patch_body, dict):
                    raise ApiError(400, "a merge patch must be a JSON object", "BadRequest")
                new = merge_patch(cur, patch_body)
            elif patch_type == "strategic":
                if not isinstance(patch_body, dict):
                    raise ApiError(400, "a strategic merge patch must be a JSON object", "BadRequest")
                new = strategic_merge_patch(cur, patch_body)
            elif patch_type == "json":
                new = json_patch(cur, patch_body)
            else:
                raise ApiError(415, "unsupported patch type %r" % patch_type, "UnsupportedMediaType")
            new = self._prepare_update(rt, cur, new, subresource, patch=True)
            return self._write_update(rt, cur, new)[0]

    def delete(self, rt, name, ns=None, options=None):
        """DELETE semantics. Returns (body, code)."""
        if isinstance(rt, str):
            rt = resource_type(rt)
        options = options or {}
        key = ((ns or "") if rt.namespaced else "", name)
        with self.cond:
            cur = self._store(rt).get(key)
            if cur is None:
                raise rt.not_found(name)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != cur["metadata"].get("uid"):
                raise rt.conflict(name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                                  % (pre["uid"], cur["metadata"].get("uid")))
            if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
                raise rt.conflict(name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s"
                                  % (pre["resourceVersion"], cur["metadata"]["resourceVersion"]))
            grace = options.get("gracePeriodSeconds")
            if (rt.plural == "pods" and self.settings["graceful_delete"] and grace != 0
                    and (cur.get("spec") or {}).get("nodeName")
                    and (cur.get("status") or {}).get("phase") not in ("Succeeded", "Failed")):
                if cur["metadata"].get("deletionTimestamp"):
                    return deep(cur), 200
                if grace is None:
                    grace = (cur.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                new = deep(cur)
                t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=int(grace))
                new["metadata"]["deletionTimestamp"] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
                new["metadata"]["deletionGracePeriodSeconds"] = int(grace)
                new["metadata"]["resourceVersion"] = str(self._next_rv())
                self._store(rt)[key] = new
                self._record("MODIFIED", rt, key, new, cur)
                return deep(new), 200
            if cur["metadata"].get("finalizers"):
                return self._delete_pending_finalizers(rt, key, cur), 200
            del self._store(rt)[key]
            gone = deep(cur)
            gone["metadata"]["resourceVersion"] = str(self._next_rv())
            self._record("DELETED", rt, key, gone, cur)
            if rt.returns_deleted_object:  # the last stored state (the DELETED event carries the new RV)
                return deep(cur), 200
            det = rt.details(name)
            det["uid"] = cur["metadata"].get("uid")
            return success_status(200, det), 200

    def bind(self, ns, name, binding):
        """pods/binding: set spec.nodeName once."""
        rt = BY_PLURAL[("", "pods")]
        if not isinstance(binding, dict):
            raise ApiError(400, "the body of the request must be a JSON object", "BadRequest")
        if binding.get("kind") not in (None, "", "Binding"):
            raise ApiError(400, "the kind in the data (%s) does not match the expected kind (Binding)"
                           % binding.get("kind"), "BadRequest")
        bm = binding.get("metadata") or {}
        if bm.get("name") not in (None, "", name):
            raise ApiError(400, "name in URL does not match name in Binding object", "BadRequest")
        if bm.get("namespace") not in (None, "", ns):
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request",
                           "BadRequest")
        target = binding.get("target") or {}
        node = target.get("name")
        if not node:
            raise ApiError(422, 'Binding.core "%s" is invalid: target.name: Required value' % name, "Invalid",
                           {"name": name, "group": "core", "kind": "Binding"})
        with self.cond:
            key = (ns, name)
            cur = self._store(rt).get(key)
            if cur is None:
                raise rt.not_found(name)
            if bm.get("uid") and bm["uid"] != cur["metadata"].get("uid"):
                raise ApiError(409, 'Operation cannot be fulfilled on pods/binding "%s": Precondition failed: UID in precondition: %s, UID in object meta: %s'
                               % (name, bm["uid"], cur["metadata"].get("uid")), "Conflict",
                               {"name": name, "kind": "pods/binding"})
            if cur["metadata"].get("deletionTimestamp"):
                raise ApiError(409, 'Operation cannot be fulfilled on pods/binding "%s": pod %s is being deleted, cannot be assigned to a host'
                               % (name, name), "Conflict", {"name": name, "kind": "pods/binding"})
            bound = (cur.get("spec") or {}).get("nodeName")
            if bound:
                raise ApiError(409, 'Operation cannot be fulfilled on pods/binding "%s": pod %s is already assigned to node "%s"'
                               % (name, name, bound), "Conflict", {"name": name, "kind": "pods/binding"})
            new = deep(cur)
            new.setdefault("spec", {})["nodeName"] = node
            if bm.get("annotations"):
                meta(new).setdefault("annotations", {}).update(bm["annotations"])
            st = new.setdefault("status", {})
            conds = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": now_rfc3339()})
            st["conditions"] = conds
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self._store(rt)[key] = new
            self._record("MODIFIED", rt, key, new, cur)
            return success_status(201)

    def _list_item_json(self, rt, key, obj):
        """`obj` as a list item (no kind, no apiVersion), encoded once per
        stored version: stored objects are never changed in place, so the
        bytes stay valid while the store holds the same object."""
        cache = self.encoded[rt.plural]
        ent = cache.get(key)
        if ent is not None and ent[0] is obj:
            return ent[1]
        data = json.dumps({k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"},
                          separators=(",", ":")).encode()
        if self._store(rt).get(key) is obj:
            cache[key] = (obj, data)
        return data

    def list(self, rt, ns=None, params=None):
        """List semantics (resourceVersion / resourceVersionMatch / limit / continue / selectors)."""
        head, keys, items, garbage = self._list_parts(rt, ns, params)
        # Stored objects are never changed in place (every write stores a new
        # object), so the items share them: a shallow copy without kind and
        # apiVersion is enough, and a deep copy of 160,000 pods would take the
        # simulator longer than the client's whole initial sync.
        out = [{k: v for k, v in o.items() if k != "kind" and k != "apiVersion"} for o in items]
        head["items"] = out + garbage
        return head

    def list_json(self, rt, ns=None, params=None):
        """The list answer's bytes, as dumps(self.list(...)) would give them,
        built from each item's cached encoding."""
        if isinstance(rt, str):
            rt = resource_type(rt)
        head, keys, items, garbage = self._list_parts(rt, ns, params)
        with self.cond:
            parts = [self._list_item_json(rt, k, o) for k, o in zip(keys, items)]
            cache = self.encoded[rt.plural]
            if len(cache) > len(self._store(rt)) + 1000:  # drop the encodings of deleted objects
                store = self._store(rt)
                self.encoded[rt.plural] = {k: e for k, e in cache.items() if store.get(k) is e[0]}
        parts += [json.dumps(g, separators=(",", ":")).encode() for g in garbage]
        head["items"] = []
        text = dumps(head)
        assert text.endswith(b"[]}\n")
        return b"".join((text[:-3], b",".join(parts), b"]}\n"))

    def _list_parts(self, rt, ns, params):
        """(list head without items, keys, stored objects, garbage items)."""
        if isinstance(rt, str):
            rt = resource_type(rt)
        params = params or {}
        filt = Filter(rt, ns, parse_label_selector(params.get("labelSelector")),
                      parse_field_selector(params.get("fieldSelector"), rt))
        rv = params.get("resourceVersion")
        match = params.get("resourceVersionMatch")
        cont = params.get("continue")
        try:
            limit = int(params.get("limit") or 0)
        except ValueError:
            raise ApiError(400, "invalid limit %r" % params.get("limit"), "BadRequest")
        if match and match not in ("Exact", "NotOlderThan"):
            raise ApiError(400, "resourceVersionMatch: Unsupported value: %r" % match, "BadRequest")
        if match and not rv:
            raise ApiError(422, "resourceVersionMatch is forbidden unless resourceVersion is provided", "Invalid")
        if match == "Exact" and rv == "0":
            raise ApiError(422, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"', "Invalid")
        start = None
        with self.cond:
            if cont:
                if rv:
                    raise ApiError(400, "specifying resource version is not allowed when using continue", "BadRequest")
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont.encode() + b"==="))
                    list_rv = int(tok["rv"])
                    start = tuple(tok["start"])
                except Exception:
                    raise ApiError(400, "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
                                   "BadRequest")
                if list_rv < self.compacted_rv:
                    raise ApiError(410, "The provided continue parameter is too old to display a consistent list result. "
                                        "You can start a new list without the continue parameter, or use the continue "
                                        "token in this response to retrieve the remainder of the results. Continuing "
                                        "with the provided token results in an inconsistent list - objects that were "
                                        "created, modified, or deleted between the time the first chunk was returned "
                                        "and now may show up in the list.", "Expired")
                objs = self._state_at(rt, list_rv)
            elif rv in (None, ""):
                list_rv, objs = self.rv, self._store(rt)
            elif rv == "0":
                list_rv, objs, limit = self.rv, self._store(rt), 0
            else:
                try:
                    n = int(rv)
                    if n < 0:
                        raise ValueError
                except ValueError:
                    raise ApiError(400, "invalid resource version: %s" % rv, "BadRequest")
                exact = match == "Exact" or (match is None and limit > 0)
                if n > self.rv:
                    self.cond.wait_for(lambda: self.rv >= n, timeout=self.settings["too_large_rv_wait"])
                    if n > self.rv:
                        raise ApiError(504, "Too large resource version: %d, current: %d" % (n, self.rv), "Timeout",
                                       {"causes": [{"reason": "ResourceVersionTooLarge",
                                                    "message": "Too large resource version"}],
                                        "retryAfterSeconds": 1})
                if exact:
                    if n < self.compacted_rv:
                        raise ApiError(410, "The resourceVersion for the provided list is too old.", "Expired")
                    list_rv, objs = n, self._state_at(rt, n)
                else:
                    list_rv, objs = self.rv, self._store(rt)
            if filt.label_reqs or filt.field_reqs:
                keys = sorted(k for k, o in objs.items() if (ns is None or k[0] == ns) and filt.matches(o))
            else:
                keys = sorted(k for k in objs if ns is None or k[0] == ns)
            if start is not None:
                keys = keys[bisect.bisect_right(keys, start):]
            items = [objs[k] for k in keys]
        lmeta = {"resourceVersion": str(list_rv)}
        if limit > 0 and len(items) > limit:
            rest = len(items) - limit
            items = items[:limit]
            keys = keys[:limit]
            lmeta["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"v": SIM_VERSION, "rv": list_rv, "start": list(obj_key(items[-1]))}).encode()).decode().rstrip("=")
            if not filt.label_reqs and not filt.field_reqs:
                lmeta["remainingItemCount"] = rest
        with self.cond:
            garbage = [deep(item) for plural, gns, item in self.list_garbage
                       if plural == rt.plural and (ns is None or gns is None or gns == ns)]
        return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": lmeta}, keys, items, garbage

    def delete_collection(self, rt, ns, params, options=None):
        lst = self.list(rt, ns, {k: v for k, v in params.items() if k in ("labelSelector", "fieldSelector")})
        deleted = []
        for o in lst["items"]:
            try:
                body, _ = self.delete(rt, o["metadata"]["name"], o["metadata"].get("namespace"), options)
            except ApiError:
                continue
            if body.get("kind") != "Status":
                body.pop("kind", None)
                body.pop("apiVersion", None)
                deleted.append(body)
            else:
                deleted.append(o)
        with self.cond:
            rv = self.rv
        return {"kind": rt.list_kind, "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)}, "items": deleted}

    # ---- fault injection & control ---------------------------------------

    def fail(self, status=500, count=None, seconds=None, path=None, method=None, watch=None,
             retry_after=None, message=None, user=None):
        """Answer `status` to matching requests: the next `count`, or for `seconds`, or until clear_faults().
        With user (as the request log names callers, e.g. "token:abcd..."), only that caller's."""
        rule = FaultRule("fail", status=status, count=count, seconds=seconds, path=path, method=method,
                         watch=watch, retry_after=retry_after, message=message, user=user)
        with self.cond:
            self.faults.append(rule)
        return rule.id

    def delay(self, ms, count=None, seconds=None, path=None, method=None, watch=None):
        rule = FaultRule("delay", ms=ms, count=count, seconds=seconds, path=path, method=method, watch=watch)
        with self.cond:
            self.faults.append(rule)
        return rule.id

    def gate(self, path=None, method=None, watch=None):
        """Stop matching requests until open_gate(): each waits (at most GATE_MAX_S) before it is
        served. Unlike a delay, a test can see how many wait at once (gate_waiting) and so show that
        a client sends requests concurrently, whatever the machine's speed."""
        rule = FaultRule("gate", path=path, method=method, watch=watch)
        with self.cond:
            self.faults.append(rule)
        return rule.id

    def open_gate(self, gate_id=None):
        """Let every request waiting at gate_id (None: at every gate) through, and end the gate."""
        with self.cond:
            for f in self.faults:
                if f.kind == "gate" and (gate_id is None or f.id == gate_id):
                    f.opened = True
            self.faults = [f for f in self.faults if not (f.kind == "gate" and f.opened)]
            self.cond.notify_all()

    def gate_waiting(self, gate_id):
        """How many requests wait at the gate now."""
        with self.cond:
            return sum(f.waiting for f in self.faults if f.kind == "gate" and f.id == gate_id)

    def _pass_gate(self, gate):
        deadline = time.monotonic() + GATE_MAX_S
        with self.cond:
            gate.waiting += 1
            self.cond.notify_all()
            while not gate.opened and time.monotonic() < deadline:
                self.cond.wait(0.1)
            gate.waiting -= 1

    def clear_faults(self):
        with self.cond:
            for f in self.faults:
                f.opened = True
            self.cond.notify_all()
            self.faults = []
            self.list_garbage = []

    def add_list_garbage(self, rt, item, ns=None):
        """Append `item` (any JSON value, stored nowhere else) to every list of
        `rt` (in namespace ns, or in every namespace): an object no real API
        server would return, such as a ConfigMap without a name, for clients
        that must skip one bad item. Until clear_faults() or reset()."""
        if isinstance(rt, str):
            rt = resource_type(rt)
        with self.cond:
            self.list_garbage.append((rt.plural, ns, deep(item)))

    def active_faults(self):
        now = time.monotonic()
        with self.cond:
            self.faults = [f for f in self.faults if f.alive(now)]
            return [f.describe() for f in self.faults]

    def _take_faults(self, method, path, is_watch, user=None):
        """Returns (delay_ms, failing rule or None), consuming counts; waits at any gate first."""
        now = time.monotonic()
        delay_ms, failing = 0.0, None
        with self.cond:
            gates = [f for f in self.faults if f.kind == "gate" and f.matches(method, path, is_watch, user)]
        for gate in gates:
            self._pass_gate(gate)
        with self.cond:
            self.faults = [f for f in self.faults if f.alive(now)]
            for f in self.faults:
                if f.kind == "gate" or not f.matches(method, path, is_watch, user):
                    continue
                if f.kind == "delay":
                    delay_ms += f.ms
                    if f.count is not None:
                        f.count -= 1
                elif failing is None:
                    failing = f
                    if f.count is not None:
                        f.count -= 1
        return delay_ms, failing

    def drop_watches(self, graceful=False):
        """End every open watch: abruptly (connection cut) or gracefully (terminating chunk)."""
        self._mark_watchers("graceful" if graceful else "abrupt")

    def expire_watches(self):
        """Send every open watch an ERROR event with a 410 Expired Status, then end it."""
        self._mark_watchers("expired")

    def hold_watches(self, resource=None, seconds=None):
        """Hold back watch events of `resource` (a plural such as "pods"; None: every resource) until
        release_watches() or, with seconds, until then. Writes still happen and lists show them; open and
        new watches send nothing of that resource but bookmarks (at the resourceVersion they have sent up
        to) until the hold ends, then everything they missed, in order."""
        if resource is not None and resource not in self.objects:
            raise ValueError("unknown resource %r" % (resource,))
        hold = WatchHold(resource, seconds)
        with self.cond:
            self.holds.append(hold)
            self.cond.notify_all()
        if seconds is not None:
            t = threading.Timer(float(seconds) + 0.01, self._notify)
            t.daemon = True
            t.start()
        return hold.id

    def release_watches(self, resource=None, hold_id=None):
        """End holds: the one with hold_id, those of `resource`, or (neither given) all of them."""
        with self.cond:
            self.holds = [h for h in self.holds
                          if not ((hold_id is None or h.id == hold_id) and
                                  (resource is None or h.resource == resource))]
            self.cond.notify_all()

    def active_holds(self):
        now = time.monotonic()
        with self.cond:
            self.holds = [h for h in self.holds if h.alive(now)]
            return [h.describe() for h in self.holds]

    def _held(self, rt):
        """Under self.cond: are rt's watch events held back now?"""
        now = time.monotonic()
        return any(h.alive(now) and h.covers(rt) for h in self.holds)

    def _notify(self):
        with self.cond:
            self.cond.notify_all()

    def expire_token(self, token):
        with self.cond:
            self.tokens.discard(token)

    def add_token(self, token):
        with self.cond:
            self.tokens.add(token)
            self.auth_required = True

    def set_tokens(self, tokens):
        with self.cond:
            self.tokens = set(tokens)
            self.auth_required = bool(self.tokens) or bool(self.client_ca) or self.auth_required

    def compact(self, rv=None):
        """Compact history: watches and exact lists from an RV below the returned one get 410."""
        with self.cond:
            target = self.rv if rv is None else min(int(rv), self.rv)
            self.compacted_rv = max(self.compacted_rv, target)
            return self.compacted_rv

    def configure(self, **settings):
        unknown = set(settings) - set(DEFAULT_SETTINGS)
        if unknown:
            raise ApiError(400, "unknown settings: %s" % ", ".join(sorted(unknown)), "BadRequest")
        with self.cond:
            self.settings.update(settings)
            self.cond.notify_all()

    def reset(self):
        """Back to the initial objects, tokens, settings; no faults, empty request log; watches dropped.
        The global resourceVersion keeps growing and old RVs become too old (410)."""
        self.drop_watches(graceful=False)
        self.open_gate()
        with self.cond:
            self.faults = []
            self.holds = []
            self.list_garbage = []
            self.tokens = set(self.initial_tokens)
            self.auth_required = bool(self.initial_tokens) or bool(self.client_ca)
            self.settings = dict(self.initial_settings)
            self.objects = {rt.plural: {} for rt in RESOURCE_TYPES}
            self.history, self.history_rvs = [], []
            self._next_rv()  # every RV seen before the reset is now too old
            self.compacted_rv = self.trimmed_rv = self.rv
            self.request_log = []
            self.tls_errors = []
            self.service_proxies = {}
            for obj in self.initial_objects:
                self.upsert(obj)
        if not self._stopped and not self.is_up:
            self.up()

    # ---- service proxy -----------------------------------------------------

    def add_service_proxy(self, namespace, name, target, port=None):
        """Serve /api/v1/namespaces/NAMESPACE/services/NAME[:PORT]/proxy/... by
        forwarding to target ("http://127.0.0.1:PORT"), as the API server forwards
        to a Service's endpoint. target None: the Service exists but has no
        endpoints (503). port: the port name or number the path may carry."""
        if target is not None and not re.match(r"^https?://[^/]+$", target):
            raise ValueError("target must be scheme://host:port, got %r" % (target,))
        with self.cond:
            self.service_proxies[(namespace, name)] = {"target": target,
                                                       "port": None if port is None else str(port)}

    def remove_service_proxy(self, namespace, name):
        with self.cond:
            self.service_proxies.pop((namespace, name), None)

    def service_proxy_target(self, namespace, service):
        """The target URL for the path segment SERVICE ("name", "name:port",
        "scheme:name:port"); raises the API server's errors."""
        parts = service.split(":")
        if len(parts) == 3:
            scheme, name, port = parts
        elif len(parts) == 2:
            scheme, (name, port) = "", parts
        else:
            scheme, name, port = "", service, ""
        if scheme not in ("", "http", "https") or not NAME_RE.match(name):
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        with self.cond:
            entry = self.service_proxies.get((namespace, name))
        if entry is None:
            raise ApiError(404, 'services "%s" not found' % name, "NotFound", {"name": name, "kind": "services"})
        if port and entry["port"] is not None and port != entry["port"]:
            raise ApiError(503, 'no endpoints available for service "%s"' % service, "ServiceUnavailable")
        if entry["target"] is None:
            raise ApiError(503, 'no endpoints available for service "%s"' % name, "ServiceUnavailable")
        target = entry["target"]
        if scheme == "https":
            target = "https://" + target.split("://", 1)[1]
        return target

    def requests(self, since=0):
        with self.cond:
            return [dict(r) for r in self.request_log if r["seq"] > since]

    def wait_for_request(self, pred, timeout=5.0, since=0):
        """Wait until a logged request (dict, see requests()) satisfies pred; returns it or None."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for r in self.request_log:
                    if r["seq"] > since and pred(r):
                        return dict(r)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.1))

    def clear_requests(self):
        with self.cond:
            self.request_log = []

    def watch_count(self, resource=None):
        with self.cond:
            return sum(1 for w in self.watchers if w.dropped is None and (resource is None or w.rt.plural == resource))

    def wait_for_watches(self, n, resource=None, timeout=5.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.watch_count(resource) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.1))
        return True

    def set_pod_phase(self, ns, name, phase):
        return self.patch("pods", name, "merge", {"status": {"phase": phase}}, ns=ns, subresource="status")

    def write_kubeconfig(self, path, token=None, ca_file=None, client_cert=None, client_key=None, insecure=False):
        """Write a kubeconfig (JSON, which is YAML too) pointing at this simulator."""
        cluster = {"server": self.url}
        if ca_file:
            cluster["certificate-authority"] = os.path.abspath(ca_file)
        if insecure:
            cluster["insecure-skip-tls-verify"] = True
        user = {}
        if token:
            user["token"] = token
        if client_cert:
            user["client-certificate"] = os.path.abspath(client_cert)
            user["client-key"] = os.path.abspath(client_key)
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "apisim",
               "clusters": [{"name": "apisim", "cluster": cluster}],
               "users": [{"name": "apisim", "user": user}],
               "contexts": [{"name": "apisim", "context": {"cluster": "apisim", "user": "apisim"}}]}
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        return path

    def control(self, op):
        """Apply one control operation given as a dict (the body of POST /_sim/faults)."""
        if not isinstance(op, dict) or "op" not in op:
            raise ApiError(400, "a fault operation is an object with an 'op' field", "BadRequest")
        args = {k: v for k, v in op.items() if k != "op"}
        name = op["op"]
        try:
            if name == "fail":
                return {"id": self.fail(**args)}
            if name == "delay":
                return {"id": self.delay(**args)}
            if name == "gate":
                return {"id": self.gate(**args)}
            if name == "open_gate":
                self.open_gate(**args)
                return {}
            if name == "gate_waiting":
                return {"waiting": self.gate_waiting(**args)}
            if name == "clear":
                self.clear_faults()
                return {}
            if name == "drop_watches":
                self.drop_watches(**args)
                return {}
            if name == "expire_watches":
                self.expire_watches()
                return {}
            if name == "hold_watches":
                return {"id": self.hold_watches(**args)}
            if name == "release_watches":
                self.release_watches(**args)
                return {}
            if name == "expire_token":
                self.expire_token(args["token"])
                return {}
            if name == "rotate_token":
                self.add_token(args["new"])
                self.expire_token(args["old"])
                return {}
            if name == "add_token":
                self.add_token(args["token"])
                return {}
            if name == "set_tokens":
                self.set_tokens(args["tokens"])
                return {}
            if name == "compact":
                return {"compactedResourceVersion": str(self.compact(args.get("resourceVersion")))}
            if name == "list_garbage":
                self.add_list_garbage(args["resource"], args["item"], args.get("namespace"))
                return {}
            if name == "down":
                secs = args.get("seconds")
                threading.Timer(0.05, self.down, kwargs={"seconds": secs}).start()
                return {}
            if name == "up":
                self.up()
                return {}
            if name == "settings":
                self.configure(**args)
                return {"settings": dict(self.settings)}
            if name == "service_proxy":
                self.add_service_proxy(args["namespace"], args["name"], args.get("target"), args.get("port"))
                return {}
            if name == "remove_service_proxy":
                self.remove_service_proxy(args["namespace"], args["name"])
                return {}
        except (TypeError, KeyError, ValueError, re.error) as e:
            raise ApiError(400, "bad arguments for %s: %s" % (name, e), "BadRequest")
        raise ApiError(400, "unknown fault operation %r" % name, "BadRequest")

    # ---- request log -----------------------------------------------------

    def _log_request(self, entry):
        with self.cond:
            self.request_seq += 1
            entry["seq"] = self.request_seq
            self.request_log.append(entry)
            self.cond.notify_all()
            if len(self.request_log) > 20000:
                del self.request_log[:5000]
            return entry["seq"]


# --------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, sim, ssl_ctx, control_only=False):
        self.sim = sim
        self.ssl_ctx = ssl_ctx
        self.control_only = control_only
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def finish_request(self, request, client_address):
        sock = request
        with self.conns_lock:
            self.conns.add(sock)
        try:
            try:
                request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            if self.ssl_ctx is not None:
                request.settimeout(10)
                try:
                    sock = self.ssl_ctx.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError) as e:
                    with self.sim.cond:
                        self.sim.tls_errors.append(str(e))
                    return
                finally:
                    with self.conns_lock:
                        self.conns.discard(request)
                with self.conns_lock:
                    self.conns.add(sock)
                sock.settimeout(None)
            self.RequestHandlerClass(sock, client_address, self)
        finally:
            with self.conns_lock:
                self.conns.discard(sock)
            if sock is not request:
                try:
                    sock.close()
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        if self.sim.verbose:
            traceback.print_exc()

    def kill_connections(self):
        with self.conns_lock:
            conns = list(self.conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _ClientGone(Exception):
    pass


PUBLIC_PATHS = {"/healthz", "/livez", "/readyz", "/version", "/healthz/", "/version/"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "apisim"

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):
        if self.server.sim.verbose:
            sys.stderr.write("apisim: %s - %s\n" % (self.address_string(), fmt % args))

    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # ---- plumbing -------------------------------------------------------

    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, code, body, content_type="application/json", headers=None):
        data = body if isinstance(body, bytes) else dumps(body)
        self._status = code
        self._log_entry()  # before the client can see the answer
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(data)))
        # headers and body in one write; a large body is written on its own
        # rather than copied once more behind the headers
        self._headers_buffer.append(b"\r\n")
        large = len(data) > (1 << 20)
        if self.command != "HEAD" and not large:
            self._headers_buffer.append(data)
        self.flush_headers()
        if self.command != "HEAD" and large:
            self.wfile.write(data)

    def _log_entry(self):
        entry = getattr(self, "_entry", None)
        if entry is not None and not entry.get("logged"):
            entry["logged"] = True
            entry["status"] = self._status
            entry["duration"] = time.time() - entry["time"]
            self.server.sim._log_request(entry)

    def _send_error(self, err):
        hdrs = dict(err.headers)
        if err.code == 401:
            hdrs.setdefault("WWW-Authenticate", 'Bearer realm="apisim"')
        self._send(err.code, err.status(), headers=hdrs)

    def _user(self):
        sim = self.server.sim
        conn = self.connection
        if isinstance(conn, ssl.SSLSocket):
            try:
                pc = conn.getpeercert()
            except (ValueError, OSError):
                pc = None
            if pc:
                cn = ""
                for rdn in pc.get("subject", ()):
                    for k, v in rdn:
                        if k == "commonName":
                            cn = v
                return "cert:" + cn
        auth = self.headers.get("Authorization") or ""
        if auth[:7].lower() == "bearer ":
            tok = auth[7:].strip()
            with sim.cond:
                if tok in sim.tokens:
                    return "token:" + tok[:4] + "..."
            return None
        if not sim.auth_required:
            return "system:anonymous"
        return None

    def _dispatch(self):
        sim = self.server.sim
        self._status = None
        t0 = time.time()
        parsed = urllib.parse.urlsplit(self.path)
        path = parsed.path
        qs = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        params = {k: v[-1] for k, v in qs.items()}
        try:
            body = self._read_body()
        except (OSError, ValueError):
            self.close_connection = True
            return
        entry = {"time": t0, "method": self.command, "path": path, "query": parsed.query, "params": params,
                 "contentType": self.headers.get("Content-Type"), "status": None, "user": None,
                 "watch": False, "body": body[:65536].decode("utf-8", "replace")}
        is_control = path == "/_sim" or path.startswith("/_sim/")
        self._entry = None if is_control else entry
        try:
            try:
                if is_control:
                    self._control(path, params, body)
                    return
                if self.server.control_only:
                    raise ApiError(404, "the control port serves /_sim/ only", "NotFound")
                user = self._user()
                entry["user"] = user
                is_watch = params.get("watch") in ("1", "true", "True") or "/watch/" in path
                entry["watch"] = is_watch
                if user is None and path not in PUBLIC_PATHS:
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                delay_ms, failing = sim._take_faults(self.command, path, is_watch, user)
                if delay_ms:
                    time.sleep(delay_ms / 1000.0)
                if failing is not None:
                    hdrs = {}
                    det = None
                    if failing.retry_after is not None:
                        hdrs["Retry-After"] = str(int(failing.retry_after))
                        det = {"retryAfterSeconds": int(failing.retry_after)}
                    raise ApiError(failing.status, failing.message or "apisim: injected fault (%d)" % failing.status,
                                   REASONS.get(failing.status), det, hdrs)
                self._api(path, params, body, entry)
            except ApiError as e:
                if self._status is not None:  # headers already gone (watch)
                    raise _ClientGone()
                self._send_error(e)
        except (_ClientGone, BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ssl.SSLError, socket.timeout):
            self.close_connection = True
        except OSError:
            self.close_connection = True
        except Exception as e:  # a bug in the simulator: answer 500, keep going
            traceback.print_exc()
            if self._status is None:
                try:
                    self._send(500, status_body(500, "InternalError", "apisim internal error: %r" % e))
                except OSError:
                    self.close_connection = True
            else:
                self.close_connection = True
        finally:
            self._log_entry()
            self._entry = None

    def _json_body(self, body, allow_empty=False):
        if not body.strip():
            if allow_empty:
                return None
            raise ApiError(400, "the request body is empty", "BadRequest")
        try:
            return json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, "the body of the request could not be decoded: %s" % e, "BadRequest")

    def _content_type(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()

    def _expect_json(self, body):
        ct = self._content_type()
        if ct not in ("", "application/json", "*/*"):
            raise ApiError(415, 'the body of the request was in an unknown format - accepted media types include: '
                                'application/json, application/yaml, application/vnd.kubernetes.protobuf',
                           "UnsupportedMediaType")
        return self._json_body(body)

    # ---- the API --------------------------------------------------------

    def _api(self, path, params, body, entry):
        sim = self.server.sim
        m = self.command
        if path in ("/healthz", "/livez", "/readyz", "/healthz/"):
            return self._send(200, b"ok", "text/plain; charset=utf-8")
        if path in ("/version", "/version/"):
            return self._send(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-apisim",
                                    "gitCommit": "0" * 40, "gitTreeState": "clean",
                                    "buildDate": "2024-01-01T00:00:00Z", "goVersion": "go1.22.0",
                                    "compiler": "gc", "platform": "linux/amd64"})
        segs = [s for s in path.split("/") if s]
        if segs == ["api"]:
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                                    "serverAddress": "%s:%d" % (sim.host, sim.port)}]})
        if segs == ["apis"]:
            return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                    "groups": [_api_group(g) for g in API_GROUPS]})
        if len(segs) == 2 and segs[0] == "apis" and segs[1] in API_GROUPS:
            g = _api_group(segs[1])
            g.update(kind="APIGroup", apiVersion="v1")
            return self._send(200, g)
        if segs == ["api", "v1"]:
            return self._send(200, _resource_list("", "v1"))
        if len(segs) == 3 and segs[0] == "apis" and (segs[1], segs[2]) in GROUP_VERSIONS:
            return self._send(200, _resource_list(segs[1], segs[2]))

        if len(segs) >= 7 and segs[:3] == ["api", "v1", "namespaces"] and segs[4] == "services" and segs[6] == "proxy":
            return self._service_proxy(segs[3], segs[5], path, body)

        r = _route(segs)
        if r is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        rt, ns, name, sub, watch_prefix = r
        if ns is not None and not NAME_RE.match(ns):
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if rt == "bindings":
            if m != "POST":
                raise _method_not_allowed()
            b = self._expect_json(body)
            bname = (b.get("metadata") or {}).get("name") if isinstance(b, dict) else None
            return self._send(201, sim.bind(ns, bname or "", b))
        if watch_prefix:
            if m != "GET":
                raise _method_not_allowed()
            if name is not None:
                fs = params.get("fieldSelector")
                params["fieldSelector"] = "metadata.name=%s" % name + ("," + fs if fs else "")
            return self._watch(rt, ns, params, entry)
        if sub is not None:
            if sub == "binding" and rt.plural == "pods" and name is not None:
                if m != "POST":
                    raise _method_not_allowed()
                return self._send(201, sim.bind(ns, name, self._expect_json(body)))
            if sub == "status" and rt.status_sub:
                if m == "GET":
                    return self._send(200, sim.get(rt, name, ns))
                if m == "PUT":
                    obj, _ = sim.update(rt, name, self._expect_json(body), ns=ns, subresource="status")
                    return self._send(200, obj)
                if m == "PATCH":
                    return self._send(200, self._patch(rt, ns, name, body, "status"))
                raise _method_not_allowed()
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if name is None:
            if m == "GET":
                if params.get("watch") in ("1", "true", "True"):
                    return self._watch(rt, ns, params, entry)
                return self._send(200, sim.list_json(rt, ns, params))
            if m == "POST":
                if rt.namespaced and ns is None:
                    raise _method_not_allowed()
                return self._send(201, sim.create(rt, self._expect_json(body), ns))
            if m == "DELETE":
                if rt.namespaced and ns is None:
                    raise _method_not_allowed()
                opts = self._json_body(body, allow_empty=True) or {}
                return self._send(200, sim.delete_collection(rt, ns, params, opts))
            raise _method_not_allowed()
        if m == "GET":
            if params.get("watch") in ("1", "true", "True"):
                fs = params.get("fieldSelector")
                params["fieldSelector"] = "metadata.name=%s" % name + ("," + fs if fs else "")
                return self._watch(rt, ns, params, entry)
            return self._send(200, sim.get(rt, name, ns))
        if m == "PUT":
            obj, created = sim.update(rt, name, self._expect_json(body), ns=ns)
            return self._send(201 if created else 200, obj)
        if m == "PATCH":
            return self._send(200, self._patch(rt, ns, name, body, None))
        if m == "DELETE":
            opts = self._json_body(body, allow_empty=True) or {}
            if not isinstance(opts, dict):
                raise ApiError(400, "DeleteOptions must be a JSON object", "BadRequest")
            if "gracePeriodSeconds" in params:
                try:
                    opts["gracePeriodSeconds"] = int(params["gracePeriodSeconds"])
                except ValueError:
                    raise ApiError(400, "invalid gracePeriodSeconds", "BadRequest")
            out, code = sim.delete(rt, name, ns, opts)
            return self._send(code, out)
        raise _method_not_allowed()

    def _service_proxy(self, ns, service, path, body):
        """Forward the remainder after /proxy (and the query) to the registered
        target; its status, type and body come back as they are."""
        target = self.server.sim.service_proxy_target(ns, service)
        prefix = "/api/v1/namespaces/%s/services/%s/proxy" % (ns, service)
        rest = path[len(prefix):] if path.startswith(prefix) else "/"
        query = urllib.parse.urlsplit(self.path).query
        url = urllib.parse.urlsplit(target)
        conn_cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        kw = {"context": ssl._create_unverified_context()} if url.scheme == "https" else {}
        conn = conn_cls(url.hostname, url.port, timeout=30, **kw)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() in ("content-type", "accept", "user-agent")}
        try:
            conn.request(self.command, (rest or "/") + ("?" + query if query else ""), body=body or None,
                         headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            why = "connect: connection refused" if isinstance(e, ConnectionRefusedError) else str(e)
            raise ApiError(503, "error trying to reach service: dial tcp %s:%s: %s" % (url.hostname, url.port, why),
                           "ServiceUnavailable")
        finally:
            conn.close()
        return self._send(resp.status, data, resp.getheader("Content-Type") or "text/plain")

    def _patch(self, rt, ns, name, body, sub):
        ct = self._content_type()
        ptype = PATCH_TYPES.get(ct)
        if ptype is None:
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types include: "
                                "application/json-patch+json, application/merge-patch+json, "
                                "application/apply-patch+yaml, application/strategic-merge-patch+json",
                           "UnsupportedMediaType")
        return self.server.sim.patch(rt, name, ptype, self._json_body(body), ns=ns, subresource=sub)

    # ---- watch ------------------------------------------------------------

    def _write_chunk(self, data):
        size = self.server.sim.settings["watch_chunk_size"]
        pieces = [data] if not size or size <= 0 else [data[i:i + size] for i in range(0, len(data), size)]
        for p in pieces:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(p), p))

    def _client_gone(self):
        conn = self.connection
        try:
            r, _, _ = select.select([conn], [], [], 0)
        except (OSError, ValueError):
            return True
        if not r:
            return False
        if isinstance(conn, ssl.SSLSocket):
            return True
        try:
            return conn.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _watch(self, rt, ns, params, entry):
        sim = self.server.sim
        filt = Filter(rt, ns, parse_label_selector(params.get("labelSelector")),
                      parse_field_selector(params.get("fieldSelector"), rt))
        rv = params.get("resourceVersion")
        bookmarks = params.get("allowWatchBookmarks") in ("1", "true", "True")
        try:
            timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds", "BadRequest")
        if not timeout or timeout < 0:  # absent or 0: the server's own limit
            timeout = sim.settings["default_watch_timeout"]
        deadline = time.monotonic() + timeout
        initial = []
        too_old = None
        w = Watcher(rt, filt, params, entry.get("user"))
        with sim.cond:
            if rv in (None, "", "0"):
                cursor = sim.rv
                initial = [o for k, o in sorted(sim._store(rt).items())
                           if filt.in_scope(o) and filt.matches(o)]
            else:
                try:
                    cursor = int(rv)
                    if cursor < 0:
                        raise ValueError
                except ValueError:
                    raise ApiError(400, "invalid resource version: %s" % rv, "BadRequest")
                if cursor < sim.compacted_rv:
                    too_old = "too old resource version: %d (%d)" % (cursor, sim.compacted_rv)
            sim.watchers.add(w)
            sim.cond.notify_all()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Audit-Id", str(uuid.uuid4()))
            self.send_header("Transfer-Encoding", "chunked")
            self._status = 200
            self._log_entry()
            self.end_headers()

            def send(typ, obj):
                self._write_chunk(dumps({"type": typ, "object": obj}))
                w.events_sent += 1

            def end():
                # unregister first: whoever sees the stream end sees the watch gone
                with sim.cond:
                    sim.watchers.discard(w)
                    sim.cond.notify_all()
                self.wfile.write(b"0\r\n\r\n")

            def expired(msg):
                send("ERROR", status_body(410, "Expired", msg))
                end()

            if too_old:
                expired(too_old)
                return
            pending = initial  # sent first, once no hold covers this resource
            interval = sim.settings["bookmark_interval"]
            next_bookmark = time.monotonic() + interval
            last_gone_check = 0.0
            while True:
                with sim.cond:
                    held = sim._held(rt)
                    evs = [] if held else sim._events_after(cursor)
                    if not evs and (held or not pending) and w.dropped is None:
                        now = time.monotonic()
                        wake = min(deadline, next_bookmark if bookmarks else deadline, now + 0.25)
                        if wake > now:
                            sim.cond.wait(wake - now)
                        held = sim._held(rt)
                        evs = [] if held else sim._events_after(cursor)
                    behind = not held and cursor < sim.trimmed_rv
                    dropped = w.dropped
                    cursor_before = cursor
                    if not held:  # a held watch stays where it is, to send what it missed later
                        cursor = max(cursor, sim.rv)  # a watch from a future RV starts after it
                if dropped == "abrupt":
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    self.close_connection = True
                    return
                if behind:
                    expired("too old resource version: %d (%d)" % (cursor_before, sim.trimmed_rv))
                    return
                if pending and not held:
                    for o in pending:
                        send("ADDED", o)
                    pending = []
                for ev in evs:
                    if ev.rt is not rt or not filt.in_scope(ev.obj):
                        continue
                    cur_pass = ev.type != "DELETED" and filt.matches(ev.obj)
                    old_pass = ev.prev is not None and filt.matches(ev.prev)
                    if cur_pass and not old_pass:
                        send("ADDED", ev.obj)
                    elif cur_pass and old_pass:
                        send("MODIFIED", ev.obj)
                    elif old_pass:
                        gone = deep(ev.prev)
                        gone["metadata"]["resourceVersion"] = str(ev.rv)
                        send("DELETED", gone)
                if dropped == "graceful":
                    end()
                    return
                if dropped == "expired":
                    expired("too old resource version: %d (%d)" % (cursor, cursor))
                    return
                now = time.monotonic()
                if bookmarks and now >= next_bookmark:
                    send("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version,
                                      "metadata": {"resourceVersion": str(cursor)}})
                    next_bookmark = now + sim.settings["bookmark_interval"]
                if now >= deadline:
                    end()
                    return
                if now - last_gone_check >= 0.2:
                    last_gone_check = now
                    if self._client_gone():
                        self.close_connection = True
                        return
        finally:
            with sim.cond:
                sim.watchers.discard(w)
                sim.cond.notify_all()

    # ---- control endpoint --------------------------------------------------

    def _control(self, path, params, body):
        sim = self.server.sim
        m = self.command
        try:
            if path == "/_sim/faults":
                if m == "GET":
                    return self._send(200, {"items": sim.active_faults()})
                if m == "DELETE":
                    sim.clear_faults()
                    return self._send(200, {"ok": True})
                if m == "POST":
                    ops = self._json_body(body)
                    results = [sim.control(op) for op in (ops if isinstance(ops, list) else [ops])]
                    return self._send(200, {"ok": True, "results": results})
            elif path == "/_sim/requests":
                if m == "GET":
                    since = int(params.get("since") or 0)
                    items = sim.requests(since)
                    return self._send(200, {"items": items, "last": sim.request_seq})
                if m == "DELETE":
                    sim.clear_requests()
                    return self._send(200, {"ok": True})
            elif path == "/_sim/reset" and m == "POST":
                sim.reset()
                return self._send(200, {"ok": True})
            elif path == "/_sim/watches" and m == "GET":
                with sim.cond:
                    items = [w.describe() for w in sim.watchers if w.dropped is None]
                return self._send(200, {"count": len(items), "items": items})
            elif path == "/_sim/objects":
                if m == "GET":
                    with sim.cond:
                        items = [deep(o) for rt in RESOURCE_TYPES for _, o in sorted(sim._store(rt).items())]
                        rv = sim.rv
                    return self._send(200, {"kind": "List", "apiVersion": "v1",
                                            "metadata": {"resourceVersion": str(rv)}, "items": items})
                if m == "POST":
                    data = self._json_body(body)
                    objs = _flatten_objects(data)
                    return self._send(200, {"items": [sim.upsert(o) for o in objs]})
            elif path == "/_sim/state" and m == "GET":
                with sim.cond:
                    return self._send(200, {"resourceVersion": str(sim.rv), "compactedResourceVersion": str(sim.compacted_rv),
                                            "up": sim.is_up, "tokens": len(sim.tokens), "watches": sim.watch_count(),
                                            "tlsErrors": list(sim.tls_errors), "settings": dict(sim.settings),
                                            "holds": sim.active_holds()})
            raise ApiError(404, "unknown control endpoint %s %s" % (m, path), "NotFound")
        except ApiError as e:
            self._send_error(e)


def _method_not_allowed():
    return ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")


def _api_group(group):
    gv = {"groupVersion": "%s/v1" % group, "version": "v1"}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def _resource_list(group, version):
    res = []
    for rt in RESOURCE_TYPES:
        if rt.group != group or rt.version != version:
            continue
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        res.append({"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                    "kind": rt.kind, "verbs": verbs, "shortNames": rt.short_names})
        if rt.status_sub:
            res.append({"name": rt.plural + "/status", "singularName": "", "namespaced": rt.namespaced,
                        "kind": rt.kind, "verbs": ["get", "patch", "update"]})
        if rt.plural == "pods":
            res.append({"name": "pods/binding", "singularName": "", "namespaced": True,
                        "kind": "Binding", "verbs": ["create"]})
    if group == "":
        res.append({"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding",
                    "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "%s/%s" % (group, version) if group else version, "resources": res}


def _route(segs):
    """Map path segments to (rt or 'bindings', namespace, name, subresource, watch_prefix)."""
    if segs[:2] == ["api", "v1"]:
        group, rest = "", segs[2:]
    elif len(segs) >= 3 and segs[0] == "apis" and (segs[1], segs[2]) in GROUP_VERSIONS:
        group, rest = segs[1], segs[3:]
    else:
        return None
    watch_prefix = False
    if rest and rest[0] == "watch":
        watch_prefix, rest = True, rest[1:]
    if not rest:
        return None
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        if group == "" and rest[2] == "bindings" and len(rest) == 3 and not watch_prefix:
            return ("bindings", rest[1], None, None, False)
        rt = BY_PLURAL.get((group, rest[2]))
        if rt is not None and rt.namespaced:
            ns, rest = rest[1], rest[2:]
    rt = BY_PLURAL.get((group, rest[0]))
    if rt is None or len(rest) > 3:
        return None
    if rt.namespaced and ns is None and len(rest) > 1:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if watch_prefix and sub is not None:
        return None
    return (rt, ns, name, sub, watch_prefix)


# --------------------------------------------------------------------------
# State files
# --------------------------------------------------------------------------


def _flatten_objects(data):
    if isinstance(data, list):
        out = []
        for d in data:
            out.extend(_flatten_objects(d))
        return out
    if isinstance(data, dict):
        kind = str(data.get("kind") or "")
        if isinstance(data.get("items"), list) and (kind == "" or kind.endswith("List")):
            out = []
            item_kind = kind[:-4] if kind.endswith("List") and kind != "List" else None
            for it in data.get("items") or []:
                if item_kind and isinstance(it, dict) and not it.get("kind"):
                    it = dict(it, kind=item_kind)
                out.extend(_flatten_objects(it))
            return out
        return [data]
    if data is None:
        return []
    raise ApiError(400, "state must be a kind: List, an object or an array of objects", "BadRequest")


def load_state(path):
    """Objects from a JSON file (kind: List, an object, or an array); YAML if PyYAML happens to be installed."""
    with open(path) as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml  # optional
        except ImportError:
            raise SystemExit("apisim: %s is YAML but PyYAML is not installed; use JSON" % path)
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        return _flatten_objects(docs)
    return _flatten_objects(json.loads(text))


# --------------------------------------------------------------------------
# Test helpers: PKI with the openssl CLI, a small client, a test runner
# --------------------------------------------------------------------------

_OPENSSL_CNF = """
[req]
distinguished_name = dn
prompt = no
[dn]
CN = apisim
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[server]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
[client]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
"""


def make_pki(directory):
    """Generate a CA, a server cert for 127.0.0.1, a client cert, and a rogue CA + client cert (openssl CLI)."""
    os.makedirs(directory, exist_ok=True)
    p = lambda n: os.path.join(directory, n)  # noqa: E731
    with open(p("openssl.cnf"), "w") as f:
        f.write(_OPENSSL_CNF)

    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def newkey(name):
        run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", p(name))

    def ca(name, cn):
        newkey(name + ".key")
        run("req", "-x509", "-new", "-config", p("openssl.cnf"), "-extensions", "v3_ca", "-key", p(name + ".key"),
            "-subj", "/CN=" + cn, "-days", "3", "-out", p(name + ".crt"))

    def leaf(name, cn, ca_name, ext, org=None):
        newkey(name + ".key")
        subj = "/CN=" + cn + ("/O=" + org if org else "")
        run("req", "-new", "-config", p("openssl.cnf"), "-key", p(name + ".key"), "-subj", subj, "-out", p(name + ".csr"))
        run("x509", "-req", "-in", p(name + ".csr"), "-CA", p(ca_name + ".crt"), "-CAkey", p(ca_name + ".key"),
            "-set_serial", str(random.randint(1, 2 ** 62)), "-days", "3", "-extfile", p("openssl.cnf"),
            "-extensions", ext, "-out", p(name + ".crt"))

    ca("ca", "apisim-ca")
    leaf("server", "127.0.0.1", "ca", "server")
    leaf("client", "gqa-client", "ca", "client", "system:masters")
    ca("rogue-ca", "rogue-ca")
    leaf("rogue-client", "rogue-client", "rogue-ca", "client")
    return {"ca": p("ca.crt"), "ca_key": p("ca.key"), "server_cert": p("server.crt"), "server_key": p("server.key"),
            "client_cert": p("client.crt"), "client_key": p("client.key"), "rogue_ca": p("rogue-ca.crt"),
            "rogue_client_cert": p("rogue-client.crt"), "rogue_client_key": p("rogue-client.key")}


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self):
        return json.loads(self.body.decode()) if self.body else None

    def __repr__(self):
        return "<Response %d %s>" % (self.status, self.body[:200])


class Client:
    """A minimal keep-alive HTTP(S) client for tests."""

    def __init__(self, url, token=None, ca=None, cert=None, key=None, timeout=10):
        u = urllib.parse.urlsplit(url)
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname, u.port
        self.token = token
        self.timeout = timeout
        self.ctx = None
        if self.https:
            self.ctx = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
            if cert:
                self.ctx.load_cert_chain(cert, key)
        self.conn = None

    def _connect(self):
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, content_type=None, headers=None, token=None, fresh=False):
        hdrs = {"Accept": "application/json"}
        tok = self.token if token is None else token
        if tok:
            hdrs["Authorization"] = "Bearer " + tok
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = content_type or "application/json"
        hdrs.update(headers or {})
        if fresh:
            self.close()
        if self.conn is None:
            self.conn = self._connect()
        try:
            self.conn.request(method, path, body=data, headers=hdrs)
            r = self.conn.getresponse()
            out = Response(r.status, dict(r.getheaders()), r.read())
        except Exception:
            self.close()
            raise
        if r.will_close:
            self.close()
        return out

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body, ptype="merge", **kw):
        ct = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json",
              "json": "application/json-patch+json"}.get(ptype, ptype)
        return self.request("PATCH", path, body, content_type=ct, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def watch(self, path, **params):
        """Open a watch on a new connection; returns a WatchStream."""
        params.setdefault("watch", "1")
        q = urllib.parse.urlencode(params)
        conn = self._connect()
        hdrs = {"Accept": "application/json"}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        conn.request("GET", path + ("&" if "?" in path else "?") + q, headers=hdrs)
        sock = conn.sock
        r = conn.getresponse()
        return WatchStream(conn, r, sock)


class WatchStream:
    def __init__(self, conn, resp, sock):
        self.conn = conn
        self.sock = sock
        self.resp = resp
        self.status = resp.status
        self.headers = dict(resp.getheaders())
        self.buf = b""
        self.ended = False

    def next(self, timeout=5.0):
        """Next event dict, or None when the stream ended (cleanly or not). Raises socket.timeout."""
        self.sock.settimeout(timeout)
        while b"\n" not in self.buf:
            try:
                chunk = self.resp.read1(65536) if hasattr(self.resp, "read1") else self.resp.read(1)
            except (http.client.IncompleteRead, ConnectionError, ssl.SSLError, OSError) as e:
                if isinstance(e, socket.timeout):
                    raise
                self.ended = "error"
                return None
            if not chunk:
                self.ended = "clean"
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def events(self, n, timeout=5.0):
        out = []
        for _ in range(n):
            ev = self.next(timeout)
            if ev is None:
                break
            out.append(ev)
        return out

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass


def test_args():
    """Parse (and ignore) the common CTest arguments --binary PATH --source-dir DIR."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary")
    ap.add_argument("--source-dir")
    ap.add_argument("-k", dest="only", help="run only tests whose name contains this")
    args, _ = ap.parse_known_args()
    return args


def run_tests(tests, only=None, cleanup=()):
    """Run test functions; print one line each and a final 'N passed, M failed'; exit accordingly.
    Directories in `cleanup` are removed before exiting."""
    passed = failed = 0
    t_all = time.time()
    for fn in tests:
        if only and only not in fn.__name__:
            continue
        t0 = time.time()
        try:
            fn()
        except Exception:
            failed += 1
            print("FAIL %s (%.2fs)" % (fn.__name__, time.time() - t0))
            traceback.print_exc(file=sys.stdout)
        else:
            passed += 1
            print("ok   %s (%.2fs)" % (fn.__name__, time.time() - t0))
        sys.stdout.flush()
    print("# %.1fs" % (time.time() - t_all))
    for d in cleanup:
        shutil.rmtree(d, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    sys.stdout.flush()
    os._exit(1 if failed else 0)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kubernetes API simulator for tests")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: pick one)")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca", help="accept client certificates signed by this CA")
    ap.add_argument("--require-client-cert", action="store_true", help="refuse TLS clients without a certificate")
    ap.add_argument("--token", action="append", default=[], help="a valid bearer token (repeatable)")
    ap.add_argument("--state", help="initial objects: JSON kind: List (or YAML if PyYAML is installed)")
    ap.add_argument("--control-port", type=int, help="also serve /_sim/ on this plain-HTTP port (stays up when the API is down)")
    ap.add_argument("--bookmark-interval", type=float, default=DEFAULT_SETTINGS["bookmark_interval"])
    ap.add_argument("--default-watch-timeout", type=float, default=DEFAULT_SETTINGS["default_watch_timeout"])
    ap.add_argument("--graceful-delete", action="store_true", help="deleting a bound pod sets deletionTimestamp")
    ap.add_argument("--require-namespaces", action="store_true",
                    help="creating an object in a namespace that has no Namespace object answers 404")
    ap.add_argument("--history", type=int, default=2000, help="watch history length (events)")
    ap.add_argument("--initial-rv", type=int, default=100)
    ap.add_argument("--down-at-start", type=float, default=0, help="stay down this many seconds (-1: until POST /_sim/faults op=up on the control port)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--kubeconfig-out", help="write a kubeconfig for this simulator (first --token, --client-ca's client cert not included)")
    ap.add_argument("--kubeconfig-ca", help="CA file to put into --kubeconfig-out")
    ap.add_argument("--gen-pki", metavar="DIR", help="generate test TLS material into DIR and exit")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    if args.gen_pki:
        print(json.dumps(make_pki(args.gen_pki), indent=1))
        return 0
    sim = APISim(port=args.port, tls_cert=args.tls_cert, tls_key=args.tls_key, client_ca=args.client_ca,
                 require_client_cert=args.require_client_cert, tokens=args.token, state=args.state,
                 history_size=args.history, initial_rv=args.initial_rv, control_port=args.control_port,
                 verbose=args.verbose, bookmark_interval=args.bookmark_interval,
                 default_watch_timeout=args.default_watch_timeout, graceful_delete=args.graceful_delete,
                 require_namespaces=args.require_namespaces)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    sim.start(down_seconds=args.down_at_start or None)
    if args.kubeconfig_out:
        sim.write_kubeconfig(args.kubeconfig_out, token=args.token[0] if args.token else None, ca_file=args.kubeconfig_ca)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % sim.port)
        os.replace(tmp, args.port_file)
    print("apisim: listening on %s%s" % (sim.url, "" if sim.is_up else " (down at start)"), flush=True)
    if args.control_port is not None:
        print("apisim: control on %s" % sim.control_url, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
