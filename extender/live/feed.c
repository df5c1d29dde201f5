/* feed.c - informer sinks into the cluster cache. See feed.h. */
#include "extender/live/feed.h"
#include "cluster/podtext.h"
#include "extender/decide/metrics.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <stdlib.h>
#include <string.h>

struct feed {
    struct informer_sink sink;
    struct cluster_cache *cache;
    enum feed_kind kind;
    char *cm_namespace, *cm_name;
    struct hami_quota_set *quotas; /* FEED_RESOURCEQUOTAS */
};

static const char *const kind_names[] = {[FEED_NODES] = "node",
                                         [FEED_PODS] = "pod",
                                         [FEED_CONFIGMAPS] = "configmap",
                                         [FEED_RESOURCEQUOTAS] = "resourcequota"};

static void count_skipped(void *ctx, const char *reason)
{
    struct feed *f = ctx;
    metrics_count_skipped(kind_names[f->kind], reason);
}

/* A relist's result: objects the cache could not take are counted and the
 * relist stands (cache.h); only a relist that could not happen fails. */
static int relisted(struct feed *f, int rc)
{
    if (rc > 0) {
        log_warn("relist of %ss: %d object%s could not be applied (out of memory) and were skipped",
                 kind_names[f->kind], rc, rc == 1 ? "" : "s");
        for (int i = 0; i < rc; i++)
            metrics_count_skipped(kind_names[f->kind], "not_applied");
    }
    return rc < 0 ? -1 : 0;
}

static const char *meta_string(const cJSON *obj, const char *field)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, field);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- nodes ----------------------------------------------------------------- */

static void *node_convert(void *ctx, cJSON *obj, bool *taken, char **err)
{
    (void)ctx;
    *taken = false;
    return node_spec_from_json(obj, err);
}

static void node_free(void *item)
{
    node_spec_free(item);
}

static int node_replace(void *ctx, void **items, size_t n)
{
    struct feed *f = ctx;
    return relisted(f, cache_replace_nodes(f->cache, (struct node_spec **)items, n));
}

static int node_apply(void *ctx, cJSON *obj, char **err)
{
    struct feed *f = ctx;
    struct node_spec *spec = node_spec_from_json(obj, err);
    return spec ? cache_apply_node(f->cache, spec) : -1;
}

static int node_remove(void *ctx, const cJSON *obj)
{
    struct feed *f = ctx;
    const char *name = meta_string(obj, "name");
    return name ? cache_delete_node(f->cache, name) : -1;
}

/* ---- pods ------------------------------------------------------------------ */

static void *pod_convert(void *ctx, cJSON *obj, bool *taken, char **err)
{
    struct feed *f = ctx;
    *taken = false;
    return cache_pod_from_json(f->cache, obj, err);
}

static void pod_free(void *item)
{
    pod_info_free(item);
}

static int pod_replace(void *ctx, void **items, size_t n)
{
    struct feed *f = ctx;
    return relisted(f, cache_replace_pods(f->cache, (struct pod_info **)items, n, clock_realtime_ns()));
}

static int pod_apply(void *ctx, cJSON *obj, char **err)
{
    struct feed *f = ctx;
    struct pod_info *pod = cache_pod_from_json(f->cache, obj, err);
    return pod ? cache_apply_pod(f->cache, pod, clock_realtime_ns()) : -1;
}

/* A watched pod straight from its text (podtext.h), unless CRL defaults
 * must first be written into its cJSON object: then NULL, and the informer
 * takes the tree's way. */
static void *pod_item_from_prefix(void *ctx, const char *text, size_t len, size_t *used, char *rv, size_t rv_size)
{
    struct feed *f = ctx;
    if (cache_prepares_pods(f->cache))
        return NULL;
    struct pod_info *pod = pod_info_from_text_prefix(text, len, used);
    const char *version = pod && pod->resource_version ? pod->resource_version : "";
    size_t n = strlen(version) < rv_size ? strlen(version) : rv_size - 1;
    memcpy(rv, version, n);
    rv[n] = '\0';
    return pod;
}

