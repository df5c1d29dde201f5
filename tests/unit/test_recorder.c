/* test_recorder.c - unit tests for extender/live/recorder.c against a scripted API
 * server (tests/unit/fakeapi): the decision patch (merge patch, the pod's
 * resourceVersion as precondition, both annotation sets), a 409 answered by
 * reading the pod again and retrying, or giving up when the pod was bound,
 * recreated or keeps changing; clearing the annotations; the Binding; and
 * reading a pod the watch has not delivered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/decide/metrics.h"
#include "extender/live/recorder.h"
#include "tests/unit/fakeapi.h"
#include "tests/unit/support.h"

#define POD_PATH "/api/v1/namespaces/t/pods/p"
#define MAX_SCRIPT 8

/* The API server's answers, taken in order by the requests that match. */
struct answer {
    const char *method, *path; /* path: exact, the query ignored */
    int status;
    const char *body;
};

static struct {
    pthread_mutex_t mu;
    struct answer script[MAX_SCRIPT];
    int n, next;
} api = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void script(const struct answer *answers, int n)
{
    pthread_mutex_lock(&api.mu);
    memcpy(api.script, answers, sizeof(*answers) * (size_t)n);
    api.n = n;
    api.next = 0;
    pthread_mutex_unlock(&api.mu);
    fakeapi_clear_log();
}

static int respond(void *ctx, struct fake_conn *c, const struct fake_request *rq)
{
    (void)ctx;
    struct answer a = {NULL, NULL, 404, "{\"kind\":\"Status\",\"code\":404,\"message\":\"not scripted\"}"};
    pthread_mutex_lock(&api.mu);
    size_t plen = strcspn(rq->path, "?");
    if (api.next < api.n && strcmp(api.script[api.next].method, rq->method) == 0 &&
        strlen(api.script[api.next].path) == plen && strncmp(api.script[api.next].path, rq->path, plen) == 0)
        a = api.script[api.next++];
    pthread_mutex_unlock(&api.mu);
    return fake_reply(c, a.status, a.status < 300 ? "OK" : "Failed", "application/json", a.body);
}

struct fixture {
    struct kube_config cfg;
    struct recorder *r;
    const struct decision_sink *sink;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f || fakeapi_start(respond, NULL) != 0)
        return -1;
    f->cfg.server = (char *)fakeapi_url();
    char *err = NULL;
    f->r = recorder_new(&f->cfg, &err);
    if (!f->r)
        return -1;
    f->sink = recorder_sink(f->r);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    recorder_free(f->r);
    fakeapi_stop();
    free(f);
    return 0;
}

/* t/p, uid u1, resourceVersion 7, one vcuda share, decided on n1 GPU 3. */
static struct pod_info *decided_pod(void)
{
    struct pod_info *p = pod_of("{'metadata':{'name':'p','namespace':'t','uid':'u1','resourceVersion':'7'},"
                                "'spec':{'containers':[{'name':'c','resources':{'limits':"
                                "{'tencent.com/vcuda-core':'30','tencent.com/vcuda-memory':'4'}}}]}}");
    int gpus[] = {3};
    int *idx[] = {gpus};
    int count[] = {1};
    struct pod_info *d = pod_info_with_decision(p, "n1", 1763700000000000000LL, idx, count);
    assert_non_null(d);
    pod_info_free(p);
    return d;
}

static const char *annotation(const cJSON *patch, const char *key)
{
    const cJSON *ann =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "metadata"), "annotations");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, key);
    return cJSON_IsString(v) ? v->valuestring : cJSON_IsNull(v) ? "(null)" : NULL;
}

static const char *precondition(const cJSON *patch)
{
    const cJSON *rv =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "metadata"), "resourceVersion");
    return cJSON_IsString(rv) ? rv->valuestring : NULL;
}

/* The n-th request the server saw, which must be method on path. */
static struct fake_request seen(int n, const char *method, const char *path)
{
    struct fake_request log[FAKE_LOG_MAX];
    size_t count = fakeapi_log(log, FAKE_LOG_MAX);
    if ((size_t)n >= count)
        fail_msg("request %d was not made (%zu seen)", n, count);
    if (strcmp(log[n].method, method) != 0 || strncmp(log[n].path, path, strlen(path)) != 0)
        fail_msg("request %d is %s %s, want %s %s", n, log[n].method, log[n].path, method, path);
    return log[n];
}

static size_t requests_made(void)
{
    struct fake_request log[FAKE_LOG_MAX];
    return fakeapi_log(log, FAKE_LOG_MAX);
}

