/* jscan.c - validating, allocation-free JSON scanner; see jscan.h.
 *
 * Where the speed comes from (the hot path is jscan_skip_value over ~28 MB of
 * Node objects):
 *   - string bodies are searched 16 bytes at a time (SSE2; 8-byte SWAR
 *     elsewhere) for the only bytes that matter there ('"', '\\' and control
 *     characters), see find_special();
 *   - whitespace is tested with one compare in the compact text the
 *     scheduler sends, see skip_ws();
 *   - skipping a value is one iterative loop dispatched on a first-byte table,
 *     with the open containers on a small local stack: no recursion, and
 *     the common tokens (keys, plain strings, commas) are handled inline;
 *     escapes, numbers and errors take out-of-line paths.
 * Everything passed over is still validated (RFC 8259), except that bytes
 * >= 0x80 inside strings are taken as-is: UTF-8 is not checked.
 */
#include "lib/jscan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JSCAN_STR_(x) #x
#define JSCAN_STR(x) JSCAN_STR_(x)

/* ---- error messages: static, so callers never free them ---------------- */

static const char ERR_EMPTY[] = "empty input";
static const char ERR_EOF[] = "unexpected end of input";
static const char ERR_VALUE[] = "expected a value";
static const char ERR_OBJECT[] = "expected an object";
static const char ERR_ARRAY[] = "expected an array";
static const char ERR_STRING[] = "expected a string";
static const char ERR_KEY[] = "expected a string as object key";
static const char ERR_COLON[] = "expected ':' after object key";
static const char ERR_OBJ_SEP[] = "expected ',' or '}' after object member";
static const char ERR_ARR_SEP[] = "expected ',' or ']' after array element";
static const char ERR_TRAILING_COMMA[] = "trailing comma";
static const char ERR_DEPTH[] = "nesting deeper than " JSCAN_STR(JSCAN_MAX_DEPTH);
static const char ERR_UNTERMINATED[] = "unterminated string";
static const char ERR_CONTROL[] = "unescaped control character in string";
static const char ERR_ESCAPE_BYTE[] = "invalid escape (unprintable byte after '\\')";
static const char ERR_UNICODE[] = "invalid \\u escape: expected 4 hex digits";
static const char ERR_LEADING_ZERO[] = "invalid number: leading zero";
static const char ERR_NUM_DIGIT[] = "invalid number: expected a digit";
static const char ERR_NUM_FRAC[] = "invalid number: expected a digit after '.'";
static const char ERR_NUM_EXP[] = "invalid number: expected a digit in exponent";
static const char ERR_LITERAL[] = "invalid literal (expected true, false or null)";
static const char ERR_TRAILING[] = "unexpected data after the top-level value";
static const char ERR_UNCLOSED[] = "jscan_finish called inside an open object or array";
static const char ERR_NO_CONTAINER[] = "not inside an object or array";
static const char ERR_UNCONSUMED[] = "previous value was not consumed";

/* "invalid escape \q" for every printable ASCII byte, built at compile time
 * so the message can name the offending character and still be static. */
#define ESC_MSG(c)                                                                                       \
    {                                                                                                    \
        'i', 'n', 'v', 'a', 'l', 'i', 'd', ' ', 'e', 's', 'c', 'a', 'p', 'e', ' ', '\\', (char)(c), '\0' \
    }
#define ESC_MSG4(c) ESC_MSG(c), ESC_MSG((c) + 1), ESC_MSG((c) + 2), ESC_MSG((c) + 3)
#define ESC_MSG16(c) ESC_MSG4(c), ESC_MSG4((c) + 4), ESC_MSG4((c) + 8), ESC_MSG4((c) + 12)
static const char escape_msgs[96][18] = {
    ESC_MSG16(0x20), ESC_MSG16(0x30), ESC_MSG16(0x40), ESC_MSG16(0x50), ESC_MSG16(0x60), ESC_MSG16(0x70),
};

static const char *escape_msg(unsigned char c)
{
    if (c <= 0x20 || c >= 0x7f)
        return ERR_ESCAPE_BYTE;
    return escape_msgs[c - 0x20];
}

