/*
 * quantity.c - exact parsing of Kubernetes resource quantities.
 *
 * A quantity is read as  sign * S * 10^q * 2^b  where S is the run of
 * significant digits of the number (leading and trailing zeros dropped), q
 * collects the position of S, a decimal suffix or exponent and the requested
 * output scale, and b is a binary suffix's power of two. The result is formed
 * with checked unsigned 64-bit arithmetic only: no floating point, no
 * allocation, and no read past len (the text need not be NUL-terminated).
 *
 * Deliberate choices where apimachinery's implementation is looser than its
 * documented grammar (see quantity.h):
 *   - a number must contain a digit: ".", "-", "+", "m", "Ki" are syntax
 *     errors (apimachinery's fast scanner happens to read them as zero);
 *   - out-of-range values are rejected, never capped ("9Ei" is capped to
 *     2^63-1 by apimachinery) and never wrapped (MilliValue() overflows);
 *   - an exponent is applied exactly (apimachinery narrows it to int32).
 */
#include "lib/quantity.h"

#include <string.h>

/* Exponents are kept within +-2^62 so adding a digit count or the milli
 * scale never overflows int64; anything that far out is out of range (or
 * rounds to the minimum) whatever its exact value, so clamping is lossless. */
#define QTY_EXP_LIMIT ((int64_t)1 << 62)

/* 10^19 > 2^64 > 2^63 >= any result, so 19 significant digits in front of
 * the decimal point already mean out of range. */
#define QTY_MAX_INT_DIGITS 19

/* The number as scanned, with the text split into its parts. */
struct qty_num {
    int negative;
    const char *int_digits; /* digits before '.', possibly none */
    size_t n_int;
    const char *frac_digits; /* digits after '.', possibly none */
    size_t n_frac;
    int64_t dec_exp;  /* from a decimal suffix or e/E exponent */
    unsigned bin_exp; /* from a binary suffix (Ki = 10 ... Ei = 60) */
};

/* The significant digits S of a parsed number: indices [first, last] into
 * the concatenation of the integer and fraction digits. */
struct qty_sig {
    const struct qty_num *num;
    size_t first;
    size_t last;
};

struct qty_suffix {
    const char *text;
    int dec_exp;
    unsigned bin_exp;
};

