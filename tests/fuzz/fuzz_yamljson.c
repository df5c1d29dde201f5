/* fuzz_yamljson.c - YAML (and JSON) text to a cJSON tree (lib/yamljson.c):
 * state files, kubeconfigs, pods for `simulate`, CRL files. Anything it
 * accepts must print as JSON that cJSON reads back. */
#include "fuzz_common.h"
#include "lib/yamljson.h"

#include <cjson/cJSON.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    (void)text_looks_like_json(buf, size);
    char *err = NULL;
    cJSON *v = yaml_to_json(buf, size, &err);
    if (v) {
        char *text = cJSON_PrintUnformatted(v);
        if (text) {
            cJSON *again = cJSON_Parse(text);
            if (!again)
                abort();
            cJSON_Delete(again);
            free(text);
        }
        cJSON_Delete(v);
    }
    free(err);
    free(buf);
    return 0;
}
