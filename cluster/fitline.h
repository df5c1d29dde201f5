/*
 * fitline.h - struct node_fit, the one-cache-line summary of a node
 * (nodefit.h says what it holds and who keeps it true). A type only, so
 * the node record (occupancy.h) embeds it and nodefit.c reads that record
 * without the two headers including each other. No state, no locks.
 */
#ifndef GQA_FITLINE_H
#define GQA_FITLINE_H

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

#endif
