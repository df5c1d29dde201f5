"""Where tests/apisim and the real kube-apiserver answer the same requests
differently: a tool, not a test (run it by hand; it exits 0):

    KUBEBUILDER_ASSETS=DIR python3 tests/realcp/compare_apisim.py

It starts the simulator and a real control plane (controlplane.py), sends
both the same requests a GPU scheduler's client makes, and prints both
answers for each. The differences it showed are listed in tests/realcp/README.md.
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "apisim"))
import apisim  # noqa: E402
from controlplane import Client, ControlPlane, skip_unless_assets  # noqa: E402

skip_unless_assets()
tmp = tempfile.mkdtemp(prefix="compare-apisim-")
pkidir = os.path.join(tmp, "pki")
os.makedirs(pkidir)
apisim.make_pki(pkidir)
sim = apisim.APISim(tokens=["t"], tls_cert=pkidir + "/server.crt", tls_key=pkidir + "/server.key")
sim.start()
port = int(sim.url.rsplit(":", 1)[1])
simc = Client(port, pkidir + "/ca.crt", token="t")
cp = ControlPlane()
cp.start()
real = cp.admin

def both(name, method, path, body=None, ct="application/json"):
    out = {}
    for label, c in (("real", real), ("sim", simc)):
        try:
            st, data = c.request(method, path, body, content_type=ct, ok=None, raw=True)
            try:
                d = json.loads(data)
            except ValueError:
                d = data[:300]
            out[label] = (st, d)
        except Exception as e:   # noqa: BLE001 - printed
            out[label] = ("EXC", str(e)[:200])
    return out

def show(name, out, pick=lambda d: d):
    r, s = out["real"], out["sim"]
    print("==", name)
    print("  real:", r[0], json.dumps(pick(r[1]))[:400] if not isinstance(r[1], bytes) else r[1])
    print("  sim: ", s[0], json.dumps(pick(s[1]))[:400] if not isinstance(s[1], bytes) else s[1])

for c in (real, simc):
    c.request("POST", "/api/v1/namespaces", {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"nosa"}}, ok=None)
pod = {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}}
show("pod in a namespace without the default ServiceAccount", both("", "POST", "/api/v1/namespaces/nosa/pods", pod), lambda d: d.get("message") if isinstance(d, dict) else d)
o = both("", "POST", "/api/v1/namespaces/default/pods", pod)
show("pod limits-only: requests defaulted?", o, lambda d: d.get("spec", {}).get("containers", [{}])[0].get("resources") if isinstance(d, dict) else d)
show("pod defaults: schedulerName, tolerations, qosClass, priority", o, lambda d: [d.get("spec", {}).get("schedulerName"), d.get("spec", {}).get("tolerations"), d.get("status", {}).get("qosClass"), d.get("spec", {}).get("priority")] if isinstance(d, dict) else d)
show("managedFields present", o, lambda d: bool(d.get("metadata", {}).get("managedFields")) if isinstance(d, dict) else d)
node = {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}
show("node create: taints", both("", "POST", "/api/v1/nodes", node), lambda d: d.get("spec", {}).get("taints") if isinstance(d, dict) else d)
b = {"apiVersion":"v1","kind":"Binding","metadata":{"name":"p1"},"target":{"kind":"Node","name":"n1"}}
show("binding", both("", "POST", "/api/v1/namespaces/default/pods/p1/binding", b))
show("binding again", both("", "POST", "/api/v1/namespaces/default/pods/p1/binding", b), lambda d: d.get("message") if isinstance(d, dict) else d)
show("binding to a missing pod", both("", "POST", "/api/v1/namespaces/default/pods/nope/binding", dict(b, metadata={"name":"nope"})), lambda d: (d.get("reason"), d.get("message")) if isinstance(d, dict) else d)
show("service proxy to a missing service", both("", "GET", "/api/v1/namespaces/kube-system/services/gpu-quota-admission/proxy/readyz"), lambda d: d.get("message") if isinstance(d, dict) else d)
for c in (real, simc):
    c.request("POST", "/api/v1/namespaces/kube-system/services", {"apiVersion":"v1","kind":"Service","metadata":{"name":"noep"},"spec":{"ports":[{"port":80}]}}, ok=None)
show("service proxy to a service without endpoints", both("", "GET", "/api/v1/namespaces/kube-system/services/noep/proxy/readyz"), lambda d: d.get("message") if isinstance(d, dict) else d)
show("merge patch annotation null on missing key", both("", "PATCH", "/api/v1/namespaces/default/pods/p1", {"metadata":{"annotations":{"x":None}}}, "application/merge-patch+json"), lambda d: d.get("metadata", {}).get("annotations") if isinstance(d, dict) else d)
show("patch with stale resourceVersion", both("", "PATCH", "/api/v1/namespaces/default/pods/p1", {"metadata":{"resourceVersion":"1","annotations":{"y":"1"}}}, "application/merge-patch+json"), lambda d: (d.get("reason"), d.get("message")) if isinstance(d, dict) else d)
show("list pods fieldSelector spec.nodeName", both("", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"), lambda d: [i["metadata"]["name"] for i in d.get("items", [])] if isinstance(d, dict) else d)
show("list pods unsupported fieldSelector", both("", "GET", "/api/v1/pods?fieldSelector=metadata.annotations%3Dx"), lambda d: d.get("message") if isinstance(d, dict) else d)
show("delete pod bound (graceful default)", both("", "DELETE", "/api/v1/namespaces/default/pods/p1"), lambda d: [d.get("metadata", {}).get("deletionTimestamp") is not None, d.get("metadata", {}).get("deletionGracePeriodSeconds")] if isinstance(d, dict) else d)
cp.stop()
sim.stop()
shutil.rmtree(tmp, ignore_errors=True)
