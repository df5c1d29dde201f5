/* strbuf.c - growable byte buffer; see strbuf.h. */
#include "lib/strbuf.h"
#include "lib/utf8.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_init(struct strbuf *sb)
{
    sb->data = NULL;
    sb->len = 0;
    sb->cap = 0;
    sb->failed = 0;
    sb->max = 0;
}

void strbuf_set_max(struct strbuf *sb, size_t max)
{
    sb->max = max;
}

void strbuf_fail(struct strbuf *sb)
{
    sb->failed = 1;
}

/* The capacity to grow to for need bytes (content and terminator), or 0
 * when the cap forbids it. Never above the cap, so the inline fast paths
 * (which only check the capacity) cannot pass it either. */
static size_t capped(const struct strbuf *sb, size_t need, size_t want)
{
    if (!sb->max)
        return want;
    if (need - 1 > sb->max)
        return 0;
    return want - 1 > sb->max ? sb->max + 1 : want;
}

void strbuf_free(struct strbuf *sb)
{
    free(sb->data);
    strbuf_init(sb);
}

void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    sb->failed = 0;
    if (sb->data)
        sb->data[0] = '\0';
}

int strbuf_reserve_growing(struct strbuf *sb, size_t extra)
{
    if (sb->failed)
        return -1;
    if (extra > SIZE_MAX - sb->len - 1)
        goto fail;
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return 0;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (!(cap = capped(sb, need, cap)))
        goto fail;
    char *p = realloc(sb->data, cap);
    if (!p)
        goto fail;
    sb->data = p;
    sb->cap = cap;
    return 0;
fail:
    sb->failed = 1;
    return -1;
}

int strbuf_reserve_exact(struct strbuf *sb, size_t extra)
{
    if (sb->failed)
        return -1;
    if (extra > SIZE_MAX - sb->len - 1) {
        sb->failed = 1;
        return -1;
    }
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return 0;
    if (!capped(sb, need, need)) {
        sb->failed = 1;
        return -1;
    }
    char *p = realloc(sb->data, need);
    if (!p) {
        sb->failed = 1;
        return -1;
    }
    if (!sb->data)
        p[0] = '\0';
    sb->data = p;
    sb->cap = need;
    return 0;
}

void strbuf_append_growing(struct strbuf *sb, const char *data, size_t len)
{
    if (strbuf_reserve(sb, len) != 0)
        return;
    memcpy(sb->data + sb->len, data, len);
    sb->len += len;
    sb->data[sb->len] = '\0';
}

void strbuf_puts(struct strbuf *sb, const char *s)
{
    strbuf_append(sb, s, strlen(s));
}

void strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) {
        sb->failed = 1;
        return;
    }
    if (strbuf_reserve(sb, (size_t)n) != 0)
        return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
}

char *strbuf_join2(const char *a, char sep, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *out = malloc(la + lb + 2);
    if (!out)
        return NULL;
    memcpy(out, a, la);
    out[la] = sep;
    memcpy(out + la + 1, b, lb + 1);
    return out;
}

char *strbuf_vformat(const char *fmt, va_list ap)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_vprintf(&sb, fmt, ap);
    size_t len = 0;
    char *s = strbuf_detach(&sb, &len);
    /* Formatted strings are often kept (pod keys, one per cached pod): give
     * back the rest of the 256-byte first buffer. */
    char *fit = s ? realloc(s, len + 1) : NULL;
    return fit ? fit : s;
}

char *strbuf_format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = strbuf_vformat(fmt, ap);
    va_end(ap);
    return s;
}

int strbuf_vset_error(char **err, const char *fmt, va_list ap)
{
    if (err)
        *err = strbuf_vformat(fmt, ap);
    return -1;
}

int strbuf_set_error(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vset_error(err, fmt, ap);
    va_end(ap);
    return -1;
}

size_t strbuf_i64_decimal(char *out, int64_t v)
{
    char tmp[STRBUF_I64_DIGITS];
    char *p = tmp + sizeof(tmp);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    size_t len = (size_t)(tmp + sizeof(tmp) - p);
    memcpy(out, p, len);
    return len;
}

