#!/usr/bin/env python3
"""manifests/: every YAML file parses; every object has what the Kubernetes API
requires for its kind (an offline schema check: required fields and field
names against python3-kubernetes' models when they are installed, plus the
per-kind rules below); the kustomization builds (kubectl kustomize, offline)
exactly the objects its files hold; and the Deployment, Services, probes,
webhooks, DaemonSet and CRLs say what design.md sections 1, 2, 7, 8 and 9 and
the install issue ask for."""

import base64
import json
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_manifests")

IMAGE = "registry.example.com/gpu-quota-admission:0.1.0"
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")

CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "Namespace", "PriorityClass"}
KNOWN_KINDS = {
    ("v1", "ServiceAccount"), ("v1", "Service"), ("v1", "ConfigMap"), ("v1", "Secret"),
    ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    ("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule"),
}
GPU_RESOURCES = ["tencent.com/vcuda-core", "tencent.com/vcuda-memory", "nvidia.com/mps-core",
                 "nvidia.com/mps-memory", "nvidia.com/gpu"]


def all_manifest_files(s):
    return ic.yaml_files(s.src, "manifests")


def patch_files(s):
    """Files that kustomizations apply as patches (JSON 6902 lists, not
    objects) or put into generated ConfigMaps (data, not objects)."""
    out = set()
    for f in all_manifest_files(s):
        if os.path.basename(f) == "kustomization.yaml":
            k = ic.load_docs(f)[0]
            for p in k.get("patches") or []:
                if "path" in p:
                    out.add(os.path.normpath(os.path.join(os.path.dirname(f), p["path"])))
            for g in k.get("configMapGenerator") or []:
                for entry in g.get("files") or []:
                    out.add(os.path.normpath(os.path.join(os.path.dirname(f), entry.rpartition("=")[2])))
    return out


# Roles every cluster has (Kubernetes' RBAC bootstrap policy) that
# components/own-scheduler binds, as upstream's multiple-schedulers guide does.
BUILTIN_ROLES = {("ClusterRole", None, "system:kube-scheduler"), ("ClusterRole", None, "system:volume-scheduler"),
                 ("Role", "kube-system", "extension-apiserver-authentication-reader")}


def every_object(s):
    """(file, doc) for every YAML file under manifests/, kustomizations and patches aside."""
    out = []
    patches = patch_files(s)
    for f in all_manifest_files(s):
        if os.path.basename(f) == "kustomization.yaml" or f in patches:
            continue
        for d in ic.load_docs(f):
            out.append((f, d))
    return out


def rel(s, f):
    return os.path.relpath(f, s.src)


def fenced_yaml_blocks(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```ya?ml\n(.*?)```", text, re.S)


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------

@suite.test
def yaml_files_parse(s):
    files = ic.yaml_files(s.src, "manifests", "scheduler-config", "examples")
    s.require(len(files) >= 20, "found the YAML files", files)
    for f in files:
        try:
            docs = ic.load_docs(f)
            s.check(len(docs) >= 1, "%s has a document" % rel(s, f))
        except Exception as e:  # noqa: BLE001
            s.check(False, "%s parses" % rel(s, f), str(e))
    docs = [s.path("docs", "install.md"), s.path("docs", "migration.md"), s.path("scheduler-config", "README.md")]
    for doc in docs:
        if not os.path.exists(doc):
            s.check(False, "%s exists" % rel(s, doc))
            continue
        for i, block in enumerate(fenced_yaml_blocks(doc)):
            try:
                list(ic.yaml.safe_load_all(block))
                s.check(True, "%s yaml block %d parses" % (rel(s, doc), i))
            except Exception as e:  # noqa: BLE001
                s.check(False, "%s yaml block %d parses" % (rel(s, doc), i), str(e))


@suite.test
def kustomizations_reference_existing_files(s):
    for f in all_manifest_files(s):
        if os.path.basename(f) != "kustomization.yaml":
            continue
        k = ic.load_docs(f)[0]
        d = os.path.dirname(f)
        s.check(k.get("kind") in ("Kustomization", "Component"), "%s is a Kustomization or Component" % rel(s, f))
        for key in ("resources", "components"):
            for entry in k.get(key) or []:
                s.check(os.path.exists(os.path.join(d, entry)), "%s: %s %s exists" % (rel(s, f), key, entry))
        for p in k.get("patches") or []:
            if "path" in p:
                s.check(os.path.exists(os.path.join(d, p["path"])), "%s: patch %s exists" % (rel(s, f), p["path"]))
            s.check("path" in p or "patch" in p, "%s: patch has path or patch" % rel(s, f))
    # Every object file is used by some kustomization, or is an example.
    used = set(patch_files(s))
    for f in all_manifest_files(s):
        if os.path.basename(f) == "kustomization.yaml":
            used.update(ic.kustomization_resources(os.path.dirname(f)))
    for f in all_manifest_files(s):
        if os.path.basename(f) == "kustomization.yaml" or "/examples/" in f:
            continue
        s.check(f in used, "%s is listed in a kustomization" % rel(s, f))
    # The top kustomization installs no example and sets neither namespace nor commonLabels.
    top = ic.load_docs(s.path("manifests", "kustomization.yaml"))[0]
    s.check("namespace" not in top, "manifests/kustomization.yaml sets no namespace (kube-system and kube-public)")
    s.check("commonLabels" not in top and "labels" not in top, "manifests/kustomization.yaml changes no selector")
    files = ic.kustomization_resources(s.path("manifests"))
    s.check(not [f for f in files if "/examples/" in f], "examples are not installed by default", files)
    s.check(not [f for f in files if "/components/" in f], "components are opt-in", files)


@suite.test
def kustomize_build_matches_files(s):
    cmd = ic.kubectl_kustomize()
    if not cmd:
        s.skip("kubectl kustomize", "neither kubectl nor kustomize is installed")
        return
    r = ic.run(cmd + [s.path("manifests")])
    s.require(r.returncode == 0, "kubectl kustomize manifests/ succeeds", r.stderr)
    built = [d for d in ic.yaml.safe_load_all(r.stdout) if d]
    files = [d for _, d in ic.manifest_objects(s.src)]

    def key(o):
        return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])

    s.check_eq(sorted(map(key, built)), sorted(map(key, files)), "kustomize builds exactly the listed objects")
    # The image transformer leaves the documented image name in place.
    images = set()
    for o in built:
        for c in (o.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []):
            images.add(c["image"])
    s.check_eq(images, {IMAGE}, "every container runs the one image")
    # The webhook configurations come last, after the Service and Deployment
    # they call and the ConfigMaps they would check.
    kinds = [o["kind"] for o in built]
    last_other = max(i for i, k in enumerate(kinds) if not k.endswith("WebhookConfiguration"))
    first_webhook = min(i for i, k in enumerate(kinds) if k.endswith("WebhookConfiguration"))
    s.check(first_webhook > last_other, "webhook configurations are applied last", kinds)

    # With both components.
    work = s.tempdir("components")
    comp = os.path.relpath(s.path("manifests", "components"), work)
    with open(os.path.join(work, "kustomization.yaml"), "w") as f:
        f.write("resources:\n- %s\ncomponents:\n- %s/placement-bind\n- %s/cert-manager\n"
                % (os.path.relpath(s.path("manifests"), work), comp, comp))
    r = ic.run(cmd + [work])
    s.require(r.returncode == 0, "kustomize with both components succeeds", r.stderr)
    built = [d for d in ic.yaml.safe_load_all(r.stdout) if d]
    dep = next(o for o in built if o["kind"] == "Deployment")
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    s.check_eq(env.get("GQA_PLACEMENT"), "bind", "placement-bind sets GQA_PLACEMENT=bind")
    s.check(len(env) >= 3, "placement-bind keeps the other variables", env)
    for o in built:
        if o["kind"].endswith("WebhookConfiguration"):
            s.check_eq((o["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from"),
                       "kube-system/gpu-quota-admission-webhook", "%s gets the CA injector annotation" % o["kind"])
    cert = next(o for o in built if o["kind"] == "Certificate" and o["metadata"]["name"] == "gpu-quota-admission-webhook")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if "secret" in v)
    s.check_eq(cert["spec"]["secretName"], vol["secret"]["secretName"], "cert-manager writes the Secret the pods mount")


