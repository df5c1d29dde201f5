/*
 * test_crl.c - unit tests for admission/crl.c: CRL validation (one fixture
 * per rule under tests/fixtures/crl, each breaking only that rule), the
 * registry (duplicate keys, name order, what is ignored), enforcement on
 * pods, defaults, and the RFC 6902 patch (checked as text and by applying it
 * with a tiny "add" applier).
 *
 * Fixtures are found through GQA_SOURCE_DIR (the repository root; "." when
 * unset). JSON in this file is written with single quotes for readability;
 * json_of() turns them into double quotes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "admission/crl.h"
#include "lib/strbuf.h"
#include "lib/yamljson.h"
#include "tests/unit/support.h"

#define NS "kube-public"

/* ------------------------------------------------------------------ */
/* Helpers                                                              */

static cJSON *load_fixture(const char *file)
{
    const char *root = getenv("GQA_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/fixtures/crl/%s", root ? root : ".", file);
    if (access(path, R_OK) != 0)
        fail_msg("%s is not readable (set GQA_SOURCE_DIR to the repository root)", path);
    struct strbuf sb;
    strbuf_init(&sb);
    assert_int_equal(strbuf_read_file(&sb, path), 0);
    char *err = NULL;
    cJSON *doc = yaml_to_json(sb.data, sb.len, &err);
    if (!doc)
        fail_msg("%s: %s", path, err ? err : "out of memory");
    strbuf_free(&sb);
    return doc;
}

/* A CRL ConfigMap with the given fields (enabled). */
static cJSON *make_crl(const char *name, const char *group, const char *key, const char *limits, const char *requests,
                       const char *def)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{'metadata':{'name':'%s','namespace':'kube-public','labels':{"
             "'features.alauda.io/type':'CustomResourceLimitation','features.alauda.io/group':'%s',"
             "'features.alauda.io/enabled':'true'}},"
             "'data':{'key':'%s','dataType':'integer','defaultValue':'%s','group':'%s','limits':'%s','requests':'%s'}}",
             name, group, key, def, group, limits, requests);
    return json_of(text);
}

static void set_data(cJSON *cm, const char *member, const char *value)
{
    cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    assert_true(cJSON_ReplaceItemInObjectCaseSensitive(data, member, cJSON_CreateString(value)));
}

static void set_name(cJSON *cm, const char *value)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(cm, "metadata");
    assert_true(cJSON_ReplaceItemInObjectCaseSensitive(meta, "name", cJSON_CreateString(value)));
}

static void assert_problems(const struct crl_problems *p, const char *const *want, size_t n)
{
    assert_false(p->failed);
    for (size_t i = 0; i < p->count && i < n; i++)
        assert_string_equal(p->items[i], want[i]);
    if (p->count != n) {
        for (size_t i = 0; i < p->count; i++)
            print_message("problem %zu: %s\n", i, p->items[i]);
        fail_msg("%zu problems, expected %zu", p->count, n);
    }
}

/* The problems of one ConfigMap on its own; NULL-terminated want. */
static void expect_problems(const cJSON *cm, const char *const *want)
{
    size_t n = 0;
    while (want[n])
        n++;
    struct crl_problems p = {0};
    struct crl *c = crl_parse(cm, NS, &p);
    assert_problems(&p, want, n);
    if (n)
        assert_null(c);
    else
        assert_non_null(c);
    crl_free(c);
    crl_problems_free(&p);
}

#define EXPECT_PROBLEMS(cm, ...) expect_problems(cm, (const char *const[]){__VA_ARGS__, NULL})
#define EXPECT_VALID(cm) expect_problems(cm, (const char *const[]){NULL})

static struct crl_registry *registry_of(cJSON **cms, size_t n)
{
    struct crl_registry *r = crl_registry_build((const cJSON *const *)cms, n, NS);
    assert_non_null(r);
    return r;
}

/* ------------------------------------------------------------------ */
/* Validation                                                           */

static void test_reference_validates(void **state)
{
    (void)state;
    cJSON *cm = load_fixture("valid-vcuda-core.yaml");
    assert_true(crl_is_candidate(cm, NS));
    struct crl_problems p = {0};
    struct crl *c = crl_parse(cm, NS, &p);
    assert_int_equal(p.count, 0);
    assert_non_null(c);
    assert_string_equal(c->name, "cf-crl-gpu-manager-vcuda-core");
    assert_string_equal(c->group, "gpu-manager");
    assert_string_equal(c->key, "tencent.com/vcuda-core");
    assert_string_equal(c->default_value, "20");
    assert_int_equal(c->limits, CRL_LIMITS_OPTIONAL);
    assert_int_equal(c->requests, CRL_REQUESTS_DISABLED);
    assert_true(c->enabled);
    crl_free(c);
    cJSON_Delete(cm);
}

static void test_vcuda_memory_validates(void **state)
{
    (void)state;
    cJSON *cm = load_fixture("valid-vcuda-memory.yaml");
    struct crl_problems p = {0};
    struct crl *c = crl_parse(cm, NS, &p);
    assert_int_equal(p.count, 0);
    assert_non_null(c);
    assert_string_equal(c->name, "cf-crl-gpu-manager-vcuda-memory");
    assert_string_equal(c->group, "gpu-manager");
    assert_string_equal(c->key, "tencent.com/vcuda-memory");
    assert_string_equal(c->default_value, "4");
    assert_int_equal(c->limits, CRL_LIMITS_OPTIONAL);
    assert_int_equal(c->requests, CRL_REQUESTS_DISABLED);
    crl_free(c);
    cJSON_Delete(cm);
}

static void test_disabled_crl_validates(void **state)
{
    (void)state;
    cJSON *cm = load_fixture("valid-disabled-vcuda-core.yaml");
    struct crl_problems p = {0};
    struct crl *c = crl_parse(cm, NS, &p);
    assert_int_equal(p.count, 0);
    assert_non_null(c);
    assert_false(c->enabled);
    crl_free(c);
    cJSON_Delete(cm);
}