static void test_record_patch(void **state)
{
    struct fixture *f = *state;
    const struct answer a[] = {{"PATCH", POD_PATH, 200, "{}"}};
    script(a, 1);
    struct pod_info *d = decided_pod();
    char *err = NULL;
    assert_int_equal(f->sink->record(f->sink->ctx, d, &err), 0);
    assert_null(err);
    struct fake_request rq = seen(0, "PATCH", POD_PATH);
    assert_string_equal(rq.ctype, "application/merge-patch+json");
    cJSON *patch = cJSON_Parse(rq.body);
    assert_non_null(patch);
    assert_string_equal(precondition(patch), "7");
    assert_string_equal(annotation(patch, "tencent.com/predicate-gpu-idx-0"), "3");
    assert_string_equal(annotation(patch, "tencent.com/predicate-node"), "n1");
    assert_string_equal(annotation(patch, "tencent.com/gpu-assigned"), "false");
    assert_string_equal(annotation(patch, "tencent.com/predicate-time"), "1763700000000000000");
    assert_string_equal(annotation(patch, "gpu-admission.io/gpu-idx-0"), "3");
    assert_string_equal(annotation(patch, "gpu-admission.io/node"), "n1");
    cJSON_Delete(patch);
    assert_int_equal(requests_made(), 1);
    pod_info_free(d);
}

static const char unbound_v8[] = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"t\",\"uid\":\"u1\","
                                 "\"resourceVersion\":\"8\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}";
static const char conflict[] = "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\",\"message\":\"the object "
                               "has been modified\"}";

static void test_conflict_rereads_and_retries(void **state)
{
    struct fixture *f = *state;
    const struct answer a[] = {
        {"PATCH", POD_PATH, 409, conflict}, {"GET", POD_PATH, 200, unbound_v8}, {"PATCH", POD_PATH, 200, "{}"}};
    script(a, 3);
    struct pod_info *d = decided_pod();
    char *err = NULL;
    assert_int_equal(f->sink->record(f->sink->ctx, d, &err), 0);
    assert_null(err);
    cJSON *retry = cJSON_Parse(seen(2, "PATCH", POD_PATH).body);
    assert_string_equal(precondition(retry), "8");
    cJSON_Delete(retry);
    pod_info_free(d);
}

static void expect_record_error(struct fixture *f, const struct answer *a, int n, const char *want)
{
    script(a, n);
    struct pod_info *d = decided_pod();
    char *err = NULL;
    assert_int_equal(f->sink->record(f->sink->ctx, d, &err), -1);
    if (!err || !strstr(err, want))
        fail_msg("error %s, want one containing \"%s\"", err ? err : "(none)", want);
    free(err);
    pod_info_free(d);
}

static void test_conflict_gives_up(void **state)
{
    struct fixture *f = *state;
    const char bound[] = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"t\",\"uid\":\"u1\","
                         "\"resourceVersion\":\"9\"},\"spec\":{\"nodeName\":\"n2\",\"containers\":[{\"name\":\"c\"}]}}";
    const char recreated[] = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"t\",\"uid\":\"u2\","
                             "\"resourceVersion\":\"9\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}";
    const struct answer was_bound[] = {{"PATCH", POD_PATH, 409, conflict}, {"GET", POD_PATH, 200, bound}};
    expect_record_error(f, was_bound, 2, "the pod was bound meanwhile");
    const struct answer was_recreated[] = {{"PATCH", POD_PATH, 409, conflict}, {"GET", POD_PATH, 200, recreated}};
    expect_record_error(f, was_recreated, 2, "the pod was deleted and created again");
    const struct answer was_deleted[] = {{"PATCH", POD_PATH, 409, conflict}};
    expect_record_error(f, was_deleted, 1, "the pod no longer exists");
    /* RECORDER_CONFLICT_RETRIES re-reads, then it gives up. */
    const struct answer always[] = {{"PATCH", POD_PATH, 409, conflict}, {"GET", POD_PATH, 200, unbound_v8},
                                    {"PATCH", POD_PATH, 409, conflict}, {"GET", POD_PATH, 200, unbound_v8},
                                    {"PATCH", POD_PATH, 409, conflict}, {"GET", POD_PATH, 200, unbound_v8},
                                    {"PATCH", POD_PATH, 409, conflict}, {"GET", POD_PATH, 200, unbound_v8}};
    expect_record_error(f, always, 8, "the pod kept changing");
    assert_int_equal(requests_made(), 2 * RECORDER_CONFLICT_RETRIES + 1);
    /* Anything else is the API server's message. */
    const struct answer forbidden[] = {
        {"PATCH", POD_PATH, 403, "{\"kind\":\"Status\",\"code\":403,\"message\":\"pods \\\"p\\\" is forbidden\"}"}};
    expect_record_error(f, forbidden, 1, "pods \"p\" is forbidden");
}