# ---------------------------------------------------------------------------
# Offline schema check
# ---------------------------------------------------------------------------

def k8s_models():
    try:
        import kubernetes.client as kc  # noqa: WPS433
        return kc
    except Exception:  # noqa: BLE001
        return None


def model_check(kc, obj, type_name, path, errors):
    """Field names and types against the python3-kubernetes model."""
    if type_name.startswith("list["):
        if not isinstance(obj, list):
            errors.append("%s: want a list, got %r" % (path, obj))
            return
        for i, x in enumerate(obj):
            model_check(kc, x, type_name[5:-1], "%s[%d]" % (path, i), errors)
    elif type_name.startswith("dict("):
        inner = re.match(r"dict\(([^,]*), (.*)\)$", type_name).group(2)
        if not isinstance(obj, dict):
            errors.append("%s: want a map, got %r" % (path, obj))
            return
        for k, v in obj.items():
            if inner == "str" and isinstance(v, (int, float)) and not isinstance(v, bool) and (
                    ".limits" in path or ".requests" in path):
                continue   # quantities may be numbers
            model_check(kc, v, inner, "%s.%s" % (path, k), errors)
    elif type_name == "str":
        if not isinstance(obj, str):
            errors.append("%s: want a string, got %r" % (path, obj))
    elif type_name == "int":
        if not isinstance(obj, int) or isinstance(obj, bool):
            errors.append("%s: want an integer, got %r" % (path, obj))
    elif type_name == "bool":
        if not isinstance(obj, bool):
            errors.append("%s: want a boolean, got %r" % (path, obj))
    elif type_name == "float":
        if not isinstance(obj, (int, float)) or isinstance(obj, bool):
            errors.append("%s: want a number, got %r" % (path, obj))
    elif type_name in ("object", "datetime", "date"):
        pass
    else:
        cls = getattr(kc, type_name, None)
        if cls is None:
            errors.append("%s: no model %s" % (path, type_name))
            return
        if not isinstance(obj, dict):
            errors.append("%s: want an object (%s), got %r" % (path, type_name, obj))
            return
        by_json = {v: k for k, v in cls.attribute_map.items()}
        for k, v in obj.items():
            if k not in by_json:
                errors.append("%s.%s: unknown field of %s" % (path, k, type_name))
            else:
                model_check(kc, v, cls.openapi_types[by_json[k]], "%s.%s" % (path, k), errors)


@suite.test
def schema_python_kubernetes_models(s):
    kc = k8s_models()
    if kc is None:
        s.skip("python3-kubernetes models", "the kubernetes package is not importable")
        return
    client = kc.ApiClient()
    n = 0
    for f, o in every_object(s):
        api, kind = o.get("apiVersion", ""), o.get("kind", "")
        if api.startswith("cert-manager.io/") or api.startswith("monitoring.coreos.com/"):
            continue  # CRDs: python3-kubernetes has no models for them
        version = api.split("/")[-1]
        type_name = version[0].upper() + version[1:] + kind
        if not hasattr(kc, type_name):
            s.check(False, "%s: %s %s has a model" % (rel(s, f), api, kind))
            continue
        errors = []
        model_check(kc, o, type_name, kind, errors)
        s.check(not errors, "%s: %s %s fields are known and typed" % (rel(s, f), kind, o["metadata"]["name"]),
                "\n".join(errors))
        # Required fields: the models refuse None for them.
        try:
            client._ApiClient__deserialize(o, type_name)  # noqa: SLF001
            s.check(True, "%s: %s has its required fields" % (rel(s, f), kind))
        except (ValueError, TypeError) as e:
            s.check(False, "%s: %s %s has its required fields" % (rel(s, f), kind, o["metadata"]["name"]), str(e))
        n += 1
    s.check(n >= 20, "checked the objects against the models (%d)" % n)


def check_metadata(s, where, o):
    md = o.get("metadata")
    s.require(isinstance(md, dict) and md.get("name"), "%s: metadata.name" % where)
    s.check(bool(DNS1123_SUBDOMAIN.match(md["name"])) and len(md["name"]) <= 253,
            "%s: name %r is a DNS-1123 subdomain" % (where, md["name"]))
    if o["kind"] in CLUSTER_SCOPED:
        s.check("namespace" not in md, "%s: cluster-scoped, no namespace" % where)
    else:
        s.check(bool(md.get("namespace")) and bool(DNS1123_LABEL.match(md["namespace"])),
                "%s: namespaced, with a namespace" % where)
    for field in ("labels", "annotations"):
        for k, v in (md.get(field) or {}).items():
            prefix, _, name = k.rpartition("/")
            s.check(bool(LABEL_NAME.match(name)) and len(name) <= 63 and (not prefix or DNS1123_SUBDOMAIN.match(prefix)),
                    "%s: %s key %r is valid" % (where, field, k))
            s.check(isinstance(v, str), "%s: %s %r value is a string" % (where, field, k))
            if field == "labels":
                s.check(bool(LABEL_VALUE.match(v)) and len(v) <= 63, "%s: label value %r is valid" % (where, v))


