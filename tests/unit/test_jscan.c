/* test_jscan.c - unit tests for the validating JSON scanner (lib/jscan.c), built
 * three times: SSE2, SWAR and byte at a time (tests/CMakeLists.txt).
 *
 * Every input is scanned from a heap copy of exactly its length (no NUL
 * after it), so under AddressSanitizer any read past s->end fails the test.
 * Besides hand-written cases, the scanner is checked against a small,
 * deliberately naive reference validator on thousands of mutated documents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jscan.h"

/* ---- helpers ----------------------------------------------------------- */

/* A heap copy of exactly n bytes (not NUL-terminated). */
static char *exact(const char *text, size_t n)
{
    char *b = malloc(n ? n : 1);
    assert_non_null(b);
    memcpy(b, text, n);
    return b;
}

/* Skip the whole document, then require only whitespace after it. */
static int skip_doc(const char *buf, size_t n, struct jscan *s)
{
    jscan_init(s, buf, n);
    if (jscan_skip_value(s) != 0)
        return -1;
    return jscan_finish(s);
}

/* Walk any value with the navigation API (enter/next_key/next_element, and
 * jscan_next_plain_strings wherever it applies), so the same inputs exercise
 * both code paths. */
static int walk_value(struct jscan *s, int *values)
{
    struct jscan_str str;
    int r;
    (*values)++;
    switch (jscan_peek(s)) {
    case JSCAN_OBJECT:
        if (jscan_enter_object(s) != 0)
            return -1;
        while ((r = jscan_next_key(s, &str)) == 1)
            if (walk_value(s, values) != 0)
                return -1;
        return r;
    case JSCAN_ARRAY:
        if (jscan_enter_array(s) != 0)
            return -1;
        for (;;) {
            struct jscan_str run[3]; /* the shortcut where it applies, runs of 1 to 3 */
            size_t got = jscan_next_plain_strings(s, run, 1 + (size_t)*values % 3);
            if (got > 0) {
                *values += (int)got;
                continue;
            }
            if ((r = jscan_next_element(s)) != 1)
                return r;
            if (walk_value(s, values) != 0)
                return -1;
        }
    case JSCAN_STRING:
        return jscan_string(s, &str);
    default:
        return jscan_skip_value(s);
    }
}

static int walk_doc(const char *buf, size_t n, struct jscan *s)
{
    int values = 0;
    jscan_init(s, buf, n);
    if (walk_value(s, &values) != 0)
        return -1;
    return jscan_finish(s);
}

typedef int (*doc_fn)(const char *, size_t, struct jscan *);

struct err_case {
    const char *text;
    const char *msg;
    size_t offset;
};

/* Run `run` on an exact copy of text[0..n) and require the given error. */
static void expect_error_n(doc_fn run, const char *text, size_t n, const char *msg, size_t off)
{
    char *b = exact(text, n);
    struct jscan s;
    int rc = run(b, n, &s);
    if (rc != -1 || !s.error || strcmp(s.error, msg) != 0 || s.error_offset != off)
        fail_msg("input '%.*s': want -1 \"%s\" at %zu, got %d \"%s\" at %zu", (int)n, text, msg,
                 off, rc, s.error ? s.error : "(no error)", s.error_offset);
    free(b);
}

/* Both the skipper and the walker must report the same error. */
static void expect_errors(const struct err_case *cases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(cases[i].text);
        expect_error_n(skip_doc, cases[i].text, n, cases[i].msg, cases[i].offset);
        expect_error_n(walk_doc, cases[i].text, n, cases[i].msg, cases[i].offset);
    }
}

static void expect_valid(const char *text)
{
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    if (skip_doc(b, n, &s) != 0)
        fail_msg("skip rejected '%s': %s at %zu", text, s.error, s.error_offset);
    if (walk_doc(b, n, &s) != 0)
        fail_msg("walk rejected '%s': %s at %zu", text, s.error, s.error_offset);
    free(b);
}

static struct jscan_str raw_str(const char *text, int has_escapes)
{
    struct jscan_str str = { text, strlen(text), has_escapes };
    return str;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A document with every token kind, escapes, a surrogate pair, raw UTF-8,
 * and all four whitespace bytes. Ends with '}' so every strict prefix is
 * invalid JSON. */
static const char SAMPLE[] =
    "{\"Pod\":{\"metadata\":{\"name\":\"p\\u00e9-1\",\"labels\":{\"a\\\"b\":"
    "\"x\\\\y\\/z\\b\\f\\n\\r\\t\"}}},\r\n"
    " \"Nodes\" : {\"items\":[\t{\"metadata\":{\"name\":\"n1\"},\"status\":"
    "{\"capacity\":{\"cpu\":\"8\"}}},\n"
    "  {\"metadata\":{\"name\":\"n2\",\"annotations\":{\"k\":\"\\ud83d\\ude00 caf\xc3\xa9\"}},"
    "\"spec\":{\"taints\":[]},\"x\":[-0.5e+3,0,12,1E-2,true,false,null,{},[[]],\"\"]}]},\n"
    " \"NodeNames\":[\"a\",\"b-1\",\"\",\"c\\\"d\"]}";

/* ---- a naive reference validator (recursive, byte at a time) ------------ */

struct ref {
    const char *p, *end;
    int depth;
};

static int ref_value(struct ref *r);

static void ref_ws(struct ref *r)
{
    while (r->p < r->end && strchr(" \t\r\n", *r->p) && *r->p)
        r->p++;
}

static int ref_peek(struct ref *r)
{
    return r->p < r->end ? (unsigned char)*r->p : -1;
}

static int ref_string(struct ref *r)
{
    if (ref_peek(r) != '"')
        return -1;
    r->p++;
    for (;;) {
        int c = ref_peek(r);
        if (c < 0 || c < 0x20)
            return -1;
        r->p++;
        if (c == '"')
            return 0;
        if (c != '\\')
            continue;
        c = ref_peek(r);
        if (c < 0)
            return -1;
        r->p++;
        if (c == 'u') {
            for (int i = 0; i < 4; i++) {
                int h = ref_peek(r);
                if (h < 0 || !strchr("0123456789abcdefABCDEF", h) || h == 0)
                    return -1;
                r->p++;
            }
        } else if (c == 0 || !strchr("\"\\/bfnrt", c)) {
            return -1;
        }
    }
}

static int ref_digits(struct ref *r)
{
    int n = 0;
    while (ref_peek(r) >= '0' && ref_peek(r) <= '9') {
        r->p++;
        n++;
    }
    return n;
}

static int ref_number(struct ref *r)
{
    if (ref_peek(r) == '-')
        r->p++;
    if (ref_peek(r) == '0')
        r->p++;
    else if (ref_digits(r) == 0)
        return -1;
    if (ref_peek(r) == '.') {
        r->p++;
        if (ref_digits(r) == 0)
            return -1;
    }
    if (ref_peek(r) == 'e' || ref_peek(r) == 'E') {
        r->p++;
        if (ref_peek(r) == '+' || ref_peek(r) == '-')
            r->p++;
        if (ref_digits(r) == 0)
            return -1;
    }
    return 0;
}

static int ref_word(struct ref *r, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
        return -1;
    r->p += n;
    return 0;
}

/* Members of an object or elements of an array, after the opening bracket. */
static int ref_container(struct ref *r, int close)
{
    if (++r->depth > JSCAN_MAX_DEPTH)
        return -1;
    r->p++;
    ref_ws(r);
    if (ref_peek(r) == close) {
        r->p++;
        r->depth--;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            ref_ws(r);
            if (ref_string(r) != 0)
                return -1;
            ref_ws(r);
            if (ref_peek(r) != ':')
                return -1;
            r->p++;
        }
        if (ref_value(r) != 0)
            return -1;
        ref_ws(r);
        int c = ref_peek(r);
        r->p++;
        if (c == close) {
            r->depth--;
            return 0;
        }
        if (c != ',')
            return -1;
    }
}

