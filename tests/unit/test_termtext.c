/* test_termtext.c - control characters from the cluster are shown escaped
 * on terminals (lib/termtext.c; issue 22). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/termtext.h"

static void expect_escaped(const char *in, const char *want)
{
    char *got = term_text_escape(in);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_true(term_text_clean(got));
    assert_int_equal(term_text_clean(in), strcmp(in, want) == 0);
    free(got);
}

static void test_escapes(void **state)
{
    (void)state;
    expect_escaped("", "");
    expect_escaped("gpu-a100-0", "gpu-a100-0");
    expect_escaped("NVIDIA A100-SXM4-80GB \xc3\xa9\xe2\x80\xa6", "NVIDIA A100-SXM4-80GB \xc3\xa9\xe2\x80\xa6");
    expect_escaped("a\x1b[2Jb", "a\\x1b[2Jb");
    expect_escaped("\x1b]0;title\x07", "\\x1b]0;title\\x07");
    expect_escaped("tab\there\nnl\rcr", "tab\\x09here\\x0anl\\x0dcr");
    expect_escaped("del\x7f", "del\\x7f");
    /* C1 controls: UTF-8-encoded (U+009B, CSI) and as raw bytes (not UTF-8). */
    expect_escaped("x\xc2\x9b" "31m", "x\\u009b31m");
    expect_escaped("x\xc2\x80y\xc2\x9f", "x\\u0080y\\u009f");
    expect_escaped("raw\x9b" "31m", "raw\\x9b31m");
    /* U+00A0 and up are printable; a cut sequence is not UTF-8. */
    expect_escaped("\xc2\xa0", "\xc2\xa0");
    expect_escaped("cut\xe2\x80", "cut\\xe2\\x80");
}

static void test_json_text(void **state)
{
    (void)state;
    struct strbuf sb;
    strbuf_init(&sb);
    term_text_put_json(&sb, "{\"a\":\"x\x7fy\xc2\x9bz\xc3\xa9\"}");
    assert_string_equal(sb.data, "{\"a\":\"x\\u007fy\\u009bz\xc3\xa9\"}");
    strbuf_free(&sb);
}

static void expect_fit(size_t size, const char *in, const char *want)
{
    char buf[64];
    memset(buf, 'X', sizeof buf);
    assert_true(size <= sizeof buf);
    term_text_fit(buf, size, in);
    assert_string_equal(buf, want);
    assert_true(strlen(buf) < size);
}

static void test_fit(void **state)
{
    (void)state;
    expect_fit(64, "403 Forbidden: no", "403 Forbidden: no");
    expect_fit(64, NULL, "");
    expect_fit(64, "a\x1b[31mred\r\nb\x7f", "a [31mred  b ");   /* controls become spaces */
    expect_fit(64, "c1\xc2\x9bx\xffy", "c1 x y");                  /* C1 and invalid bytes too */
    /* Cut at a word boundary, with "...": never mid-word. */
    expect_fit(20, "403 Forbidden: configmaps is forbidden", "403 Forbidden:...");
    expect_fit(18, "403 Forbidden: xyz", "403 Forbidden:...");
    expect_fit(16, "403 Forbidden: x", "403 Forbidde...");    /* the space is too early */
    expect_fit(17, "403 Forbidden: x", "403 Forbidden: x");
    /* No space in the second half: cut at a character boundary. */
    expect_fit(10, "abcdefghijklmnop", "abcdef...");
    expect_fit(10, "abcde\xc3\xa9\xc3\xa9\xc3\xa9", "abcde...");   /* é never split */
    expect_fit(4, "abcdef", "abc");                                 /* no room for "..." */
    char one[1] = {'X'};
    term_text_fit(one, 1, "abc");
    assert_int_equal(one[0], '\0');
    term_text_fit(NULL, 10, "abc");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_json_text),
        cmocka_unit_test(test_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
