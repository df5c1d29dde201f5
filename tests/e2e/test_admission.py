#!/usr/bin/env python3
"""CustomResourceLimitations end to end (design.md section 7, issue 5):

  - `validate-crl FILE...`: the reference CRLs (cf-crl-gpu-manager-vcuda-core
    and -vcuda-memory) are valid (exit 0); each tests/fixtures/crl/invalid-*
    ConfigMap breaks one rule and gets exactly one line "FILE: NAME: MESSAGE"
    with exit 1; the duplicate-key rule across files;
  - POST /admission/validate for ConfigMaps: the same verdicts as
    AdmissionReview v1 round trips (uid echoed, allowed, status.code 422 and
    the rule's message when denied);
  - POST /admission/validate and /admission/mutate for pods: violations denied
    (403) with the CRL's name and rule; the mutate patch (base64 RFC 6902
    JSON patch), applied here by a small applier, gives the expected pod;
  - malformed reviews: 400 with a JSON error, the server keeps serving;
  - the filter enforces every rule (every node failed, the reason naming the
    CRL and the rule), and the defaults count in the occupancy;
  - /inspect/crl lists the enabled CRLs and the invalid ones with problems;
  - live mode: CRLs created, changed and deleted in the API simulator apply
    to the next request.

Standalone: python3 test_admission.py --binary PATH --source-dir REPO
"""

import base64
import copy
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("admission")

CORE = "tencent.com/vcuda-core"
MEM = "tencent.com/vcuda-memory"
MPS_CORE = "nvidia.com/mps-core"
MPS_MEM = "nvidia.com/mps-memory"
FPGA = "example.com/fpga"

REF_CORE = "cf-crl-gpu-manager-vcuda-core"
REF_MEM = "cf-crl-gpu-manager-vcuda-memory"

# Every fixture breaking one rule of the reference CRL: (file, the ConfigMap's
# name, the exact message of that rule).
RULES = [
    ("invalid-namespace.yaml", REF_CORE,
     'metadata.namespace: "default" is not the CRL namespace "kube-public"'),
    ("invalid-name-prefix.yaml", "gpu-manager-vcuda-core",
     'metadata.name: "gpu-manager-vcuda-core" does not match cf-crl-<customName>-<keyName>'),
    ("invalid-name-keyname.yaml", "cf-crl-gpu-manager-vcuda-cores",
     'metadata.name: "cf-crl-gpu-manager-vcuda-cores" does not end in "-vcuda-core", the keyName of data.key '
     '"tencent.com/vcuda-core"'),
    ("invalid-name-custom-empty.yaml", "cf-crl-vcuda-core",
     'metadata.name: "cf-crl-vcuda-core" has an empty customName (expected cf-crl-<customName>-vcuda-core)'),
    ("invalid-label-type-missing.yaml", REF_CORE,
     'label features.alauda.io/type: missing (must be "CustomResourceLimitation")'),
    ("invalid-label-type.yaml", REF_CORE,
     'label features.alauda.io/type: "ResourceLimitation" is not "CustomResourceLimitation"'),
    ("invalid-label-group-missing.yaml", REF_CORE, "label features.alauda.io/group: missing"),
    ("invalid-label-group-empty.yaml", REF_CORE, "label features.alauda.io/group: must not be empty"),
    ("invalid-label-enabled-missing.yaml", REF_CORE,
     'label features.alauda.io/enabled: missing (must be "true" or "false")'),
    ("invalid-label-enabled.yaml", REF_CORE, 'label features.alauda.io/enabled: "yes" is not "true" or "false"'),
    ("invalid-group-mismatch.yaml", REF_CORE,
     'data.group: "gpu" differs from label features.alauda.io/group "gpu-manager"'),
    ("invalid-key.yaml", REF_CORE,
     'data.key: "vcuda-core" is not a valid extended resource name: it has no domain prefix (as in '
     'example.com/name), so it names a native resource'),
    ("invalid-key-native.yaml", REF_CORE,
     'data.key: "gpu.kubernetes.io/vcuda-core" is not a valid extended resource name: names in the kubernetes.io/ '
     'domain are native resources'),
    ("invalid-datatype.yaml", REF_CORE, 'data.dataType: "float" is not one of integer'),
    ("invalid-limits.yaml", REF_CORE, 'data.limits: "sometimes" is not one of disabled, required, optional'),
    ("invalid-requests.yaml", REF_CORE, 'data.requests: "always" is not one of disabled, required, fromLimits'),
    ("invalid-default-fraction.yaml", REF_CORE,
     'data.defaultValue: "1.5" is not an integer quantity: quantity is not a whole number'),
    ("invalid-default-empty.yaml", REF_CORE,
     "data.defaultValue: empty, but limits: optional needs a default (containers without the key take it)"),
    ("invalid-not-string.yaml", REF_CORE, "data.defaultValue: must be a string, not a number"),
    ("invalid-disabled-fromlimits.yaml", REF_CORE,
     'data.limits "disabled" with data.requests "fromLimits": requests cannot come from disabled limits'),
]

RULE_MSG = {f: m for f, _n, m in RULES}

DUPLICATE_MSG = ("a second enabled CRL for key tencent.com/vcuda-core: cf-crl-gpu-manager-vcuda-core "
                 "already has it")


# ---------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------

def fixture(name):
    return suite.path("tests", "fixtures", "crl", name)


def _scalar(text):
    if text.startswith('"'):
        return json.loads(text)
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    return text


def load_fixture(name):
    """A fixture as JSON. The YAML ones use only nested maps of scalars (plain,
    double-quoted or bare integers), which this reads; anything else is an
    error, so a fixture that outgrows it cannot be misread silently."""
    path = fixture(name)
    if name.endswith(".json"):
        with open(path) as f:
            return json.load(f)
    root = {}
    stack = [(-1, root)]
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            indent = len(line) - len(line.lstrip(" "))
            m = re.fullmatch(r"([A-Za-z0-9_./-]+):(?: (.*))?", line.strip())
            if not m:
                raise ValueError("%s: cannot read line %r" % (path, line))
            while stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1]
            if m.group(2) is None or m.group(2) == "":
                child = {}
                parent[m.group(1)] = child
                stack.append((indent, child))
            else:
                parent[m.group(1)] = _scalar(m.group(2).strip())
    return root


