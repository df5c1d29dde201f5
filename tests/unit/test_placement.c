/* test_placement.c - unit tests for the decision core (extender/decide/placement.c
 * with the cache's reservations and the pod lookup): reserve, record
 * failure and its exact undo, a reservation across watch events, re-filter
 * of a live assumption, UID changes, expiry, the in-flight set, and bind.
 * A fake decision sink stands in for the API server; its record callback
 * can act while "the write is in flight" (no lock is held then). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cache.h"
#include "cluster/nodespec.h"
#include "cluster/podspec.h"
#include "cluster/hami_occupancy.h"
#include "extender/decide/placement.h"

#define SEC 1000000000LL

/* ---- fixtures --------------------------------------------------------------- */

static char *q(const char *text)
{
    size_t len = strlen(text) + 1;
    char *json = malloc(len);
    assert_non_null(json);
    for (size_t i = 0; i < len; i++)
        json[i] = text[i] == '\'' ? '"' : text[i];
    return json;
}

static cJSON *json_of(const char *fixture)
{
    char *text = q(fixture);
    cJSON *v = cJSON_Parse(text);
    if (!v)
        fail_msg("fixture is not JSON: %s", text);
    free(text);
    return v;
}

static void fmt(char *buf, size_t size, const char *f, ...) __attribute__((format(printf, 3, 4)));

static void fmt(char *buf, size_t size, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, size, f, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < size);
}

/* A Pod object: vcuda share of cores/memory, uid, resourceVersion; bound to node when not NULL. */
static cJSON *pod_object(const char *name, const char *uid, const char *rv, int cores, int mem, const char *node)
{
    char buf[1024], bound[128] = "";
    if (node)
        fmt(bound, sizeof(bound), "'nodeName':'%s',", node);
    fmt(buf, sizeof(buf),
        "{'kind':'Pod','metadata':{'name':'%s','namespace':'t','uid':'%s','resourceVersion':'%s'},"
        "'spec':{%s'containers':[{'name':'c','resources':{'limits':{'tencent.com/vcuda-core':'%d',"
        "'tencent.com/vcuda-memory':'%d'}}}]},'status':{'phase':'%s'}}",
        name, uid, rv, bound, cores, mem, node ? "Running" : "Pending");
    return json_of(buf);
}

static struct pod_info *pod_of(const char *name, const char *uid, const char *rv, int cores, int mem)
{
    cJSON *obj = pod_object(name, uid, rv, cores, mem, NULL);
    char *err = NULL;
    struct pod_info *p = pod_info_from_json(obj, &err);
    if (!p)
        fail_msg("pod_info_from_json: %s", err ? err : "(null)");
    cJSON_Delete(obj);
    return p;
}

/* A Node object's text (single quotes) into the cache, as the watch would. */
static void apply_node_text(struct cluster_cache *c, const char *text)
{
    cJSON *obj = json_of(text);
    char *err = NULL;
    struct node_spec *spec = node_spec_from_json(obj, &err);
    assert_non_null(spec);
    cJSON_Delete(obj);
    assert_int_equal(cache_apply_node(c, spec), 0);
}

/* A Pod object's text (single quotes); fails the test when it is not one. */
static struct pod_info *pod_of_text(const char *text)
{
    cJSON *obj = json_of(text);
    char *err = NULL;
    struct pod_info *p = pod_info_from_json(obj, &err);
    cJSON_Delete(obj);
    if (!p)
        fail_msg("pod_info_from_json: %s", err ? err : "(null)");
    return p;
}

static void add_vcuda_node(struct cluster_cache *c, const char *name, int gpus)
{
    char buf[512];
    fmt(buf, sizeof(buf),
        "{'kind':'Node','metadata':{'name':'%s'},'status':{'allocatable':{'tencent.com/vcuda-core':'%d',"
        "'tencent.com/vcuda-memory':'%d'}}}",
        name, gpus * 100, gpus * 40);
    apply_node_text(c, buf);
}

/* What the watch would deliver for a pod. */
static void watch_apply(struct cluster_cache *c, struct pod_info *p)
{
    assert_int_equal(cache_apply_pod(c, p, clock_realtime_ns()), 0);
}

/* ---- the fake API server ---------------------------------------------------------- */

struct world;
typedef void (*hook_fn)(struct world *w);

struct world {
    struct cluster_cache cache;
    struct placement p;
    struct decision_sink sink;
    /* what the sink saw */
    int records, binds, clears, fetches;
    int binds_decided; /* one-write binds (decision_sink.bind_decided) */
    char last_node[64];
    int last_minor;
    /* what it answers */
    bool fail_record, fail_bind;
    /* A recorded decision reaches the cache as the watch would deliver it;
     * the clear that should take it off fails (the API server timed out). */
    bool record_lands, fail_clear;
    cJSON *api_pod; /* what a GET finds (owned), or NULL: 404 */
    hook_fn during_record;
    /* HAMi binds: the steps in order ("lock record+phase bind"), the
     * allocation and phases written, and what the lock answers */
    char steps[256];
    char allocation[256];
    char phase[32];
    int lock_answer;   /* 0 taken, 1 held by another, -1 API failure */
    int lock_refusals; /* held by another this many more times first */
    bool locked, fail_annotate;
};

static void step(struct world *w, const char *name)
{
    size_t len = strlen(w->steps);
    snprintf(w->steps + len, sizeof(w->steps) - len, "%s%s", len ? " " : "", name);
}

/* What the recorder would write for a HAMi pod: its allocation. */
static void note_allocation(struct world *w, const struct pod_info *decided)
{
    w->allocation[0] = '\0';
    char *text = decided->hami && decided->hami->has_alloc ? hami_alloc_encode(&decided->hami->alloc) : NULL;
    if (text)
        snprintf(w->allocation, sizeof(w->allocation), "%s", text);
    free(text);
}

static int fake_record(void *ctx, const struct pod_info *decided, char **err)
{
    struct world *w = ctx;
    w->records++;
    /* record+phase: the write carries HAMi's bind-phase mark too */
    step(w, decided->hami && decided->hami->bind_phase_ns > 0 ? "record+phase" : "record");
    note_allocation(w, decided);
    snprintf(w->last_node, sizeof(w->last_node), "%s", decided->decision.node ? decided->decision.node : "");
    w->last_minor = decided->decision.idx_count && decided->decision.idx_count[0] ? decided->decision.idx[0][0] : -1;
    if (w->during_record) {
        hook_fn hook = w->during_record;
        w->during_record = NULL; /* once */
        hook(w);
    }
    if (w->fail_record) {
        *err = strdup("injected failure");
        return -1;
    }
    if (w->record_lands)
        watch_apply(&w->cache, pod_info_clone(decided));
    return 0;
}