/* ---- byte classes ------------------------------------------------------ */

static const unsigned char is_ws[256] = {
    [' '] = 1,
    ['\t'] = 1,
    ['\n'] = 1,
    ['\r'] = 1,
};

/* First byte of a value -> its type; 0 (JSCAN_NONE) for anything else. */
static const unsigned char value_type[256] = {
    ['{'] = JSCAN_OBJECT, ['['] = JSCAN_ARRAY,  ['"'] = JSCAN_STRING, ['-'] = JSCAN_NUMBER, ['0'] = JSCAN_NUMBER,
    ['1'] = JSCAN_NUMBER, ['2'] = JSCAN_NUMBER, ['3'] = JSCAN_NUMBER, ['4'] = JSCAN_NUMBER, ['5'] = JSCAN_NUMBER,
    ['6'] = JSCAN_NUMBER, ['7'] = JSCAN_NUMBER, ['8'] = JSCAN_NUMBER, ['9'] = JSCAN_NUMBER, ['t'] = JSCAN_TRUE,
    ['f'] = JSCAN_FALSE,  ['n'] = JSCAN_NULL,
};

/* Escapes other than \u that JSON allows, mapped to the byte they stand for. */
static const unsigned char simple_escape[256] = {
    ['"'] = '"', ['\\'] = '\\', ['/'] = '/', ['b'] = '\b', ['f'] = '\f', ['n'] = '\n', ['r'] = '\r', ['t'] = '\t',
};

static inline int is_digit(unsigned char c)
{
    return (unsigned)(c - '0') < 10u;
}

static int hex_value(unsigned char c)
{
    if (is_digit(c))
        return c - '0';
    c |= 0x20; /* fold to lower case; non-letters stay out of range */
    if ((unsigned)(c - 'a') < 6u)
        return c - 'a' + 10;
    return -1;
}

/* ---- error reporting --------------------------------------------------- */

/* Only the first error is kept: later failures are consequences of it. */
static const char *fail_at(struct jscan *s, const char *p, const char *msg)
{
    if (!s->error) {
        s->error = msg;
        s->error_offset = (size_t)(p - s->start);
        s->pos = p;
    }
    return NULL;
}

static int fail(struct jscan *s, const char *p, const char *msg)
{
    fail_at(s, p, msg);
    return -1;
}

/* The last non-whitespace byte before p, or -1 when there is none. Used to
 * tell "just after '{'" from "after a member" without extra state. */
static int prev_token(const struct jscan *s, const char *p)
{
    while (p > s->start) {
        unsigned char c = (unsigned char)p[-1];
        if (!is_ws[c])
            return c;
        p--;
    }
    return -1;
}

/* Input ran out where a token was required: distinguish a blank text. */
static const char *fail_end(struct jscan *s, const char *p)
{
    return fail_at(s, p, prev_token(s, p) < 0 ? ERR_EMPTY : ERR_EOF);
}

/* ---- tokens ------------------------------------------------------------ */

static inline const char *skip_ws(const char *p, const char *end)
{
    /* Every whitespace byte is <= ' ', so compact JSON leaves after one test. */
    while (p < end && (unsigned char)*p <= ' ' && is_ws[(unsigned char)*p])
        p++;
    return p;
}

static inline int is_special(unsigned char c)
{
    return c == '"' || c == '\\' || c < 0x20;
}

/* Block search for string bodies: SSE2 where the target has it (all of
 * x86-64), else 8-byte SWAR on little-endian GCC/Clang, else bytes. The
 * JSCAN_NO_* macros force the fallbacks, so tests can cover every path. */
#if defined(__GNUC__) && defined(__SSE2__) && !defined(JSCAN_NO_SSE2)
#define JSCAN_USE_SSE2 1
#elif defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
    !defined(JSCAN_NO_SWAR)
#define JSCAN_USE_SWAR 1
#endif

#if defined(JSCAN_USE_SSE2)
#include <emmintrin.h>

