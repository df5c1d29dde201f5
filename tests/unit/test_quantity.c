/*
 * test_quantity.c - table tests for extender/quantity.c.
 *
 * Every row is parsed twice (milli-value and integer resource) from a heap
 * copy of exactly `len` bytes with no terminating NUL, so AddressSanitizer
 * and valgrind flag any read past len. Expected values follow apimachinery's
 * resource.Quantity (ParseQuantity + MilliValue/Value), except where
 * quantity.c documents a deliberate difference (reject instead of cap/wrap).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/quantity.h"

#define OK QTY_OK
#define SYN QTY_ERR_SYNTAX
#define RNG QTY_ERR_RANGE
#define FRAC QTY_ERR_FRACTION
#define NEG QTY_ERR_NEGATIVE

/* A value the parser must leave alone when it reports an error. */
#define SENTINEL ((int64_t)0x5a5a5a5a)

struct row {
    const char *text;
    int len;               /* bytes to parse; -1 means strlen(text) */
    qty_status milli_st;
    int64_t milli;         /* checked only when milli_st == QTY_OK */
    qty_status int_st;
    int64_t value;         /* checked only when int_st == QTY_OK */
};

#define ROW(t, ms, mv, is, iv) {t, -1, ms, mv, is, iv}
#define ROWN(t, n, ms, mv, is, iv) {t, n, ms, mv, is, iv}
#define BAD(t) {t, -1, SYN, 0, SYN, 0}

