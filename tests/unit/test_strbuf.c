/* test_strbuf.c - unit tests for lib/strbuf.c: appends, the in-place
 * writer pair, the size cap, failure, escaping and detach. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/strbuf.h"

static void test_appends_keep_a_terminator(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "ab");
    strbuf_putc(&sb, 'c');
    strbuf_append(&sb, "dxyz", 1);
    strbuf_printf(&sb, "%d-%s", 42, "e");
    strbuf_put_i64(&sb, INT64_MIN);
    assert_string_equal(sb.data, "abcd42-e-9223372036854775808");
    assert_int_equal(sb.len, strlen(sb.data));
    assert_false(strbuf_failed(&sb));
    strbuf_reset(&sb);
    assert_int_equal(sb.len, 0);
    assert_string_equal(sb.data, "");
    strbuf_free(&sb);
}

static void test_growth_past_the_first_block(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < 10000; i++)
        strbuf_putc(&sb, (char)('a' + i % 26));
    assert_int_equal(sb.len, 10000);
    assert_int_equal(sb.data[9999], 'a' + 9999 % 26);
    assert_int_equal(sb.data[10000], '\0');
    strbuf_free(&sb);
}

/* strbuf_begin/strbuf_commit: room for at most n bytes, the length and
 * terminator set from the end the writer reached. */
static void test_begin_commit(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "x=");
    char *w = strbuf_begin(&sb, 1000);
    assert_non_null(w);
    assert_ptr_equal(w, sb.data + 2);
    memcpy(w, "hello", 5);
    strbuf_commit(&sb, w + 5); /* fewer bytes than reserved */
    assert_int_equal(sb.len, 7);
    assert_string_equal(sb.data, "x=hello");
    /* Copying the buffer's own bytes: begin may move it, read after. */
    w = strbuf_begin(&sb, sb.len);
    memcpy(w, sb.data, 7);
    strbuf_commit(&sb, w + 7);
    assert_string_equal(sb.data, "x=hellox=hello");
    strbuf_free(&sb);
}

static void test_fail_makes_appends_no_ops(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "kept");
    strbuf_fail(&sb);
    assert_true(strbuf_failed(&sb));
    strbuf_puts(&sb, "dropped");
    assert_null(strbuf_begin(&sb, 1));
    assert_int_equal(sb.len, 4);
    size_t len = 99;
    assert_null(strbuf_detach(&sb, &len)); /* detach of a failed buffer frees it */
    assert_null(sb.data);
}

/* The cap: content up to max bytes is fine, one more fails like OOM,
 * through every way of growing (append, printf, begin, reserve_exact). */
static void test_cap(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_set_max(&sb, 300);
    for (int i = 0; i < 300; i++)
        strbuf_putc(&sb, 'a');
    assert_false(strbuf_failed(&sb));
    assert_int_equal(sb.len, 300);
    assert_true(sb.cap <= 301); /* never grown past the cap: the inline paths cannot pass it */
    strbuf_putc(&sb, 'b');
    assert_true(strbuf_failed(&sb));
    assert_int_equal(sb.len, 300);
    strbuf_reset(&sb); /* reset keeps the cap */
    strbuf_printf(&sb, "%400s", "");
    assert_true(strbuf_failed(&sb));
    strbuf_reset(&sb);
    assert_null(strbuf_begin(&sb, 301));
    strbuf_reset(&sb);
    assert_non_null(strbuf_begin(&sb, 300));
    assert_int_equal(strbuf_reserve_exact(&sb, 301), -1);
    strbuf_free(&sb);
    /* No cap after free/init: a large append succeeds. */
    strbuf_puts(&sb, "");
    char *w = strbuf_begin(&sb, 100000);
    assert_non_null(w);
    memset(w, 'z', 100000);
    strbuf_commit(&sb, w + 100000);
    assert_int_equal(sb.len, 100000);
    strbuf_free(&sb);
}

static void test_json_string_escapes(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_json_string(&sb, "a\"b\\c\nd\x01");
    assert_string_equal(sb.data, "\"a\\\"b\\\\c\\nd\\u0001\"");
    strbuf_reset(&sb);
    strbuf_json_string_n(&sb, "\xff", 1); /* not UTF-8 */
    assert_string_equal(sb.data, "\"\\ufffd\"");
    strbuf_reset(&sb);
    strbuf_text_escaped(&sb, "x\ry\x7f", 4);
    assert_string_equal(sb.data, "x\\ry\\x7f");
    strbuf_free(&sb);
}

static void test_detach_of_empty_buffer_is_an_empty_string(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    size_t len = 99;
    char *s = strbuf_detach(&sb, &len);
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);
}

static void test_format_helpers(void **state)
{
    (void)state;
    char *s = strbuf_format("%s/%d", "ns", 7);
    assert_string_equal(s, "ns/7");
    free(s);
    s = strbuf_join2("ns", '\x1f', "model");
    assert_memory_equal(s, "ns\x1fmodel", 9);
    free(s);
    char *err = NULL;
    assert_int_equal(strbuf_set_error(&err, "bad %s", "thing"), -1);
    assert_string_equal(err, "bad thing");
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends_keep_a_terminator),
        cmocka_unit_test(test_growth_past_the_first_block),
        cmocka_unit_test(test_begin_commit),
        cmocka_unit_test(test_fail_makes_appends_no_ops),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_json_string_escapes),
        cmocka_unit_test(test_detach_of_empty_buffer_is_an_empty_string),
        cmocka_unit_test(test_format_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
