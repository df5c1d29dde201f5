/* metrics.c - Prometheus metrics. See metrics.h. */
#include "extender/decide/metrics.h"

#include "lib/version.h"

#include <stdatomic.h>
#include <string.h>

static const char *const verb_names[VERB_COUNT] = {"filter",    "prioritize", "bind",    "preemption",
                                                   "admission", "explain",    "inspect", "health",
                                                   "version",   "metrics",    "other"};

/* Status classes kept per verb: the codes this service answers. */
static const int status_codes[] = {200, 400, 403, 404, 405, 413, 500, 503};
#define NSTATUS (sizeof(status_codes) / sizeof(status_codes[0]))

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct verb_metrics {
    atomic_uint_fast64_t status[NSTATUS + 1];  /* last: any other code */
    atomic_uint_fast64_t bucket[NBUCKETS + 1]; /* last: +Inf */
    atomic_uint_fast64_t sum_us;
    atomic_uint_fast64_t body_bytes;
    atomic_uint_fast64_t answer_bytes;
};

static struct verb_metrics verbs[VERB_COUNT];

/* Objects dropped by the informers' feeds, by kind and reason (few, fixed). */
static const char *const skip_kinds[] = {"node", "pod", "configmap", "resourcequota"};
static const char *const skip_reasons[] = {"malformed", "invalid", "out_of_memory", "not_applied"};
#define NSKIP_KINDS (sizeof(skip_kinds) / sizeof(skip_kinds[0]))
#define NSKIP_REASONS (sizeof(skip_reasons) / sizeof(skip_reasons[0]))
static atomic_uint_fast64_t skipped_objects[NSKIP_KINDS][NSKIP_REASONS];
static atomic_uint_fast64_t filter_nodes_fit, filter_nodes_failed, decisions;
static atomic_uint_fast64_t hami_binds[HAMI_BIND_RESULTS];
/* The extender verbs come first in enum metric_verb. */
#define ANSWER_VERBS (VERB_PREEMPTION + 1)
static atomic_uint_fast64_t answers[ANSWER_VERBS][ANSWER_OUTCOMES];

void metrics_observe_request(enum metric_verb verb, int status, double seconds, uint64_t body_bytes,
                             uint64_t answer_bytes)
{
    struct verb_metrics *m = &verbs[verb];
    size_t s = 0;
    while (s < NSTATUS && status_codes[s] != status)
        s++;
    atomic_fetch_add_explicit(&m->status[s], 1, memory_order_relaxed);
    size_t b = 0;
    while (b < NBUCKETS && seconds > buckets[b])
        b++;
    atomic_fetch_add_explicit(&m->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_us, (uint64_t)(seconds * 1e6), memory_order_relaxed);
    atomic_fetch_add_explicit(&m->body_bytes, body_bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->answer_bytes, answer_bytes, memory_order_relaxed);
}

void metrics_count_filter(uint64_t fit, uint64_t failed, int decided)
{
    atomic_fetch_add_explicit(&filter_nodes_fit, fit, memory_order_relaxed);
    atomic_fetch_add_explicit(&filter_nodes_failed, failed, memory_order_relaxed);
    if (decided)
        atomic_fetch_add_explicit(&decisions, 1, memory_order_relaxed);
}

void metrics_count_hami_bind(enum hami_bind_result result)
{
    if (result < HAMI_BIND_RESULTS)
        atomic_fetch_add_explicit(&hami_binds[result], 1, memory_order_relaxed);
}

void metrics_count_answer(enum metric_verb verb, enum answer_outcome outcome)
{
    if ((int)verb >= 0 && verb < ANSWER_VERBS && outcome < ANSWER_OUTCOMES)
        atomic_fetch_add_explicit(&answers[verb][outcome], 1, memory_order_relaxed);
}

/* A counter with two labels, one series per pair: cells[a * nb + b]. */
static void render_grid(struct strbuf *out, const char *name, const char *help, const char *label_a,
                        const char *const *names_a, size_t na, const char *label_b, const char *const *names_b,
                        size_t nb, atomic_uint_fast64_t *cells)
{
    strbuf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (size_t a = 0; a < na; a++)
        for (size_t b = 0; b < nb; b++)
            strbuf_printf(out, "%s{%s=\"%s\",%s=\"%s\"} %llu\n", name, label_a, names_a[a], label_b, names_b[b],
                          (unsigned long long)atomic_load_explicit(&cells[a * nb + b], memory_order_relaxed));
}

static void render_answers(struct strbuf *out)
{
    static const char *const names[ANSWER_OUTCOMES] = {"fit", "unschedulable", "error"};
    render_grid(out, "gqa_extender_answers_total",
                "Extender answers by verb and outcome: fit, unschedulable (a filter that kept no node), error (Error "
                "set in a 200 answer, or an error status).",
                "verb", verb_names, ANSWER_VERBS, "outcome", names, ANSWER_OUTCOMES, &answers[0][0]);
}

