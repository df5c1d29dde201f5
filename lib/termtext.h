/*
 * termtext.h - text from the cluster made safe to print on a terminal.
 *
 * Owns the rule for what a terminal must never receive from data it did
 * not write: C0 control characters (ESC, BEL, CR, backspace ...), DEL, and
 * C1 controls (U+0080-U+009F, which some terminals obey when UTF-8-encoded,
 * and raw 0x80-0x9F bytes, which 8-bit terminals obey). Such characters are
 * shown escaped (\xNN, or \u00NN for a UTF-8 C1 character) so the reader
 * sees that they were there. Bytes that are not valid UTF-8 are shown as
 * \xNN too. No state; thread-safe.
 */
#ifndef GQA_TERMTEXT_H
#define GQA_TERMTEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/strbuf.h"

/* Does s (NUL-terminated) hold nothing term_text_put would escape? */
bool term_text_clean(const char *s);
/* Append s with every control character (C0, DEL, C1) and invalid byte escaped. */
void term_text_put(struct strbuf *sb, const char *s);
/* A malloc'd escaped copy of s; NULL when memory ran out. */
char *term_text_escape(const char *s);
/* Append JSON (or YAML in double-quoted style) text, already escaped for
 * C0 by its writer, with DEL and UTF-8 C1 characters turned into \u00NN
 * escapes too; those can only occur inside quoted strings there, so the
 * result is the same data. */
void term_text_put_json(struct strbuf *sb, const char *text);
/* Copy src (NULL: "") into dst, a buffer of size bytes, for a one-line
 * message: each control character (C0, DEL, C1) or invalid byte becomes a
 * space. Text that does not fit is cut at a word boundary (a space in the
 * second half of the room; else at a character boundary) and ends with
 * "...", so a cut never looks like the whole message. Always NUL-terminated
 * when size > 0. */
void term_text_fit(char *dst, size_t size, const char *src);

#endif
