/* duration.c - "60s", "2m", "1h", "1500ms" or plain seconds. See duration.h. */
#include "lib/duration.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int64_t parse_duration_ns(const char *text)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || !(v >= 0) || v > 1e9)
        return -1;
    double scale = 1e9;
    if (strcmp(end, "ms") == 0)
        scale = 1e6;
    else if (strcmp(end, "m") == 0)
        scale = 60e9;
    else if (strcmp(end, "h") == 0)
        scale = 3600e9;
    else if (*end && strcmp(end, "s") != 0)
        return -1;
    double ns = v * scale;
    /* 1e9 hours is past int64 nanoseconds: a cast would be undefined. */
    return ns < 9.2e18 ? (int64_t)ns : -1;
}
