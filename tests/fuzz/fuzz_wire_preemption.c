/* fuzz_wire_preemption.c - ExtenderPreemptionArgs bodies (extender/serve/wire.c),
 * and the result written back from what was parsed. */
#include "fuzz_common.h"
#include "extender/serve/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    struct preemption_args a;
    char *err = NULL;
    if (wire_parse_preemption(buf, size, &a, &err) == 0) {
        free(wire_preemption_result(&a, NULL));
        wire_preemption_free(&a);
    }
    free(err);
    free(buf);
    return 0;
}
