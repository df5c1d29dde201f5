/* fuzz_podtext.c - the watch's fast pod reader (cluster/podtext.c) against
 * the cJSON way (pod_slim_from_prefix, then pod_info_from_json): whenever
 * the fast reader answers, the cJSON way must read the same object, end it
 * at the same byte, and give a pod_info equal in every field. */
#include "fuzz_common.h"
#include "cluster/podspec.h"
#include "cluster/podtext.h"
#include "tests/unit/podcompare.h"

#include <cjson/cJSON.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    size_t used = 0, slim_used = 0;
    struct pod_info *fast = pod_info_from_text_prefix(buf, size, &used);
    if (fast) {
        cJSON *slim = pod_slim_from_prefix(buf, size, &slim_used);
        struct pod_info *slow = slim ? pod_info_from_json(slim, NULL) : NULL;
        const char *diff = !slow ? "the cJSON way refused it" : used != slim_used ? "the end" : NULL;
        if (!diff)
            diff = pod_info_difference(fast, slow);
        if (diff) {
            fprintf(stderr, "fuzz_podtext: the readers differ: %s\n", diff);
            abort();
        }
        pod_info_free(slow);
        cJSON_Delete(slim);
        pod_info_free(fast);
    }
    free(buf);
    return 0;
}