static int fake_clear(void *ctx, const struct pod_info *pod, char **err)
{
    (void)pod;
    ((struct world *)ctx)->clears++;
    step(ctx, "clear");
    if (((struct world *)ctx)->fail_clear) {
        *err = strdup("timed out");
        return -1;
    }
    return 0;
}

static int fake_bind(void *ctx, const struct pod_info *pod, const char *node, char **err)
{
    struct world *w = ctx;
    (void)pod;
    (void)node;
    w->binds++;
    step(w, "bind");
    if (w->fail_bind) {
        *err = strdup("binding refused");
        return -1;
    }
    return 0;
}

/* The one-write bind: the Binding carries the decision. */
static int fake_bind_decided(void *ctx, const struct pod_info *decided, const char *node, char **err)
{
    struct world *w = ctx;
    w->binds_decided++;
    step(w, "bind-decided");
    snprintf(w->last_node, sizeof(w->last_node), "%s", node);
    w->last_minor = decided->decision.idx_count && decided->decision.idx_count[0] ? decided->decision.idx[0][0] : -1;
    if (w->fail_bind) {
        *err = strdup("binding refused");
        return -1;
    }
    return 0;
}

static int fake_fetch(void *ctx, const char *ns, const char *name, cJSON **pod, char **err)
{
    struct world *w = ctx;
    (void)ns;
    (void)name;
    (void)err;
    w->fetches++;
    *pod = w->api_pod ? cJSON_Duplicate(w->api_pod, 1) : NULL;
    return w->api_pod ? 1 : 0;
}

static int fake_lock(void *ctx, const char *node, const struct pod_info *pod, char **err)
{
    struct world *w = ctx;
    (void)node;
    (void)pod;
    if (w->lock_refusals > 0) {
        w->lock_refusals--;
        step(w, "lock-refused");
        *err = strdup("node is locked for HAMi");
        return 1;
    }
    step(w, w->lock_answer == 0 ? "lock" : "lock-refused");
    if (w->lock_answer != 0)
        *err = strdup(w->lock_answer > 0 ? "node is locked for HAMi" : "API server down");
    w->locked = w->lock_answer == 0;
    return w->lock_answer;
}

static int fake_unlock(void *ctx, const char *node, const struct pod_info *pod, char **err)
{
    struct world *w = ctx;
    (void)node;
    (void)pod;
    (void)err;
    step(w, "unlock");
    w->locked = false;
    return 0;
}

static int fake_annotate(void *ctx, const struct pod_info *pod, cJSON *annotations, char **err)
{
    struct world *w = ctx;
    (void)pod;
    const cJSON *phase = cJSON_GetObjectItemCaseSensitive(annotations, HAMI_BIND_PHASE_ANNOTATION);
    snprintf(w->phase, sizeof(w->phase), "%s", cJSON_IsString(phase) ? phase->valuestring : "?");
    bool timed = cJSON_GetObjectItemCaseSensitive(annotations, HAMI_BIND_TIME_ANNOTATION) != NULL;
    step(w, strcmp(w->phase, HAMI_PHASE_ALLOCATING) == 0 && timed ? "allocating" : w->phase);
    cJSON_Delete(annotations);
    if (w->fail_annotate && strcmp(w->phase, HAMI_PHASE_ALLOCATING) == 0) {
        *err = strdup("patch refused");
        return -1;
    }
    return 0;
}

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof(*w));
    struct cache_config cc = {.assume_ttl_ns = 60 * SEC};
    struct placement_config pc = {.mode = PLACEMENT_FILTER, .policy = {POLICY_BINPACK, POLICY_BINPACK}};
    if (!w || cache_init(&w->cache, &cc) != 0)
        return -1;
    if (placement_init(&w->p, &w->cache, &pc) != 0)
        return -1;
    w->sink = (struct decision_sink){fake_record, fake_clear,  fake_bind,     fake_fetch, w,
                                     fake_lock,   fake_unlock, fake_annotate, NULL};
    placement_set_sink(&w->p, &w->sink);
    add_vcuda_node(&w->cache, "n1", 2);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    placement_destroy(&w->p);
    cache_destroy(&w->cache);
    cJSON_Delete(w->api_pod);
    free(w);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------- */

static const char *const N1[] = {"n1"};

/* Filter pod over n1; returns the evaluation (caller frees). */
static void filter(struct world *w, const struct pod_info *pod, struct evaluation *ev)
{
    assert_int_equal(placement_filter(&w->p, pod, N1, 1, ev), 0);
}

static int64_t cores_used(struct world *w, int slot)
{
    cache_read_lock(&w->cache);
    const struct node_state *n = cache_find_node(&w->cache, "n1");
    int64_t v = n->gpus[slot].core_used;
    cache_unlock(&w->cache);
    return v;
}

/* The cache's entry for t/name: its uid and resourceVersion, and whether it is charged. */
static bool entry(struct world *w, const char *name, char *uid, char *rv, size_t size)
{
    char key[128];
    fmt(key, sizeof(key), "t/%s", name);
    cache_read_lock(&w->cache);
    const struct pod_entry *e = cache_find_pod(&w->cache, key);
    bool found = e != NULL;
    if (e) {
        snprintf(uid, size, "%s", e->info->uid ? e->info->uid : "");
        snprintf(rv, size, "%s", e->info->resource_version ? e->info->resource_version : "");
    }
    cache_unlock(&w->cache);
    return found;
}

static void expect_chosen(const struct evaluation *ev, bool decided)
{
    if (ev->error)
        fail_msg("unexpected Error: %s", ev->error);
    assert_int_equal(ev->chosen, 0);
    assert_true(ev->verdicts[0].fits);
    assert_int_equal(ev->decided, decided);
}

/* ---- tests ----------------------------------------------------------------------------- */

/* A decision reserves its GPUs in the cache and is written once. */
static void test_reserve_and_record(void **state)
{
    struct world *w = *state;
    struct pod_info *a = pod_of("a", "uid-a", "10", 60, 10);
    watch_apply(&w->cache, pod_info_clone(a));
    struct evaluation ev;
    filter(w, a, &ev);
    expect_chosen(&ev, true);
    assert_int_equal(w->records, 1);
    assert_string_equal(w->last_node, "n1");
    assert_int_equal(cores_used(w, w->last_minor), 60);
    evaluation_free(&ev);
    pod_info_free(a);
}

/* A failed write is the request's Error and takes back exactly the
 * reservation: the entry is the pod as the watch delivered it, uncharged. */