static int pod_apply_item(void *ctx, void *item, char **err)
{
    struct feed *f = ctx;
    (void)err; /* the reader declines what the cJSON way would refuse: only memory can fail here */
    return cache_apply_pod(f->cache, item, clock_realtime_ns());
}

static int pod_remove_item(void *ctx, void *item)
{
    struct feed *f = ctx;
    struct pod_info *pod = item;
    int rc = cache_delete_pod(f->cache, pod->key);
    pod_info_free(pod);
    return rc;
}

static int pod_remove(void *ctx, const cJSON *obj)
{
    struct feed *f = ctx;
    const char *name = meta_string(obj, "name"), *ns = meta_string(obj, "namespace");
    if (!name)
        return -1;
    char *key = strbuf_join2(ns ? ns : "default", '/', name); /* no snprintf: one per deleted pod */
    int rc = key ? cache_delete_pod(f->cache, key) : -1;
    free(key);
    return rc;
}

/* ---- configmaps ------------------------------------------------------------ */

/* ConfigMaps are kept whole, but only with a name: the cache keys them by
 * namespace/name. */
static void *cm_convert(void *ctx, cJSON *obj, bool *taken, char **err)
{
    (void)ctx;
    *taken = false;
    if (!meta_string(obj, "name") || !*meta_string(obj, "name")) {
        *err = strdup("configmap has no metadata.name");
        return NULL;
    }
    *taken = true;
    return obj;
}

static void cm_free(void *item)
{
    cJSON_Delete(item);
}

static int cm_replace(void *ctx, void **items, size_t n)
{
    struct feed *f = ctx;
    return relisted(f, cache_replace_configmaps(f->cache, f->cm_namespace, f->cm_name, (cJSON **)items, n));
}

static int cm_apply(void *ctx, cJSON *obj, char **err)
{
    struct feed *f = ctx;
    bool taken;
    if (!cm_convert(ctx, obj, &taken, err))
        return -1;
    cJSON *copy = cJSON_Duplicate(obj, 1);
    return copy ? cache_apply_configmap(f->cache, copy) : -1;
}

static int cm_remove(void *ctx, const cJSON *obj)
{
    struct feed *f = ctx;
    const char *name = meta_string(obj, "name"), *ns = meta_string(obj, "namespace");
    return name ? cache_delete_configmap(f->cache, ns ? ns : "default", name) : -1;
}

/* ---- resourcequotas --------------------------------------------------------- */

/* A ResourceQuota as HAMi reads it: an item with no limit when it is not
 * HAMi's (replace and apply drop it), NULL with *err when malformed. */
static struct hami_rq *rq_read(const cJSON *obj, char **err)
{
    struct hami_rq *q = malloc(sizeof(*q));
    if (!q) {
        *err = strdup("out of memory");
        return NULL;
    }
    char *why = NULL;
    int rc = hami_rq_parse(obj, q, &why);
    if (rc < 0) {
        free(q);
        *err = why;
        return NULL;
    }
    if (rc == 0 && why) /* scoped: said, so that a quota the rule leaves alone is not a surprise */
        log_info("%s", why);
    free(why);
    return q;
}

static void *rq_convert(void *ctx, cJSON *obj, bool *taken, char **err)
{
    (void)ctx;
    *taken = false;
    return rq_read(obj, err);
}

static void rq_free(void *item)
{
    hami_rq_clear(item);
    free(item);
}

static int rq_replace(void *ctx, void **items, size_t n)
{
    struct feed *f = ctx;
    struct hami_rq *held = calloc(n ? n : 1, sizeof(*held));
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        struct hami_rq *q = items[i];
        if (held && (q->has_memory || q->has_cores)) {
            held[count++] = *q;
            memset(q, 0, sizeof(*q));
        }
        rq_free(q);
    }
    if (!held)
        return -1;
    cache_write_lock(f->cache);
    int rc = hami_quota_set_replace(f->quotas, held, count);
    cache_unlock(f->cache);
    free(held);
    if (rc != 0)
        log_warn("relist of resourcequotas: out of memory, or more than %d HAMi quotas; some quotas are not checked "
                 "until the next relist",
                 HAMI_QUOTA_MAX_OBJECTS);
    return 0;
}

