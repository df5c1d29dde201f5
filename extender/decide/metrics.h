/*
 * metrics.h - Prometheus metrics (text format 0.0.4).
 *
 * Owns the counters and histograms the service exports: requests by verb and
 * status code, extender answers by outcome, request latency histograms by
 * verb, request body sizes, filter outcomes and decisions, writes to the API
 * server by kind and result, and the build. All updates are lock-free atomics, so hot paths
 * pay a few instructions. Cache gauges are read at scrape time.
 */
#ifndef GQA_METRICS_H
#define GQA_METRICS_H

#include <stdint.h>

#include "cluster/cache.h"
#include "lib/strbuf.h"

enum metric_verb {
    VERB_FILTER = 0,
    VERB_PRIORITIZE,
    VERB_BIND,
    VERB_PREEMPTION,
    VERB_ADMISSION,
    VERB_EXPLAIN,
    VERB_INSPECT,
    VERB_HEALTH,
    VERB_VERSION,
    VERB_METRICS,
    VERB_OTHER,
    VERB_COUNT
};

/* One request answered: its status, time, and the bytes of its request and
 * answer bodies (the answer's 0 when none was queued). */
void metrics_observe_request(enum metric_verb verb, int status, double seconds, uint64_t body_bytes,
                             uint64_t answer_bytes);
void metrics_count_filter(uint64_t nodes_fit, uint64_t nodes_failed, int decided);
/* An object from the API server that was dropped: kind "node", "pod" or
 * "configmap"; reason "malformed", "invalid", "out_of_memory" or
 * "not_applied" (anything else is counted as "invalid"). */
void metrics_count_skipped(const char *kind, const char *reason);

/* A bind of a HAMi pod (hamibind.h), by how it ended. */
enum hami_bind_result { HAMI_BIND_BOUND = 0, HAMI_BIND_LOCKED, HAMI_BIND_FAILED, HAMI_BIND_RESULTS };

void metrics_count_hami_bind(enum hami_bind_result result);

/* How an extender verb's answer ended, whatever its HTTP status (the filter
 * and bind carry errors in a 200 answer's Error field): "fit" (a filter that
 * kept a node, or any other verb that succeeded), "unschedulable" (a filter
 * that kept none, with reasons), "error" (Error set, or an error status). */
enum answer_outcome { ANSWER_FIT = 0, ANSWER_UNSCHEDULABLE, ANSWER_ERROR, ANSWER_OUTCOMES };

void metrics_count_answer(enum metric_verb verb, enum answer_outcome outcome);

/* A write to the API server, by what it writes: a pod's decision
 * annotations, a Binding, a decision taken off, HAMi's bind-phase
 * annotations, HAMi's node lock, HAMi's handshake request on a node, the
 * leader label. */
enum api_write {
    WRITE_DECISION_PATCH = 0,
    WRITE_BINDING,
    WRITE_CLEAR,
    WRITE_HAMI_PHASE,
    WRITE_HAMI_LOCK,
    WRITE_HAMI_HANDSHAKE,
    WRITE_LEADER_LABEL,
    API_WRITES
};

/* Outcomes of such a write: ok (2xx), conflict (409), forbidden (401, 403:
 * RBAC or credentials), not_found (404), invalid (400, 422), timeout (408,
 * 504, or no answer within the deadline), error (anything else, including
 * a failed connection). */
enum api_write_result {
    WRITE_OK = 0,
    WRITE_CONFLICT,
    WRITE_FORBIDDEN,
    WRITE_NOT_FOUND,
    WRITE_INVALID,
    WRITE_TIMEOUT,
    WRITE_ERROR,
    API_WRITE_RESULTS
};
/* The result of a kube_request: its return code (non-zero: no answer), the
 * HTTP status and the error text (a transport error naming a timeout
 * counts as timeout). */
enum api_write_result metrics_write_result(int request_rc, long status, const char *error);
void metrics_count_api_write(enum api_write what, int request_rc, long status, const char *error);
/* Append this module's part of the exposition text; reads cache gauges
 * under the read lock. A leaf: handle_metrics (handlers.c) assembles
 * /metrics from it and the other modules' renderers. */
void metrics_render(struct strbuf *out, struct cluster_cache *cache);
/* Append s as a Prometheus label value: quoted, with \\, \" and \n
 * escaped, so names taken from objects cannot break the exposition. */
void metrics_label_value(struct strbuf *out, const char *s);

#endif
