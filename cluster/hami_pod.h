/*
 * hami_pod.h - what a pod asks of HAMi and what HAMi decisions it carries.
 *
 * Owns the pod side of HAMi's protocol (docs/hami.md): a container's vGPU
 * request (nvidia.com/gpu with nvidia.com/gpumem, gpumem-percentage and
 * gpucores, their defaults and range checks), the pod annotations that
 * steer the choice of GPUs (nvidia.com/use-gputype, nouse-gputype,
 * use-gpuuuid, nouse-gpuuuid, vgpu-mode; hami.io/gpu-scheduler-policy and
 * node-scheduler-policy), and the device allocation format of
 * hami.io/vgpu-devices-to-allocate / -allocated in both directions:
 *
 *   UUID,NVIDIA,memMiB,cores:  per device,  ';' after every container
 *   "GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;;"  (2 vGPUs, then a container without)
 *
 * Pure parsing and formatting, no I/O, no locks.
 */
#ifndef GQA_HAMI_POD_H
#define GQA_HAMI_POD_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/family.h"
#include "cluster/hami_node.h"
#include "cluster/mig_hami.h"
#include "lib/strbuf.h"

#define RES_HAMI_MEMORY "nvidia.com/gpumem"
#define RES_HAMI_MEMORY_PERCENT "nvidia.com/gpumem-percentage"
#define RES_HAMI_CORES "nvidia.com/gpucores"
/* HAMi's task priority: managed (HAMi's chart lists it), never advertised. */
#define RES_HAMI_PRIORITY "nvidia.com/priority"

#define HAMI_TO_ALLOCATE_ANNOTATION "hami.io/vgpu-devices-to-allocate"
#define HAMI_ALLOCATED_ANNOTATION "hami.io/vgpu-devices-allocated"
#define HAMI_NODE_ANNOTATION "hami.io/vgpu-node"
#define HAMI_TIME_ANNOTATION "hami.io/vgpu-time"
/* Every annotation a HAMi decision writes (the four above and
 * hami.io/vgpu-mig-allocations): a pod decided elsewhere must lose them. */
#define HAMI_DECISION_KEY_COUNT 5
extern const char *const hami_decision_keys[HAMI_DECISION_KEY_COUNT];
#define HAMI_BIND_PHASE_ANNOTATION "hami.io/bind-phase"
#define HAMI_BIND_TIME_ANNOTATION "hami.io/bind-time"
#define HAMI_USE_TYPE_ANNOTATION "nvidia.com/use-gputype"
#define HAMI_NOUSE_TYPE_ANNOTATION "nvidia.com/nouse-gputype"
#define HAMI_USE_UUID_ANNOTATION "nvidia.com/use-gpuuuid"
#define HAMI_NOUSE_UUID_ANNOTATION "nvidia.com/nouse-gpuuuid"
#define HAMI_VGPU_MODE_ANNOTATION "nvidia.com/vgpu-mode"
#define HAMI_GPU_POLICY_ANNOTATION "hami.io/gpu-scheduler-policy"
/* HAMi v2.10: "slot=1,core=1,memory=3", the weights of the device score. */
#define HAMI_SCORING_WEIGHTS_ANNOTATION "hami.io/device-scoring-weights"
#define HAMI_MAX_SCORING_WEIGHT 1000000
#define HAMI_NODE_POLICY_ANNOTATION "hami.io/node-scheduler-policy"

#define HAMI_PHASE_ALLOCATING "allocating"
#define HAMI_PHASE_SUCCESS "success"
#define HAMI_PHASE_FAILED "failed"

#define HAMI_MAX_VGPUS 64           /* per container: each on its own GPU */
#define HAMI_ALLOC_ENTRIES_MAX 1024 /* entries (containers) of an allocation annotation */

/* A container's HAMi request. nums == 0: none. */
struct hami_request {
    int nums;           /* vGPUs, each on a different physical GPU */
    int64_t memory_mib; /* per vGPU; 0 when memory_percent applies */
    int memory_percent; /* 1..100: that share of the chosen GPU's memory (when memory_mib is 0) */
    int cores;          /* 0..100 percent of the GPU; 100 = exclusive */
};

