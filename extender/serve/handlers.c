/* handlers.c - endpoint handlers. See handlers.h. */
#include "extender/serve/handlers.h"
#include "extender/decide/capacity.h"
#include "extender/decide/explainsum.h"
#include "extender/decide/metrics.h"
#include "extender/decide/pending.h"
#include "extender/live/live.h"
#include "extender/serve/guard.h"
#include "extender/serve/wire.h"
#include "extender/workers.h"
#include "lib/labelsel.h"
#include "lib/log.h"
#include "lib/strbuf.h"
#include "lib/version.h"
#include "lib/yamljson.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- extender verbs ------------------------------------------------------ */

/* How kube-scheduler's extender client sees errors (HTTPExtender.send: any
 * status but 200 is an error, the body is then not read): the filter reads
 * ExtenderFilterResult.Error from a 200 answer; a HostPriorityList and an
 * ExtenderPreemptionResult have no Error field, so those verbs answer 500
 * with the message as a plain-text body (kube-scheduler logs prioritize
 * errors and gives no score; it fails the preemption attempt). */
enum verb_answer { ANSWER_FILTER, ANSWER_STATUS };

static void extender_error(struct http_response *resp, enum verb_answer how, const char *msg)
{
    size_t len = 0;
    char *body;
    if (how == ANSWER_FILTER) {
        body = wire_filter_error(msg, &len);
        http_set_body(resp, 200, CONTENT_JSON, body, len);
        return;
    }
    body = strdup(msg);
    http_set_body(resp, 500, CONTENT_TEXT, body, body ? strlen(body) : 0);
}

/* The request's names as placement's memo compares them. */
static struct name_block names_of(const struct extender_args *args)
{
    return (struct name_block){args->names_buf, args->names_len, args->list ? args->list->serial : 0};
}

/* Decode ExtenderArgs and its Pod. On failure the error answer is set. */
static struct pod_info *decode_args(struct app *app, const struct http_request *req, struct extender_args *args,
                                    enum verb_answer how, struct http_response *resp)
{
    char *err = NULL;
    if (wire_parse_args_memo(req->body ? req->body : "", req->body_len, &app->node_lists, args, &err) != 0) {
        extender_error(resp, how, err ? err : "out of memory");
        log_warn("%s: bad ExtenderArgs: %s", req->path, err ? err : "out of memory");
        free(err);
        return NULL;
    }
    struct pod_info *pod = app_pod_from_json(app, args->pod, &err);
    if (!pod) {
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_printf(&sb, "Pod: %s", err ? err : "out of memory");
        extender_error(resp, how, sb.data ? sb.data : "Pod is not usable");
        strbuf_free(&sb);
        free(err);
        wire_args_free(args);
    }
    return pod;
}

static void count_outcome(const struct pod_info *pod, const struct evaluation *ev)
{
    pending_observe(pod->key, ev);
#ifndef NDEBUG
    size_t fit = 0;
    for (size_t i = 0; i < ev->count; i++)
        fit += ev->verdicts[i].fits;
    assert(fit == ev->fitting);
#endif
    metrics_count_filter(ev->fitting, ev->count - ev->fitting, ev->decided);
}

/* The filter answer. In the Nodes form the kept items are sent straight
 * from the request body (http.h pieces): no copy of megabytes of nodes. */
static void answer_filter(const struct extender_args *args, const struct evaluation *ev, struct http_response *resp)
{
    size_t len = 0;
    if (ev->error || args->form != ARGS_NODES) {
        char *body = ev->error ? wire_filter_error(ev->error, &len) : wire_filter_result(args, ev, &len);
        http_set_body(resp, 200, CONTENT_JSON, body, len);
        return;
    }
    char *text = NULL;
    struct http_piece *pieces = NULL;
    size_t n = 0;
    wire_filter_result_pieces(args, ev, &text, &pieces, &n);
    http_set_pieces(resp, 200, CONTENT_JSON, text, pieces, n);
}

