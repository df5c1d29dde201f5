/*
 * explainsum.h - the grouped part of an explain answer.
 *
 * Owns what turns an evaluation over thousands of nodes into something a
 * person reads: the failed nodes grouped by reason class and a message that
 * holds for every node of the group ("412 nodes: no GPU with 60
 * tencent.com/vcuda-core free"), the best near miss (the failed node closest
 * to taking the pod) and what would make it fit. /inspect/explain, the /ui
 * page and `kubectl gpu explain` all read these fields, so the grouping is
 * done once, here. Pure: reads the evaluation and the pod only.
 */
#ifndef GQA_EXPLAINSUM_H
#define GQA_EXPLAINSUM_H

#include <stddef.h>

#include "cluster/podspec.h"
#include "extender/placement.h"
#include "lib/strbuf.h"

/* Append `,"feasible":N,"summary":[...],"nearMiss":{...}|null` to an explain
 * answer being built; order is the ranking (evaluation_rank). */
void explain_put_summary(struct strbuf *sb, const struct evaluation *ev, const struct pod_info *pod,
                         const size_t *order);

/* The reason class that refused the most nodes (REASON_NONE when some node
 * fits or there are none): what an unschedulable pod is counted under. */
enum reason_class explain_main_reason(const struct evaluation *ev);

#endif
