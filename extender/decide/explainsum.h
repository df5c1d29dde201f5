/*
 * explainsum.h - the grouped part of an explain answer.
 *
 * Owns what turns an evaluation over thousands of nodes into something a
 * person reads: the failed nodes grouped by reason class and a message that
 * holds for every node of the group ("412 nodes: no GPU with 60
 * tencent.com/vcuda-core free"), the best near miss (the failed node closest
 * to taking the pod) and what would make it fit. /inspect/explain, the /ui
 * page and `kubectl gpu explain` all read these fields, so the grouping is
 * done once, here. Pure: reads the evaluation, the pod and, for the near
 * miss's hint, the quota left on that one node (explain_quota).
 */
#ifndef GQA_EXPLAINSUM_H
#define GQA_EXPLAINSUM_H

#include <stddef.h>

#include "cluster/podspec.h"
#include "extender/decide/placement.h"
#include "lib/strbuf.h"

/* The GPU quota the pod's namespace has left on a node, in cores (100 =
 * one GPU), or -1 when quota does not limit it there: a hint never asks for
 * more than that. */
struct explain_quota {
    int64_t (*left)(void *ctx, const char *node);
    void *ctx;
};

/* Append `,"feasible":N,"summary":[...],"nearMiss":{...}|null` to an explain
 * answer being built; order is the ranking (evaluation_rank). quota may be
 * NULL (no quota in force). */
void explain_put_summary(struct strbuf *sb, const struct evaluation *ev, const struct pod_info *pod,
                         const size_t *order, const struct explain_quota *quota);

/* The reason class that refused the most nodes (REASON_NONE when some node
 * fits or there are none): what an unschedulable pod is counted under. */
enum reason_class explain_main_reason(const struct evaluation *ev);

#endif