static int ref_value(struct ref *r)
{
    ref_ws(r);
    switch (ref_peek(r)) {
    case '{': return ref_container(r, '}');
    case '[': return ref_container(r, ']');
    case '"': return ref_string(r);
    case 't': return ref_word(r, "true");
    case 'f': return ref_word(r, "false");
    case 'n': return ref_word(r, "null");
    default: return ref_number(r);
    }
}

static int ref_doc(const char *buf, size_t n)
{
    struct ref r = { buf, buf + n, 0 };
    if (ref_value(&r) != 0)
        return -1;
    ref_ws(&r);
    return r.p == r.end ? 0 : -1;
}

/* ---- walking ------------------------------------------------------------ */

static void test_walk_object(void **state)
{
    (void)state;
    static const char text[] = "{\"a\":1,\"b\":\"x\",\"c\":[1,2,3],\"d\":{\"e\":null},\"f\":true}";
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    struct jscan_str key, str;
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(s.depth, 1);

    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "a"));
    assert_int_equal(jscan_peek(&s), JSCAN_NUMBER);
    assert_int_equal(jscan_skip_value(&s), 0);

    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "b"));
    assert_int_equal(jscan_string(&s, &str), 0);
    assert_int_equal(str.len, 1);
    assert_memory_equal(str.ptr, "x", 1);
    assert_int_equal(str.has_escapes, 0);

    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "c"));
    assert_int_equal(jscan_enter_array(&s), 0);
    int elements = 0;
    while (jscan_next_element(&s) == 1) {
        assert_int_equal(jscan_skip_value(&s), 0);
        elements++;
    }
    assert_int_equal(elements, 3);
    assert_int_equal(s.depth, 1);

    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "d"));
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(s.depth, 2);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "e"));
    assert_int_equal(jscan_peek(&s), JSCAN_NULL);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 0);
    assert_int_equal(s.depth, 1);

    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "f"));
    assert_int_equal(jscan_peek(&s), JSCAN_TRUE);
    assert_int_equal(jscan_skip_value(&s), 0);

    assert_int_equal(jscan_next_key(&s, &key), 0);
    assert_int_equal(s.depth, 0);
    assert_int_equal(jscan_finish(&s), 0);
    assert_null(s.error);
    assert_ptr_equal(s.pos, b + n);
    free(b);
}

static void test_walk_array(void **state)
{
    (void)state;
    static const char text[] = "[{\"n\":\"a\"},{\"n\":\"bb\"},{},{\"n\":\"ccc\",\"x\":[]}]";
    static const char *const want[] = { "a", "bb", NULL, "ccc" };
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    struct jscan_str key, str;
    int i = 0, r;
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_array(&s), 0);
    while ((r = jscan_next_element(&s)) == 1) {
        const char *name = NULL;
        char buf[8] = "";
        assert_int_equal(jscan_enter_object(&s), 0);
        while ((r = jscan_next_key(&s, &key)) == 1) {
            if (jscan_key_is(&key, "n")) {
                assert_int_equal(jscan_string(&s, &str), 0);
                memcpy(buf, str.ptr, str.len);
                name = buf;
            } else {
                assert_int_equal(jscan_skip_value(&s), 0);
            }
        }
        assert_int_equal(r, 0);
        assert_true(i < 4);
        if (want[i])
            assert_string_equal(name, want[i]);
        else
            assert_null(name);
        i++;
    }
    assert_int_equal(r, 0);
    assert_int_equal(i, 4);
    assert_int_equal(jscan_finish(&s), 0);
    free(b);
}

static void test_walk_whitespace(void **state)
{
    (void)state;
    static const char text[] = " \r\n\t{ \"k\" \t:\n[ 1 ,\r\n\"v\" ] , \"z\" : { } \n} \t\r\n";
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    struct jscan_str key, str;
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "k"));
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_string(&s, &str), 0);
    assert_int_equal(str.len, 1);
    assert_int_equal(str.ptr[0], 'v');
    assert_int_equal(jscan_next_element(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "z"));
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 0);
    assert_int_equal(jscan_next_key(&s, &key), 0);
    assert_int_equal(jscan_finish(&s), 0);
    free(b);
    expect_valid(text);
}

static void test_peek_types(void **state)
{
    (void)state;
    static const struct { const char *text; enum jscan_type type; } cases[] = {
        { " {}", JSCAN_OBJECT }, { "[]", JSCAN_ARRAY }, { "\"s\"", JSCAN_STRING },
        { "-1", JSCAN_NUMBER }, { "0", JSCAN_NUMBER }, { "9", JSCAN_NUMBER },
        { "true", JSCAN_TRUE }, { "false", JSCAN_FALSE }, { "null", JSCAN_NULL },
        { "tru", JSCAN_TRUE }, { "", JSCAN_NONE }, { "  \n", JSCAN_NONE },
        { "]", JSCAN_NONE }, { "+1", JSCAN_NONE }, { "x", JSCAN_NONE },
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        size_t n = strlen(cases[i].text);
        char *b = exact(cases[i].text, n);
        struct jscan s;
        jscan_init(&s, b, n);
        assert_int_equal(jscan_peek(&s), cases[i].type);
        assert_int_equal(jscan_peek(&s), cases[i].type);  /* does not consume */
        assert_null(s.error);                             /* never sets an error */
        free(b);
    }
    struct jscan s;
    jscan_init(&s, "[1]", 3);
    assert_int_equal(jscan_enter_object(&s), -1);
    assert_int_equal(jscan_peek(&s), JSCAN_NONE);  /* after an error */
}

/* ---- spans ------------------------------------------------------------- */

static void test_value_span_exact(void **state)
{
    (void)state;
    static const char text[] =
        "{\"a\" : [1, {\"b\":\"c\\\"d\"}, []] , \"e\":-1.5e3,\"f\":\"x\",\"g\":true,"
        "\"h\":null,\"i\":{},\"j\":\t\"\\u00e9\\\\\"\n}";
    static const struct { const char *key, *span; } want[] = {
        { "a", "[1, {\"b\":\"c\\\"d\"}, []]" }, { "e", "-1.5e3" }, { "f", "\"x\"" },
        { "g", "true" }, { "h", "null" }, { "i", "{}" }, { "j", "\"\\u00e9\\\\\"" },
    };
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    struct jscan_str key;
    struct jscan_span span;
    size_t i = 0;
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_object(&s), 0);
    while (jscan_next_key(&s, &key) == 1) {
        assert_true(i < COUNT(want));
        assert_true(jscan_key_is(&key, want[i].key));
        assert_int_equal(jscan_value_span(&s, &span), 0);
        size_t len = strlen(want[i].span);
        const char *at = strstr(text, want[i].span);
        assert_non_null(at);
        assert_int_equal(span.len, len);
        assert_ptr_equal(span.ptr, b + (at - text));  /* exact position */
        assert_memory_equal(span.ptr, want[i].span, len);
        assert_ptr_equal(s.pos, span.ptr + span.len);  /* nothing after it taken */
        i++;
    }
    assert_int_equal(i, COUNT(want));
    assert_int_equal(jscan_finish(&s), 0);
    free(b);
}

