/* test_duration.c - lib/duration.c: Go's duration grammar and plain seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/duration.h"

#define S 1000000000LL

static void test_go_durations(void **state)
{
    (void)state;
    assert_int_equal(parse_duration_ns("1h30m"), 5400 * S);
    assert_int_equal(parse_duration_ns("2h45m30.5s"), (2 * 3600 + 45 * 60 + 30) * S + S / 2);
    assert_int_equal(parse_duration_ns("1.5s"), 1500000000);
    assert_int_equal(parse_duration_ns("300ms"), 300000000);
    assert_int_equal(parse_duration_ns("2us"), 2000);
    assert_int_equal(parse_duration_ns("2\xc2\xb5s"), 2000);
    assert_int_equal(parse_duration_ns("7ns"), 7);
    assert_int_equal(parse_duration_ns("1m0s"), 60 * S);
    assert_int_equal(parse_duration_ns(".5m"), 30 * S);
    assert_int_equal(parse_duration_ns("+10s"), 10 * S);
    assert_int_equal(parse_duration_ns("0"), 0);
    assert_int_equal(parse_duration_ns("0s"), 0);
    assert_int_equal(parse_duration_ns("2562047h"), 2562047LL * 3600 * S);
}

static void test_plain_seconds(void **state)
{
    (void)state;
    assert_int_equal(parse_duration_ns("90"), 90 * S);
    assert_int_equal(parse_duration_ns("0.5"), S / 2);
}

static void test_refused(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "+",
                         "-1s",
                         "s",
                         "1x",
                         "1.s.",
                         "1h 30m",
                         "90 s",
                         "1e3s",
                         "inf",
                         "nan",
                         "0x10",
                         "1hh",
                         "10s5",
                         ".",
                         "..5s",
                         "1m-1s",
                         "3000000h",
                         "9223372036854775808ns",
                         "2562048h",
                         NULL};
    for (int i = 0; bad[i]; i++) {
        if (parse_duration_ns(bad[i]) != -1)
            fail_msg("\"%s\" should be refused", bad[i]);
    }
    assert_int_equal(parse_duration_ns(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_go_durations),
        cmocka_unit_test(test_plain_seconds),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
