/* admission/quota.c - per-namespace GPU quota. See quota.h. */
#include "admission/quota.h"
#include "lib/strbuf.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUOTA_KEY "gpu_quota"

static void *fail(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void *fail(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vset_error(err, fmt, ap);
    va_end(ap);
    return NULL;
}

static void free_entry(struct quota_entry *e)
{
    free(e->namespace_);
    for (size_t i = 0; i < e->npools; i++)
        free(e->pools[i]);
    free(e->pools);
    for (size_t i = 0; i < e->nmodels; i++)
        free(e->models[i].model);
    free(e->models);
}

void quota_free(struct quota_config *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->count; i++)
        free_entry(&q->entries[i]);
    free(q->entries);
    free(q->source);
    free(q);
}

static int parse_pools(struct quota_entry *e, const cJSON *pools, char **err)
{
    if (!pools || cJSON_IsNull(pools))
        return 0;
    if (!cJSON_IsArray(pools))
        return fail(err, "%s: \"pool\" must be a list of pool names", e->namespace_), -1;
    e->pools = calloc((size_t)cJSON_GetArraySize(pools) + 1, sizeof(*e->pools));
    if (!e->pools)
        return fail(err, "out of memory"), -1;
    const cJSON *p;
    cJSON_ArrayForEach(p, pools)
    {
        if (!cJSON_IsString(p) || !*p->valuestring)
            return fail(err, "%s: \"pool\" entries must be non-empty strings", e->namespace_), -1;
        if (!(e->pools[e->npools++] = strdup(p->valuestring)))
            return fail(err, "out of memory"), -1;
    }
    return 0;
}

static int parse_models(struct quota_entry *e, const cJSON *quota, char **err)
{
    if (!quota || cJSON_IsNull(quota))
        return 0;
    if (!cJSON_IsObject(quota))
        return fail(err, "%s: \"quota\" must map GPU models to whole GPUs", e->namespace_), -1;
    e->models = calloc((size_t)cJSON_GetArraySize(quota) + 1, sizeof(*e->models));
    if (!e->models)
        return fail(err, "out of memory"), -1;
    const cJSON *m;
    cJSON_ArrayForEach(m, quota)
    {
        double v = cJSON_IsNumber(m) ? m->valuedouble : -1;
        if (v < 0 || v != floor(v) || v > 1e6)
            return fail(err, "%s: quota for model %s must be a whole number of GPUs", e->namespace_, m->string), -1;
        struct quota_model *qm = &e->models[e->nmodels++];
        qm->gpus = (int64_t)v;
        if (!(qm->model = strdup(m->string)))
            return fail(err, "out of memory"), -1;
    }
    return 0;
}

static int parse_entry(struct quota_entry *e, const cJSON *item, char **err)
{
    if (!(e->namespace_ = strdup(item->string)))
        return fail(err, "out of memory"), -1;
    if (!cJSON_IsObject(item))
        return fail(err, "%s: the entry must be an object with \"pool\" and \"quota\"", e->namespace_), -1;
    if (parse_pools(e, cJSON_GetObjectItemCaseSensitive(item, "pool"), err) != 0)
        return -1;
    return parse_models(e, cJSON_GetObjectItemCaseSensitive(item, "quota"), err);
}

static char *configmap_source(const cJSON *cm)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(cm, "metadata");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "%s/%s", cJSON_IsString(ns) ? ns->valuestring : "default",
                  cJSON_IsString(name) ? name->valuestring : "?");
    return strbuf_detach(&sb, NULL);
}

