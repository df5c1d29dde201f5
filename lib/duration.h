/*
 * duration.h - durations as flags write them.
 *
 * Owns the duration grammar of the command line: Go's time.ParseDuration,
 * as every Kubernetes component writes durations: one or more decimal
 * numbers, each with a unit of ns, us (or µs), ms, s, m or h ("1h30m",
 * "1.5s", "300ms"), an optional leading "+"; "0" alone; and, as earlier
 * releases took, a plain number of seconds ("90", "0.5"). Negative
 * durations and values past int64 nanoseconds (about 292 years) are
 * refused.
 */
#ifndef GQA_DURATION_H
#define GQA_DURATION_H

#include <stdint.h>

/* Nanoseconds, or -1 when text is not a duration. */
int64_t parse_duration_ns(const char *text);

#endif