void handle_filter(struct app *app, const struct http_request *req, struct http_response *resp)
{
    struct extender_args args;
    struct pod_info *pod = decode_args(app, req, &args, ANSWER_FILTER, resp);
    if (!pod) {
        metrics_count_answer(VERB_FILTER, ANSWER_ERROR);
        return;
    }
    struct evaluation ev = {0};
    struct name_block block = names_of(&args);
    if (placement_filter_block(&app->placement, pod, args.names, args.count, &block, &ev) == 0) {
        answer_filter(&args, &ev, resp);
        count_outcome(pod, &ev);
        metrics_count_answer(VERB_FILTER, ev.error ? ANSWER_ERROR : ev.fitting ? ANSWER_FIT : ANSWER_UNSCHEDULABLE);
    } else {
        http_set_body(resp, 200, CONTENT_JSON, NULL, 0); /* out of memory: 500 */
        metrics_count_answer(VERB_FILTER, ANSWER_ERROR);
    }
    evaluation_free(&ev);
    pod_info_free(pod);
    wire_args_free(&args);
}

void handle_prioritize(struct app *app, const struct http_request *req, struct http_response *resp)
{
    struct extender_args args;
    struct pod_info *pod = decode_args(app, req, &args, ANSWER_STATUS, resp);
    if (!pod) {
        metrics_count_answer(VERB_PRIORITIZE, ANSWER_ERROR);
        return;
    }
    struct evaluation ev = {0};
    size_t len = 0;
    struct name_block block = names_of(&args);
    enum answer_outcome outcome = ANSWER_ERROR;
    if (placement_evaluate_block(&app->placement, pod, args.names, args.count, &block, &ev) != 0) {
        http_set_body(resp, 200, CONTENT_JSON, NULL, 0); /* out of memory: 500 */
    } else if (ev.error) {
        extender_error(resp, ANSWER_STATUS, ev.error);
    } else {
        char *body = wire_priority_list(&args, &ev, &len);
        http_set_body(resp, 200, CONTENT_JSON, body, len);
        outcome = ANSWER_FIT;
    }
    metrics_count_answer(VERB_PRIORITIZE, outcome);
    evaluation_free(&ev);
    pod_info_free(pod);
    wire_args_free(&args);
}

void handle_bind(struct app *app, const struct http_request *req, struct http_response *resp)
{
    struct binding_args b;
    char *err = NULL;
    if (wire_parse_binding(req->body ? req->body : "", req->body_len, &b, &err) == 0) {
        int64_t until_ms = req->queued_ms > 0 ? req->queued_ms + PLACEMENT_BIND_BUDGET_MS : 0;
        placement_bind_until(&app->placement, b.pod_namespace, b.pod_name, b.pod_uid, b.node, until_ms, &err);
        wire_binding_free(&b);
    }
    size_t len = 0;
    char *body = wire_binding_result(err, &len);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
    metrics_count_answer(VERB_BIND, err ? ANSWER_ERROR : ANSWER_FIT);
    free(err);
}

void handle_preemption(struct app *app, const struct http_request *req, struct http_response *resp)
{
    struct preemption_args a;
    char *err = NULL;
    if (wire_parse_preemption(req->body ? req->body : "", req->body_len, &a, &err) != 0) {
        extender_error(resp, ANSWER_STATUS, err ? err : "out of memory");
        log_warn("%s: bad ExtenderPreemptionArgs: %s", req->path, err ? err : "out of memory");
        metrics_count_answer(VERB_PREEMPTION, ANSWER_ERROR);
        free(err);
        return;
    }
    enum answer_outcome outcome = ANSWER_ERROR;
    struct pod_info *pod = app_pod_from_json(app, (cJSON *)a.pod, &err);
    if (!pod) {
        char *msg = strbuf_format("Pod: %s", err ? err : "out of memory");
        extender_error(resp, ANSWER_STATUS, msg ? msg : "Pod is not usable");
        free(msg);
    } else if (placement_preempt(&app->placement, pod, a.nodes, a.count) != 0) {
        http_set_body(resp, 200, CONTENT_JSON, NULL, 0); /* out of memory: 500 */
    } else {
        size_t len = 0;
        char *body = wire_preemption_result(&a, &len);
        http_set_body(resp, 200, CONTENT_JSON, body, len);
        outcome = ANSWER_FIT;
    }
    metrics_count_answer(VERB_PREEMPTION, outcome);
    pod_info_free(pod);
    wire_preemption_free(&a);
    free(err);
}

