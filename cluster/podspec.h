/*
 * podspec.h - what a pod asks for and what decisions it carries.
 *
 * Owns the translation of a Pod object (cJSON) into the facts the extender
 * uses: per-container GPU requests in the units of design.md section 3, the
 * pod's binding and phase, and the decision annotations of section 4
 * (tencent.com/... and gpu-admission.io/...). Also owns the names of those
 * annotations and the formatting of a decision back into annotations.
 */
#ifndef GQA_PODSPEC_H
#define GQA_PODSPEC_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/hami_pod.h"

#define RES_VCUDA_CORE "tencent.com/vcuda-core"
#define RES_VCUDA_MEMORY "tencent.com/vcuda-memory"
#define RES_MPS_CORE "nvidia.com/mps-core"
#define RES_MPS_MEMORY "nvidia.com/mps-memory"
#define RES_NVIDIA_GPU "nvidia.com/gpu"

/* The largest amount of a GPU resource the model takes, for a container and
 * for a node's memory: 2^40 (a trillion 256 MiB blocks, a terabyte in
 * bytes). Sums of such amounts over every pod a cache can hold stay far
 * inside int64, so occupancy arithmetic cannot overflow. Larger values are
 * refused where they are read, with a reason. */
#define GPU_AMOUNT_MAX (INT64_C(1) << 40)

#define ANN_TENCENT_IDX_PREFIX "tencent.com/predicate-gpu-idx-"
#define ANN_TENCENT_NODE "tencent.com/predicate-node"
#define ANN_TENCENT_ASSIGNED "tencent.com/gpu-assigned"
#define ANN_TENCENT_TIME "tencent.com/predicate-time"
#define ANN_GQA_IDX_PREFIX "gpu-admission.io/gpu-idx-"
/* Init container j's GPU minors: spec.initContainers[j] (docs/behaviour.md,
 * "Which pods the extender decides for"). */
#define ANN_GQA_INIT_IDX_PREFIX "gpu-admission.io/gpu-idx-init-"
#define ANN_GQA_NODE "gpu-admission.io/node"
#define ANN_GQA_TIME "gpu-admission.io/time"
#define ANN_GQA_PROOF "gpu-admission.io/proof"

/* Which device family a container uses (one per container). */
enum gpu_family {
    GPU_FAMILY_NONE = 0,
    GPU_FAMILY_VCUDA, /* tencent.com/vcuda-core / vcuda-memory */
    GPU_FAMILY_MPS,   /* nvidia.com/mps-core / mps-memory */
    GPU_FAMILY_PGPU,  /* nvidia.com/gpu */
    GPU_FAMILY_HAMI   /* nvidia.com/gpu with gpumem, gpumem-percentage or gpucores: HAMi nodes only */
};

/* One container's GPU request. cores is in per-GPU percent (100 = one whole
 * GPU) for every family: nvidia.com/gpu: 2 is cores = 200. */
struct container_request {
    char *name;
    enum gpu_family family;
    int64_t cores;
    int64_t memory;    /* vcuda-memory blocks or mps-memory units; 0 if not asked */
    bool memory_given; /* the container named the memory resource */
    int whole_gpus;    /* > 0: exclusive, that many completely free GPUs */
    /* What the container asks of a HAMi node (hami.nums > 0): set for
     * GPU_FAMILY_HAMI, and for GPU_FAMILY_PGPU, which a HAMi node serves
     * as vGPUs with HAMi's defaults (nvidia.com/gpu counts vGPUs there). */
    struct hami_request hami;
    /* 0: an app container (containers[i] is spec.containers[i]); j + 1:
     * spec.initContainers[j], an init container placed with the pod (they
     * follow the app containers in pod_info.containers). */
    int init_slot;
    bool sidecar; /* an init container with restartPolicy: Always */
};

/* The decision annotations found on a pod. */
struct pod_decision {
    char *node;      /* predicate-node / gpu-admission.io/node (else hami.io/vgpu-node), or NULL */
    int64_t time_ns; /* predicate-time / gpu-admission.io/time (else hami.io/vgpu-time), 0 if absent */
    bool assigned;   /* tencent.com/gpu-assigned == "true" */
    int nidx;        /* = number of containers */
    int **idx;       /* per container: minors, or NULL when no annotation */
    int *idx_count;
    char *proof; /* gpu-admission.io/proof as found (cluster/proof.h), or NULL */
};