/* The container's amounts as read from its limits (or requests). has_* is
 * "the key is present", whatever the value. */
struct hami_amounts {
    int64_t gpus, memory, percent, cores;
    bool has_gpus, has_memory, has_percent, has_cores;
};

/* Does the container name gpumem, gpumem-percentage or gpucores (a request
 * only a HAMi node can serve)? */
static inline bool hami_amounts_explicit(const struct hami_amounts *a)
{
    return a->has_memory || a->has_percent || a->has_cores;
}

/* nvidia.com/gpu with gpucores 100 (or more, read as 100) and no memory:
 * what HAMi's webhook (v2.7 and later) makes of a container that asks for
 * nvidia.com/gpu alone. Whole GPUs anywhere, an exclusive vGPU on a HAMi
 * node: not a request only HAMi nodes can serve. */
static inline bool hami_amounts_whole_gpus(const struct hami_amounts *a)
{
    return a->has_gpus && a->gpus > 0 && a->has_cores && a->cores >= 100 && !a->has_memory && !a->has_percent;
}

/* The container's amounts (cluster/family.h) as HAMi reads them. */
void hami_amounts_read(const struct gpu_amounts *a, struct hami_amounts *h);

/* The request, with HAMi's defaults for what is missing (memory: the
 * configured default, else 100% of the GPU; cores: the configured default).
 * 0, or -1 with the problem appended to err (naming the container). */
int hami_request_from_amounts(const struct hami_amounts *a, const char *container, struct hami_request *req,
                              struct strbuf *err);

/* MiB one vGPU of r takes on a device with device_mib of memory. */
static inline int64_t hami_request_memory(const struct hami_request *r, int64_t device_mib)
{
    return r->memory_mib > 0 ? r->memory_mib : device_mib * r->memory_percent / 100;
}

/* ---- allocation annotations ----------------------------------------------- */

struct hami_alloc_device {
    char *uuid;
    char *vendor; /* "NVIDIA" */
    int64_t memory_mib;
    int cores;
};

struct hami_alloc_container {
    int count;
    struct hami_alloc_device *devices;
};

struct hami_alloc {
    int ncontainers;
    struct hami_alloc_container *containers;
};

/* Parse an allocation annotation. 0, or -1 with *err (malloc'd, NULL when
 * memory ran out). out is zeroed first and owned by the caller after 0. */
int hami_alloc_decode(const char *text, struct hami_alloc *out, char **err);
/* The annotation text (malloc'd), NULL when memory ran out. */
char *hami_alloc_encode(const struct hami_alloc *a);
void hami_alloc_free(struct hami_alloc *a);
int hami_alloc_copy(struct hami_alloc *dst, const struct hami_alloc *src);

/* ---- pod annotations --------------------------------------------------------- */

enum hami_pack { HAMI_PACK_DEFAULT = 0, HAMI_PACK_BINPACK, HAMI_PACK_SPREAD };

struct hami_list {
    int count;
    char **items; /* trimmed, non-empty, no duplicates; types upper-cased and sorted by length (shortest
                     first), UUIDs sorted by strcmp */
};

/* Bounds of the pod's device lists (issue 22: a 252 kB nouse-gputype list
 * cost 3 s per filter over 2,000 HAMi nodes). Over either bound the pod is
 * refused with a reason naming the annotation, its size and the bound.
 * HAMi's own lists hold a few types or a node's UUIDs. */
#define HAMI_TYPE_LIST_MAX_BYTES 4096 /* nvidia.com/[no]use-gputype, the whole value */
#define HAMI_TYPE_LIST_MAX_ITEMS 64
#define HAMI_UUID_LIST_MAX_BYTES 65536 /* nvidia.com/[no]use-gpuuuid */
#define HAMI_UUID_LIST_MAX_ITEMS 1024
#define HAMI_VGPU_MODE_MAX_BYTES 64 /* nvidia.com/vgpu-mode */