def crl(name, key, limits, requests, default="", group="test", enabled="true", namespace="kube-public",
        data_type="integer"):
    """A CRL ConfigMap (group label and data.group alike)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"features.alauda.io/type": "CustomResourceLimitation",
                                    "features.alauda.io/group": group,
                                    "features.alauda.io/enabled": enabled}},
            "data": {"key": key, "dataType": data_type, "defaultValue": default, "descriptionZh": "",
                     "descriptionEn": "test", "group": group, "limits": limits, "requests": requests}}


def reference_crls(memory_default="4"):
    core = load_fixture("valid-vcuda-core.yaml")
    mem = load_fixture("valid-vcuda-memory.yaml")
    mem["data"]["defaultValue"] = memory_default
    return [core, mem]


# The enforcement state: the reference group, plus
#   mps:  mps-core limits required / requests fromLimits,
#         mps-memory limits required / requests required;
#   fpga: example.com/fpga limits disabled / requests required;
# and CRLs that must not be enforced: a disabled one and an invalid one.
def enforcement_crls():
    return reference_crls() + [
        crl("cf-crl-mps-mps-core", MPS_CORE, "required", "fromLimits", group="mps"),
        crl("cf-crl-mps-mps-memory", MPS_MEM, "required", "required", group="mps"),
        crl("cf-crl-fpga-fpga", FPGA, "disabled", "required", group="fpga"),
        crl("cf-crl-off-widget", "example.com/widget", "disabled", "disabled", group="off", enabled="false"),
        crl("cf-crl-broken-thing", "example.com/thing", "required", "required", group="broken", data_type="float"),
    ]


def ctr(name, limits=None, requests=None, drop_resources=False):
    c = {"name": name, "image": "registry.example.com/%s:1" % name}
    if not drop_resources:
        res = {}
        if limits is not None:
            res["limits"] = {k: str(v) for k, v in limits.items()}
        if requests is not None:
            res["requests"] = {k: str(v) for k, v in requests.items()}
        c["resources"] = res
    return c


def mkpod(name, containers, namespace="default"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": "%s-0000-4000-8000-000000000001" % name},
            "spec": {"containers": containers}, "status": {"phase": "Pending"}}


def review(obj, kind=None, operation="CREATE", uid="uid-1", namespace=None, old=None):
    kind = kind or obj.get("kind")
    meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
    plural = {"Pod": "pods", "ConfigMap": "configmaps"}.get(kind, kind.lower() + "s")
    req = {"uid": uid, "kind": {"group": "", "version": "v1", "kind": kind},
           "resource": {"group": "", "version": "v1", "resource": plural},
           "requestKind": {"group": "", "version": "v1", "kind": kind},
           "requestResource": {"group": "", "version": "v1", "resource": plural},
           "name": meta.get("name", ""), "namespace": namespace or meta.get("namespace", "default"),
           "operation": operation,
           "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
           "object": obj if operation in ("CREATE", "UPDATE") else None,
           "oldObject": old, "dryRun": False,
           "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


# ---------------------------------------------------------------------------
# AdmissionReview responses and JSON patches
# ---------------------------------------------------------------------------

def post_review(s, srv, path, body, what):
    r = srv.post(path, body)
    s.require(r.status == 200, "%s: %s answers 200" % (what, path), r)
    s.check_eq(r.header("content-type"), "application/json", "%s: the answer is JSON" % what)
    out = r.json()
    s.check_eq((out.get("apiVersion"), out.get("kind")), ("admission.k8s.io/v1", "AdmissionReview"),
               "%s: the answer is an admission.k8s.io/v1 AdmissionReview" % what, out)
    s.require(isinstance(out.get("response"), dict), "%s: the answer has a response" % what, out)
    return out["response"]


def expect_allowed(s, srv, path, body, what, uid="uid-1"):
    resp = post_review(s, srv, path, body, what)
    s.check_eq(resp.get("uid"), uid, "%s: the uid is echoed" % what)
    s.check(resp.get("allowed") is True, "%s: allowed" % what, resp)
    s.check_eq((resp.get("status") or {}).get("code"), 200, "%s: status.code 200" % what, resp)
    return resp


def expect_denied(s, srv, path, body, code, what, uid="uid-1"):
    resp = post_review(s, srv, path, body, what)
    s.check_eq(resp.get("uid"), uid, "%s: the uid is echoed" % what)
    s.check(resp.get("allowed") is False, "%s: denied" % what, resp)
    s.check_eq((resp.get("status") or {}).get("code"), code, "%s: status.code %d" % (what, code), resp)
    s.check("patch" not in resp and "patchType" not in resp, "%s: a denial carries no patch" % what, resp)
    return (resp.get("status") or {}).get("message")


def decode_patch(s, resp, what):
    s.check_eq(resp.get("patchType"), "JSONPatch", "%s: patchType JSONPatch" % what, resp)
    text = resp.get("patch")
    s.require(isinstance(text, str), "%s: a patch is given" % what, resp)
    s.check(re.fullmatch(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?", text) is not None,
            "%s: the patch is standard, padded base64" % what, text)
    ops = json.loads(base64.b64decode(text, validate=True).decode("utf-8"))
    s.require(isinstance(ops, list) and ops, "%s: the patch is a non-empty JSON array" % what, ops)
    return ops


class PatchError(Exception):
    pass


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("path %r does not start with /" % path)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _walk(doc, tokens):
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError("no member %r" % t)
            cur = cur[t]
        elif isinstance(cur, list):
            if not re.fullmatch(r"0|[1-9][0-9]*", t) or int(t) >= len(cur):
                raise PatchError("no index %r" % t)
            cur = cur[int(t)]
        else:
            raise PatchError("cannot descend into a scalar at %r" % t)
    return cur


def _add(doc, tokens, value):
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif re.fullmatch(r"0|[1-9][0-9]*", last) and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError("bad array index %r" % last)
    else:
        raise PatchError("the parent of %r is a scalar" % last)
    return doc


def _remove(doc, tokens):
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError("no member %r to remove" % last)
        return parent.pop(last)
    if isinstance(parent, list) and re.fullmatch(r"0|[1-9][0-9]*", last) and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError("nothing to remove at %r" % last)


def apply_json_patch(doc, ops):
    """RFC 6902: add, remove, replace, move, copy, test. Raises PatchError."""
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("malformed operation %r" % (op,))
        kind, tokens = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError("%s without a value" % kind)
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind == "replace":
            _walk(doc, tokens)
            if tokens:
                _remove(doc, tokens)
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            src = _pointer(op["from"])
            value = copy.deepcopy(_walk(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, tokens, value)
        elif kind == "test":
            if _walk(doc, tokens) != op["value"]:
                raise PatchError("test failed at %r" % op["path"])
        else:
            raise PatchError("unknown op %r" % kind)
    return doc


def all_failed(s, res, names, want, what):
    """Every node failed with exactly the reason want (a string, or a set of '; '-joined parts)."""
    s.check_eq(res.get("NodeNames") or [], [], "%s: no node passes" % what, res)
    s.check(not res.get("Error"), "%s: no Error (the pod is answered per node)" % what, res)
    for n in names:
        got = g.failed_reason(res, n)
        if isinstance(want, set):
            s.check(got is not None and set(got.split("; ")) == want,
                    "%s: node %s failed with the CRL violations" % (what, n),
                    "got %r\nwant the parts %r" % (got, sorted(want)))
        else:
            s.check_eq(got, want, "%s: node %s failed with the CRL violation" % (what, n))


# ---------------------------------------------------------------------------
# validate-crl
# ---------------------------------------------------------------------------

def summary_ok(run, checked, valid):
    return "%d CustomResourceLimitation(s) checked, %s" % (checked, "all valid" if valid else "some invalid") \
        in run.err


@suite.test
def test_fixture_reader(s):
    """The tiny YAML reader above reads the reference fixtures as the JSON fixture has them."""
    group = load_fixture("valid-group-gpu-manager.json")["items"]
    s.check_eq(load_fixture("valid-vcuda-core.yaml"), group[0], "valid-vcuda-core.yaml reads as the JSON fixture")
    s.check_eq(load_fixture("valid-vcuda-memory.yaml"), group[1], "valid-vcuda-memory.yaml reads as the JSON fixture")
    s.check_eq(load_fixture("invalid-not-string.yaml")["data"]["defaultValue"], 20, "a bare 20 reads as a number")
    s.check_eq(load_fixture("invalid-label-group-empty.yaml")["metadata"]["labels"]["features.alauda.io/group"],
               "", '"" reads as an empty string')


@suite.test
def test_validate_crl_reference(s):
    core, mem = fixture("valid-vcuda-core.yaml"), fixture("valid-vcuda-memory.yaml")
    ref = load_fixture("valid-vcuda-core.yaml")
    s.check_eq((ref["metadata"]["name"], ref["data"]["key"], ref["data"]["dataType"], ref["data"]["defaultValue"],
                ref["data"]["limits"], ref["data"]["requests"]),
               (REF_CORE, CORE, "integer", "20", "optional", "disabled"),
               "the fixture is the documented reference CRL")
    for files, n in (([core], 1), ([mem], 1), ([core, mem], 2), ([fixture("valid-group-gpu-manager.json")], 2),
                     ([core, fixture("valid-disabled-vcuda-core.yaml")], 2)):
        r = g.run_binary(s, ["validate-crl"] + files)
        what = "validate-crl " + " ".join(os.path.basename(f) for f in files)
        s.check_eq(r.code, 0, "%s exits 0" % what, r)
        s.check_eq(r.out, "", "%s prints no problem" % what, r)
        s.check(summary_ok(r, n, True), "%s: the summary counts %d valid CRL(s)" % (what, n), r)


@suite.test
def test_validate_crl_one_rule_each(s):
    seen = set()
    for name, cm_name, msg in RULES:
        path = fixture(name)
        seen.add(name)
        r = g.run_binary(s, ["validate-crl", path])
        s.check_eq(r.code, 1, "validate-crl %s exits 1" % name, r)
        s.check_eq(r.out, "%s: %s: %s\n" % (path, cm_name, msg), "validate-crl %s: exactly the rule's line" % name)
        s.check(summary_ok(r, 1, False), "validate-crl %s: the summary says some invalid" % name, r)
    listed = {f for f in os.listdir(suite.path("tests", "fixtures", "crl")) if f.startswith("invalid-")}
    s.check_eq(sorted(listed - seen), [], "every invalid-* fixture has its expected message here")

    # All of them at once: one line per file, in order; the valid ones add nothing.
    files = [fixture("valid-vcuda-memory.yaml")] + [fixture(n) for n, _, _ in RULES]
    r = g.run_binary(s, ["validate-crl"] + files)
    s.check_eq(r.code, 1, "validate-crl on all fixtures exits 1", r)
    s.check_eq(r.out.splitlines(), ["%s: %s: %s" % (fixture(n), c, m) for n, c, m in RULES],
               "validate-crl on all fixtures: one line per invalid file, in order")


@suite.test
def test_validate_crl_duplicate_and_more(s):
    core, dup = fixture("valid-vcuda-core.yaml"), fixture("duplicate-vcuda-core.yaml")
    r = g.run_binary(s, ["validate-crl", dup])
    s.check_eq(r.code, 0, "the duplicate on its own is valid", r)
    for files in ([core, dup], [dup, core]):
        r = g.run_binary(s, ["validate-crl"] + files)
        s.check_eq(r.code, 1, "two enabled CRLs for one key: exit 1 (%s first)" % os.path.basename(files[0]), r)
        s.check_eq(r.out, "%s: cf-crl-other-vcuda-core: %s\n" % (dup, DUPLICATE_MSG),
                   "the second by name (cf-crl-other-) is the duplicate, whatever the file order")

    # Several documents in one YAML file: each is judged.
    with open(fixture("valid-vcuda-memory.yaml")) as f:
        a = f.read()
    with open(fixture("invalid-requests.yaml")) as f:
        b = f.read()
    multi = g.write_file(s, "multi.yaml", a + "---\n" + b)
    r = g.run_binary(s, ["validate-crl", multi])
    s.check_eq((r.code, r.out), (1, "%s: %s: %s\n" % (multi, REF_CORE, RULE_MSG["invalid-requests.yaml"])),
               "a multi-document YAML file: the invalid document is reported", r)

    # keyName: the part after the last '/', every character outside [a-z0-9-] as '-'.
    odd = crl("cf-crl-team--y-----v2", "example.com/My_GPU.v2", "optional", "disabled", default="1", group="team")
    wrong = crl("cf-crl-team-my-gpu-v2", "example.com/My_GPU.v2", "optional", "disabled", default="1", group="team")
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info", "namespace": "kube-public"},
             "data": {"kubeconfig": "x"}}
    p = g.write_file(s, "odd.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [odd, plain]}))
    r = g.run_binary(s, ["validate-crl", p])
    s.check_eq((r.code, r.out), (0, ""), "keyName of example.com/My_GPU.v2 is -y-----v2", r)
    s.check(summary_ok(r, 1, True), "a ConfigMap that is no CRL is not checked", r)
    p = g.write_file(s, "wrong.json", json.dumps(wrong))
    r = g.run_binary(s, ["validate-crl", p])
    s.check_eq((r.code, r.out),
               (1, '%s: cf-crl-team-my-gpu-v2: metadata.name: "cf-crl-team-my-gpu-v2" does not end in "--y-----v2", '
                   'the keyName of data.key "example.com/My_GPU.v2"\n' % p),
               "a name made with a lower-cased keyName is refused", r)

    # --crl-namespace: the CRL namespace of the check.
    r = g.run_binary(s, ["validate-crl", "--crl-namespace", "default", fixture("invalid-namespace.yaml")])
    s.check_eq((r.code, r.out), (0, ""), "invalid-namespace.yaml is valid with --crl-namespace default", r)
    r = g.run_binary(s, ["validate-crl", "--crl-namespace=gpu-crl", core])
    s.check_eq((r.code, r.out),
               (1, '%s: %s: metadata.namespace: "kube-public" is not the CRL namespace "gpu-crl"\n' % (core, REF_CORE)),
               "--crl-namespace=gpu-crl: the reference CRL is in the wrong namespace", r)

    # Usage errors: not a verdict on CRLs.
    r = g.run_binary(s, ["validate-crl"])
    s.check(r.code not in (0, 1), "validate-crl without files is a usage error", r)
    r = g.run_binary(s, ["validate-crl", fixture("no-such-file.yaml")])
    s.check(r.code not in (0, 1) and "no-such-file.yaml" in r.err, "a missing file is an error naming it", r)
    bad = g.write_file(s, "bad.yaml", "a: [unclosed\n")
    r = g.run_binary(s, ["validate-crl", bad])
    s.check(r.code != 0 and "bad.yaml" in r.err, "an unparsable file is an error naming it", r)


@suite.test
def test_validate_crl_kind(s):
    """A CRL is a v1 ConfigMap: the reference CRL's body under any other kind
    or apiVersion is refused with a clear line and exit 1, and such an object
    never takes a key away from a real CRL."""
    ref = load_fixture("valid-vcuda-core.yaml")
    for what, kind, api in (("a Secret", "Secret", "v1"), ("apps/v1 ConfigMap", "ConfigMap", "apps/v1"),
                            ("a Deployment", "Deployment", "apps/v1"), ("no kind", None, "v1"),
                            ("no apiVersion", "ConfigMap", None), ("kind in lower case", "configmap", "v1")):
        obj = json.loads(json.dumps(ref))
        for field, value in (("kind", kind), ("apiVersion", api)):
            if value is None:
                obj.pop(field, None)
            else:
                obj[field] = value
        p = g.write_file(s, "kind.json", json.dumps(obj))
        r = g.run_binary(s, ["validate-crl", p])
        s.check_eq(r.code, 1, "validate-crl on %s exits 1" % what, r)
        want = '%s: %s: kind %s, apiVersion %s: a CustomResourceLimitation must be a ConfigMap of apiVersion v1\n' % (
            p, REF_CORE, '"%s"' % kind if kind else "missing", '"%s"' % api if api else "missing")
        s.check_eq(r.out, want, "validate-crl on %s: one line naming the kind and apiVersion" % what)
        s.check(summary_ok(r, 1, False), "validate-crl on %s: the summary says some invalid" % what, r)
    # A Secret next to the real CRL: only the Secret is reported; it holds no
    # key, so the ConfigMap is no duplicate of it.
    secret = json.loads(json.dumps(ref))
    secret["kind"] = "Secret"
    p = g.write_file(s, "mixed.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [secret, ref]}))
    r = g.run_binary(s, ["validate-crl", p])
    s.check_eq((r.code, r.out.count("\n"), r.out.split(": ")[2:3]), (1, 1, ["kind \"Secret\", apiVersion \"v1\""]),
               "a Secret beside the real CRL: exit 1, one line, for the Secret", r)
    s.check(summary_ok(r, 2, False), "both objects were checked", r)
    r = g.run_binary(s, ["validate-crl", fixture("valid-vcuda-core.yaml")])
    s.check_eq((r.code, r.out), (0, ""), "the reference CRL itself still passes", r)


# ---------------------------------------------------------------------------
# The validating webhook: ConfigMaps
# ---------------------------------------------------------------------------

@suite.test
def test_webhook_configmaps(s):
    # No CRL in the cluster: each fixture is judged on its own rules only.
    with g.Server(s, g.write_state(s, [g.node("n1", g.vcuda(400, 256))])) as srv:
        for i, cm in enumerate(reference_crls()):
            uid = "ref-%d" % i
            resp = expect_allowed(s, srv, "/admission/validate", review(cm, uid=uid),
                                  "reference %s" % cm["metadata"]["name"], uid=uid)
            s.check("message" not in resp.get("status", {}), "an allowed CRL carries no message", resp)
            expect_allowed(s, srv, "/admission/validate", review(cm, operation="UPDATE", uid=uid, old=cm),
                           "reference %s (UPDATE)" % cm["metadata"]["name"], uid=uid)
        for i, (name, _cm_name, msg) in enumerate(RULES):
            cm = load_fixture(name)
            uid = "7d3e-%04d" % i
            got = expect_denied(s, srv, "/admission/validate", review(cm, uid=uid), 422, name, uid=uid)
            s.check_eq(got, msg, "%s: status.message is the rule's message" % name)
            got = expect_denied(s, srv, "/admission/validate", review(cm, operation="UPDATE", uid=uid), 422,
                                name + " (UPDATE)", uid=uid)
            s.check_eq(got, msg, "%s (UPDATE): status.message is the rule's message" % name)

        # Several problems in one ConfigMap: every message, joined.
        cm = load_fixture("invalid-limits.yaml")
        cm["data"]["dataType"] = "float"
        cm["metadata"]["labels"]["features.alauda.io/enabled"] = "yes"
        got = expect_denied(s, srv, "/admission/validate", review(cm), 422, "three broken rules")
        s.check_eq(set((got or "").split("; ")),
                   {'label features.alauda.io/enabled: "yes" is not "true" or "false"',
                    'data.dataType: "float" is not one of integer',
                    'data.limits: "sometimes" is not one of disabled, required, optional'},
                   "three broken rules: three messages", got)

        # Not this webhook's business: ConfigMaps that are no CRL, deletions.
        plain = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": {"a": "b"}}
        expect_allowed(s, srv, "/admission/validate", review(plain), "a plain kube-public ConfigMap")
        quota = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-quota", "namespace": "kube-system"},
                 "data": {"gpu_quota": "{}"}}
        expect_allowed(s, srv, "/admission/validate", review(quota), "the quota ConfigMap")
        expect_allowed(s, srv, "/admission/validate", review(load_fixture("invalid-limits.yaml"), operation="DELETE"),
                       "DELETE of an invalid CRL")

    # With the reference CRLs enabled: the duplicate-key rule.
    with g.Server(s, g.write_state(s, reference_crls())) as srv:
        got = expect_denied(s, srv, "/admission/validate", review(load_fixture("duplicate-vcuda-core.yaml")), 422,
                            "a second enabled CRL for vcuda-core")
        s.check_eq(got, DUPLICATE_MSG, "the duplicate is refused naming the key and the holder")
        core = reference_crls()[0]
        core["data"]["defaultValue"] = "30"
        expect_allowed(s, srv, "/admission/validate", review(core, operation="UPDATE"),
                       "an UPDATE of the holder itself")
        expect_allowed(s, srv, "/admission/validate", review(load_fixture("valid-disabled-vcuda-core.yaml")),
                       "a disabled CRL for the same key")
        # The duplicate rule is judged even when others fail.
        got = expect_denied(s, srv, "/admission/validate", review(load_fixture("invalid-name-keyname.yaml")), 422,
                            "a wrong name and a taken key")
        s.check_eq(set((got or "").split("; ")), {RULE_MSG["invalid-name-keyname.yaml"], DUPLICATE_MSG},
                   "a wrong name and a taken key: both messages", got)


# ---------------------------------------------------------------------------
# Pods: the validating webhook and the filter, one table of violations
# ---------------------------------------------------------------------------

def msg_required_limit(c, key, crl_name):
    return 'container "%s": %s is required in limits by CustomResourceLimitation %s (limits: required)' % (
        c, key, crl_name)


def msg_disabled_limit(c, key, crl_name):
    return 'container "%s": %s is not allowed in limits by CustomResourceLimitation %s (limits: disabled)' % (
        c, key, crl_name)


def msg_required_request(c, key, crl_name):
    return 'container "%s": %s is required in requests by CustomResourceLimitation %s (requests: required)' % (
        c, key, crl_name)


def msg_request_differs(c, key, req, lim, crl_name, rule, default=False):
    return ('container "%s": %s request "%s" differs from its %slimit "%s", which CustomResourceLimitation %s '
            'forbids (requests: %s)' % (c, key, req, "default " if default else "", lim, crl_name, rule))


VIOLATIONS = [
    ("limits-required",
     [ctr("main", {MPS_MEM: 4}, {MPS_MEM: 4})],
     msg_required_limit("main", MPS_CORE, "cf-crl-mps-mps-core")),
    ("limits-disabled",
     [ctr("main", {FPGA: 1}, {FPGA: 1})],
     msg_disabled_limit("main", FPGA, "cf-crl-fpga-fpga")),
    ("requests-required",
     [ctr("main", {MPS_CORE: 25, MPS_MEM: 4})],
     msg_required_request("main", MPS_MEM, "cf-crl-mps-mps-memory")),
    ("requests-fromlimits",
     [ctr("main", {MPS_CORE: 25, MPS_MEM: 4}, {MPS_CORE: 20, MPS_MEM: 4})],
     msg_request_differs("main", MPS_CORE, "20", "25", "cf-crl-mps-mps-core", "fromLimits")),
    ("requests-disabled",
     [ctr("main", {CORE: 30, MEM: 8}, {CORE: 10, MEM: 8})],
     msg_request_differs("main", CORE, "10", "30", REF_CORE, "disabled")),
    ("requests-disabled-default",
     [ctr("main", {CORE: 30}, {CORE: 30, MEM: 8})],
     msg_request_differs("main", MEM, "8", "4", REF_MEM, "disabled", default=True)),
    ("several",
     [ctr("trainer", {MPS_MEM: 4}), ctr("sidecar", {"cpu": "100m", FPGA: 1}, {FPGA: 1})],
     {msg_required_limit("trainer", MPS_CORE, "cf-crl-mps-mps-core"),
      msg_required_request("trainer", MPS_MEM, "cf-crl-mps-mps-memory"),
      msg_disabled_limit("sidecar", FPGA, "cf-crl-fpga-fpga")}),
]

COMPLIANT = [
    ("vcuda-full", [ctr("main", {CORE: 30, MEM: 8})]),
    ("vcuda-requests-equal", [ctr("main", {CORE: 30, MEM: 8}, {CORE: 30, MEM: 8})]),
    ("vcuda-no-memory", [ctr("main", {CORE: 30})]),
    ("vcuda-default-request", [ctr("main", {CORE: 30}, {MEM: 4})]),
    ("mps-full", [ctr("main", {MPS_CORE: 25, MPS_MEM: 4}, {MPS_CORE: 25, MPS_MEM: 4})]),
    ("mps-same-quantity", [ctr("main", {MPS_CORE: 25, MPS_MEM: 4}, {MPS_CORE: "25000m", MPS_MEM: 4})]),
    ("fpga-requests-only", [ctr("main", None, {FPGA: 1})]),
    ("cpu-only", [ctr("main", {"cpu": "1", "memory": "1Gi"})]),
    ("no-resources", [ctr("main", drop_resources=True)]),
    ("disabled-crl-ignored", [ctr("main", {"example.com/widget": 1})]),
    ("invalid-crl-ignored", [ctr("main", {"example.com/thing": 1})]),
]

ENFORCE_NODES = ["vcuda-0", "mps-0", "cpu-0"]


def enforcement_state(s):
    return g.write_state(s, [g.node("vcuda-0", g.vcuda(400, 256)), g.node("mps-0", g.mps(400, 64)),
                             g.node("cpu-0", {})] + enforcement_crls())


@suite.test
def test_pod_violations_webhook_and_filter(s):
    with g.Server(s, enforcement_state(s)) as srv:
        for name, containers, want in VIOLATIONS:
            p = mkpod(name, containers)
            uid = "pod-%s" % name
            got = expect_denied(s, srv, "/admission/validate", review(p, uid=uid), 403, "validate " + name, uid=uid)
            if isinstance(want, set):
                s.check_eq(set((got or "").split("; ")), want, "validate %s: every violation" % name, got)
            else:
                s.check_eq(got, want, "validate %s: the CRL's name and rule" % name)
            got = expect_denied(s, srv, "/admission/validate", review(p, operation="UPDATE", uid=uid), 403,
                                "validate %s (UPDATE)" % name, uid=uid)
            # The filter holds the pod to the same CRLs (a cluster may run without the webhooks).
            res = srv.filter(p, ENFORCE_NODES)
            all_failed(s, res, ENFORCE_NODES, want, "filter " + name)
            # The Nodes form too.
            res = srv.post_json("/scheduler/filter", {"Pod": p, "Nodes": {"items": [
                {"metadata": {"name": n}} for n in ENFORCE_NODES]}})
            s.check_eq([n["metadata"]["name"] for n in ((res.get("Nodes") or {}).get("items") or [])], [],
                       "filter %s (Nodes form): no node passes" % name, res)
            for n in ENFORCE_NODES:
                s.check(g.failed_reason(res, n), "filter %s (Nodes form): %s failed with a reason" % (name, n), res)
            # Explain says the same, and the mutating webhook does not refuse (it only adds).
            ex = srv.explain(p)
            s.check(all(not n["fits"] for n in ex.get("nodes", [])), "explain %s: fits nowhere" % name, ex)
            expect_allowed(s, srv, "/admission/mutate", review(p), "mutate " + name)

        for name, containers in COMPLIANT:
            p = mkpod(name, containers)
            resp = expect_allowed(s, srv, "/admission/validate", review(p), "validate " + name)
            s.check("message" not in resp.get("status", {}), "validate %s: no message" % name, resp)
            res = srv.post_json("/inspect/explain", p)
            s.check(any(n["fits"] for n in res.get("nodes", [])), "explain %s: fits somewhere" % name, res)

        # Deleting a pod is never refused; a Pod review in any namespace is judged.
        bad = mkpod("bad", VIOLATIONS[1][1], namespace="team-x")
        expect_allowed(s, srv, "/admission/validate", review(bad, operation="DELETE"), "DELETE of a violating pod")
        expect_denied(s, srv, "/admission/validate", review(bad), 403, "a violating pod in team-x")


@suite.test
def test_pod_webhooks_over_https(s):
    tls = g.TLSMaterial(s.tempdir("tls"))
    with g.Server(s, enforcement_state(s), https=True, tls=tls) as srv:
        ctx = tls.client_context()
        for path in ("/admission/validate", "/admission/mutate"):
            ok = mkpod("ok", [ctr("main", {CORE: 30, MEM: 8})])
            r = g.http_request("127.0.0.1", srv.https_port, "POST", path, review(ok, uid="tls-ok"), tls_context=ctx)
            s.check_eq(r.status, 200, "HTTPS %s answers 200" % path, r)
            resp = r.json().get("response", {}) if r.status == 200 else {}
            s.check_eq((resp.get("uid"), resp.get("allowed"), resp.get("status", {}).get("code")),
                       ("tls-ok", True, 200), "HTTPS %s: a compliant pod is allowed" % path, resp)
        bad = mkpod("bad", VIOLATIONS[0][1])
        r = g.http_request("127.0.0.1", srv.https_port, "POST", "/admission/validate", review(bad, uid="tls-bad"),
                           tls_context=ctx)
        resp = r.json().get("response", {}) if r.status == 200 else {}
        s.check_eq((resp.get("uid"), resp.get("allowed"), resp.get("status", {}).get("code"),
                    resp.get("status", {}).get("message")),
                   ("tls-bad", False, 403, VIOLATIONS[0][2]), "HTTPS validate: a violating pod is denied", r)


# ---------------------------------------------------------------------------
# The mutating webhook's patch
# ---------------------------------------------------------------------------

def with_resources(p, index, limits=None, requests=None):
    """p with container index's limits/requests set to these maps (values as strings)."""
    out = copy.deepcopy(p)
    res = out["spec"]["containers"][index].setdefault("resources", {})
    if limits is not None:
        res["limits"] = {k: str(v) for k, v in limits.items()}
    if requests is not None:
        res["requests"] = {k: str(v) for k, v in requests.items()}
    return out