static void test_value_span_top_level(void **state)
{
    (void)state;
    static const char text[] = " \n [1, 2] \t";
    char *b = exact(text, strlen(text));
    struct jscan s;
    struct jscan_span span;
    jscan_init(&s, b, strlen(text));
    assert_int_equal(jscan_value_span(&s, &span), 0);
    assert_ptr_equal(span.ptr, b + 3);
    assert_int_equal(span.len, 6);
    assert_memory_equal(span.ptr, "[1, 2]", 6);
    assert_int_equal(jscan_finish(&s), 0);

    /* A scalar ending exactly at the buffer end: no terminator to lean on. */
    memcpy(b, "12345678901", 11);
    jscan_init(&s, b, 11);
    assert_int_equal(jscan_value_span(&s, &span), 0);
    assert_int_equal(span.len, 11);
    assert_int_equal(jscan_finish(&s), 0);

    /* On error the span is cleared. */
    jscan_init(&s, b, 0);
    span.ptr = b;
    span.len = 3;
    assert_int_equal(jscan_value_span(&s, &span), -1);
    assert_null(span.ptr);
    assert_int_equal(span.len, 0);
    free(b);
}

static void test_nested_skip(void **state)
{
    (void)state;
    static const char text[] =
        "{\"skip\":{\"a\":[[[{\"b\":[{},[],\"}]\",\"\\\"]\"]}]],"
        "{\"c\":{\"d\":{\"e\":[1,{\"f\":2}]}}}],"
        "\"g\":\"{[\"},\"keep\":\"yes\",\"arr\":[[1,[2,[3]]],{\"x\":[]}],\"last\":0}";
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    struct jscan_str key, str;
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "skip"));
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(s.depth, 1);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "keep"));
    assert_int_equal(jscan_string(&s, &str), 0);
    assert_int_equal(str.len, 3);
    assert_memory_equal(str.ptr, "yes", 3);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "arr"));
    /* Enter the array, skip its first element wholesale, walk the second. */
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "x"));
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 0);
    assert_int_equal(jscan_next_element(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "last"));
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 0);
    assert_int_equal(jscan_finish(&s), 0);
    free(b);
}

/* The extender's use: skip the Pod, take each item's metadata span + name. */
static void test_extender_shape(void **state)
{
    (void)state;
    static const char *const meta[] = {
        "{\"name\":\"node-a\",\"labels\":{\"k\":\"v\"}}",
        "{\"labels\":{},\"name\":\"node-\\u0062\"}",
        "{ \"uid\" : \"1\" , \"name\" : \"node-c\" }",
    };
    char text[1024];
    int len = snprintf(text, sizeof text,
                       "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{}},"
                       "\"Nodes\":{\"items\":[{\"metadata\":%s,\"status\":{\"x\":[1]}},"
                       "{\"kind\":\"Node\",\"metadata\":%s},"
                       "{\"metadata\": %s}]},\"NodeNames\":null}",
                       meta[0], meta[1], meta[2]);
    char *b = exact(text, (size_t)len);
    struct jscan s;
    struct jscan_str key, name;
    int item = 0;
    jscan_init(&s, b, (size_t)len);
    assert_int_equal(jscan_enter_object(&s), 0);
    while (jscan_next_key(&s, &key) == 1) {
        if (!jscan_key_is(&key, "Nodes")) {
            assert_int_equal(jscan_skip_value(&s), 0);
            continue;
        }
        assert_int_equal(jscan_enter_object(&s), 0);
        assert_int_equal(jscan_next_key(&s, &key), 1);
        assert_true(jscan_key_is(&key, "items"));
        assert_int_equal(jscan_enter_array(&s), 0);
        while (jscan_next_element(&s) == 1) {
            assert_int_equal(jscan_enter_object(&s), 0);
            while (jscan_next_key(&s, &key) == 1) {
                if (!jscan_key_is(&key, "metadata")) {
                    assert_int_equal(jscan_skip_value(&s), 0);
                    continue;
                }
                /* In-place walk: peek leaves pos at '{', so [a, pos) is the span. */
                assert_int_equal(jscan_peek(&s), JSCAN_OBJECT);
                const char *a = s.pos;
                assert_int_equal(jscan_enter_object(&s), 0);
                int found = 0;
                while (jscan_next_key(&s, &key) == 1) {
                    if (jscan_key_is(&key, "name")) {
                        assert_int_equal(jscan_string(&s, &name), 0);
                        found = 1;
                    } else {
                        assert_int_equal(jscan_skip_value(&s), 0);
                    }
                }
                assert_true(found);
                assert_int_equal((size_t)(s.pos - a), strlen(meta[item]));
                assert_memory_equal(a, meta[item], strlen(meta[item]));
                char *dup = jscan_str_dup(&name);
                char want[16];
                snprintf(want, sizeof want, "node-%c", 'a' + item);
                assert_string_equal(dup, want);
                free(dup);
                item++;
            }
        }
        assert_int_equal(jscan_next_key(&s, &key), 0);
    }
    assert_null(s.error);
    assert_int_equal(item, 3);
    assert_int_equal(jscan_finish(&s), 0);
    free(b);
}

/* ---- scalars ------------------------------------------------------------ */

static void test_numbers_valid(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "0", "-0", "1", "-1", "10", "1234567890", "0.5", "-0.0", "1.25e10", "1E5", "1e+5",
        "1e-5", "-0.0e-0", "123456789012345678901234567890.000000000001e999", "[0,-1,2.5,3e3]",
        "{\"n\":-12.5E+2}", " 7 ",
    };
    for (size_t i = 0; i < COUNT(ok); i++)
        expect_valid(ok[i]);
}

static void test_numbers_invalid(void **state)
{
    (void)state;
    static const struct err_case cases[] = {
        { "01", "invalid number: leading zero", 0 },
        { "-01", "invalid number: leading zero", 1 },
        { "[00]", "invalid number: leading zero", 1 },
        { "-", "unexpected end of input", 1 },
        { "-a", "invalid number: expected a digit", 1 },
        { "[-]", "invalid number: expected a digit", 2 },
        { "1.", "unexpected end of input", 2 },
        { "1.e5", "invalid number: expected a digit after '.'", 2 },
        { "[1.]", "invalid number: expected a digit after '.'", 3 },
        { "1e", "unexpected end of input", 2 },
        { "1e+", "unexpected end of input", 3 },
        { "1ex", "invalid number: expected a digit in exponent", 2 },
        { "1e+-2", "invalid number: expected a digit in exponent", 3 },
        { "+1", "expected a value", 0 },
        { ".5", "expected a value", 0 },
        { "[1.5x]", "expected ',' or ']' after array element", 4 },
        { "1.5x", "unexpected data after the top-level value", 3 },
        { "0x10", "unexpected data after the top-level value", 1 },
        { "1 2", "unexpected data after the top-level value", 2 },
    };
    expect_errors(cases, COUNT(cases));
}

