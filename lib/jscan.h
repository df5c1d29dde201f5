/*
 * jscan.h - a validating, allocation-free JSON scanner.
 *
 * Owns fast, read-only walks over large JSON texts whose bulk we do not need
 * (a kube-scheduler ExtenderArgs in the `Nodes` form carries every Node object,
 * tens of megabytes, but the extender needs only their names). The scanner
 * validates everything it passes over (RFC 8259: strings with escapes and
 * UTF-8 left as-is, numbers, literals, nesting), so a malformed body is still
 * rejected, but it builds no tree and copies nothing.
 *
 * Usage pattern for an object:
 *
 *   struct jscan s; jscan_init(&s, buf, len);
 *   if (jscan_enter_object(&s) != 0) ...error...
 *   struct jscan_str key;
 *   int r;
 *   while ((r = jscan_next_key(&s, &key)) == 1) {
 *       if (jscan_key_is(&key, "Pod")) { ... jscan_value_span(&s, &span) ... }
 *       else jscan_skip_value(&s);
 *   }
 *   if (r < 0) ...error...;   (r == 0: closing brace consumed)
 *
 * Errors set s.error (a static message) and s.error_offset; every function
 * returns -1 after an error and keeps returning -1. Only the first error is
 * kept. error_offset is the byte offset of the offending byte, with these
 * conventions: end of input -> the input length; "unterminated string" ->
 * the opening quote; bad escapes -> the backslash; "trailing comma" -> the
 * comma. Empty (or all-whitespace) input is the error "empty input".
 *
 * Not validated: bytes >= 0x80 inside strings are passed through as they are
 * (no UTF-8 check), so a string holding invalid UTF-8 is accepted.
 *
 * The scanner never reads outside [buf, buf+len); the text need not be
 * NUL-terminated.
 *
 * Getting a span while walking into a value (no second scan): jscan_peek()
 * leaves s.pos at the value's first byte, so
 *     if (jscan_peek(&s) == JSCAN_OBJECT) { const char *a = s.pos;
 *         jscan_enter_object(&s); ...walk to r == 0...; span = [a, s.pos) }
 *
 * Misuse that is detected: jscan_next_key/next_element outside any container
 * ("not inside an object or array") and calling them again without consuming
 * the value they positioned at ("previous value was not consumed"; for the
 * first element of an array this cannot be told apart and is not caught).
 * Comma handling needs no extra state: it looks at the last non-whitespace
 * byte before the current position ('{' or '[' means "first member"), so
 * move s.pos only through these functions. Pointers in jscan_str/jscan_span
 * point into the caller's buffer and live as long as it does.
 */
#ifndef GQA_JSCAN_H
#define GQA_JSCAN_H

#include <stddef.h>
#include <string.h>

struct jscan {
    const char *start;
    const char *pos;
    const char *end;
    int depth;           /* current nesting depth, bounded by JSCAN_MAX_DEPTH */
    int base_depth;      /* the depth it began at: 0, or its parent's (jscan_fork) */
    const char *error;   /* NULL while no error */
    size_t error_offset; /* byte offset of the error */
};

#define JSCAN_MAX_DEPTH 512

/* A string token as it appears in the text: ptr/len exclude the quotes and
 * escapes are NOT decoded; has_escapes says whether a backslash occurred. */
struct jscan_str {
    const char *ptr;
    size_t len;
    int has_escapes;
};

/* A raw value: [ptr, ptr+len) is the exact JSON text of the value. */
struct jscan_span {
    const char *ptr;
    size_t len;
};

enum jscan_type {
    JSCAN_NONE,
    JSCAN_OBJECT,
    JSCAN_ARRAY,
    JSCAN_STRING,
    JSCAN_NUMBER,
    JSCAN_TRUE,
    JSCAN_FALSE,
    JSCAN_NULL
};

void jscan_init(struct jscan *s, const char *buf, size_t len);

/* Type of the next value (after skipping whitespace), without consuming it.
 * Looks at the first byte only ('t' -> JSCAN_TRUE even for "tru"); the value
 * is validated when it is consumed. JSCAN_NONE at end of input, for a byte
 * that cannot start a value, or after an error; never sets an error. */
enum jscan_type jscan_peek(struct jscan *s);

/* Consume '{' (depth + 1). Returns 0, or -1 (error set) when the next value is
 * not an object or the nesting limit is reached. */
