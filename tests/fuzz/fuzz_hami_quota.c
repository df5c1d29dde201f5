/* fuzz_hami_quota.c - a ResourceQuota as HAMi's quota rule reads it
 * (admission/hamiquota.c): the object, given as YAML or JSON, parsed, held
 * in the set (added, replaced, removed) and judged against use and asks at
 * the edges of int64. */
#include "fuzz_common.h"
#include "admission/hamiquota.h"
#include "lib/yamljson.h"

#include <cjson/cJSON.h>

static void judge(const struct hami_quota_set *s, const char *ns)
{
    static const int64_t amounts[] = {0, 1, 4096, INT64_MAX};
    char reason[512];
    for (size_t i = 0; i < sizeof(amounts) / sizeof(amounts[0]); i++) {
        struct hami_quota_use used = {amounts[i], amounts[i]}, asked = {amounts[3 - i], 1};
        (void)hami_quota_check(s, ns, 1, &used, &asked, reason, sizeof(reason));
        (void)hami_quota_check(s, ns, 1048576, &used, &asked, reason, sizeof(reason));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    cJSON *obj = yaml_to_json(buf, size, NULL);
    free(buf);
    if (!obj)
        return 0;
    struct hami_quota_set s;
    hami_quota_set_init(&s);
    struct hami_rq q;
    char *err = NULL;
    if (hami_rq_parse(obj, &q, &err) == 1) {
        char *ns = strdup(q.ns), *name = strdup(q.name);
        struct hami_rq copy = {.ns = strdup(q.ns), .name = strdup(q.name), .has_memory = q.has_memory,
                               .has_cores = q.has_cores, .memory = q.memory, .cores = q.cores};
        (void)hami_quota_set_put(&s, &q);
        if (copy.ns && copy.name)
            (void)hami_quota_set_put(&s, &copy); /* the same object again: replaced */
        else
            hami_rq_clear(&copy);
        if (ns) {
            judge(&s, ns);
            judge(&s, "other");
            if (name)
                hami_quota_set_remove(&s, ns, name);
        }
        free(ns);
        free(name);
    }
    free(err);
    hami_quota_set_free(&s);
    cJSON_Delete(obj);
    return 0;
}
