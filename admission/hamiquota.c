/* admission/hamiquota.c - HAMi's ResourceQuota rule. See hamiquota.h. */
#include "admission/hamiquota.h"
#include "cluster/hami_occupancy.h"
#include "lib/quantity.h"
#include "lib/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* ---- one ResourceQuota ------------------------------------------------------ */

void hami_rq_clear(struct hami_rq *q)
{
    if (!q)
        return;
    free(q->ns);
    free(q->name);
    memset(q, 0, sizeof(*q));
}

static const char *meta_string(const cJSON *obj, const char *field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), field);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A quota with scopes or a scope selector limits only some pods (by
 * priority class, QoS, ...); HAMi's rule is per namespace, so it leaves
 * those alone. An empty list or selector is no scope. */
static bool scoped(const cJSON *spec)
{
    const cJSON *scopes = cJSON_GetObjectItemCaseSensitive(spec, "scopes");
    const cJSON *selector = cJSON_GetObjectItemCaseSensitive(spec, "scopeSelector");
    const cJSON *exprs = cJSON_GetObjectItemCaseSensitive(selector, "matchExpressions");
    return (cJSON_IsArray(scopes) && cJSON_GetArraySize(scopes) > 0) ||
           (cJSON_IsArray(exprs) && cJSON_GetArraySize(exprs) > 0) ||
           (selector && !cJSON_IsNull(selector) && !cJSON_IsObject(selector));
}

/* One limit of spec.hard: absent (0), read (1), or malformed (-1, *err). */
static int read_limit(const cJSON *hard, const char *key, int64_t max, int64_t *out, const char *ns, const char *name,
                      char **err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(hard, key);
    if (!v)
        return 0;
    if (!cJSON_IsString(v))
        return strbuf_set_error(err, "ResourceQuota %s/%s: spec.hard[\"%s\"] is not a quantity string", ns, name, key);
    qty_status st = quantity_parse_int(v->valuestring, strlen(v->valuestring), out);
    if (st != QTY_OK)
        return strbuf_set_error(err, "ResourceQuota %s/%s: spec.hard[\"%s\"] = \"%.64s\": %s", ns, name, key,
                                v->valuestring, quantity_status_text(st));
    if (*out > max)
        return strbuf_set_error(err, "ResourceQuota %s/%s: spec.hard[\"%s\"] = %" PRId64 " is over %" PRId64, ns, name,
                                key, *out, max);
    return 1;
}

int hami_rq_parse(const cJSON *obj, struct hami_rq *out, char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    const char *name = meta_string(obj, "name"), *ns = meta_string(obj, "namespace");
    if (!cJSON_IsObject(obj) || !name || !*name || !ns || !*ns)
        return strbuf_set_error(err, "ResourceQuota without metadata.name and metadata.namespace");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    const cJSON *hard = cJSON_GetObjectItemCaseSensitive(spec, "hard");
    if (spec && !cJSON_IsObject(spec))
        return strbuf_set_error(err, "ResourceQuota %s/%s: spec is not an object", ns, name);
    if (hard && !cJSON_IsObject(hard) && !cJSON_IsNull(hard))
        return strbuf_set_error(err, "ResourceQuota %s/%s: spec.hard is not an object", ns, name);
    int memory = read_limit(hard, HAMI_QUOTA_MEMORY_KEY, HAMI_QUOTA_MEMORY_MAX, &out->memory, ns, name, err);
    int cores =
        memory < 0 ? 0 : read_limit(hard, HAMI_QUOTA_CORES_KEY, HAMI_QUOTA_CORES_MAX, &out->cores, ns, name, err);
    if (memory < 0 || cores < 0)
        return -1;
    if (memory == 0 && cores == 0)
        return 0;
    if (scoped(spec)) {
        *err = strbuf_format("ResourceQuota %s/%s is scoped: HAMi's rule leaves it to Kubernetes", ns, name);
        return 0;
    }
    out->has_memory = memory > 0;
    out->has_cores = cores > 0;
    out->ns = strdup(ns);
    out->name = strdup(name);
    if (!out->ns || !out->name) {
        hami_rq_clear(out);
        return strbuf_set_error(err, "out of memory");
    }
    return 1;
}

/* ---- the set ------------------------------------------------------------------ */

void hami_quota_set_init(struct hami_quota_set *s)
{
    memset(s, 0, sizeof(*s));
}

void hami_quota_set_free(struct hami_quota_set *s)
{
    for (size_t i = 0; i < s->count; i++)
        hami_rq_clear(&s->items[i]);
    free(s->items);
    memset(s, 0, sizeof(*s));
}

/* Room for one more item: 0, or -1 when memory ran out or the set is full. */
static int make_room(struct hami_quota_set *s)
{
    if (s->count >= HAMI_QUOTA_MAX_OBJECTS)
        return -1;
    if (s->count < s->cap)
        return 0;
    size_t cap = s->cap ? s->cap * 2 : 8;
    struct hami_rq *grown = realloc(s->items, cap * sizeof(*grown));
    if (!grown)
        return -1;
    s->items = grown;
    s->cap = cap;
    return 0;
}

static void append(struct hami_quota_set *s, struct hami_rq *item)
{
    s->items[s->count++] = *item;
    memset(item, 0, sizeof(*item));
}