@suite.test
def test_mutate_patch(s):
    with g.Server(s, g.write_state(s, [g.node("n1", g.vcuda(400, 256))] + reference_crls())) as srv:
        cases = []
        p = mkpod("share", [ctr("main", {CORE: 30})])
        cases.append(("a share without vcuda-memory", p,
                      with_resources(p, 0, {CORE: 30, MEM: 4}, {MEM: 4})))
        p = mkpod("share-req", [ctr("main", {CORE: 30}, {CORE: 30})])
        cases.append(("a share without vcuda-memory, requests set", p,
                      with_resources(p, 0, {CORE: 30, MEM: 4}, {CORE: 30, MEM: 4})))
        p = mkpod("memory-only", [ctr("main", {MEM: 8}, {MEM: 8})])
        cases.append(("vcuda-memory without vcuda-core", p,
                      with_resources(p, 0, {MEM: 8, CORE: 20}, {MEM: 8, CORE: 20})))
        p = mkpod("requests-only", [ctr("main", None, {CORE: 20})])
        cases.append(("no limits map at all", p,
                      with_resources(p, 0, {CORE: 20, MEM: 4}, {CORE: 20, MEM: 4})))
        p = mkpod("three", [ctr("model", {CORE: 40}), ctr("sidecar", {"cpu": "100m"}),
                            ctr("tokenizer", {MEM: 8}, {"cpu": "1"})])
        want = with_resources(p, 0, {CORE: 40, MEM: 4}, {MEM: 4})
        want = with_resources(want, 2, {MEM: 8, CORE: 20}, {"cpu": "1", CORE: 20})
        cases.append(("two GPU containers and a sidecar", p, want))

        for what, p, want in cases:
            resp = expect_allowed(s, srv, "/admission/mutate", review(p), what)
            ops = decode_patch(s, resp, what)
            s.check(all(op.get("op") == "add" for op in ops), "%s: only add operations" % what, ops)
            s.check(all(isinstance(op.get("value"), (str, dict)) for op in ops),
                    "%s: values are strings (or new maps)" % what, ops)
            try:
                got = apply_json_patch(p, ops)
            except PatchError as e:
                s.check(False, "%s: the patch applies to the pod" % what, "%s\n%r" % (e, ops))
                continue
            s.check_eq(got, want, "%s: the patched pod is the expected one" % what, ops)
            # The patched pod is complete: allowed, nothing more to add, and placed.
            expect_allowed(s, srv, "/admission/validate", review(got), what + ", patched: validate")
            again = expect_allowed(s, srv, "/admission/mutate", review(got), what + ", patched: mutate")
            s.check("patch" not in again and "patchType" not in again, "%s: mutating again adds nothing" % what,
                    again)

        # Nothing to add: no patch at all.
        for what, p in (("a complete share", mkpod("full", [ctr("main", {CORE: 30, MEM: 8})])),
                        ("a CPU pod", mkpod("cpu", [ctr("main", {"cpu": "1"})])),
                        ("an MPS pod (no CRL for it)", mkpod("mps", [ctr("main", {MPS_CORE: 25, MPS_MEM: 4})])),
                        ("a pod without resources", mkpod("bare", [ctr("main", drop_resources=True)]))):
            resp = expect_allowed(s, srv, "/admission/mutate", review(p), what)
            s.check("patch" not in resp and "patchType" not in resp, "%s: no patch" % what, resp)
        # Only pod CREATE is mutated.
        p = mkpod("share", [ctr("main", {CORE: 30})])
        resp = expect_allowed(s, srv, "/admission/mutate", review(p, operation="UPDATE"), "mutate on UPDATE")
        s.check("patch" not in resp, "mutate on UPDATE: no patch", resp)
        resp = expect_allowed(s, srv, "/admission/mutate", review(load_fixture("invalid-limits.yaml")),
                              "mutate of a ConfigMap")
        s.check("patch" not in resp, "mutate of a ConfigMap: no patch", resp)
        # A uid that needs escaping is echoed exactly.
        uid = 'a"b\\c/\u00e9'
        expect_allowed(s, srv, "/admission/mutate", review(p, uid=uid), "a uid with quotes", uid=uid)