/* ---- explain -------------------------------------------------------------- */

static void put_explain_node(struct strbuf *sb, const struct evaluation *ev, const struct pod_info *pod,
                             const struct verdict *v)
{
    strbuf_puts(sb, "{\"node\":");
    strbuf_json_string(sb, v->name);
    strbuf_printf(sb, ",\"fits\":%s,\"score\":%d,\"gpus\":{", v->fits ? "true" : "false", verdict_priority(v));
    if (v->fits && ev->gpus) {
        const int *g = ev->gpus + v->gpus_off;
        bool first = true;
        for (int i = 0; i < ev->ncontainers; i++) {
            int count = *g++;
            if (pod->containers[i].family != NULL) {
                if (!first)
                    strbuf_putc(sb, ',');
                first = false;
                strbuf_json_string(sb, pod->containers[i].name);
                strbuf_putc(sb, ':');
                strbuf_putc(sb, '[');
                for (int k = 0; k < count; k++)
                    strbuf_printf(sb, k ? ",%d" : "%d", g[k]);
                strbuf_putc(sb, ']');
            }
            g += count;
        }
    }
    strbuf_printf(sb, "},\"gpuSetScore\":%lld,\"gpuSetBest\":%lld,\"reason\":", (long long)v->set_score,
                  (long long)v->set_best);
    strbuf_json_string_n(sb, verdict_reason(ev, v), v->reason_len);
    strbuf_putc(sb, '}');
}

struct quota_probe {
    struct app *app;
    const struct pod_info *pod;
};

/* explain_quota.left: the quota the pod's namespace has left on node. */
static int64_t quota_left_on(void *ctx, const char *node)
{
    struct quota_probe *q = ctx;
    struct cluster_cache *c = &q->app->cache;
    int64_t left = -1;
    cache_read_lock(c);
    const struct node_state *n = policy_quota_binds(&q->app->policy, q->pod->ns) ? cache_find_node(c, node) : NULL;
    if (n)
        left = policy_quota_left(&q->app->policy, c, q->pod, cache_find_pod(c, q->pod->key), n);
    cache_unlock(c);
    return left;
}

static char *render_explain(struct app *app, const struct evaluation *ev, const struct pod_info *pod,
                            int *fits_somewhere)
{
    size_t *order = malloc(sizeof(*order) * (ev->count ? ev->count : 1));
    if (!order)
        return NULL;
    evaluation_rank(ev, order);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"pod\":");
    strbuf_json_string(&sb, pod->key);
    if (ev->error) {
        strbuf_puts(&sb, ",\"error\":");
        strbuf_json_string(&sb, ev->error);
    }
    strbuf_puts(&sb, ",\"nodes\":[");
    *fits_somewhere = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const struct verdict *v = &ev->verdicts[order[i]];
        if (i)
            strbuf_putc(&sb, ',');
        put_explain_node(&sb, ev, pod, v);
        *fits_somewhere |= v->fits;
    }
    strbuf_putc(&sb, ']');
    struct quota_probe probe = {app, pod};
    struct explain_quota quota = {quota_left_on, &probe};
    explain_put_summary(&sb, ev, pod, order, &quota);
    strbuf_puts(&sb, "}\n");
    free(order);
    return strbuf_detach(&sb, NULL);
}

/* Explain pod (taken) over every node the cache holds. */
static char *explain_pod_info(struct app *app, struct pod_info *pod, int *fits_somewhere, char **err)
{
    size_t count = 0;
    char **names = placement_all_node_names(&app->placement, &count);
    struct evaluation ev;
    char *out = NULL;
    if (names && placement_evaluate(&app->placement, pod, (const char *const *)names, count, &ev) == 0) {
        out = render_explain(app, &ev, pod, fits_somewhere);
        evaluation_free(&ev);
    }
    if (!out && err)
        *err = strdup("out of memory");
    free_names(names, count);
    pod_info_free(pod);
    return out;
}