static ssize_t find(const struct hami_quota_set *s, const char *ns, const char *name)
{
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->items[i].ns, ns) == 0 && strcmp(s->items[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

/* A list names each object once (the API server's store is keyed by
 * namespace/name), so a relist appends without looking: linear, not
 * quadratic, in the number of quotas. */
int hami_quota_set_replace(struct hami_quota_set *s, struct hami_rq *items, size_t n)
{
    hami_quota_set_free(s);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (make_room(s) == 0) {
            append(s, &items[i]);
        } else {
            hami_rq_clear(&items[i]);
            rc = -1;
        }
    }
    return rc;
}

int hami_quota_set_put(struct hami_quota_set *s, struct hami_rq *item)
{
    ssize_t at = find(s, item->ns, item->name);
    if (at >= 0) {
        hami_rq_clear(&s->items[at]);
        s->items[at] = *item;
        memset(item, 0, sizeof(*item));
        return 0;
    }
    if (make_room(s) != 0) {
        hami_rq_clear(item);
        return -1;
    }
    append(s, item);
    return 0;
}

void hami_quota_set_remove(struct hami_quota_set *s, const char *ns, const char *name)
{
    ssize_t at = find(s, ns, name);
    if (at < 0)
        return;
    hami_rq_clear(&s->items[at]);
    s->items[at] = s->items[--s->count];
}

bool hami_quota_binds(const struct hami_quota_set *s, const char *ns)
{
    for (size_t i = 0; s && i < s->count; i++)
        if (strcmp(s->items[i].ns, ns) == 0)
            return true;
    return false;
}

/* ---- use ------------------------------------------------------------------------ */

/* Sums saturate: the amounts come from pods' annotations. */
static int64_t add_sat(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static bool excluded_entry(const struct pod_entry *e, const struct pod_entry *const *excluded, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (excluded[i] == e)
            return true;
    return false;
}

void hami_quota_used(const struct cluster_cache *c, const char *ns, const struct pod_entry *const *excluded,
                     size_t nexcluded, struct hami_quota_use *out)
{
    out->memory_mib = out->cores = 0;
    size_t pos = 0;
    for (struct dict_entry *d; (d = dict_next(&c->pods, &pos));) {
        const struct pod_entry *e = d->value;
        const struct hami_pod_charge *pc = e->hami_charge;
        if (!pc || !e->info || strcmp(e->info->ns, ns) != 0 || excluded_entry(e, excluded, nexcluded))
            continue;
        for (int i = 0; i < pc->nslots; i++) {
            out->memory_mib = add_sat(out->memory_mib, pc->slots[i].memory_mib);
            out->cores = add_sat(out->cores, pc->slots[i].cores);
        }
        out->memory_mib = add_sat(out->memory_mib, pc->unattributed.memory_mib);
        out->cores = add_sat(out->cores, pc->unattributed.cores);
    }
}

void hami_quota_asked(const struct pod_info *pod, const struct node_state *n, const uint64_t *hami_masks,
                      struct hami_quota_use *out)
{
    out->memory_mib = out->cores = 0;
    const struct hami_node *h = n && n->spec ? n->spec->hami : NULL;
    if (!h || !hami_masks)
        return;
    for (int i = 0; i < pod->ncontainers; i++) {
        const struct container_request *r = &pod->containers[i];
        if (!hami_container_on(r, n))
            continue;
        for (int d = 0; d < h->count && d < 64; d++) {
            if (!(hami_masks[i] >> d & 1))
                continue;
            out->memory_mib = add_sat(out->memory_mib, hami_request_memory(&r->hami, h->devices[d].memory_mib));
            out->cores = add_sat(out->cores, r->hami.cores);
        }
    }
}

/* ---- the rule ------------------------------------------------------------------- */

/* Does used + asked pass limit? An explicit 0 passes no vGPU at all (the
 * caller has something asked), even one that asks 0 of this resource. */
static bool within(int64_t used, int64_t asked, int64_t limit)
{
    return limit > 0 && add_sat(used, asked) <= limit;
}

static bool refuse(char *reason, size_t size, const struct hami_rq *q, const char *key, int64_t used, int64_t asked,
                   int64_t limit, const char *note)
{
    if (limit == 0)
        snprintf(reason, size, "namespace %s quota \"%s\" %s: 0 admits no HAMi vGPU (%" PRId64 " asked)", q->ns,
                 q->name, key, asked);
    else
        snprintf(reason, size, "namespace %s quota \"%s\" %s: %" PRId64 " used + %" PRId64 " asked > %" PRId64 "%s",
                 q->ns, q->name, key, used, asked, limit, note);
    return false;
}

bool hami_quota_check(const struct hami_quota_set *s, const char *ns, int memory_factor,
                      const struct hami_quota_use *used, const struct hami_quota_use *asked, char *reason, size_t size)
{
    if (!s || (asked->memory_mib <= 0 && asked->cores <= 0))
        return true;
    int64_t factor = memory_factor > 1 ? memory_factor : 1;
    char note[96] = "";
    for (size_t i = 0; i < s->count; i++) {
        const struct hami_rq *q = &s->items[i];
        if (strcmp(q->ns, ns) != 0)
            continue;
        if (q->has_memory) {
            /* memory <= 2^40 and factor <= 2^20: no overflow */
            int64_t limit = q->memory * factor;
            if (factor > 1)
                snprintf(note, sizeof(note), " (MiB: %" PRId64 " x memoryFactor %" PRId64 ")", q->memory, factor);
            if (!within(used->memory_mib, asked->memory_mib, limit))
                return refuse(reason, size, q, HAMI_QUOTA_MEMORY_KEY, used->memory_mib, asked->memory_mib, limit, note);
        }
        if (q->has_cores && !within(used->cores, asked->cores, q->cores))
            return refuse(reason, size, q, HAMI_QUOTA_CORES_KEY, used->cores, asked->cores, q->cores, "");
    }
    return true;
}
