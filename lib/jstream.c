/* jstream.c - a JSON object taken apart as it arrives. See jstream.h. */
#include "lib/jstream.h"

#include <string.h>

enum {
    JS_OPEN,         /* before the object's '{' */
    JS_FIRST_KEY,    /* after '{': a member or '}' */
    JS_KEY,          /* after ',': a member */
    JS_ARRAY_OPEN,   /* after "array_key": the '[' */
    JS_FIRST_ELEM,   /* after '[': an element or ']' */
    JS_ELEM,         /* after ',' in the array: an element */
    JS_AFTER_ELEM,   /* ',' or ']' */
    JS_AFTER_MEMBER, /* ',' or '}' */
    JS_DONE,         /* only whitespace may follow */
    JS_FAILED
};

static const char ERR_OBJECT[] = "expected a JSON object";
static const char ERR_KEY[] = "expected a member name";
static const char ERR_COLON[] = "expected ':' after a member name";
static const char ERR_ARRAY[] = "expected an array";
static const char ERR_OBJ_SEP[] = "expected ',' or '}' after a member";
static const char ERR_ARR_SEP[] = "expected ',' or ']' after an element";
static const char ERR_TRAILING[] = "unexpected data after the object";
static const char ERR_TOO_LARGE[] = "an element or member is larger than the limit";
static const char ERR_STOPPED[] = "stopped";
static const char ERR_EOF[] = "the text ended inside the object";
static const char ERR_OOM[] = "out of memory";

/* The text one run takes apart. */
struct pos {
    const char *p, *end; /* what is left of it */
    const char *base;    /* its first byte, for error offsets */
    int more;            /* 1: more text follows, so p == end is not the end */
};

void jstream_init(struct jstream *js, const char *array_key, jstream_element_fn on_element, jstream_member_fn on_member,
                  void *ctx, size_t max_piece)
{
    memset(js, 0, sizeof(*js));
    js->array_key = array_key;
    js->on_element = on_element;
    js->on_member = on_member;
    js->ctx = ctx;
    js->max_piece = max_piece;
    js->state = JS_OPEN;
    strbuf_init(&js->pending);
}

void jstream_free(struct jstream *js)
{
    strbuf_free(&js->pending);
}

/* The text given to a run always ends at the last byte received. */
static int fail(struct jstream *js, const struct pos *at, const char *p, const char *msg)
{
    js->error = msg;
    js->error_offset = js->received - (size_t)(at->end - p);
    js->state = JS_FAILED;
    return -1;
}

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* A scan that stopped: 0 when more text may finish it, else the error. */
static int scan_failed(struct jstream *js, const struct pos *at, const struct jscan *s)
{
    if (jscan_ran_out(s))
        return at->more ? 0 : fail(js, at, at->end, ERR_EOF);
    return fail(js, at, s->start + s->error_offset, s->error);
}

/* One value at p. 1 with its span when it is complete, 0 when more text is
 * needed, -1 on an error. */
static int scan_value(struct jstream *js, const struct pos *at, const char *p, struct jscan_span *span)
{
    struct jscan s;
    jscan_init(&s, p, (size_t)(at->end - p));
    if (jscan_value_span(&s, span) != 0)
        return scan_failed(js, at, &s);
    /* A number that runs to the end of the text may go on in the next piece. */
    char c = span->ptr[0];
    if (at->more && span->ptr + span->len == at->end && (c == '-' || (c >= '0' && c <= '9')))
        return 0;
    return 1;
}

static int hand_over(struct jstream *js, const struct pos *at, const struct jscan_str *key, const struct jscan_span *v)
{
    int rc = !key            ? js->on_element(js->ctx, v->ptr, v->len)
             : js->on_member ? js->on_member(js->ctx, key, v->ptr, v->len)
                             : 0;
    return rc == 0 ? 1 : fail(js, at, v->ptr, ERR_STOPPED);
}

/* `"key": value` at at->p. The streamed array's member stops after the
 * colon; any other member is consumed only once its value is complete, so
 * the key is still there when more text arrives. Same returns as scan_value. */
static int scan_member(struct jstream *js, struct pos *at)
{
    struct jscan s;
    struct jscan_str key;
    jscan_init(&s, at->p, (size_t)(at->end - at->p));
    if (jscan_peek(&s) != JSCAN_STRING)
        return fail(js, at, at->p, ERR_KEY);
    if (jscan_string(&s, &key) != 0)
        return scan_failed(js, at, &s);
    const char *p = skip_ws(s.pos, at->end);
    if (p == at->end)
        return at->more ? 0 : fail(js, at, p, ERR_EOF);
    if (*p != ':')
        return fail(js, at, p, ERR_COLON);
    if (jscan_key_is(&key, js->array_key)) {
        js->state = JS_ARRAY_OPEN;
        at->p = p + 1;
        return 1;
    }
    struct jscan_span v;
    int rc = scan_value(js, at, p + 1, &v);
    if (rc != 1)
        return rc;
    js->state = JS_AFTER_MEMBER;
    at->p = v.ptr + v.len;
    return hand_over(js, at, &key, &v);
}