char *explain_pod(struct app *app, cJSON *pod_json, int *fits_somewhere, char **err)
{
    struct pod_info *pod = app_pod_from_json(app, pod_json, err);
    return pod ? explain_pod_info(app, pod, fits_somewhere, err) : NULL;
}

/* GET ?namespace=NS&name=POD: a pod the service already holds, for callers
 * that reach the service but not the API server (kubectl gpu --server). */
static void explain_cached(struct app *app, const struct http_request *req, struct http_response *resp)
{
    const char *ns = http_query(req, "namespace"), *name = http_query(req, "name");
    if (!ns || !*ns || !name || !*name) {
        http_json_error(resp, 400, "GET needs ?namespace=NS&name=POD (or POST the Pod)");
        return;
    }
    char *key = strbuf_format("%s/%s", ns, name), *err = NULL;
    cache_read_lock(&app->cache);
    const struct pod_entry *e = key ? cache_find_pod(&app->cache, key) : NULL;
    struct pod_info *pod = e ? pod_info_clone(e->info) : NULL;
    cache_unlock(&app->cache);
    int fits = 0;
    char *body = pod ? explain_pod_info(app, pod, &fits, &err) : NULL;
    if (body)
        http_set_body(resp, 200, CONTENT_JSON, body, strlen(body));
    else if (!e && key && (err = strbuf_format("pod %s is not among the pods the service holds", key)))
        http_json_error(resp, 404, err);
    else
        http_json_error(resp, 500, err ? err : "out of memory");
    free(err);
    free(key);
}

void handle_explain(struct app *app, const struct http_request *req, struct http_response *resp)
{
    if (strcmp(req->method, "POST") != 0) {
        explain_cached(app, req, resp);
        return;
    }
    /* JSON, or YAML as people paste it (the /ui form, curl --data-binary @pod.yaml). */
    const char *text = req->body ? req->body : "";
    cJSON *pod = text_looks_like_json(text, req->body_len) ? cJSON_ParseWithLength(text, req->body_len) : NULL;
    if (!pod && req->body_len)
        pod = yaml_to_json(text, req->body_len, NULL);
    if (!cJSON_IsObject(pod)) {
        http_json_error(resp, 400, "body must be a Pod (a JSON or YAML object)");
        cJSON_Delete(pod);
        return;
    }
    char *err = NULL;
    int fits = 0;
    char *body = explain_pod(app, pod, &fits, &err);
    if (body)
        http_set_body(resp, 200, CONTENT_JSON, body, strlen(body));
    else
        http_json_error(resp, 400, err ? err : "out of memory");
    free(err);
    cJSON_Delete(pod);
}

/* ---- inspect -------------------------------------------------------------- */

/* The family whose memory a node's GPUs show: the first with a memory
 * pool the node offers, else the first with a memory pool. */
static const struct gpu_family *memory_family(const struct node_state *n)
{
    const struct gpu_family *first = NULL;
    for (size_t i = 0; i < gpu_family_count(); i++) {
        const struct gpu_family *f = gpu_family_at(i);
        if (f->memory_pool < 0 || !f->node_memory_resource)
            continue;
        if (n->spec && node_spec_offer(n->spec, f) > 0)
            return f;
        if (!first)
            first = f;
    }
    return first;
}

/* Does the pod hold GPU slot (-1: unattributed use)? */
static bool uses_slot(const struct pod_entry *e, int slot)
{
    if (slot < 0)
        return e->unattributed.pods > 0;
    for (int i = 0; i < e->nslots; i++)
        if (e->slots[i].slot == slot)
            return true;
    return false;
}

static void put_pod_list(struct strbuf *sb, const struct node_state *n, int slot)
{
    cache_put_charged_keys(sb, n, uses_slot, slot);
}

