/*
 * hami_topology.h - HAMi's GPU pair scores and its topology-aware pick.
 *
 * Owns the node annotation hami.io/node-nvidia-score, which HAMi's device
 * plugin writes when ENABLE_TOPOLOGY_SCORE is "true": a JSON array of
 * {"uuid": "<GPU UUID>", "score": {"<other GPU UUID>": <int>, ...}}, one
 * entry per GPU, a higher score meaning a faster link (docs/hami.md). The
 * scores are mapped onto the node's registered HAMi devices as a matrix.
 *
 * Also owns the device choice of HAMi's topology-aware GPU policy
 * (pkg/device/nvidia/device.go, Fit): among the candidates in the order
 * HAMi's Fit walks them, one vGPU takes the candidate whose scores towards
 * the other candidates sum lowest (the worst-connected GPU, keeping the
 * well-connected ones for larger requests); several vGPUs take the
 * combination whose pair scores sum highest. Ties go to the first one in
 * that order, as in HAMi.
 *
 * The annotation is untrusted: bounded in size, entries and values; one
 * that does not read is ignored (the node behaves as without it) and its
 * reason logged once per node and value. Never fatal.
 * Pure parsing and arithmetic: no I/O but that log line; a small mutex
 * guards the set of reasons already logged.
 */
#ifndef GQA_HAMI_TOPOLOGY_H
#define GQA_HAMI_TOPOLOGY_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/hami_node.h"

#define HAMI_SCORE_ANNOTATION "hami.io/node-nvidia-score"
/* 64 GPUs x 63 pairs x ~60 bytes is ~240 kB; anything much larger is not a plugin's. */
#define HAMI_SCORE_MAX_BYTES (512 * 1024)
#define HAMI_SCORE_MAX_ENTRIES 1024       /* array entries, and members of one "score" object */
#define HAMI_SCORE_MAX_VALUE 1000000000LL /* |score|; the plugin writes at most 1800 per pair */
/* Combinations HAMi's exhaustive search may try per container before the
 * policy's own pick is taken instead (C(16,8) = 12870 fits, C(20,8) = 125970 not). */
#define HAMI_TOPOLOGY_MAX_COMBINATIONS 20000

struct hami_pair_scores {
    int count;      /* the node's HAMi devices */
    int64_t *score; /* count x count: score[i * count + j] is device i's entry for device j (0 when absent) */
};

/* Read text (the annotation value) against the node's devices. 0 with *out
 * set, or -1 with *err (malloc'd, NULL when memory ran out) and *out NULL. */
int hami_pair_scores_parse(const char *text, const struct hami_device *devices, int count,
                           struct hami_pair_scores **out, char **err);
void hami_pair_scores_free(struct hami_pair_scores *s);

/* Attach the node's annotation (annotations may be NULL) to h->pair_scores.
 * A bad annotation is logged once and leaves it NULL. 0, or -1 when memory
 * ran out. */
int hami_topology_read(const cJSON *annotations, struct hami_node *h, const char *node);

/* HAMi's topology-aware pick of k devices among the nc candidates cand[]
 * (device positions, in the order HAMi's Fit walks them): a bit mask of
 * device positions, or 0 when k is out of range or the search would try
 * more than HAMI_TOPOLOGY_MAX_COMBINATIONS combinations. */
uint64_t hami_topology_choose(const struct hami_pair_scores *s, const int *cand, int nc, int k);

/* The pair-score sum of a set of devices (each pair in ascending position
 * order), for explanations and tests. */
int64_t hami_topology_set_score(const struct hami_pair_scores *s, uint64_t set);

#endif