static int scan_element(struct jstream *js, struct pos *at)
{
    struct jscan_span v;
    int rc = scan_value(js, at, at->p, &v);
    if (rc != 1)
        return rc;
    js->state = JS_AFTER_ELEM;
    at->p = v.ptr + v.len;
    return hand_over(js, at, NULL, &v);
}

/* The punctuation the state expects at p, which is not the end. */
static int take_mark(struct jstream *js, struct pos *at, char c)
{
    const char *p = at->p;
    switch (js->state) {
    case JS_OPEN:
        if (c != '{')
            return fail(js, at, p, ERR_OBJECT);
        js->state = JS_FIRST_KEY;
        break;
    case JS_ARRAY_OPEN:
        if (c != '[')
            return fail(js, at, p, ERR_ARRAY);
        js->state = JS_FIRST_ELEM;
        break;
    case JS_AFTER_ELEM:
        if (c != ',' && c != ']')
            return fail(js, at, p, ERR_ARR_SEP);
        js->state = c == ',' ? JS_ELEM : JS_AFTER_MEMBER;
        break;
    case JS_AFTER_MEMBER:
        if (c != ',' && c != '}')
            return fail(js, at, p, ERR_OBJ_SEP);
        js->state = c == ',' ? JS_KEY : JS_DONE;
        break;
    default: /* JS_DONE */
        return fail(js, at, p, ERR_TRAILING);
    }
    at->p = p + 1;
    return 1;
}

/* One step: a mark, a member or an element. Same returns as scan_value. */
static int step(struct jstream *js, struct pos *at)
{
    at->p = skip_ws(at->p, at->end);
    if (at->p == at->end)
        return at->more || js->state == JS_DONE ? 0 : fail(js, at, at->p, js->state == JS_OPEN ? ERR_OBJECT : ERR_EOF);
    char c = *at->p;
    if ((js->state == JS_FIRST_KEY && c == '}') || (js->state == JS_FIRST_ELEM && c == ']')) {
        js->state = js->state == JS_FIRST_KEY ? JS_DONE : JS_AFTER_MEMBER;
        at->p++;
        return 1;
    }
    if (js->state == JS_FIRST_KEY || js->state == JS_KEY)
        return scan_member(js, at);
    if (js->state == JS_FIRST_ELEM || js->state == JS_ELEM)
        return scan_element(js, at);
    return take_mark(js, at, c);
}

/* Take apart what [p, end) holds: the bytes consumed, or -1. */
static long run(struct jstream *js, const char *p, const char *end, int more)
{
    struct pos at = {p, end, p, more};
    int rc;
    while ((rc = step(js, &at)) == 1)
        ;
    return rc < 0 ? -1 : (long)(at.p - p);
}

/* Keep the unconsumed tail of the pending text (or of a fed piece taken
 * apart in place) for the next piece. */
static int keep_rest(struct jstream *js, const char *rest, size_t len, int in_pending)
{
    struct strbuf *b = &js->pending;
    if (len > js->max_piece) {
        struct pos at = {rest, rest + len, rest, 1};
        return fail(js, &at, rest, ERR_TOO_LARGE);
    }
    if (in_pending) {
        memmove(b->data, rest, len);
        b->len = len;
    } else {
        strbuf_reset(b);
        strbuf_append(b, rest, len);
    }
    if (strbuf_failed(b)) {
        js->error = ERR_OOM;
        js->state = JS_FAILED;
        return -1;
    }
    /* An unfinished piece is scanned again only once the text behind it has
     * doubled, so a large element costs linear time, not quadratic. */
    js->retry_at = 2 * len;
    return 0;
}

int jstream_feed(struct jstream *js, const char *data, size_t len)
{
    if (js->state == JS_FAILED)
        return -1;
    js->received += len;
    struct strbuf *b = &js->pending;
    if (b->len == 0) {
        long used = run(js, data, data + len, 1);
        return used < 0 ? -1 : keep_rest(js, data + used, len - (size_t)used, 0);
    }
    strbuf_append(b, data, len);
    if (strbuf_failed(b)) {
        js->error = ERR_OOM;
        js->state = JS_FAILED;
        return -1;
    }
    if (b->len < js->retry_at && b->len <= js->max_piece)
        return 0;
    long used = run(js, b->data, b->data + b->len, 1);
    return used < 0 ? -1 : keep_rest(js, b->data + used, b->len - (size_t)used, 1);
}

int jstream_finish(struct jstream *js)
{
    if (js->state == JS_FAILED)
        return -1;
    struct strbuf *b = &js->pending;
    const char *p = b->data ? b->data : "";
    if (run(js, p, p + b->len, 0) < 0)
        return -1;
    return 0;
}