static void test_record_failure_undoes_exactly(void **state)
{
    struct world *w = *state;
    struct pod_info *a = pod_of("a", "uid-a", "10", 60, 10);
    watch_apply(&w->cache, pod_info_clone(a));
    w->fail_record = true;
    struct evaluation ev;
    filter(w, a, &ev);
    assert_non_null(ev.error);
    assert_non_null(strstr(ev.error, "injected failure"));
    assert_int_equal(ev.chosen, -1);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 0);
    char uid[64], rv[64];
    assert_true(entry(w, "a", uid, rv, sizeof(uid)));
    assert_string_equal(rv, "10");
    evaluation_free(&ev);

    /* A pod the cache did not hold: read from the API server and fed to the
     * cache as the watch would; the failed decision leaves it uncharged. */
    struct pod_info *b = pod_of("b", "uid-b", "11", 30, 10);
    w->api_pod = pod_object("b", "uid-b", "11", 30, 10, NULL);
    filter(w, b, &ev);
    assert_non_null(ev.error);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 0);
    assert_true(entry(w, "b", uid, rv, sizeof(uid)));
    assert_string_equal(rv, "11");
    evaluation_free(&ev);
    pod_info_free(a);
    pod_info_free(b);
}

/* A watch event from before the write (same UID, no decision) arrives while
 * the write is in flight: the GPUs stay reserved; an undo then goes back to
 * that event's copy, not to the older one. */
static void watch_update_during_write(struct world *w)
{
    watch_apply(&w->cache, pod_of("a", "uid-a", "12", 60, 10));
    assert_int_equal(cores_used(w, w->last_minor), 60);
}

static void test_reservation_survives_watch_events(void **state)
{
    struct world *w = *state;
    struct pod_info *a = pod_of("a", "uid-a", "10", 60, 10);
    watch_apply(&w->cache, pod_info_clone(a));
    w->during_record = watch_update_during_write;
    struct evaluation ev;
    filter(w, a, &ev);
    expect_chosen(&ev, true);
    assert_int_equal(cores_used(w, w->last_minor), 60);
    evaluation_free(&ev);

    /* The same with a failing write: back to resourceVersion 12, uncharged. */
    struct pod_info *b = pod_of("b", "uid-b", "20", 30, 10);
    watch_apply(&w->cache, pod_info_clone(b));
    w->fail_record = true;
    w->during_record = NULL;
    filter(w, b, &ev);
    assert_non_null(ev.error);
    evaluation_free(&ev);
    char uid[64], rv[64];
    assert_true(entry(w, "b", uid, rv, sizeof(uid)));
    assert_string_equal(rv, "20");
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 60);
    pod_info_free(a);
    pod_info_free(b);
}

/* Re-filter of a live assumption: the same node and GPU, nothing written. */
static void test_refilter_live_assumption(void **state)
{
    struct world *w = *state;
    struct pod_info *a = pod_of("a", "uid-a", "10", 60, 10);
    watch_apply(&w->cache, pod_info_clone(a));
    struct evaluation ev;
    filter(w, a, &ev);
    expect_chosen(&ev, true);
    int minor = w->last_minor;
    evaluation_free(&ev);
    filter(w, a, &ev);
    expect_chosen(&ev, false);
    assert_int_equal(w->records, 1);
    assert_int_equal(ev.gpus[ev.verdicts[0].gpus_off + 1], minor);
    assert_int_equal(cores_used(w, minor), 60);
    evaluation_free(&ev);
    pod_info_free(a);
}

/* A pod created again under the same name (new UID) never inherits the old
 * assumption: the lookup reads it, replaces the old entry, and a fresh
 * decision is written. A bind naming the old UID is refused. */
static void test_uid_change(void **state)
{
    struct world *w = *state;
    struct pod_info *old = pod_of("s", "uid-1", "10", 100, 40);
    watch_apply(&w->cache, pod_info_clone(old));
    struct evaluation ev;
    filter(w, old, &ev);
    expect_chosen(&ev, true);
    evaluation_free(&ev);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 100);

    struct pod_info *fresh = pod_of("s", "uid-2", "30", 100, 40);
    w->api_pod = pod_object("s", "uid-2", "30", 100, 40, NULL);
    filter(w, fresh, &ev);
    expect_chosen(&ev, true); /* decided, not answered from the old assumption */
    assert_int_equal(w->fetches, 1);
    assert_int_equal(w->records, 2);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 100); /* the old charge is gone */
    char uid[64], rv[64];
    assert_true(entry(w, "s", uid, rv, sizeof(uid)));
    assert_string_equal(uid, "uid-2");
    evaluation_free(&ev);

    char *err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "s", "uid-1", "n1", &err), -1);
    assert_non_null(strstr(err, "UID"));
    free(err);
    err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "s", "uid-2", "n1", &err), 0);
    assert_null(err);
    assert_int_equal(w->binds, 1);
    assert_int_equal(w->records, 2); /* the filter's decision is bound, not a new one */
    pod_info_free(old);
    pod_info_free(fresh);
}

/* An assumption past the TTL holds nothing: the next filter decides again. */
static void test_expiry(void **state)
{
    struct world *w = *state;
    struct pod_info *a = pod_of("a", "uid-a", "10", 60, 10);
    watch_apply(&w->cache, pod_info_clone(a));
    struct evaluation ev;
    filter(w, a, &ev);
    expect_chosen(&ev, true);
    evaluation_free(&ev);
    cache_expire(&w->cache, clock_realtime_ns() + 61 * SEC);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 0);
    filter(w, a, &ev);
    expect_chosen(&ev, true);
    assert_int_equal(w->records, 2);
    assert_int_equal(cores_used(w, w->last_minor), 60);
    evaluation_free(&ev);
    pod_info_free(a);
}

/* While a pod's write is in flight: a second request for the same pod is
 * told to retry; another pod cannot take the reserved GPU; after a failed
 * write it can. */
static struct pod_info *g_other;

static void second_requests_during_write(struct world *w)
{
    struct evaluation ev;
    struct pod_info *same = pod_of("a", "uid-a", "10", 100, 40);
    filter(w, same, &ev);
    assert_non_null(ev.error);
    assert_non_null(strstr(ev.error, "a decision for pod t/a is in progress; retry"));
    evaluation_free(&ev);
    char *err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "n1", &err), -1);
    assert_non_null(strstr(err, "in progress"));
    free(err);
    pod_info_free(same);

    int before = w->records;
    filter(w, g_other, &ev); /* wants a whole GPU too; one of two is reserved, one free */
    expect_chosen(&ev, true);
    assert_int_equal(w->records, before + 1);
    evaluation_free(&ev);
    struct pod_info *third = pod_of("c", "uid-c", "12", 100, 40);
    watch_apply(&w->cache, pod_info_clone(third));
    filter(w, third, &ev); /* none left while the reservation holds */
    assert_null(ev.error);
    assert_int_equal(ev.chosen, -1);
    assert_false(ev.verdicts[0].fits);
    evaluation_free(&ev);
    pod_info_free(third);
    w->fail_record = true; /* the first pod's write fails */
}