/* One mask bit per byte of p[0..16) that is '"', '\\' or <= 0x1f. */
static inline unsigned special_mask16(const char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i q = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
    __m128i b = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
    /* unsigned v <= 0x1f  <=>  max(v, 0x1f) == 0x1f */
    __m128i c = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c));
}
#elif defined(JSCAN_USE_SWAR)
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* High bit set in each byte of v that is '"', '\\' or < 0x20. Borrows can
 * mark extra bytes, but only above a real hit, so the lowest mark is exact. */
static inline uint64_t special_bytes(uint64_t v)
{
    uint64_t q = v ^ (ONES * '"');
    uint64_t b = v ^ (ONES * '\\');
    uint64_t any = ((q - ONES) & ~q) | ((b - ONES) & ~b) | ((v - ONES * 0x20) & ~v);
    return any & HIGHS;
}
#endif

/* First byte at or after p that ends a run of plain string content. */
static inline const char *find_special(const char *p, const char *end)
{
#if defined(JSCAN_USE_SSE2)
    while (end - p >= 16) {
        unsigned m = special_mask16(p);
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    }
#elif defined(JSCAN_USE_SWAR)
    while (end - p >= 8) {
        uint64_t v;
        memcpy(&v, p, sizeof v); /* unaligned-safe load; compiles to one mov */
        uint64_t m = special_bytes(v);
        if (m)
            return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
#endif
    while (p < end && !is_special((unsigned char)*p))
        p++;
    return p;
}

/* p is at a backslash inside the string opened at `open`. */
static const char *scan_escape(struct jscan *s, const char *p, const char *open)
{
    const char *end = s->end;
    if (end - p < 2)
        return fail_at(s, open, ERR_UNTERMINATED);
    unsigned char c = (unsigned char)p[1];
    if (c != 'u')
        return simple_escape[c] ? p + 2 : fail_at(s, p, escape_msg(c));
    for (int i = 2; i < 6; i++) {
        if (p + i == end)
            return fail_at(s, open, ERR_UNTERMINATED);
        if (hex_value((unsigned char)p[i]) < 0)
            return fail_at(s, p, ERR_UNICODE);
    }
    return p + 6;
}

#if defined(JSCAN_USE_SSE2)
/* Escape-dense strings (JSON carried in an annotation has an escaped quote
 * every few bytes): every special byte of a 16-byte block is taken from one
 * mask instead of a new search after each escape. p is at a special byte;
 * returns the byte after the closing quote, NULL on error, or, when fewer
 * than 16 bytes remain, the first special byte there (*done stays 0). */
/* The 16 bytes at p, when every backslash among them escapes one of
 * " / b f n r t (not \\, not \u) and is not their last byte: 1 when the
 * string ends there (*out: the byte after its quote), 0 when it goes on
 * (*out = p + 16). -1 for any other block, and for a control byte before
 * the end: the per-escape walk takes it, with its exact error. The JSON
 * carried in annotations (a node's topology) has an escaped quote every
 * few bytes; one mask per block replaces a step per escape. */
static inline int simple_escapes_block(const char *p, const char **out)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    unsigned bs = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
    if (bs & ((bs << 1) | 0x8000u))
        return -1;
    unsigned escaped = bs << 1;
    unsigned quotes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')));
    if (escaped & ~quotes) { /* not only \": the other simple escapes */
        __m128i ok = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('/')), _mm_cmpeq_epi8(v, _mm_set1_epi8('b')));
        ok = _mm_or_si128(ok,
                          _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('f')), _mm_cmpeq_epi8(v, _mm_set1_epi8('n'))));
        ok = _mm_or_si128(ok,
                          _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('t'))));
        if (escaped & ~(quotes | (unsigned)_mm_movemask_epi8(ok)))
            return -1;
    }
    unsigned control =
        (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f)));
    unsigned stop = (quotes & ~escaped) | control;
    if (!stop) {
        *out = p + 16;
        return 0;
    }
    unsigned first = (unsigned)__builtin_ctz(stop);
    if (control >> first & 1u)
        return -1;
    *out = p + first + 1;
    return 1;
}

