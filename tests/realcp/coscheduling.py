"""What the gang-scheduling tests share (test_gang.py, test_gang_hold.py):
the PodGroup CRD, kube-scheduler-plugins' rights to it, a Coscheduling
profile in front of the extender in --placement filter, and pods with GPU
shares. In filter mode the extender decides the GPUs at filter time, before
Permit, and holds them until the pod is bound, deleted or scheduled again,
at most --assume-ttl (the ceiling: 15 minutes by default; test_gang.py
sets a short one to see a timed-out group's GPU come back).

The missing sibling of a group is a pod for another scheduler (schedulerName
"realcp-nobody"): Coscheduling counts it as a member, this scheduler never
tries it, so the member it waits for never arrives, and nothing fails at
filter (a failing sibling would make PostFilter reject the waiting member at
once).
"""

import json

from realcp_suite import annotations, direct_extender

ASSUME_TTL_S = 3
# The hold before this release: a decision expired 60 s after it was taken,
# as long as Coscheduling's default Permit wait.
OLD_DEFAULT_TTL_S = 60
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

PODGROUP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
             "names": {"kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups",
                       "singular": "podgroup", "shortNames": ["pg"]},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}

SCHEDULER_RBAC = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "realcp-scheduler-plugins"},
     "rules": [{"apiGroups": ["scheduling.x-k8s.io"], "resources": ["*"], "verbs": ["*"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "realcp-scheduler-plugins"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "realcp-scheduler-plugins"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-scheduler"}]},
]


def topology(n):
    gpus = [{"index": i, "minor": i, "uuid": "GPU-gang-%d" % i, "model": "Test", "memoryMiB": 16384, "numa": 0}
            for i in range(n)]
    links = [["X" if i == j else "NV1" for j in range(n)] for i in range(n)]
    return json.dumps({"version": 1, "gpus": gpus, "links": links}, separators=(",", ":"))


def add_gpu_node(cp, name, gpus):
    cp.add_node(name, {"tencent.com/vcuda-core": str(100 * gpus), "tencent.com/vcuda-memory": str(64 * gpus)},
                annotations={"gpu-admission.io/topology": topology(gpus)})


def podgroup(cp, name, min_member, timeout_s):
    cp.admin.post("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
                  {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": name},
                   "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout_s}})


def vcuda_pod(cp, name, node, cores, group=None, scheduler=None):
    return cp.pod(name, {"tencent.com/vcuda-core": str(cores), "tencent.com/vcuda-memory": "8"},
                  labels={GROUP_LABEL: group} if group else None, scheduler_name=scheduler,
                  extra_spec={"nodeSelector": {"kubernetes.io/hostname": node}})


def gpu_of(cp, name):
    return annotations(cp, name).get("tencent.com/predicate-gpu-idx-0")


def setup(s, assume_ttl_s=ASSUME_TTL_S):
    """assume_ttl_s None: the product's default ceiling."""
    cp = s.cp
    cp.admin.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", PODGROUP_CRD)
    cp.wait_for(lambda: cp.admin.get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups", ok=(200,)), 60,
                "the PodGroup CRD is served")
    for obj in SCHEDULER_RBAC:
        cp.kubectl("apply", "-f", "-", input=json.dumps(obj))
    add_gpu_node(cp, "gpu-two", 2)
    add_gpu_node(cp, "gpu-solo", 1)
    cp.add_node("cpu-0")
    ttl = [] if assume_ttl_s is None else ["--assume-ttl", "%ds" % assume_ttl_s]
    s.prod = cp.start_product(s.binary, flags=["--placement", "filter"] + ttl)
    ext = direct_extender(s.prod.port, bind=False, node_cache=False)
    for k in ("prioritizeVerb", "weight"):
        ext.pop(k)
    cos = [{"name": "Coscheduling"}]
    profile = {"schedulerName": "default-scheduler",
               "plugins": {"queueSort": {"enabled": cos, "disabled": [{"name": "*"}]},
                           "preFilter": {"enabled": cos}, "postFilter": {"enabled": cos},
                           "permit": {"enabled": cos}, "reserve": {"enabled": cos}},
               "pluginConfig": [{"name": "Coscheduling",
                                 "args": {"permitWaitingTimeSeconds": 60, "podGroupBackoffSeconds": 1}}]}
    s.sched = cp.start_scheduler(cp.scheduler_config([ext], profiles=[profile]), binary="kube-scheduler-plugins",
                                 name="sched-coscheduling")