/* Exact-case suffixes, as apimachinery's suffixer tables define them. */
static const struct qty_suffix qty_suffixes[] = {
    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"", 0, 0},    {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
    {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static size_t count_digits(const char *p, size_t len)
{
    size_t n = 0;
    while (n < len && is_digit(p[n]))
        n++;
    return n;
}

static int64_t clamp_exp(int64_t v)
{
    if (v > QTY_EXP_LIMIT)
        return QTY_EXP_LIMIT;
    if (v < -QTY_EXP_LIMIT)
        return -QTY_EXP_LIMIT;
    return v;
}

/* A digit count as an exponent term; counts beyond 2^62 cannot occur in
 * memory, but the clamp keeps the arithmetic defined regardless. */
static int64_t size_exp(size_t n)
{
    return n > (size_t)QTY_EXP_LIMIT ? QTY_EXP_LIMIT : (int64_t)n;
}

/* "e" or "E", an optional sign, then at least one digit: the value must fit
 * int64, as apimachinery reads it with strconv.ParseInt (else ErrSuffix). */
static int parse_exponent(const char *p, size_t len, int64_t *exp)
{
    size_t i = 1;
    int negative = 0;
    if (i < len && (p[i] == '+' || p[i] == '-'))
        negative = p[i++] == '-';
    if (i == len)
        return 0;
    /* Accumulate the magnitude; -2^63 is the one value with no positive twin. */
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t mag = 0;
    for (; i < len; i++) {
        if (!is_digit(p[i]))
            return 0;
        unsigned d = (unsigned)(p[i] - '0');
        if (mag > (limit - d) / 10)
            return 0;
        mag = mag * 10 + d;
    }
    if (negative)
        *exp = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    else
        *exp = (int64_t)mag;
    return 1;
}

/* Classify everything after the number; the whole rest must be one suffix. */
static int parse_suffix(const char *p, size_t len, struct qty_num *num)
{
    for (size_t i = 0; i < sizeof qty_suffixes / sizeof qty_suffixes[0]; i++) {
        const struct qty_suffix *s = &qty_suffixes[i];
        if (strlen(s->text) == len && memcmp(s->text, p, len) == 0) {
            num->dec_exp = s->dec_exp;
            num->bin_exp = s->bin_exp;
            return 1;
        }
    }
    /* Table first: a lone "E" is exa, "E3" an exponent, a lone "e" nothing. */
    if (len >= 2 && (p[0] == 'e' || p[0] == 'E')) {
        num->bin_exp = 0;
        return parse_exponent(p, len, &num->dec_exp);
    }
    return 0;
}

/* signedNumber suffix: [+-] digits [. digits] suffix, with a digit somewhere
 * in the number. No whitespace anywhere, as in apimachinery. */
static int scan_quantity(const char *text, size_t len, struct qty_num *num)
{
    size_t pos = 0;
    memset(num, 0, sizeof *num);
    if (text == NULL || len == 0)
        return 0;
    if (text[0] == '+' || text[0] == '-')
        num->negative = text[pos++] == '-';
    num->int_digits = text + pos;
    num->n_int = count_digits(text + pos, len - pos);
    pos += num->n_int;
    if (pos < len && text[pos] == '.') {
        pos++;
        num->frac_digits = text + pos;
        num->n_frac = count_digits(text + pos, len - pos);
        pos += num->n_frac;
    }
    if (num->n_int + num->n_frac == 0)
        return 0;
    return parse_suffix(text + pos, len - pos, num);
}

/* Digit i of the integer digits followed by the fraction digits. */
static unsigned digit_at(const struct qty_num *num, size_t i)
{
    char c = i < num->n_int ? num->int_digits[i] : num->frac_digits[i - num->n_int];
    return (unsigned)(c - '0');
}

/* Find S; returns 0 when the number is zero. */
static int find_significant(const struct qty_num *num, struct qty_sig *sig)
{
    size_t total = num->n_int + num->n_frac;
    size_t first = 0;
    while (first < total && digit_at(num, first) == 0)
        first++;
    if (first == total)
        return 0;
    size_t last = total - 1;
    while (digit_at(num, last) == 0)
        last--;
    sig->num = num;
    sig->first = first;
    sig->last = last;
    return 1;
}

/* The power of ten of S's last digit, plus the suffix and output scale. */
static int64_t sig_exponent(const struct qty_sig *sig, int scale)
{
    const struct qty_num *num = sig->num;
    /* Digit i weighs 10^(n_int - 1 - i); S ends at digit `last`. */
    int64_t pos = clamp_exp(size_exp(num->n_int) - 1 - size_exp(sig->last));
    int64_t exp = clamp_exp(pos + clamp_exp(num->dec_exp));
    return clamp_exp(exp + scale);
}

static int mul_checked(uint64_t *v, uint64_t m, uint64_t limit)
{
    if (m != 0 && *v > limit / m)
        return 0;
    *v *= m;
    return 1;
}

static int add_checked(uint64_t *v, uint64_t a, uint64_t limit)
{
    if (*v > limit || a > limit - *v)
        return 0;
    *v += a;
    return 1;
}

/* Value of digits [from, to] of the number; the caller bounds the count to
 * 19 digits, which always fit uint64. */
static uint64_t digits_value(const struct qty_num *num, size_t from, size_t to)
{
    uint64_t v = 0;
    for (size_t i = from; i <= to; i++)
        v = v * 10 + digit_at(num, i);
    return v;
}

/* floor(F * mul) for the fraction F = 0.(zeros)(digits[from..last]) with
 * `zeros` implied leading zeros, and whether that floor is inexact.
 * Working from the last digit, carry = floor((d * mul + carry) / 10) stays
 * below mul <= 2^60, so 10 * mul never overflows uint64. */
static uint64_t frac_times(const struct qty_num *num, size_t from, size_t last, int64_t zeros, uint64_t mul,
                           int *inexact)
{
    uint64_t carry = 0;
    for (size_t i = last + 1; i-- > from;) {
        uint64_t t = digit_at(num, i) * mul + carry;
        *inexact |= t % 10 != 0;
        carry = t / 10;
    }
    /* Implied zeros only shift the carry down; once it is 0 they change
     * nothing, so a huge negative exponent costs at most ~20 steps. */
    for (int64_t z = 0; z < zeros && carry != 0; z++) {
        *inexact |= carry % 10 != 0;
        carry /= 10;
    }
    return carry;
}

/* |value| * 10^scale, rounded away from zero, checked against limit.
 * Returns QTY_OK, or QTY_ERR_RANGE; *inexact tells if rounding happened. */
static qty_status scaled_magnitude(const struct qty_sig *sig, int scale, uint64_t limit, uint64_t *out, int *inexact)
{
    const struct qty_num *num = sig->num;
    int64_t exp = sig_exponent(sig, scale);
    int64_t n = size_exp(sig->last - sig->first + 1);
    uint64_t mul = (uint64_t)1 << num->bin_exp;
    uint64_t v;
    *inexact = 0;
    if (exp >= 0) {
        /* S * 10^exp >= 10^(n - 1 + exp): too many digits is out of range. */
        if (n - 1 + exp >= QTY_MAX_INT_DIGITS)
            return QTY_ERR_RANGE;
        v = digits_value(num, sig->first, sig->last);
        for (int64_t i = 0; i < exp; i++)
            if (!mul_checked(&v, 10, limit))
                return QTY_ERR_RANGE;
        if (!mul_checked(&v, mul, limit))
            return QTY_ERR_RANGE;
    } else {
        /* The last -exp digits of S (and implied zeros before them) are the
         * fraction; the digits in front of them are the integer part. */
        int64_t n_whole = n + exp;
        size_t frac_from = sig->first;
        v = 0;
        if (n_whole > 0) {
            if (n_whole > QTY_MAX_INT_DIGITS)
                return QTY_ERR_RANGE;
            frac_from = sig->first + (size_t)n_whole;
            v = digits_value(num, sig->first, frac_from - 1);
            if (!mul_checked(&v, mul, limit))
                return QTY_ERR_RANGE;
        }
        int64_t zeros = n_whole < 0 ? -n_whole : 0;
        uint64_t carried = frac_times(num, frac_from, sig->last, zeros, mul, inexact);
        if (!add_checked(&v, carried, limit))
            return QTY_ERR_RANGE;
        /* apimachinery rounds a finer value up to the next unit, away from
         * zero (RoundUp at parse, negativeScaleInt64 in MilliValue). */
        if (*inexact && !add_checked(&v, 1, limit))
            return QTY_ERR_RANGE;
    }
    *out = v;
    return QTY_OK;
}

qty_status quantity_parse_milli(const char *text, size_t len, int64_t *milli)
{
    struct qty_num num;
    struct qty_sig sig;
    if (!scan_quantity(text, len, &num))
        return QTY_ERR_SYNTAX;
    if (!find_significant(&num, &sig)) {
        if (milli)
            *milli = 0;
        return QTY_OK;
    }
    /* A negative milli-value may reach INT64_MIN, one past -INT64_MAX. */
    uint64_t limit = num.negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t mag;
    int inexact;
    qty_status st = scaled_magnitude(&sig, 3, limit, &mag, &inexact);
    if (st != QTY_OK)
        return st;
    if (milli) {
        if (!num.negative)
            *milli = (int64_t)mag;
        else
            *milli = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    }
    return QTY_OK;
}

qty_status quantity_parse_int(const char *text, size_t len, int64_t *value)
{
    struct qty_num num;
    struct qty_sig sig;
    if (!scan_quantity(text, len, &num))
        return QTY_ERR_SYNTAX;
    /* Zero in any spelling ("-0", "0.0Ki", "0e-7") is a whole number. */
    if (!find_significant(&num, &sig)) {
        if (value)
            *value = 0;
        return QTY_OK;
    }
    if (num.negative)
        return QTY_ERR_NEGATIVE;
    uint64_t mag;
    int inexact;
    qty_status st = scaled_magnitude(&sig, 0, (uint64_t)INT64_MAX, &mag, &inexact);
    if (st != QTY_OK)
        return st;
    if (inexact)
        return QTY_ERR_FRACTION;
    if (value)
        *value = (int64_t)mag;
    return QTY_OK;
}

const char *quantity_status_text(qty_status status)
{
    switch (status) {
    case QTY_OK:
        return "ok";
    case QTY_ERR_SYNTAX:
        return "not a valid quantity";
    case QTY_ERR_RANGE:
        return "quantity out of range";
    case QTY_ERR_FRACTION:
        return "quantity is not a whole number";
    case QTY_ERR_NEGATIVE:
        return "quantity is negative";
    }
    return "unknown quantity status";
}