static void test_in_flight_and_race(void **state)
{
    struct world *w = *state;
    struct pod_info *a = pod_of("a", "uid-a", "10", 100, 40);
    g_other = pod_of("b", "uid-b", "11", 100, 40);
    watch_apply(&w->cache, pod_info_clone(a));
    watch_apply(&w->cache, pod_info_clone(g_other));
    w->during_record = second_requests_during_write;
    struct evaluation ev;
    filter(w, a, &ev);
    assert_non_null(ev.error); /* its own write failed */
    evaluation_free(&ev);
    w->fail_record = false;
    struct pod_info *third = pod_of("c", "uid-c", "12", 100, 40);
    filter(w, third, &ev); /* the failed write's GPU is free again */
    expect_chosen(&ev, true);
    evaluation_free(&ev);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 200);
    pod_info_free(a);
    pod_info_free(g_other);
    pod_info_free(third);
}

/* Bind mode: reserve, record, bind; a failed Binding clears the annotations
 * and takes the reservation back. A pod neither cached nor in the API
 * server is an Error that says so. */
static void test_bind(void **state)
{
    struct world *w = *state;
    w->p.cfg.mode = PLACEMENT_BIND;
    struct pod_info *a = pod_of("a", "uid-a", "10", 100, 40);
    watch_apply(&w->cache, pod_info_clone(a));
    w->fail_bind = true;
    char *err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "n1", &err), -1);
    assert_non_null(strstr(err, "binding refused"));
    free(err);
    err = NULL;
    assert_int_equal(w->records, 1);
    assert_int_equal(w->clears, 1);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 0);
    w->fail_bind = false;
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "n1", &err), 0);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 100);
    /* Bound now: binding again to the same node is fine, elsewhere not. */
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "n1", &err), 0);
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "n2", &err), -1);
    assert_non_null(strstr(err, "already bound"));
    free(err);
    err = NULL;

    /* Not in the cache: read from the API server and fed to the cache. */
    w->api_pod = pod_object("f", "uid-f", "40", 50, 10, NULL);
    assert_int_equal(placement_bind(&w->p, "t", "f", "uid-f", "n1", &err), 0);
    assert_int_equal(w->fetches, 1);
    char uid[64], rv[64];
    assert_true(entry(w, "f", uid, rv, sizeof(uid)));
    cJSON_Delete(w->api_pod);
    w->api_pod = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "ghost", "uid-g", "n1", &err), -1);
    assert_non_null(strstr(err, "the API server does not have it either"));
    free(err);
    pod_info_free(a);
}

/* A Pod with the given spec (the containers part, with the quotes of q()). */
static cJSON *pod_with_spec(const char *name, const char *uid, const char *spec)
{
    char buf[1024];
    fmt(buf, sizeof(buf),
        "{'kind':'Pod','metadata':{'name':'%s','namespace':'t','uid':'%s','resourceVersion':'5'},"
        "'spec':{%s},'status':{'phase':'Pending'}}",
        name, uid, spec);
    return json_of(buf);
}

/* Pods kube-scheduler sends because they name a managed GPU resource at 0
 * (in limits, only in requests, or only in an init container) are bound in
 * both placement modes, with no decision written; a pod that names none
 * is still refused. */
static void test_bind_interested_pod_without_gpus(void **state)
{
    static const char *const specs[] = {
        "'containers':[{'name':'c','resources':{'limits':{'nvidia.com/gpu':'0'}}}]",
        "'containers':[{'name':'c','resources':{'requests':{'tencent.com/vcuda-core':'0'}}}]",
        "'initContainers':[{'name':'i','resources':{'limits':{'nvidia.com/gpu':0}}}],'containers':[{'name':'c'}]",
        "'containers':[{'name':'c','resources':{'limits':{'nvidia.com/priority':'1'}}}]",
    };
    struct world *w = *state;
    for (int mode = 0; mode < 2; mode++) {
        w->p.cfg.mode = mode ? PLACEMENT_BIND : PLACEMENT_FILTER;
        for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
            char name[16], uid[16];
            fmt(name, sizeof(name), "z%d%zu", mode, k);
            fmt(uid, sizeof(uid), "uid-z%d%zu", mode, k);
            cJSON *obj = pod_with_spec(name, uid, specs[k]);
            char *err = NULL;
            struct pod_info *pod = pod_info_from_json(obj, &err);
            assert_non_null(pod);
            assert_false(pod->uses_gpu);
            assert_true(pod->names_gpu);
            struct evaluation ev;
            filter(w, pod, &ev);
            assert_null(ev.error);
            assert_true(ev.verdicts[0].fits);
            evaluation_free(&ev);
            w->api_pod = obj;
            int records = w->records, binds = w->binds;
            assert_int_equal(placement_bind(&w->p, "t", name, uid, "n1", &err), 0);
            assert_null(err);
            assert_int_equal(w->records, records);
            assert_int_equal(w->binds, binds + 1);
            assert_false(w->locked);
            cJSON_Delete(w->api_pod);
            w->api_pod = NULL;
            pod_info_free(pod);
        }
    }
    w->api_pod = pod_with_spec("cpu", "uid-cpu", "'containers':[{'name':'c','resources':{'limits':{'cpu':'1'}}}]");
    char *err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "cpu", "uid-cpu", "n1", &err), -1);
    assert_non_null(strstr(err, "asks for no GPU resource"));
    free(err);
    cJSON_Delete(w->api_pod);
    w->api_pod = NULL;
}

/* Bind mode with a sink that writes a decision in the Binding: one write
 * per bind (no annotation PATCH), the decision's GPU named in it, and a
 * failed Binding leaves nothing to clear and no charge. When that failed
 * write landed after all (a timeout), the watch's copy of the pod, bound
 * with the annotations, is charged exactly once. */