static void test_json_list_fixture(void **state)
{
    (void)state;
    cJSON *list = load_fixture("valid-group-gpu-manager.json");
    cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
    cJSON *cms[2] = {cJSON_GetArrayItem(items, 0), cJSON_GetArrayItem(items, 1)};
    struct crl_registry *r = registry_of(cms, 2);
    assert_int_equal(r->count, 2);
    assert_int_equal(r->invalid_count, 0);
    assert_string_equal(r->crls[0]->name, "cf-crl-gpu-manager-vcuda-core");
    assert_string_equal(r->crls[1]->name, "cf-crl-gpu-manager-vcuda-memory");
    crl_registry_free(r);
    cJSON_Delete(list);
}

/* Each fixture breaks exactly one rule of the reference CRL. */
static const struct {
    const char *file;
    const char *message;
} one_rule[] = {
    {"invalid-namespace.yaml", "metadata.namespace: \"default\" is not the CRL namespace \"kube-public\""},
    {"invalid-name-prefix.yaml",
     "metadata.name: \"gpu-manager-vcuda-core\" does not match cf-crl-<customName>-<keyName>"},
    {"invalid-name-keyname.yaml", "metadata.name: \"cf-crl-gpu-manager-vcuda-cores\" does not end in \"-vcuda-core\", "
                                  "the keyName of data.key \"tencent.com/vcuda-core\""},
    {"invalid-name-custom-empty.yaml",
     "metadata.name: \"cf-crl-vcuda-core\" has an empty customName (expected cf-crl-<customName>-vcuda-core)"},
    {"invalid-label-type-missing.yaml",
     "label features.alauda.io/type: missing (must be \"CustomResourceLimitation\")"},
    {"invalid-label-type.yaml",
     "label features.alauda.io/type: \"ResourceLimitation\" is not \"CustomResourceLimitation\""},
    {"invalid-label-group-missing.yaml", "label features.alauda.io/group: missing"},
    {"invalid-label-group-empty.yaml", "label features.alauda.io/group: must not be empty"},
    {"invalid-label-enabled.yaml", "label features.alauda.io/enabled: \"yes\" is not \"true\" or \"false\""},
    {"invalid-label-enabled-missing.yaml", "label features.alauda.io/enabled: missing (must be \"true\" or \"false\")"},
    {"invalid-group-mismatch.yaml",
     "data.group: \"gpu\" differs from label features.alauda.io/group \"gpu-manager\""},
    {"invalid-key.yaml", "data.key: \"vcuda-core\" is not a valid extended resource name: it has no domain prefix "
                         "(as in example.com/name), so it names a native resource"},
    {"invalid-key-native.yaml", "data.key: \"gpu.kubernetes.io/vcuda-core\" is not a valid extended resource name: "
                                "names in the kubernetes.io/ domain are native resources"},
    {"invalid-datatype.yaml", "data.dataType: \"float\" is not one of integer"},
    {"invalid-limits.yaml", "data.limits: \"sometimes\" is not one of disabled, required, optional"},
    {"invalid-requests.yaml", "data.requests: \"always\" is not one of disabled, required, fromLimits"},
    {"invalid-default-fraction.yaml",
     "data.defaultValue: \"1.5\" is not an integer quantity: quantity is not a whole number"},
    {"invalid-default-empty.yaml",
     "data.defaultValue: empty, but limits: optional needs a default (containers without the key take it)"},
    {"invalid-disabled-fromlimits.yaml",
     "data.limits \"disabled\" with data.requests \"fromLimits\": requests cannot come from disabled limits"},
    {"invalid-not-string.yaml", "data.defaultValue: must be a string, not a number"},
};

static void test_one_rule_per_fixture(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(one_rule) / sizeof(one_rule[0]); i++) {
        print_message("%s\n", one_rule[i].file);
        cJSON *cm = load_fixture(one_rule[i].file);
        assert_true(crl_is_candidate(cm, NS) || strcmp(one_rule[i].file, "invalid-namespace.yaml") == 0);
        EXPECT_PROBLEMS(cm, one_rule[i].message);
        cJSON_Delete(cm);
    }
}

/* data.key against Kubernetes' IsExtendedResourceName; the name is kept
 * consistent with the key so only the key rule can fail. */
