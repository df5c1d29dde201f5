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
/* GPU_MEMORY_POOLS (cluster/family.h), restated so this header stays a
 * type only; family.h checks the two agree. */
#define FIT_LINE_MEMORY_POOLS 2
#define NODE_FIT_BEST1_UNKNOWN UINT8_MAX

struct node_fit {
    uint8_t usable;      /* every field below is exact */
    uint8_t count;       /* GPUs (1..NODE_FIT_SLOTS when usable) */
    uint8_t offers;      /* the node spec's offers: bit gpu_family_bit(f) for each family offered */
    uint8_t idle;        /* bit s: GPU s completely free (cores and every memory pool) */
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
    /* Units free in each memory pool (cluster/family.h: vcuda-memory blocks,
     * mps-memory units). */
    uint16_t mem_free[FIT_LINE_MEMORY_POOLS][NODE_FIT_SLOTS];
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct node_fit) == 64, "the node's summary is one cache line");

#endif