static void test_bind_one_write(void **state)
{
    struct world *w = *state;
    w->p.cfg.mode = PLACEMENT_BIND;
    w->sink.bind_decided = fake_bind_decided;
    struct pod_info *a = pod_of("a", "uid-a", "10", 100, 40);
    watch_apply(&w->cache, pod_info_clone(a));
    char *err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "n1", &err), 0);
    assert_string_equal(w->steps, "bind-decided");
    assert_int_equal(w->records + w->binds + w->clears, 0);
    assert_string_equal(w->last_node, "n1");
    assert_true(w->last_minor == 0 || w->last_minor == 1);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 100);

    struct pod_info *b = pod_of("b", "uid-b", "11", 100, 40);
    watch_apply(&w->cache, pod_info_clone(b));
    w->fail_bind = true;
    w->steps[0] = '\0';
    assert_int_equal(placement_bind(&w->p, "t", "b", "uid-b", "n1", &err), -1);
    assert_non_null(strstr(err, "binding refused"));
    free(err);
    err = NULL;
    assert_string_equal(w->steps, "bind-decided");
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 100);
    /* It landed after all: the watch brings b bound with its decision. */
    int minor = w->last_minor;
    struct pod_info *landed = pod_info_with_decision(b, "n1", clock_realtime_ns(), (int *[]){&minor}, (int[]){1});
    assert_non_null(landed);
    landed->node_name = strdup("n1");
    watch_apply(&w->cache, landed);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 200);
    assert_int_equal(cores_used(w, minor), 100);
    pod_info_free(a);
    pod_info_free(b);
}

static void reset_steps(struct world *w)
{
    w->steps[0] = w->allocation[0] = w->phase[0] = '\0';
}

static void add_whole_gpu_node(struct cluster_cache *c, const char *name)
{
    char buf[256];
    fmt(buf, sizeof(buf), "{'kind':'Node','metadata':{'name':'%s'},'status':{'allocatable':{'nvidia.com/gpu':'4'}}}",
        name);
    apply_node_text(c, buf);
}

static struct pod_info *whole_gpu_pod(struct world *w, const char *name, const char *uid, const char *annotations)
{
    char buf[1024];
    fmt(buf, sizeof(buf),
        "{'kind':'Pod','metadata':{'name':'%s','namespace':'t','uid':'%s','resourceVersion':'7','annotations':{%s}},"
        "'spec':{'containers':[{'name':'c','resources':{'limits':{'nvidia.com/gpu':'1'}}}]},"
        "'status':{'phase':'Pending'}}",
        name, uid, annotations);
    struct pod_info *p = pod_of_text(buf);
    watch_apply(&w->cache, pod_info_clone(p));
    return p;
}

/* A whole-GPU pod (nvidia.com/gpu, which HAMi could also serve) bound onto
 * a node HAMi does not serve has no HAMi step to take: one write, as a
 * vcuda share. HAMi decision annotations from before must come off, which
 * a Binding cannot do: then the annotation PATCH goes first. */
static void test_whole_gpu_bind_one_write(void **state)
{
    struct world *w = *state;
    w->p.cfg.mode = PLACEMENT_BIND;
    w->sink.bind_decided = fake_bind_decided;
    add_whole_gpu_node(&w->cache, "w1");
    struct pod_info *a = whole_gpu_pod(w, "a", "uid-a", "");
    char *err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "w1", &err), 0);
    assert_null(err);
    assert_string_equal(w->steps, "bind-decided");
    assert_int_equal(w->records + w->binds, 0);

    struct pod_info *b = whole_gpu_pod(w, "b", "uid-b", "'hami.io/vgpu-node':'elsewhere'");
    reset_steps(w);
    assert_int_equal(placement_bind(&w->p, "t", "b", "uid-b", "w1", &err), 0);
    assert_null(err);
    assert_null(strstr(w->steps, "bind-decided"));
    assert_int_equal(w->records, 1);
    assert_int_equal(w->binds, 1);
    pod_info_free(a);
    pod_info_free(b);
}

/* Issue 24's refusals for capacity kube-scheduler saw free: a bind whose
 * Binding failed must leave no decision on the pod. With the annotation
 * PATCH first, the PATCH landed (the watch brought the decision), the
 * Binding and the clear then failed (an API server timing out), and the
 * unbound pod held its GPU until --assume-ttl: of two later pods, each
 * fitting the node as kube-scheduler counts it, the second was refused
 * ("the freest, GPU 0, has 0 free"). One write leaves nothing behind. */
static void test_failed_bind_takes_no_capacity(void **state)
{
    struct world *w = *state;
    w->p.cfg.mode = PLACEMENT_BIND;
    w->sink.bind_decided = fake_bind_decided;
    w->record_lands = w->fail_clear = true;
    const char *names[] = {"a", "c", "d"}, *uids[] = {"uid-a", "uid-c", "uid-d"};
    for (int i = 0; i < 3; i++)
        watch_apply(&w->cache, pod_of(names[i], uids[i], "10", 100, 40));
    char *err = NULL;
    w->fail_bind = true;
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "n1", &err), -1);
    free(err);
    err = NULL;
    w->fail_bind = false;
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 0);
    assert_int_equal(placement_bind(&w->p, "t", "c", "uid-c", "n1", &err), 0);
    assert_int_equal(placement_bind(&w->p, "t", "d", "uid-d", "n1", &err), 0);
    assert_null(err);
    assert_int_equal(cores_used(w, 0) + cores_used(w, 1), 200);
}

/* ---- HAMi ------------------------------------------------------------------------------ */

/* A HAMi node with two V100s, carrying hami.io/mutex.lock: lock unless NULL. */
static void add_hami_node_locked(struct cluster_cache *c, const char *name, const char *lock)
{
    char buf[1024], lock_member[300] = "";
    if (lock)
        fmt(lock_member, sizeof(lock_member), "'hami.io/mutex.lock':'%s',", lock);
    fmt(buf, sizeof(buf),
        "{'kind':'Node','metadata':{'name':'%s','annotations':{%s'hami.io/node-nvidia-register':"
        "'GPU-a,10,32768,100,NVIDIA-V100,0,true,0,hami-core:GPU-b,10,32768,100,NVIDIA-V100,0,true,1,hami-core:'}},"
        "'status':{'allocatable':{'nvidia.com/gpu':'20'}}}",
        name, lock_member);
    apply_node_text(c, buf);
}

static void add_hami_node(struct cluster_cache *c, const char *name)
{
    add_hami_node_locked(c, name, NULL);
}

/* A vGPU container (3000 MiB, 30% cores) and a container without GPUs,
 * with these annotations (a JSON object's members, may be ""). */
