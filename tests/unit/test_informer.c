/* Unit tests for informer_apply_event: watch events applied to the cache
 * through the extender's feeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/live/feed.h"
#include "extender/decide/metrics.h"
#include "kube/informer.h"
#include "lib/clock.h"
#include "lib/strbuf.h"
#include "tests/unit/fakeapi.h"

#include <stdatomic.h>

struct fixture {
    struct cluster_cache cache;
    struct informer *pods, *nodes, *cms;
    struct feed *pod_feed, *node_feed, *cm_feed;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct cache_config cc = {.assume_ttl_ns = 60000000000LL};
    assert_int_equal(cache_init(&f->cache, &cc), 0);
    f->pod_feed = feed_new(FEED_PODS, &f->cache, NULL, NULL);
    f->node_feed = feed_new(FEED_NODES, &f->cache, NULL, NULL);
    f->cm_feed = feed_new(FEED_CONFIGMAPS, &f->cache, "kube-public", NULL);
    assert_non_null(f->pod_feed);
    assert_non_null(f->node_feed);
    assert_non_null(f->cm_feed);
    f->pods = informer_new("pods", "/api/v1/pods", feed_sink(f->pod_feed), NULL);
    f->nodes = informer_new("nodes", "/api/v1/nodes", feed_sink(f->node_feed), NULL);
    f->cms = informer_new("cm", "/api/v1/namespaces/kube-public/configmaps", feed_sink(f->cm_feed), NULL);
    assert_non_null(f->pods);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    informer_free(f->pods);
    informer_free(f->nodes);
    informer_free(f->cms);
    feed_free(f->pod_feed);
    feed_free(f->node_feed);
    feed_free(f->cm_feed);
    cache_destroy(&f->cache);
    free(f);
    return 0;
}

static int apply(struct informer *inf, const char *line)
{
    return informer_apply_event(inf, line, strlen(line));
}

static const char node_event[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"10\"},"
    "\"status\":{\"allocatable\":{\"tencent.com/vcuda-core\":\"200\",\"tencent.com/vcuda-memory\":\"80\"}}}}";

static const char *pod_event(const char *type, const char *rv, const char *phase)
{
    static char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"a\","
             "\"resourceVersion\":\"%s\",\"annotations\":{\"tencent.com/predicate-gpu-idx-0\":\"1\"}},"
             "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
             "\"tencent.com/vcuda-core\":\"30\",\"tencent.com/vcuda-memory\":\"5\"}}}]},"
             "\"status\":{\"phase\":\"%s\"}}}",
             type, rv, phase);
    return buf;
}

static void rv_is(struct informer *inf, const char *want)
{
    struct informer_status st;
    informer_status(inf, &st);
    assert_string_equal(st.resource_version, want);
}

static int64_t core_used(struct fixture *f, int slot)
{
    const struct node_state *n = cache_find_node(&f->cache, "n1");
    assert_non_null(n);
    return n->gpus[slot].core_used;
}

static void test_add_modify_delete(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(apply(f->nodes, node_event), 0);
    rv_is(f->nodes, "10");
    assert_int_equal(apply(f->pods, pod_event("ADDED", "11", "Running")), 0);
    assert_int_equal(core_used(f, 1), 30);
    /* The same pod again must not be counted twice. */
    assert_int_equal(apply(f->pods, pod_event("MODIFIED", "12", "Running")), 0);
    assert_int_equal(core_used(f, 1), 30);
    /* Finished: holds nothing. */
    assert_int_equal(apply(f->pods, pod_event("MODIFIED", "13", "Succeeded")), 0);
    assert_int_equal(core_used(f, 1), 0);
    assert_int_equal(apply(f->pods, pod_event("MODIFIED", "14", "Running")), 0);
    assert_int_equal(apply(f->pods, pod_event("DELETED", "15", "Running")), 0);
    assert_int_equal(core_used(f, 1), 0);
    assert_null(cache_find_pod(&f->cache, "a/p"));
    rv_is(f->pods, "15");
    assert_int_equal((int)atomic_load(&f->pods->events), 5);
}