static void test_literals(void **state)
{
    (void)state;
    expect_valid("true");
    expect_valid("false");
    expect_valid("null");
    expect_valid("[true,false,null]");
    static const struct err_case cases[] = {
        { "tru", "unexpected end of input", 3 },
        { "fals", "unexpected end of input", 4 },
        { "n", "unexpected end of input", 1 },
        { "trux", "invalid literal (expected true, false or null)", 3 },
        { "nulL", "invalid literal (expected true, false or null)", 3 },
        { "[t]", "invalid literal (expected true, false or null)", 2 },
        { "fAlse", "invalid literal (expected true, false or null)", 1 },
        { "True", "expected a value", 0 },
        { "truefalse", "unexpected data after the top-level value", 4 },
        { "[nullx]", "expected ',' or ']' after array element", 5 },
    };
    expect_errors(cases, COUNT(cases));
}

/* ---- strings ------------------------------------------------------------ */

static void test_strings_valid(void **state)
{
    (void)state;
    static const struct { const char *text; size_t len; int esc; } cases[] = {
        { "\"\"", 0, 0 },
        { "\"plain\"", 5, 0 },
        { "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", 16, 1 },
        { "\"\\u0041\\uABCD\\uabcd\\ud83d\\ude00\"", 30, 1 },
        { "\"caf\xc3\xa9 \xe2\x82\xac\"", 9, 0 },  /* raw UTF-8 */
        { "\"\xff\xfe\x80\"", 3, 0 },              /* bytes >= 0x80 are not checked */
        { "\"\x7f\"", 1, 0 },                      /* DEL is not a control character in JSON */
        { "\"a'b\"", 3, 0 },
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        size_t n = strlen(cases[i].text);
        char *b = exact(cases[i].text, n);
        struct jscan s;
        struct jscan_str str;
        jscan_init(&s, b, n);
        assert_int_equal(jscan_string(&s, &str), 0);
        assert_ptr_equal(str.ptr, b + 1);
        assert_int_equal(str.len, cases[i].len);
        assert_int_equal(str.has_escapes, cases[i].esc);
        assert_int_equal(jscan_finish(&s), 0);
        free(b);
        expect_valid(cases[i].text);
    }
}

/* Strings of every length around the 8/16-byte block sizes, with one
 * special byte at every position: the block search must stop exactly. */
static void test_string_block_boundaries(void **state)
{
    (void)state;
    char text[128];
    for (size_t len = 0; len <= 70; len++) {
        for (size_t k = 0; k <= len; k++) {
            /* ["aaaa\naaa",1] with the escape at k: still valid, flagged. */
            size_t n = 0;
            text[n++] = '[';
            text[n++] = '"';
            for (size_t i = 0; i < len; i++) {
                if (i == k) {
                    text[n++] = '\\';
                    text[n++] = 'n';
                }
                text[n++] = (char)('a' + i % 26);
            }
            text[n++] = '"';
            size_t close = n;  /* just past the closing quote */
            memcpy(text + n, ",1]", 3);
            n += 3;
            char *b = exact(text, n);
            struct jscan s;
            struct jscan_str str;
            jscan_init(&s, b, n);
            assert_int_equal(jscan_enter_array(&s), 0);
            assert_int_equal(jscan_next_element(&s), 1);
            assert_int_equal(jscan_string(&s, &str), 0);
            assert_int_equal(str.len, close - 3);
            assert_int_equal(str.has_escapes, k < len);
            assert_ptr_equal(s.pos, b + close);
            free(b);

            /* The same string with a raw control byte at k instead. */
            if (k < len) {
                text[2 + k] = 0x1f;
                expect_error_n(skip_doc, text, 2 + len + 1, "unescaped control character in string",
                               2 + k);
                text[2 + k] = '"';  /* and a quote there ends the string early */
                jscan_init(&s, text, 2 + len + 1);
                assert_int_equal(jscan_enter_array(&s), 0);
                assert_int_equal(jscan_next_element(&s), 1);
                assert_int_equal(jscan_string(&s, &str), 0);
                assert_int_equal(str.len, k);
            }
        }
    }
}

/* Strings dense with escapes (JSON inside an annotation) at every alignment:
 * several escapes per 16-byte block, escapes cut by a block's end, an
 * escaped backslash right before the closing quote. Random pieces from a
 * fixed seed; each string is also broken once (a bad escape, a raw control
 * byte, or cut short, also right after a backslash) and must fail with the
 * error and offset of that spot. */
enum { PIECE_PLAIN, PIECE_QUOTE, PIECE_BACKSLASH, PIECE_NEWLINE, PIECE_UNICODE, PIECE_SLASH, PIECE_TAB, PIECE_KINDS };
static const char *const piece_text[PIECE_KINDS] = {"a", "\\\"", "\\\\", "\\n", "\\u00e9", "\\/", "\\t"};

static uint32_t next_rand(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static void test_escape_dense_strings(void **state)
{
    (void)state;
    char text[512];
    size_t starts[160];
    uint32_t seed = 2463534242u;
    for (int round = 0; round < 4000; round++) {
        size_t lead = next_rand(&seed) % 16, n = 0, pieces = next_rand(&seed) % 60;
        memset(text, ' ', lead);
        n = lead;
        text[n++] = '"';
        for (size_t i = 0; i < pieces; i++) {
            const char *t = piece_text[next_rand(&seed) % 3 ? next_rand(&seed) % PIECE_KINDS : PIECE_PLAIN];
            starts[i] = n;
            memcpy(text + n, t, strlen(t));
            n += strlen(t);
        }
        text[n++] = '"';
        size_t close = n;
        char *b = exact(text, n);
        struct jscan s;
        struct jscan_str str;
        jscan_init(&s, b, n);
        assert_int_equal(jscan_string(&s, &str), 0);
        assert_ptr_equal(s.pos, b + close);
        assert_int_equal(str.len, close - lead - 2);
        assert_int_equal(str.has_escapes, memchr(text + lead + 1, '\\', str.len) != NULL);
        free(b);
        if (pieces == 0)
            continue;
        size_t at = starts[next_rand(&seed) % pieces];
        char saved = text[at];
        switch (next_rand(&seed) % 3) {
        case 0: /* a bad escape where a piece begins */
            text[at] = '\\';
            if (at + 1 < close - 1 && !strchr("\\\"/bfnrtu", text[at + 1])) {
                char want[32];
                snprintf(want, sizeof want, "invalid escape \\%c", text[at + 1]);
                expect_error_n(skip_doc, text, close, want, at);
            }
            break;
        case 1: /* a raw control byte */
            text[at] = '\t';
            expect_error_n(skip_doc, text, close, "unescaped control character in string", at);
            break;
        default: /* cut short, after the backslash of an escape if one starts here */
            expect_error_n(skip_doc, text, at + (text[at] == '\\'), "unterminated string", lead);
            break;
        }
        text[at] = saved;
    }
}

/* A scan forked ahead at an element's comma, joined where the parent is. */
static void test_fork_and_join(void **state)
{
    (void)state;
    static const char text[] = "{\"a\":[{\"x\":1},{\"y\":[2]},3],\"b\":true}";
    size_t n = sizeof text - 1;
    char *b = exact(text, n);
    const char *comma = strstr(b, "},{") + 1;
    struct jscan s, t;
    struct jscan_str key;
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(jscan_enter_array(&s), 0);
    jscan_fork(&t, &s, comma);
    assert_int_equal(jscan_next_element(&t), 1);
    assert_int_equal(jscan_skip_value(&t), 0); /* {"y":[2]} */
    assert_int_equal(jscan_next_element(&t), 1);
    assert_int_equal(jscan_skip_value(&t), 0); /* 3 */
    assert_int_equal(jscan_next_element(&t), 0);
    assert_int_equal(t.depth, s.depth - 1);
    assert_int_equal(jscan_join(&s, &t), -1); /* s is not at the comma yet */
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_skip_value(&s), 0); /* {"x":1} */
    assert_ptr_equal(s.pos, comma);
    assert_int_equal(jscan_join(&s, &t), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_true(jscan_key_is(&key, "b"));
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 0);
    assert_int_equal(jscan_finish(&s), 0);

    /* A fork with an error, or begun at another depth, is refused. */
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    jscan_fork(&t, &s, comma);
    t.base_depth = s.depth + 1;
    assert_int_equal(jscan_join(&s, &t), -1);
    jscan_fork(&t, &s, comma + 1); /* at the '{', not the comma */
    assert_int_equal(jscan_next_element(&t), -1);
    assert_string_equal(t.error, "expected ',' or ']' after array element");
    t.start = comma;
    assert_int_equal(jscan_join(&s, &t), -1);
    assert_ptr_equal(s.pos, comma);
    free(b);
}