static void put_resources(struct strbuf *sb, const struct node_spec *s)
{
    strbuf_puts(sb, "\"resources\":{");
    for (size_t i = 0, put = 0; s && i < gpu_family_count(); i++) {
        const struct gpu_family *f = gpu_family_at(i);
        if (f->node_core_resource)
            strbuf_printf(sb, "%s\"%s\":%lld", put++ ? "," : "", f->node_core_resource,
                          (long long)node_spec_offer(s, f));
        if (f->node_memory_resource && f->memory_pool >= 0)
            strbuf_printf(sb, ",\"%s\":%lld", f->node_memory_resource,
                          (long long)node_spec_memory_offer(s, f->memory_pool));
    }
    strbuf_puts(sb, "},");
}

static void put_gpus(struct strbuf *sb, const struct node_state *n)
{
    int pool = memory_family(n)->memory_pool;
    strbuf_puts(sb, "\"gpus\":[");
    for (int s = 0; s < n->gpu_count; s++) {
        const struct gpu_state *g = &n->gpus[s];
        strbuf_printf(sb,
                      "%s{\"index\":%d,\"minor\":%d,\"numa\":%d,\"coreUsed\":%lld,\"coreTotal\":100,"
                      "\"memoryUsed\":%lld,\"memoryTotal\":%lld,\"pods\":",
                      s ? "," : "", s, g->minor, g->numa, (long long)g->core_used, (long long)g->mem_used[pool],
                      (long long)g->mem_total[pool]);
        put_pod_list(sb, n, s);
        strbuf_putc(sb, '}');
    }
    strbuf_puts(sb, "],");
}

static void put_unit(void *ctx, const char *resource, int64_t total, int64_t used)
{
    struct strbuf *sb = ctx;
    if (sb->len && sb->data[sb->len - 1] == '}')
        strbuf_putc(sb, ',');
    strbuf_puts(sb, "{\"resource\":");
    strbuf_json_string(sb, resource);
    strbuf_printf(sb, ",\"total\":%lld,\"used\":%lld}", (long long)total, (long long)used);
}

/* "mig": what GFD says of the node's MIG (strategy, parent product), or null. */
static void put_mig_strategy(struct strbuf *sb, const struct node_spec *s)
{
    strbuf_puts(sb, ",\"mig\":");
    if (!s || !s->mig) {
        strbuf_puts(sb, "null");
        return;
    }
    strbuf_printf(sb, "{\"strategy\":\"%s\",\"single\":%s,\"product\":", mig_strategy_name(s->mig->strategy),
                  s->mig->single ? "true" : "false");
    strbuf_json_string(sb, s->mig->product);
    strbuf_putc(sb, '}');
}

/* "units": what the self-placing families (MIG) keep on the node, per resource. */
static void put_family_units(struct strbuf *sb, const struct node_state *n)
{
    strbuf_puts(sb, ",\"units\":[");
    for (size_t f = 0; f < gpu_family_count(); f++) {
        const struct gpu_family *fam = gpu_family_at(f);
        if (fam->units && n->family_state[f])
            fam->units(n->family_state[f], n, put_unit, sb);
    }
    strbuf_putc(sb, ']');
}

/* A JSON key in camel case: "vcuda-memory" is "vcudaMemory". */
static void put_camel_key(struct strbuf *sb, const char *name)
{
    strbuf_putc(sb, '"');
    for (bool up = false; *name; name++) {
        if (*name == '-') {
            up = true;
            continue;
        }
        strbuf_putc(sb, up && *name >= 'a' && *name <= 'z' ? (char)(*name - 'a' + 'A') : *name);
        up = false;
    }
    strbuf_putc(sb, '"');
}