static void test_key_rules(void **state)
{
    (void)state;
    static const char *const no_prefix = "it has no domain prefix (as in example.com/name), so it names a native "
                                         "resource";
    static const char *const native = "names in the kubernetes.io/ domain are native resources";
    static const char *const quota = "the \"requests.\" prefix is reserved for resource quotas";
    static const char *const slashes = "a qualified name has at most one '/'";
    static const char *const domain = "its domain prefix must be a lower-case DNS-1123 subdomain of at most 244 "
                                      "characters";
    static const char *const part = "its name part must be 1 to 63 characters of [A-Za-z0-9_.-] that start and end "
                                    "with a letter or digit";
    char d244[300], d245[300], n63[100], n64[100];
    memset(d244, 'a', 244);
    strcpy(d244 + 244, "/x");
    memset(d245, 'a', 245);
    strcpy(d245 + 245, "/x");
    strcpy(n63, "example.com/");
    memset(n63 + 12, 'n', 63);
    n63[75] = '\0';
    strcpy(n64, n63);
    strcat(n64, "n");
    const struct {
        const char *key, *why;
    } rows[] = {
        {"tencent.com/vcuda-core", NULL},
        {"nvidia.com/gpu", NULL},
        {"a.b-c.d9/X_y.Z", NULL},
        {"example.com/a", NULL},
        {d244, NULL},
        {n63, NULL},
        {"vcuda-core", no_prefix},
        {"kubernetes.io/gpu", native},
        {"node.kubernetes.io/gpu", native},
        {"requests.example.com/gpu", quota},
        {"a.com/b/c", slashes},
        {"Tencent.com/gpu", domain},
        {"/gpu", domain},
        {"-a.com/gpu", domain},
        {"a-.com/gpu", domain},
        {"a..com/gpu", domain},
        {"a.com./gpu", domain},
        {"a_b.com/gpu", domain},
        {d245, domain},
        {"example.com/", part},
        {"example.com/-gpu", part},
        {"example.com/gpu.", part},
        {"example.com/g~u", part},
        {n64, part},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        print_message("key %s\n", rows[i].key);
        cJSON *cm = make_crl("x", "g", "x", "optional", "disabled", "1");
        /* cf-crl-t-<keyName>, keyName derived as design.md section 7 says. */
        char name[200] = "cf-crl-t-";
        const char *slash = strrchr(rows[i].key, '/');
        size_t at = strlen(name);
        for (const char *k = slash ? slash + 1 : rows[i].key; *k; k++)
            name[at++] = (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '-' ? *k : '-';
        name[at] = '\0';
        set_name(cm, name);
        set_data(cm, "key", rows[i].key);
        if (rows[i].why) {
            char msg[1024];
            snprintf(msg, sizeof(msg), "data.key: \"%s\" is not a valid extended resource name: %s", rows[i].key,
                     rows[i].why);
            EXPECT_PROBLEMS(cm, msg);
        } else {
            EXPECT_VALID(cm);
        }
        cJSON_Delete(cm);
    }
}

static void test_name_rules(void **state)
{
    (void)state;
    cJSON *cm = make_crl("cf-crl--vcuda-core", "g", "tencent.com/vcuda-core", "optional", "disabled", "1");
    EXPECT_PROBLEMS(cm, "metadata.name: \"cf-crl--vcuda-core\" has an empty customName "
                        "(expected cf-crl-<customName>-vcuda-core)");
    cJSON_Delete(cm);
    /* customName may itself contain dashes. */
    cm = make_crl("cf-crl-a-b-c-vcuda-core", "g", "tencent.com/vcuda-core", "optional", "disabled", "1");
    EXPECT_VALID(cm);
    cJSON_Delete(cm);
    /* "xvcuda-core" ends in the keyName but not in "-" + keyName. */
    cm = make_crl("cf-crl-gpu-xvcuda-core", "g", "tencent.com/vcuda-core", "optional", "disabled", "1");
    EXPECT_PROBLEMS(cm, "metadata.name: \"cf-crl-gpu-xvcuda-core\" does not end in \"-vcuda-core\", the keyName of "
                        "data.key \"tencent.com/vcuda-core\"");
    cJSON_Delete(cm);
    cm = make_crl("cf-crl-", "g", "tencent.com/vcuda-core", "optional", "disabled", "1");
    EXPECT_PROBLEMS(cm, "metadata.name: \"cf-crl-\" does not end in \"-vcuda-core\", the keyName of data.key "
                        "\"tencent.com/vcuda-core\"");
    cJSON_Delete(cm);
}

static void test_enum_and_default_values(void **state)
{
    (void)state;
    static const char *const limits[] = {"disabled", "required", "optional"};
    static const char *const requests[] = {"disabled", "required", "fromLimits"};
    for (int l = 0; l < 3; l++)
        for (int q = 0; q < 3; q++) {
            cJSON *cm = make_crl("cf-crl-g-gpu", "g", "nvidia.com/gpu", limits[l], requests[q], "1");
            struct crl_problems p = {0};
            struct crl *c = crl_parse(cm, NS, &p);
            bool contradiction = l == CRL_LIMITS_DISABLED && q == CRL_REQUESTS_FROM_LIMITS;
            assert_int_equal(p.count, contradiction ? 1 : 0);
            if (!contradiction) {
                assert_int_equal(c->limits, l);
                assert_int_equal(c->requests, q);
            }
            crl_free(c);
            crl_problems_free(&p);
            cJSON_Delete(cm);
        }
    /* Empty defaults are fine where they are never used. */
    cJSON *cm = make_crl("cf-crl-g-gpu", "g", "nvidia.com/gpu", "required", "disabled", "");
    struct crl_problems p = {0};
    struct crl *c = crl_parse(cm, NS, &p);
    assert_non_null(c);
    assert_null(c->default_value);
    crl_free(c);
    cJSON_Delete(cm);
    /* Quantities, not just digits. */
    cm = make_crl("cf-crl-g-gpu", "g", "nvidia.com/gpu", "optional", "disabled", "1k");
    EXPECT_VALID(cm);
    set_data(cm, "defaultValue", "2Ki");
    EXPECT_VALID(cm);
    set_data(cm, "defaultValue", "500m");
    EXPECT_PROBLEMS(cm, "data.defaultValue: \"500m\" is not an integer quantity: quantity is not a whole number");
    set_data(cm, "defaultValue", "-1");
    EXPECT_PROBLEMS(cm, "data.defaultValue: \"-1\" is not an integer quantity: quantity is negative");
    set_data(cm, "defaultValue", "twenty");
    EXPECT_PROBLEMS(cm, "data.defaultValue: \"twenty\" is not an integer quantity: not a valid quantity");
    /* A non-empty default must parse even where it is not used. */
    set_data(cm, "limits", "required");
    EXPECT_PROBLEMS(cm, "data.defaultValue: \"twenty\" is not an integer quantity: not a valid quantity");
    cJSON_Delete(cm);
}

static void test_candidates(void **state)
{
    (void)state;
    cJSON *plain = json_of("{'metadata':{'name':'settings','namespace':'kube-public'},'data':{'a':'b'}}");
    cJSON *elsewhere = json_of("{'metadata':{'name':'cf-crl-a-gpu','namespace':'default'},'data':{}}");
    cJSON *labelled = json_of("{'metadata':{'name':'x','namespace':'default','labels':"
                        "{'features.alauda.io/type':'CustomResourceLimitation'}}}");
    cJSON *named = json_of("{'metadata':{'name':'cf-crl-a-gpu','namespace':'kube-public'}}");
    assert_false(crl_is_candidate(plain, NS));
    assert_false(crl_is_candidate(elsewhere, NS));
    assert_true(crl_is_candidate(labelled, NS));
    assert_true(crl_is_candidate(named, NS));
    assert_false(crl_is_candidate(NULL, NS));
    cJSON_Delete(plain);
    cJSON_Delete(elsewhere);
    cJSON_Delete(labelled);
    cJSON_Delete(named);
}

static void test_every_problem_reported(void **state)
{
    (void)state;
    cJSON *cm = json_of("{'metadata':{'name':'gpu','namespace':'default','labels':{'features.alauda.io/type':'X',"
                  "'features.alauda.io/enabled':true}},"
                  "'data':{'key':'kubernetes.io/gpu','dataType':'int','defaultValue':'x','limits':'no',"
                  "'descriptionEn':5}}");
    EXPECT_PROBLEMS(cm, "label features.alauda.io/enabled: must be a string, not a boolean",
                    "data.descriptionEn: must be a string, not a number",
                    "metadata.namespace: \"default\" is not the CRL namespace \"kube-public\"",
                    "metadata.name: \"gpu\" does not match cf-crl-<customName>-<keyName>",
                    "label features.alauda.io/type: \"X\" is not \"CustomResourceLimitation\"",
                    "label features.alauda.io/group: missing", "data.group: missing",
                    "data.key: \"kubernetes.io/gpu\" is not a valid extended resource name: names in the "
                    "kubernetes.io/ domain are native resources",
                    "data.dataType: \"int\" is not one of integer",
                    "data.limits: \"no\" is not one of disabled, required, optional",
                    "data.requests: missing (must be one of disabled, required, fromLimits)");
    cJSON_Delete(cm);
}

static void test_missing_parts(void **state)
{
    (void)state;
    cJSON *cm = json_of("{'metadata':{'name':'cf-crl-a-gpu','namespace':'kube-public','labels':{"
                  "'features.alauda.io/type':'CustomResourceLimitation','features.alauda.io/group':'g',"
                  "'features.alauda.io/enabled':'true'}}}");
    EXPECT_PROBLEMS(cm, "data: missing (a CRL needs key, dataType, defaultValue, group, limits, requests)");
    cJSON_AddStringToObject(cm, "data", "x");
    EXPECT_PROBLEMS(cm, "data: must be an object, not a string");
    cJSON_Delete(cm);
    cm = json_of("{'data':{}}");
    EXPECT_PROBLEMS(cm, "metadata.namespace: missing (CRLs live in \"kube-public\")", "metadata.name: missing",
                    "label features.alauda.io/type: missing (must be \"CustomResourceLimitation\")",
                    "label features.alauda.io/group: missing",
                    "label features.alauda.io/enabled: missing (must be \"true\" or \"false\")",
                    "data.group: missing", "data.key: missing", "data.dataType: missing (must be one of integer)",
                    "data.limits: missing (must be one of disabled, required, optional)",
                    "data.requests: missing (must be one of disabled, required, fromLimits)");
    cJSON_Delete(cm);
    cm = json_of("[1]");
    EXPECT_PROBLEMS(cm, "a ConfigMap must be a JSON object");
    cJSON_Delete(cm);
    /* null data values read as "" (as Go decodes them). */
    cm = make_crl("cf-crl-g-gpu", "g", "nvidia.com/gpu", "required", "disabled", "");
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(cm, "data"), "defaultValue",
                                           cJSON_CreateNull());
    EXPECT_VALID(cm);
    cJSON_Delete(cm);
}