static void test_string_errors(void **state)
{
    (void)state;
    static const struct err_case cases[] = {
        { "\"abc", "unterminated string", 0 },
        { "[1,\"abc", "unterminated string", 3 },
        { "\"a\\\"", "unterminated string", 0 },
        { "\"\\", "unterminated string", 0 },
        { "\"\\u12", "unterminated string", 0 },
        { "\"\\u", "unterminated string", 0 },
        { "\"a\nb\"", "unescaped control character in string", 2 },
        { "\"a\x01\"", "unescaped control character in string", 2 },
        { "[\"0123456789abcdefghij\t\"]", "unescaped control character in string", 22 },
        { "\"\\q\"", "invalid escape \\q", 1 },
        { "\"ab\\x41\"", "invalid escape \\x", 3 },
        { "\"\\U0041\"", "invalid escape \\U", 1 },
        { "\"\\'\"", "invalid escape \\'", 1 },
        { "\"\\ \"", "invalid escape (unprintable byte after '\\')", 1 },
        { "\"\\\x01\"", "invalid escape (unprintable byte after '\\')", 1 },
        { "\"\\\xc3\xa9\"", "invalid escape (unprintable byte after '\\')", 1 },
        { "\"\\u12G4\"", "invalid \\u escape: expected 4 hex digits", 1 },
        { "\"\\u12\"", "invalid \\u escape: expected 4 hex digits", 1 },
        { "\"ok\\ud83d\\uzzzz\"", "invalid \\u escape: expected 4 hex digits", 9 },
        { "{\"k\\q\":1}", "invalid escape \\q", 3 },
    };
    expect_errors(cases, COUNT(cases));

    /* NUL bytes: inside a string a control character, outside not a value. */
    expect_error_n(skip_doc, "\"a\0b\"", 5, "unescaped control character in string", 2);
    expect_error_n(walk_doc, "[\0]", 3, "expected a value", 1);
    expect_error_n(skip_doc, "[1]\0", 4, "unexpected data after the top-level value", 3);
}

/* ---- structure ---------------------------------------------------------- */

static void test_structure_errors(void **state)
{
    (void)state;
    static const struct err_case cases[] = {
        { "{\"a\" 1}", "expected ':' after object key", 5 },
        { "{\"a\"}", "expected ':' after object key", 4 },
        { "{\"a\",1}", "expected ':' after object key", 4 },
        { "{\"a\":1 \"b\":2}", "expected ',' or '}' after object member", 7 },
        { "{\"a\":1]", "expected ',' or '}' after object member", 6 },
        { "[1 2]", "expected ',' or ']' after array element", 3 },
        { "[1}", "expected ',' or ']' after array element", 2 },
        { "[1,]", "trailing comma", 2 },
        { "[1,\n ]", "trailing comma", 2 },
        { "{\"a\":1,}", "trailing comma", 6 },
        { "{\"a\":[1,],\"b\":2}", "trailing comma", 7 },
        { "[1,,2]", "expected a value", 3 },
        { "[,\"a\"]", "expected a value", 1 },
        { "[\"a\",,\"b\"]", "expected a value", 5 },
        { "[\"a\",\"b\",]", "trailing comma", 8 },
        { "[\"a\" \"b\"]", "expected ',' or ']' after array element", 5 },
        { "[\"a\",\"b\x01\"]", "unescaped control character in string", 7 },
        { "[\"a\",\"b", "unterminated string", 5 },
        { "{\"a\":\"b\",\"c\"}", "expected ':' after object key", 12 },
        { "[,1]", "expected a value", 1 },
        { "{,}", "expected a string as object key", 1 },
        { "{1:2}", "expected a string as object key", 1 },
        { "{\"a\":1,2:3}", "expected a string as object key", 7 },
        { "{'a':1}", "expected a string as object key", 1 },
        { "{\"a\":}", "expected a value", 5 },
        { "]", "expected a value", 0 },
        { "}", "expected a value", 0 },
        { "[1]]", "unexpected data after the top-level value", 3 },
        { "{} {}", "unexpected data after the top-level value", 3 },
        { "[", "unexpected end of input", 1 },
        { "{", "unexpected end of input", 1 },
        { "{\"a\"", "unexpected end of input", 4 },
        { "{\"a\":", "unexpected end of input", 5 },
        { "{\"a\":1", "unexpected end of input", 6 },
        { "{\"a\":1,", "unexpected end of input", 7 },
        { "[1,", "unexpected end of input", 3 },
        { "[[[]]  ", "unexpected end of input", 7 },
        { "", "empty input", 0 },
        { " \n\t\r ", "empty input", 5 },
        { "\xef\xbb\xbf{}", "expected a value", 0 },  /* a BOM is not accepted */
    };
    expect_errors(cases, COUNT(cases));
}

/* The same error classes met through the navigation API directly. */
static void test_api_errors(void **state)
{
    (void)state;
    struct jscan s;
    struct jscan_str key;

    jscan_init(&s, "{\"a\":1,}", 8);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), -1);
    assert_string_equal(s.error, "trailing comma");
    assert_int_equal(s.error_offset, 6);

    jscan_init(&s, "[1,]", 4);
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_element(&s), -1);
    assert_string_equal(s.error, "trailing comma");
    assert_int_equal(s.error_offset, 2);

    jscan_init(&s, "{\"a\" 1}", 7);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), -1);
    assert_string_equal(s.error, "expected ':' after object key");
    assert_int_equal(s.error_offset, 5);

    jscan_init(&s, "[1]", 3);
    assert_int_equal(jscan_enter_object(&s), -1);
    assert_string_equal(s.error, "expected an object");
    assert_int_equal(s.error_offset, 0);

    jscan_init(&s, " {}", 3);
    assert_int_equal(jscan_enter_array(&s), -1);
    assert_string_equal(s.error, "expected an array");
    assert_int_equal(s.error_offset, 1);

    jscan_init(&s, "[12]", 4);
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_string(&s, &key), -1);
    assert_string_equal(s.error, "expected a string");
    assert_int_equal(s.error_offset, 1);

    jscan_init(&s, "  ", 2);
    assert_int_equal(jscan_enter_object(&s), -1);
    assert_string_equal(s.error, "empty input");
    assert_int_equal(s.error_offset, 2);

    jscan_init(&s, NULL, 0);
    assert_int_equal(jscan_string(&s, &key), -1);
    assert_string_equal(s.error, "empty input");
    assert_int_equal(s.error_offset, 0);
}

