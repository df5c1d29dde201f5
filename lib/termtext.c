/* termtext.c - escaping of control characters for terminals. See termtext.h. */
#include "lib/termtext.h"
#include "lib/utf8.h"

#include <stdlib.h>
#include <string.h>

/* Is the 2-byte sequence at p a C1 control (U+0080-U+009F)? */
static bool utf8_c1(const unsigned char *p)
{
    return p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F;
}

/* How many bytes at p are printed as they are (0: p[0] must be escaped). */
static size_t safe_run(const unsigned char *p)
{
    if (p[0] >= 0x20 && p[0] < 0x7F)
        return 1;
    if (p[0] < 0x80)
        return 0; /* C0 or DEL */
    size_t n = utf8_sequence_length(p, strnlen((const char *)p, 4));
    return n && !utf8_c1(p) ? n : 0;
}

bool term_text_clean(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = safe_run(p);
        if (!n)
            return false;
        p += n;
    }
    return true;
}

void term_text_put(struct strbuf *sb, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *run = p;
    while (*p) {
        size_t n = safe_run(p);
        if (n) {
            p += n;
            continue;
        }
        strbuf_append(sb, (const char *)run, (size_t)(p - run));
        if (utf8_c1(p)) {
            char esc[6] = {'\\', 'u', '0', '0', hex[p[1] >> 4], hex[p[1] & 15]};
            strbuf_append(sb, esc, sizeof(esc));
            p += 2;
        } else {
            char esc[4] = {'\\', 'x', hex[p[0] >> 4], hex[p[0] & 15]};
            strbuf_append(sb, esc, sizeof(esc));
            p++;
        }
        run = p;
    }
    strbuf_append(sb, (const char *)run, (size_t)(p - run));
}

char *term_text_escape(const char *s)
{
    struct strbuf sb;
    strbuf_init(&sb);
    term_text_put(&sb, s);
    if (strbuf_failed(&sb)) {
        strbuf_free(&sb);
        return NULL;
    }
    char *out = strbuf_detach(&sb, NULL);
    return out ? out : strdup(""); /* nothing appended: no buffer yet */
}

void term_text_put_json(struct strbuf *sb, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)text, *run = p;
    while (*p) {
        bool del = p[0] == 0x7F, c1 = utf8_c1(p);
        if (!del && !c1) {
            p++;
            continue;
        }
        strbuf_append(sb, (const char *)run, (size_t)(p - run));
        unsigned char c = del ? 0x7F : p[1];
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        strbuf_append(sb, esc, sizeof(esc));
        p += del ? 1 : 2;
        run = p;
    }
    strbuf_append(sb, (const char *)run, (size_t)(p - run));
}

/* The longest prefix of dst[0..len) that ends on a character boundary and,
 * when one lies in the second half, on a space: whole words stay whole. */
static size_t cut_point(const char *dst, size_t len)
{
    while (len > 0 && ((unsigned char)dst[len] & 0xC0) == 0x80)
        len--; /* dst[len] continues a UTF-8 sequence: keep it whole */
    for (size_t i = len; i > len / 2; i--)
        if (dst[i] == ' ')
            return i;
    return len;
}

void term_text_fit(char *dst, size_t size, const char *src)
{
    static const char more[] = "...";
    if (!dst || size == 0)
        return;
    const unsigned char *p = (const unsigned char *)(src ? src : "");
    size_t len = 0;
    while (*p && len < size - 1) {
        size_t n = safe_run(p);
        if (!n) {
            dst[len++] = ' ';
            p += utf8_c1(p) ? 2 : 1;
            continue;
        }
        if (len + n > size - 1)
            break;
        memcpy(dst + len, p, n);
        len += n;
        p += n;
    }
    dst[len] = '\0';
    if (!*p || size < sizeof more + 1)
        return;                        /* all of it fits, or no room to say it was cut */
    size_t limit = size - sizeof more; /* room for "..." and the NUL */
    len = cut_point(dst, len < limit ? len : limit);
    while (len > 0 && dst[len - 1] == ' ')
        len--;
    memcpy(dst + len, more, sizeof more);
}