static void test_bookmark_and_errors(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(apply(f->pods, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":"
                                    "{\"resourceVersion\":\"99\"}}}"),
                     0);
    rv_is(f->pods, "99");
    assert_int_equal((int)atomic_load(&f->pods->bookmarks), 1);
    assert_int_equal((int)atomic_load(&f->pods->events), 0);
    /* 410: list again. */
    assert_int_equal(apply(f->pods, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                                    "\"reason\":\"Expired\",\"message\":\"too old resource version\"}}"),
                     1);
    /* Another error: watch again without relisting. */
    assert_int_equal(apply(f->pods, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,"
                                    "\"message\":\"etcd timeout\"}}"),
                     2);
    struct informer_status st;
    informer_status(f->pods, &st);
    assert_non_null(strstr(st.last_error, "watch error 500: etcd timeout"));
    /* Garbage is skipped, not fatal. */
    assert_int_equal(apply(f->pods, "not json"), -1);
    assert_int_equal(apply(f->pods, "{\"type\":\"ADDED\"}"), -1);
    rv_is(f->pods, "99");
}

static void test_configmaps_and_node_delete(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(apply(f->cms, "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":"
                                   "{\"name\":\"cf\",\"namespace\":\"kube-public\",\"resourceVersion\":\"3\"},"
                                   "\"data\":{\"key\":\"v\"}}}"),
                     0);
    assert_non_null(dict_get(&f->cache.configmaps, "kube-public/cf"));
    assert_int_equal(apply(f->cms, "{\"type\":\"DELETED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":"
                                   "{\"name\":\"cf\",\"namespace\":\"kube-public\",\"resourceVersion\":\"4\"}}}"),
                     0);
    assert_null(dict_get(&f->cache.configmaps, "kube-public/cf"));
    assert_int_equal(apply(f->nodes, node_event), 0);
    assert_int_equal(f->cache.present_nodes, 1);
    assert_int_equal(apply(f->nodes, "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Node\",\"metadata\":"
                                     "{\"name\":\"n1\",\"resourceVersion\":\"20\"}}}"),
                     0);
    assert_int_equal(f->cache.present_nodes, 0);
    assert_null(cache_find_node(&f->cache, "n1"));
}

/* A relist replaces the set: the pod missing from the new list goes, the
 * one still there is counted once. */
static void test_replace_pods(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(apply(f->nodes, node_event), 0);
    assert_int_equal(apply(f->pods, pod_event("ADDED", "11", "Running")), 0);
    const char *other = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"q\",\"namespace\":\"a\",\"annotations\":"
                        "{\"tencent.com/predicate-gpu-idx-0\":\"0\"}},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
                        "[{\"name\":\"c\",\"resources\":{\"limits\":{\"tencent.com/vcuda-core\":\"40\","
                        "\"tencent.com/vcuda-memory\":\"4\"}}}]}}";
    cJSON *obj = cJSON_Parse(other);
    struct pod_info *pods[1] = {pod_info_from_json(obj, NULL)};
    cJSON_Delete(obj);
    assert_int_equal(cache_replace_pods(&f->cache, pods, 1, clock_realtime_ns()), 0);
    assert_null(cache_find_pod(&f->cache, "a/p"));
    assert_non_null(cache_find_pod(&f->cache, "a/q"));
    assert_int_equal(core_used(f, 1), 0);
    assert_int_equal(core_used(f, 0), 40);
}


/* Watched pods are read straight from their text (podtext.h) when the
 * sink can: an event whose "type" turns into BOOKMARK after its object is
 * read as one, a later "object" replaces the first, and an event that is
 * not JSON after its object is dropped whole; none applies anything twice
 * or leaks (valgrind and ASan run this test). A pod the reader declines
 * (an escape) is read the cJSON way, with the same result. */
