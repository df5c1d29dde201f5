/*
 * topology/select.h - how good a set of GPUs is, and the best free set.
 *
 * Owns the scoring of design.md section 5: a link's weight grows with its
 * bandwidth class (NV<n> > PIX > PXB > PHB > NODE > SYS, more bonded NVLinks
 * weigh more), a set's score is the sum of its pairwise link weights plus a
 * bonus when all members share one known NUMA node; and the search for the
 * best-scoring set of k GPUs among the free ones (exact while at most 16
 * are free, with pruning), ties broken toward leaving the best-connected
 * sets free for the next large pod. Sets are bitmasks over topology indices
 * (bit i = GPU i). Pure functions but for a memo, safe from any thread; the
 * search allocates nothing (about 20 KiB of stack).
 */
#ifndef GQA_TOPOLOGY_SELECT_H
#define GQA_TOPOLOGY_SELECT_H

#include <stdint.h>

#include "topology/annotation.h"

#define TOPOLOGY_EXACT_MAX 16

/* Weight of one link (0 for X). */
int64_t topology_link_weight(struct topo_link link);
/* Score of a set: pairwise weights plus the NUMA bonus. */
int64_t topology_set_score(const struct gpu_topology *t, uint64_t set);
/* Best set of k GPUs among free_mask: returns the mask (0 when k < 1 or
 * fewer than k are free; bits at or above t->count are ignored) and its
 * score in *score (0 then; score may be NULL). Exact when at most
 * TOPOLOGY_EXACT_MAX GPUs are free, greedy above. Equal scores go to the
 * set that leaves the best-connected free GPUs intact, then the lowest
 * mask; the exact rule and the weights are documented in select.c. For
 * k == 1 that is the free GPU whose loss hurts the remaining sets least.
 * Deterministic, and microseconds for 16 GPUs; answers are memoised by
 * shape, free GPUs and k (lock-free for readers; select.c), so a repeat
 * costs a hash of the shape. Thread-safe. */
uint64_t topology_best_set(const struct gpu_topology *t, uint64_t free_mask, int k, int64_t *score);
/* The best score any k-set can reach on this topology with every GPU free:
 * the yardstick for node scores. 0 when k < 1 or k > t->count, and for
 * k == 1 without NUMA information. Memoised per topology shape (count,
 * links, NUMA nodes) in a small table behind a rwlock: a repeat call costs
 * a hash and a comparison, well under a microsecond. Exact up to
 * TOPOLOGY_EXACT_MAX GPUs; above, it is greedy like topology_best_set, so a
 * set found there may in rare cases score higher: clamp the ratio to 1. */
int64_t topology_best_possible(const struct gpu_topology *t, int k);

#endif
