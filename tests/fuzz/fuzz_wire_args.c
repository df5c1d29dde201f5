/* fuzz_wire_args.c - ExtenderArgs bodies (extender/wire.c), as filter and
 * prioritize receive them, in both the NodeNames and the Nodes form. */
#include "fuzz_common.h"
#include "extender/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    struct extender_args args;
    char *err = NULL;
    if (wire_parse_args(buf, size, &args, &err) == 0)
        wire_args_free(&args);
    free(err);
    free(buf);
    return 0;
}