static const struct informer_sink *feed_pods;
static int items_read;

static void *counted_item(void *ctx, const char *text, size_t len, size_t *used, char *rv, size_t rv_size)
{
    void *item = feed_pods->item_from_prefix(ctx, text, len, used, rv, rv_size);
    items_read += item != NULL;
    return item;
}

static void test_pods_read_from_text(void **state)
{
    struct fixture *f = *state;
    /* The feed's sink, counting the objects read in place as items. */
    feed_pods = feed_sink(f->pod_feed);
    struct informer_sink counting = *feed_pods;
    counting.item_from_prefix = counted_item;
    informer_free(f->pods);
    f->pods = informer_new("pods", "/api/v1/pods", &counting, NULL);
    assert_non_null(f->pods);
    items_read = 0;
    assert_int_equal(apply(f->nodes, node_event), 0);
    char line[1200];
    snprintf(line, sizeof(line), "%.*s,\"type\":\"BOOKMARK\"}", (int)strlen(pod_event("ADDED", "21", "Running")) - 1,
             pod_event("ADDED", "21", "Running"));
    assert_int_equal(apply(f->pods, line), 0);
    assert_null(cache_find_pod(&f->cache, "a/p"));
    rv_is(f->pods, "21");
    assert_int_equal((int)atomic_load(&f->pods->bookmarks), 1);

    snprintf(line, sizeof(line), "%s x", pod_event("ADDED", "22", "Running"));
    assert_int_equal(apply(f->pods, line), -1);
    assert_null(cache_find_pod(&f->cache, "a/p"));
    rv_is(f->pods, "21");

    const char *ev = pod_event("ADDED", "23", "Running");
    snprintf(line, sizeof(line), "%.*s,\"object\":{\"metadata\":{\"name\":\"other\",\"namespace\":\"a\","
             "\"resourceVersion\":\"24\"}}}", (int)strlen(ev) - 1, ev);
    assert_int_equal(apply(f->pods, line), 0);
    assert_null(cache_find_pod(&f->cache, "a/p"));
    assert_non_null(cache_find_pod(&f->cache, "a/other"));
    rv_is(f->pods, "24");
    assert_int_equal(core_used(f, 1), 0);

    /* Declined (an escaped uid), then read the cJSON way. */
    assert_int_equal(apply(f->pods, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\","
                                    "\"uid\":\"\\u0041\",\"resourceVersion\":\"25\",\"annotations\":{"
                                    "\"tencent.com/predicate-gpu-idx-0\":\"1\"}},\"spec\":{\"nodeName\":\"n1\","
                                    "\"containers\":[{\"resources\":{\"limits\":{\"tencent.com/vcuda-core\":\"30\","
                                    "\"tencent.com/vcuda-memory\":\"5\"}}}]}}}"),
                     0);
    assert_string_equal(cache_find_pod(&f->cache, "a/p")->info->uid, "A");
    assert_int_equal(core_used(f, 1), 30);
    rv_is(f->pods, "25");
    assert_int_equal(apply(f->pods, pod_event("DELETED", "26", "Running")), 0);
    assert_null(cache_find_pod(&f->cache, "a/p"));
    assert_int_equal(core_used(f, 1), 0);
    rv_is(f->pods, "26");
    assert_int_equal(items_read, 5); /* every pod but the escaped one */
}

/* While the cache's prepare_pod hook would write a default into pods, they
 * are read as cJSON objects the hook edits; once it would not, from text. */
static bool defaults_on;

static void write_memory_default(void *ctx, cJSON *pod)
{
    (void)ctx;
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), 0);
    cJSON *limits = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "resources"), "limits");
    if (defaults_on && limits && !cJSON_GetObjectItem(limits, "tencent.com/vcuda-memory"))
        cJSON_AddStringToObject(limits, "tencent.com/vcuda-memory", "7");
}

static bool writes_defaults(void *ctx)
{
    (void)ctx;
    return defaults_on;
}

