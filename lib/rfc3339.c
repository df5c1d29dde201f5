/* rfc3339.c - RFC 3339 timestamps; see rfc3339.h. */
#include "lib/rfc3339.h"
#include "lib/clock.h"

#include <string.h>
#include <time.h>

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* "Z", or "+HH:MM" / "-HH:MM" ending the text: seconds east of UTC, in *offset. */
static int zone_offset(const char *p, int64_t *offset)
{
    int oh, om;
    *offset = 0;
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0')
        return 0;
    if ((*p != '+' && *p != '-') || digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 ||
        om > 59 || p[6] != '\0')
        return -1;
    *offset = (*p == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    return 0;
}

int64_t rfc3339_parse_ns(const char *s)
{
    int y, mo, d, h, mi, sec;
    if (strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
        digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) || s[13] != ':' ||
        digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &sec))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970)
        return -1;
    const char *p = s + 19;
    if (*p == '.') {
        const char *start = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == start)
            return -1;
    }
    int64_t offset;
    if (zone_offset(p, &offset) != 0)
        return -1;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t < 0 || (int64_t)t - offset < 0 || (int64_t)t - offset > INT64_MAX / NS_PER_S)
        return -1;
    return ((int64_t)t - offset) * NS_PER_S;
}
