/* fuzz_crl.c - CustomResourceLimitation ConfigMaps (admission/crl.c), YAML
 * or JSON, as the watch, the webhook and validate-crl read them; and a pod
 * from the input's "pod" member checked against the registry they make. */
#include "fuzz_common.h"
#include "admission/crl.h"
#include "lib/yamljson.h"

#include <cjson/cJSON.h>

#define NS "kube-public"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    cJSON *doc = yaml_to_json(buf, size, NULL);
    free(buf);
    if (!doc)
        return 0;
    /* One ConfigMap, or a list of them in "items". */
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items");
    const cJSON *cms[16];
    size_t n = 0;
    if (cJSON_IsArray(items)) {
        for (const cJSON *it = items->child; it && n < 16; it = it->next)
            cms[n++] = it;
    } else {
        cms[n++] = doc;
    }
    for (size_t i = 0; i < n; i++) {
        (void)crl_is_candidate(cms[i], NS);
        struct crl_problems problems = {0};
        crl_free(crl_parse(cms[i], NS, &problems));
        free(crl_problems_join(&problems));
        crl_problems_free(&problems);
    }
    struct crl_registry *r = crl_registry_build(cms, n, NS);
    if (r) {
        struct crl_problems problems = {0};
        crl_validate_against(r, cms[0], NS, &problems);
        crl_problems_free(&problems);
        const cJSON *pod = cJSON_GetObjectItemCaseSensitive(doc, "pod");
        if (cJSON_IsObject(pod)) {
            struct crl_problems violations = {0};
            struct crl_defaults defaults = {0};
            if (crl_check_pod(r, pod, &violations, &defaults) == 0)
                free(crl_defaults_patch(pod, &defaults));
            crl_problems_free(&violations);
            crl_defaults_free(&defaults);
        }
        crl_registry_free(r);
    }
    cJSON_Delete(doc);
    return 0;
}