static void put_node(struct strbuf *sb, const struct node_state *n, bool with_topology)
{
    strbuf_puts(sb, "{\"node\":");
    strbuf_json_string(sb, n->name);
    strbuf_puts(sb, ",\"model\":");
    strbuf_json_string(sb, node_spec_model_name(n->spec));
    strbuf_puts(sb, ",\"pool\":");
    strbuf_json_string(sb, n->spec && n->spec->pool ? n->spec->pool : "");
    strbuf_printf(sb, ",\"gpuCount\":%d,\"memoryResource\":\"%s\",", n->gpu_count,
                  memory_family(n)->node_memory_resource);
    put_resources(sb, n->spec);
    put_gpus(sb, n);
    strbuf_printf(sb, "\"unattributed\":{\"cores\":%lld,", (long long)n->unattributed.cores);
    for (int p = 0; p < GPU_MEMORY_POOLS; p++) {
        put_camel_key(sb, gpu_memory_pool_name(p));
        strbuf_printf(sb, ":%lld,", (long long)n->unattributed.mem[p]);
    }
    strbuf_puts(sb, "\"pods\":");
    put_pod_list(sb, n, -1);
    strbuf_putc(sb, '}');
    put_family_units(sb, n);
    put_mig_strategy(sb, n->spec);
    if (!with_topology) {
        strbuf_putc(sb, '}');
        return;
    }
    strbuf_puts(sb, ",\"topology\":");
    char *topo = n->spec && n->spec->topology ? topology_serialize(n->spec->topology) : NULL;
    strbuf_puts(sb, topo ? topo : "null");
    free(topo);
    if (n->spec && n->spec->topology_error) {
        strbuf_puts(sb, ",\"topologyError\":");
        strbuf_json_string(sb, n->spec->topology_error);
    }
    hami_occupancy_json(sb, n, clock_realtime_ns());
    strbuf_putc(sb, '}');
}

static int compare_names(const void *a, const void *b)
{
    return strcmp((*(const struct node_state *const *)a)->name, (*(const struct node_state *const *)b)->name);
}

static const char *spec_label(const void *spec, const char *key)
{
    return node_spec_label(spec, key);
}

/* ?labelSelector=SEL&model=M&topology=false: which nodes, and how much of each. */
struct node_query {
    struct label_selector *selector;
    const char *model;
    bool topology;
};

static int node_query_parse(const struct http_request *req, struct node_query *q, struct http_response *resp)
{
    const char *sel = http_query(req, "labelSelector"), *topo = http_query(req, "topology");
    q->model = http_query(req, "model");
    q->topology = !topo || strcmp(topo, "false") != 0;
    q->selector = NULL;
    if (!sel || !*sel)
        return 0;
    char *err = NULL;
    q->selector = label_selector_parse(sel, &err);
    if (!q->selector)
        http_json_error(resp, 400, err ? err : "out of memory");
    free(err);
    return q->selector ? 0 : -1;
}

static bool node_query_matches(const struct node_query *q, const struct node_state *n)
{
    if (!n->present)
        return false;
    if (q->model && *q->model && strcmp(q->model, node_spec_model_name(n->spec)) != 0)
        return false;
    return !q->selector || label_selector_matches(q->selector, spec_label, n->spec);
}

void handle_inspect_nodes(struct app *app, const struct http_request *req, struct http_response *resp)
{
    struct node_query q;
    if (node_query_parse(req, &q, resp) != 0)
        return;
    struct strbuf sb;
    strbuf_init(&sb);
    /* Show occupancy as the filter would see it now: drop expired assumptions. */
    cache_expire(&app->cache, clock_realtime_ns());
    cache_read_lock(&app->cache);
    size_t n = 0, pos = 0;
    const struct node_state **nodes = malloc(sizeof(*nodes) * (dict_size(&app->cache.nodes) + 1));
    struct dict_entry *de;
    while (nodes && (de = dict_next(&app->cache.nodes, &pos)))
        if (node_query_matches(&q, de->value))
            nodes[n++] = de->value;
    if (nodes) {
        qsort(nodes, n, sizeof(*nodes), compare_names);
        strbuf_putc(&sb, '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                strbuf_putc(&sb, ',');
            put_node(&sb, nodes[i], q.topology);
        }
        strbuf_puts(&sb, "]\n");
    }
    cache_unlock(&app->cache);
    free(nodes);
    label_selector_free(q.selector);
    size_t len = 0;
    char *body = nodes ? strbuf_detach(&sb, &len) : (strbuf_free(&sb), NULL);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
}

static int64_t usage_of(void *ctx, const char *ns, const char *model)
{
    return cache_usage(ctx, ns, model);
}