static const char *scan_escapes_blocks(struct jscan *s, const char *open, const char *p, int *done)
{
    const char *end = s->end;
    while (end - p >= 16) {
        const char *next;
        int fast = simple_escapes_block(p, &next);
        if (fast >= 0) {
            *done = fast;
            if (fast)
                return next;
            p = next;
            continue;
        }
        const char *block = p;
        unsigned m = special_mask16(block);
        while (m) {
            const char *q = block + __builtin_ctz(m);
            if (*q != '\\') {
                *done = 1;
                return *q == '"' ? q + 1 : fail_at(s, q, ERR_CONTROL);
            }
            /* simple escapes inline; \uXXXX and errors out of line */
            if (q + 1 < end && q[1] != 'u' && simple_escape[(unsigned char)q[1]]) {
                p = q + 2;
            } else if (!(p = scan_escape(s, q, open))) {
                *done = 1;
                return NULL;
            }
            if (p - block >= 16)
                break;
            m &= ~0u << (p - block); /* the escaped byte is not special */
        }
        if (!m)
            p = block + 16;
    }
    return find_special(p, end);
}
#endif

/* The rest of the string opened at `open`, from its first special byte p:
 * escapes, errors, and the runs of plain bytes between them. */
static const char *scan_string_slow(struct jscan *s, const char *open, const char *p, int *escaped)
{
    const char *end = s->end;
#if defined(JSCAN_USE_SSE2)
    if (p < end && *p == '\\') {
        int done = 0;
        *escaped = 1;
        p = scan_escapes_blocks(s, open, p, &done);
        if (done)
            return p;
    }
#endif
    for (;;) {
        if (p == end)
            return fail_at(s, open, ERR_UNTERMINATED);
        if (*p == '"')
            return p + 1;
        if (*p != '\\')
            return fail_at(s, p, ERR_CONTROL);
        *escaped = 1;
        p = scan_escape(s, p, open);
        if (!p)
            return NULL;
        p = find_special(p, end);
    }
}

/* p is at the opening quote. Returns the byte after the closing quote and
 * sets *escaped when the body has a backslash; NULL on error. Inline for the
 * common case, a string without escapes; the rest is out of line. */
static inline const char *scan_string(struct jscan *s, const char *p, int *escaped)
{
    const char *q = find_special(p + 1, s->end);
    if (q < s->end && *q == '"')
        return q + 1;
    return scan_string_slow(s, p, q, escaped);
}

static inline const char *skip_digits(const char *p, const char *end)
{
    while (p < end && is_digit((unsigned char)*p))
        p++;
    return p;
}

/* At least one digit must follow (fraction, exponent, after '-'). */
static const char *need_digits(struct jscan *s, const char *p, const char *msg)
{
    if (p == s->end)
        return fail_at(s, p, ERR_EOF);
    if (!is_digit((unsigned char)*p))
        return fail_at(s, p, msg);
    return skip_digits(p + 1, s->end);
}

/* -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? */
static const char *scan_number(struct jscan *s, const char *p)
{
    const char *end = s->end;
    if (*p == '-')
        p++;
    if (p < end && *p == '0') {
        if (++p < end && is_digit((unsigned char)*p))
            return fail_at(s, p - 1, ERR_LEADING_ZERO);
    } else {
        p = need_digits(s, p, ERR_NUM_DIGIT);
        if (!p)
            return NULL;
    }
    if (p < end && *p == '.') {
        p = need_digits(s, p + 1, ERR_NUM_FRAC);
        if (!p)
            return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        p = need_digits(s, p, ERR_NUM_EXP);
    }
    return p;
}

static inline const char *scan_literal(struct jscan *s, const char *p, const char *word, size_t n)
{
    if ((size_t)(s->end - p) >= n && memcmp(p, word, n) == 0)
        return p + n;
    for (size_t i = 0; i < n; i++) { /* slow path: locate the failure */
        if (p + i == s->end)
            return fail_at(s, p + i, ERR_EOF);
        if (p[i] != word[i])
            return fail_at(s, p + i, ERR_LITERAL);
    }
    return p + n; /* not reached: the fast path matched */
}