static void test_errors_are_sticky(void **state)
{
    (void)state;
    static const char text[] = "{\"a\":[1,2 3],\"b\":{}}";
    struct jscan s;
    struct jscan_str key;
    struct jscan_span span;
    jscan_init(&s, text, strlen(text));
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(jscan_skip_value(&s), -1);
    assert_string_equal(s.error, "expected ',' or ']' after array element");
    assert_int_equal(s.error_offset, 10);
    const char *first = s.error;

    /* Every call now fails and the first error stays. */
    assert_int_equal(jscan_next_key(&s, &key), -1);
    assert_int_equal(jscan_next_element(&s), -1);
    assert_int_equal(jscan_enter_object(&s), -1);
    assert_int_equal(jscan_enter_array(&s), -1);
    assert_int_equal(jscan_skip_value(&s), -1);
    assert_int_equal(jscan_value_span(&s, &span), -1);
    assert_int_equal(jscan_string(&s, &key), -1);
    assert_int_equal(jscan_finish(&s), -1);
    assert_int_equal(jscan_peek(&s), JSCAN_NONE);
    assert_ptr_equal(s.error, first);
    assert_int_equal(s.error_offset, 10);
}

static void test_finish(void **state)
{
    (void)state;
    struct jscan s;
    struct jscan_str key;

    /* finish while a container is still open */
    jscan_init(&s, "{\"a\":1}", 7);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_finish(&s), -1);
    assert_string_equal(s.error, "jscan_finish called inside an open object or array");
    assert_int_equal(s.error_offset, 6);

    /* ... and when the text ends before it closes */
    jscan_init(&s, "{\"a\":1", 6);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_finish(&s), -1);
    assert_string_equal(s.error, "unexpected end of input");
    assert_int_equal(s.error_offset, 6);

    /* finish without any value read */
    jscan_init(&s, " \n", 2);
    assert_int_equal(jscan_finish(&s), -1);
    assert_string_equal(s.error, "empty input");

    jscan_init(&s, "[] \n", 4);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_finish(&s), 0);
    assert_int_equal(jscan_finish(&s), 0);  /* idempotent */
}

static void test_misuse_detected(void **state)
{
    (void)state;
    struct jscan s;
    struct jscan_str key;

    jscan_init(&s, "{\"a\":1}", 7);
    assert_int_equal(jscan_next_key(&s, &key), -1);
    assert_string_equal(s.error, "not inside an object or array");

    jscan_init(&s, "{\"a\":1,\"b\":2}", 13);
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(jscan_next_key(&s, &key), -1);  /* value of "a" never consumed */
    assert_string_equal(s.error, "previous value was not consumed");
    assert_int_equal(s.error_offset, 5);

    jscan_init(&s, "[1,2]", 5);
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_next_element(&s), -1);
    assert_string_equal(s.error, "previous value was not consumed");
    assert_int_equal(s.error_offset, 3);

    jscan_init(&s, "[]", 2);
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 0);
    assert_int_equal(jscan_next_element(&s), -1);  /* the array is closed */
    assert_string_equal(s.error, "not inside an object or array");
}

/* ---- nesting ------------------------------------------------------------ */

/* count '[' then count ']' in a fresh exact buffer. */
static char *nested_arrays(int count, size_t *n)
{
    *n = (size_t)count * 2;
    char *b = malloc(*n);
    assert_non_null(b);
    memset(b, '[', (size_t)count);
    memset(b + count, ']', (size_t)count);
    return b;
}

static void test_depth_limit_skip(void **state)
{
    (void)state;
    size_t n;
    struct jscan s;
    char *b = nested_arrays(JSCAN_MAX_DEPTH, &n);
    assert_int_equal(skip_doc(b, n, &s), 0);
    assert_int_equal(walk_doc(b, n, &s), 0);
    free(b);

    b = nested_arrays(JSCAN_MAX_DEPTH + 1, &n);
    assert_int_equal(skip_doc(b, n, &s), -1);
    assert_string_equal(s.error, "nesting deeper than 512");
    assert_int_equal(s.error_offset, JSCAN_MAX_DEPTH);
    assert_int_equal(walk_doc(b, n, &s), -1);
    assert_string_equal(s.error, "nesting deeper than 512");
    assert_int_equal(s.error_offset, JSCAN_MAX_DEPTH);
    free(b);

    /* Objects count too: {"a":{"a":...}} */
    size_t levels = JSCAN_MAX_DEPTH + 1;
    n = levels * 5 + 1 + levels;
    b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < levels; i++)
        memcpy(b + i * 5, "{\"a\":", 5);
    b[levels * 5] = '1';
    memset(b + levels * 5 + 1, '}', levels);
    assert_int_equal(skip_doc(b, n, &s), -1);
    assert_string_equal(s.error, "nesting deeper than 512");
    assert_int_equal(s.error_offset, JSCAN_MAX_DEPTH * 5);
    /* One level less is fine. */
    assert_int_equal(skip_doc(b + 5, n - 6, &s), 0);
    free(b);

    /* Very deep input fails at the limit without recursion trouble. */
    b = nested_arrays(100000, &n);
    assert_int_equal(skip_doc(b, n, &s), -1);
    assert_int_equal(s.error_offset, JSCAN_MAX_DEPTH);
    free(b);
}

static void test_depth_limit_enter(void **state)
{
    (void)state;
    size_t n;
    struct jscan s;
    char *b = nested_arrays(JSCAN_MAX_DEPTH + 1, &n);
    jscan_init(&s, b, n);
    for (int i = 0; i < JSCAN_MAX_DEPTH; i++) {
        assert_int_equal(jscan_enter_array(&s), 0);
        assert_int_equal(jscan_next_element(&s), 1);
    }
    assert_int_equal(s.depth, JSCAN_MAX_DEPTH);
    assert_int_equal(jscan_enter_array(&s), -1);
    assert_string_equal(s.error, "nesting deeper than 512");
    assert_int_equal(s.error_offset, JSCAN_MAX_DEPTH);
    free(b);

    /* Entered containers and skipped ones share the limit. */
    b = nested_arrays(JSCAN_MAX_DEPTH, &n);
    jscan_init(&s, b, n);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(jscan_enter_array(&s), 0);
        assert_int_equal(jscan_next_element(&s), 1);
    }
    assert_int_equal(jscan_skip_value(&s), 0);  /* 412 more: exactly 512 */
    for (int i = 0; i < 100; i++)
        assert_int_equal(jscan_next_element(&s), 0);
    assert_int_equal(jscan_finish(&s), 0);
    free(b);

    b = nested_arrays(JSCAN_MAX_DEPTH + 1, &n);
    jscan_init(&s, b, n);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(jscan_enter_array(&s), 0);
        assert_int_equal(jscan_next_element(&s), 1);
    }
    assert_int_equal(jscan_skip_value(&s), -1);  /* 413 more: one too many */
    assert_string_equal(s.error, "nesting deeper than 512");
    assert_int_equal(s.error_offset, JSCAN_MAX_DEPTH);
    free(b);
}