void handle_inspect_quota(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)req;
    cache_expire(&app->cache, clock_realtime_ns());
    cache_read_lock(&app->cache);
    char *body = quota_render(app->policy.quota, app->policy.quota_error, usage_of, &app->cache);
    cache_unlock(&app->cache);
    http_set_body(resp, 200, CONTENT_JSON, body, body ? strlen(body) : 0);
}

static void put_crl(struct strbuf *sb, const struct crl *c)
{
    strbuf_puts(sb, "{\"name\":");
    strbuf_json_string(sb, c->name);
    strbuf_puts(sb, ",\"group\":");
    strbuf_json_string(sb, c->group);
    strbuf_puts(sb, ",\"key\":");
    strbuf_json_string(sb, c->key);
    strbuf_puts(sb, ",\"defaultValue\":");
    strbuf_json_string(sb, c->default_value ? c->default_value : "");
    static const char *const limits[] = {"disabled", "required", "optional"};
    static const char *const requests[] = {"disabled", "required", "fromLimits"};
    strbuf_printf(sb, ",\"limits\":\"%s\",\"requests\":\"%s\"}", limits[c->limits], requests[c->requests]);
}

void handle_inspect_crl(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)req;
    struct strbuf sb;
    strbuf_init(&sb);
    cache_read_lock(&app->cache);
    const struct crl_registry *r = app->policy.crls;
    strbuf_puts(&sb, "{\"namespace\":");
    strbuf_json_string(&sb, app->policy.crl_namespace);
    strbuf_puts(&sb, ",\"enabled\":[");
    for (size_t i = 0; i < r->count; i++) {
        if (i)
            strbuf_putc(&sb, ',');
        put_crl(&sb, r->crls[i]);
    }
    strbuf_puts(&sb, "],\"invalid\":[");
    for (size_t i = 0; i < r->invalid_count; i++) {
        strbuf_puts(&sb, i ? ",{\"name\":" : "{\"name\":");
        strbuf_json_string(&sb, r->invalid[i].name);
        strbuf_puts(&sb, ",\"problems\":[");
        for (size_t k = 0; k < r->invalid[i].problems.count; k++) {
            if (k)
                strbuf_putc(&sb, ',');
            strbuf_json_string(&sb, r->invalid[i].problems.items[k]);
        }
        strbuf_puts(&sb, "]}");
    }
    strbuf_puts(&sb, "]}\n");
    cache_unlock(&app->cache);
    size_t len = 0;
    char *body = strbuf_detach(&sb, &len);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
}

void handle_inspect_informers(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)req;
    struct strbuf sb;
    strbuf_init(&sb);
    if (app->live)
        live_render_informers(app->live, &sb);
    else
        strbuf_puts(&sb, "[]\n"); /* offline: the state file, no informers */
    size_t len = 0;
    char *body = strbuf_detach(&sb, &len);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
}

void handle_inspect_node(struct app *app, const struct http_request *req, struct http_response *resp)
{
    const char *name = strrchr(req->path, '/') + 1;
    struct strbuf sb;
    strbuf_init(&sb);
    cache_expire(&app->cache, clock_realtime_ns());
    cache_read_lock(&app->cache);
    const struct node_state *n = cache_find_node(&app->cache, name);
    bool found = n && n->present;
    if (found) {
        put_node(&sb, n, true);
        strbuf_putc(&sb, '\n');
    }
    cache_unlock(&app->cache);
    if (!found) {
        strbuf_free(&sb);
        strbuf_printf(&sb, "node %s is not in the cache", name);
        http_json_error(resp, 404, sb.data ? sb.data : "node not found");
        strbuf_free(&sb);
        return;
    }
    size_t len = 0;
    char *body = strbuf_detach(&sb, &len);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
}

/* ---- health, version, metrics -------------------------------------------- */

void handle_healthz(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)app;
    (void)req;
    http_set_body(resp, 200, CONTENT_TEXT, strdup("ok\n"), 3);
}

