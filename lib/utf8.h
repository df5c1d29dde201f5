/*
 * utf8.h - the one UTF-8 decoder the library shares.
 *
 * Owns the rule for a valid UTF-8 sequence (no overlong forms, no
 * surrogates, nothing past U+10FFFF), used by the JSON writer, the text
 * log's escaping (strbuf.c) and the terminal escaping (termtext.c).
 * Stateless; thread-safe.
 */
#ifndef GQA_UTF8_H
#define GQA_UTF8_H

#include <stddef.h>

/* Length (2..4) of the valid multi-byte UTF-8 sequence at p, reading at
 * most avail bytes; 0 when p does not start one (ASCII included). */
size_t utf8_sequence_length(const unsigned char *p, size_t avail);

#endif