static void test_quoting_in_messages(void **state)
{
    (void)state;
    cJSON *cm = make_crl("cf-crl-g-gpu", "g", "nvidia.com/gpu", "optional", "disabled", "1");
    set_data(cm, "limits", "a\"b\nc");
    EXPECT_PROBLEMS(cm, "data.limits: \"a\\\"b\\nc\" is not one of disabled, required, optional");
    cJSON_Delete(cm);
}

/* ------------------------------------------------------------------ */
/* Registry                                                             */

static void test_registry_duplicate_key(void **state)
{
    (void)state;
    cJSON *core = load_fixture("valid-vcuda-core.yaml");
    cJSON *mem = load_fixture("valid-vcuda-memory.yaml");
    cJSON *dup = load_fixture("duplicate-vcuda-core.yaml");
    cJSON *spare = load_fixture("valid-disabled-vcuda-core.yaml");
    /* The same answer whatever order the ConfigMaps come in. */
    cJSON *orders[2][4] = {{core, mem, dup, spare}, {spare, dup, mem, core}};
    for (int o = 0; o < 2; o++) {
        struct crl_registry *r = registry_of(orders[o], 4);
        assert_int_equal(r->count, 2);
        assert_string_equal(r->crls[0]->name, "cf-crl-gpu-manager-vcuda-core");
        assert_string_equal(r->crls[1]->name, "cf-crl-gpu-manager-vcuda-memory");
        assert_int_equal(r->invalid_count, 1);
        assert_string_equal(r->invalid[0].name, "kube-public/cf-crl-other-vcuda-core");
        assert_problems(&r->invalid[0].problems,
                        (const char *const[]){"a second enabled CRL for key tencent.com/vcuda-core: "
                                              "cf-crl-gpu-manager-vcuda-core already has it"},
                        1);
        crl_registry_free(r);
    }
    /* Alone, the duplicate is a fine CRL. */
    struct crl_registry *r = registry_of(&dup, 1);
    assert_int_equal(r->count, 1);
    assert_int_equal(r->invalid_count, 0);
    crl_registry_free(r);
    cJSON_Delete(core);
    cJSON_Delete(mem);
    cJSON_Delete(dup);
    cJSON_Delete(spare);
}

static void test_registry_ignores_and_lists(void **state)
{
    (void)state;
    cJSON *cms[] = {
        load_fixture("valid-vcuda-core.yaml"),
        load_fixture("invalid-limits.yaml"),     /* renamed below */
        load_fixture("invalid-namespace.yaml"),  /* outside the CRL namespace: ignored */
        json_of("{'metadata':{'name':'settings','namespace':'kube-public'},'data':{}}"),
        load_fixture("invalid-datatype.yaml"),   /* renamed below */
    };
    set_name(cms[1], "cf-crl-other-vcuda-core");
    set_name(cms[4], "cf-crl-a-vcuda-core");
    struct crl_registry *r = registry_of(cms, 5);
    assert_int_equal(r->count, 1);
    assert_string_equal(r->crls[0]->name, "cf-crl-gpu-manager-vcuda-core");
    assert_int_equal(r->invalid_count, 2);
    /* Invalid CRLs hold no key: cf-crl-a- sorts first, yet the valid one gets it. */
    assert_string_equal(r->invalid[0].name, "kube-public/cf-crl-a-vcuda-core");
    assert_string_equal(r->invalid[0].problems.items[0], "data.dataType: \"float\" is not one of integer");
    assert_string_equal(r->invalid[1].name, "kube-public/cf-crl-other-vcuda-core");
    assert_string_equal(r->invalid[1].problems.items[0],
                        "data.limits: \"sometimes\" is not one of disabled, required, optional");
    crl_registry_free(r);
    for (size_t i = 0; i < 5; i++)
        cJSON_Delete(cms[i]);
    r = crl_registry_build(NULL, 0, NS);
    assert_non_null(r);
    assert_int_equal(r->count, 0);
    assert_int_equal(r->invalid_count, 0);
    crl_registry_free(r);
    crl_registry_free(NULL);
}