/* Reads `"key" :` at p; returns the position after the colon. */
static inline const char *member_key(struct jscan *s, const char *p, struct jscan_str *key)
{
    const char *end = s->end;
    if (p == end)
        return fail_at(s, p, ERR_EOF);
    if (*p != '"')
        return fail_at(s, p, ERR_KEY);
    int escaped = 0;
    const char *q = scan_string(s, p, &escaped);
    if (!q)
        return NULL;
    if (key) {
        key->ptr = p + 1;
        key->len = (size_t)(q - p - 2);
        key->has_escapes = escaped;
    }
    q = skip_ws(q, end);
    if (q == end)
        return fail_at(s, q, ERR_EOF);
    if (*q != ':')
        return fail_at(s, q, ERR_COLON);
    return q + 1;
}

/* p is at a ',' inside a container ended by `closer`: skip to what follows,
 * rejecting the closer right after the comma. */
static inline const char *after_comma(struct jscan *s, const char *comma, char closer)
{
    const char *p = skip_ws(comma + 1, s->end);
    if (p < s->end && *p == closer)
        return fail_at(s, comma, ERR_TRAILING_COMMA);
    return p;
}

/* ---- skipping whole values --------------------------------------------- */

/* A value just ended inside the containers closer[base+1..*depth]: pop every
 * container that closes now; stop at a comma (having read the next key in an
 * object) or when depth is back to base. */
static inline const char *after_value(struct jscan *s, const char *p, const char *closer, int *depth, int base)
{
    while (*depth > base) {
        p = skip_ws(p, s->end);
        if (p == s->end)
            return fail_at(s, p, ERR_EOF);
        char c = closer[*depth];
        if (*p == c) {
            p++;
            --*depth;
            continue;
        }
        if (*p != ',')
            return fail_at(s, p, c == '}' ? ERR_OBJ_SEP : ERR_ARR_SEP);
        p = after_comma(s, p, c);
        if (p && c == '}')
            p = member_key(s, p, NULL);
        return p;
    }
    return p;
}

/* One scalar at p (already known not to be a container), or NULL. */
static inline const char *scan_scalar(struct jscan *s, const char *p, int type)
{
    int escaped = 0;
    switch (type) {
    case JSCAN_STRING:
        return scan_string(s, p, &escaped);
    case JSCAN_NUMBER:
        return scan_number(s, p);
    case JSCAN_TRUE:
        return scan_literal(s, p, "true", 4);
    case JSCAN_FALSE:
        return scan_literal(s, p, "false", 5);
    case JSCAN_NULL:
        return scan_literal(s, p, "null", 4);
    default:
        return fail_at(s, p, ERR_VALUE);
    }
}

/* After a value inside a container, the run of members (closer '}') or
 * elements (closer ']') that follow it as compact JSON writes them with
 * string values and plain strings throughout: ,"key":"value" or ,"value".
 * Nothing else is taken: at a space, a number, an escape or a bracket the
 * run stops after the last whole value, where the general path goes on, so
 * what is valid and every error stay the general path's. Most members of
 * Kubernetes objects are such strings; one test per separator replaces
 * the general path's several. */
static inline const char *string_run(const char *p, const char *end, char closer)
{
    if (closer == '}') {
        while (end - p >= 6 && p[0] == ',' && p[1] == '"') {
            const char *k = find_special(p + 2, end);
            if (end - k < 4 || k[0] != '"' || k[1] != ':' || k[2] != '"')
                break;
            const char *v = find_special(k + 3, end);
            if (v == end || *v != '"')
                break;
            p = v + 1;
        }
    } else {
        while (end - p >= 3 && p[0] == ',' && p[1] == '"') {
            const char *v = find_special(p + 2, end);
            if (v == end || *v != '"')
                break;
            p = v + 1;
        }
    }
    return p;
}

/* Skip the value at p (whitespace allowed before it). Iterative: the closing
 * bracket of each open container lives on `closer`, indexed by absolute depth so the limit counts
 * the containers the caller already entered. */