static struct pod_info *vgpu_pod_annotated(const char *name, const char *uid, const char *annotations)
{
    char buf[1024];
    fmt(buf, sizeof(buf),
        "{'kind':'Pod','metadata':{'name':'%s','namespace':'t','uid':'%s','resourceVersion':'7','annotations':{%s}},"
        "'spec':{'containers':[{'name':'gpu','resources':{'limits':{'nvidia.com/gpu':'1',"
        "'nvidia.com/gpumem':'3000','nvidia.com/gpucores':'30'}}},{'name':'side'}]},'status':{'phase':'Pending'}}",
        name, uid, annotations);
    return pod_of_text(buf);
}

/* The same without annotations, in the cache as the watch delivers it. */
static struct pod_info *vgpu_pod(struct world *w, const char *name, const char *uid)
{
    struct pod_info *p = vgpu_pod_annotated(name, uid, "");
    watch_apply(&w->cache, pod_info_clone(p));
    return p;
}

/* Tasks on h1's HAMi devices, and MiB used on the last (the one a vGPU
 * goes to when both are empty: HAMi's Fit walks from the end). */
static int hami_tasks(struct world *w, int64_t *memory0)
{
    cache_read_lock(&w->cache);
    const struct node_state *n = cache_find_node(&w->cache, "h1");
    assert_non_null(n);
    assert_non_null(n->hami);
    int tasks = 0;
    for (int i = 0; i < n->hami->count; i++)
        tasks += n->hami->gpus[i].tasks;
    *memory0 = n->hami->gpus[n->hami->count - 1].memory_used;
    assert_int_equal(n->hami->unattributed.vgpus, 0);
    cache_unlock(&w->cache);
    return tasks;
}

#define STALE_ALLOCATION "'hami.io/vgpu-devices-allocated':'GPU-a,NVIDIA,3000,30:;;'"

/* Bind mode on a HAMi node: lock, decision with the devices and bind-phase
 * allocating (one PATCH), Binding, in that order; the reservation charges
 * the chosen device. The lock stays (HAMi's plugin releases it). */
static void test_hami_bind(void **state)
{
    struct world *w = *state;
    w->p.cfg.mode = PLACEMENT_BIND;
    add_hami_node(&w->cache, "h1");
    struct pod_info *a = vgpu_pod(w, "a", "uid-a");
    char *err = NULL;
    int64_t mem0 = 0;
    assert_int_equal(placement_bind(&w->p, "t", "a", "uid-a", "h1", &err), 0);
    assert_string_equal(w->steps, "lock record+phase bind");
    assert_string_equal(w->allocation, "GPU-b,NVIDIA,3000,30:;;");
    assert_true(w->locked);
    assert_int_equal(hami_tasks(w, &mem0), 1);
    assert_int_equal(mem0, 3000);
    pod_info_free(a);
}

/* A HAMi pod's bind would wait at a node whose lock another pod holds, or
 * where a HAMi bind of ours is on its way: such a node still fits but
 * scores lowest, so kube-scheduler's binpack moves on to another node. An
 * expired lock, or the pod's own, steers nothing. */
static void test_hami_busy_node_scores_lowest(void **state)
{
    struct world *w = *state;
    char held[128], expired[128], own[128];
    snprintf(held, sizeof(held), "%s,t,other", "2099-01-01T00:00:00Z");
    snprintf(expired, sizeof(expired), "%s,t,other", "2001-01-01T00:00:00Z");
    snprintf(own, sizeof(own), "%s,t,p", "2099-01-01T00:00:00Z");
    add_hami_node(&w->cache, "free");
    add_hami_node_locked(&w->cache, "held", held);
    add_hami_node_locked(&w->cache, "expired", expired);
    add_hami_node_locked(&w->cache, "own", own);
    add_hami_node(&w->cache, "binding");
    struct pod_info *p = vgpu_pod(w, "p", "uid-p");
    assert_int_equal(hamibusy_enter(&w->p.hami_busy, "binding"), 0);
    const char *names[] = {"free", "held", "expired", "own", "binding"};
    struct evaluation ev;
    assert_int_equal(placement_evaluate(&w->p, p, names, 5, &ev), 0);
    for (int i = 0; i < 5; i++)
        assert_true(ev.verdicts[i].fits);
    assert_true(ev.verdicts[0].score > 0);
    assert_int_equal(ev.verdicts[1].score, 0);
    assert_int_equal(ev.verdicts[2].score, ev.verdicts[0].score);
    assert_int_equal(ev.verdicts[3].score, ev.verdicts[0].score);
    assert_int_equal(ev.verdicts[4].score, 0);
    evaluation_free(&ev);

    hamibusy_leave(&w->p.hami_busy, "binding");
    assert_false(hamibusy_has(&w->p.hami_busy, "binding"));
    assert_int_equal(placement_evaluate(&w->p, p, names, 5, &ev), 0);
    assert_int_equal(ev.verdicts[4].score, ev.verdicts[0].score);
    evaluation_free(&ev);
    pod_info_free(p);
}

/* Every failure after the lock marks the pod failed, releases the lock and
 * takes the reservation back; a lock another pod holds past the bind's wait
 * is respected and nothing is written. */
static void test_hami_bind_failures(void **state)
{
    struct world *w = *state;
    w->p.cfg.mode = PLACEMENT_BIND;
    add_hami_node(&w->cache, "h1");
    struct pod_info *b = vgpu_pod(w, "b", "uid-b");
    char *err = NULL;
    int64_t mem0 = 0;

    w->lock_answer = 1; /* held throughout the bind's wait */
    assert_int_equal(placement_bind(&w->p, "t", "b", "uid-b", "h1", &err), -1);
    assert_non_null(strstr(err, "node is locked for HAMi"));
    assert_int_equal(strncmp(w->steps, "lock-refused lock-refused", 25), 0);
    assert_null(strstr(w->steps, "record"));
    assert_null(strstr(w->steps, "unlock"));
    assert_int_equal(hami_tasks(w, &mem0), 0);
    free(err);
    err = NULL;

    w->lock_answer = -1;
    reset_steps(w);
    assert_int_equal(placement_bind(&w->p, "t", "b", "uid-b", "h1", &err), -1);
    assert_string_equal(w->steps, "lock-refused unlock");
    assert_int_equal(hami_tasks(w, &mem0), 0);
    free(err);
    err = NULL;

    w->lock_answer = 0;
    w->fail_record = true; /* it may have landed: the pod is marked failed */
    reset_steps(w);
    assert_int_equal(placement_bind(&w->p, "t", "b", "uid-b", "h1", &err), -1);
    assert_non_null(strstr(err, "recording the decision"));
    assert_string_equal(w->steps, "lock record+phase failed unlock");
    assert_false(w->locked);
    assert_int_equal(hami_tasks(w, &mem0), 0);
    free(err);
    err = NULL;

    w->fail_record = false;
    w->fail_bind = true;
    reset_steps(w);
    assert_int_equal(placement_bind(&w->p, "t", "b", "uid-b", "h1", &err), -1);
    assert_non_null(strstr(err, "binding refused"));
    assert_string_equal(w->steps, "lock record+phase bind clear failed unlock");
    assert_false(w->locked);
    assert_int_equal(hami_tasks(w, &mem0), 0);
    free(err);
    pod_info_free(b);
}

