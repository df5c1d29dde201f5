/* fuzz_wire_binding.c - ExtenderBindingArgs bodies (extender/serve/wire.c). */
#include "fuzz_common.h"
#include "extender/serve/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    struct binding_args b;
    char *err = NULL;
    if (wire_parse_binding(buf, size, &b, &err) == 0) {
        free(wire_binding_result(NULL, NULL));
        wire_binding_free(&b);
    } else {
        free(wire_binding_result(err, NULL));
    }
    free(err);
    free(buf);
    return 0;
}
