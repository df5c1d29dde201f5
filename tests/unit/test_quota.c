/*
 * test_quota.c - unit tests for admission/quota.c (design.md section 6): the
 * quota ConfigMap's format (tkestack gpu-admission's JSON under
 * data.gpu_quota), every parse error with its exact message, lookup by
 * namespace, the per-node verdict quota_allows (pools, models, usage in
 * cores where a shared container counts cores/100, the exact reasons), and
 * the /inspect/quota JSON.
 *
 * JSON in this file is written with single quotes for readability; json_of()
 * turns them into double quotes. The gpu_quota text itself is JSON inside a
 * JSON string, so quota_cm() builds the ConfigMap with cJSON instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admission/quota.h"
#include "tests/unit/support.h"

/* ------------------------------------------------------------------ */

/* The ConfigMap kube-system/gpu-quota with data.gpu_quota = text (single
 * quotes turned into double quotes; stored as a JSON string). */
static cJSON *quota_cm(const char *text)
{
    cJSON *cm = json_of("{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'gpu-quota','namespace':'kube-system'},"
                  "'data':{}}");
    char *value = q(text);
    assert_non_null(cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(cm, "data"), "gpu_quota", value));
    free(value);
    return cm;
}

static struct quota_config *parse_ok(const cJSON *cm)
{
    char *err = (char *)"not reset";
    struct quota_config *qc = quota_parse_configmap(cm, &err);
    if (!qc)
        fail_msg("quota_parse_configmap failed: %s", err ? err : "(no message)");
    assert_null(err);
    return qc;
}

/* gpu_quota = text must be refused with exactly want. */
static void expect_error(const char *text, const char *want)
{
    cJSON *cm = quota_cm(text);
    char *err = NULL;
    struct quota_config *qc = quota_parse_configmap(cm, &err);
    if (qc) {
        quota_free(qc);
        fail_msg("gpu_quota %s was accepted; expected: %s", text, want);
    }
    assert_non_null(err);
    assert_string_equal(err, want);
    free(err);
    cJSON_Delete(cm);
}

static const struct quota_entry *find_ok(const struct quota_config *qc, const char *ns)
{
    const struct quota_entry *e = quota_find(qc, ns);
    if (!e)
        fail_msg("no quota entry for %s", ns);
    return e;
}

/* quota_allows with a reason buffer pre-filled with garbage, so a verdict
 * that forgets to write the reason shows. */
static bool allows(const struct quota_entry *e, const char *model, const char *pool, int64_t used, int64_t cores,
                   char *reason, size_t size)
{
    memset(reason, 'X', size);
    reason[size - 1] = '\0';
    return quota_allows(e, model, pool, used, cores, reason, size);
}

#define EXPECT_ALLOWED(e, model, pool, used, cores)                                                                 \
    do {                                                                                                           \
        char reason_[512];                                                                                         \
        bool ok_ = allows(e, model, pool, used, cores, reason_, sizeof(reason_));                                  \
        if (!ok_)                                                                                                  \
            fail_msg("refused: %s", reason_);                                                                      \
        assert_string_equal(reason_, "");                                                                          \
    } while (0)

#define EXPECT_REFUSED(e, model, pool, used, cores, want)                                                          \
    do {                                                                                                           \
        char reason_[512];                                                                                         \
        assert_false(allows(e, model, pool, used, cores, reason_, sizeof(reason_)));                               \
        assert_string_equal(reason_, want);                                                                        \
    } while (0)

/* The reference configuration most tests use. */
static const char *const REFERENCE =
    "{'team-a':{'pool':['public'],'quota':{'A100':1,'T4':2}},"
    "'team-b':{'pool':['public','private'],'quota':{'A100':4}},"
    "'team-c':{'pool':['public'],'quota':{}},"
    "'team-d':{'quota':{'V100':3}}}";

/* ------------------------------------------------------------------ */
/* Parsing                                                              */

