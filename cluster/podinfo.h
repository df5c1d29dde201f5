/*
 * podinfo.h - the pod record: what a pod asks for and what decisions it
 * carries, as the cache, the allocator and the pod readers share it.
 *
 * Owns the types (struct pod_info, its containers' requests and its
 * decision) and the names of the GPU resources and decision annotations
 * (design.md sections 3 and 4). The readers that fill it are podspec.c
 * (cJSON), podtext.c (text) and their shared steps podparts.c; podinfo.h
 * itself has no code, so they all include it without including each other.
 * No state, no locks.
 */
#ifndef GQA_PODINFO_H
#define GQA_PODINFO_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/family.h"
#include "cluster/hami_pod.h"
#include "cluster/resnames.h"

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

/* The longest instance profile name a container may ask for, with its NUL. */
#define GPU_PROFILE_MAX 24

/* One container's GPU request. cores is in per-GPU percent (100 = one whole
 * GPU) for every family: nvidia.com/gpu: 2 is cores = 200. */
struct container_request {
    char *name;
    /* The device family it asks for (cluster/family.h), NULL: no GPU. */
    const struct gpu_family *family;
    uint8_t family_bit; /* gpu_family_bit(family), 0 without one */
    int64_t cores;
    int64_t memory; /* units of the family's memory resource (vcuda-memory blocks, mps-memory units); 0 if not asked */
    bool memory_given; /* the container named the memory resource */
    int whole_gpus;    /* > 0: exclusive, that many completely free GPUs */
    /* What the container asks of a HAMi node (hami.nums > 0): set for
     * HAMi's family, and for whole GPUs, which a HAMi node serves as
     * vGPUs with HAMi's defaults (nvidia.com/gpu counts vGPUs there). */
    struct hami_request hami;
    /* 0: an app container (containers[i] is spec.containers[i]); j + 1:
     * spec.initContainers[j], an init container placed with the pod (they
     * follow the app containers in pod_info.containers). */
    int init_slot;
    bool sidecar; /* an init container with restartPolicy: Always */
    /* A family that places named instances (MIG): the profile asked for
     * ("1g.10gb") and how many; "" and 0 otherwise. */
    char profile[GPU_PROFILE_MAX];
    int64_t instances;
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
    char *request_error; /* why the GPU request is invalid (the pod then fits nowhere), or NULL */
    struct pod_decision decision;
    struct hami_pod *hami; /* HAMi annotations, when a container has a HAMi request; else NULL */
};

#endif