@suite.test
def test_mutate_patch_every_shape(s):
    """Every combination of how a container states its resources (no resources, empty maps, limits and/or
    requests) and which gpu-manager keys it names where: the patch applies, the patched container names
    both keys in its limits with requests equal to them, and mutating again adds nothing."""
    shapes = {"absent": None, "empty": {}, "limits": {"limits": {}}, "requests": {"requests": {}},
              "both": {"limits": {}, "requests": {}}, "limits-null": {"limits": None}}
    wheres = ("none", "limit", "request", "both")
    values = {CORE: "20", MEM: "4"}     # the defaults, so a request without a limit is consistent
    with g.Server(s, g.write_state(s, [g.node("n1", g.vcuda(400, 256))] + reference_crls())) as srv:
        n = 0
        for shape, res in shapes.items():
            for wc in wheres:
                for wm in wheres:
                    if res is None and (wc != "none" or wm != "none"):
                        continue
                    c = {"name": "main", "image": "x"}
                    if res is not None:
                        c["resources"] = copy.deepcopy(res)
                    for key, where in ((CORE, wc), (MEM, wm)):
                        for part in (("limits",) if where == "limit" else ("requests",) if where == "request"
                                     else ("limits", "requests") if where == "both" else ()):
                            if not isinstance(c["resources"].get(part), dict):
                                c["resources"][part] = {}
                            c["resources"][part][key] = values[key]
                    p = mkpod("shape-%d" % n, [c])
                    n += 1
                    what = "resources %s, vcuda-core in %s, vcuda-memory in %s" % (shape, wc, wm)
                    expect_allowed(s, srv, "/admission/validate", review(p), what + ": validate")
                    resp = expect_allowed(s, srv, "/admission/mutate", review(p), what + ": mutate")
                    if wc == "none" and wm == "none":
                        s.check("patch" not in resp, what + ": no patch (the group is not used)", resp)
                        continue
                    if wc in ("limit", "both") and wm in ("limit", "both"):
                        s.check("patch" not in resp, what + ": no patch (nothing missing)", resp)
                        continue
                    ops = decode_patch(s, resp, what)
                    try:
                        got = apply_json_patch(p, ops)
                    except PatchError as e:
                        s.check(False, what + ": the patch applies", "%s\n%r\n%r" % (e, c, ops))
                        continue
                    r = got["spec"]["containers"][0]["resources"]
                    s.check_eq(r.get("limits"), values, what + ": both keys in limits", ops)
                    s.check(all(r.get("requests", {}).get(k, v) == v for k, v in values.items()),
                            what + ": requests equal to limits", r)
                    expect_allowed(s, srv, "/admission/validate", review(got), what + ": patched, validate")
                    again = expect_allowed(s, srv, "/admission/mutate", review(got), what + ": patched, mutate")
                    s.check("patch" not in again, what + ": mutating again adds nothing", again)