static void test_parse_reference(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    assert_string_equal(qc->source, "kube-system/gpu-quota");
    assert_int_equal(qc->count, 4);

    const struct quota_entry *a = &qc->entries[0];
    assert_string_equal(a->namespace_, "team-a");
    assert_int_equal(a->npools, 1);
    assert_string_equal(a->pools[0], "public");
    assert_int_equal(a->nmodels, 2);
    assert_string_equal(a->models[0].model, "A100");
    assert_int_equal(a->models[0].gpus, 1);
    assert_string_equal(a->models[1].model, "T4");
    assert_int_equal(a->models[1].gpus, 2);

    const struct quota_entry *b = &qc->entries[1];
    assert_string_equal(b->namespace_, "team-b");
    assert_int_equal(b->npools, 2);
    assert_string_equal(b->pools[0], "public");
    assert_string_equal(b->pools[1], "private");
    assert_int_equal(b->nmodels, 1);
    assert_string_equal(b->models[0].model, "A100");
    assert_int_equal(b->models[0].gpus, 4);

    const struct quota_entry *c = &qc->entries[2];
    assert_string_equal(c->namespace_, "team-c");
    assert_int_equal(c->npools, 1);
    assert_int_equal(c->nmodels, 0);

    const struct quota_entry *d = &qc->entries[3];
    assert_string_equal(d->namespace_, "team-d");
    assert_int_equal(d->npools, 0);
    assert_int_equal(d->nmodels, 1);
    assert_string_equal(d->models[0].model, "V100");
    assert_int_equal(d->models[0].gpus, 3);

    quota_free(qc);
    cJSON_Delete(cm);
}

/* tkestack gpu-admission's own example shape, with whitespace and newlines
 * as a ConfigMap written by hand carries them. */