static int rq_apply(void *ctx, cJSON *obj, char **err)
{
    struct feed *f = ctx;
    struct hami_rq *q = rq_read(obj, err);
    const char *name = meta_string(obj, "name"), *ns = meta_string(obj, "namespace");
    int rc = q ? 0 : -1;
    cache_write_lock(f->cache);
    if (q && (q->has_memory || q->has_cores))
        rc = hami_quota_set_put(f->quotas, q);
    else if (name && ns) /* no longer HAMi's, or unreadable now: as a relist would, it is not held */
        hami_quota_set_remove(f->quotas, ns, name);
    cache_unlock(f->cache);
    rq_free(q);
    if (rc != 0 && !*err)
        *err = strbuf_format("out of memory, or more than %d HAMi quotas held", HAMI_QUOTA_MAX_OBJECTS);
    return rc;
}

static int rq_remove(void *ctx, const cJSON *obj)
{
    struct feed *f = ctx;
    const char *name = meta_string(obj, "name"), *ns = meta_string(obj, "namespace");
    if (!name || !ns)
        return -1;
    cache_write_lock(f->cache);
    hami_quota_set_remove(f->quotas, ns, name);
    cache_unlock(f->cache);
    return 0;
}

/* ---- the feed -------------------------------------------------------------- */

static const struct informer_sink sinks[] = {
    [FEED_NODES] = {.convert = node_convert,
                    .free_item = node_free,
                    .replace = node_replace,
                    .apply = node_apply,
                    .remove = node_remove,
                    .skipped = count_skipped},
    /* Pods keep only the fields the extender reads (podspec's slim form). */
    [FEED_PODS] = {.parse = pod_slim_from_text,
                   .convert = pod_convert,
                   .free_item = pod_free,
                   .replace = pod_replace,
                   .apply = pod_apply,
                   .remove = pod_remove,
                   .skipped = count_skipped,
                   .parse_prefix = pod_slim_from_prefix,
                   .item_from_prefix = pod_item_from_prefix,
                   .apply_item = pod_apply_item,
                   .remove_item = pod_remove_item},
    [FEED_CONFIGMAPS] = {.convert = cm_convert,
                         .free_item = cm_free,
                         .replace = cm_replace,
                         .apply = cm_apply,
                         .remove = cm_remove,
                         .skipped = count_skipped},
    [FEED_RESOURCEQUOTAS] = {.convert = rq_convert,
                             .free_item = rq_free,
                             .replace = rq_replace,
                             .apply = rq_apply,
                             .remove = rq_remove,
                             .skipped = count_skipped},
};

struct feed *feed_new(enum feed_kind kind, struct cluster_cache *cache, const char *cm_namespace, const char *cm_name)
{
    struct feed *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->cache = cache;
    f->kind = kind;
    f->sink = sinks[kind];
    f->sink.ctx = f;
    f->cm_namespace = cm_namespace ? strdup(cm_namespace) : NULL;
    f->cm_name = cm_name ? strdup(cm_name) : NULL;
    if ((cm_namespace && !f->cm_namespace) || (cm_name && !f->cm_name)) {
        feed_free(f);
        return NULL;
    }
    return f;
}

struct feed *feed_new_resourcequotas(struct cluster_cache *cache, struct hami_quota_set *quotas)
{
    struct feed *f = feed_new(FEED_RESOURCEQUOTAS, cache, NULL, NULL);
    if (f)
        f->quotas = quotas;
    return f;
}

const struct informer_sink *feed_sink(const struct feed *f)
{
    return &f->sink;
}

void feed_free(struct feed *f)
{
    if (!f)
        return;
    free(f->cm_namespace);
    free(f->cm_name);
    free(f);
}