@suite.test
def test_patch_applier(s):
    """The applier above is strict, so a patch that only works by accident fails."""
    doc = {"a": {"b/c": {"~d": 1}}, "l": [1, 2]}
    s.check_eq(apply_json_patch(doc, [{"op": "add", "path": "/a/b~1c/~0e", "value": "x"}])["a"]["b/c"],
               {"~d": 1, "~e": "x"}, "~1 and ~0 decode")
    s.check_eq(apply_json_patch(doc, [{"op": "add", "path": "/l/-", "value": 3},
                                      {"op": "add", "path": "/l/0", "value": 0}])["l"], [0, 1, 2, 3],
               "array add at the end and at an index")
    s.check_eq(doc, {"a": {"b/c": {"~d": 1}}, "l": [1, 2]}, "the input is not changed")
    for ops in ([{"op": "add", "path": "/x/y", "value": 1}], [{"op": "add", "path": "a", "value": 1}],
                [{"op": "test", "path": "/l/0", "value": 2}], [{"op": "frob", "path": "/a"}],
                [{"op": "add", "path": "/l/5", "value": 1}]):
        try:
            apply_json_patch(doc, ops)
            s.check(False, "applier refuses %r" % ops)
        except PatchError:
            s.check(True, "applier refuses %r" % ops)