static const struct row rows[] = {
    /* decimal SI suffixes; sub-milli rounds up (MilliValue) */
    ROW("1n", OK, 1, FRAC, 0),
    ROW("1u", OK, 1, FRAC, 0),
    ROW("1500u", OK, 2, FRAC, 0),
    ROW("1000000n", OK, 1, FRAC, 0),
    ROW("1000000000n", OK, 1000, OK, 1),
    ROW("500m", OK, 500, FRAC, 0),
    ROW("2000m", OK, 2000, OK, 2),
    ROW("0", OK, 0, OK, 0),
    ROW("1", OK, 1000, OK, 1),
    ROW("1k", OK, 1000000, OK, 1000),
    ROW("1.5k", OK, 1500000, OK, 1500),
    ROW("3M", OK, 3000000000LL, OK, 3000000),
    ROW("2G", OK, 2000000000000LL, OK, 2000000000LL),
    ROW("1T", OK, 1000000000000000LL, OK, 1000000000000LL),
    ROW("1P", OK, 1000000000000000000LL, OK, 1000000000000000LL),
    ROW("1E", RNG, 0, OK, 1000000000000000000LL),
    ROW("9E", RNG, 0, OK, 9000000000000000000LL),
    ROW("10E", RNG, 0, RNG, 0),
    ROW("0E", OK, 0, OK, 0),
    /* binary SI suffixes */
    ROW("1Ki", OK, 1024000, OK, 1024),
    ROW("1Mi", OK, 1048576000LL, OK, 1048576),
    ROW("1Gi", OK, 1073741824000LL, OK, 1073741824LL),
    ROW("1Ti", OK, 1099511627776000LL, OK, 1099511627776LL),
    ROW("1Pi", OK, 1125899906842624000LL, OK, 1125899906842624LL),
    ROW("1Ei", RNG, 0, OK, 1152921504606846976LL),
    ROW("7Ei", RNG, 0, OK, 8070450532247928832LL),
    ROW("8Ei", RNG, 0, RNG, 0), /* 2^63: apimachinery caps it, we reject */
    ROW("100Ei", RNG, 0, RNG, 0),
    ROW("1.5Gi", OK, 1610612736000LL, OK, 1610612736LL),
    ROW("0.5Ki", OK, 512000, OK, 512),
    ROW("0.001Ki", OK, 1024, FRAC, 0),
    ROW(".000000000001Ki", OK, 1, FRAC, 0),
    ROW("100.035Ki", OK, 102435840, FRAC, 0),
    ROW("-1Ki", OK, -1024000, NEG, 0),
    /* decimal exponents */
    ROW("1e3", OK, 1000000, OK, 1000),
    ROW("1E3", OK, 1000000, OK, 1000),
    ROW("1e2", OK, 100000, OK, 100),
    ROW("5e+2", OK, 500000, OK, 500),
    ROW("1E-3", OK, 1, FRAC, 0),
    ROW("1e-1", OK, 100, FRAC, 0),
    ROW("1e-4", OK, 1, FRAC, 0),
    ROW("1.2e3", OK, 1200000, OK, 1200),
    ROW("12e-1", OK, 1200, FRAC, 0),
    ROW("1.3E+6", OK, 1300000000LL, OK, 1300000),
    ROW("1e05", OK, 100000000LL, OK, 100000),
    ROW("1e18", RNG, 0, OK, 1000000000000000000LL),
    ROW("1e15", OK, 1000000000000000000LL, OK, 1000000000000000LL),
    ROW("1e99999", RNG, 0, RNG, 0),
    ROW("1e4294967296", RNG, 0, RNG, 0), /* not narrowed to int32 (== e0) */
    ROW("1e9223372036854775807", RNG, 0, RNG, 0),
    ROW("1e-9223372036854775808", OK, 1, FRAC, 0),
    ROW("1e9223372036854775808", SYN, 0, SYN, 0), /* ParseInt fails */
    ROW("1e-9999999999", OK, 1, FRAC, 0),
    ROW("-1e-9999999999", OK, -1, NEG, 0),
    ROW("0e99999", OK, 0, OK, 0),
    ROW("0.0e-5", OK, 0, OK, 0),
    /* signs */
    ROW("+5", OK, 5000, OK, 5),
    ROW("-5", OK, -5000, NEG, 0),
    ROW("-1", OK, -1000, NEG, 0),
    ROW("-0", OK, 0, OK, 0),
    ROW("+0.000", OK, 0, OK, 0),
    ROW("-1500u", OK, -2, NEG, 0), /* away from zero */
    ROW("-1n", OK, -1, NEG, 0),
    ROW("-0.5", OK, -500, NEG, 0),
    ROW("-2000m", OK, -2000, NEG, 0),
    /* number forms: <digits>.<digits> | <digits>. | .<digits> */
    ROW(".5", OK, 500, FRAC, 0),
    ROW("5.", OK, 5000, OK, 5),
    ROW("1.G", OK, 1000000000000LL, OK, 1000000000LL),
    ROW(".001", OK, 1, FRAC, 0),
    ROW(".0001k", OK, 100, FRAC, 0),
    ROW("0.1", OK, 100, FRAC, 0),
    ROW("1.0005", OK, 1001, FRAC, 0),
    ROW("1.000", OK, 1000, OK, 1),
    ROW("007", OK, 7000, OK, 7),
    ROW("100.035k", OK, 100035000, OK, 100035),
    ROW("0.00000012345", OK, 1, FRAC, 0),
    ROW("3.001n", OK, 1, FRAC, 0),
    ROW("10.035M", OK, 10035000000LL, OK, 10035000),
    ROW("123456789012345678901234567890e-25", OK, 12345679, FRAC, 0),
    /* int64 boundaries */
    ROW("9223372036854775807", RNG, 0, OK, INT64_MAX),
    ROW("9223372036854775808", RNG, 0, RNG, 0),
    ROW("9223372036854775807m", OK, INT64_MAX, FRAC, 0),
    ROW("9223372036854775808m", RNG, 0, FRAC, 0),
    ROW("9223372036854775.807", OK, INT64_MAX, FRAC, 0),
    ROW("9223372036854775.8071", RNG, 0, FRAC, 0), /* rounds up past max */
    ROW("-9223372036854775808m", OK, INT64_MIN, NEG, 0),
    ROW("-9223372036854775809m", RNG, 0, NEG, 0),
    ROW("9223372036854775807000000n", OK, INT64_MAX, FRAC, 0),
    ROW("99999999999999999999999", RNG, 0, RNG, 0),
    ROW("8589934591Gi", RNG, 0, OK, 9223372035781033984LL),
    /* malformed: grammar, case-sensitive suffixes, no whitespace */
    BAD(""),
    BAD(" 5"),
    BAD("5 "),
    BAD("1.5.5"),
    BAD("1.1.M"),
    BAD("1Kii"),
    BAD("1KI"),
    BAD("1ki"),
    BAD("1K"),
    BAD("1i"),
    BAD(".5i"),
    BAD("0.1mi"),
    BAD("0.1am"),
    BAD("1mm"),
    BAD("1Gi5"),
    BAD("aoeu"),
    BAD("1+1.0M"),
    BAD("--1"),
    BAD("+-1"),
    BAD("0x10"),
    BAD("1,5"),
    BAD("1e"),
    BAD("1e+"),
    BAD("-3.01e-"),
    BAD("1ee5"),
    BAD("1e5m"),
    BAD("1e 5"),
    BAD("1e5.5"),
    BAD("."),
    BAD("-"),
    BAD("+"),
    BAD("-."),
    BAD("m"),
    BAD("Ki"),
    BAD("e3"),
    {"5\0", 2, SYN, 0, SYN, 0}, /* embedded NUL inside len */
    /* not NUL-terminated: only the first len bytes count */
    ROWN("15Gi", 2, OK, 15000, OK, 15),
    ROWN("1.5k", 3, OK, 1500, FRAC, 0),
    ROWN("2000m", 4, OK, 2000000, OK, 2000),
    ROWN("5xyz", 1, OK, 5000, OK, 5),
    ROWN("1Ki", 2, SYN, 0, SYN, 0),
    ROWN("1e3", 2, SYN, 0, SYN, 0),
    ROWN("-7", 1, SYN, 0, SYN, 0),
    ROWN("500", 0, SYN, 0, SYN, 0),
};