/* A pod as the cache and the allocator see it. */
struct pod_info {
    char *key; /* "namespace/name": stable across updates of one pod */
    char *ns;
    char *name;
    char *uid;              /* may be NULL */
    char *resource_version; /* metadata.resourceVersion, may be NULL */
    char *node_name;        /* spec.nodeName, NULL while unbound */
    bool terminal;          /* phase Succeeded or Failed: holds no GPU */
    bool terminating;       /* metadata.deletionTimestamp is set: being deleted */
    int ncontainers;        /* the app containers, then the init containers placed with them */
    int ninit;              /* spec.initContainers, placed or not */
    struct container_request *containers;
    bool uses_gpu; /* at least one container has a GPU family */
    /* A container or init container names a GPU resource this extender
     * manages in its limits or requests, whatever the amount (even 0):
     * kube-scheduler's IsInterested, so such a pod reaches the verbs. */
    bool names_gpu;
    /* A PodGroup member: a label or annotation scheduling.x-k8s.io/pod-group,
     * pod-group.scheduling.sigs.k8s.io or pod-group.scheduling.sigs.k8s.io/name
     * (podparts.h, pod_group_key). Its HAMi bind waits a little for a held
     * node lock (extender/hamibind.h). */
    bool pod_group;
    char *request_error; /* why the GPU request is invalid (the pod then fits nowhere), or NULL */
    struct pod_decision decision;
    struct hami_pod *hami; /* HAMi annotations, when a container has a HAMi request; else NULL */
};

/* From a Pod's JSON text, a cJSON object with only what the extender reads:
 * metadata (name, namespace, uid, resourceVersion, deletionTimestamp,
 * annotations), spec (nodeName; containers' and initContainers' name,
 * resources and restartPolicy) and status.phase. Watches deliver whole pods (env, volumes, managedFields, statuses); skipping the
 * rest with the scanner instead of building a tree for it is most of the
 * cost of applying an event. NULL when the text is not a JSON object or on
 * allocation failure. */
cJSON *pod_slim_from_text(const char *text, size_t len);
/* The same for a Pod object at the start of text (whitespace before it
 * allowed) that need not end the text: *used is set to the bytes up to and
 * including its closing brace. */
cJSON *pod_slim_from_prefix(const char *text, size_t len, size_t *used);

/* Parse a Pod object. Returns NULL only when the object is not a usable Pod
 * (no metadata.name, wrong types) or on allocation failure, with *err set to a
 * malloc'd message. An invalid GPU request (e.g. "0.5" vcuda-core) is not a
 * parse failure: it is recorded in request_error so the caller can explain it. */
struct pod_info *pod_info_from_json(const cJSON *pod, char **err);
void pod_info_free(struct pod_info *pod);

/* A deep copy (the decision's proof included). NULL on allocation failure. */
struct pod_info *pod_info_clone(const struct pod_info *pod);

/* A deep copy of pod whose decision is replaced by (node, time_ns, idx),
 * without a proof (cluster/proof.h signs a new decision):
 * idx[i]/idx_count[i] are container i's GPU minors (NULL/0 for non-GPU
 * containers). NULL on allocation failure. */
struct pod_info *pod_info_with_decision(const struct pod_info *pod, const char *node, int64_t time_ns, int *const *idx,
                                        const int *idx_count);

/* Parse "0,1,3" into minors. Returns the count, or -1 on syntax error.
 * out must have room for max entries. */
int parse_gpu_index_list(const char *text, int *out, int max);

/* Append the decision annotations for `node` with per-container minors to a
 * cJSON object of annotations (both the tencent.com and gpu-admission.io keys).
 * idx[i] may be NULL for containers without GPUs. 0 or -1 on allocation failure. */
int decision_annotations(cJSON *annotations, const char *node, int64_t time_ns, int ncontainers, int *const *idx,
                         const int *idx_count, bool vcuda);

/* The same for the decision a decided pod carries (d->decision), each
 * container under its own key: an init container's minors under
 * gpu-admission.io/gpu-idx-init-<j> (j its index in spec.initContainers),
 * never under a tencent.com key. 0 or -1 on allocation failure. */
int pod_decision_annotations(cJSON *annotations, const struct pod_info *d, bool vcuda);

const char *gpu_family_resource(enum gpu_family family); /* the core resource name */
const char *gpu_family_memory_resource(enum gpu_family family);

#endif