/* Filter mode: the filter's decision carries the devices and charges them;
 * the bind of that assumption then takes the lock and marks the pod, and
 * writes no second decision. A vGPU pod decided on a whole-GPU node
 * carries no allocation. */
static void test_hami_filter_then_bind(void **state)
{
    struct world *w = *state;
    add_hami_node(&w->cache, "h1");
    struct pod_info *c = vgpu_pod(w, "c", "uid-c");
    const char *const names[] = {"h1"};
    struct evaluation ev;
    assert_int_equal(placement_filter(&w->p, c, names, 1, &ev), 0);
    expect_chosen(&ev, true);
    evaluation_free(&ev);
    assert_string_equal(w->allocation, "GPU-b,NVIDIA,3000,30:;;");
    int64_t mem0 = 0;
    assert_int_equal(hami_tasks(w, &mem0), 1);
    reset_steps(w);
    char *err = NULL;
    assert_int_equal(placement_bind(&w->p, "t", "c", "uid-c", "h1", &err), 0);
    assert_string_equal(w->steps, "lock allocating bind");
    assert_int_equal(hami_tasks(w, &mem0), 1);
    pod_info_free(c);
}

/* The watch delivers the pod again while its decision is being written,
 * still with an earlier attempt's allocation (GPU-a) and without the
 * decision: the reservation keeps the devices this decision chose (GPU-b). */
static void redeliver_stale(struct world *w)
{
    watch_apply(&w->cache, vgpu_pod_annotated("s", "uid-s", STALE_ALLOCATION));
}

static void test_hami_reservation_survives_update(void **state)
{
    struct world *w = *state;
    add_hami_node(&w->cache, "h1");
    struct pod_info *p = vgpu_pod_annotated("s", "uid-s", STALE_ALLOCATION);
    watch_apply(&w->cache, pod_info_clone(p));
    w->during_record = redeliver_stale;
    const char *const names[] = {"h1"};
    struct evaluation ev;
    assert_int_equal(placement_filter(&w->p, p, names, 1, &ev), 0);
    expect_chosen(&ev, true);
    evaluation_free(&ev);
    assert_string_equal(w->allocation, "GPU-b,NVIDIA,3000,30:;;");
    int64_t mem0 = 0;
    assert_int_equal(hami_tasks(w, &mem0), 1);
    assert_int_equal(mem0, 3000);
    pod_info_free(p);
}

/* A bind that finds the node lock held waits for it (bounded) instead of
 * failing at once: kube-scheduler would leave a refused pod among its
 * unschedulable pods long after HAMi's plugin released the lock. */
static void test_hami_bind_waits_for_lock(void **state)
{
    struct world *w = *state;
    w->p.cfg.mode = PLACEMENT_BIND;
    add_hami_node(&w->cache, "h1");
    char *err = NULL;
    struct pod_info *p = vgpu_pod(w, "p", "uid-p");
    w->lock_refusals = 2;
    assert_int_equal(placement_bind(&w->p, "t", "p", "uid-p", "h1", &err), 0);
    assert_null(err);
    assert_string_equal(w->steps, "lock-refused lock-refused lock record+phase bind");
    assert_true(w->locked);
    assert_false(hamibusy_has(&w->p.hami_busy, "h1")); /* the bind is over: the lock itself steers now */
    pod_info_free(p);

    /* Held for longer than the wait: the bind fails, nothing written. */
    p = vgpu_pod(w, "p2", "uid-p2");
    reset_steps(w);
    w->lock_refusals = 1000;
    assert_int_equal(placement_bind(&w->p, "t", "p2", "uid-p2", "h1", &err), -1);
    assert_non_null(strstr(err, "node is locked for HAMi"));
    assert_true(w->lock_refusals < 1000 - 1 && w->lock_refusals > 1000 - 20);
    int full_wait_tries = 1000 - w->lock_refusals;
    assert_null(strstr(w->steps, "record"));
    free(err);
    err = NULL;

    /* A bind whose answer is due sooner (it waited in the queue) stops
     * trying then: 120 ms leaves room for at most three tries (0, 50, 120). */
    reset_steps(w);
    w->lock_refusals = 1000;
    assert_int_equal(placement_bind_until(&w->p, "t", "p2", "uid-p2", "h1", clock_monotonic_ms() + 120, &err), -1);
    assert_non_null(strstr(err, "node is locked for HAMi"));
    assert_true(1000 - w->lock_refusals <= 3);
    assert_true(1000 - w->lock_refusals < full_wait_tries);
    free(err);
    pod_info_free(p);
}

/* Cancelling a reservation of a pod the cache did not hold removes it; a
 * token that no longer matches (the watch delivered the written decision)
 * changes nothing. */
static void test_cancel_reservation_exact(void **state)
{
    struct world *w = *state;
    struct pod_info *a = pod_of("a", "uid-a", "10", 60, 10);
    int idx0[] = {0}, count[] = {1};
    int *idx[] = {idx0};
    cache_write_lock(&w->cache);
    uint64_t token = cache_reserve_pod_locked(
        &w->cache, pod_info_with_decision(a, "n1", clock_realtime_ns(), idx, count), clock_realtime_ns());
    cache_unlock(&w->cache);
    assert_true(token != 0);
    assert_int_equal(cores_used(w, 0), 60);
    cache_cancel_reservation(&w->cache, "t/a", token);
    char uid[64], rv[64];
    assert_false(entry(w, "a", uid, rv, sizeof(uid)));
    assert_int_equal(cores_used(w, 0), 0);

    cache_write_lock(&w->cache);
    token = cache_reserve_pod_locked(&w->cache, pod_info_with_decision(a, "n1", clock_realtime_ns(), idx, count),
                                     clock_realtime_ns());
    cache_unlock(&w->cache);
    /* The watch delivers the decision as written: the reservation ends. */
    struct pod_info *written = pod_info_with_decision(a, "n1", clock_realtime_ns(), idx, count);
    free(written->resource_version);
    written->resource_version = strdup("11");
    watch_apply(&w->cache, written);
    cache_cancel_reservation(&w->cache, "t/a", token);
    assert_true(entry(w, "a", uid, rv, sizeof(uid)));
    assert_string_equal(rv, "11");
    assert_int_equal(cores_used(w, 0), 60);
    pod_info_free(a);
}