static atomic_uint_fast64_t api_writes[API_WRITES][API_WRITE_RESULTS];

enum api_write_result metrics_write_result(int request_rc, long status, const char *error)
{
    if (request_rc != 0 || status == 0) /* libcurl's CURLE_OPERATION_TIMEDOUT reads "Timeout was reached" */
        return error && (strstr(error, "Timeout") || strstr(error, "timed out")) ? WRITE_TIMEOUT : WRITE_ERROR;
    if (status >= 200 && status < 300)
        return WRITE_OK;
    switch (status) {
    case 409:
        return WRITE_CONFLICT;
    case 401:
    case 403:
        return WRITE_FORBIDDEN;
    case 404:
        return WRITE_NOT_FOUND;
    case 400:
    case 422:
        return WRITE_INVALID;
    case 408:
    case 504:
        return WRITE_TIMEOUT;
    default:
        return WRITE_ERROR;
    }
}

void metrics_count_api_write(enum api_write what, int request_rc, long status, const char *error)
{
    if ((int)what >= 0 && what < API_WRITES)
        atomic_fetch_add_explicit(&api_writes[what][metrics_write_result(request_rc, status, error)], 1,
                                  memory_order_relaxed);
}

static void render_api_writes(struct strbuf *out)
{
    static const char *const writes[API_WRITES] = {"decision_patch", "binding",        "clear",       "hami_phase",
                                                   "hami_lock",      "hami_handshake", "leader_label"};
    static const char *const results[API_WRITE_RESULTS] = {"ok",      "conflict", "forbidden", "not_found",
                                                           "invalid", "timeout",  "error"};
    render_grid(out, "gqa_api_writes_total",
                "Writes to the API server, by what they write and how they ended (ok, conflict, forbidden, "
                "not_found, invalid, timeout, error).",
                "write", writes, API_WRITES, "result", results, API_WRITE_RESULTS, &api_writes[0][0]);
}

static void render_build_info(struct strbuf *out)
{
    strbuf_puts(out, "# HELP gqa_build_info The running build: version, git commit and build date, value 1.\n"
                     "# TYPE gqa_build_info gauge\ngqa_build_info{version=");
    metrics_label_value(out, GQA_VERSION);
    strbuf_puts(out, ",commit=");
    metrics_label_value(out, GQA_GIT_COMMIT);
    strbuf_puts(out, ",build_date=");
    metrics_label_value(out, GQA_BUILD_DATE);
    strbuf_puts(out, "} 1\n");
}

static void render_hami_binds(struct strbuf *out)
{
    static const char *const names[HAMI_BIND_RESULTS] = {"bound", "locked", "failed"};
    strbuf_puts(out, "# HELP gqa_hami_binds_total Binds of HAMi pods: bound (HAMi's plugin allocates next), locked "
                     "(another pod held the node lock), failed.\n# TYPE gqa_hami_binds_total counter\n");
    for (int i = 0; i < HAMI_BIND_RESULTS; i++)
        strbuf_printf(out, "gqa_hami_binds_total{result=\"%s\"} %llu\n", names[i],
                      (unsigned long long)atomic_load_explicit(&hami_binds[i], memory_order_relaxed));
}

static size_t index_of(const char *const *names, size_t n, const char *name, size_t fallback)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return fallback;
}

void metrics_count_skipped(const char *kind, const char *reason)
{
    size_t k = index_of(skip_kinds, NSKIP_KINDS, kind, NSKIP_KINDS);
    if (k == NSKIP_KINDS)
        return;
    size_t r = index_of(skip_reasons, NSKIP_REASONS, reason, 1);
    atomic_fetch_add_explicit(&skipped_objects[k][r], 1, memory_order_relaxed);
}

