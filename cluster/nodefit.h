/*
 * nodefit.h - one cache line that decides a node for the common request.
 *
 * Owns struct node_fit: a copy of what the allocator reads of a node with
 * at most NODE_FIT_SLOTS GPUs (per GPU the free cores, free vcuda and MPS
 * memory, charges and device minor; which GPUs are completely free; which
 * GPU families the node offers; the cores in use; how one whole GPU
 * scores on the node's topology), packed into 64 bytes, so
 * that a filter over thousands of nodes reads one line per node instead of
 * the per-GPU table and the node spec (issue 15: the filter is bound by
 * cache misses). The cache keeps it equal to the per-GPU table after every
 * charge, uncharge and node change (node_fit_refresh, called from cache.c
 * under the write lock); readers use it under the read lock like the rest
 * of node_state. When a value does not fit its narrow field (more than 8
 * GPUs, free amounts outside 0..100 cores or 0..65535 memory units, usage
 * the cache could not attribute to a GPU, a HAMi node), `usable` is false
 * and the allocator reads the full table as before.
 */
#ifndef GQA_NODEFIT_H
#define GQA_NODEFIT_H

#include <stdbool.h>
#include <stdint.h>

#define NODE_FIT_SLOTS 8
#define NODE_FIT_BEST1_UNKNOWN UINT8_MAX

enum {
    NODE_FIT_OFFERS_VCUDA = 1, /* tencent.com/vcuda-core capacity */
    NODE_FIT_OFFERS_MPS = 2,   /* nvidia.com/mps-core capacity */
    NODE_FIT_OFFERS_PGPU = 4,  /* nvidia.com/gpu capacity */
};

struct node_fit {
    uint8_t usable;      /* every field below is exact */
    uint8_t count;       /* GPUs (1..NODE_FIT_SLOTS when usable) */
    uint8_t offers;      /* NODE_FIT_OFFERS_* */
    uint8_t idle;        /* bit s: GPU s completely free (cores and both memories) */
    uint16_t cores_used; /* sum of the GPUs' core_used (at most 8 x 100) */
    /* One whole GPU on this node's topology (topology/select.h), for the
     * line to score it without reading the shape: best1 is the best score
     * of one GPU (topology_best_possible(shape, 1)), and GPU s alone
     * scores best1 when bit s of best1_gpus is set, else 0; both 0 when
     * the node has no usable shape; copied from the node spec's single_*
     * fields, worked out once per Node. NODE_FIT_BEST1_UNKNOWN: ask topology. */
    uint8_t best1;
    uint8_t best1_gpus;
    uint8_t cores_free[NODE_FIT_SLOTS]; /* 100 - core_used */
    uint8_t pods[NODE_FIT_SLOTS];       /* container charges on the GPU */
    uint8_t minor[NODE_FIT_SLOTS];      /* device minor */
    uint16_t vmem_free[NODE_FIT_SLOTS]; /* vcuda-memory blocks free */
    uint16_t mmem_free[NODE_FIT_SLOTS]; /* mps-memory units free */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct node_fit) == 64, "the node's summary is one cache line");

struct node_state;

/* Recompute n->fit from n's GPU table, spec and unattributed usage. */
void node_fit_refresh(struct node_state *n);

/* Does n->fit agree with n's GPU table (Debug checks and tests)? */
bool node_fit_agrees(const struct node_state *n);

#endif