static void test_validate_against(void **state)
{
    (void)state;
    cJSON *core = load_fixture("valid-vcuda-core.yaml");
    cJSON *dup = load_fixture("duplicate-vcuda-core.yaml");
    cJSON *spare = load_fixture("valid-disabled-vcuda-core.yaml");
    struct crl_registry *r = registry_of(&core, 1);
    static const char dup_msg[] = "a second enabled CRL for key tencent.com/vcuda-core: cf-crl-gpu-manager-vcuda-core "
                                  "already has it";
    struct crl_problems p = {0};
    crl_validate_against(r, dup, NS, &p);
    assert_problems(&p, (const char *const[]){dup_msg}, 1);
    crl_problems_free(&p);
    /* An UPDATE of the holder itself. */
    crl_validate_against(r, core, NS, &p);
    assert_int_equal(p.count, 0);
    /* A disabled one takes nothing. */
    crl_validate_against(r, spare, NS, &p);
    assert_int_equal(p.count, 0);
    /* Other problems do not hide the duplicate. */
    set_data(dup, "limits", "sometimes");
    crl_validate_against(r, dup, NS, &p);
    assert_problems(&p, (const char *const[]){"data.limits: \"sometimes\" is not one of disabled, required, optional",
                                              dup_msg},
                    2);
    crl_problems_free(&p);
    crl_validate_against(NULL, core, NS, &p);
    assert_int_equal(p.count, 0);
    crl_registry_free(r);
    cJSON_Delete(core);
    cJSON_Delete(dup);
    cJSON_Delete(spare);
}

/* ------------------------------------------------------------------ */
/* Enforcement                                                          */

struct check {
    struct crl_problems v;
    struct crl_defaults d;
};

static void run_check(const struct crl_registry *r, const char *pod_json, struct check *out)
{
    cJSON *pod = json_of(pod_json);
    memset(out, 0, sizeof(*out));
    assert_int_equal(crl_check_pod(r, pod, &out->v, &out->d), 0);
    cJSON_Delete(pod);
}

static void check_free(struct check *c)
{
    crl_problems_free(&c->v);
    crl_defaults_free(&c->d);
}

/* A registry of one CRL for example.com/gpu in group g, plus a CRL for
 * example.com/mem in the same group (optional, default 2) and one for
 * other.com/x in group h (required). */
static struct crl_registry *rule_registry(const char *limits, const char *requests, const char *def)
{
    cJSON *cms[3] = {make_crl("cf-crl-g-gpu", "g", "example.com/gpu", limits, requests, def),
                     make_crl("cf-crl-g-mem", "g", "example.com/mem", "optional", "disabled", "2"),
                     make_crl("cf-crl-h-x", "h", "other.com/x", "required", "disabled", "")};
    struct crl_registry *r = registry_of(cms, 3);
    assert_int_equal(r->invalid_count, 0);
    assert_int_equal(r->count, 3);
    for (int i = 0; i < 3; i++)
        cJSON_Delete(cms[i]);
    return r;
}

#define POD1(resources) "{'spec':{'containers':[{'name':'main','resources':" resources "}]}}"

static void expect_violations(const char *limits, const char *requests, const char *def, const char *pod,
                              const char *const *want, size_t n)
{
    struct crl_registry *r = rule_registry(limits, requests, def);
    struct check c;
    run_check(r, pod, &c);
    assert_problems(&c.v, want, n);
    check_free(&c);
    crl_registry_free(r);
}

#define EXPECT_VIOLATIONS(l, q, d, pod, ...)                                                                     \
    expect_violations(l, q, d, pod, (const char *const[]){__VA_ARGS__},                                        \
                      sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))
#define EXPECT_COMPLIES(l, q, d, pod) expect_violations(l, q, d, pod, NULL, 0)

static void test_enforce_limits_required(void **state)
{
    (void)state;
    /* Uses group g through mem, lacks the required gpu limit. */
    EXPECT_VIOLATIONS("required", "disabled", "", POD1("{'limits':{'example.com/mem':'1'}}"),
                      "container \"main\": example.com/gpu is required in limits by CustomResourceLimitation "
                      "cf-crl-g-gpu (limits: required)");
    /* A request alone is not a limit. */
    EXPECT_VIOLATIONS("required", "fromLimits", "", POD1("{'requests':{'example.com/gpu':'1'}}"),
                      "container \"main\": example.com/gpu is required in limits by CustomResourceLimitation "
                      "cf-crl-g-gpu (limits: required)",
                      "container \"main\": example.com/gpu request \"1\" is set without a limit, which "
                      "CustomResourceLimitation cf-crl-g-gpu forbids (requests: fromLimits)");
    EXPECT_COMPLIES("required", "disabled", "", POD1("{'limits':{'example.com/gpu':'1','example.com/mem':'1'}}"));
}

static void test_enforce_limits_disabled(void **state)
{
    (void)state;
    EXPECT_VIOLATIONS("disabled", "disabled", "", POD1("{'limits':{'example.com/gpu':'1'}}"),
                      "container \"main\": example.com/gpu is not allowed in limits by CustomResourceLimitation "
                      "cf-crl-g-gpu (limits: disabled)");
    EXPECT_COMPLIES("disabled", "disabled", "", POD1("{'limits':{'example.com/mem':'1'}}"));
}