static uint64_t load(atomic_uint_fast64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static void render_requests(struct strbuf *out)
{
    strbuf_puts(out, "# HELP gqa_http_requests_total HTTP requests answered, by verb and status code.\n"
                     "# TYPE gqa_http_requests_total counter\n");
    for (int v = 0; v < VERB_COUNT; v++) {
        for (size_t s = 0; s <= NSTATUS; s++) {
            uint64_t n = load(&verbs[v].status[s]);
            if (!n)
                continue;
            if (s < NSTATUS)
                strbuf_printf(out, "gqa_http_requests_total{verb=\"%s\",code=\"%d\"} %llu\n", verb_names[v],
                              status_codes[s], (unsigned long long)n);
            else
                strbuf_printf(out, "gqa_http_requests_total{verb=\"%s\",code=\"other\"} %llu\n", verb_names[v],
                              (unsigned long long)n);
        }
    }
}

static void render_latency(struct strbuf *out)
{
    strbuf_puts(out, "# HELP gqa_http_request_duration_seconds Time from the first byte of a request to its answer.\n"
                     "# TYPE gqa_http_request_duration_seconds histogram\n");
    for (int v = 0; v < VERB_COUNT; v++) {
        uint64_t cumulative = 0;
        for (size_t b = 0; b <= NBUCKETS; b++) {
            cumulative += load(&verbs[v].bucket[b]);
            if (b < NBUCKETS)
                strbuf_printf(out, "gqa_http_request_duration_seconds_bucket{verb=\"%s\",le=\"%g\"} %llu\n",
                              verb_names[v], buckets[b], (unsigned long long)cumulative);
            else
                strbuf_printf(out, "gqa_http_request_duration_seconds_bucket{verb=\"%s\",le=\"+Inf\"} %llu\n",
                              verb_names[v], (unsigned long long)cumulative);
        }
        strbuf_printf(out, "gqa_http_request_duration_seconds_sum{verb=\"%s\"} %.6f\n", verb_names[v],
                      (double)load(&verbs[v].sum_us) / 1e6);
        strbuf_printf(out, "gqa_http_request_duration_seconds_count{verb=\"%s\"} %llu\n", verb_names[v],
                      (unsigned long long)cumulative);
    }
    strbuf_puts(out, "# HELP gqa_http_request_body_bytes_total Request body bytes received, by verb.\n"
                     "# TYPE gqa_http_request_body_bytes_total counter\n");
    for (int v = 0; v < VERB_COUNT; v++)
        strbuf_printf(out, "gqa_http_request_body_bytes_total{verb=\"%s\"} %llu\n", verb_names[v],
                      (unsigned long long)load(&verbs[v].body_bytes));
    strbuf_puts(out, "# HELP gqa_http_response_body_bytes_total Answer body bytes queued, by verb.\n"
                     "# TYPE gqa_http_response_body_bytes_total counter\n");
    for (int v = 0; v < VERB_COUNT; v++)
        strbuf_printf(out, "gqa_http_response_body_bytes_total{verb=\"%s\"} %llu\n", verb_names[v],
                      (unsigned long long)load(&verbs[v].answer_bytes));
}

static void render_cache(struct strbuf *out, struct cluster_cache *cache)
{
    cache_read_lock(cache);
    size_t pods = dict_size(&cache->pods), cms = dict_size(&cache->configmaps);
    int nodes = cache->present_nodes, assumed = cache->assumed_pods;
    cache_unlock(cache);
    strbuf_printf(out,
                  "# HELP gqa_cache_nodes Nodes in the cache.\n# TYPE gqa_cache_nodes gauge\ngqa_cache_nodes %d\n"
                  "# HELP gqa_cache_pods Pods in the cache.\n# TYPE gqa_cache_pods gauge\ngqa_cache_pods %zu\n"
                  "# HELP gqa_cache_configmaps ConfigMaps in the cache.\n# TYPE gqa_cache_configmaps gauge\n"
                  "gqa_cache_configmaps %zu\n"
                  "# HELP gqa_assumed_pods Pods holding GPUs by an unexpired, unbound decision.\n"
                  "# TYPE gqa_assumed_pods gauge\ngqa_assumed_pods %d\n",
                  nodes, pods, cms, assumed);
}

static void render_skipped(struct strbuf *out)
{
    strbuf_puts(out, "# HELP gqa_objects_skipped_total Objects from the API server that were dropped (logged with the "
                     "reason), by kind and reason.\n"
                     "# TYPE gqa_objects_skipped_total counter\n");
    for (size_t k = 0; k < NSKIP_KINDS; k++)
        for (size_t r = 0; r < NSKIP_REASONS; r++)
            strbuf_printf(out, "gqa_objects_skipped_total{kind=\"%s\",reason=\"%s\"} %llu\n", skip_kinds[k],
                          skip_reasons[r], (unsigned long long)load(&skipped_objects[k][r]));
}

void metrics_render(struct strbuf *out, struct cluster_cache *cache)
{
    render_build_info(out);
    render_requests(out);
    render_answers(out);
    render_latency(out);
    strbuf_printf(out,
                  "# HELP gqa_filter_nodes_total Nodes judged by filter requests, by outcome.\n"
                  "# TYPE gqa_filter_nodes_total counter\n"
                  "gqa_filter_nodes_total{outcome=\"fit\"} %llu\ngqa_filter_nodes_total{outcome=\"failed\"} %llu\n"
                  "# HELP gqa_decisions_total Placement decisions recorded (filter placement mode).\n"
                  "# TYPE gqa_decisions_total counter\ngqa_decisions_total %llu\n",
                  (unsigned long long)load(&filter_nodes_fit), (unsigned long long)load(&filter_nodes_failed),
                  (unsigned long long)load(&decisions));
    render_hami_binds(out);
    render_api_writes(out);
    render_cache(out, cache);
    render_skipped(out);
}

void metrics_label_value(struct strbuf *out, const char *s)
{
    strbuf_putc(out, '"');
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            strbuf_putc(out, '\\');
        if (*s == '\n')
            strbuf_puts(out, "\\n");
        else
            strbuf_putc(out, *s);
    }
    strbuf_putc(out, '"');
}
