/*
 * strbuf.h - a growable byte buffer for building responses and messages.
 *
 * Owns output assembly without cJSON trees: responses for thousands of nodes
 * are appended here directly, with JSON string escaping. An allocation
 * failure makes the buffer "failed": later appends are no-ops and
 * strbuf_failed() tells the caller once, at the end, so call sites stay short.
 *
 * Callers read the fields (data, len) but never write them: in-place
 * writers use strbuf_begin/strbuf_commit, a caller that must give up uses
 * strbuf_fail. A buffer may have a size cap (strbuf_set_max): growing past
 * it fails like running out of memory, so one buffer cannot take all
 * memory. No locks: a buffer belongs to one thread at a time.
 */
#ifndef GQA_STRBUF_H
#define GQA_STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct strbuf {
    char *data; /* always NUL-terminated when len > 0 or cap > 0 */
    size_t len;
    size_t cap;
    int failed; /* an allocation failed: contents are incomplete */
    size_t max; /* the most bytes it may hold (strbuf_set_max); 0: no cap */
};

void strbuf_init(struct strbuf *sb);
void strbuf_free(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
/* Cap the buffer at max bytes of content (0: no cap, the default; reset
 * keeps it, free and detach drop it). An append or reserve that would pass
 * it fails the buffer as an allocation failure does. */
void strbuf_set_max(struct strbuf *sb, size_t max);
/* Mark the buffer failed (a caller's own limit was passed): later appends
 * are no-ops and strbuf_failed() says so. */
void strbuf_fail(struct strbuf *sb);
/* Make room for at least `extra` more bytes. 0 or -1 (and the buffer fails).
 * Inline while the room is there; strbuf_reserve_growing grows. */
int strbuf_reserve_growing(struct strbuf *sb, size_t extra);

static inline int strbuf_reserve(struct strbuf *sb, size_t extra)
{
    if (sb->cap - sb->len > extra && !sb->failed)
        return 0;
    return strbuf_reserve_growing(sb, extra);
}

/* The same, growing to exactly len + extra + 1 bytes when it must grow, for
 * callers that account for the memory a buffer holds (request bodies). */
int strbuf_reserve_exact(struct strbuf *sb, size_t extra);
/* Append data[0..len), growing when needed. Inline while the buffer has
 * room (the answers append tens of thousands of short pieces), out of line
 * when it must grow or has failed. */
void strbuf_append_growing(struct strbuf *sb, const char *data, size_t len);

static inline void strbuf_append(struct strbuf *sb, const char *data, size_t len)
{
    if (sb->cap - sb->len > len && !sb->failed) {
        memcpy(sb->data + sb->len, data, len);
        sb->len += len;
        sb->data[sb->len] = '\0';
        return;
    }
    strbuf_append_growing(sb, data, len);
}

static inline void strbuf_putc(struct strbuf *sb, char c)
{
    if (sb->cap - sb->len > 1 && !sb->failed) {
        sb->data[sb->len++] = c;
        sb->data[sb->len] = '\0';
        return;
    }
    strbuf_append_growing(sb, &c, 1);
}

/* A writer that fills the buffer in place: strbuf_begin makes room for at
 * most `most` more bytes and returns where they go (NULL when the buffer
 * failed or could not grow); the caller writes at most that many and then
 * calls strbuf_commit with the end of what it wrote, which sets the length
 * and the terminator. The buffer may move in strbuf_begin, never between
 * the two calls (nothing else may append meanwhile). */
static inline char *strbuf_begin(struct strbuf *sb, size_t most)
{
    return strbuf_reserve(sb, most) == 0 ? sb->data + sb->len : NULL;
}

static inline void strbuf_commit(struct strbuf *sb, const char *end)
{
    sb->len = (size_t)(end - sb->data);
    sb->data[sb->len] = '\0';
}

void strbuf_puts(struct strbuf *sb, const char *s);
void strbuf_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap);
void strbuf_put_i64(struct strbuf *sb, int64_t v);
/* v in decimal at out (room for STRBUF_I64_DIGITS bytes), not terminated;
 * returns its length. For keys built on the stack, where a strbuf or
 * snprintf would cost more than the work the key serves. */
#define STRBUF_I64_DIGITS 20
size_t strbuf_i64_decimal(char *out, int64_t v);
/* Append s as a JSON string literal, quotes included. */
void strbuf_json_string(struct strbuf *sb, const char *s);
void strbuf_json_string_n(struct strbuf *sb, const char *s, size_t len);
/* Append s for a line of text that a terminal may show: control characters
 * (C0, DEL, C1) and bytes outside valid UTF-8 become \n, \r, \t or \xHH, so
 * the text can neither end the line nor steer the terminal. */
void strbuf_text_escaped(struct strbuf *sb, const char *s, size_t len);
/* "a<sep>b" in a malloc'd string of exactly its size (the two-part keys of
 * pods and usage: vsnprintf cost a fifth of applying a watch event). NULL
 * when memory ran out. */
char *strbuf_join2(const char *a, char sep, const char *b);
/* A malloc'd formatted string (for error messages), NULL when memory ran out. */
char *strbuf_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *strbuf_vformat(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* Store a malloc'd formatted message in *err (when err is not NULL) and
 * return -1, so validation code can `return strbuf_set_error(err, ...)`.
 * When memory runs out *err is NULL. */
int strbuf_set_error(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int strbuf_vset_error(char **err, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Append the whole content of a file. 0, or -1 with errno set (the buffer
 * keeps what it had). */
int strbuf_read_file(struct strbuf *sb, const char *path);
/* The same from an open stream, read to its end (standard input for "-"). */
int strbuf_read_stream(struct strbuf *sb, FILE *f);
/* Hand the buffer's memory to the caller (NULL if failed); the strbuf is reset. */
char *strbuf_detach(struct strbuf *sb, size_t *len);

static inline int strbuf_failed(const struct strbuf *sb)
{
    return sb->failed;
}

#endif
