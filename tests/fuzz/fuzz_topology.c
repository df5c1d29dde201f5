/* fuzz_topology.c - the gpu-admission.io/topology node annotation
 * (topology/annotation.c). What parses must serialize and parse again to
 * the same text. */
#include "fuzz_common.h"
#include "topology/annotation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    char *err = NULL;
    struct gpu_topology *t = topology_parse(text, &err);
    free(err);
    if (t) {
        char *once = topology_serialize(t);
        struct gpu_topology *back = once ? topology_parse(once, NULL) : NULL;
        char *twice = back ? topology_serialize(back) : NULL;
        if (once && (!back || (twice && strcmp(once, twice) != 0)))
            abort();
        free(twice);
        topology_free(back);
        free(once);
        topology_free(t);
    }
    free(text);
    return 0;
}