/* What a pod with HAMi-capable containers carries. */
struct hami_pod {
    struct hami_list use_types, nouse_types;     /* nvidia.com/[no]use-gputype */
    struct hami_list use_uuids, nouse_uuids;     /* nvidia.com/[no]use-gpuuuid */
    char *vgpu_mode;                             /* nvidia.com/vgpu-mode, or NULL */
    enum hami_pack gpu_policy, node_policy;      /* the hami.io/...-scheduler-policy annotations */
    int weight_slot, weight_core, weight_memory; /* hami.io/device-scoring-weights (default 1 each) */
    bool filters;                                /* any of the lists or vgpu_mode is set */
    bool has_alloc;                              /* alloc holds a readable allocation annotation */
    bool decision_keys;                          /* the pod carries any of HAMi's decision annotations */
    /* A decision about to be bound: when set (Unix ns), its write carries
     * hami.io/bind-phase: allocating with this bind-time. Never read from
     * a pod; not cloned. */
    int64_t bind_phase_ns;
    bool alloc_done; /* ...read from -allocated (else -to-allocate) */
    struct hami_alloc alloc;
    char *alloc_error; /* why a present allocation annotation was unreadable, or NULL */
    /* hami.io/vgpu-mig-allocations (HAMi v2.10 dynamic MIG): the MIG
     * instances of the allocation's vGPUs on MIG-mode devices; NULL when
     * absent, empty or unreadable (mig_error says why) */
    struct mig_hami_allocation *mig;
    int nmig;
    char *mig_error;
    /* hami.io/gpu-scheduler-policy is exactly "topology-aware" (cluster/hami_topology.h) */
    bool topology_aware;
};

/* Read the pod's HAMi annotations (annotations may be NULL). 0 with *out
 * set; -1 when memory ran out. A bad policy value is a request problem:
 * *request_error (malloc'd) names it, and the pod then fits nowhere. */
int hami_pod_from_annotations(const cJSON *annotations, struct hami_pod **out, char **request_error);
void hami_pod_free(struct hami_pod *p);
struct hami_pod *hami_pod_clone(const struct hami_pod *p);
/* A decision's allocation becomes what the pod holds (as if read from
 * -allocated): the previous one is freed, *alloc is moved in and zeroed. */
void hami_pod_set_alloc(struct hami_pod *p, struct hami_alloc *alloc);
/* A decision's MIG instances go with its allocation: *mig (n entries,
 * malloc'd, may be NULL for 0) is moved in and set NULL. */
void hami_pod_set_mig(struct hami_pod *p, struct mig_hami_allocation **mig, int n);
/* The pod holds no allocation (a decision on a node that is not HAMi's, or
 * whose containers no HAMi device serves: an earlier attempt's is void). */
void hami_pod_clear_alloc(struct hami_pod *p);
/* A decision's allocation survives an update that does not know of it yet:
 * `to` gets a copy of `from`'s (what `to` read from its annotations is an
 * earlier attempt's); nothing when `from` holds none. 0, or -1 (out of memory). */
int hami_pod_keep_alloc(struct hami_pod *to, const struct hami_pod *from);

/* Device checks of the pod's annotations (HAMi's semantics: a type matches
 * when the upper-cased device type contains an upper-cased list entry; UUIDs
 * match exactly; a vgpu-mode annotation must contain the device's mode). */
bool hami_pod_type_ok(const struct hami_pod *p, const struct hami_device *d);
bool hami_pod_uuid_ok(const struct hami_pod *p, const struct hami_device *d);
bool hami_pod_mode_ok(const struct hami_pod *p, const struct hami_device *d);

/* "binpack", "spread" (and HAMi's "topology-aware", read as the default
 * order; hami_pod.topology_aware says it was asked). 0, or -1. */
int hami_pack_parse(const char *text, enum hami_pack *out);

#endif
