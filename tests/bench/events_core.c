/*
 * events_core.c - pod watch events applied per second by the cache, in-process.
 *
 * Feeds informer_apply_event (JSON parse, pod parse, cache update with the
 * per-GPU occupancy index) with realistic pod events, ADDED then MODIFIED
 * then DELETED for every pod, on a cluster of nodes: the API server and the
 * network are not part of the figure. Used by events-bench and gqa-bench.
 */
#include "tests/bench/events_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extender/live/feed.h"
#include "kube/informer.h"
#include "lib/strbuf.h"

#define NODES EVENTS_NODES
#define GPUS 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add_nodes(struct informer *inf)
{
    char line[1024];
    for (int i = 0; i < NODES; i++) {
        snprintf(line, sizeof(line),
                 "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%04d\","
                 "\"resourceVersion\":\"%d\"},\"status\":{\"allocatable\":{\"tencent.com/vcuda-core\":\"%d\","
                 "\"tencent.com/vcuda-memory\":\"%d\"}}}}",
                 i, i + 1, GPUS * 100, GPUS * 320);
        informer_apply_event(inf, line, strlen(line));
    }
}

/* A pod as the API server sends it: metadata with labels, annotations and
 * owner references, a spec with one GPU container, and a status. */
static void pod_event(struct strbuf *sb, const char *type, int i, int rv)
{
    strbuf_reset(sb);
    strbuf_printf(sb,
                  "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
                  "\"trainer-%06d\",\"namespace\":\"team-%d\",\"uid\":\"9b1c7e4a-%08d-4a1e-9f00-00000000abcd\","
                  "\"resourceVersion\":\"%d\",\"creationTimestamp\":\"2026-11-21T10:00:00Z\",\"labels\":{\"app\":"
                  "\"trainer\",\"pod-template-hash\":\"7d9f8c6b5\",\"team\":\"team-%d\"},\"annotations\":{"
                  "\"tencent.com/predicate-gpu-idx-0\":\"%d\",\"tencent.com/predicate-node\":\"node-%04d\","
                  "\"tencent.com/gpu-assigned\":\"true\",\"tencent.com/predicate-time\":\"1795291063349218884\"},"
                  "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":"
                  "\"trainer-7d9f8c6b5\",\"uid\":\"0d2f-%06d\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
                  "\"spec\":{\"nodeName\":\"node-%04d\",\"schedulerName\":\"default-scheduler\",\"containers\":[{"
                  "\"name\":\"trainer\",\"image\":\"registry.example.com/ml/trainer:2.4.1\",\"command\":[\"python\","
                  "\"train.py\",\"--epochs\",\"40\"],\"env\":[{\"name\":\"NCCL_DEBUG\",\"value\":\"WARN\"},{\"name\":"
                  "\"OMP_NUM_THREADS\",\"value\":\"8\"}],\"resources\":{\"limits\":{\"cpu\":\"8\",\"memory\":\"32Gi\","
                  "\"tencent.com/vcuda-core\":\"%d\",\"tencent.com/vcuda-memory\":\"40\"},\"requests\":{\"cpu\":\"8\","
                  "\"memory\":\"32Gi\",\"tencent.com/vcuda-core\":\"%d\",\"tencent.com/vcuda-memory\":\"40\"}},"
                  "\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"},{\"name\":\"kube-api-access\","
                  "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\",\"readOnly\":true}]}],"
                  "\"volumes\":[{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"data-%d\"}}],"
                  "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":"
                  "\"NoExecute\",\"tolerationSeconds\":300}]},\"status\":{\"phase\":\"Running\",\"podIP\":"
                  "\"10.244.%d.%d\",\"startTime\":\"2026-11-21T10:00:05Z\",\"conditions\":[{\"type\":\"Ready\","
                  "\"status\":\"True\",\"lastTransitionTime\":\"2026-11-21T10:00:09Z\"}],\"containerStatuses\":[{"
                  "\"name\":\"trainer\",\"ready\":true,\"restartCount\":0,\"image\":"
                  "\"registry.example.com/ml/trainer:2.4.1\",\"containerID\":\"containerd://%064d\"}]}}}",
                  type, i, i % 20, i, rv, i % 20, i % GPUS, i % NODES, i, i % NODES, 10 + i % 40, 10 + i % 40, i,
                  i % 250, i % 250, i);
}


static int64_t cores_left(const struct cluster_cache *cache)
{
    int64_t left = 0;
    for (int i = 0; i < NODES; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node-%04d", i);
        const struct node_state *n = cache_find_node(cache, name);
        for (int g = 0; n && g < n->gpu_count; g++)
            left += n->gpus[g].core_used;
    }
    return left;
}

/* Each event is written into the line buffer just before it is applied,
 * untimed, as the watch reader has it: a line that has just arrived from
 * the socket. (Writing all events out first and copying each from there
 * timed the benchmark's own 230 MB of memory: a quarter of the figure was
 * TLB and cache misses on text the server never holds.) Only applying is
 * timed. */
static int apply_all(struct informer *inf, int pods, double *secs, double *bytes)
{
    static const char *const types[] = {"ADDED", "MODIFIED", "DELETED"};
    long events = 3L * pods;
    struct strbuf line;
    strbuf_init(&line);
    int rc = 0;
    double total = 0, text = 0;
    for (long e = 0; e < events && rc == 0; e++) {
        pod_event(&line, types[e / pods], (int)(e % pods), (int)(2000 + e));
        if (strbuf_failed(&line))
            rc = -1;
        text += (double)line.len;
        double t0 = now_s();
        if (rc == 0 && informer_apply_event(inf, line.data, line.len) != 0)
            rc = -1;
        total += now_s() - t0;
    }
    strbuf_free(&line);
    *secs = total;
    *bytes = text / (double)events;
    return rc;
}

int events_run(int pods, struct events_figure *out)
{
    memset(out, 0, sizeof(*out));
    struct cluster_cache cache;
    struct cache_config cc = {.assume_ttl_ns = 60000000000LL};
    if (pods <= 0 || cache_init(&cache, &cc) != 0)
        return -1;
    struct feed *node_feed = feed_new(FEED_NODES, &cache, NULL, NULL);
    struct feed *pod_feed = feed_new(FEED_PODS, &cache, NULL, NULL);
    struct informer *nodes = node_feed ? informer_new("nodes", "/api/v1/nodes", feed_sink(node_feed), NULL) : NULL;
    struct informer *inf = pod_feed ? informer_new("pods", "/api/v1/pods", feed_sink(pod_feed), NULL) : NULL;
    int rc = nodes && inf ? 0 : -1;
    if (rc == 0) {
        add_nodes(nodes);
        rc = apply_all(inf, pods, &out->seconds, &out->bytes_per_event);
    }
    if (rc == 0) {
        out->events = 3L * pods;
        out->cores_left = cores_left(&cache);
    }
    informer_free(inf);
    informer_free(nodes);
    feed_free(pod_feed);
    feed_free(node_feed);
    cache_destroy(&cache);
    return rc;
}