def check_pod_spec(s, where, spec, sa_names):
    s.check(bool(spec.get("containers")), "%s: has containers" % where)
    volumes = {}
    for v in spec.get("volumes") or []:
        s.check(bool(DNS1123_LABEL.match(v.get("name", ""))), "%s: volume name %r" % (where, v.get("name")))
        sources = [k for k in v if k != "name"]
        s.check(len(sources) == 1, "%s: volume %s has one source" % (where, v.get("name")), sources)
        volumes[v.get("name")] = v
    names = set()
    for c in spec.get("containers") or []:
        cname = c.get("name", "")
        s.check(bool(DNS1123_LABEL.match(cname)), "%s: container name %r" % (where, cname))
        s.check(cname not in names, "%s: container name %r unique" % (where, cname))
        names.add(cname)
        s.check(bool(c.get("image")), "%s: container %s has an image" % (where, cname))
        ports = {}
        for p in c.get("ports") or []:
            s.check(isinstance(p.get("containerPort"), int) and 0 < p["containerPort"] < 65536,
                    "%s: containerPort %r" % (where, p.get("containerPort")))
            if "name" in p:
                s.check(bool(IANA_SVC_NAME.match(p["name"])) and len(p["name"]) <= 15 and "--" not in p["name"],
                        "%s: port name %r is an IANA_SVC_NAME" % (where, p["name"]))
                s.check(p["name"] not in ports, "%s: port name %r unique" % (where, p["name"]))
                ports[p["name"]] = p["containerPort"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            pr = c.get(probe)
            if not pr:
                continue
            handlers = [k for k in ("httpGet", "tcpSocket", "exec", "grpc") if k in pr]
            s.check(len(handlers) == 1, "%s: %s has one handler" % (where, probe))
            port = (pr.get("httpGet") or pr.get("tcpSocket") or {}).get("port")
            if isinstance(port, str):
                s.check(port in ports, "%s: %s port %r is a named container port" % (where, probe, port))
        for m in c.get("volumeMounts") or []:
            s.check(m.get("name") in volumes, "%s: volumeMount %r has a volume" % (where, m.get("name")))
            s.check(str(m.get("mountPath", "")).startswith("/"), "%s: mountPath absolute" % where)
        for e in c.get("env") or []:
            s.check(("value" in e) != ("valueFrom" in e) or ("value" not in e and "valueFrom" not in e),
                    "%s: env %s has value or valueFrom, not both" % (where, e.get("name")))
    sa = spec.get("serviceAccountName")
    if sa:
        s.check(sa in sa_names, "%s: serviceAccountName %s exists in the manifests" % (where, sa))


@suite.test
def schema_per_kind(s):
    objs = every_object(s)
    installed = ic.manifest_objects(s.src)
    sa_names = {o["metadata"]["name"] for _, o in objs if o.get("kind") == "ServiceAccount"}
    seen = set()
    for f, o in objs:
        where = "%s %s/%s" % (rel(s, f), o.get("kind"), (o.get("metadata") or {}).get("name"))
        s.require(isinstance(o, dict) and o.get("apiVersion") and o.get("kind"), "%s: apiVersion and kind" % where)
        s.check((o["apiVersion"], o["kind"]) in KNOWN_KINDS, "%s: %s %s is a known, served kind"
                % (where, o["apiVersion"], o["kind"]))
        check_metadata(s, where, o)
        k = (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        if "/examples/" not in f:
            s.check(k not in seen, "%s: defined once" % where)
        seen.add(k)
        kind, spec = o["kind"], o.get("spec") or {}

        if kind in ("Deployment", "DaemonSet"):
            sel = (spec.get("selector") or {})
            s.check(bool(sel.get("matchLabels") or sel.get("matchExpressions")), "%s: spec.selector" % where)
            tmpl = spec.get("template") or {}
            s.check(ic.labels_match(sel, (tmpl.get("metadata") or {}).get("labels")),
                    "%s: selector matches the template labels" % where)
            check_pod_spec(s, where, tmpl.get("spec") or {}, sa_names)
        elif kind == "Service":
            ports = spec.get("ports") or []
            s.check(len(ports) >= 1, "%s: has ports" % where)
            if len(ports) > 1:
                s.check(all(p.get("name") for p in ports), "%s: several ports are all named" % where)
            for p in ports:
                s.check(isinstance(p.get("port"), int) and 0 < p["port"] < 65536, "%s: port number" % where)
                s.check(p.get("protocol", "TCP") in ("TCP", "UDP", "SCTP"), "%s: protocol" % where)
            s.check(bool(spec.get("selector")), "%s: has a selector" % where)
        elif kind == "PodDisruptionBudget":
            s.check(("minAvailable" in spec) != ("maxUnavailable" in spec), "%s: one of minAvailable/maxUnavailable" % where)
            s.check(bool(spec.get("selector")), "%s: selector" % where)
        elif kind == "NetworkPolicy":
            s.check("podSelector" in spec, "%s: podSelector" % where)
            for t in spec.get("policyTypes") or []:
                s.check(t in ("Ingress", "Egress"), "%s: policyType %s" % (where, t))
        elif kind in ("Role", "ClusterRole"):
            for r in o.get("rules") or []:
                s.check(bool(r.get("verbs")), "%s: rule has verbs" % where)
                s.check("apiGroups" in r and bool(r.get("resources")), "%s: rule has apiGroups and resources" % where)
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = o.get("roleRef") or {}
            s.check(ref.get("apiGroup") == "rbac.authorization.k8s.io", "%s: roleRef.apiGroup" % where)
            ns = o["metadata"].get("namespace") if ref.get("kind") == "Role" else None
            beside = [(g, d) for g, d in objs if os.path.dirname(g) == os.path.dirname(f)]
            s.check(ic.find(installed, ref.get("kind"), ref.get("name"), ns) is not None
                    or ic.find(beside, ref.get("kind"), ref.get("name"), ns) is not None
                    or (ref.get("kind"), ns, ref.get("name")) in BUILTIN_ROLES,
                    "%s: roleRef %s/%s exists" % (where, ref.get("kind"), ref.get("name")))
            if kind == "ClusterRoleBinding":
                s.check(ref.get("kind") == "ClusterRole", "%s: a ClusterRoleBinding refers to a ClusterRole" % where)
            for sub in o.get("subjects") or []:
                s.check(sub.get("kind") == "ServiceAccount" and sub.get("namespace"),
                        "%s: subject is a namespaced ServiceAccount" % where)
                s.check(ic.find(installed, "ServiceAccount", sub.get("name"), sub.get("namespace")) is not None,
                        "%s: subject %s/%s exists" % (where, sub.get("namespace"), sub.get("name")))
        elif kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            check_webhooks(s, where, o, installed)
        elif kind == "ConfigMap":
            for key, v in (o.get("data") or {}).items():
                s.check(isinstance(v, str), "%s: data.%s is a string" % (where, key))
                s.check(bool(re.match(r"^[-._a-zA-Z0-9]+$", key)), "%s: data key %r" % (where, key))
        elif kind == "Certificate":
            s.check(bool(spec.get("secretName")) and bool(spec.get("issuerRef", {}).get("name")),
                    "%s: secretName and issuerRef" % where)
            ref = spec["issuerRef"]
            s.check(any(o2.get("kind") == ref.get("kind", "Issuer") and o2["metadata"]["name"] == ref["name"]
                        for _, o2 in objs), "%s: issuer %s exists" % (where, ref["name"]))
        elif kind == "Issuer":
            s.check(len([k for k in ("selfSigned", "ca", "acme", "vault", "venafi") if k in spec]) == 1,
                    "%s: one issuer type" % where)


def check_webhooks(s, where, o, installed):
    hooks = o.get("webhooks") or []
    s.check(len(hooks) >= 1, "%s: has webhooks" % where)
    names = [h.get("name", "") for h in hooks]
    s.check(len(set(names)) == len(names), "%s: webhook names unique" % where)
    for h in hooks:
        w = "%s webhook %s" % (where, h.get("name"))
        s.check(h.get("name", "").count(".") >= 2 and DNS1123_SUBDOMAIN.match(h["name"]) is not None,
                "%s: fully qualified name" % w)
        s.check("v1" in (h.get("admissionReviewVersions") or []), "%s: admissionReviewVersions has v1" % w)
        s.check(h.get("sideEffects") in ("None", "NoneOnDryRun"), "%s: sideEffects None" % w)
        s.check(h.get("failurePolicy") in ("Ignore", "Fail"), "%s: failurePolicy set" % w)
        s.check(isinstance(h.get("timeoutSeconds"), int) and 1 <= h["timeoutSeconds"] <= 30, "%s: timeoutSeconds 1..30" % w)
        cc = h.get("clientConfig") or {}
        s.check(("url" in cc) != ("service" in cc), "%s: clientConfig has url or service" % w)
        svc = cc.get("service") or {}
        target = ic.find(installed, "Service", svc.get("name"), svc.get("namespace"))
        s.check(target is not None, "%s: Service %s/%s exists" % (w, svc.get("namespace"), svc.get("name")))
        if target:
            s.check(svc.get("port", 443) in [p["port"] for p in target["spec"]["ports"]],
                    "%s: Service port %s exists" % (w, svc.get("port", 443)))
        s.check(str(svc.get("path", "")).startswith("/"), "%s: path" % w)
        for r in h.get("rules") or []:
            s.check(set(r.get("operations") or []) <= {"CREATE", "UPDATE", "DELETE", "CONNECT", "*"} and r.get("operations"),
                    "%s: operations" % w)
            s.check(bool(r.get("resources")) and "apiGroups" in r and bool(r.get("apiVersions")),
                    "%s: rule resources, apiGroups, apiVersions" % w)
        if o["kind"] == "MutatingWebhookConfiguration" and "reinvocationPolicy" in h:
            s.check(h["reinvocationPolicy"] in ("Never", "IfNeeded"), "%s: reinvocationPolicy" % w)


# ---------------------------------------------------------------------------
# What the install asks for
# ---------------------------------------------------------------------------

def deployment(objs):
    return ic.find(objs, "Deployment", "gpu-quota-admission", "kube-system")


def container(dep):
    return dep["spec"]["template"]["spec"]["containers"][0]


def arg_map(args):
    out = {}
    for a in args:
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            out[name] = value if eq else True
    return out


@suite.test
def deployment_shape(s):
    objs = ic.manifest_objects(s.src)
    dep = deployment(objs)
    s.require(dep is not None, "Deployment kube-system/gpu-quota-admission exists")
    spec, pod = dep["spec"], dep["spec"]["template"]["spec"]
    c = container(dep)
    args = arg_map(c.get("args") or [])
    s.check_eq(spec.get("replicas"), 2, "2 replicas")
    s.check(args.get("leader-elect") is True, "--leader-elect")
    s.check_eq(args.get("lease-namespace"), "kube-system", "--lease-namespace kube-system")
    # Dual-stack wildcard: reachable on IPv4, IPv6 single-stack and dual-stack clusters.
    s.check_eq(args.get("listen-http"), "[::]:3456", "HTTP on [::]:3456 (dual-stack)")
    s.check_eq(args.get("listen-https"), "[::]:3443", "HTTPS on [::]:3443 (dual-stack)")
    # Probes on their own listener (issue 22, item 7): a full extender
    # listener cannot fail them.
    s.check_eq(args.get("listen-probes"), "[::]:8081", "probes on [::]:8081 (dual-stack)")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        s.check_eq(c[probe]["httpGet"]["port"], "probes", "%s on the named port probes" % probe)
    s.check_eq(pod.get("priorityClassName"), "system-cluster-critical", "priorityClassName")
    s.check_eq(c.get("image"), IMAGE, "image")
    s.check_eq(c["livenessProbe"]["httpGet"]["path"], "/livez", "liveness on /livez")
    s.check_eq(c["readinessProbe"]["httpGet"]["path"], "/readyz", "readiness on /readyz")
    s.check("startupProbe" in c, "startup probe")
    res = c.get("resources") or {}
    s.check(set(res.get("requests") or {}) >= {"cpu", "memory"} and "memory" in (res.get("limits") or {}),
            "resource requests (cpu, memory) and a memory limit", res)
    psc, csc = pod.get("securityContext") or {}, c.get("securityContext") or {}
    s.check(psc.get("runAsNonRoot") is True and csc.get("runAsNonRoot") is True, "runAsNonRoot")
    s.check(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0, "a non-root runAsUser")
    s.check(csc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
    s.check(csc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation false")
    s.check_eq((csc.get("capabilities") or {}).get("drop"), ["ALL"], "capabilities drop ALL")
    s.check_eq((psc.get("seccompProfile") or {}).get("type"), "RuntimeDefault", "seccomp RuntimeDefault")
    anti = (pod.get("affinity") or {}).get("podAntiAffinity") or {}
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    s.check(any(t.get("topologyKey") == "kubernetes.io/hostname"
                and ic.labels_match(t["labelSelector"], dep["spec"]["template"]["metadata"]["labels"]) for t in terms),
            "required anti-affinity across nodes on its own pods", terms)
    tol = {(t.get("key"), t.get("effect")) for t in pod.get("tolerations") or []}
    s.check(("node-role.kubernetes.io/control-plane", "NoSchedule") in tol, "tolerates control-plane nodes", tol)
    # TLS from the Secret volume.
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts") or []}
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    tls_vol = next((n for n, v in vols.items() if "secret" in v), None)
    s.require(tls_vol in mounts, "the TLS Secret is mounted")
    s.check_eq(vols[tls_vol]["secret"]["secretName"], "gpu-quota-admission-webhook-tls", "TLS Secret name")
    s.check_eq(args.get("tls-cert"), mounts[tls_vol] + "/tls.crt", "--tls-cert from the Secret")
    s.check_eq(args.get("tls-key"), mounts[tls_vol] + "/tls.key", "--tls-key from the Secret")
    # Drain (25 s) fits the grace period.
    s.check(pod.get("terminationGracePeriodSeconds", 30) >= 30, "grace period covers the 25 s drain")
    pdb = ic.find(objs, "PodDisruptionBudget", "gpu-quota-admission", "kube-system")
    s.require(pdb is not None, "PodDisruptionBudget exists")
    s.check(ic.labels_match(pdb["spec"]["selector"], dep["spec"]["template"]["metadata"]["labels"]),
            "the PodDisruptionBudget selects the Deployment's pods")


@suite.test
def flags_and_env_exist(s):
    flags = ic.help_flags(s.args.binary)
    s.require("listen-http" in flags, "--help lists flags", sorted(flags))
    objs = ic.manifest_objects(s.src)
    dep = deployment(objs)
    c = container(dep)
    for a in c.get("args") or []:
        name = a[2:].partition("=")[0]
        s.check(name in flags, "Deployment flag --%s is one --help lists" % name)
    for e in c.get("env") or []:
        if e["name"].startswith("GQA_"):
            flag = e["name"][4:].lower().replace("_", "-")
            s.check(flag in flags, "Deployment variable %s is flag --%s" % (e["name"], flag))
    env = {e["name"]: e.get("value") for e in c.get("env") or []}
    s.check_eq(env.get("GQA_PLACEMENT"), "filter", "default placement filter (pairs with the drop-in scheduler-config)")
    # The listen ports are the server's default port.
    default_http = flags.get("listen-http") or ""
    s.check(default_http.endswith(":3456"), "the server's default HTTP port is 3456", default_http)
    # The Deployment's values run: the binary accepts them (on the demo state).
    tls_dir = s.tempdir("tls")
    r = ic.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", tls_dir, "--control-plane-cidr", "10.0.0.0/24"])
    s.require(r.returncode == 0, "gen-certs.sh --out works", r.stderr)
    args = []
    for a in c.get("args") or []:
        name = a[2:].partition("=")[0]
        if name in ("listen-http", "listen-https", "tls-cert", "tls-key"):
            continue    # the harness gives a free port each, and the certificate made above
        if name in ("leader-elect", "lease-namespace", "lease-name"):
            continue    # needs a cluster
        if name == "listen-probes":
            a = "--listen-probes=127.0.0.1:0"    # 8081 may be taken on this host; any free port
        args.append(a)
    https = any(a.startswith("--listen-https") for a in c.get("args") or [])
    gqa_env = {k: v for k, v in env.items() if k.startswith("GQA_")}
    # Server() fails the test (require) unless it becomes ready, and checks the clean stop.
    with ic.Server(s, https_cert=os.path.join(tls_dir, "tls.crt") if https else None,
                   https_key=os.path.join(tls_dir, "tls.key") if https else None, extra=args, env=gqa_env) as srv:
        s.check(srv.proc.poll() is None, "the binary starts with the Deployment's flags and variables")


def binary_bytes(text):
    """A byte quantity as the manifests and --help write them (512Mi, 1Gi, 2000000)."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(text).strip())
    assert m, text
    return int(m.group(1)) * {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}[m.group(2)]


@suite.test
def memory_limit_fits_the_body_budget(s):
    """The service's memory bounds (--body-budget, connections x 64 KiB) plus
    the cache at 5000 GPU nodes fit the Deployment's memory limit."""
    c = container(deployment(ic.manifest_objects(s.src)))
    limit = binary_bytes(c["resources"]["limits"]["memory"])
    flags = ic.help_flags(s.args.binary)
    env = {e["name"]: e.get("value") for e in c.get("env") or []}
    args = arg_map(c.get("args") or [])
    budget = binary_bytes(args.get("body-budget") or env.get("GQA_BODY_BUDGET") or flags["body-budget"])
    conns = int(args.get("max-connections") or env.get("GQA_MAX_CONNECTIONS") or flags["max-connections"])
    listeners = 2
    cache = 200 * 1000 * 1000
    need = budget + conns * listeners * 64 * 1024 + cache
    s.check(need <= limit, "body budget + connection buffers + cache (%d MiB) fit the %d MiB limit"
            % (need >> 20, limit >> 20))
    s.check(budget >= binary_bytes(flags["max-body-bytes"]), "the default budget holds the largest body")


@suite.test
def services(s):
    objs = ic.manifest_objects(s.src)
    dep = deployment(objs)
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    cports = {p["name"]: p["containerPort"] for p in container(dep)["ports"]}
    args = arg_map(container(dep)["args"])
    http_port = int(args["listen-http"].rsplit(":", 1)[1])
    https_port = int(args["listen-https"].rsplit(":", 1)[1])

    def target(p):
        t = p.get("targetPort", p["port"])
        return cports.get(t) if isinstance(t, str) else t

    for name in ("gpu-quota-admission", "nvidia-mps-scheduler-plugin"):
        svc = ic.find(objs, "Service", name, "kube-system")
        s.require(svc is not None, "Service kube-system/%s exists" % name)
        ports = svc["spec"]["ports"]
        s.check_eq(len(ports), 1, "%s has exactly one port" % name)
        s.check("name" not in ports[0] or ports[0]["name"] == "", "%s's port is unnamed (the service proxy's default)" % name)
        s.check_eq(target(ports[0]), http_port, "%s's port goes to the HTTP listener" % name)
        leader = dict(pod_labels, **{"gpu-admission.io/leader": "true"})
        s.check(ic.labels_match({"matchLabels": svc["spec"]["selector"]}, leader), "%s selects the leader's pod" % name)
        s.check(not ic.labels_match({"matchLabels": svc["spec"]["selector"]}, pod_labels),
                "%s does not select a replica without the leader label" % name)
        s.check(svc["spec"].get("type", "ClusterIP") == "ClusterIP", "%s is a ClusterIP Service" % name)
    a = ic.find(objs, "Service", "gpu-quota-admission", "kube-system")
    b = ic.find(objs, "Service", "nvidia-mps-scheduler-plugin", "kube-system")
    s.check_eq(a["spec"]["selector"], b["spec"]["selector"], "both extender Services select the pods the same way")
    s.check_eq(a["spec"]["ports"], b["spec"]["ports"], "both extender Services have the same port")
    wh = ic.find(objs, "Service", "gpu-quota-admission-webhook", "kube-system")
    s.require(wh is not None, "Service kube-system/gpu-quota-admission-webhook exists")
    s.check_eq([p["port"] for p in wh["spec"]["ports"]], [443], "webhook Service listens on 443")
    s.check_eq(target(wh["spec"]["ports"][0]), https_port, "webhook Service goes to the HTTPS listener")
    s.check(ic.labels_match({"matchLabels": wh["spec"]["selector"]}, pod_labels), "webhook Service selects the pods")
    # No other object selects these pods by accident (gpu-topology's pods are not selected).
    ds = ic.find(objs, "DaemonSet", "gpu-topology", "kube-system")
    for svc in (a, b, wh):
        s.check(not ic.labels_match({"matchLabels": svc["spec"]["selector"]}, ds["spec"]["template"]["metadata"]["labels"]),
                "%s does not select gpu-topology pods" % svc["metadata"]["name"])


def json6902(doc, ops):
    """The RFC 6902 operations kustomize applies (replace, add, remove) on
    plain paths, enough for the patches shipped here."""
    doc = json.loads(json.dumps(doc))
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        key = int(last) if isinstance(parent, list) and last != "-" else last
        if op["op"] == "remove":
            del parent[key]
        elif op["op"] == "add" and isinstance(parent, list):
            parent.insert(len(parent) if key == "-" else key, op["value"])
        else:
            parent[key] = op["value"]
    return doc


def rendered_network_policy(s):
    """The NetworkPolicy as kustomize renders it: the file with the patches
    manifests/kustomization.yaml applies to it."""
    np = ic.find(ic.manifest_objects(s.src), "NetworkPolicy", "gpu-quota-admission", "kube-system")
    top = ic.load_docs(s.path("manifests", "kustomization.yaml"))[0]
    for p in top.get("patches") or []:
        t = p.get("target") or {}
        if t.get("kind") == "NetworkPolicy" and t.get("name") == "gpu-quota-admission":
            np = json6902(np, ic.load_docs(s.path("manifests", p["path"]))[0])
    return np


def ports_of(rule):
    return [(p.get("protocol", "TCP"), p["port"]) for p in rule.get("ports") or []]


@suite.test
def high_availability(s):
    """Issue 9: every synced replica is Ready, so rollouts and evictions keep one serving; the leader's
    pod is found by the label it sets, from the downward API's name and namespace."""
    objs = ic.manifest_objects(s.src)
    dep = deployment(objs)
    spec = dep["spec"]
    s.check_eq(spec.get("replicas"), 2, "2 replicas")
    ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    s.check_eq((spec.get("strategy") or {}).get("type", "RollingUpdate"), "RollingUpdate", "a rolling update")
    s.check_eq(ru.get("maxUnavailable"), 0, "rollingUpdate.maxUnavailable 0: never fewer Ready pods")
    s.check(isinstance(ru.get("maxSurge"), int) and ru["maxSurge"] >= 1, "rollingUpdate.maxSurge >= 1", ru)
    pdb = ic.find(objs, "PodDisruptionBudget", "gpu-quota-admission", "kube-system")
    s.require(pdb is not None, "PodDisruptionBudget exists")
    s.check_eq(pdb["spec"].get("minAvailable"), 1, "PDB minAvailable 1")
    s.check("maxUnavailable" not in pdb["spec"], "PDB has no maxUnavailable besides", pdb["spec"])
    env = {e["name"]: e for e in container(dep).get("env") or []}
    for name, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        got = (((env.get(name) or {}).get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        s.check_eq(got, field, "%s comes from the downward API (%s)" % (name, field))
    s.check_eq(container(dep)["readinessProbe"]["httpGet"]["path"], "/readyz", "readiness on /readyz")


@suite.test
def network_policy(s):
    objs = ic.manifest_objects(s.src)
    dep = deployment(objs)
    base = ic.find(objs, "NetworkPolicy", "gpu-quota-admission", "kube-system")
    s.require(base is not None, "NetworkPolicy exists")
    np = rendered_network_policy(s)
    spec = np["spec"]
    s.check(ic.labels_match(spec["podSelector"], dep["spec"]["template"]["metadata"]["labels"]), "selects the pods")
    s.check_eq(sorted(spec.get("policyTypes") or []), ["Egress", "Ingress"], "restricts ingress and egress")
    ports = [p for r in spec.get("ingress") or [] for p in ports_of(r)]
    s.check_eq(sorted(ports), [("TCP", 3443), ("TCP", 3456)], "ingress only to the two listeners")
    s.check(all(r.get("ports") for r in spec.get("ingress") or []), "every ingress rule names its ports")
    # Port 3456 (the verbs, which patch and bind pods) admits only listed
    # sources: every rule that opens it has a non-empty from, and each source
    # is an ipBlock or a namespace named by label (never {} = everything).
    verb_rules = [r for r in spec["ingress"] if ("TCP", 3456) in ports_of(r)]
    s.check(verb_rules and all(r.get("from") for r in verb_rules), "3456 admits only listed sources", verb_rules)
    for r in verb_rules:
        for src in r.get("from") or []:
            ok = ("ipBlock" in src and src["ipBlock"].get("cidr")) or \
                 (src.get("namespaceSelector", {}).get("matchLabels") or src.get("namespaceSelector", {}).get(
                     "matchExpressions"))
            s.check(bool(ok), "a 3456 source is an ipBlock or a labelled namespace", src)
            s.check(src.get("ipBlock", {}).get("cidr") not in ("0.0.0.0/0", "::/0"), "no 3456 source is everything",
                    src)
    # The patch is where operators list them (the control-plane CIDR), and
    # the unpatched file fails closed (a documentation range only).
    patch = ic.load_docs(s.path("manifests", "networkpolicy-sources.yaml"))[0]
    s.check_eq([(o["op"], o["path"]) for o in patch], [("replace", "/spec/ingress/0/from")],
               "networkpolicy-sources.yaml replaces the sources of rule 0")
    s.check_eq(ports_of(base["spec"]["ingress"][0]), [("TCP", 3456)], "rule 0 of the file is the 3456 rule")
    s.check(any("ipBlock" in src for src in patch[0]["value"]), "the patch lists an ipBlock (control-plane CIDR)")
    s.check_eq([src.get("ipBlock", {}).get("cidr") for src in base["spec"]["ingress"][0]["from"]],
               ["192.0.2.0/24"], "unpatched, 3456 admits only a documentation range (nobody)")
    cmd = ic.kubectl_kustomize()
    if cmd:
        r = ic.run(cmd + [s.path("manifests")])
        built = [d for d in ic.yaml.safe_load_all(r.stdout) if d] if r.returncode == 0 else []
        got = next((o for o in built if o["kind"] == "NetworkPolicy"), None)
        s.check(got is not None and got["spec"] == spec, "kustomize renders the same policy", got)
    eports = sorted((p.get("protocol", "TCP"), p["port"]) for r in spec.get("egress") or [] for p in r.get("ports") or [])
    s.check_eq(eports, [("TCP", 53), ("TCP", 443), ("TCP", 6443), ("UDP", 53)], "egress: API server and DNS only")
    s.check(all(r.get("ports") for r in spec.get("egress") or []), "every egress rule names its ports")
    dns = [r for r in spec["egress"] if any(p["port"] == 53 for p in r["ports"])]
    s.check(all(r.get("to") for r in dns), "DNS egress goes only to the cluster DNS pods")


@suite.test
def webhooks(s):
    objs = ic.manifest_objects(s.src)
    v = ic.find(objs, "ValidatingWebhookConfiguration", "gpu-quota-admission")
    m = ic.find(objs, "MutatingWebhookConfiguration", "gpu-quota-admission")
    s.require(v is not None and m is not None, "both webhook configurations exist")
    dep = deployment(objs)
    own = dep["spec"]["template"]["metadata"]["labels"]
    system_ns = {"kubernetes.io/metadata.name": "kube-system"}
    public_ns = {"kubernetes.io/metadata.name": "kube-public"}
    team_ns = {"kubernetes.io/metadata.name": "team-a"}
    crl_labels = {"features.alauda.io/type": "CustomResourceLimitation"}
    by = {}
    for cfg in (v, m):
        for h in cfg["webhooks"]:
            s.check("caBundle" not in h.get("clientConfig", {}), "%s: caBundle left to gen-certs/cert-manager" % h["name"])
            for r in h["rules"]:
                for res in r["resources"]:
                    by.setdefault((cfg["kind"], res), []).append(h)
    crl = by.get(("ValidatingWebhookConfiguration", "configmaps"), [])
    s.require(len(crl) == 1, "one validating webhook for ConfigMaps")
    h = crl[0]
    s.check_eq(h["clientConfig"]["service"]["path"], "/admission/validate", "ConfigMaps -> /admission/validate")
    s.check_eq(sorted(h["rules"][0]["operations"]), ["CREATE", "UPDATE"], "ConfigMaps on CREATE and UPDATE")
    s.check_eq(h["failurePolicy"], "Fail", "ConfigMaps fail closed")
    s.check(ic.labels_match(h["namespaceSelector"], public_ns), "ConfigMaps in kube-public are sent")
    s.check(not ic.labels_match(h["namespaceSelector"], system_ns), "kube-system ConfigMaps are not sent")
    s.check(not ic.labels_match(h["namespaceSelector"], team_ns), "other namespaces' ConfigMaps are not sent")
    s.check(ic.labels_match(h.get("objectSelector") or {}, crl_labels), "CRL-labelled ConfigMaps are sent")
    s.check(not ic.labels_match(h.get("objectSelector") or {}, {}), "cluster-info (no CRL label) is not sent")
    pods_v = by.get(("ValidatingWebhookConfiguration", "pods"), [])
    pods_m = by.get(("MutatingWebhookConfiguration", "pods"), [])
    s.require(len(pods_v) == 1 and len(pods_m) == 1, "one validating and one mutating webhook for pods")
    for h, path in ((pods_v[0], "/admission/validate"), (pods_m[0], "/admission/mutate")):
        s.check_eq(h["clientConfig"]["service"]["path"], path, "%s -> %s" % (h["name"], path))
        s.check_eq(h["failurePolicy"], "Ignore", "%s: pods fail open" % h["name"])
        s.check("CREATE" in h["rules"][0]["operations"], "%s: pods on CREATE" % h["name"])
        s.check(not ic.labels_match(h["namespaceSelector"], system_ns), "%s: kube-system is out" % h["name"])
        s.check(ic.labels_match(h["namespaceSelector"], team_ns), "%s: user namespaces are in" % h["name"])
        s.check(not ic.labels_match(h.get("objectSelector") or {}, own), "%s: the service's own pods are out" % h["name"])
        s.check(ic.labels_match(h.get("objectSelector") or {}, {"app": "x"}), "%s: other pods are in" % h["name"])
    # gen-certs.sh's offline caBundle patch names exactly these webhooks.
    with open(s.path("scripts", "gen-certs.sh")) as f:
        script = f.read()
    vnames = re.search(r'^VALIDATING_WEBHOOKS="([^"]*)"', script, re.M).group(1).split()
    mnames = re.search(r'^MUTATING_WEBHOOKS="([^"]*)"', script, re.M).group(1).split()
    s.check_eq(sorted(vnames), sorted(h["name"] for h in v["webhooks"]), "gen-certs.sh knows the validating webhooks")
    s.check_eq(sorted(mnames), sorted(h["name"] for h in m["webhooks"]), "gen-certs.sh knows the mutating webhooks")


@suite.test
def gpu_topology_daemonset(s):
    objs = ic.manifest_objects(s.src)
    ds = ic.find(objs, "DaemonSet", "gpu-topology", "kube-system")
    s.require(ds is not None, "DaemonSet kube-system/gpu-topology exists")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    s.check_eq(pod.get("serviceAccountName"), "gpu-topology", "its own ServiceAccount")
    s.check(c.get("command", [""])[0].endswith("gpu-topology"), "runs gpu-topology")
    s.check("--patch-node=$(NODE_NAME)" in (c.get("args") or []), "--patch-node $(NODE_NAME)")
    env = {e["name"]: e for e in c.get("env") or []}
    s.check_eq(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath"), "spec.nodeName",
               "NODE_NAME from spec.nodeName")
    terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    s.check(bool(terms) or bool(pod.get("nodeSelector")), "GPU nodes only (required node affinity)")

    def node_ok(labels):
        if pod.get("nodeSelector") and not all(labels.get(k) == v for k, v in pod["nodeSelector"].items()):
            return False
        return not terms or any(ic.labels_match({"matchExpressions": t.get("matchExpressions") or []}, labels)
                                for t in terms)

    s.check(node_ok({"nvidia.com/gpu.present": "true"}), "a node labelled by GPU feature discovery gets it")
    s.check(node_ok({"nvidia-device-enable": "enable"}), "a GPU-Manager node gets it")
    s.check(not node_ok({"kubernetes.io/hostname": "cpu-0"}), "a CPU node does not")
    s.check(not any(k for k in ((c.get("resources") or {}).get("limits") or {}) if k in GPU_RESOURCES),
            "asks for no GPU resource")
    # The flags exist, when gpu-topology is built next to gpu-quota-admission.
    topo = os.path.join(os.path.dirname(s.args.binary), "gpu-topology")
    if os.access(topo, os.X_OK):
        r = ic.run([topo, "--help"])
        for a in c.get("args") or []:
            flag = a.partition("=")[0]
            s.check(flag in r.stdout + r.stderr, "gpu-topology --help lists %s" % flag)
    else:
        s.skip("gpu-topology flags", "no gpu-topology binary next to %s" % s.args.binary)
    csc = c.get("securityContext") or {}
    s.check(csc.get("allowPrivilegeEscalation") is False and csc.get("readOnlyRootFilesystem") is True
            and (csc.get("capabilities") or {}).get("drop") == ["ALL"], "hardened container")
    s.check(csc.get("privileged") is not True, "not privileged")
    s.check(not pod.get("hostNetwork") and not pod.get("hostPID"), "no host namespaces")


# ---------------------------------------------------------------------------
# CustomResourceLimitation and quota ConfigMaps (design.md sections 6 and 7)
# ---------------------------------------------------------------------------

EXT_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def crl_problems(cm):
    """design.md section 7's rules for one ConfigMap."""
    p = []
    md, data = cm.get("metadata") or {}, cm.get("data") or {}
    labels = md.get("labels") or {}
    if md.get("namespace") != "kube-public":
        p.append("namespace")
    key = data.get("key", "")
    if not EXT_RESOURCE.match(key) or key.split("/")[0].endswith("kubernetes.io"):
        p.append("key")
    key_name = re.sub(r"[^a-z0-9-]", "-", key.rsplit("/", 1)[-1])
    if not re.match(r"^cf-crl-[a-z0-9]([-a-z0-9]*[a-z0-9])?-" + re.escape(key_name) + "$", md.get("name", "")):
        p.append("name")
    if labels.get("features.alauda.io/type") != "CustomResourceLimitation":
        p.append("type label")
    if labels.get("features.alauda.io/enabled") not in ("true", "false"):
        p.append("enabled label")
    if not labels.get("features.alauda.io/group") or labels.get("features.alauda.io/group") != data.get("group"):
        p.append("group")
    if data.get("dataType") != "integer":
        p.append("dataType")
    if data.get("limits") not in ("disabled", "required", "optional"):
        p.append("limits")
    if data.get("requests") not in ("disabled", "required", "fromLimits"):
        p.append("requests")
    dv = data.get("defaultValue", "")
    if dv and not re.match(r"^[0-9]+$", dv):
        p.append("defaultValue")
    if data.get("limits") == "optional" and not dv:
        p.append("defaultValue needed for an optional limit")
    if data.get("limits") == "disabled" and data.get("requests") == "fromLimits":
        p.append("limits disabled with requests fromLimits")
    for k in ("descriptionZh", "descriptionEn"):
        if k not in data:
            p.append(k)
    return p


@suite.test
def crl_configmaps(s):
    objs = ic.manifest_objects(s.src)
    crls = [o for _, o in objs if o["kind"] == "ConfigMap" and o["metadata"].get("namespace") == "kube-public"]
    keys = {}
    for cm in crls:
        name = cm["metadata"]["name"]
        s.check_eq(crl_problems(cm), [], "%s follows design.md section 7" % name)
        if cm["metadata"]["labels"].get("features.alauda.io/enabled") == "true":
            s.check(cm["data"]["key"] not in keys, "%s: one enabled CRL per key" % name)
            keys[cm["data"]["key"]] = cm
    s.check_eq(sorted(keys), sorted(["tencent.com/vcuda-core", "tencent.com/vcuda-memory", "nvidia.com/mps-core",
                                     "nvidia.com/mps-memory"]), "CRLs for vcuda-core, vcuda-memory, mps-core, mps-memory")
    groups = {k: cm["metadata"]["labels"]["features.alauda.io/group"] for k, cm in keys.items()}
    s.check(groups.get("tencent.com/vcuda-core") == groups.get("tencent.com/vcuda-memory") == "gpu-manager",
            "vcuda keys form the gpu-manager group", groups)
    s.check(groups.get("nvidia.com/mps-core") == groups.get("nvidia.com/mps-memory") != "gpu-manager",
            "mps keys form their own group", groups)
    # vcuda-core is the documented example, unchanged.
    copy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "crl-vcuda-core.yaml")
    ref_path = os.path.join(os.path.dirname(s.src), "shared", "reference", "crl-vcuda-core.yaml")
    if os.path.exists(ref_path):
        s.check_eq(ic.load_docs(copy)[0], ic.load_docs(ref_path)[0], "fixtures/ holds the documented CRL")
    s.check_eq(keys.get("tencent.com/vcuda-core"), ic.load_docs(copy)[0], "vcuda-core CRL equals the documented example")
    # The rule checker itself catches a broken CRL.
    broken = json.loads(json.dumps(keys["tencent.com/vcuda-core"]))
    broken["data"]["limits"] = "disabled"
    broken["data"]["requests"] = "fromLimits"
    broken["metadata"]["name"] = "cf-crl-gpu-manager-vcuda-cores"
    s.check(len(crl_problems(broken)) >= 2, "the checker refuses a broken CRL", crl_problems(broken))
    # The service's own validator, when this build has it.
    if "validate-crl" in ic.help_text(s.args.binary):
        files = [f for f in ic.kustomization_resources(s.path("manifests", "crl"))]
        r = ic.run([s.args.binary, "validate-crl"] + files)
        s.check(r.returncode == 0, "gpu-quota-admission validate-crl accepts the CRLs", r.stdout + r.stderr)
    else:
        s.skip("validate-crl", "this build has no validate-crl subcommand yet")


@suite.test
def quota_example(s):
    path = s.path("manifests", "examples", "gpu-quota.yaml")
    cm = ic.load_docs(path)[0]
    s.check_eq((cm["metadata"]["namespace"], cm["metadata"]["name"]), ("kube-system", "gpu-quota"),
               "the example is the default --quota-configmap")
    flags = ic.help_flags(s.args.binary)
    if flags.get("quota-configmap"):
        s.check_eq(flags["quota-configmap"], "kube-system/gpu-quota", "the server's default quota ConfigMap")
    q = json.loads(cm["data"]["gpu_quota"])
    s.check(isinstance(q, dict) and q, "gpu_quota is a JSON object")
    for ns, entry in q.items():
        s.check(bool(DNS1123_LABEL.match(ns)), "quota namespace %r" % ns)
        s.check(set(entry) == {"pool", "quota"}, "%s: pool and quota" % ns)
        s.check(isinstance(entry["pool"], list) and all(isinstance(p, str) for p in entry["pool"]), "%s: pools" % ns)
        s.check(all(isinstance(v, int) and v >= 0 for v in entry["quota"].values()), "%s: whole GPUs per model" % ns)
    role = ic.find(ic.manifest_objects(s.src), "Role", "gpu-quota-admission-quota", "kube-system")
    s.check_eq(role["rules"][0].get("resourceNames"), [cm["metadata"]["name"]], "the quota Role names this ConfigMap")


if __name__ == "__main__":
    sys.exit(suite.main())
