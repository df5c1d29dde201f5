/*
 * occupancy.h - the records of the cache's occupancy index: a node's GPUs
 * and their use, and the charge each pod applied.
 *
 * Owns struct node_state, struct pod_entry and their parts, and the small
 * readers of one node that need nothing else of the cache (which pods hold
 * a GPU, a minor's slot, whether a node is a HAMi node). The cache
 * (cache.c) creates and changes these records; the node summary
 * (nodefit.c) and the HAMi occupancy (hami_occupancy.c) read and adjust
 * them for it. They include this header rather than cache.h, so no unit
 * below the cache includes the cache back.
 *
 * Concurrency: none of its own; every record belongs to the cache and is
 * read under its read lock and changed under its write lock (cache.h).
 */
#ifndef GQA_OCCUPANCY_H
#define GQA_OCCUPANCY_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/fitline.h"
#include "cluster/nodespec.h"
#include "cluster/podinfo.h"
#include "lib/strbuf.h"

struct hami_node_state; /* hami_occupancy.h */
struct hami_pod_charge; /* hami_occupancy.h */

struct gpu_state {
    int minor;
    int numa;
    int64_t core_used; /* percent of this GPU in use (100 = whole GPU) */
    /* Units of each family's memory pool (cluster/family.h): vcuda-memory
     * blocks, mps-memory units. */
    int64_t mem_total[GPU_MEMORY_POOLS], mem_used[GPU_MEMORY_POOLS];
    int pods; /* container charges on this GPU (a pod with two shares here counts twice) */
};

/* GPU usage the cache cannot place on a particular GPU. */
struct node_usage {
    int64_t cores;
    int64_t mem[GPU_MEMORY_POOLS];
    int pods;
};

struct pod_entry;

struct node_state {
    /* First, on a line of its own: what a filter reads of most nodes
     * (nodefit.h), kept equal to the GPU table below by every change. */
    struct node_fit fit;
    char *name;
    bool present;           /* false: a placeholder for pods that name a node not (yet) seen */
    struct node_spec *spec; /* NULL for placeholders */
    int gpu_count;
    struct gpu_state *gpus;
    struct node_usage unattributed;
    struct pod_entry *charged; /* pods charged on this node (list through pod_entry.node_next) */
    int charged_count;
    struct hami_node_state *hami; /* HAMi nodes only: devices and use (hami_occupancy.h) */
    /* The state of each family that places its own units (GPU_PLACE_FAMILY,
     * cluster/family.h), by family index; NULL when the family keeps none. */
    void *family_state[GPU_FAMILY_MAX];
};

/* One GPU's share of a pod's charge. */
struct slot_charge {
    int slot;
    int64_t cores;
    int64_t mem[GPU_MEMORY_POOLS];
};

struct pod_entry {
    struct pod_info *info;
    /* The charge currently applied; node == NULL means none. */
    struct node_state *node;
    bool bound;         /* charged because bound (else assumed) */
    bool unproven_said; /* the log said once that this pod's decision holds nothing */
    int64_t expires_ns; /* assumed charges end then; 0 for bound pods */
    int nslots;
    struct slot_charge *slots;
    struct node_usage unattributed;
    struct pod_entry *node_prev, *node_next;
    struct pod_entry *assumed_prev, *assumed_next; /* cache.assumed list while assumed */
    uint64_t applied_at;                           /* cache generation when this pod's info was last applied */
    uint64_t reservation;                          /* a decision not yet written to the API server: its token */
    struct pod_info *unreserved;                   /* with a reservation: the pod without it (NULL: no entry) */
    bool unconfirmed;                              /* the reservation's write got no answer: it may land yet */
    int64_t released_ns; /* the time of the decision this service is taking off (cache_release_hold), or 0 */
    char *usage_key;     /* quota usage this charge added to ("ns\x1fmodel"), or NULL */
    int64_t usage_cores;
    char *line_key;     /* and under its instance line ("ns\x1f<model>-MIG-<profile>", pod_instance_line), or NULL */
    int64_t line_units; /* 100 an instance */
    struct hami_pod_charge *hami_charge; /* the HAMi part of the charge, or NULL (hami_occupancy.h) */
};

/* Append to sb the JSON array of the keys of the pods charged on n for which
 * holds(e, which) is true (/inspect/nodes lists a GPU's pods this way).
 * Caller holds the cache's lock. */
void cache_put_charged_keys(struct strbuf *sb, const struct node_state *n,
                            bool (*holds)(const struct pod_entry *e, int which), int which);

/* The GPU slot of a device minor on a node, or -1. */
int node_slot_of_minor(const struct node_state *n, int minor);

/* Is the node a HAMi node (its spec carries a registration)? Inline, and a
 * node_state field, because the filter asks it of every node. */
static inline bool hami_node_is(const struct node_state *n)
{
    return n->hami != NULL;
}

/* Is container r served by n's HAMi devices (n is a HAMi node and r's
 * family is served by them there: HAMi's vGPUs, or nvidia.com/gpu alone)? */
static inline bool hami_container_on(const struct container_request *r, const struct node_state *n)
{
    return r->hami.nums > 0 && n->hami != NULL && r->family && (r->family->flags & GPU_FAMILY_ON_HAMI);
}

#endif