#define N_ROWS (sizeof rows / sizeof rows[0])

typedef qty_status (*parse_fn)(const char *, size_t, int64_t *);

/* Parse from an exact-size heap copy, so any read past len is caught. */
static qty_status parse_exact(parse_fn fn, const char *text, size_t len, int64_t *out)
{
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, text, len);
    qty_status st = fn(copy, len, out);
    free(copy);
    return st;
}

static size_t row_len(const struct row *r)
{
    return r->len < 0 ? strlen(r->text) : (size_t)r->len;
}

/* One parse against its expectation; prints the row on mismatch. */
static int check(const char *what, parse_fn fn, const struct row *r,
                 qty_status want_st, int64_t want)
{
    size_t len = row_len(r);
    int64_t got = SENTINEL;
    qty_status st = parse_exact(fn, r->text, len, &got);
    int64_t expect = want_st == QTY_OK ? want : SENTINEL;
    if (st == want_st && got == expect)
        return 0;
    print_error("%s(\"%.*s\", %zu): got %s / %lld, want %s / %lld\n", what,
                (int)len, r->text, len, quantity_status_text(st), (long long)got,
                quantity_status_text(want_st), (long long)expect);
    return 1;
}

static void test_table_milli(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < N_ROWS; i++)
        failures += check("milli", quantity_parse_milli, &rows[i], rows[i].milli_st,
                          rows[i].milli);
    assert_int_equal(failures, 0);
}

static void test_table_int(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < N_ROWS; i++)
        failures += check("int", quantity_parse_int, &rows[i], rows[i].int_st,
                          rows[i].value);
    assert_int_equal(failures, 0);
}