static const char *skip_from(struct jscan *s, const char *p)
{
    const char *end = s->end;
    char closer[JSCAN_MAX_DEPTH + 1];
    const int base = s->depth;
    int depth = base;

    for (;;) {
        p = skip_ws(p, end);
        if (p == end)
            return fail_end(s, p);
        int type = value_type[(unsigned char)*p];
        if (type == JSCAN_OBJECT || type == JSCAN_ARRAY) {
            if (depth >= JSCAN_MAX_DEPTH)
                return fail_at(s, p, ERR_DEPTH);
            char c = type == JSCAN_OBJECT ? '}' : ']';
            p = skip_ws(p + 1, end);
            if (p == end || *p != c) {
                closer[++depth] = c;
                if (c == '}' && !(p = member_key(s, p, NULL)))
                    return NULL;
                continue; /* now at the first member's value */
            }
            p++; /* empty container: a complete value */
        } else if (!(p = scan_scalar(s, p, type))) {
            return NULL;
        } else if (depth > base) {
            p = string_run(p, end, closer[depth]);
        }
        p = after_value(s, p, closer, &depth, base);
        if (!p || depth == base)
            return p;
    }
}

/* ---- public API -------------------------------------------------------- */

void jscan_init(struct jscan *s, const char *buf, size_t len)
{
    if (!buf)
        buf = ""; /* NULL + 0 is undefined; an empty text is still an error */
    s->start = buf;
    s->pos = buf;
    s->end = buf + len;
    s->depth = 0;
    s->base_depth = 0;
    s->error = NULL;
    s->error_offset = 0;
}

enum jscan_type jscan_peek(struct jscan *s)
{
    if (s->error)
        return JSCAN_NONE;
    s->pos = skip_ws(s->pos, s->end);
    if (s->pos == s->end)
        return JSCAN_NONE;
    return (enum jscan_type)value_type[(unsigned char)*s->pos];
}

static int enter(struct jscan *s, char open, const char *msg)
{
    if (s->error)
        return -1;
    const char *p = skip_ws(s->pos, s->end);
    if (p == s->end) {
        fail_end(s, p);
        return -1;
    }
    if (*p != open)
        return fail(s, p, msg);
    if (s->depth >= JSCAN_MAX_DEPTH)
        return fail(s, p, ERR_DEPTH);
    s->depth++;
    s->pos = p + 1;
    return 0;
}

int jscan_enter_object(struct jscan *s)
{
    return enter(s, '{', ERR_OBJECT);
}

int jscan_enter_array(struct jscan *s)
{
    return enter(s, '[', ERR_ARRAY);
}

/* Common start of next_key/next_element: returns the next token position and
 * the token before it, or NULL. A ',' or ':' before means the caller never
 * consumed the value it was handed. */
static const char *next_member(struct jscan *s, int *prev)
{
    if (s->error)
        return NULL;
    if (s->depth <= 0)
        return fail_at(s, s->pos, ERR_NO_CONTAINER);
    const char *p = skip_ws(s->pos, s->end);
    *prev = prev_token(s, p);
    if (*prev == ',' || *prev == ':')
        return fail_at(s, p, ERR_UNCONSUMED);
    if (p == s->end)
        return fail_at(s, p, ERR_EOF);
    return p;
}

/* The closing bracket at p ends the innermost container. */
static int leave(struct jscan *s, const char *p)
{
    s->depth--;
    s->pos = p + 1;
    return 0;
}

/* The general reading of the next key, with every check and error. */
static __attribute__((noinline)) int next_key_general(struct jscan *s, struct jscan_str *key)
{
    int prev;
    const char *p = next_member(s, &prev);
    if (!p)
        return -1;
    if (*p == '}')
        return leave(s, p);
    if (prev != '{') {
        if (*p != ',')
            return fail(s, p, ERR_OBJ_SEP);
        if (!(p = after_comma(s, p, '}')))
            return -1;
    }
    if (!(p = member_key(s, p, key)))
        return -1;
    s->pos = p;
    return 1;
}

/* Compact JSON, as the API server and kube-scheduler write it, is read
 * here: right after a value's last byte, the object's '}' or ,"key": ; or
 * right after its '{', "key": . Keys without escapes only. Anything else
 * (whitespace, an escape, a separator where a value should have been, an
 * error) goes to next_key_general, which also gives every error, so what
 * is valid and each error stay its own. */
