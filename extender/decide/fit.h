/*
 * fit.h - the fit contract: what a per-node fit is asked (the packing
 * policy) and what it answers (fit_result: fits or not, the score, the
 * chosen GPUs, the reason and its class).
 *
 * Owns the types and the few helpers that every fit shares: the allocator
 * (allocator.h, every family) and the HAMi fit (hami_fit.h) write a
 * fit_result, placement reads it. Both fits include this header and not
 * each other's, so the allocator calls the HAMi fit and nothing calls
 * back. Pure: no state, no locks.
 */
#ifndef GQA_FIT_H
#define GQA_FIT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/podinfo.h"

enum pack_policy { POLICY_BINPACK = 0, POLICY_SPREAD };

struct alloc_policy {
    enum pack_policy gpu;  /* order of candidate GPUs for shared requests */
    enum pack_policy node; /* shape of node scores */
    /* order of HAMi GPUs (--hami-gpu-policy; HAMi's default is spread);
     * a pod's hami.io/gpu-scheduler-policy overrides it, and its
     * hami.io/node-scheduler-policy overrides `node` */
    enum pack_policy hami_gpu;
    /* --vcuda-shares refuse: tencent.com/vcuda-core shares are answered with
     * an Error instead of placed (clusters without GPU-Manager; it is what
     * lets --gpu-policy spread start, see options.c) */
    bool refuse_vcuda_shares;
};

/* Why a pod does not fit, as a class that stays the same from node to node
 * (the reason text carries each node's numbers). Explain groups nodes by it,
 * and /metrics counts unschedulable pods by it. The allocator sets the
 * classes from REASON_NO_GPU to REASON_UNATTRIBUTED; placement the rest. */
enum reason_class {
    REASON_NONE = 0,
    REASON_POD_INVALID,        /* the pod itself: bad request, CRL violation */
    REASON_NODE_UNKNOWN,       /* not in the cache */
    REASON_NO_GPU,             /* the node advertises no GPUs */
    REASON_NO_CAPACITY,        /* no capacity of the family a container asks for */
    REASON_GPU_CORES,          /* a share: no GPU with enough cores free */
    REASON_GPU_MEMORY,         /* a share: GPUs with the cores lack the memory */
    REASON_WHOLE_GPUS,         /* too few completely free GPUs */
    REASON_UNATTRIBUTED,       /* usage without GPU assignment leaves too little */
    REASON_QUOTA_POOL,         /* the namespace may not use this node's pool */
    REASON_QUOTA_MODEL,        /* the namespace has no quota for this model */
    REASON_QUOTA_EXHAUSTED,    /* the namespace's quota for this model is used up */
    REASON_ASSIGNED_ELSEWHERE, /* filter mode: the pod went to another node */
    REASON_HAMI_DEVICES,       /* no HAMi GPU of the node can take a container's vGPUs */
    REASON_HAMI_QUOTA,         /* a ResourceQuota on limits.nvidia.com/gpumem or gpucores is used up */
    REASON_INSTANCES,          /* a self-placing family (MIG) has too few free instances of what a container asks */
    REASON_CLASS_COUNT
};

/* The class's stable name ("gpu_cores"), used as a metric label and in JSON. */
const char *reason_class_name(enum reason_class c);

#define FIT_REASON_MAX 512
#define FIT_SCORE_MAX 1000

struct fit_result {
    bool fits;
    bool unresolvable; /* no amount of preemption on this node would help */
    int score;         /* 0..FIT_SCORE_MAX, higher is better; 0 when it does not fit */
    int64_t set_score; /* whole-GPU containers: summed topology score of the chosen sets */
    int64_t set_best;  /* ... and the best those sets could score on this node's shape */
    char reason[FIT_REASON_MAX];
    size_t reason_len;     /* strlen(reason), kept by whoever writes reason */
    enum reason_class why; /* REASON_NONE when it fits */
    int why_container;     /* the container that does not fit, or -1 */
    int why_gpu;           /* the GPU slot the reason names (freest, roomiest), or -1 */
    int64_t short_by;      /* how much is missing: cores, memory units or GPUs (the class says which) */
    /* masks[i]: GPU slots chosen for container i (bit s = slot s); caller
     * provides room for the pod's container count. */
    uint64_t *masks;
    /* Optional (NULL: not wanted), same size: the HAMi devices chosen for
     * container i on a HAMi node (bit s = node->spec->hami->devices[s]).
     * Containers served by HAMi devices have no bits in masks. */
    uint64_t *hami_masks;
    /* The allocator's own memo (zero it with the rest): the text of the last
     * whole-GPU refusal decided on the node's summary line, reused while the
     * same container is refused the same way on node after node. */
    const struct container_request *memo_request;
    size_t memo_len;
    char memo[FIT_REASON_MAX];
    /* Not NULL when reason is the memo's text for this request: two
     * refusals with the same reason_memo have the same reason, so the
     * caller may share it without comparing (placement.c). */
    const void *reason_memo;
};

/* Record on fit that the pod does not fit (reason printf-formatted, score 0);
 * returns false, so a fit function may `return fit_refuse(...)`. */
bool fit_vrefuse(struct fit_result *fit, bool unresolvable, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* "binpack" or "spread" (the --gpu-policy and --node-policy values): 0, or -1. */
int pack_policy_parse(const char *name, enum pack_policy *out);
const char *pack_policy_name(enum pack_policy p);

#endif