static void test_pod_defaults_take_the_tree(void **state)
{
    struct fixture *f = *state;
    f->cache.cfg.prepare_pod = write_memory_default;
    f->cache.cfg.prepares_pods = writes_defaults;
    assert_int_equal(apply(f->nodes, node_event), 0);
    static const char share[] =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"a\",\"resourceVersion\":"
        "\"%d\",\"annotations\":{\"tencent.com/predicate-gpu-idx-0\":\"0\"}},\"spec\":{\"nodeName\":\"n1\","
        "\"containers\":[{\"resources\":{\"limits\":{\"tencent.com/vcuda-core\":\"20\"}}}]}}}";
    char line[512];
    defaults_on = true;
    snprintf(line, sizeof(line), share, 31);
    assert_int_equal(apply(f->pods, line), 0);
    const struct pod_entry *e = cache_find_pod(&f->cache, "a/s");
    assert_non_null(e);
    assert_null(e->info->request_error);
    assert_int_equal(e->info->containers[0].memory, 7);
    assert_int_equal(core_used(f, 0), 20);
    defaults_on = false; /* the hook now writes nothing: the share lacks its memory */
    snprintf(line, sizeof(line), share, 32);
    assert_int_equal(apply(f->pods, line), 0);
    e = cache_find_pod(&f->cache, "a/s");
    assert_non_null(e->info->request_error);
    assert_non_null(strstr(e->info->request_error, "without tencent.com/vcuda-memory"));
    rv_is(f->pods, "32");
}

/* The value of one gqa_objects_skipped_total sample in /metrics. */
static long long skipped(struct fixture *f, const char *kind, const char *reason)
{
    struct strbuf sb;
    strbuf_init(&sb);
    metrics_render(&sb, &f->cache);
    char key[128];
    snprintf(key, sizeof(key), "gqa_objects_skipped_total{kind=\"%s\",reason=\"%s\"} ", kind, reason);
    const char *at = sb.data ? strstr(sb.data, key) : NULL;
    long long v = at ? strtoll(at + strlen(key), NULL, 10) : -1;
    strbuf_free(&sb);
    return v;
}

/* Issue 10, item 1: a bad watched object is skipped with a reason and
 * counted; a node with an absurd GPU count is applied, clamped. */
static void test_bad_objects_skipped_and_counted(void **state)
{
    struct fixture *f = *state;
    long long malformed = skipped(f, "node", "malformed"), invalid = skipped(f, "configmap", "invalid");
    assert_true(malformed >= 0 && invalid >= 0);
    assert_int_equal(apply(f->nodes, "{\"type\":\"ADDED\",\"object\":[1,2]}"), -1);
    assert_int_equal(apply(f->nodes, "not an event"), -1);
    assert_int_equal(skipped(f, "node", "malformed"), malformed + 2);
    assert_int_equal(apply(f->cms, "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":"
                                   "{\"namespace\":\"kube-public\",\"resourceVersion\":\"5\"}}}"),
                     0);
    assert_int_equal(skipped(f, "configmap", "invalid"), invalid + 1);
    assert_int_equal(dict_size(&f->cache.configmaps), 0);
    assert_int_equal(apply(f->nodes, "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":"
                                     "{\"name\":\"big\",\"resourceVersion\":\"6\"},\"status\":{\"allocatable\":"
                                     "{\"nvidia.com/gpu\":\"2147483648\"}}}}"),
                     0);
    assert_int_equal(cache_find_node(&f->cache, "big")->gpu_count, 64);
    assert_int_equal(skipped(f, "node", "invalid"), 0);
}

/* ---- lists over HTTP, taken apart as they arrive ---------------------------- */

static atomic_int list_mode;   /* 0: a good list of LIST_NODES nodes; 1: items is an object */
static atomic_int lists_served;
#define LIST_NODES 40
#define LIST_PIECE 61

/* The list in pieces of LIST_PIECE bytes, each its own TCP segment (fakeapi
 * pauses between chunks), so names, escapes and items are cut across pieces. */
