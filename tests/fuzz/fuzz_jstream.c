/* fuzz_jstream.c - a JSON object taken apart as it arrives (lib/jstream.c):
 * the input fed whole, in pieces of a size its first byte chooses, and byte
 * by byte must hand over the same elements and members and end the same
 * way; an accepted text must be one valid JSON value for jscan too. */
#include "fuzz_common.h"
#include "lib/jstream.h"

struct record {
    struct strbuf log;
};

static int on_element(void *ctx, const char *text, size_t len)
{
    struct record *r = ctx;
    strbuf_putc(&r->log, 'E');
    strbuf_append(&r->log, text, len);
    strbuf_putc(&r->log, '\n');
    return len == 1 && text[0] == '7'; /* a stop, now and then */
}

static int on_member(void *ctx, const struct jscan_str *key, const char *text, size_t len)
{
    struct record *r = ctx;
    strbuf_putc(&r->log, 'M');
    strbuf_append(&r->log, key->ptr, key->len);
    strbuf_putc(&r->log, '=');
    strbuf_append(&r->log, text, len);
    strbuf_putc(&r->log, '\n');
    return 0;
}

struct outcome {
    struct record rec;
    int rc;
    const char *error;
    size_t offset;
};

static void split(const char *text, size_t size, size_t step, struct outcome *o)
{
    struct jstream js;
    strbuf_init(&o->rec.log);
    jstream_init(&js, "items", on_element, on_member, &o->rec, size + 1);
    o->rc = 0;
    for (size_t at = 0; o->rc == 0 && at < size; at += step)
        o->rc = jstream_feed(&js, text + at, size - at < step ? size - at : step);
    if (o->rc == 0)
        o->rc = jstream_finish(&js);
    o->error = js.error;
    o->offset = js.error_offset;
    jstream_free(&js);
}

static void same(const struct outcome *a, const struct outcome *b)
{
    if (a->rc != b->rc || a->error != b->error || a->offset != b->offset || a->rec.log.len != b->rec.log.len ||
        (a->rec.log.len && memcmp(a->rec.log.data, b->rec.log.data, a->rec.log.len) != 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    size_t step = 1 + data[0] % 32;
    char *text = fuzz_exact(data + 1, size - 1);
    if (!text)
        return 0;
    struct outcome whole, pieces, bytes;
    split(text, size - 1, size, &whole);
    split(text, size - 1, step, &pieces);
    split(text, size - 1, 1, &bytes);
    same(&whole, &pieces);
    same(&whole, &bytes);
    size_t opens = 0; /* elements are scanned from depth 0: the whole text may nest 2 deeper */
    for (size_t i = 0; i + 1 < size; i++)
        opens += text[i] == '[' || text[i] == '{';
    if (whole.rc == 0 && opens < JSCAN_MAX_DEPTH - 2) {
        struct jscan s;
        struct jscan_span span;
        jscan_init(&s, text, size - 1);
        if (jscan_value_span(&s, &span) != 0 || jscan_finish(&s) != 0)
            abort();
    }
    strbuf_free(&whole.rec.log);
    strbuf_free(&pieces.rec.log);
    strbuf_free(&bytes.rec.log);
    free(text);
    return 0;
}