static void test_parse_tkestack_example(void **state)
{
    (void)state;
    cJSON *cm =
        quota_cm("{\n  'default': {\n    'pool': [ 'public' ],\n    'quota': { 'M40': 2, 'P100': 0 }\n  }\n}\n");
    struct quota_config *qc = parse_ok(cm);
    assert_int_equal(qc->count, 1);
    const struct quota_entry *e = find_ok(qc, "default");
    assert_int_equal(e->npools, 1);
    assert_string_equal(e->pools[0], "public");
    assert_int_equal(e->nmodels, 2);
    assert_string_equal(e->models[0].model, "M40");
    assert_int_equal(e->models[0].gpus, 2);
    assert_string_equal(e->models[1].model, "P100");
    assert_int_equal(e->models[1].gpus, 0);
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_parse_empty_and_absent(void **state)
{
    (void)state;
    /* No data at all, and data without the key: an empty (unrestricted) configuration. */
    const char *const shapes[] = {
        "{'metadata':{'name':'gpu-quota','namespace':'kube-system'}}",
        "{'metadata':{'name':'gpu-quota','namespace':'kube-system'},'data':{}}",
        "{'metadata':{'name':'gpu-quota','namespace':'kube-system'},'data':{'other':'x'}}",
        "{'metadata':{'name':'gpu-quota','namespace':'kube-system'},'data':null}",
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        cJSON *cm = json_of(shapes[i]);
        struct quota_config *qc = parse_ok(cm);
        assert_int_equal(qc->count, 0);
        assert_string_equal(qc->source, "kube-system/gpu-quota");
        assert_null(quota_find(qc, "default"));
        quota_free(qc);
        cJSON_Delete(cm);
    }

    /* An empty object of namespaces. */
    cJSON *cm = quota_cm("{}");
    struct quota_config *qc = parse_ok(cm);
    assert_int_equal(qc->count, 0);
    quota_free(qc);
    cJSON_Delete(cm);

    /* pool and quota both optional (null or absent): no pool restriction, no models. */
    cm = quota_cm("{'x':{},'y':{'pool':null,'quota':null}}");
    qc = parse_ok(cm);
    assert_int_equal(qc->count, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(qc->entries[i].npools, 0);
        assert_int_equal(qc->entries[i].nmodels, 0);
    }
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_parse_source_names_the_configmap(void **state)
{
    (void)state;
    cJSON *cm = json_of("{'metadata':{'name':'team-quota','namespace':'gpu-system'},'data':{'gpu_quota':'{}'}}");
    struct quota_config *qc = parse_ok(cm);
    assert_string_equal(qc->source, "gpu-system/team-quota");
    quota_free(qc);
    cJSON_Delete(cm);

    /* The errors are prefixed by that source too. */
    cm = json_of("{'metadata':{'name':'team-quota','namespace':'gpu-system'},'data':{'gpu_quota':'[]'}}");
    char *err = NULL;
    assert_null(quota_parse_configmap(cm, &err));
    assert_string_equal(err, "gpu-system/team-quota: data.gpu_quota is not a JSON object of namespaces");
    free(err);
    cJSON_Delete(cm);
}

static void test_parse_errors_document(void **state)
{
    (void)state;
    const char *want = "kube-system/gpu-quota: data.gpu_quota is not a JSON object of namespaces";
    expect_error("", want);
    expect_error("not json", want);
    expect_error("{'team-a':", want);
    expect_error("[]", want);
    expect_error("[{'team-a':{}}]", want);
    expect_error("42", want);
    expect_error("'team-a'", want);
    expect_error("null", want);

    /* data.gpu_quota present but not a string. */
    const char *const not_string[] = {
        "{'metadata':{'name':'gpu-quota','namespace':'kube-system'},'data':{'gpu_quota':42}}",
        "{'metadata':{'name':'gpu-quota','namespace':'kube-system'},'data':{'gpu_quota':{'team-a':{}}}}",
        "{'metadata':{'name':'gpu-quota','namespace':'kube-system'},'data':{'gpu_quota':null}}",
    };
    for (size_t i = 0; i < sizeof(not_string) / sizeof(not_string[0]); i++) {
        cJSON *cm = json_of(not_string[i]);
        char *err = NULL;
        struct quota_config *qc = quota_parse_configmap(cm, &err);
        assert_null(qc);
        assert_non_null(err);
        assert_string_equal(err, want);
        free(err);
        cJSON_Delete(cm);
    }
}

static void test_parse_errors_entries(void **state)
{
    (void)state;
    expect_error("{'team-a':[]}",
                 "kube-system/gpu-quota: team-a: the entry must be an object with \"pool\" and \"quota\"");
    expect_error("{'team-a':'public'}",
                 "kube-system/gpu-quota: team-a: the entry must be an object with \"pool\" and \"quota\"");
    expect_error("{'team-a':null}",
                 "kube-system/gpu-quota: team-a: the entry must be an object with \"pool\" and \"quota\"");
    /* The first bad entry is named, even after good ones. */
    expect_error("{'ok':{'pool':['public'],'quota':{'A100':1}},'team-b':7}",
                 "kube-system/gpu-quota: team-b: the entry must be an object with \"pool\" and \"quota\"");
}

static void test_parse_errors_pools(void **state)
{
    (void)state;
    const char *list = "kube-system/gpu-quota: team-a: \"pool\" must be a list of pool names";
    expect_error("{'team-a':{'pool':'public','quota':{'A100':1}}}", list);
    expect_error("{'team-a':{'pool':{'public':true},'quota':{'A100':1}}}", list);
    expect_error("{'team-a':{'pool':3}}", list);

    const char *entries = "kube-system/gpu-quota: team-a: \"pool\" entries must be non-empty strings";
    expect_error("{'team-a':{'pool':[''],'quota':{'A100':1}}}", entries);
    expect_error("{'team-a':{'pool':['public',7],'quota':{'A100':1}}}", entries);
    expect_error("{'team-a':{'pool':[null]}}", entries);
    expect_error("{'team-a':{'pool':[['public']]}}", entries);
}

static void test_parse_errors_quota(void **state)
{
    (void)state;
    const char *map = "kube-system/gpu-quota: team-a: \"quota\" must map GPU models to whole GPUs";
    expect_error("{'team-a':{'pool':['public'],'quota':['A100']}}", map);
    expect_error("{'team-a':{'pool':['public'],'quota':4}}", map);
    expect_error("{'team-a':{'quota':'A100=4'}}", map);

    const char *whole = "kube-system/gpu-quota: team-a: quota for model A100 must be a whole number of GPUs";
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':1.5}}}", whole);
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':-1}}}", whole);
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':'4'}}}", whole);
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':null}}}", whole);
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':true}}}", whole);
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':{'gpus':4}}}}", whole);
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':1000001}}}", whole);
    expect_error("{'team-a':{'pool':['public'],'quota':{'A100':1e300}}}", whole);
    /* The model that is wrong is the one named. */
    expect_error("{'team-a':{'quota':{'A100':1,'T4':0.25}}}",
                 "kube-system/gpu-quota: team-a: quota for model T4 must be a whole number of GPUs");

    /* The bounds that are accepted: 0, a million, and 2.0 (a whole number written as a float). */
    cJSON *cm = quota_cm("{'team-a':{'quota':{'A100':0,'H100':1000000,'T4':2.0}}}");
    struct quota_config *qc = parse_ok(cm);
    const struct quota_entry *e = find_ok(qc, "team-a");
    assert_int_equal(e->nmodels, 3);
    assert_int_equal(e->models[0].gpus, 0);
    assert_int_equal(e->models[1].gpus, 1000000);
    assert_int_equal(e->models[2].gpus, 2);
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_find(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    assert_ptr_equal(quota_find(qc, "team-a"), &qc->entries[0]);
    assert_ptr_equal(quota_find(qc, "team-d"), &qc->entries[3]);
    assert_null(quota_find(qc, "team"));
    assert_null(quota_find(qc, "team-a "));
    assert_null(quota_find(qc, "TEAM-A"));
    assert_null(quota_find(qc, ""));
    assert_null(quota_find(NULL, "team-a"));
    quota_free(qc);
    quota_free(NULL);
    cJSON_Delete(cm);
}

/* ------------------------------------------------------------------ */
/* quota_allows                                                         */

static void test_allows_within_quota(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    const struct quota_entry *a = find_ok(qc, "team-a");
    EXPECT_ALLOWED(a, "A100", "public", 0, 30);      /* a share: 0.30 GPU */
    EXPECT_ALLOWED(a, "A100", "public", 0, 100);     /* one whole GPU of 1 */
    EXPECT_ALLOWED(a, "A100", "public", 80, 20);     /* exactly the quota */
    EXPECT_ALLOWED(a, "A100", "public", 99, 1);
    EXPECT_ALLOWED(a, "T4", "public", 150, 50);      /* models are counted apart */
    EXPECT_ALLOWED(a, "T4", "public", 0, 200);

    const struct quota_entry *b = find_ok(qc, "team-b");
    EXPECT_ALLOWED(b, "A100", "private", 0, 400);
    EXPECT_ALLOWED(b, "A100", "public", 350, 50);
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_allows_over_quota(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    const struct quota_entry *a = find_ok(qc, "team-a");
    /* Over by one shared pod: 0.8 in use, a 30-core share asks for 0.3 more. */
    EXPECT_REFUSED(a, "A100", "public", 80, 30,
                   "namespace team-a uses 0.80 of its 1 A100 GPUs; the pod needs 0.30 more (over by 0.10)");
    /* By a single core. */
    EXPECT_REFUSED(a, "A100", "public", 80, 21,
                   "namespace team-a uses 0.80 of its 1 A100 GPUs; the pod needs 0.21 more (over by 0.01)");
    EXPECT_REFUSED(a, "A100", "public", 100, 5,
                   "namespace team-a uses 1 of its 1 A100 GPUs; the pod needs 0.05 more (over by 0.05)");
    /* Whole GPUs: 200 cores are 2 GPUs. */
    EXPECT_REFUSED(a, "A100", "public", 0, 200,
                   "namespace team-a uses 0 of its 1 A100 GPUs; the pod needs 2 more (over by 1)");
    EXPECT_REFUSED(a, "T4", "public", 150, 100,
                   "namespace team-a uses 1.50 of its 2 T4 GPUs; the pod needs 1 more (over by 0.50)");

    const struct quota_entry *b = find_ok(qc, "team-b");
    EXPECT_REFUSED(b, "A100", "private", 350, 105,
                   "namespace team-b uses 3.50 of its 4 A100 GPUs; the pod needs 1.05 more (over by 0.55)");
    /* Already over (the quota was lowered while pods ran): still refused, by what it would be. */
    EXPECT_REFUSED(b, "A100", "private", 500, 100,
                   "namespace team-b uses 5 of its 4 A100 GPUs; the pod needs 1 more (over by 2)");

    /* A quota of 0 GPUs for a model refuses even the smallest share. */
    cJSON *zero_cm = quota_cm("{'team-z':{'pool':['public'],'quota':{'A100':0}}}");
    struct quota_config *zero = parse_ok(zero_cm);
    EXPECT_REFUSED(find_ok(zero, "team-z"), "A100", "public", 0, 1,
                   "namespace team-z uses 0 of its 0 A100 GPUs; the pod needs 0.01 more (over by 0.01)");
    quota_free(zero);
    cJSON_Delete(zero_cm);
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_allows_pools(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    const struct quota_entry *a = find_ok(qc, "team-a");
    EXPECT_REFUSED(a, "A100", "private", 0, 30,
                   "namespace team-a may use GPU pools [public]; this node is in pool private");
    EXPECT_REFUSED(a, "A100", NULL, 0, 30, "namespace team-a may use GPU pools [public]; this node is in no pool");
    EXPECT_REFUSED(a, "A100", "Public", 0, 30,
                   "namespace team-a may use GPU pools [public]; this node is in pool Public");
    /* The pool rule comes first: a node outside the pools is refused for that
     * even when the model has no quota or the quota is used up. */
    EXPECT_REFUSED(a, "V100", "private", 0, 30,
                   "namespace team-a may use GPU pools [public]; this node is in pool private");
    EXPECT_REFUSED(a, "A100", "private", 100, 30,
                   "namespace team-a may use GPU pools [public]; this node is in pool private");

    const struct quota_entry *b = find_ok(qc, "team-b");
    EXPECT_ALLOWED(b, "A100", "public", 0, 30);
    EXPECT_ALLOWED(b, "A100", "private", 0, 30);
    EXPECT_REFUSED(b, "A100", "spot", 0, 30,
                   "namespace team-b may use GPU pools [public, private]; this node is in pool spot");
    EXPECT_REFUSED(b, "A100", NULL, 0, 30,
                   "namespace team-b may use GPU pools [public, private]; this node is in no pool");

    /* No pool list: every pool, and nodes without one. */
    const struct quota_entry *d = find_ok(qc, "team-d");
    EXPECT_ALLOWED(d, "V100", "public", 0, 100);
    EXPECT_ALLOWED(d, "V100", "anything", 0, 100);
    EXPECT_ALLOWED(d, "V100", NULL, 0, 100);
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_allows_missing_model(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    const struct quota_entry *a = find_ok(qc, "team-a");
    EXPECT_REFUSED(a, "V100", "public", 0, 30,
                   "namespace team-a has no GPU quota for model V100 (its quota names: A100 T4)");
    /* Models match exactly. */
    EXPECT_REFUSED(a, "a100", "public", 0, 30,
                   "namespace team-a has no GPU quota for model a100 (its quota names: A100 T4)");
    /* A node without the model label. */
    EXPECT_REFUSED(a, NULL, "public", 0, 30,
                   "namespace team-a has no GPU quota for model (node has no model label) (its quota names: A100 T4)");
    EXPECT_REFUSED(a, "", "public", 0, 30,
                   "namespace team-a has no GPU quota for model (node has no model label) (its quota names: A100 T4)");
    /* An entry with an empty quota map: no GPU model at all. */
    const struct quota_entry *c = find_ok(qc, "team-c");
    EXPECT_REFUSED(c, "A100", "public", 0, 30,
                   "namespace team-c has no GPU quota for model A100 (its quota names: none)");
    quota_free(qc);
    cJSON_Delete(cm);

    /* An entry with no "quota" member at all: pools only, still no model. */
    cm = quota_cm("{'team-p':{'pool':['public']}}");
    qc = parse_ok(cm);
    EXPECT_REFUSED(find_ok(qc, "team-p"), "A100", "public", 0, 100,
                   "namespace team-p has no GPU quota for model A100 (its quota names: none)");
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_allows_reason_buffer(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    const struct quota_entry *a = find_ok(qc, "team-a");
    /* A short buffer: truncated, still terminated, the verdict unchanged. */
    char small[16];
    assert_false(allows(a, "A100", "private", 0, 30, small, sizeof(small)));
    assert_string_equal(small, "namespace team-");
    assert_true(allows(a, "A100", "public", 0, 30, small, sizeof(small)));
    assert_string_equal(small, "");
    char one[1] = {'X'};
    assert_false(quota_allows(a, "A100", "public", 80, 30, one, sizeof(one)));
    assert_int_equal(one[0], '\0');
    quota_free(qc);
    cJSON_Delete(cm);
}

/* ------------------------------------------------------------------ */
/* quota_render (/inspect/quota)                                        */

struct usage_row {
    const char *ns, *model;
    int64_t cores;
};

struct usage_table {
    const struct usage_row *rows;
    size_t n;
    int calls;
};

static int64_t usage_of(void *ctx, const char *ns, const char *model)
{
    struct usage_table *t = ctx;
    t->calls++;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].ns, ns) == 0 && strcmp(t->rows[i].model, model) == 0)
            return t->rows[i].cores;
    return 0;
}

static void test_render(void **state)
{
    (void)state;
    cJSON *cm = quota_cm(REFERENCE);
    struct quota_config *qc = parse_ok(cm);
    const struct usage_row rows[] = {{"team-a", "A100", 80}, {"team-a", "T4", 150}, {"team-b", "A100", 350},
                                     {"team-x", "A100", 999}};
    struct usage_table t = {rows, sizeof(rows) / sizeof(rows[0]), 0};
    char *text = quota_render(qc, NULL, usage_of, &t);
    assert_non_null(text);
    char *want = q(
        "{'source':'kube-system/gpu-quota','error':'','namespaces':["
        "{'namespace':'team-a','pools':['public'],'models':[{'model':'A100','quotaGpus':1,'usedCores':80},"
        "{'model':'T4','quotaGpus':2,'usedCores':150}]},"
        "{'namespace':'team-b','pools':['public','private'],'models':[{'model':'A100','quotaGpus':4,'usedCores':350}]},"
        "{'namespace':'team-c','pools':['public'],'models':[]},"
        "{'namespace':'team-d','pools':[],'models':[{'model':'V100','quotaGpus':3,'usedCores':0}]}]}\n");
    assert_string_equal(text, want);
    assert_int_equal(t.calls, 4);   /* once per (namespace, model) of the quota */
    cJSON *parsed = cJSON_Parse(text);
    assert_non_null(parsed);
    cJSON_Delete(parsed);
    free(want);
    free(text);
    quota_free(qc);
    cJSON_Delete(cm);
}

static void test_render_without_quota(void **state)
{
    (void)state;
    struct usage_table t = {NULL, 0, 0};
    char *text = quota_render(NULL, NULL, usage_of, &t);
    assert_string_equal(text, "{\"source\":\"\",\"error\":\"\",\"namespaces\":[]}\n");
    free(text);

    /* The reason the ConfigMap is not used, escaped as JSON. */
    text = quota_render(NULL, "kube-system/gpu-quota: team-a: \"pool\" must be a list of pool names", usage_of, &t);
    assert_string_equal(text, "{\"source\":\"\",\"error\":\"kube-system/gpu-quota: team-a: \\\"pool\\\" must be a "
                              "list of pool names\",\"namespaces\":[]}\n");
    free(text);
    assert_int_equal(t.calls, 0);
}

/* Names from the ConfigMap reach the JSON escaped. */
static void test_render_escapes(void **state)
{
    (void)state;
    cJSON *cm = json_of("{'metadata':{'name':'q','namespace':'ns'},'data':{}}");
    assert_non_null(cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(cm, "data"), "gpu_quota",
                                            "{\"a\\\"b\":{\"pool\":[\"p\\\\1\"],\"quota\":{\"M\\n1\":1}}}"));
    struct quota_config *qc = parse_ok(cm);
    const struct quota_entry *e = find_ok(qc, "a\"b");
    assert_string_equal(e->pools[0], "p\\1");
    assert_string_equal(e->models[0].model, "M\n1");
    struct usage_table t = {NULL, 0, 0};
    char *text = quota_render(qc, NULL, usage_of, &t);
    assert_string_equal(text, "{\"source\":\"ns/q\",\"error\":\"\",\"namespaces\":[{\"namespace\":\"a\\\"b\","
                              "\"pools\":[\"p\\\\1\"],\"models\":[{\"model\":\"M\\n1\",\"quotaGpus\":1,"
                              "\"usedCores\":0}]}]}\n");
    free(text);
    quota_free(qc);
    cJSON_Delete(cm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_reference),
        cmocka_unit_test(test_parse_tkestack_example),
        cmocka_unit_test(test_parse_empty_and_absent),
        cmocka_unit_test(test_parse_source_names_the_configmap),
        cmocka_unit_test(test_parse_errors_document),
        cmocka_unit_test(test_parse_errors_entries),
        cmocka_unit_test(test_parse_errors_pools),
        cmocka_unit_test(test_parse_errors_quota),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_allows_within_quota),
        cmocka_unit_test(test_allows_over_quota),
        cmocka_unit_test(test_allows_pools),
        cmocka_unit_test(test_allows_missing_model),
        cmocka_unit_test(test_allows_reason_buffer),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_render_without_quota),
        cmocka_unit_test(test_render_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
