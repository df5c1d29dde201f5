/* fuzz_jscan.c - the streaming JSON scanner (lib/jscan.c) over any bytes:
 * every value is visited (strings decoded), then the document must end;
 * skipping the document instead must agree, error for error. */
#include "fuzz_common.h"
#include "lib/jscan.h"

#define MAX_DEPTH 64 /* deeper values are skipped by the scanner itself */

static int walk(struct jscan *s, int depth)
{
    struct jscan_str str;
    switch (jscan_peek(s)) {
    case JSCAN_OBJECT: {
        if (depth >= MAX_DEPTH)
            return jscan_skip_value(s);
        if (jscan_enter_object(s) != 0)
            return -1;
        int r;
        while ((r = jscan_next_key(s, &str)) == 1) {
            (void)jscan_key_is(&str, "metadata");
            if (walk(s, depth + 1) != 0)
                return -1;
        }
        return r;
    }
    case JSCAN_ARRAY: {
        if (depth >= MAX_DEPTH)
            return jscan_skip_value(s);
        if (jscan_enter_array(s) != 0)
            return -1;
        int r;
        while ((r = jscan_next_element(s)) == 1)
            if (walk(s, depth + 1) != 0)
                return -1;
        return r;
    }
    case JSCAN_STRING: {
        if (jscan_string(s, &str) != 0)
            return -1;
        free(jscan_str_dup(&str));
        return 0;
    }
    default:
        return jscan_skip_value(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    struct jscan s, t;
    jscan_init(&s, buf, size);
    int walked = walk(&s, 0) == 0 && jscan_finish(&s) == 0;
    /* Skipping (skip_from, its string runs and escape blocks) must judge
     * the text as the walk does, with the same first error, where it is. */
    jscan_init(&t, buf, size);
    int skipped = jscan_skip_value(&t) == 0 && jscan_finish(&t) == 0;
    if (walked != skipped || (!walked && (s.error_offset != t.error_offset || strcmp(s.error, t.error) != 0)))
        abort();
    jscan_init(&s, buf, size);
    struct jscan_span span;
    if (jscan_value_span(&s, &span) == 0 && (span.ptr < buf || span.ptr + span.len > buf + size))
        abort();
    free(buf);
    return 0;
}
