#!/usr/bin/env python3
"""apisim against a real Kubernetes client: Debian's python3-kubernetes, over HTTPS with a bearer token.

Needs `apt-get install -y python3-kubernetes`, which installs into Debian's /usr/bin/python3; when started
by another interpreter (pyenv, a venv) that lacks the package, this script re-runs itself with /usr/bin/python3.
"""
import json
import os
import sys
import tempfile
import threading
import time

DEBIAN_PYTHON = "/usr/bin/python3"

try:
    import kubernetes  # noqa: F401
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and os.path.exists(DEBIAN_PYTHON) \
            and not os.environ.get("APISIM_REEXEC"):
        os.environ["APISIM_REEXEC"] = "1"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
    print("python3-kubernetes is not installed: apt-get install -y python3-kubernetes (for %s)" % DEBIAN_PYTHON)
    print("0 passed, 1 failed")
    sys.exit(1)

from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

TMP = tempfile.mkdtemp(prefix="apisim-kc-")
PKI = apisim.make_pki(os.path.join(TMP, "pki"))
TOKEN = "kube-client-token"
NS = "gpu-team"


class Env:
    def __init__(self, **kw):
        self.sim = apisim.APISim(tokens=[TOKEN], tls_cert=PKI["server_cert"], tls_key=PKI["server_key"], **kw).start()
        kc = self.sim.write_kubeconfig(os.path.join(TMP, "kubeconfig-%d" % self.sim.port), token=TOKEN, ca_file=PKI["ca"])
        self.api_client = config.new_client_from_config(config_file=kc)
        self.core = client.CoreV1Api(self.api_client)
        self.coord = client.CoordinationV1Api(self.api_client)

    def close(self):
        self.api_client.close()
        self.sim.stop()


def make_pod(name, gpu="50"):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "train"}),
        spec=client.V1PodSpec(containers=[client.V1Container(
            name="main", image="cuda:12",
            resources=client.V1ResourceRequirements(limits={"tencent.com/vcuda-core": gpu}))]))


def test_list_get_create_delete():
    env = Env()
    try:
        env.sim.upsert({"kind": "Node", "metadata": {"name": "gpu-node-1", "labels": {"gpu": "true"}},
                        "status": {"allocatable": {"tencent.com/vcuda-core": "400"}}})
        nodes = env.core.list_node(label_selector="gpu=true")
        assert [n.metadata.name for n in nodes.items] == ["gpu-node-1"]
        assert nodes.items[0].status.allocatable == {"tencent.com/vcuda-core": "400"}
        assert int(nodes.metadata.resource_version) > 0
        created = env.core.create_namespaced_pod(NS, make_pod("p1"))
        assert created.metadata.uid and created.status.phase == "Pending"
        got = env.core.read_namespaced_pod("p1", NS)
        assert got.spec.containers[0].resources.limits == {"tencent.com/vcuda-core": "50"}
        pods = env.core.list_pod_for_all_namespaces(field_selector="status.phase!=Succeeded,status.phase!=Failed")
        assert [p.metadata.name for p in pods.items] == ["p1"]
        try:
            env.core.create_namespaced_pod(NS, make_pod("p1"))
        except ApiException as e:
            assert e.status == 409 and json.loads(e.body)["reason"] == "AlreadyExists"
        else:
            raise AssertionError("expected 409")
        deleted = env.core.delete_namespaced_pod("p1", NS)
        assert deleted.metadata.name == "p1"
        try:
            env.core.read_namespaced_pod("p1", NS)
        except ApiException as e:
            assert e.status == 404 and json.loads(e.body)["reason"] == "NotFound"
        else:
            raise AssertionError("expected 404")
        # a wrong token is a 401 ApiException
        bad = client.Configuration()
        bad.host = env.sim.url
        bad.ssl_ca_cert = PKI["ca"]
        bad.api_key = {"authorization": "Bearer wrong"}
        with client.ApiClient(bad) as ac:
            try:
                client.CoreV1Api(ac).list_node()
            except ApiException as e:
                assert e.status == 401
            else:
                raise AssertionError("expected 401")
    finally:
        env.close()