/* The resolved node list is remembered (kube-scheduler repeats it pod after
 * pod) but never outlives a node created or deleted, and a different list is
 * resolved afresh. */
static void expect_known(struct world *w, const struct pod_info *pod, const char *const *names, size_t n,
                         const bool *known)
{
    struct evaluation ev;
    assert_int_equal(placement_evaluate(&w->p, pod, names, n, &ev), 0);
    assert_false(ev.skip_gpus); /* explain shows each fitting node's GPUs */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ev.verdicts[i].known, known[i]);
        assert_int_equal(ev.verdicts[i].fits, known[i]);
        if (known[i])
            assert_int_equal(ev.gpus[ev.verdicts[i].gpus_off], 1); /* one GPU for the one container */
        if (!known[i])
            assert_string_equal(verdict_reason(&ev, &ev.verdicts[i]),
                                "node is not in the extender's cache (not yet seen, or deleted)");
    }
    evaluation_free(&ev);
}

/* The same, with the names handed over as wire.c collects them: back to
 * back in one block, each name pointing into it. */
static void expect_known_block(struct world *w, const struct pod_info *pod, const char *const *names, size_t n,
                               const bool *known)
{
    char block[256];
    const char *inside[8];
    size_t len = 0;
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(names[i]) + 1;
        assert_true(len + l <= sizeof block);
        memcpy(block + len, names[i], l);
        inside[i] = block + len;
        len += l;
    }
    struct evaluation ev;
    struct name_block b = {block, len, 0};
    assert_int_equal(placement_evaluate_block(&w->p, pod, inside, n, &b, &ev), 0);
    assert_true(ev.skip_gpus); /* the verbs' answers name no GPUs */
    assert_null(ev.gpus);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(ev.verdicts[i].name, names[i]);
        assert_int_equal(ev.verdicts[i].known, known[i]);
    }
    evaluation_free(&ev);
}

/* A repeated list given as a block is recognised with one comparison; a
 * block of the same length holding other names (or the same bytes cut at
 * other places), or names that do not point into the block, are not. */
static void test_resolved_block_follows_the_names(void **state)
{
    struct world *w = *state;
    struct pod_info *pod = pod_of("p", "u1", "1", 10, 1);
    add_vcuda_node(&w->cache, "ab", 2);
    add_vcuda_node(&w->cache, "c", 2);
    const char *const list[] = {"ab", "c", "n1"};
    expect_known_block(w, pod, list, 3, (const bool[]){true, true, true});
    expect_known_block(w, pod, list, 3, (const bool[]){true, true, true}); /* remembered */
    const char *const recut[] = {"a", "bc", "n1"};                         /* the same bytes, NULs elsewhere */
    expect_known_block(w, pod, recut, 3, (const bool[]){false, false, true});
    expect_known_block(w, pod, list, 3, (const bool[]){true, true, true});
    const char *const swapped[] = {"n1", "c", "ab"};
    expect_known_block(w, pod, swapped, 3, (const bool[]){true, true, true});
    /* The memo holds "n1 c ab"; a block with those bytes whose names point
     * elsewhere (here: string literals) is resolved by its names. */
    static const char same_bytes[] = "n1\0c\0ab";
    struct evaluation ev;
    const char *const elsewhere[] = {"ab", "n1", "zz"};
    struct name_block b = {same_bytes, sizeof same_bytes, 0};
    assert_int_equal(placement_evaluate_block(&w->p, pod, elsewhere, 3, &b, &ev), 0);
    assert_string_equal(ev.verdicts[0].name, "ab");
    assert_true(ev.verdicts[0].known && ev.verdicts[1].known && !ev.verdicts[2].known);
    evaluation_free(&ev);
    pod_info_free(pod);
}

/* A block with a serial is recognised by it (wire.c gives each parsed
 * NodeNames array one), and still not across a change of the nodes. */
static void test_resolved_block_by_serial(void **state)
{
    struct world *w = *state;
    struct pod_info *pod = pod_of("p", "u1", "1", 10, 1);
    add_vcuda_node(&w->cache, "a", 2);
    static const char bytes[] = "a\0b";
    const char *const names[] = {bytes, bytes + 2};
    struct name_block b = {bytes, sizeof bytes, 42};
    for (int round = 0; round < 3; round++) {
        if (round == 2)
            add_vcuda_node(&w->cache, "b", 2);
        struct evaluation ev;
        assert_int_equal(placement_evaluate_block(&w->p, pod, names, 2, &b, &ev), 0);
        assert_true(ev.verdicts[0].known);
        assert_int_equal(ev.verdicts[1].known, round == 2); /* round 1 from the memo, round 2 not */
        evaluation_free(&ev);
    }
    pod_info_free(pod);
}

static void test_resolved_names_follow_the_nodes(void **state)
{
    struct world *w = *state;
    struct pod_info *pod = pod_of("p", "u1", "1", 10, 1);
    add_vcuda_node(&w->cache, "n2", 2);
    const char *const list[] = {"n1", "n2", "n3"};
    expect_known(w, pod, list, 3, (const bool[]){true, true, false});
    expect_known(w, pod, list, 3, (const bool[]){true, true, false}); /* remembered */
    add_vcuda_node(&w->cache, "n3", 2);
    expect_known(w, pod, list, 3, (const bool[]){true, true, true});
    assert_int_equal(cache_delete_node(&w->cache, "n2"), 0);
    expect_known(w, pod, list, 3, (const bool[]){true, false, true});
    const char *const other[] = {"n3", "n1", "n2"}; /* same length, other order */
    expect_known(w, pod, other, 3, (const bool[]){true, true, false});
    const char *const longer[] = {"n1", "n3", "n2x"}; /* a name that only starts like another */
    expect_known(w, pod, longer, 3, (const bool[]){true, true, false});
    pod_info_free(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reserve_and_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_failure_undoes_exactly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reservation_survives_watch_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refilter_live_assumption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uid_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_flight_and_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_interested_pod_without_gpus, setup, teardown),

        cmocka_unit_test_setup_teardown(test_bind_one_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_bind_takes_no_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_reservation_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hami_bind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hami_bind_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hami_bind_waits_for_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hami_busy_node_scores_lowest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whole_gpu_bind_one_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hami_filter_then_bind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hami_reservation_survives_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolved_names_follow_the_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolved_block_by_serial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolved_block_follows_the_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