/* Build prefix + `count` copies of c + suffix in a fresh exact-size buffer. */
static char *repeat(const char *prefix, char c, size_t count, const char *suffix,
                    size_t *len)
{
    size_t np = strlen(prefix), ns = strlen(suffix);
    *len = np + count + ns;
    char *buf = malloc(*len);
    assert_non_null(buf);
    memcpy(buf, prefix, np);
    memset(buf + np, c, count);
    memcpy(buf + np + count, suffix, ns);
    return buf;
}

struct long_case {
    const char *prefix;
    char fill;
    size_t count;
    const char *suffix;
    qty_status milli_st;
    int64_t milli;
    qty_status int_st;
    int64_t value;
};

/* Thousands of digits: no silent overflow, no quadratic blow-up. */
static void test_long_digit_strings(void **state)
{
    (void)state;
    static const struct long_case cases[] = {
        {"", '0', 5000, "1", OK, 1000, OK, 1},
        {"1", '0', 5000, "", RNG, 0, RNG, 0},
        {"0.", '0', 5000, "1", OK, 1, FRAC, 0},
        {"1.", '0', 5000, "", OK, 1000, OK, 1},
        {"1", '0', 5000, "e-5000", OK, 1000, OK, 1},
        {"1", '0', 5000, "e-5003", OK, 1, FRAC, 0},
        {"-0.", '0', 5000, "1Ki", OK, -1, NEG, 0},
        {"", '9', 5000, "", RNG, 0, RNG, 0},
        {"0.", '9', 5000, "", OK, 1000, FRAC, 0},
        {"1e", '0', 5000, "3", OK, 1000000, OK, 1000},
        {"1e", '9', 30, "", SYN, 0, SYN, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct long_case *c = &cases[i];
        size_t len;
        char *buf = repeat(c->prefix, c->fill, c->count, c->suffix, &len);
        int64_t milli = SENTINEL, value = SENTINEL;
        qty_status ms = quantity_parse_milli(buf, len, &milli);
        qty_status is = quantity_parse_int(buf, len, &value);
        free(buf);
        if (ms != c->milli_st || is != c->int_st)
            print_error("long case %zu: got %s / %s\n", i, quantity_status_text(ms),
                        quantity_status_text(is));
        assert_int_equal(ms, c->milli_st);
        assert_int_equal(is, c->int_st);
        assert_int_equal(milli, c->milli_st == OK ? c->milli : SENTINEL);
        assert_int_equal(value, c->int_st == OK ? c->value : SENTINEL);
    }
}

static void test_null_arguments(void **state)
{
    (void)state;
    int64_t v = SENTINEL;
    assert_int_equal(quantity_parse_milli(NULL, 0, &v), QTY_ERR_SYNTAX);
    assert_int_equal(quantity_parse_int(NULL, 3, &v), QTY_ERR_SYNTAX);
    assert_int_equal(v, SENTINEL);
    /* A NULL result pointer only validates. */
    assert_int_equal(quantity_parse_milli("1Ki", 3, NULL), QTY_OK);
    assert_int_equal(quantity_parse_int("0.5", 3, NULL), QTY_ERR_FRACTION);
    assert_int_equal(quantity_parse_int("0", 1, NULL), QTY_OK);
}

static void test_status_text(void **state)
{
    (void)state;
    static const qty_status all[] = {QTY_OK, QTY_ERR_SYNTAX, QTY_ERR_RANGE,
                                     QTY_ERR_FRACTION, QTY_ERR_NEGATIVE};
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        const char *t = quantity_status_text(all[i]);
        assert_non_null(t);
        assert_true(strlen(t) > 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(t, quantity_status_text(all[j]));
    }
    assert_string_equal(quantity_status_text(QTY_ERR_SYNTAX), "not a valid quantity");
    assert_non_null(quantity_status_text((qty_status)42));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_milli),
        cmocka_unit_test(test_table_int),
        cmocka_unit_test(test_long_digit_strings),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_status_text),
    };
    printf("quantity table: %zu rows\n", N_ROWS);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
