/*
 * base64.h - standard base64 (RFC 4648 section 4), on OpenSSL's codec.
 *
 * Owns the two uses the service has: decoding kubeconfig *-data fields as
 * kubectl writes them (whitespace from YAML folding or wrapped lines is
 * ignored; the padding may be left out) and encoding AdmissionReview
 * patches (always padded, as Go's []byte JSON encoding reads them).
 */
#ifndef GQA_BASE64_H
#define GQA_BASE64_H

#include <stddef.h>

#include "lib/strbuf.h"

/* Decode in (NUL-terminated). 0 with a malloc'd, NUL-terminated *out of
 * *out_len bytes; -1 when in is not base64; -2 when memory ran out. */
int base64_decode(const char *in, char **out, size_t *out_len);
/* Append the padded encoding of in[0..len). */
void base64_append(struct strbuf *sb, const unsigned char *in, size_t len);

#endif