int jscan_next_key(struct jscan *s, struct jscan_str *key)
{
    const char *p = s->pos, *end = s->end;
    if (s->error || s->depth <= 0 || p == s->start || end - p < 2)
        return next_key_general(s, key);
    unsigned char before = (unsigned char)p[-1];
    int after_value = before != ',' && before != ':' && before != '{' && before != '[' && !is_ws[before];
    if (after_value && *p == '}')
        return leave(s, p);
    const char *open = after_value && *p == ',' ? p + 1 : before == '{' ? p : NULL;
    if (!open || *open != '"')
        return next_key_general(s, key);
    const char *close = find_special(open + 1, end);
    if (end - close < 2 || close[0] != '"' || close[1] != ':')
        return next_key_general(s, key);
    if (key)
        *key = (struct jscan_str){open + 1, (size_t)(close - open - 1), 0};
    s->pos = close + 2;
    return 1;
}

int jscan_next_element(struct jscan *s)
{
    int prev;
    const char *p = next_member(s, &prev);
    if (!p)
        return -1;
    if (*p == ']')
        return leave(s, p);
    if (prev != '[') {
        if (*p != ',')
            return fail(s, p, ERR_ARR_SEP);
        if (!(p = after_comma(s, p, ']')))
            return -1;
    }
    s->pos = p;
    return 1;
}

size_t jscan_next_plain_strings(struct jscan *s, struct jscan_str *out, size_t max)
{
    const char *p = s->pos, *end = s->end;
    size_t got = 0;
    if (s->error || s->depth <= 0 || p == s->start)
        return 0;
    /* Each pass takes one element: '"' directly after the '[' or after the
     * previous string's '",'; the loop keeps find_special inline over a
     * whole run of names instead of a call per name. */
    while (got < max && end - p >= 3) {
        const char *q = p;
        if (*q == ',' && q[-1] == '"') /* after a string element */
            q++;
        else if (q[-1] != '[')
            break;
        if (*q != '"')
            break;
        const char *close = find_special(q + 1, end);
        if (close == end || *close != '"')
            break;
        out[got].ptr = q + 1;
        out[got].len = (size_t)(close - q - 1);
        out[got].has_escapes = 0;
        got++;
        p = close + 1;
    }
    s->pos = p;
    return got;
}

int jscan_skip_value(struct jscan *s)
{
    if (s->error)
        return -1;
    const char *p = s->pos;
    if (p < s->end && *p == '"') { /* a plain string, the value most skipped: as skip_from takes it */
        const char *q = find_special(p + 1, s->end);
        if (q < s->end && *q == '"') {
            s->pos = q + 1;
            return 0;
        }
    }
    p = skip_from(s, p);
    if (!p)
        return -1;
    s->pos = p;
    return 0;
}

int jscan_skip_known(struct jscan *s, size_t len)
{
    if (s->error || (size_t)(s->end - s->pos) < len)
        return -1;
    s->pos += len;
    return 0;
}

int jscan_value_span(struct jscan *s, struct jscan_span *span)
{
    span->ptr = NULL;
    span->len = 0;
    if (s->error)
        return -1;
    const char *from = skip_ws(s->pos, s->end);
    const char *p = skip_from(s, from);
    if (!p)
        return -1;
    span->ptr = from;
    span->len = (size_t)(p - from);
    s->pos = p;
    return 0;
}

int jscan_string(struct jscan *s, struct jscan_str *out)
{
    if (s->error)
        return -1;
    const char *p = skip_ws(s->pos, s->end);
    if (p == s->end) {
        fail_end(s, p);
        return -1;
    }
    if (*p != '"')
        return fail(s, p, ERR_STRING);
    int escaped = 0;
    const char *q = scan_string(s, p, &escaped);
    if (!q)
        return -1;
    out->ptr = p + 1;
    out->len = (size_t)(q - p - 2);
    out->has_escapes = escaped;
    s->pos = q;
    return 0;
}