void handle_readyz(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)req;
    char reason[512]; /* an informer's reason: the API server's message, whole when it fits */
    if (app->live && atomic_load(&app->ready) && !live_ready(app->live, reason, sizeof(reason))) {
        http_json_error(resp, 503, reason);
        return;
    }
    if (atomic_load(&app->ready)) {
        http_set_body(resp, 200, CONTENT_TEXT, strdup("ok\n"), 3);
        return;
    }
    http_json_error(resp, 503, app->not_ready_reason);
}

void handle_version(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)app;
    (void)req;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "{\"version\":\"%s\",\"gitCommit\":\"%s\",\"buildDate\":\"%s\"}\n", GQA_VERSION, GQA_GIT_COMMIT,
                  GQA_BUILD_DATE);
    size_t len = 0;
    char *body = strbuf_detach(&sb, &len);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
}

/* Admission state: CRLs in force and refused, quota against usage. */
/* Namespace and model come from the quota ConfigMap's keys: escaped. */
static void put_quota_series(struct strbuf *sb, const char *name, const struct quota_entry *e, size_t model,
                             double value)
{
    strbuf_printf(sb, "%s{namespace=", name);
    metrics_label_value(sb, e->namespace_);
    strbuf_puts(sb, ",model=");
    metrics_label_value(sb, e->models[model].model);
    strbuf_printf(sb, "} %.10g\n", value);
}

static void render_policy_metrics(struct app *app, struct strbuf *sb)
{
    cache_read_lock(&app->cache);
    const struct crl_registry *r = app->policy.crls;
    strbuf_printf(sb,
                  "# HELP gqa_crl_enabled CustomResourceLimitations in force.\n# TYPE gqa_crl_enabled gauge\n"
                  "gqa_crl_enabled %zu\n"
                  "# HELP gqa_crl_invalid CustomResourceLimitation ConfigMaps ignored because of problems.\n"
                  "# TYPE gqa_crl_invalid gauge\ngqa_crl_invalid %zu\n"
                  "# HELP gqa_quota_valid 1 when the quota ConfigMap is absent or usable, 0 when it is ignored.\n"
                  "# TYPE gqa_quota_valid gauge\ngqa_quota_valid %d\n",
                  r->count, r->invalid_count, app->policy.quota_error ? 0 : 1);
    const struct quota_config *q = app->policy.quota;
    strbuf_puts(sb, "# HELP gqa_quota_gpus GPU quota per namespace and model (whole GPUs).\n"
                    "# TYPE gqa_quota_gpus gauge\n");
    for (size_t i = 0; q && i < q->count; i++)
        for (size_t k = 0; k < q->entries[i].nmodels; k++)
            put_quota_series(sb, "gqa_quota_gpus", &q->entries[i], k, (double)q->entries[i].models[k].gpus);
    strbuf_puts(sb, "# HELP gqa_quota_used_gpus GPUs in use (or assumed) per quota namespace and model.\n"
                    "# TYPE gqa_quota_used_gpus gauge\n");
    for (size_t i = 0; q && i < q->count; i++)
        for (size_t k = 0; k < q->entries[i].nmodels; k++)
            put_quota_series(sb, "gqa_quota_used_gpus", &q->entries[i], k,
                             (double)cache_usage(&app->cache, q->entries[i].namespace_, q->entries[i].models[k].model) /
                                 100.0);
    cache_unlock(&app->cache);
}

void handle_metrics(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)req;
    struct strbuf sb;
    strbuf_init(&sb);
    cache_expire(&app->cache, clock_realtime_ns()); /* gqa_assumed_pods counts unexpired ones */
    metrics_render(&sb, &app->cache);
    guard_render_metrics(&sb);
    workers_render_metrics(&sb);
    wire_render_metrics(&sb);
    name_list_memo_render_metrics(&app->node_lists, &sb);
    render_policy_metrics(app, &sb);
    capacity_render_metrics(&app->cache, app->opts->metrics_per_node, &sb);
    if (app->opts->metrics_per_pod)
        capacity_render_pod_metrics(&app->cache, &sb);
    pending_render_metrics(&app->cache, &sb);
    if (app->live)
        live_render_metrics(app->live, &sb);
    size_t len = 0;
    char *body = strbuf_detach(&sb, &len);
    http_set_body(resp, 200, CONTENT_METRICS, body, len);
}