struct quota_config *quota_parse_configmap(const cJSON *cm, char **err)
{
    *err = NULL;
    struct quota_config *q = calloc(1, sizeof(*q));
    if (!q || !(q->source = configmap_source(cm))) {
        quota_free(q);
        return fail(err, "out of memory");
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(data, QUOTA_KEY);
    if (!text)
        return q;
    cJSON *root = cJSON_IsString(text) ? cJSON_Parse(text->valuestring) : NULL;
    if (!cJSON_IsObject(root)) {
        fail(err, "%s: data.%s is not a JSON object of namespaces", q->source, QUOTA_KEY);
    } else if (!(q->entries = calloc((size_t)cJSON_GetArraySize(root) + 1, sizeof(*q->entries)))) {
        fail(err, "out of memory");
    } else {
        const cJSON *item;
        cJSON_ArrayForEach(item, root)
        {
            if (parse_entry(&q->entries[q->count++], item, err) != 0)
                break;
        }
    }
    cJSON_Delete(root);
    if (*err) {
        char *msg = *err;
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_printf(&sb, "%s%s%s", strncmp(msg, q->source, strlen(q->source)) ? q->source : "",
                      strncmp(msg, q->source, strlen(q->source)) ? ": " : "", msg);
        free(msg);
        *err = strbuf_detach(&sb, NULL);
        quota_free(q);
        return NULL;
    }
    return q;
}

/* A namespace named twice: the last entry wins, as Go's json.Unmarshal
 * (tkestack gpu-admission) decodes it. */
const struct quota_entry *quota_find(const struct quota_config *q, const char *ns)
{
    for (size_t i = q ? q->count : 0; i-- > 0;)
        if (strcmp(q->entries[i].namespace_, ns) == 0)
            return &q->entries[i];
    return NULL;
}

static void list_pools(const struct quota_entry *e, struct strbuf *sb)
{
    for (size_t i = 0; i < e->npools; i++)
        strbuf_printf(sb, "%s%s", i ? ", " : "", e->pools[i]);
}

static const struct quota_model *find_model(const struct quota_entry *e, const char *model)
{
    for (size_t i = 0; i < e->nmodels; i++)
        if (strcmp(e->models[i].model, model) == 0)
            return &e->models[i];
    return NULL;
}

/* Cores as GPUs for messages: 350 -> "3.50", 300 -> "3". */
static void gpus_text(int64_t cores, char *buf, size_t size)
{
    if (cores % 100 == 0)
        snprintf(buf, size, "%" PRId64, cores / 100);
    else
        snprintf(buf, size, "%" PRId64 ".%02" PRId64, cores / 100, cores % 100);
}

bool quota_allows(const struct quota_entry *e, const char *model, const char *pool, int64_t used, int64_t cores,
                  char *reason, size_t size)
{
    return quota_check(e, model, pool, used, cores, reason, size) == QUOTA_ALLOWED;
}

enum quota_refusal quota_check(const struct quota_entry *e, const char *model, const char *pool, int64_t used,
                               int64_t cores, char *reason, size_t size)
{
    struct strbuf sb;
    strbuf_init(&sb);
    enum quota_refusal why = QUOTA_ALLOWED;
    if (e->npools > 0) {
        bool in_pool = false;
        for (size_t i = 0; pool && i < e->npools && !in_pool; i++)
            in_pool = strcmp(e->pools[i], pool) == 0;
        if (!in_pool) {
            strbuf_printf(&sb, "namespace %s may use GPU pools [", e->namespace_);
            list_pools(e, &sb);
            strbuf_printf(&sb, "]; this node is %s%s", pool ? "in pool " : "in no pool", pool ? pool : "");
            why = QUOTA_NOT_IN_POOL;
        }
    }
    bool ok = why == QUOTA_ALLOWED;
    const struct quota_model *m = ok ? find_model(e, model ? model : "") : NULL;
    if (ok && !m) {
        strbuf_printf(&sb, "namespace %s has no GPU quota for model %s (its quota names:", e->namespace_,
                      model && *model ? model : "(node has no model label)");
        for (size_t i = 0; i < e->nmodels; i++)
            strbuf_printf(&sb, " %s", e->models[i].model);
        strbuf_puts(&sb, e->nmodels ? ")" : " none)");
        why = QUOTA_NO_MODEL;
    } else if (ok && used + cores > m->gpus * 100) {
        char u[32], need[32], over[32];
        gpus_text(used, u, sizeof(u));
        gpus_text(cores, need, sizeof(need));
        gpus_text(used + cores - m->gpus * 100, over, sizeof(over));
        strbuf_printf(&sb, "namespace %s uses %s of its %" PRId64 " %s GPUs; the pod needs %s more (over by %s)",
                      e->namespace_, u, m->gpus, model, need, over);
        why = QUOTA_EXHAUSTED;
    }
    snprintf(reason, size, "%s", sb.data ? sb.data : "");
    strbuf_free(&sb);
    return why;
}

char *quota_render(const struct quota_config *q, const char *error, quota_usage_fn used, void *ctx)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"source\":");
    strbuf_json_string(&sb, q && q->source ? q->source : "");
    strbuf_puts(&sb, ",\"error\":");
    strbuf_json_string(&sb, error ? error : "");
    strbuf_puts(&sb, ",\"namespaces\":[");
    for (size_t i = 0; q && i < q->count; i++) {
        const struct quota_entry *e = &q->entries[i];
        strbuf_puts(&sb, i ? ",{\"namespace\":" : "{\"namespace\":");
        strbuf_json_string(&sb, e->namespace_);
        strbuf_puts(&sb, ",\"pools\":[");
        for (size_t k = 0; k < e->npools; k++) {
            if (k)
                strbuf_putc(&sb, ',');
            strbuf_json_string(&sb, e->pools[k]);
        }
        strbuf_puts(&sb, "],\"models\":[");
        for (size_t k = 0; k < e->nmodels; k++) {
            int64_t cores = used(ctx, e->namespace_, e->models[k].model);
            strbuf_puts(&sb, k ? ",{\"model\":" : "{\"model\":");
            strbuf_json_string(&sb, e->models[k].model);
            strbuf_printf(&sb, ",\"quotaGpus\":%" PRId64 ",\"usedCores\":%" PRId64 "}", e->models[k].gpus, cores);
        }
        strbuf_puts(&sb, "]}");
    }
    strbuf_puts(&sb, "]}\n");
    return strbuf_detach(&sb, NULL);
}
