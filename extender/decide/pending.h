/*
 * pending.h - unschedulable pods by reason class, from filter answers.
 *
 * Owns two views of "why do pods stay Pending": a counter of filter answers
 * in which no node fit, by the reason class that refused the most nodes
 * (explain_main_reason), and a gauge of the pods whose latest filter answer
 * was such a one. A pod leaves the gauge when a later filter finds it a
 * node, when the cache holds it bound, or PENDING_FORGET_S after its last
 * filter (kube-scheduler retries an unschedulable pod at least every 5
 * minutes, so one not seen for longer has gone or been placed by other means).
 * Counters are lock-free; the gauge's table has its own mutex, held only
 * for table operations (never across I/O or the cache lock's acquisition...
 * except at scrape, where the cache read lock is taken first).
 */
#ifndef GQA_PENDING_H
#define GQA_PENDING_H

#include "cluster/cache.h"
#include "extender/decide/placement.h"
#include "lib/strbuf.h"

#define PENDING_FORGET_S 600
/* The gauge tracks at most this many pods: any client that reaches the filter
 * can name pods, and the table must not grow with what it sends. Beyond it
 * new pods are counted in the counter only. */
#define PENDING_MAX_PODS 100000

/* After a filter answer for pod key. */
void pending_observe(const char *pod_key, const struct evaluation *ev);
/* Prometheus text: gqa_filter_unschedulable_total and gqa_pending_pods. */
void pending_render_metrics(struct cluster_cache *cache, struct strbuf *out);

#endif