static int serve_list(struct fake_conn *c, int mode)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"77\"},"
                     "\"items\":");
    strbuf_puts(&sb, mode == 1 ? "{\"a\":1}" : "[");
    for (int i = 0; mode == 0 && i < LIST_NODES; i++)
        strbuf_printf(&sb,
                      "%s{\"metadata\":{\"name\":\"ln-%02d\",\"resourceVersion\":\"%d\",\"annotations\":{"
                      "\"x\":\"{\\\"quoted\\\":\\\"\\u00e9\\\"}\"}},\"status\":{\"allocatable\":{"
                      "\"tencent.com/vcuda-core\":\"%d\",\"tencent.com/vcuda-memory\":\"40\"}}}",
                      i ? ", " : "", i, 10 + i, 100 * (1 + i % 8));
    strbuf_puts(&sb, mode == 1 ? "}" : "]}");
    int rc = strbuf_failed(&sb) || fake_start_chunked(c) ? -1 : 0;
    for (size_t at = 0; rc == 0 && at < sb.len; at += LIST_PIECE)
        rc = fake_chunk(c, sb.data + at, sb.len - at < LIST_PIECE ? sb.len - at : LIST_PIECE);
    if (rc == 0)
        rc = fake_end_chunked(c);
    strbuf_free(&sb);
    atomic_fetch_add(&lists_served, 1);
    return rc;
}

static int respond_lists(void *ctx, struct fake_conn *c, const struct fake_request *rq)
{
    (void)ctx;
    if (strstr(rq->path, "watch=1"))
        return fake_hold(c);
    return serve_list(c, atomic_load(&list_mode));
}

static bool wait_for(struct informer *inf, int synced, const char *error_part, long ms)
{
    for (long long end = fake_mono_ms() + ms; fake_mono_ms() < end; fake_sleep_ms(20)) {
        struct informer_status st;
        informer_status(inf, &st);
        if (st.synced == synced && (!error_part || strstr(st.last_error, error_part)))
            return true;
    }
    return false;
}

/* A list that arrives in small pieces is applied whole; one that is not a
 * Kubernetes list fails (items is not an array: earlier releases read that
 * as an empty list and would have emptied the cache), and the next good one
 * is applied. */
static void test_list_streamed_and_checked(void **state)
{
    struct fixture *f = *state;
    atomic_store(&list_mode, 1);
    atomic_store(&lists_served, 0);
    assert_int_equal(fakeapi_start(respond_lists, NULL), 0);
    char url[64];
    snprintf(url, sizeof(url), "%s", fakeapi_url());
    url[strlen(url) - 1] = '\0'; /* the server is named without its trailing slash */
    struct kube_config cfg = {.server = url};
    struct informer *inf = informer_new("nodes", "/api/v1/nodes", feed_sink(f->node_feed), &cfg);
    assert_non_null(inf);
    assert_int_equal(informer_start(inf), 0);
    assert_true(wait_for(inf, 0, "not a Kubernetes list", 5000));
    assert_int_equal(dict_size(&f->cache.nodes), 0);
    atomic_store(&list_mode, 0);
    assert_true(wait_for(inf, 1, NULL, 10000));
    struct informer_status st;
    informer_status(inf, &st);
    assert_string_equal(st.resource_version, "77");
    cache_read_lock(&f->cache);
    assert_int_equal(dict_size(&f->cache.nodes), LIST_NODES);
    const struct node_state *n = cache_find_node(&f->cache, "ln-07");
    assert_non_null(n);
    assert_int_equal(n->gpu_count, 8);
    cache_unlock(&f->cache);
    assert_true(atomic_load(&lists_served) >= 2);
    informer_free(inf);
    fakeapi_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_add_modify_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bookmark_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_configmaps_and_node_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_pods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pods_read_from_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pod_defaults_take_the_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_objects_skipped_and_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_streamed_and_checked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