def test_watch_stream():
    env = Env(bookmark_interval=0.3)
    try:
        env.core.create_namespaced_pod(NS, make_pod("a"))
        rv = env.core.list_namespaced_pod(NS).metadata.resource_version
        env.core.create_namespaced_pod(NS, make_pod("b"))

        def later():
            # Not synchronisation: the watch replays from rv, so these two
            # changes arrive in this order whether they happen before or
            # after it starts; the pause only lets them come live, usually.
            time.sleep(0.3)
            env.sim.set_pod_phase(NS, "a", "Succeeded")
            env.core.delete_namespaced_pod("b", NS)
        t = threading.Thread(target=later)
        t.start()
        w = watch.Watch()
        seen = []
        t0 = time.time()
        for ev in w.stream(env.core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=2,
                           field_selector="status.phase!=Succeeded,status.phase!=Failed"):
            seen.append((ev["type"], ev["object"].metadata.name))
        t.join()
        assert time.time() - t0 >= 1.8, time.time() - t0  # ended by timeout_seconds (no upper bound: load)
        # b replayed from RV; a leaves the selector (DELETED); b deleted
        assert seen == [("ADDED", "b"), ("DELETED", "a"), ("DELETED", "b")], seen
        assert isinstance(ev["object"], client.V1Pod)
        # nodes, with bookmarks
        env.sim.upsert({"kind": "Node", "metadata": {"name": "n1"}})
        types = [ev["type"] for ev in watch.Watch().stream(env.core.list_node, resource_version="0",
                                                           allow_watch_bookmarks=True, timeout_seconds=1)]
        assert types[0] == "ADDED" and types.count("BOOKMARK") >= 2, types
        # 410 after compaction: the client raises ApiException(410)
        old = env.core.list_node().metadata.resource_version
        env.sim.upsert({"kind": "Node", "metadata": {"name": "n2"}})
        env.sim.compact()
        try:
            for _ in watch.Watch().stream(env.core.list_node, resource_version=old, timeout_seconds=2):
                pass
        except ApiException as e:
            assert e.status == 410 and "Expired" in e.reason and "too old resource version" in e.reason, e.reason
        else:
            raise AssertionError("expected ApiException 410")
    finally:
        env.close()


def test_patch_strategic_by_default():
    env = Env()
    try:
        env.core.create_namespaced_pod(NS, make_pod("p"))
        out = env.core.patch_namespaced_pod("p", NS, {"metadata": {"annotations": {
            "tencent.com/predicate-node": "gpu-node-1", "tencent.com/predicate-gpu-idx-0": "0",
            "tencent.com/gpu-assigned": "false"}}})
        assert out.metadata.annotations["tencent.com/predicate-node"] == "gpu-node-1"
        log = [r for r in env.sim.requests() if r["method"] == "PATCH"]
        assert log[-1]["contentType"] == "application/strategic-merge-patch+json", log[-1]
        # a list body is a JSON patch
        env.core.patch_namespaced_pod("p", NS, [{"op": "remove",
                                                 "path": "/metadata/annotations/tencent.com~1gpu-assigned"}])
        assert env.sim.requests()[-1]["contentType"] == "application/json-patch+json"
        got = env.core.read_namespaced_pod("p", NS)
        assert "tencent.com/gpu-assigned" not in got.metadata.annotations
        # resourceVersion precondition -> 409
        try:
            env.core.patch_namespaced_pod("p", NS, {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}})
        except ApiException as e:
            assert e.status == 409 and json.loads(e.body)["reason"] == "Conflict"
        else:
            raise AssertionError("expected 409")
        # status through the status subresource
        st = env.core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Running"}})
        assert st.status.phase == "Running"
    finally:
        env.close()


def test_binding():
    env = Env()
    try:
        env.core.create_namespaced_pod(NS, make_pod("bind-me"))
        body = client.V1Binding(metadata=client.V1ObjectMeta(name="bind-me"),
                                target=client.V1ObjectReference(api_version="v1", kind="Node", name="gpu-node-1"))
        resp = env.core.create_namespaced_pod_binding("bind-me", NS, body, _preload_content=False)
        assert resp.status == 201
        st = json.loads(resp.data)
        assert st["kind"] == "Status" and st["status"] == "Success"
        assert env.core.read_namespaced_pod("bind-me", NS).spec.node_name == "gpu-node-1"
        try:
            env.core.create_namespaced_pod_binding("bind-me", NS, body, _preload_content=False)
        except ApiException as e:
            assert e.status == 409 and "already assigned" in json.loads(e.body)["message"]
        else:
            raise AssertionError("expected 409 on second bind")
        # the client's known quirk: the Status answer does not deserialise into V1Binding
        env.core.create_namespaced_pod(NS, make_pod("quirk"))
        body.metadata.name = "quirk"
        try:
            env.core.create_namespaced_pod_binding("quirk", NS, body)
        except ValueError as e:
            assert "target" in str(e)
        assert env.core.read_namespaced_pod("quirk", NS).spec.node_name == "gpu-node-1"  # bound all the same
    finally:
        env.close()


def test_lease():
    env = Env()
    try:
        spec = client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15)
        created = env.coord.create_namespaced_lease("kube-system", client.V1Lease(
            metadata=client.V1ObjectMeta(name="gpu-quota-admission"), spec=spec))
        stale_rv = created.metadata.resource_version
        created.spec.holder_identity = "a"
        created.spec.lease_transitions = 1
        renewed = env.coord.replace_namespaced_lease("gpu-quota-admission", "kube-system", created)
        assert renewed.metadata.resource_version != stale_rv and renewed.spec.lease_transitions == 1
        takeover = env.coord.read_namespaced_lease("gpu-quota-admission", "kube-system")
        takeover.metadata.resource_version = stale_rv
        takeover.spec.holder_identity = "b"
        try:
            env.coord.replace_namespaced_lease("gpu-quota-admission", "kube-system", takeover)
        except ApiException as e:
            assert e.status == 409 and json.loads(e.body)["reason"] == "Conflict"
        else:
            raise AssertionError("expected 409")
        assert env.coord.read_namespaced_lease("gpu-quota-admission", "kube-system").spec.holder_identity == "a"
    finally:
        env.close()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only,
                     cleanup=[TMP])
