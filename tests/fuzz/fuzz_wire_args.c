/* fuzz_wire_args.c - ExtenderArgs bodies (extender/serve/wire.c), as filter and
 * prioritize receive them, in both the NodeNames and the Nodes form.
 *
 * Each body is parsed twice: alone, and with the NodeNames memo that the
 * earlier inputs left behind (namelist.h), as the server parses them. A
 * remembered array is skipped, not scanned, so both parses must agree on
 * everything: accepted or not, the error, the names and their tokens. */
#include <stdbool.h>

#include "fuzz_common.h"
#include "extender/serve/wire.h"

static struct name_list_memo memo;
static int memo_ready;

static bool same_span(const struct jscan_span *a, const struct jscan_span *b)
{
    return a->len == b->len && (a->ptr == NULL) == (b->ptr == NULL) && (!a->ptr || memcmp(a->ptr, b->ptr, a->len) == 0);
}

static void compare(const struct extender_args *alone, const struct extender_args *memo_args)
{
    if (alone->form != memo_args->form || alone->count != memo_args->count || alone->names_len != memo_args->names_len ||
        memcmp(alone->names_buf, memo_args->names_buf, alone->names_len) != 0)
        abort();
    for (size_t i = 0; i < alone->count; i++) {
        if (strcmp(alone->names[i], memo_args->names[i]) != 0)
            abort();
        if (alone->raw_names && !same_span(&alone->raw_names[i], &memo_args->raw_names[i]))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!memo_ready)
        memo_ready = name_list_memo_init(&memo) == 0 ? 1 : -1;
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    struct extender_args alone, with_memo;
    char *err = NULL, *memo_err = NULL;
    int rc = wire_parse_args(buf, size, &alone, &err);
    int memo_rc = wire_parse_args_memo(buf, size, memo_ready > 0 ? &memo : NULL, &with_memo, &memo_err);
    if (rc != memo_rc || (err == NULL) != (memo_err == NULL) || (err && strcmp(err, memo_err) != 0))
        abort();
    if (rc == 0) {
        compare(&alone, &with_memo);
        wire_args_free(&alone);
        wire_args_free(&with_memo);
    }
    free(err);
    free(memo_err);
    free(buf);
    return 0;
}