static void test_enforce_requests_disabled_and_from_limits(void **state)
{
    (void)state;
    EXPECT_VIOLATIONS("required", "disabled", "",
                      POD1("{'limits':{'example.com/gpu':'2'},'requests':{'example.com/gpu':'1'}}"),
                      "container \"main\": example.com/gpu request \"1\" differs from its limit \"2\", which "
                      "CustomResourceLimitation cf-crl-g-gpu forbids (requests: disabled)");
    EXPECT_VIOLATIONS("optional", "fromLimits", "5",
                      POD1("{'limits':{'example.com/gpu':'2'},'requests':{'example.com/gpu':3}}"),
                      "container \"main\": example.com/gpu request \"3\" differs from its limit \"2\", which "
                      "CustomResourceLimitation cf-crl-g-gpu forbids (requests: fromLimits)");
    /* Equal as quantities (what the API server's defaulting writes). */
    EXPECT_COMPLIES("required", "disabled", "",
                    POD1("{'limits':{'example.com/gpu':'1k'},'requests':{'example.com/gpu':1000}}"));
    EXPECT_COMPLIES("optional", "fromLimits", "5",
                    POD1("{'limits':{'example.com/gpu':'2'},'requests':{'example.com/gpu':'2000m'}}"));
    /* The request is compared with the default limit the container takes. */
    EXPECT_VIOLATIONS("optional", "disabled", "5", POD1("{'requests':{'example.com/gpu':'4'}}"),
                      "container \"main\": example.com/gpu request \"4\" differs from its default limit \"5\", "
                      "which CustomResourceLimitation cf-crl-g-gpu forbids (requests: disabled)");
    EXPECT_VIOLATIONS("disabled", "disabled", "", POD1("{'requests':{'example.com/gpu':'4'}}"),
                      "container \"main\": example.com/gpu request \"4\" is set without a limit, which "
                      "CustomResourceLimitation cf-crl-g-gpu forbids (requests: disabled)");
}

static void test_enforce_requests_required(void **state)
{
    (void)state;
    EXPECT_VIOLATIONS("required", "required", "", POD1("{'limits':{'example.com/gpu':'1'}}"),
                      "container \"main\": example.com/gpu is required in requests by CustomResourceLimitation "
                      "cf-crl-g-gpu (requests: required)");
    EXPECT_COMPLIES("required", "required", "",
                    POD1("{'limits':{'example.com/gpu':'1'},'requests':{'example.com/gpu':'1'}}"));
    /* requests: required does not compare (the API server does). */
    EXPECT_COMPLIES("required", "required", "",
                    POD1("{'limits':{'example.com/gpu':'2'},'requests':{'example.com/gpu':'1'}}"));
}

static void test_enforce_only_used_groups(void **state)
{
    (void)state;
    /* Group h is used, g is not: g's required limit does not apply; h's does. */
    EXPECT_COMPLIES("required", "required", "", POD1("{'limits':{'other.com/x':'1'}}"));
    /* No GPU at all: nothing applies, not even required limits. */
    EXPECT_COMPLIES("required", "required", "", POD1("{'limits':{'cpu':'1'}}"));
    EXPECT_COMPLIES("required", "required", "", "{'spec':{'containers':[{'name':'main'}]}}");
    /* The group is used through requests too. */
    EXPECT_VIOLATIONS("required", "disabled", "", POD1("{'requests':{'other.com/x':'1'}}"),
                      "container \"main\": other.com/x is required in limits by CustomResourceLimitation "
                      "cf-crl-h-x (limits: required)",
                      "container \"main\": other.com/x request \"1\" is set without a limit, which "
                      "CustomResourceLimitation cf-crl-h-x forbids (requests: disabled)");
}

static void test_enforce_per_container(void **state)
{
    (void)state;
    EXPECT_VIOLATIONS("required", "disabled", "",
                      "{'spec':{'containers':[{'name':'ok','resources':{'limits':{'example.com/gpu':'1'}}},"
                      "{'resources':{'limits':{'example.com/mem':'1'}}},"
                      "{'name':'b','resources':{'limits':{'example.com/mem':'1'}}}]}}",
                      "container #1: example.com/gpu is required in limits by CustomResourceLimitation "
                      "cf-crl-g-gpu (limits: required)",
                      "container \"b\": example.com/gpu is required in limits by CustomResourceLimitation "
                      "cf-crl-g-gpu (limits: required)");
}

static void test_enforce_disabled_crl_ignored(void **state)
{
    (void)state;
    cJSON *cm = make_crl("cf-crl-g-gpu", "g", "example.com/gpu", "required", "required", "");
    cJSON *labels = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cm, "metadata"), "labels");
    cJSON_ReplaceItemInObjectCaseSensitive(labels, "features.alauda.io/enabled", cJSON_CreateString("false"));
    struct crl_registry *r = registry_of(&cm, 1);
    assert_int_equal(r->count, 0);
    struct check c;
    run_check(r, POD1("{'limits':{'example.com/mem':'1'},'requests':{'example.com/gpu':'1'}}"), &c);
    assert_int_equal(c.v.count, 0);
    assert_int_equal(c.d.count, 0);
    check_free(&c);
    crl_registry_free(r);
    cJSON_Delete(cm);
}

static void test_enforce_odd_pods(void **state)
{
    (void)state;
    struct crl_registry *r = rule_registry("required", "required", "");
    const char *pods[] = {"{}", "{'spec':{}}", "{'spec':{'containers':{}}}", "{'spec':{'containers':[1,'x']}}",
                          POD1("[]"), POD1("{'limits':[]}")};
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++) {
        struct check c;
        run_check(r, pods[i], &c);
        assert_int_equal(c.v.count, 0);
        assert_int_equal(c.d.count, 0);
        check_free(&c);
    }
    struct crl_problems v = {0};
    struct crl_defaults d = {0};
    assert_int_equal(crl_check_pod(NULL, NULL, &v, &d), 0);
    crl_registry_free(r);
}

/* ------------------------------------------------------------------ */
/* Defaults and the patch                                               */

static struct crl_registry *gpu_manager_registry(void)
{
    cJSON *cms[2] = {load_fixture("valid-vcuda-core.yaml"), load_fixture("valid-vcuda-memory.yaml")};
    struct crl_registry *r = registry_of(cms, 2);
    cJSON_Delete(cms[0]);
    cJSON_Delete(cms[1]);
    return r;
}