static void test_clear(void **state)
{
    struct fixture *f = *state;
    const struct answer a[] = {{"PATCH", POD_PATH, 200, "{}"}};
    script(a, 1);
    struct pod_info *d = decided_pod();
    char *err = NULL;
    assert_int_equal(f->sink->clear(f->sink->ctx, d, &err), 0);
    cJSON *patch = cJSON_Parse(seen(0, "PATCH", POD_PATH).body);
    assert_null(precondition(patch));
    static const char *const keys[] = {"tencent.com/predicate-gpu-idx-0",
                                       "tencent.com/predicate-node",
                                       "tencent.com/gpu-assigned",
                                       "tencent.com/predicate-time",
                                       "gpu-admission.io/gpu-idx-0",
                                       "gpu-admission.io/node",
                                       "gpu-admission.io/time"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!annotation(patch, keys[i]) || strcmp(annotation(patch, keys[i]), "(null)") != 0)
            fail_msg("%s is not removed by the clearing patch: %s", keys[i], seen(0, "PATCH", POD_PATH).body);
    cJSON_Delete(patch);
    pod_info_free(d);
}

static const char *label(const cJSON *patch, const char *key)
{
    const cJSON *labels =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "metadata"), "labels");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(labels, key);
    return cJSON_IsString(v) ? v->valuestring : cJSON_IsNull(v) ? "(null)" : NULL;
}

/* A HAMi vGPU pod decided on node (its allocation as HAMi's annotations carry it). */
static struct pod_info *hami_decided_pod(const char *node)
{
    struct pod_info *p = pod_of("{'metadata':{'name':'p','namespace':'t','uid':'u1','resourceVersion':'7',"
                                "'annotations':{'hami.io/vgpu-devices-allocated':'GPU-a,NVIDIA,3000,30:;'}},"
                                "'spec':{'containers':[{'name':'c','resources':{'limits':"
                                "{'nvidia.com/gpu':'1','nvidia.com/gpumem':'3000'}}}]}}");
    assert_non_null(p->hami);
    assert_true(p->hami->has_alloc);
    struct pod_info *d = pod_info_with_decision(p, node, 1763700000000000000LL, NULL, NULL);
    assert_non_null(d);
    pod_info_free(p);
    return d;
}

/* HAMi's PatchPodAnnotations labels the pod hami.io/vgpu-node = node with
 * the decision (HAMi's vGPU monitor finds pods by it), unless the node's
 * name is no valid label value; clearing the decision removes it. */
static void test_hami_node_label(void **state)
{
    struct fixture *f = *state;
    const struct answer a[] = {{"PATCH", POD_PATH, 200, "{}"}, {"PATCH", POD_PATH, 200, "{}"},
                               {"PATCH", POD_PATH, 200, "{}"}};
    script(a, 3);
    struct pod_info *d = hami_decided_pod("gpu-node-1");
    char *err = NULL;
    assert_int_equal(f->sink->record(f->sink->ctx, d, &err), 0);
    cJSON *patch = cJSON_Parse(seen(0, "PATCH", POD_PATH).body);
    assert_string_equal(label(patch, "hami.io/vgpu-node"), "gpu-node-1");
    assert_string_equal(annotation(patch, "hami.io/vgpu-node"), "gpu-node-1");
    cJSON_Delete(patch);
    assert_int_equal(f->sink->clear(f->sink->ctx, d, &err), 0);
    patch = cJSON_Parse(seen(1, "PATCH", POD_PATH).body);
    assert_string_equal(label(patch, "hami.io/vgpu-node"), "(null)");
    cJSON_Delete(patch);
    pod_info_free(d);

    char longname[80];
    memset(longname, 'n', 70);
    longname[70] = '\0';
    d = hami_decided_pod(longname);
    assert_int_equal(f->sink->record(f->sink->ctx, d, &err), 0);
    patch = cJSON_Parse(seen(2, "PATCH", POD_PATH).body);
    assert_null(label(patch, "hami.io/vgpu-node"));
    assert_string_equal(annotation(patch, "hami.io/vgpu-node"), longname);
    cJSON_Delete(patch);
    pod_info_free(d);
}

