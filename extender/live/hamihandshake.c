/* hamihandshake.c - writing HAMi's handshake requests. See hamihandshake.h. */
#include "extender/live/hamihandshake.h"
#include "cluster/hami_node.h"
#include "extender/decide/metrics.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct hami_handshaker {
    struct kube_client *client; /* used by the thread only */
    struct cluster_cache *cache;
    const atomic_int *may_write;
    int64_t interval_ns;
    pthread_mutex_t lock; /* guards stopping; a leaf, never held across I/O */
    pthread_cond_t wake;
    bool stopping;
    pthread_t thread;
    bool started;
};

char **hami_handshake_due_nodes(struct cluster_cache *cache, size_t *count)
{
    *count = 0;
    cache_read_lock(cache);
    char **names = calloc(dict_size(&cache->nodes) + 1, sizeof(*names));
    size_t pos = 0, n = 0;
    struct dict_entry *de;
    while (names && (de = dict_next(&cache->nodes, &pos))) {
        const struct node_state *node = de->value;
        const struct hami_node *h = node->present && node->spec ? node->spec->hami : NULL;
        if (!h || !hami_handshake_due(h))
            continue;
        if (!(names[n] = strdup(node->name)))
            break;
        n++;
    }
    cache_unlock(cache);
    if (names && n == 0) {
        free(names);
        names = NULL;
    }
    *count = n;
    return names;
}

static char *request_body(int64_t now_ns)
{
    char value[64];
    hami_handshake_request_value(now_ns, value, sizeof(value));
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
    cJSON *ann = meta ? cJSON_AddObjectToObject(meta, "annotations") : NULL;
    char *text =
        ann && cJSON_AddStringToObject(ann, HAMI_HANDSHAKE_ANNOTATION, value) ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

static void request_handshake(struct hami_handshaker *h, const char *node)
{
    char *name = kube_escape(node);
    char *path = name ? strbuf_format("/api/v1/nodes/%s", name) : NULL;
    char *body = request_body(clock_realtime_ns());
    struct kube_response resp = {0};
    int sent = 0;
    if (path && body) {
        sent = kube_request(h->client, "PATCH", path, "application/merge-patch+json", body, strlen(body),
                            HAMI_HANDSHAKE_WRITE_TIMEOUT_MS, &resp);
        metrics_count_api_write(WRITE_HAMI_HANDSHAKE, sent, resp.status, resp.error);
    }
    if (!path || !body)
        log_error("HAMi handshake of node %s: out of memory", node);
    else if (sent != 0 || resp.status != 200)
        log_warn("HAMi handshake of node %s: writing the request failed: %s", node,
                 resp.error ? resp.error : "unknown error");
    else
        log_debug("HAMi handshake of node %s: requested", node);
    kube_response_free(&resp);
    free(body);
    free(path);
    free(name);
}

static void pass(struct hami_handshaker *h)
{
    if (h->may_write && !atomic_load(h->may_write))
        return;
    size_t n = 0;
    char **names = hami_handshake_due_nodes(h->cache, &n);
    for (size_t i = 0; i < n; i++)
        request_handshake(h, names[i]);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Sleep one interval unless stopped. true when stopping. */
static bool wait_interval(struct hami_handshaker *h)
{
    struct timespec until = clock_monotonic_after(h->interval_ns);
    pthread_mutex_lock(&h->lock);
    int rc = 0;
    while (!h->stopping && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&h->wake, &h->lock, &until);
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->lock);
    return stopping;
}

static void *run(void *arg)
{
    struct hami_handshaker *h = arg;
    while (!wait_interval(h))
        pass(h);
    return NULL;
}

struct hami_handshaker *hami_handshaker_start(const struct kube_config *kube, struct cluster_cache *cache,
                                              const atomic_int *may_write, int64_t interval_ns, char **err)
{
    struct hami_handshaker *h = calloc(1, sizeof(*h));
    if (!h) {
        *err = strdup("out of memory");
        return NULL;
    }
    h->cache = cache;
    h->may_write = may_write;
    h->interval_ns = interval_ns > 0 ? interval_ns : 15 * NS_PER_S;
    pthread_mutex_init(&h->lock, NULL);
    clock_cond_init(&h->wake);
    if (!(h->client = kube_client_new(kube, err))) {
        hami_handshaker_stop(h);
        return NULL;
    }
    if (pthread_create(&h->thread, NULL, run, h) != 0) {
        *err = strdup("cannot start the HAMi handshake thread");
        hami_handshaker_stop(h);
        return NULL;
    }
    h->started = true;
    log_info("writing HAMi handshake requests (hami.io/node-handshake) every %lld ms",
             (long long)(h->interval_ns / 1000000));
    return h;
}

void hami_handshaker_stop(struct hami_handshaker *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->lock);
    h->stopping = true;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
    if (h->started)
        pthread_join(h->thread, NULL);
    kube_client_free(h->client);
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->lock);
    free(h);
}