void strbuf_put_i64(struct strbuf *sb, int64_t v)
{
    char tmp[STRBUF_I64_DIGITS];
    strbuf_append(sb, tmp, strbuf_i64_decimal(tmp, v));
}

/* Escaping is needed only for quote, backslash and control bytes; everything
 * else is copied in runs, which keeps long names cheap. JSON must be UTF-8,
 * and text quoted from requests (paths, container names) need not be: each
 * byte that does not start a valid sequence becomes U+FFFD. */
void strbuf_json_string_n(struct strbuf *sb, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    strbuf_putc(sb, '"');
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = u[i];
        if (c >= 0x80) {
            size_t seq = utf8_sequence_length(u + i, len - i);
            if (seq) {
                i += seq - 1;
                continue;
            }
        } else if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }
        strbuf_append(sb, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"':
            strbuf_append(sb, "\\\"", 2);
            break;
        case '\\':
            strbuf_append(sb, "\\\\", 2);
            break;
        case '\n':
            strbuf_append(sb, "\\n", 2);
            break;
        case '\r':
            strbuf_append(sb, "\\r", 2);
            break;
        case '\t':
            strbuf_append(sb, "\\t", 2);
            break;
        default:
            if (c >= 0x80) {
                strbuf_append(sb, "\\ufffd", 6);
            } else {
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                strbuf_append(sb, esc, 6);
            }
        }
    }
    strbuf_append(sb, s + run, len - run);
    strbuf_putc(sb, '"');
}

void strbuf_json_string(struct strbuf *sb, const char *s)
{
    strbuf_json_string_n(sb, s ? s : "", s ? strlen(s) : 0);
}

/* One escape for the text log: \n, \r, \t, else \xHH. */
static void put_byte_escape(struct strbuf *sb, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    char esc[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
    if (c == '\n')
        strbuf_append(sb, "\\n", 2);
    else if (c == '\r')
        strbuf_append(sb, "\\r", 2);
    else if (c == '\t')
        strbuf_append(sb, "\\t", 2);
    else
        strbuf_append(sb, esc, 4);
}

/* Bytes a terminal or a line-oriented reader could act on: C0 controls and
 * DEL, the C1 controls U+0080..U+009F (two bytes, C2 80..C2 9F), and any
 * byte that does not start a valid UTF-8 sequence (0x9B alone is CSI to an
 * 8-bit terminal). Everything else is copied in runs. */
void strbuf_text_escaped(struct strbuf *sb, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = u[i];
        size_t seq = 0;
        if (c >= 0x80) {
            seq = utf8_sequence_length(u + i, len - i);
            if (seq && !(c == 0xC2 && u[i + 1] < 0xA0)) {
                i += seq - 1;
                continue;
            }
        } else if (c >= 0x20 && c != 0x7F) {
            continue;
        }
        strbuf_append(sb, s + run, i - run);
        for (size_t k = 0; k < (seq ? seq : 1); k++)
            put_byte_escape(sb, u[i + k]);
        i += seq ? seq - 1 : 0;
        run = i + 1;
    }
    strbuf_append(sb, s + run, len - run);
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
    char *data = NULL;
    if (!sb->failed) {
        if (!sb->data && strbuf_reserve(sb, 0) == 0)
            sb->data[0] = '\0';
        data = sb->failed ? NULL : sb->data;
        if (len)
            *len = sb->len;
    }
    if (!data)
        free(sb->data);
    strbuf_init(sb);
    return data;
}

int strbuf_read_stream(struct strbuf *sb, FILE *f)
{
    size_t start = sb->len;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        strbuf_append(sb, chunk, n);
    int bad = ferror(f);
    if (bad || strbuf_failed(sb)) {
        errno = bad ? EIO : ENOMEM;
        sb->len = start;
        return -1;
    }
    return 0;
}

int strbuf_read_file(struct strbuf *sb, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    int rc = strbuf_read_stream(sb, f);
    int e = errno;
    fclose(f);
    errno = e;
    return rc;
}
