"""Every shipped KubeSchedulerConfiguration (scheduler-config/*/*.yaml) loaded
by a real kube-scheduler that reads its apiVersion (strict decoding: v1 by
kube-scheduler v1.31, v1beta2 and v1beta3 by kube-scheduler-v1.27.16), with
GPU pods flowing through it (issue 23 item 3):

- through the URL the files ship: the API server's service proxy,
  https://APISERVER/api/v1/namespaces/kube-system/services/<svc>/proxy/scheduler,
  with the Services of manifests/services.yaml, Endpoints naming a stand-in
  pod, and a client certificate that has only the Role of
  scheduler-config/README.md;
- and straight to the service (http://127.0.0.1:PORT/scheduler).

drop-in files run against --placement filter, recommended and hami against
--placement bind, as scheduler-config/README.md says.

python3 test_scheduler_configs.py --binary build/release/gpu-quota-admission --source-dir .
"""

import os
import re

from realcp_suite import (RealcpSuite, add_demo_nodes, annotations, load_shipped_config, runnable_config,
                          yaml)
from controlplane import find_binary

suite = RealcpSuite("realcp scheduler-config")

SCHEDULER_FOR = {"v1": "kube-scheduler", "v1beta3": "kube-scheduler-v1.27.16",
                 "v1beta2": "kube-scheduler-v1.27.16"}
VARIANTS = ("drop-in", "recommended", "hami")
EXTENDER_USER = "realcp-extender-client"


def readme_role(source_dir):
    """The Role in scheduler-config/README.md's yaml block."""
    with open(os.path.join(source_dir, "scheduler-config", "README.md")) as f:
        text = f.read()
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and doc.get("kind") == "Role":
            return doc
    raise AssertionError("no Role in scheduler-config/README.md")


def proxy_status(s, key, crt, service="gpu-quota-admission"):
    """HTTP status of GET .../services/<service>/proxy/readyz as the extender client."""
    from controlplane import Client
    c = Client(s.cp.api_port, s.cp.pki.ca_crt, crt, key)
    status, _ = c.request("GET", "/api/v1/namespaces/kube-system/services/%s/proxy/readyz" % service,
                          ok=None, raw=True)
    return status


@suite.test
def test_setup_services_and_role(s):
    """Services from manifests/services.yaml, the extender client's
    certificate, and the README's Role: refused before it, allowed after."""
    cp = s.cp
    add_demo_nodes(cp, s.source_dir)
    cp.kubectl("apply", "-f", os.path.join(s.source_dir, "manifests", "services.yaml"))
    s.client = cp.client_cert("extender-client", EXTENDER_USER)
    s.prod = None
    start_product(s, "filter")
    key, crt = s.client
    s.check_eq(proxy_status(s, key, crt), 403, "the extender client may not use the service proxy before the Role")
    role = readme_role(s.source_dir)
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": role["metadata"]["name"], "namespace": role["metadata"]["namespace"]},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": role["metadata"]["name"]},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": EXTENDER_USER}]}
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([role, binding]))
    for svc in ("gpu-quota-admission", "nvidia-mps-scheduler-plugin"):
        st = cp.wait_for(lambda svc=svc: proxy_status(s, key, crt, svc) == 200 and 200, 30,
                         "service proxy to %s answers /readyz" % svc)
        s.check_eq(st, 200, "the README's Role lets the extender client through the proxy to %s" % svc)
    s.check(cp.proxy.carried(s.prod.port), "the API server dialled the fake pod IP through the CONNECT proxy")
    s.check_eq(cp.proxy.refused, [], "the CONNECT proxy refused nothing")


def start_product(s, mode):
    cp = s.cp
    if s.prod is not None:
        cp.delete_all_pods()
        s.check_eq(cp.stop_product(s.prod), 0, "gpu-quota-admission exits 0", s.prod.log())
    s.prod = cp.start_product(s.binary, flags=["--placement", mode], name="gqa-" + mode)
    s.mode = mode
    for svc in ("gpu-quota-admission", "nvidia-mps-scheduler-plugin"):
        cp.point_service_at(svc, s.prod.port)


def run_config(s, api_version, variant, via_proxy):
    cp = s.cp
    binary = SCHEDULER_FOR[api_version]
    if find_binary(binary, required=False) is None or not os.access(
            os.path.join(os.environ.get("KUBEBUILDER_ASSETS", ""), binary), os.X_OK):
        why = "%s is not in KUBEBUILDER_ASSETS" % binary
        print("    %s/%s NOT RUN: %s" % (api_version, variant, why), flush=True)
        if why not in s.skip_reasons:
            s.skip_reasons.append(why)
        return
    mode = "filter" if variant == "drop-in" else "bind"
    if s.mode != mode:
        start_product(s, mode)
    text = load_shipped_config(s.source_dir, api_version, variant)
    cfg = runnable_config(cp, text, direct_port=None if via_proxy else s.prod.port, client=s.client)
    how = "service proxy" if via_proxy else "direct"
    tag = "%s-%s-%s" % (api_version, variant, "proxy" if via_proxy else "direct")
    before = cp.proxy.bytes_sent(s.prod.port)
    sched = cp.start_scheduler(cfg, binary=binary, name="sched-" + tag)
    try:
        pods = {"v-" + tag: ({"tencent.com/vcuda-core": "30", "tencent.com/vcuda-memory": "8"}, "gpu-a100-0",
                             "tencent.com/predicate-node")}
        # Every variant sends MPS pods to the extender: drop-in through the
        # second Service (nvidia-mps-scheduler-plugin), the others in one.
        pods["m-" + tag] = ({"nvidia.com/mps-core": "20", "nvidia.com/mps-memory": "2"}, "gpu-t4-0",
                            "gpu-admission.io/node")
        for name, (limits, _n, _k) in pods.items():
            cp.create_pod(cp.pod(name, limits))
        for name, (_l, node, key) in pods.items():
            got = cp.wait_bound(name, timeout=90)
            s.check_eq(got, node, "%s %s/%s (%s): %s bound to %s" % (binary, api_version, variant, how, name, node))
            s.check_eq(annotations(cp, name).get(key), node, "%s: %s annotation" % (name, key))
        carried = cp.proxy.bytes_sent(s.prod.port) - before
        if via_proxy:
            s.check(carried > 0, "%s: the extender was reached through the API server's service proxy" % tag)
        else:
            s.check_eq(carried, 0, "%s: direct URL, nothing through the service proxy" % tag)
    finally:
        cp.stop_scheduler(sched)
        cp.delete_all_pods()


def make_test(api_version, variant, via_proxy):
    def t(s):
        run_config(s, api_version, variant, via_proxy)
    t.__name__ = "test_%s_%s_%s" % (api_version, variant.replace("-", "_"), "proxy" if via_proxy else "direct")
    return t


for _variant in VARIANTS:           # drop-in first: one product restart only
    for _api in ("v1", "v1beta3", "v1beta2"):
        for _via_proxy in (True, False):
            suite.test(make_test(_api, _variant, _via_proxy))


@suite.test
def test_every_shipped_file_covered(s):
    shipped = set()
    for api in os.listdir(os.path.join(s.source_dir, "scheduler-config")):
        d = os.path.join(s.source_dir, "scheduler-config", api)
        if os.path.isdir(d):
            shipped |= {(api, f[:-5]) for f in os.listdir(d) if f.endswith(".yaml")}
    tested = {(a, v) for a in SCHEDULER_FOR for v in VARIANTS}
    s.check_eq(sorted(shipped - tested), [], "every scheduler-config file has a test here")


if __name__ == "__main__":
    suite.main()