static void test_defaults_group(void **state)
{
    (void)state;
    struct crl_registry *r = gpu_manager_registry();
    struct check c;
    /* vcuda-core only: takes the vcuda-memory default, request too. */
    run_check(r, POD1("{'limits':{'tencent.com/vcuda-core':'50'}}"), &c);
    assert_int_equal(c.v.count, 0);
    assert_int_equal(c.d.count, 1);
    assert_int_equal(c.d.items[0].container, 0);
    assert_string_equal(c.d.items[0].key, "tencent.com/vcuda-memory");
    assert_string_equal(c.d.items[0].value, "4");
    assert_true(c.d.items[0].set_request);
    check_free(&c);
    /* Defaulted requests already present (as the API server writes them) need no request. */
    run_check(r, POD1("{'limits':{'tencent.com/vcuda-memory':'8'},'requests':{'tencent.com/vcuda-core':'20'}}"),
              &c);
    assert_int_equal(c.v.count, 0);
    assert_int_equal(c.d.count, 1);
    assert_string_equal(c.d.items[0].key, "tencent.com/vcuda-core");
    assert_false(c.d.items[0].set_request);
    check_free(&c);
    /* Nothing GPU: nothing. Both keys: nothing. */
    run_check(r, "{'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'1','nvidia.com/gpu':'1'}}},"
                 "{'name':'b'},{'name':'c','resources':{'limits':{'tencent.com/vcuda-core':'100',"
                 "'tencent.com/vcuda-memory':'64'}}}]}}",
              &c);
    assert_int_equal(c.v.count, 0);
    assert_int_equal(c.d.count, 0);
    check_free(&c);
    /* Several containers, in container order. */
    run_check(r, "{'spec':{'containers':[{'name':'a','resources':{'limits':{'tencent.com/vcuda-memory':'1'}}},"
                 "{'name':'b'},{'name':'c','resources':{'limits':{'tencent.com/vcuda-core':'10'}}}]}}",
              &c);
    assert_int_equal(c.d.count, 2);
    assert_int_equal(c.d.items[0].container, 0);
    assert_string_equal(c.d.items[0].key, "tencent.com/vcuda-core");
    assert_string_equal(c.d.items[0].value, "20");
    assert_int_equal(c.d.items[1].container, 2);
    assert_string_equal(c.d.items[1].key, "tencent.com/vcuda-memory");
    check_free(&c);
    crl_registry_free(r);
}

static void test_default_set_request_rules(void **state)
{
    (void)state;
    const struct {
        const char *requests;
        bool set_request;
    } rows[] = {{"disabled", true}, {"fromLimits", true}, {"required", false}};
    for (size_t i = 0; i < 3; i++) {
        struct crl_registry *r = rule_registry("optional", rows[i].requests, "7");
        struct check c;
        run_check(r, POD1("{'limits':{'example.com/mem':'1'}}"), &c);
        assert_int_equal(c.d.count, 1);
        assert_string_equal(c.d.items[0].key, "example.com/gpu");
        assert_string_equal(c.d.items[0].value, "7");
        assert_int_equal(c.d.items[0].set_request, rows[i].set_request);
        check_free(&c);
        crl_registry_free(r);
    }
    /* A required limit never defaults. */
    struct crl_registry *r = rule_registry("required", "disabled", "7");
    struct check c;
    run_check(r, POD1("{'limits':{'example.com/mem':'1'}}"), &c);
    assert_int_equal(c.v.count, 1);
    assert_int_equal(c.d.count, 0);
    check_free(&c);
    crl_registry_free(r);
}

/* RFC 6902 "add" (the only op the patch uses) on a cJSON document. */
static char *unescape_token(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    assert_non_null(out);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '~') {
            assert_true(i + 1 < len && (s[i + 1] == '0' || s[i + 1] == '1'));
            out[n++] = s[++i] == '0' ? '~' : '/';
        } else {
            out[n++] = s[i];
        }
    }
    out[n] = '\0';
    return out;
}

static void apply_add(cJSON *doc, const char *path, const cJSON *value)
{
    assert_int_equal(path[0], '/');
    cJSON *parent = doc;
    const char *p = path + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        char *tok = unescape_token(p, slash ? (size_t)(slash - p) : strlen(p));
        if (!slash) {
            cJSON *copy = cJSON_Duplicate(value, 1);
            if (cJSON_IsArray(parent)) {
                assert_true(cJSON_InsertItemInArray(parent, atoi(tok), copy));
            } else {
                assert_true(cJSON_IsObject(parent));
                if (cJSON_GetObjectItemCaseSensitive(parent, tok))
                    cJSON_ReplaceItemInObjectCaseSensitive(parent, tok, copy);
                else
                    cJSON_AddItemToObject(parent, tok, copy);
            }
            free(tok);
            return;
        }
        cJSON *next = cJSON_IsArray(parent) ? cJSON_GetArrayItem(parent, atoi(tok))
                                            : cJSON_GetObjectItemCaseSensitive(parent, tok);
        if (!next)
            fail_msg("patch path %s: %s does not exist", path, tok);
        free(tok);
        parent = next;
        p = slash + 1;
    }
}

static void apply_patch(cJSON *doc, const char *patch)
{
    cJSON *ops = cJSON_Parse(patch);
    assert_true(cJSON_IsArray(ops));
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "op")), "add");
        apply_add(doc, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "path")),
                  cJSON_GetObjectItemCaseSensitive(op, "value"));
    }
    cJSON_Delete(ops);
}

