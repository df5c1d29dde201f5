/*
 * duration.c - durations as Kubernetes components write them: Go's
 * time.ParseDuration grammar ("1h30m", "1.5s", "300ms", "2us"), plus a
 * plain number of seconds ("90", "0.5") as earlier releases took. See
 * duration.h.
 */
#include "lib/duration.h"

#include <stdbool.h>
#include <string.h>

struct unit {
    const char *name;
    int64_t ns;
};

/* Longest names first where one is a prefix of another ("ms" before "m"). */
static const struct unit units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
    {"\xce\xbcs", 1000},
    /* U+03BC Greek mu */ {"ms", 1000000},
    {"s", 1000000000},
    {"m", 60000000000},
    {"h", 3600000000000},
};

/* A number alone, as earlier releases took it. */
static const struct unit plain_seconds = {"", 1000000000};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A decimal number: whole part into *whole (refusing overflow), up to 18
 * fraction digits into *frac over *scale (the rest ignored, as Go rounds
 * them away too). Returns the text after it, or NULL. */
static const char *read_number(const char *s, int64_t *whole, int64_t *frac, int64_t *scale)
{
    const char *start = s;
    *whole = 0;
    *frac = 0;
    *scale = 1;
    for (; is_digit(*s); s++) {
        if (*whole > (INT64_MAX - (*s - '0')) / 10)
            return NULL;
        *whole = *whole * 10 + (*s - '0');
    }
    bool had_whole = s != start;
    if (*s != '.')
        return had_whole ? s : NULL;
    s++;
    const char *fstart = s;
    for (; is_digit(*s); s++) {
        if (*scale <= INT64_MAX / 10 / 10) {
            *frac = *frac * 10 + (*s - '0');
            *scale *= 10;
        }
    }
    return had_whole || s != fstart ? s : NULL;
}

static const struct unit *read_unit(const char **s)
{
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t len = strlen(units[i].name);
        if (strncmp(*s, units[i].name, len) == 0) {
            *s += len;
            return &units[i];
        }
    }
    return NULL;
}

/* whole.frac units in nanoseconds added to *total; false on overflow. */
static bool add_term(int64_t *total, int64_t whole, int64_t frac, int64_t scale, int64_t unit_ns)
{
    if (whole > INT64_MAX / unit_ns)
        return false;
    int64_t ns = whole * unit_ns;
    /* The fraction is below one unit: a double holds it exactly enough. */
    int64_t part = (int64_t)((double)frac / (double)scale * (double)unit_ns);
    if (ns > INT64_MAX - part || *total > INT64_MAX - ns - part)
        return false;
    *total += ns + part;
    return true;
}

int64_t parse_duration_ns(const char *text)
{
    if (!text)
        return -1;
    const char *s = *text == '+' ? text + 1 : text;
    if (*s == '\0')
        return -1;
    if (strcmp(s, "0") == 0)
        return 0;
    int64_t total = 0, whole, frac, scale;
    bool first = true;
    while (*s) {
        s = read_number(s, &whole, &frac, &scale);
        if (!s)
            return -1;
        const struct unit *u = read_unit(&s);
        if (!u && first && *s == '\0')
            u = &plain_seconds;
        if (!u || !add_term(&total, whole, frac, scale, u->ns))
            return -1;
        first = false;
    }
    return total;
}