# ---------------------------------------------------------------------------
# Malformed reviews
# ---------------------------------------------------------------------------

def _review_with(**request):
    base = review(mkpod("p", [ctr("main", {CORE: 30})]))
    for k, v in request.items():
        if v is _DROP:
            base["request"].pop(k, None)
        else:
            base["request"][k] = v
    return base


_DROP = object()


@suite.test
def test_malformed_reviews(s):
    cases = [
        ("not JSON", b"{bad", "JSON"),
        ("an empty body", b"", "JSON"),
        ("trailing garbage", json.dumps(review(mkpod("p", [ctr("main", {CORE: 30})]))).encode() + b" x", "JSON"),
        ("a JSON array", b"[]", "object"),
        ("a JSON string", b'"AdmissionReview"', "object"),
        ("admission.k8s.io/v1beta1", dict(review(mkpod("p", [])), apiVersion="admission.k8s.io/v1beta1"),
         "apiVersion"),
        ("kind Pod", dict(review(mkpod("p", [])), kind="Pod"), "kind"),
        ("no request", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request"),
        ("request not an object", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []},
         "request"),
        ("no uid", _review_with(uid=_DROP), "uid"),
        ("an empty uid", _review_with(uid=""), "uid"),
        ("a numeric uid", _review_with(uid=7), "uid"),
        ("no kind", _review_with(kind=_DROP), "kind"),
        ("kind.kind not a string", _review_with(kind={"kind": 1}), "kind"),
        ("namespace not a string", _review_with(namespace=["default"]), "namespace"),
        ("an unknown operation", _review_with(operation="PATCH"), "operation"),
        ("no operation", _review_with(operation=_DROP), "operation"),
        ("CREATE without object", _review_with(object=_DROP), "object"),
        ("object not an object", _review_with(object="pod"), "object"),
    ]
    with g.Server(s, g.write_state(s, [g.node("n1", g.vcuda(400, 256))] + reference_crls())) as srv:
        for path in ("/admission/validate", "/admission/mutate"):
            for what, body, word in cases:
                r = srv.post(path, body)
                s.check_eq(r.status, 400, "%s %s: 400" % (path, what), r)
                s.check_eq(r.header("content-type"), "application/json", "%s %s: JSON" % (path, what))
                try:
                    err = r.json()
                except ValueError:
                    err = None
                s.check(isinstance(err, dict) and list(err) == ["error"] and isinstance(err["error"], str)
                        and word in err["error"], "%s %s: {\"error\": ...} naming %s" % (path, what, word), r)
            r = srv.get(path)
            s.check_eq(r.status, 405, "GET %s: 405" % path, r)
        # Still serving, and a good review right after is answered.
        s.check_eq(srv.get("/healthz").status, 200, "the server still serves after malformed reviews")
        expect_allowed(s, srv, "/admission/validate", review(mkpod("p", [ctr("main", {CORE: 30})])),
                       "a good review after the bad ones")
        # CONNECT and DELETE need no object.
        expect_allowed(s, srv, "/admission/validate", _review_with(operation="DELETE", object=_DROP),
                       "DELETE without object")
        expect_allowed(s, srv, "/admission/validate", _review_with(operation="CONNECT", object=_DROP),
                       "CONNECT without object")


