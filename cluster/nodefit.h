/*
 * nodefit.h - one cache line that decides a node for the common request.
 *
 * Owns struct node_fit (the type is in fitline.h, so the records of
 * occupancy.h can hold it without including this unit): a copy of what the allocator reads of a node with
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

#include "cluster/fitline.h"

struct node_state;

/* Recompute n->fit from n's GPU table, spec and unattributed usage. */
void node_fit_refresh(struct node_state *n);

/* Does n->fit agree with n's GPU table (Debug checks and tests)? */
bool node_fit_agrees(const struct node_state *n);

#endif