static void test_bind(void **state)
{
    struct fixture *f = *state;
    const struct answer a[] = {{"POST", POD_PATH "/binding", 201, "{\"kind\":\"Status\",\"status\":\"Success\"}"}};
    script(a, 1);
    struct pod_info *d = decided_pod();
    char *err = NULL;
    assert_int_equal(f->sink->bind(f->sink->ctx, d, "n1", &err), 0);
    cJSON *b = cJSON_Parse(seen(0, "POST", POD_PATH "/binding").body);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(b, "metadata");
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(b, "target");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(b, "kind")->valuestring, "Binding");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "name")->valuestring, "p");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "uid")->valuestring, "u1");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(target, "kind")->valuestring, "Node");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(target, "name")->valuestring, "n1");
    cJSON_Delete(b);
    const struct answer refused[] = {
        {"POST", POD_PATH "/binding", 409,
         "{\"kind\":\"Status\",\"code\":409,\"message\":\"pod p is already assigned to node \\\"n2\\\"\"}"}};
    script(refused, 1);
    assert_int_equal(f->sink->bind(f->sink->ctx, d, "n1", &err), -1);
    assert_non_null(strstr(err, "pod p is already assigned to node \"n2\""));
    free(err);
    pod_info_free(d);
}

static void test_fetch(void **state)
{
    struct fixture *f = *state;
    const struct answer a[] = {{"GET", POD_PATH, 200, unbound_v8}};
    script(a, 1);
    cJSON *pod = NULL;
    char *err = NULL;
    assert_int_equal(f->sink->fetch(f->sink->ctx, "t", "p", &pod, &err), 1);
    struct pod_info *p = pod_info_from_json(pod, &err);
    assert_non_null(p);
    assert_string_equal(p->uid, "u1");
    assert_string_equal(p->resource_version, "8");
    pod_info_free(p);
    cJSON_Delete(pod);
    const struct answer missing[] = {{"GET", POD_PATH, 404, "{\"kind\":\"Status\",\"code\":404}"}};
    script(missing, 1);
    assert_int_equal(f->sink->fetch(f->sink->ctx, "t", "p", &pod, &err), 0);
    assert_null(pod);
    const struct answer broken[] = {{"GET", POD_PATH, 200, "[1,2]"}};
    script(broken, 1);
    assert_int_equal(f->sink->fetch(f->sink->ctx, "t", "p", &pod, &err), -1);
    assert_non_null(strstr(err, "not a Pod"));
    free(err);
    err = NULL;
    const struct answer failing[] = {
        {"GET", POD_PATH, 500, "{\"kind\":\"Status\",\"code\":500,\"message\":\"etcdserver: timeout\"}"}};
    script(failing, 1);
    assert_int_equal(f->sink->fetch(f->sink->ctx, "t", "p", &pod, &err), -1);
    assert_non_null(strstr(err, "etcdserver: timeout"));
    free(err);
}

/* gqa_api_writes_total's result label: what each answer of a write counts as. */
static void test_write_results(void **state)
{
    (void)state;
    assert_int_equal(metrics_write_result(0, 200, NULL), WRITE_OK);
    assert_int_equal(metrics_write_result(0, 201, NULL), WRITE_OK);
    assert_int_equal(metrics_write_result(0, 409, "409 Conflict"), WRITE_CONFLICT);
    assert_int_equal(metrics_write_result(0, 403, "pods is forbidden"), WRITE_FORBIDDEN);
    assert_int_equal(metrics_write_result(0, 401, "Unauthorized"), WRITE_FORBIDDEN);
    assert_int_equal(metrics_write_result(0, 404, NULL), WRITE_NOT_FOUND);
    assert_int_equal(metrics_write_result(0, 422, NULL), WRITE_INVALID);
    assert_int_equal(metrics_write_result(0, 400, NULL), WRITE_INVALID);
    assert_int_equal(metrics_write_result(0, 504, NULL), WRITE_TIMEOUT);
    assert_int_equal(metrics_write_result(0, 408, NULL), WRITE_TIMEOUT);
    assert_int_equal(metrics_write_result(0, 500, NULL), WRITE_ERROR);
    assert_int_equal(metrics_write_result(0, 429, NULL), WRITE_ERROR);
    assert_int_equal(metrics_write_result(-1, 0, "PATCH /x: Timeout was reached"), WRITE_TIMEOUT);
    assert_int_equal(metrics_write_result(-1, 0, "PATCH /x: Couldn't connect to server"), WRITE_ERROR);
    assert_int_equal(metrics_write_result(-1, 0, NULL), WRITE_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_patch),
        cmocka_unit_test(test_write_results),
        cmocka_unit_test(test_conflict_rereads_and_retries),
        cmocka_unit_test(test_conflict_gives_up),
        cmocka_unit_test(test_clear),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_hami_node_label),
        cmocka_unit_test(test_fetch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