# ---------------------------------------------------------------------------
# Defaults count in the occupancy
# ---------------------------------------------------------------------------

@suite.test
def test_defaults_count_in_occupancy(s):
    # One GPU of 100 cores and 64 memory blocks; the vcuda-memory default is 40.
    state = g.write_state(s, [g.node("v1", g.vcuda(100, 64))] + reference_crls(memory_default="40"))
    with g.Server(s, state) as srv:
        p1 = g.pod("p1", g.vcuda(30))
        res = srv.filter(p1, ["v1"])
        s.check_eq(res.get("NodeNames"), ["v1"], "a share without vcuda-memory is placed (the default applies)", res)
        gpu = srv.inspect("v1")["gpus"][0]
        s.check_eq((gpu["coreUsed"], gpu["memoryUsed"], gpu["pods"]), (30, 40, ["default/p1"]),
                   "/inspect/nodes charges the default memory (40) after the filter's decision", gpu)
        # 30 more cores fit, but another default 40 blocks do not (40 + 40 > 64).
        res = srv.filter(g.pod("p2", g.vcuda(30)), ["v1"])
        s.check_eq(res.get("NodeNames") or [], [], "a second default-memory share does not fit", res)
        s.check(bool(g.failed_reason(res, "v1")), "the node fails with a reason", res)
        # An explicit, smaller memory still fits next to it.
        res = srv.filter(g.pod("p3", g.vcuda(30, 20)), ["v1"])
        s.check_eq(res.get("NodeNames"), ["v1"], "a share with 20 memory blocks fits (40 + 20 <= 64)", res)
        gpu = srv.inspect("v1")["gpus"][0]
        s.check_eq((gpu["coreUsed"], gpu["memoryUsed"], sorted(gpu["pods"])), (60, 60, ["default/p1", "default/p3"]),
                   "/inspect/nodes: both decisions charged", gpu)

    # Without a CRL for vcuda-memory the same pod is refused with a reason, not placed as a CPU pod.
    state = g.write_state(s, [g.node("v1", g.vcuda(100, 64)), reference_crls()[0]])
    with g.Server(s, state) as srv:
        res = srv.filter(g.pod("p1", g.vcuda(30)), ["v1"])
        s.check_eq(res.get("NodeNames") or [], [], "no vcuda-memory default: not placed", res)
        s.check_in(MEM, g.failed_reason(res, "v1") or "", "no vcuda-memory default: the reason names vcuda-memory")
        s.check_eq(srv.inspect("v1")["gpus"][0]["coreUsed"], 0, "nothing charged")


