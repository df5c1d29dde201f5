/* fuzz_smi.c - `nvidia-smi topo -m` output and the --query-gpu CSV
 * (topology/smi.c), as gpu-topology reads them. Input: the matrix, then
 * optionally a line "%%" and the CSV. Whatever is accepted must serialize
 * into an annotation that topology_parse accepts again. */
#include "fuzz_common.h"
#include "topology/annotation.h"
#include "topology/smi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    char *csv = strstr(text, "\n%%\n");
    if (csv) {
        *csv = '\0';
        csv += 4;
    }
    char *err = NULL;
    struct gpu_topology *t = topology_from_smi(text, csv, NULL, &err);
    free(err);
    if (t) {
        char *ann = topology_serialize(t);
        if (ann) {
            err = NULL;
            struct gpu_topology *back = topology_parse(ann, &err);
            if (!back)
                abort();
            topology_free(back);
            free(ann);
        }
        topology_free(t);
    }
    free(text);
    return 0;
}