int jscan_finish(struct jscan *s)
{
    if (s->error)
        return -1;
    const char *p = skip_ws(s->pos, s->end);
    if (s->depth > 0)
        return p == s->end ? fail(s, p, ERR_EOF) : fail(s, p, ERR_UNCLOSED);
    if (p != s->end)
        return fail(s, p, ERR_TRAILING);
    if (prev_token(s, p) < 0)
        return fail(s, p, ERR_EMPTY); /* no value was ever read */
    s->pos = p;
    return 0;
}

int jscan_ran_out(const struct jscan *s)
{
    return s->error == ERR_EOF || s->error == ERR_UNTERMINATED || s->error == ERR_EMPTY;
}

void jscan_fork(struct jscan *t, const struct jscan *s, const char *at)
{
    jscan_init(t, at, (size_t)(s->end - at));
    t->depth = s->depth;
    t->base_depth = s->depth;
}

int jscan_join(struct jscan *s, const struct jscan *t)
{
    if (s->error || t->error || t->start != s->pos || t->end != s->end || t->base_depth != s->depth)
        return -1;
    s->pos = t->pos;
    s->depth = t->depth;
    return 0;
}

/* ---- decoding ---------------------------------------------------------- */

static int utf8_encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The code unit of "\uXXXX" at p, or -1 when p does not start one. */
static long read_u_escape(const char *p, const char *end)
{
    if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
        return -1;
    long v = 0;
    for (int i = 2; i < 6; i++) {
        int h = hex_value((unsigned char)p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Decode the escape at *pp (a backslash) into out; advances *pp. Returns the
 * byte count, or -1 for an invalid escape. Lone surrogates become U+FFFD. */
static int decode_escape(const char **pp, const char *end, unsigned char out[4])
{
    const char *p = *pp;
    if (end - p < 2)
        return -1;
    unsigned char c = (unsigned char)p[1];
    if (c != 'u') {
        if (!simple_escape[c])
            return -1;
        out[0] = simple_escape[c];
        *pp = p + 2;
        return 1;
    }
    long cp = read_u_escape(p, end);
    if (cp < 0)
        return -1;
    p += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        long lo = read_u_escape(p, end);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
        } else {
            cp = 0xFFFD; /* high surrogate without its low half */
        }
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        cp = 0xFFFD; /* low surrogate without a high half */
    }
    *pp = p;
    return utf8_encode((uint32_t)cp, out);
}

int jscan_key_is_escaped(const struct jscan_str *key, const char *literal)
{
    /* Decode piecewise and compare as we go: no allocation for the rare
     * escaped key. */
    const char *p = key->ptr, *end = key->ptr + key->len;
    const unsigned char *lit = (const unsigned char *)literal;
    while (p < end) {
        unsigned char buf[4];
        int n = 1;
        if (*p == '\\')
            n = decode_escape(&p, end, buf);
        else
            buf[0] = (unsigned char)*p++;
        for (int i = 0; i < n; i++) { /* n < 0 (bad escape) never matches */
            if (*lit == '\0' || *lit != buf[i])
                return 0;
            lit++;
        }
        if (n < 0)
            return 0;
    }
    return *lit == '\0';
}

char *jscan_str_dup(const struct jscan_str *str)
{
    /* Decoding never grows the text (\uXXXX: 6 bytes -> at most 3, a
     * surrogate pair: 12 -> 4), so the raw length bounds the result. */
    char *out = malloc(str->len + 1);
    if (!out)
        return NULL;
    const char *p = str->ptr, *end = str->ptr + str->len;
    size_t n = 0;
    while (p < end) {
        const char *bs = str->has_escapes ? memchr(p, '\\', (size_t)(end - p)) : NULL;
        size_t run = (size_t)((bs ? bs : end) - p);
        memcpy(out + n, p, run);
        n += run;
        p += run;
        if (!bs)
            break;
        int k = decode_escape(&p, end, (unsigned char *)out + n);
        if (k < 0) {
            free(out);
            return NULL;
        }
        n += (size_t)k;
    }
    out[n] = '\0';
    return out;
}