int jscan_enter_object(struct jscan *s);
/* Inside an object: read the next key and the ':' after it. Returns 1 with *key
 * set, 0 when the closing '}' was consumed instead, -1 on error. Handles the
 * commas between members. */
int jscan_next_key(struct jscan *s, struct jscan_str *key);

/* Consume '['. Returns 0 or -1. */
int jscan_enter_array(struct jscan *s);
/* Inside an array: returns 1 when another element follows (positioned at it),
 * 0 when the closing ']' was consumed, -1 on error. Handles commas. */
int jscan_next_element(struct jscan *s);

/* Inside an array, a shortcut for arrays of plain strings (NodeNames): read
 * up to max elements in a row that are strings without escapes, each
 * directly after the '[' or after the previous string and its ',' (no
 * whitespace), into out[], and return how many. It stops, having consumed
 * nothing more, at the first element that is not one (also at an error or
 * at the end of the array): use jscan_next_element from there. Never sets
 * an error. */
size_t jscan_next_plain_strings(struct jscan *s, struct jscan_str *out, size_t max);

/* Validate and skip one value of any type. 0 or -1. Nesting inside the value
 * counts on top of s->depth against JSCAN_MAX_DEPTH. */
int jscan_skip_value(struct jscan *s);
/* Like jscan_skip_value, and report the value's exact text: leading
 * whitespace excluded, nothing after the value included. On error the span
 * is {NULL, 0}. The span points into the scanned buffer. */
int jscan_value_span(struct jscan *s, struct jscan_span *span);
/* Move past the next value without scanning it, when its text is known:
 * the len bytes at the value's first byte (where jscan_peek leaves s->pos)
 * are, byte for byte, a complete value scanned without error before, at
 * this depth (a JSON value ends where its bytes say, so the same bytes are
 * the same value). The caller vouches for that; nothing is read. 0, or -1
 * (nothing moved, no error set) when fewer than len bytes remain. */
int jscan_skip_known(struct jscan *s, size_t len);
/* Read a string value. 0, or -1 when the value is not a string. */
int jscan_string(struct jscan *s, struct jscan_str *out);

/* After the top-level value: only whitespace may remain. 0 or -1. Also -1
 * while an entered object/array is still open, and for empty input. */
int jscan_finish(struct jscan *s);

/* True when the first error only says the text ended too early (inside a
 * string, a literal, or before a container closed): the same scan over a
 * longer text may succeed. For texts that arrive in pieces (jstream). A
 * number that reaches the end of the text scans without error, so such
 * callers must not trust a number that ends exactly there. */
int jscan_ran_out(const struct jscan *s);

/* Scanning ahead on another thread. jscan_fork makes t a scan of s's text
 * from `at` (at or after s->pos, inside the same containers): for an array
 * element, `at` is the ',' before it, and t's first jscan_next_element
 * takes it. jscan_join moves s to where t stopped, as if s had scanned that
 * stretch itself; it refuses (-1, s untouched) unless t began exactly at
 * s->pos, at s's depth, and has no error. Neither reads the text. */
void jscan_fork(struct jscan *t, const struct jscan *s, const char *at);
int jscan_join(struct jscan *s, const struct jscan *t);

/* True when the (unescaped) key equals the NUL-terminated literal. Keys with
 * escapes are compared after decoding (no allocation); a key that decodes to
 * an embedded NUL (\u0000) never equals a literal. Trusts has_escapes: with
 * has_escapes == 0 the raw bytes are compared. Works on any jscan_str (also
 * string values from jscan_string). */
int jscan_key_is_escaped(const struct jscan_str *key, const char *literal);

/* Inline for the common key without escapes: with a literal, its length
 * and the comparison fold into a few instructions (thousands of keys per
 * watched pod and per request). */
static inline int jscan_key_is(const struct jscan_str *key, const char *literal)
{
    if (key->has_escapes)
        return jscan_key_is_escaped(key, literal);
    size_t n = strlen(literal);
    return n == key->len && memcmp(key->ptr, literal, n) == 0;
}

/* Decode a string token (escapes, \uXXXX with surrogate pairs -> UTF-8) into
 * a freshly malloc'd NUL-terminated buffer. NULL on allocation failure or on
 * an invalid escape. A lone surrogate (high without a following low, or a
 * low alone) becomes U+FFFD (EF BF BD). \u0000 yields an embedded NUL, so
 * such a string looks truncated as a C string. Tokens from the scanner are
 * already validated, so NULL there means out of memory. */
char *jscan_str_dup(const struct jscan_str *str);

#endif