static void test_patch_text_and_result(void **state)
{
    (void)state;
    struct crl_registry *r = gpu_manager_registry();
    cJSON *pod = json_of("{'metadata':{'name':'p'},'spec':{'containers':["
                   "{'name':'a','resources':{'limits':{'tencent.com/vcuda-core':'50'}}},"
                   "{'name':'b','image':'x'},"
                   "{'name':'c','resources':{'requests':{'tencent.com/vcuda-memory':'4','cpu':'1'}}},"
                   "{'name':'d','resources':{'limits':{'tencent.com/vcuda-memory':'16'}}},"
                   "{'name':'e','resources':null}]}}");
    struct crl_problems v = {0};
    struct crl_defaults d = {0};
    assert_int_equal(crl_check_pod(r, pod, &v, &d), 0);
    assert_int_equal(v.count, 0);
    assert_int_equal(d.count, 4);
    char *patch = crl_defaults_patch(pod, &d);
    assert_non_null(patch);
    assert_string_equal(
        patch,
        "[{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/tencent.com~1vcuda-memory\",\"value\":\"4\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests\",\"value\":{}},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests/tencent.com~1vcuda-memory\",\"value\":\"4\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/2/resources/limits\",\"value\":{}},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/2/resources/limits/tencent.com~1vcuda-core\",\"value\":\"20\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/2/resources/requests/tencent.com~1vcuda-core\",\"value\":\"20\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/2/resources/limits/tencent.com~1vcuda-memory\",\"value\":\"4\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/3/resources/limits/tencent.com~1vcuda-core\",\"value\":\"20\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/3/resources/requests\",\"value\":{}},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/3/resources/requests/tencent.com~1vcuda-core\",\"value\":\"20\"}]");
    apply_patch(pod, patch);
    cJSON *want = json_of("{'metadata':{'name':'p'},'spec':{'containers':["
                    "{'name':'a','resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'4'},"
                    "'requests':{'tencent.com/vcuda-memory':'4'}}},"
                    "{'name':'b','image':'x'},"
                    "{'name':'c','resources':{'requests':{'tencent.com/vcuda-memory':'4','cpu':'1',"
                    "'tencent.com/vcuda-core':'20'},'limits':{'tencent.com/vcuda-core':'20',"
                    "'tencent.com/vcuda-memory':'4'}}},"
                    "{'name':'d','resources':{'limits':{'tencent.com/vcuda-memory':'16','tencent.com/vcuda-core':'20'},"
                    "'requests':{'tencent.com/vcuda-core':'20'}}},"
                    "{'name':'e','resources':null}]}}");
    assert_true(cJSON_Compare(pod, want, 1));
    /* After the patch the pod complies and needs nothing more. */
    crl_defaults_free(&d);
    assert_int_equal(crl_check_pod(r, pod, &v, &d), 0);
    assert_int_equal(v.count, 0);
    assert_int_equal(d.count, 0);
    free(patch);
    cJSON_Delete(want);
    cJSON_Delete(pod);
    crl_registry_free(r);
}

static void test_patch_creates_resources(void **state)
{
    (void)state;
    /* Hand-made defaults: a container without resources (and one whose
     * resources is not an object), several keys, escaping of '~' and '/'. */
    cJSON *pod = json_of("{'spec':{'containers':[{'name':'a'},{'name':'b','resources':'x'}]}}");
    struct crl_default items[] = {
        {0, "a/b~c", "1", true},
        {0, "k", "2", false},
        {1, "k", "3", false},
        {1, "m", "4", true},
    };
    struct crl_defaults d = {items, 4};
    char *patch = crl_defaults_patch(pod, &d);
    assert_string_equal(patch, "[{\"op\":\"add\",\"path\":\"/spec/containers/0/resources\",\"value\":{}},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits\",\"value\":{}},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/a~1b~0c\",\"value\":\"1\"},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests\",\"value\":{}},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests/a~1b~0c\",\"value\":\"1\"},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/k\",\"value\":\"2\"},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/1/resources\",\"value\":{}},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/1/resources/limits\",\"value\":{}},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/1/resources/limits/k\",\"value\":\"3\"},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/1/resources/limits/m\",\"value\":\"4\"},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/1/resources/requests\",\"value\":{}},"
                               "{\"op\":\"add\",\"path\":\"/spec/containers/1/resources/requests/m\",\"value\":\"4\"}]");
    apply_patch(pod, patch);
    cJSON *want = json_of("{'spec':{'containers':[{'name':'a','resources':{'limits':{'a/b~c':'1','k':'2'},"
                    "'requests':{'a/b~c':'1'}}},{'name':'b','resources':{'limits':{'k':'3','m':'4'},"
                    "'requests':{'m':'4'}}}]}}");
    assert_true(cJSON_Compare(pod, want, 1));
    free(patch);
    cJSON_Delete(want);
    cJSON_Delete(pod);
}

static void test_patch_empty(void **state)
{
    (void)state;
    cJSON *pod = json_of(POD1("{}"));
    struct crl_defaults d = {0};
    char *patch = crl_defaults_patch(pod, &d);
    assert_string_equal(patch, "[]");
    free(patch);
    patch = crl_defaults_patch(pod, NULL);
    assert_string_equal(patch, "[]");
    free(patch);
    cJSON_Delete(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_validates),
        cmocka_unit_test(test_vcuda_memory_validates),
        cmocka_unit_test(test_disabled_crl_validates),
        cmocka_unit_test(test_json_list_fixture),
        cmocka_unit_test(test_one_rule_per_fixture),
        cmocka_unit_test(test_key_rules),
        cmocka_unit_test(test_name_rules),
        cmocka_unit_test(test_enum_and_default_values),
        cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_every_problem_reported),
        cmocka_unit_test(test_missing_parts),
        cmocka_unit_test(test_quoting_in_messages),
        cmocka_unit_test(test_registry_duplicate_key),
        cmocka_unit_test(test_registry_ignores_and_lists),
        cmocka_unit_test(test_validate_against),
        cmocka_unit_test(test_enforce_limits_required),
        cmocka_unit_test(test_enforce_limits_disabled),
        cmocka_unit_test(test_enforce_requests_disabled_and_from_limits),
        cmocka_unit_test(test_enforce_requests_required),
        cmocka_unit_test(test_enforce_only_used_groups),
        cmocka_unit_test(test_enforce_per_container),
        cmocka_unit_test(test_enforce_disabled_crl_ignored),
        cmocka_unit_test(test_enforce_odd_pods),
        cmocka_unit_test(test_defaults_group),
        cmocka_unit_test(test_default_set_request_rules),
        cmocka_unit_test(test_patch_text_and_result),
        cmocka_unit_test(test_patch_creates_resources),
        cmocka_unit_test(test_patch_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