@suite.test
def test_defaults_count_for_pods_in_the_cluster(s):
    """The default also counts for pods the cache learns from the cluster (state file, watch), which
    carry no vcuda-memory when no mutating webhook wrote it in (design.md 3, 7; issue 5 item 3)."""
    ann = {"tencent.com/predicate-gpu-idx-0": "0", "tencent.com/predicate-node": "v1",
           "tencent.com/gpu-assigned": "true"}
    state = g.write_state(s, [g.node("v1", g.vcuda(100, 64))] + reference_crls(memory_default="40") +
                          [g.pod("old", g.vcuda(30), node="v1", phase="Running", annotations=ann)])
    with g.Server(s, state) as srv:
        gpu = srv.inspect("v1")["gpus"][0]
        # Regression (found in issue 5): the cache parsed pods without the CRL defaults, so a
        # bound share relying on the vcuda-memory default was not charged at all.
        s.check_eq((gpu["coreUsed"], gpu["memoryUsed"], gpu["pods"]), (30, 40, ["default/old"]),
                   "a bound share without vcuda-memory is charged with the CRL default", gpu)

    with g.Cluster(s) as c:
        c.add_node(g.node("v1", g.vcuda(100, 64)))
        for cm in reference_crls(memory_default="40"):
            c.sim.create("configmaps", cm, ns="kube-public")
        c.create_pod(g.pod("share", g.vcuda(30)))
        c.create_pod(g.pod("share2", g.vcuda(30)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            res = srv.filter(c.get_pod("share"), ["v1"])
            s.check_eq(res.get("NodeNames"), ["v1"], "live: the share is placed with the default", res)
            s.check_eq(c.annotations("share").get("tencent.com/predicate-gpu-idx-0"), "0", "live: decision recorded")
            # Regression (same cause): once the pod comes back from the API server (the patch's answer,
            # the watch) it was re-parsed without the default and its charge disappeared, so a second
            # default-memory share was placed on the same GPU (40 + 40 > 64 memory blocks).
            s.check(srv.seen_rv("pods", c.get_pod("share")["metadata"]["resourceVersion"]),
                    "live: the watch delivers the decided pod")
            used = srv.inspect("v1")["gpus"][0]["memoryUsed"]
            s.check_eq(used, 40, "live: /inspect/nodes keeps charging the default memory after the filter's "
                       "decision (the pod as the watch delivered it)")
            res = srv.filter(c.get_pod("share2"), ["v1"])
            s.check_eq(res.get("NodeNames") or [], [],
                       "live: a second default-memory share does not fit next to the first", res)


# ---------------------------------------------------------------------------
# /inspect/crl
# ---------------------------------------------------------------------------

def crl_entry(cm):
    d = cm["data"]
    return {"name": cm["metadata"]["name"], "group": d["group"], "key": d["key"], "defaultValue": d["defaultValue"],
            "limits": d["limits"], "requests": d["requests"]}


@suite.test
def test_inspect_crl(s):
    ref = reference_crls()
    multi = crl("cf-crl-multi-thing", "example.com/thing", "always", "disabled", default="1", group="multi",
                enabled="maybe")
    no_type = crl("cf-crl-untyped-widget", "example.com/widget", "optional", "disabled", default="1", group="untyped")
    del no_type["metadata"]["labels"]["features.alauda.io/type"]
    elsewhere = crl("cf-crl-elsewhere-gadget", "example.com/gadget", "sometimes", "disabled", namespace="default")
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info", "namespace": "kube-public"},
             "data": {"kubeconfig": "x"}}
    objs = [g.node("v1", g.vcuda(400, 256)), load_fixture("duplicate-vcuda-core.yaml"),
            load_fixture("valid-disabled-vcuda-core.yaml"), multi, no_type, elsewhere, plain] + ref + \
        [crl("cf-crl-mps-mps-core", MPS_CORE, "required", "fromLimits", group="mps")]
    with g.Server(s, g.write_state(s, objs)) as srv:
        got = srv.get_json("/inspect/crl")
        s.check_eq(got.get("namespace"), "kube-public", "/inspect/crl names the CRL namespace")
        s.check_eq(got.get("enabled"), [crl_entry(c) for c in ref] + [crl_entry(objs[-1])],
                   "/inspect/crl lists the enabled, valid CRLs (by name) with their settings", got)
        invalid = {i["name"]: i["problems"] for i in got.get("invalid") or []}
        s.check_eq(sorted(invalid), ["kube-public/cf-crl-multi-thing", "kube-public/cf-crl-other-vcuda-core",
                                     "kube-public/cf-crl-untyped-widget"],
                   "/inspect/crl lists the invalid CRLs of the CRL namespace only", got)
        s.check_eq(invalid.get("kube-public/cf-crl-other-vcuda-core"), [DUPLICATE_MSG],
                   "the duplicate's problem")
        s.check_eq(invalid.get("kube-public/cf-crl-untyped-widget"),
                   ['label features.alauda.io/type: missing (must be "CustomResourceLimitation")'],
                   "the untyped CRL's problem (a candidate by its cf-crl- name)")
        s.check_eq(sorted(invalid.get("kube-public/cf-crl-multi-thing") or []),
                   sorted(['label features.alauda.io/enabled: "maybe" is not "true" or "false"',
                           'data.limits: "always" is not one of disabled, required, optional']),
                   "every problem of a CRL with two")
        # Counted in /metrics (docs/reference.md): gqa_crl_enabled, gqa_crl_invalid.
        samples, types, _bad = g.parse_metrics(srv.metrics().text)
        s.check_eq((types.get("gqa_crl_enabled"), types.get("gqa_crl_invalid")), ("gauge", "gauge"),
                   "/metrics has the CRL gauges")
        s.check_eq((g.metric(samples, "gqa_crl_enabled"), g.metric(samples, "gqa_crl_invalid")), (3.0, 3.0),
                   "/metrics: 3 CRLs in force, 3 ignored")
        # Invalid CRLs are not enforced: a pod naming example.com/thing without requests is allowed.
        p = mkpod("thing", [ctr("main", {"example.com/thing": 1})])
        expect_allowed(s, srv, "/admission/validate", review(p), "a pod under an invalid CRL only")

    # --crl-namespace moves the registry.
    moved = [dict(c, metadata=dict(c["metadata"], namespace="gpu-crl")) for c in ref]
    objs = [g.node("v1", g.vcuda(100, 64))] + moved + [load_fixture("invalid-limits.yaml")]
    with g.Server(s, g.write_state(s, objs), ["--crl-namespace", "gpu-crl"]) as srv:
        got = srv.get_json("/inspect/crl")
        s.check_eq((got.get("namespace"), [c["name"] for c in got.get("enabled", [])], got.get("invalid")),
                   ("gpu-crl", [REF_CORE, REF_MEM], []),
                   "--crl-namespace gpu-crl: its CRLs, and none from kube-public", got)
        res = srv.filter(g.pod("p1", g.vcuda(30)), ["v1"])
        s.check_eq(res.get("NodeNames"), ["v1"], "--crl-namespace gpu-crl: its default applies in the filter", res)


# ---------------------------------------------------------------------------
# Live: CRLs follow the API server
# ---------------------------------------------------------------------------

@suite.test
def test_live_crls_follow_the_cluster(s):
    with g.Cluster(s) as c:
        c.add_node(g.node("v1", g.vcuda(400, 256)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            share = g.pod("share", g.vcuda(30))
            res = srv.filter(share, ["v1"])
            s.check_eq(res.get("NodeNames") or [], [], "no CRL yet: a share without vcuda-memory is refused", res)

            for cm in reference_crls():
                c.sim.create("configmaps", cm, ns="kube-public")
            s.check(g.wait_until(lambda: len(srv.get_json("/inspect/crl")["enabled"]) == 2, timeout=10),
                    "the created CRLs reach /inspect/crl", srv.get("/inspect/crl"))
            mutate = expect_allowed(s, srv, "/admission/mutate", review(share), "live mutate")
            ops = decode_patch(s, mutate, "live mutate")
            s.check_eq(apply_json_patch(share, ops)["spec"]["containers"][0]["resources"]["limits"].get(MEM), "4",
                       "live mutate writes the default from the created CRL")
            # The webhook judges duplicates against the live registry.
            got = expect_denied(s, srv, "/admission/validate", review(load_fixture("duplicate-vcuda-core.yaml")),
                                422, "live duplicate")
            s.check_eq(got, DUPLICATE_MSG, "live duplicate: refused naming the holder")

            # A CRL changed to limits: required makes the next filter refuse the share.
            mem = c.sim.get("configmaps", REF_MEM, "kube-public")
            mem["data"]["limits"] = "required"
            mem["data"]["defaultValue"] = ""
            c.sim.update("configmaps", REF_MEM, mem, ns="kube-public")
            s.check(g.wait_until(lambda: [x["limits"] for x in srv.get_json("/inspect/crl")["enabled"]
                                          if x["name"] == REF_MEM] == ["required"], timeout=10),
                    "the changed CRL reaches /inspect/crl", srv.get("/inspect/crl"))
            res = srv.filter(share, ["v1"])
            s.check_eq(g.failed_reason(res, "v1"), msg_required_limit("main", MEM, REF_MEM),
                       "after the change the filter refuses the share naming the CRL and rule", res)

            # Broken in the cluster (no webhook stopped it): ignored and listed.
            mem = c.sim.get("configmaps", REF_MEM, "kube-public")
            mem["data"]["limits"] = "sometimes"
            c.sim.update("configmaps", REF_MEM, mem, ns="kube-public")
            s.check(g.wait_until(lambda: [i["name"] for i in srv.get_json("/inspect/crl")["invalid"]] ==
                                 ["kube-public/" + REF_MEM], timeout=10),
                    "a CRL broken in the cluster is listed as invalid", srv.get("/inspect/crl"))
            res = srv.filter(share, ["v1"])
            s.check_eq(res.get("NodeNames") or [], [], "with the memory CRL ignored the share has no default", res)

            # Deleted: gone from the registry.
            c.sim.delete("configmaps", REF_MEM, ns="kube-public")
            c.sim.delete("configmaps", REF_CORE, ns="kube-public")
            s.check(g.wait_until(lambda: srv.get_json("/inspect/crl") ==
                                 {"namespace": "kube-public", "enabled": [], "invalid": []}, timeout=10),
                    "deleted CRLs leave /inspect/crl", srv.get("/inspect/crl"))
            resp = expect_allowed(s, srv, "/admission/mutate", review(share), "mutate without CRLs")
            s.check("patch" not in resp, "without CRLs there is nothing to add", resp)


if __name__ == "__main__":
    suite.main()
