/*
 * test_textlog.c - lib/log.c and strbuf_text_escaped: one message is one
 * line, whatever the values interpolated into it hold (issue 10, item 6).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/log.h"
#include "lib/strbuf.h"

static char *escaped(const char *s, size_t len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_text_escaped(&sb, s, len);
    strbuf_putc(&sb, '\0');
    return strbuf_detach(&sb, NULL);
}

static void check(const char *in, size_t len, const char *want)
{
    char *got = escaped(in, len);
    assert_string_equal(got, want);
    free(got);
}

static void test_escapes(void **state)
{
    (void)state;
    check("plain text, nothing to do", 25, "plain text, nothing to do");
    check("a\nb\rc\td", 7, "a\\nb\\rc\\td");
    check("esc\x1b[31m", 8, "esc\\x1b[31m");
    check("nul\0x", 5, "nul\\x00x");
    check("del\x7f", 4, "del\\x7f");
    /* C1 controls in UTF-8 (U+0085 NEL, U+009B CSI) are escaped byte by byte. */
    check("a\xc2\x85" "b\xc2\x9b" "c", 7, "a\\xc2\\x85b\\xc2\\x9bc");
    /* Printable non-ASCII stays as it is: U+00A0, e-acute, the euro sign, an emoji. */
    check("\xc2\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 11, "\xc2\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    /* Invalid UTF-8: a lone continuation byte, a cut sequence, an overlong NUL. */
    check("x\x9by", 3, "x\\x9by");
    check("cut\xe2\x82", 5, "cut\\xe2\\x82");
    check("\xc0\x80", 2, "\\xc0\\x80");
    /* A backslash is text, not an escape. */
    check("a\\nb", 4, "a\\nb");
}

/* The pod name through log_msg, as the text format writes it. */
static void test_log_line(void **state)
{
    (void)state;
    char path[] = "/tmp/gqa-textlog-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    log_configure(LOG_INFO, 0);
    log_info("pod %s assigned", "default/evil\n2026-11-24T00:00:00.000Z info  FORGED LINE\x1b[31m");
    dup2(saved, STDERR_FILENO);
    close(saved);
    char buf[512] = {0};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    char *nl = strchr(buf, '\n');
    assert_non_null(nl);
    assert_int_equal(nl - buf + 1, n); /* exactly one line */
    assert_null(strchr(buf, '\x1b'));
    assert_non_null(strstr(buf, " info  pod default/evil\\n2026-11-24T00:00:00.000Z info  FORGED LINE\\x1b[31m "
                                "assigned\n"));
}

/* What one call writes to stderr in the given format (malloc'd). */
static char *captured(int format, void (*write_line)(void))
{
    char path[] = "/tmp/gqa-textlog-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    log_configure(LOG_INFO, format);
    write_line();
    log_configure(LOG_INFO, LOG_FORMAT_TEXT);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *buf = calloc(1, 1024);
    assert_non_null(buf);
    ssize_t n = pread(fd, buf, 1023, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    char *nl = strchr(buf, '\n');
    assert_non_null(nl);
    assert_int_equal(nl - buf + 1, n); /* exactly one line */
    return buf;
}

static void decision_line(void)
{
    log_fields(LOG_INFO, "pod bound", "pod", "default/p\"x=\"y\nFORGED", "node", "n1", "gpus", "0,1", "reason", NULL);
}

static void klog_warning(void)
{
    log_warn("bind %s failed", "default/q");
}

static void test_klog_and_fields(void **state)
{
    (void)state;
    char *line = captured(LOG_FORMAT_KLOG, decision_line);
    /* I1127 07:35:33.838001   21912 test_textlog.c:123] "pod bound" pod=... */
    assert_int_equal(line[0], 'I');
    int mm, dd, h, mi, sec, us, tid, at;
    char file[64];
    assert_int_equal(sscanf(line + 1, "%2d%2d %2d:%2d:%2d.%6d %d %63[^:]:%d] ", &mm, &dd, &h, &mi, &sec, &us, &tid, file,
                            &at),
                     9);
    assert_string_equal(file, "test_textlog.c");
    assert_non_null(strstr(line, "] \"pod bound\" pod=\"default/p\\\"x=\\\"y\\nFORGED\" node=\"n1\" gpus=\"0,1\" "
                                 "reason=\"\"\n"));
    free(line);
    line = captured(LOG_FORMAT_KLOG, klog_warning);
    assert_int_equal(line[0], 'W');
    assert_non_null(strstr(line, "] \"bind default/q failed\"\n"));
    free(line);
    line = captured(LOG_FORMAT_JSON, decision_line);
    assert_non_null(strstr(line, "\"msg\":\"pod bound\",\"pod\":\"default/p\\\"x=\\\"y\\nFORGED\",\"node\":\"n1\","
                                 "\"gpus\":\"0,1\",\"reason\":\"\"}\n"));
    free(line);
    line = captured(LOG_FORMAT_TEXT, decision_line);
    assert_non_null(strstr(line, " info  pod bound pod=\"default/p\\\"x=\\\"y\\nFORGED\" node=\"n1\""));
    free(line);
}

static void test_formats_and_verbosity(void **state)
{
    (void)state;
    int f = -1;
    assert_int_equal(log_parse_format("klog", &f), 0);
    assert_int_equal(f, LOG_FORMAT_KLOG);
    assert_int_equal(log_parse_format("json", &f), 0);
    assert_int_equal(f, LOG_FORMAT_JSON);
    assert_int_equal(log_parse_format("logfmt", &f), -1);
    assert_int_equal(log_level_of_verbosity(0), LOG_INFO);
    assert_int_equal(log_level_of_verbosity(3), LOG_INFO);
    assert_int_equal(log_level_of_verbosity(4), LOG_DEBUG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_log_line),
        cmocka_unit_test(test_klog_and_fields),
        cmocka_unit_test(test_formats_and_verbosity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