/* ---- robustness --------------------------------------------------------- */

/* Every strict prefix of SAMPLE is invalid: both paths must say so, with an
 * offset inside the prefix, and never read beyond it (ASan). */
static void test_truncation_every_prefix(void **state)
{
    (void)state;
    size_t len = strlen(SAMPLE);
    struct jscan s;
    char *full = exact(SAMPLE, len);
    assert_int_equal(ref_doc(full, len), 0);
    assert_int_equal(skip_doc(full, len, &s), 0);
    assert_int_equal(walk_doc(full, len, &s), 0);
    free(full);

    for (size_t n = 0; n < len; n++) {
        char *b = exact(SAMPLE, n);
        assert_int_equal(ref_doc(b, n), -1);
        s.error = NULL;
        assert_int_equal(skip_doc(b, n, &s), -1);
        assert_non_null(s.error);
        assert_true(s.error_offset <= n);
        s.error = NULL;
        assert_int_equal(walk_doc(b, n, &s), -1);
        assert_non_null(s.error);
        assert_true(s.error_offset <= n);
        free(b);
    }
}

static void expect_same_verdict(const char *buf, size_t n)
{
    char *b = exact(buf, n);
    struct jscan s;
    int want = ref_doc(b, n);
    int skip = skip_doc(b, n, &s);
    if (skip != want)
        fail_msg("skip %d, reference %d on '%.*s' (%s)", skip, want, (int)n, buf,
                 s.error ? s.error : "-");
    if (skip != 0 && s.error_offset > n)
        fail_msg("offset %zu beyond %zu", s.error_offset, n);
    int walk = walk_doc(b, n, &s);
    if (walk != want)
        fail_msg("walk %d, reference %d on '%.*s' (%s)", walk, want, (int)n, buf,
                 s.error ? s.error : "-");
    free(b);
}

/* Replace, delete or insert one byte anywhere in SAMPLE: the scanner must
 * accept exactly what the reference validator accepts. */
static void test_mutations_match_reference(void **state)
{
    (void)state;
    static const char bytes[] = "\"\\{}[],: \n0-1.eE+tfnuaA/\x01\x1f\x7f\x80\xff";
    size_t len = strlen(SAMPLE), nb = sizeof bytes - 1;
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    for (size_t i = 0; i < len; i++) {
        for (size_t j = 0; j < nb; j++) {
            memcpy(buf, SAMPLE, len);
            buf[i] = bytes[j];
            expect_same_verdict(buf, len);
            memcpy(buf, SAMPLE, i);
            buf[i] = bytes[j];
            memcpy(buf + i + 1, SAMPLE + i, len - i);
            expect_same_verdict(buf, len + 1);
        }
        memcpy(buf, SAMPLE, i);
        memcpy(buf + i, SAMPLE + i + 1, len - i - 1);
        expect_same_verdict(buf, len - 1);
    }
    free(buf);
}

/* ---- runs of plain strings ------------------------------------------------ */

/* The run reader takes plain strings up to max, stops where the shortcut
 * does not apply (whitespace, an escape, another type, the end), and
 * leaves the scanner where jscan_next_element goes on correctly. */
static void expect_run(const char *text, size_t max, size_t want, const char *last, const char *rest_first)
{
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    struct jscan_str run[8];
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_array(&s), 0);
    size_t got = jscan_next_plain_strings(&s, run, max);
    assert_int_equal(got, want);
    for (size_t i = 0; i < got; i++) {
        assert_int_equal(run[i].has_escapes, 0);
        assert_int_equal(run[i].ptr[-1], '"');
        assert_int_equal(run[i].ptr[run[i].len], '"');
    }
    if (last)
        assert_true(got > 0 && run[got - 1].len == strlen(last) && memcmp(run[got - 1].ptr, last, run[got - 1].len) == 0);
    int r = jscan_next_element(&s);
    if (!rest_first) {
        assert_int_equal(r, 0);
    } else {
        struct jscan_str next;
        assert_int_equal(r, 1);
        if (jscan_peek(&s) == JSCAN_STRING) {
            assert_int_equal(jscan_string(&s, &next), 0);
            char *d = jscan_str_dup(&next);
            assert_string_equal(d, rest_first);
            free(d);
        } else {
            assert_int_equal(jscan_skip_value(&s), 0);
        }
    }
    assert_null(s.error);
    free(b);
}

static void test_plain_strings_run(void **state)
{
    (void)state;
    expect_run("[\"a\",\"bb\",\"ccc\"]", 8, 3, "ccc", NULL);
    expect_run("[\"a\",\"bb\",\"ccc\"]", 2, 2, "bb", "ccc");          /* max */
    expect_run("[\"a\", \"bb\"]", 8, 1, "a", "bb");                      /* whitespace */
    expect_run("[\"a\",\"b\\u0062\",\"c\"]", 8, 1, "a", "bb"); /* an escape */
    expect_run("[\"a\",1,\"c\"]", 8, 1, "a", "");                        /* another type */
    expect_run("[ \"a\"]", 8, 0, NULL, "a");                               /* not after '[' */
    expect_run("[\"\",\"x\"]", 8, 2, "x", NULL);                           /* empty names */
    expect_run("[]", 8, 0, NULL, NULL);
    expect_run("[\"0123456789abcdef0123\",\"n\xc3\xa9\"]", 8, 2, "n\xc3\xa9", NULL); /* past 16 bytes, UTF-8 */
}

/* ---- keys and decoding --------------------------------------------------- */

static void test_key_is_plain(void **state)
{
    (void)state;
    struct jscan_str k = raw_str("name", 0);
    assert_true(jscan_key_is(&k, "name"));
    assert_false(jscan_key_is(&k, "nam"));
    assert_false(jscan_key_is(&k, "names"));
    assert_false(jscan_key_is(&k, "Name"));
    assert_false(jscan_key_is(&k, ""));
    k = raw_str("", 0);
    assert_true(jscan_key_is(&k, ""));
    assert_false(jscan_key_is(&k, "a"));
    /* Not NUL-terminated: only len bytes count. */
    struct jscan_str part = { "metadata", 4, 0 };
    assert_true(jscan_key_is(&part, "meta"));
    assert_false(jscan_key_is(&part, "metadata"));
}

