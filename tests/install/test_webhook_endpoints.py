#!/usr/bin/env python3
"""The webhook configurations in manifests/webhooks.yaml reach working
endpoints: for every webhook, an AdmissionReview v1 of the kind its rules
select is POSTed the way the API server sends it (HTTPS on the listener the
webhook Service targets, the webhook's path, certificate from
scripts/gen-certs.sh verified for the Service's DNS name) and the answer is an
AdmissionReview v1 response echoing the uid. The documented CRL is allowed and
a CRL breaking a rule is denied, so failurePolicy Fail on ConfigMaps does not
lock out valid CRLs."""

import json
import os
import socket
import ssl
import sys
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_webhook_endpoints")
NAME = "gpu-quota-admission-webhook.kube-system.svc"


def post(port, cafile, path, body):
    ctx = ssl.create_default_context(cafile=cafile)
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=NAME) as tls:
            tls.sendall(("POST %s?timeout=5s HTTP/1.1\r\nHost: %s:443\r\nContent-Type: application/json\r\n"
                         "Accept: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % (path, NAME, len(data))).encode() + data)
            resp = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                resp += chunk
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body.decode("utf-8", "replace")


def review(kind, resource, namespace, operation, obj, old=None):
    group_version = {"Pod": ("", "v1"), "ConfigMap": ("", "v1")}[kind]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group_version[0], "version": group_version[1], "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": resource},
            "requestKind": {"group": group_version[0], "version": group_version[1], "kind": kind},
            "requestResource": {"group": "", "version": "v1", "resource": resource},
            "name": obj["metadata"].get("name", ""),
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def gpu_pod():
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "vcuda-share", "namespace": "team-a"},
            "spec": {"containers": [{"name": "app", "image": "busybox",
                                     "resources": {"limits": {"tencent.com/vcuda-core": "50"}}}]}}


@suite.test
def every_webhook_answers(s):
    certs = s.tempdir("certs")
    r = ic.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", certs, "--control-plane-cidr", "10.0.0.0/24"])
    s.require(r.returncode == 0, "gen-certs.sh", r.stderr)
    ca = os.path.join(certs, "ca.crt")
    objs = ic.manifest_objects(s.src)
    crl = ic.find(objs, "ConfigMap", "cf-crl-gpu-manager-vcuda-core", "kube-public")
    broken = json.loads(json.dumps(crl))
    broken["data"]["limits"] = "sometimes"
    with ic.Server(s, https_cert=os.path.join(certs, "tls.crt"), https_key=os.path.join(certs, "tls.key")) as srv:
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            cfg = ic.find(objs, kind, "gpu-quota-admission")
            for h in cfg["webhooks"]:
                path = h["clientConfig"]["service"]["path"]
                resource = h["rules"][0]["resources"][0]
                if resource == "configmaps":
                    cases = [("documented CRL", crl, True), ("CRL with limits: sometimes", broken, False)]
                    ns = "kube-public"
                else:
                    cases = [("GPU pod", gpu_pod(), None)]
                    ns = "team-a"
                for what, obj, allowed in cases:
                    rv = review("ConfigMap" if resource == "configmaps" else "Pod", resource, ns, "CREATE", obj)
                    try:
                        status, body = post(srv.https_port, ca, path, rv)
                    except (ssl.SSLError, OSError) as e:
                        s.check(False, "%s: %s over verified HTTPS" % (h["name"], what), str(e))
                        continue
                    s.check_eq(status, 200, "%s: %s -> %s answers 200" % (h["name"], what, path))
                    try:
                        out = json.loads(body)
                    except ValueError:
                        s.check(False, "%s: %s answer is JSON" % (h["name"], what), body)
                        continue
                    s.check_eq((out.get("apiVersion"), out.get("kind")), ("admission.k8s.io/v1", "AdmissionReview"),
                               "%s: %s answer is an AdmissionReview v1" % (h["name"], what))
                    resp = out.get("response") or {}
                    s.check_eq(resp.get("uid"), rv["request"]["uid"], "%s: %s uid echoed" % (h["name"], what))
                    s.check(isinstance(resp.get("allowed"), bool), "%s: %s allowed is set" % (h["name"], what))
                    if allowed is not None:
                        s.check_eq(resp.get("allowed"), allowed, "%s: %s allowed=%s" % (h["name"], what, allowed))
                    if "patch" in resp:
                        s.check_eq(resp.get("patchType"), "JSONPatch", "%s: patchType JSONPatch" % h["name"])


if __name__ == "__main__":
    sys.exit(suite.main())
