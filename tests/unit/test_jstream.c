/* test_jstream.c - unit tests for lib/jstream.c: the same pieces however the
 * text is cut, errors where the text is wrong, limits and stops. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/jstream.h"
#include "lib/strbuf.h"

/* What the callbacks saw, as one line per piece: "E <text>" or "M <key>=<text>". */
struct seen {
    struct strbuf log;
    int stop_after; /* stop at this element (1-based); 0: never */
    int elements;
};

static int on_element(void *ctx, const char *text, size_t len)
{
    struct seen *s = ctx;
    strbuf_puts(&s->log, "E ");
    strbuf_append(&s->log, text, len);
    strbuf_putc(&s->log, '\n');
    return ++s->elements == s->stop_after;
}

static int on_member(void *ctx, const struct jscan_str *key, const char *text, size_t len)
{
    struct seen *s = ctx;
    strbuf_puts(&s->log, "M ");
    strbuf_append(&s->log, key->ptr, key->len);
    strbuf_putc(&s->log, '=');
    strbuf_append(&s->log, text, len);
    strbuf_putc(&s->log, '\n');
    return 0;
}

/* Feed text in pieces of `step` bytes (0: all at once); 0 or -1. On return
 * s->log holds what was handed over; *error the message, if any. */
static int split(const char *text, size_t step, struct seen *s, const char **error, size_t *offset,
                 size_t max_piece)
{
    struct jstream js;
    strbuf_init(&s->log);
    s->elements = 0;
    jstream_init(&js, "items", on_element, on_member, s, max_piece);
    size_t len = strlen(text), at = 0;
    int rc = 0;
    while (rc == 0 && at < len) {
        size_t n = step && len - at > step ? step : len - at;
        rc = jstream_feed(&js, text + at, n);
        at += n;
    }
    if (rc == 0)
        rc = jstream_finish(&js);
    *error = js.error;
    *offset = js.error_offset;
    jstream_free(&js);
    return rc;
}

static const char LIST[] = " {\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"12\",\"x\":[1,{}]},\n"
                           "\"items\": [ {\"a\":\"}]\\\"\"}, [1,2], 17, -3.5e2, \"s\\u0041\", true, null,"
                           " {\"b\":{\"c\":[[]]}} ],\"n\":1234 , \"e\\\"k\":{} } \n";
static const char LIST_SEEN[] = "M kind=\"PodList\"\n"
                                "M metadata={\"resourceVersion\":\"12\",\"x\":[1,{}]}\n"
                                "E {\"a\":\"}]\\\"\"}\n"
                                "E [1,2]\n"
                                "E 17\n"
                                "E -3.5e2\n"
                                "E \"s\\u0041\"\n"
                                "E true\n"
                                "E null\n"
                                "E {\"b\":{\"c\":[[]]}}\n"
                                "M n=1234\n"
                                "M e\\\"k={}\n";

/* Every way of cutting the text into equal pieces gives the same pieces. */
static void test_same_pieces_for_every_cut(void **state)
{
    (void)state;
    for (size_t step = 0; step <= sizeof(LIST); step++) {
        struct seen s = {0};
        const char *err;
        size_t off;
        assert_int_equal(split(LIST, step, &s, &err, &off, 1 << 20), 0);
        assert_null(err);
        assert_string_equal(s.log.data, LIST_SEEN);
        strbuf_free(&s.log);
    }
}

static void test_empty_containers(void **state)
{
    (void)state;
    struct seen s = {0};
    const char *err;
    size_t off;
    for (size_t step = 0; step < 4; step++) {
        assert_int_equal(split("{}", step, &s, &err, &off, 64), 0);
        assert_true(s.log.len == 0);
        strbuf_free(&s.log);
        assert_int_equal(split("{\"items\":[]}", step, &s, &err, &off, 64), 0);
        assert_true(s.log.len == 0);
        strbuf_free(&s.log);
    }
}

struct bad {
    const char *text;
    const char *error_part;
    size_t offset;
};

/* Wrong texts fail where they go wrong, however they are cut; nothing after
 * the error is handed over. */
static void test_errors(void **state)
{
    (void)state;
    static const struct bad cases[] = {
        {"", "expected a JSON object", 0},
        {"  [1]", "expected a JSON object", 2},
        {"{\"items\":[1,2]", "ended inside", 14},
        {"{\"items\":[1,2}", "expected ',' or ']'", 13},
        {"{\"items\":{}}", "expected an array", 9},
        {"{\"items\":[1,]}", "", 12},
        {"{\"a\" 1}", "expected ':'", 5},
        {"{1:2}", "expected a member name", 1},
        {"{\"a\":1,}", "expected a member name", 7},
        {"{\"a\":1 \"b\":2}", "expected ',' or '}'", 7},
        {"{\"a\":tru}", "invalid literal", 8},
        {"{\"a\":\"x}", "ended inside", 8},
        {"{\"items\":[01]}", "leading zero", 10},
        {"{} {}", "unexpected data after", 3},
        {"{\"items\":[{\"a\":1}", "ended inside", 17},
        {"{\"a\":\"\x01\"}", "control character", 6},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (size_t step = 0; step < 3; step++) {
            struct seen s = {0};
            const char *err;
            size_t off;
            assert_int_equal(split(cases[i].text, step, &s, &err, &off, 64), -1);
            assert_non_null(err);
            if (!strstr(err, cases[i].error_part) || off != cases[i].offset)
                fail_msg("case %zu (%s), step %zu: \"%s\" at %zu", i, cases[i].text, step, err, off);
            strbuf_free(&s.log);
        }
    }
}

static void test_piece_limit(void **state)
{
    (void)state;
    struct seen s = {0};
    const char *err;
    size_t off;
    const char *text = "{\"items\":[\"0123456789\",\"01234567890123456789\"]}";
    for (size_t step = 1; step < 6; step++) {
        assert_int_equal(split(text, step, &s, &err, &off, 16), -1);
        assert_string_equal(err, "an element or member is larger than the limit");
        assert_string_equal(s.log.data, "E \"0123456789\"\n"); /* the first still went through */
        strbuf_free(&s.log);
    }
    assert_int_equal(split(text, 3, &s, &err, &off, 22), 0);
    strbuf_free(&s.log);
}

static void test_stop(void **state)
{
    (void)state;
    struct seen s = {.stop_after = 2};
    const char *err;
    size_t off;
    assert_int_equal(split("{\"items\":[1 ,2,3]}", 0, &s, &err, &off, 64), -1);
    assert_string_equal(err, "stopped");
    assert_int_equal(off, 13);
    assert_string_equal(s.log.data, "E 1\nE 2\n");
    strbuf_free(&s.log);
}

/* A long element arriving byte by byte is rescanned only when the text
 * behind it has doubled: it still arrives whole. */
static void test_long_element_in_small_pieces(void **state)
{
    (void)state;
    struct strbuf t;
    strbuf_init(&t);
    strbuf_puts(&t, "{\"items\":[\"");
    for (int i = 0; i < 50000; i++)
        strbuf_putc(&t, (char)('a' + i % 26));
    strbuf_puts(&t, "\",7]}");
    assert_false(strbuf_failed(&t));
    struct seen s = {0};
    const char *err;
    size_t off;
    assert_int_equal(split(t.data, 1, &s, &err, &off, 1 << 20), 0);
    assert_int_equal(s.elements, 2);
    assert_int_equal(s.log.len, 2 + 50002 + 1 + 4);
    strbuf_free(&s.log);
    strbuf_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_pieces_for_every_cut),
        cmocka_unit_test(test_empty_containers),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_piece_limit),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_long_element_in_small_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