static void test_key_is_escaped(void **state)
{
    (void)state;
    static const struct { const char *raw, *lit; int equal; } cases[] = {
        { "na\\u006De", "name", 1 },
        { "\\u006e\\u0061\\u006d\\u0065", "name", 1 },
        { "n\\\"q", "n\"q", 1 },
        { "a\\/b", "a/b", 1 },
        { "a\\\\b", "a\\b", 1 },
        { "t\\tn\\n", "t\tn\n", 1 },
        { "caf\\u00e9", "caf\xc3\xa9", 1 },
        { "\\u20ac", "\xe2\x82\xac", 1 },
        { "\\ud83d\\ude00", "\xf0\x9f\x98\x80", 1 },
        { "\\ud83d", "\xef\xbf\xbd", 1 },           /* lone surrogate -> U+FFFD */
        { "na\\u006d", "name", 0 },                 /* decoded key is a prefix */
        { "name\\u0073", "name", 0 },               /* literal is a prefix */
        { "ab\\u0000", "ab", 0 },                   /* embedded NUL never matches */
        { "\\u0000", "", 0 },
        { "n\\u0061me", "nbme", 0 },
        { "\\q", "q", 0 },                          /* invalid escape */
        { "\\u12", "", 0 },
        { "x\\", "x", 0 },
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        struct jscan_str k = raw_str(cases[i].raw, 1);
        if (jscan_key_is(&k, cases[i].lit) != cases[i].equal)
            fail_msg("key_is('%s', '%s') != %d", cases[i].raw, cases[i].lit, cases[i].equal);
    }

    /* Keys straight from a scan carry has_escapes. */
    static const char text[] = "{\"na\\u006de\":\"n\",\"plain\":1}";
    struct jscan s;
    struct jscan_str key;
    jscan_init(&s, text, strlen(text));
    assert_int_equal(jscan_enter_object(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(key.has_escapes, 1);
    assert_int_equal(key.len, 9);
    assert_true(jscan_key_is(&key, "name"));
    assert_int_equal(jscan_skip_value(&s), 0);
    assert_int_equal(jscan_next_key(&s, &key), 1);
    assert_int_equal(key.has_escapes, 0);
    assert_true(jscan_key_is(&key, "plain"));
}

static void expect_dup(const char *raw, const char *want, size_t want_len)
{
    struct jscan_str str = raw_str(raw, strchr(raw, '\\') != NULL);
    char *got = jscan_str_dup(&str);
    if (!got)
        fail_msg("str_dup('%s') failed", raw);
    assert_memory_equal(got, want, want_len + 1);  /* includes the terminator */
    free(got);
}

static void test_str_dup_plain(void **state)
{
    (void)state;
    expect_dup("", "", 0);
    expect_dup("hello", "hello", 5);
    expect_dup("caf\xc3\xa9", "caf\xc3\xa9", 5);
    struct jscan_str part = { "abcdef", 3, 0 };
    char *got = jscan_str_dup(&part);
    assert_string_equal(got, "abc");
    free(got);
}

static void test_str_dup_escapes(void **state)
{
    (void)state;
    expect_dup("a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti", "a\"b\\c/d\be\ff\ng\rh\ti", 17);
    expect_dup("\\u0041", "A", 1);
    expect_dup("x\\u007fy", "x\x7fy", 3);
    expect_dup("\\u0080", "\xc2\x80", 2);
    expect_dup("\\u00e9t\\u00E9", "\xc3\xa9t\xc3\xa9", 5);
    expect_dup("\\u07ff", "\xdf\xbf", 2);
    expect_dup("\\u0800", "\xe0\xa0\x80", 3);
    expect_dup("\\u20ac", "\xe2\x82\xac", 3);
    expect_dup("\\uffff", "\xef\xbf\xbf", 3);
    expect_dup("a\\u0000b", "a\0b", 3);  /* embedded NUL kept */
    expect_dup("\\\\u0041", "\\u0041", 6);  /* escaped backslash, not a \u */
}

static void test_str_dup_surrogates(void **state)
{
    (void)state;
    expect_dup("\\ud83d\\ude00", "\xf0\x9f\x98\x80", 4);
    expect_dup("\\uD83D\\uDE00!", "\xf0\x9f\x98\x80!", 5);
    expect_dup("\\ud800\\udc00", "\xf0\x90\x80\x80", 4);  /* U+10000 */
    expect_dup("\\udbff\\udfff", "\xf4\x8f\xbf\xbf", 4);  /* U+10FFFF */
    expect_dup("\\ud83d", "\xef\xbf\xbd", 3);             /* lone high at end */
    expect_dup("\\ud83dx", "\xef\xbf\xbdx", 4);           /* high, then a plain byte */
    expect_dup("\\ud83d\\u0041", "\xef\xbf\xbd" "A", 4);  /* high, then a non-surrogate */
    expect_dup("\\ud83d\\n", "\xef\xbf\xbd\n", 4);        /* high, then another escape */
    expect_dup("\\ude00", "\xef\xbf\xbd", 3);             /* lone low */
    expect_dup("\\ude00\\ud83d", "\xef\xbf\xbd\xef\xbf\xbd", 6);  /* reversed pair */
    expect_dup("\\ud83d\\ud83d\\ude00", "\xef\xbf\xbd\xf0\x9f\x98\x80", 7);
}

static void test_str_dup_invalid(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\\q", "ab\\", "\\u12", "\\u12G4", "\\ud83d\\uzzzz", "ok\\x41",
    };
    for (size_t i = 0; i < COUNT(bad); i++) {
        struct jscan_str str = raw_str(bad[i], 1);
        char *got = jscan_str_dup(&str);
        if (got)
            fail_msg("str_dup('%s') should fail, gave '%s'", bad[i], got);
    }
}

/* Decoding what the scanner returns, from an exact buffer. */
static void test_str_dup_from_scan(void **state)
{
    (void)state;
    static const char text[] = "[\"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\"\",\"\"]";
    size_t n = strlen(text);
    char *b = exact(text, n);
    struct jscan s;
    struct jscan_str str;
    jscan_init(&s, b, n);
    assert_int_equal(jscan_enter_array(&s), 0);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_string(&s, &str), 0);
    char *got = jscan_str_dup(&str);
    assert_string_equal(got, "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\"");
    free(got);
    assert_int_equal(jscan_next_element(&s), 1);
    assert_int_equal(jscan_string(&s, &str), 0);
    assert_int_equal(str.len, 0);
    got = jscan_str_dup(&str);
    assert_string_equal(got, "");
    free(got);
    assert_int_equal(jscan_next_element(&s), 0);
    assert_int_equal(jscan_finish(&s), 0);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_object),
        cmocka_unit_test(test_walk_array),
        cmocka_unit_test(test_walk_whitespace),
        cmocka_unit_test(test_peek_types),
        cmocka_unit_test(test_value_span_exact),
        cmocka_unit_test(test_value_span_top_level),
        cmocka_unit_test(test_nested_skip),
        cmocka_unit_test(test_extender_shape),
        cmocka_unit_test(test_numbers_valid),
        cmocka_unit_test(test_numbers_invalid),
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_strings_valid),
        cmocka_unit_test(test_string_block_boundaries),
        cmocka_unit_test(test_escape_dense_strings),
        cmocka_unit_test(test_fork_and_join),
        cmocka_unit_test(test_string_errors),
        cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_api_errors),
        cmocka_unit_test(test_errors_are_sticky),
        cmocka_unit_test(test_finish),
        cmocka_unit_test(test_misuse_detected),
        cmocka_unit_test(test_depth_limit_skip),
        cmocka_unit_test(test_depth_limit_enter),
        cmocka_unit_test(test_truncation_every_prefix),
        cmocka_unit_test(test_mutations_match_reference),
        cmocka_unit_test(test_plain_strings_run),
        cmocka_unit_test(test_key_is_plain),
        cmocka_unit_test(test_key_is_escaped),
        cmocka_unit_test(test_str_dup_plain),
        cmocka_unit_test(test_str_dup_escapes),
        cmocka_unit_test(test_str_dup_surrogates),
        cmocka_unit_test(test_str_dup_invalid),
        cmocka_unit_test(test_str_dup_from_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
