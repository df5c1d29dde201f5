/*
 * rfc3339.h - reading RFC 3339 timestamps as Kubernetes writes them.
 *
 * Owns the one parser of Go's time.RFC3339 / metav1.Time text
 * ("2006-01-02T15:04:05Z", fractions and offsets like "+08:00" accepted)
 * that HAMi's annotations and exec credentials' expirationTimestamp share.
 * Pure, thread-safe.
 */
#ifndef GQA_RFC3339_H
#define GQA_RFC3339_H

#include <stdint.h>

/* Unix time in nanoseconds (fractions of a second dropped), or -1 when text
 * is not RFC 3339, lies before 1970 or past what int64 nanoseconds hold (2262). */
int64_t rfc3339_parse_ns(const char *text);

#endif
