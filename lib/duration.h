/*
 * duration.h - durations as flags write them.
 *
 * Owns the duration grammar of the command line: a non-negative decimal
 * number with an optional unit, "1500ms", "60s", "2m", "1h", or plain
 * seconds ("90", "0.5"). A value that does not fit in int64 nanoseconds
 * (about 292 years) is refused.
 */
#ifndef GQA_DURATION_H
#define GQA_DURATION_H

#include <stdint.h>

/* Nanoseconds, or -1 when text is not a duration. */
int64_t parse_duration_ns(const char *text);

#endif
