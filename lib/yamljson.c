/*
 * yamljson.c - YAML to cJSON, typed the way sigs.k8s.io/yaml (go-yaml v2) does.
 *
 * libyaml's event parser feeds an explicit stack of open containers, so deep
 * nesting never recurses on the C stack and each node is built once, in
 * place. Containers are attached to their parent as soon as they open, so the
 * whole partial tree hangs off one root and a single cJSON_Delete cleans up
 * after any error.
 *
 * Typing of plain (unquoted, untagged) scalars follows go-yaml v2's resolver:
 *   ""  ~  null Null NULL                                  -> null
 *   y Y yes Yes YES true True TRUE on On ON                -> true
 *   n N no No NO false False FALSE off Off OFF             -> false
 *   integers as Go's strconv.ParseInt(s, 0, 64) reads them after removing
 *   '_': optional sign, 0x/0o/0b prefixes, and a bare leading 0 meaning octal
 *   (so `defaultMode: 0644` is 420, exactly as kubectl sends it)      -> number
 *   [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?  (so "08" is 8,
 *   "1.20" is 1.2, "1e3" is 1000)                                     -> number
 *   anything else, including timestamps, 500m, 1Gi, 1.2.3              -> string
 * Deliberate differences, all towards keeping the original text:
 *   - Integers whose magnitude exceeds 2^53 stay strings: cJSON keeps numbers
 *     as doubles, which would silently round them, and such values are
 *     resourceVersions, quantities or IDs that must survive byte for byte.
 *   - .inf/.nan (any case or sign) and floats overflowing a double stay
 *     strings: JSON has no such numbers (sigs.k8s.io/yaml fails on them).
 *   - Mapping keys are the scalar's text as written (`8:`, `yes:` and `0x10:`
 *     give "8", "yes" and "0x10"); go-yaml would normalise the last two.
 *   - !!binary and !!timestamp values stay as their text.
 * Quoted and block scalars are strings. An explicit !!str (or the
 * non-specific "!") gives a string; !!null/!!bool/!!int/!!float must match
 * their value ("!!float 1" is 1) or the conversion fails; other tags are
 * ignored and give strings. Object members keep document order.
 */
#include "lib/yamljson.h"
#include "lib/ascii.h"
#include "lib/grow.h"
#include "lib/strbuf.h"

#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* Containers nested deeper than this are refused: cJSON's delete, duplicate
 * and print recurse, and no Kubernetes object comes near this depth. */
#define YJ_MAX_DEPTH 512
/* Alias expansion may add at most this many nodes to the output, so a few
 * hundred bytes of nested aliases ("billion laughs") cannot exhaust memory. */
#define YJ_MAX_ALIAS_NODES 1000000u
/* Mappings with this many keys get a hash set for duplicate detection; below
 * it a linear scan of the members is cheaper. */
#define YJ_KEYSET_THRESHOLD 16
/* Largest magnitude a double holds exactly, with every smaller integer. */
#define YJ_MAX_EXACT_INT 9007199254740992ULL
#define YJ_CORE_TAG_PREFIX "tag:yaml.org,2002:"

#if defined(__GNUC__)
#define YJ_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define YJ_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */

static char *dup_mem(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *dup_str(const char *s)
{
    return dup_mem(s, strlen(s));
}

static char *format_message(size_t line, size_t column, const char *problem)
{
    int n = snprintf(NULL, 0, "line %zu, column %zu: %s", line, column, problem);
    char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (msg)
        snprintf(msg, (size_t)n + 1, "line %zu, column %zu: %s", line, column, problem);
    return msg;
}

/* ------------------------------------------------------------------------ */
/* String-keyed open-addressing hash map. Keys are borrowed: they point at   */
/* strings that outlive the map (member names in the tree, anchor names).   */

struct strmap {
    const char **keys; /* NULL marks an empty slot */
    size_t *vals;
    size_t cap; /* a power of two; 0 until the first insert */
    size_t used;
};

static size_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 32));
}

static size_t strmap_slot(const struct strmap *m, const char *key)
{
    size_t mask = m->cap - 1;
    size_t i = str_hash(key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

static const size_t *strmap_get(const struct strmap *m, const char *key)
{
    if (m->cap == 0)
        return NULL;
    size_t i = strmap_slot(m, key);
    return m->keys[i] ? &m->vals[i] : NULL;
}

static int strmap_grow(struct strmap *m)
{
    struct strmap n = {NULL, NULL, m->cap ? m->cap * 2 : 32, 0};
    n.keys = calloc(n.cap, sizeof *n.keys);
    n.vals = calloc(n.cap, sizeof *n.vals);
    if (!n.keys || !n.vals) {
        free(n.keys);
        free(n.vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = strmap_slot(&n, m->keys[i]);
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.used++;
    }
    free(m->keys);
    free(m->vals);
    *m = n;
    return 0;
}

/* Insert key, or overwrite its value when present. 0, or -1 when out of memory. */
static int strmap_put(struct strmap *m, const char *key, size_t val)
{
    if ((m->used + 1) * 2 > m->cap && strmap_grow(m) != 0)
        return -1;
    size_t i = strmap_slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->used++;
    }
    m->vals[i] = val;
    return 0;
}

static void strmap_free(struct strmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------ */
/* Scalar typing                                                            */

enum yj_kind {
    YJ_NULL,
    YJ_TRUE,
    YJ_FALSE,
    YJ_INT,     /* an integer a double holds exactly -> number */
    YJ_FLOAT,   /* -> number */
    YJ_BIGINT,  /* an integer too large for a double -> string */
    YJ_SPECIAL, /* .inf/.nan, or a float overflowing a double -> string */
    YJ_STRING
};

static const char *const null_words[] = {"~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
static const char *const false_words[] = {"n",     "N",     "no",  "No",  "NO",  "false",
                                          "False", "FALSE", "off", "Off", "OFF", NULL};
static const char *const special_words[] = {".inf",  ".Inf",  ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
                                            "-.Inf", "-.INF", ".nan", ".NaN",  ".NAN",  NULL};

static int word_in(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && memcmp(*words, s, n) == 0)
            return 1;
    return 0;
}

/* Accumulate s[i..n) as digits of base into *mag; *overflow when it passes
 * 64 bits (the value then only matters as "too big"). 0 on a bad digit. */
static int accumulate(const char *s, size_t i, size_t n, unsigned base, uint64_t *mag, int *overflow)
{
    if (i == n)
        return 0;
    for (; i < n; i++) {
        int d = ascii_hex_value(s[i]);
        if (d < 0 || (unsigned)d >= base)
            return 0;
        if (*mag > (UINT64_MAX - (unsigned)d) / base)
            *overflow = 1;
        else
            *mag = *mag * base + (unsigned)d;
    }
    return 1;
}

/* Integer syntax of Go's strconv.ParseInt(s, 0, 64), which go-yaml uses:
 * sign, then 0x/0o/0b prefix, or a leading 0 meaning octal, else decimal.
 * When base10 is set only plain decimal digits are accepted. */
static int parse_integer(const char *s, size_t n, int base10, uint64_t *mag, int *neg, int *overflow)
{
    size_t i = 0;
    unsigned base = 10;
    *mag = 0;
    *neg = 0;
    *overflow = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        *neg = s[i++] == '-';
    if (!base10 && n - i >= 2 && s[i] == '0') {
        char p = (char)(s[i + 1] | 0x20);
        base = p == 'x' ? 16 : p == 'b' ? 2 : 8;
        if (p == 'x' || p == 'o' || p == 'b')
            i += 2;
    }
    return accumulate(s, i, n, base, mag, overflow);
}

static size_t skip_digits(const char *s, size_t n, size_t *i)
{
    size_t start = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9')
        (*i)++;
    return *i - start;
}

/* go-yaml's float syntax: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
 * *integral is set when there is neither a '.' nor an exponent. */
static int is_yaml_float(const char *s, size_t n, int *integral)
{
    size_t i = 0, int_digits, frac_digits = 0;
    int dot = 0, exponent = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    int_digits = skip_digits(s, n, &i);
    if (i < n && s[i] == '.') {
        dot = 1;
        i++;
        frac_digits = skip_digits(s, n, &i);
    }
    if (int_digits == 0 && frac_digits == 0)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        exponent = 1;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (skip_digits(s, n, &i) == 0)
            return 0;
    }
    *integral = !dot && !exponent;
    return i == n;
}

static int integer_kind(uint64_t mag, int neg, int overflow, double *num)
{
    if (overflow || mag > YJ_MAX_EXACT_INT)
        return YJ_BIGINT;
    *num = mag == 0 ? 0.0 : neg ? -(double)mag : (double)mag;
    return YJ_INT;
}

/* s is NUL-terminated and already matches is_yaml_float. strtod honours the
 * locale's decimal point, so swap it in as cJSON does for its own parsing. */
static int float_kind(char *s, double *num)
{
    const char *point = localeconv()->decimal_point;
    char *dot = strchr(s, '.');
    if (dot && point && point[0] && point[0] != '.')
        *dot = point[0];
    *num = strtod(s, NULL);
    /* Go's ParseFloat reports overflow as an error, so go-yaml keeps the text. */
    return isinf(*num) ? YJ_SPECIAL : YJ_FLOAT;
}

/* Type a NUL-terminated candidate number s[0..n). */
static int number_kind(char *s, size_t n, double *num)
{
    uint64_t mag;
    int neg, overflow, integral;
    if (parse_integer(s, n, 0, &mag, &neg, &overflow))
        return integer_kind(mag, neg, overflow, num);
    if (!is_yaml_float(s, n, &integral))
        return YJ_STRING;
    /* Digits that failed as octal ("08", "0789"): go-yaml reads them as a
     * decimal float; treat them as the integer they are. */
    if (integral) {
        parse_integer(s, n, 1, &mag, &neg, &overflow);
        return integer_kind(mag, neg, overflow, num);
    }
    return float_kind(s, num);
}

/* go-yaml drops every '_' before reading a scalar that starts with a digit
 * or sign as a number, but not one that starts with '.'. -1: out of memory. */
static int number_candidate_kind(const char *s, size_t n, int strip, double *num)
{
    char small[64];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    size_t m = 0;
    if (!buf)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!strip || s[i] != '_')
            buf[m++] = s[i];
    buf[m] = '\0';
    int kind = number_kind(buf, m, num);
    if (buf != small)
        free(buf);
    return kind;
}

/* Kind of a plain scalar's text, or -1 when out of memory. */
static int classify_plain(const char *s, size_t n, double *num)
{
    if (n == 0 || word_in(s, n, null_words))
        return YJ_NULL;
    if (word_in(s, n, true_words))
        return YJ_TRUE;
    if (word_in(s, n, false_words))
        return YJ_FALSE;
    if (word_in(s, n, special_words))
        return YJ_SPECIAL;
    if (s[0] == '.')
        return number_candidate_kind(s, n, 0, num);
    if ((s[0] >= '0' && s[0] <= '9') || s[0] == '+' || s[0] == '-')
        return number_candidate_kind(s, n, 1, num);
    return YJ_STRING;
}

/* Does an explicit core tag accept what the text resolved to? Tags that are
 * not !!null/!!bool/!!int/!!float never reach here. */
static int tag_accepts(const char *suffix, int kind)
{
    if (strcmp(suffix, "null") == 0)
        return kind == YJ_NULL;
    if (strcmp(suffix, "bool") == 0)
        return kind == YJ_TRUE || kind == YJ_FALSE;
    if (strcmp(suffix, "int") == 0)
        return kind == YJ_INT || kind == YJ_BIGINT;
    return kind == YJ_INT || kind == YJ_FLOAT || kind == YJ_BIGINT || kind == YJ_SPECIAL;
}

/* The core tag suffix that forces typing ("int" for !!int), else NULL. */
static const char *typing_tag(const char *tag)
{
    static const char *const typed[] = {"null", "bool", "int", "float", NULL};
    size_t plen = strlen(YJ_CORE_TAG_PREFIX);
    if (strncmp(tag, YJ_CORE_TAG_PREFIX, plen) != 0)
        return NULL;
    for (size_t i = 0; typed[i]; i++)
        if (strcmp(tag + plen, typed[i]) == 0)
            return typed[i];
    return NULL;
}

static cJSON *node_of_kind(int kind, double num, const char *text)
{
    switch (kind) {
    case YJ_NULL:
        return cJSON_CreateNull();
    case YJ_TRUE:
        return cJSON_CreateTrue();
    case YJ_FALSE:
        return cJSON_CreateFalse();
    case YJ_INT:
    case YJ_FLOAT:
        return cJSON_CreateNumber(num);
    default:
        return cJSON_CreateString(text);
    }
}

/* ------------------------------------------------------------------------ */
/* Builder state                                                            */

struct anchor {
    char *name;
    cJSON *node; /* the anchored value; owned only when 'owned' */
    char *text;  /* a scalar's text, so an alias can serve as a key; else NULL */
    size_t size; /* nodes in the subtree: what one alias use costs */
    int height;  /* container nesting inside the subtree */
    int owned;   /* anchored mapping keys are not in the tree, so we own them */
};

struct frame {
    cJSON *node;       /* the open array or object */
    char *anchor;      /* registered on close, so a node cannot contain itself */
    size_t first_node; /* node counter before this container, for its size */
    int child_height;  /* deepest container nesting among the children */
    char *key;         /* mappings: key awaiting its value; NULL when a key is due */
    size_t nkeys;
    struct strmap keyset; /* member names, once nkeys reaches the threshold */
};

struct builder {
    yaml_parser_t parser;
    const char *input;
    size_t input_len;
    struct frame *stack;
    size_t depth, stack_cap;
    struct anchor *anchors;
    size_t n_anchors, anchors_cap;
    struct strmap anchor_index; /* name -> index into anchors */
    cJSON *docs;                /* finished non-empty documents */
    cJSON *root;                /* the document being built */
    int root_empty;             /* the document is just an implicit empty scalar */
    size_t nodes;               /* nodes created so far, aliases included */
    size_t expanded;            /* nodes created by aliases */
    int failed;
    char *err;
};

/* Record the first failure; later ones are consequences. Always returns -1. */
YJ_PRINTF(3, 4)

static int fail_at(struct builder *b, yaml_mark_t mark, const char *fmt, ...)
{
    char problem[256];
    va_list ap;
    if (b->failed)
        return -1;
    b->failed = 1;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    b->err = format_message(mark.line + 1, mark.column + 1, problem);
    return -1;
}

static int oom(struct builder *b, yaml_mark_t mark)
{
    return fail_at(b, mark, "out of memory");
}

static struct frame *top(struct builder *b)
{
    return b->depth ? &b->stack[b->depth - 1] : NULL;
}

static int expecting_key(struct builder *b)
{
    struct frame *f = top(b);
    return f && cJSON_IsObject(f->node) && !f->key;
}

/* ------------------------------------------------------------------------ */
/* Anchors                                                                  */

static void release_anchor_value(struct anchor *a)
{
    if (a->owned)
        cJSON_Delete(a->node);
    free(a->text);
    a->node = NULL;
    a->text = NULL;
}

/* Anchors are scoped to one document, as in YAML. */
static void reset_anchors(struct builder *b)
{
    for (size_t i = 0; i < b->n_anchors; i++) {
        release_anchor_value(&b->anchors[i]);
        free(b->anchors[i].name);
    }
    b->n_anchors = 0;
    strmap_free(&b->anchor_index);
}

/* Make room for one more anchor and index it under name; -1 when out of memory. */
static int new_anchor_slot(struct builder *b, char *name)
{
    struct anchor *grown = grow_array(b->anchors, &b->anchors_cap, b->n_anchors + 1, sizeof(*grown), 16);
    if (!grown)
        return -1;
    b->anchors = grown;
    if (strmap_put(&b->anchor_index, name, b->n_anchors) != 0)
        return -1;
    b->anchors[b->n_anchors] = (struct anchor){.name = name};
    b->n_anchors++;
    return 0;
}

/* Bind name (malloc'd and taken over; NULL means its copy failed) to node. A
 * redefined anchor refers to the newest node from then on. On failure name,
 * and node when owned, are freed. */
static int add_anchor(struct builder *b, char *name, cJSON *node, int owned, const char *text, size_t size, int height,
                      yaml_mark_t mark)
{
    char *text_copy = text ? dup_str(text) : NULL;
    const size_t *idx = name ? strmap_get(&b->anchor_index, name) : NULL;
    if (!name || (text && !text_copy) || (!idx && new_anchor_slot(b, name) != 0)) {
        free(name);
        free(text_copy);
        if (owned)
            cJSON_Delete(node);
        return oom(b, mark);
    }
    struct anchor *a = idx ? &b->anchors[*idx] : &b->anchors[b->n_anchors - 1];
    if (idx) {
        release_anchor_value(a);
        free(name); /* the index keeps pointing at the first copy of the name */
    }
    a->node = node;
    a->owned = owned;
    a->text = text_copy;
    a->size = size;
    a->height = height;
    return 0;
}

static const struct anchor *find_anchor(struct builder *b, const char *name)
{
    const size_t *idx = strmap_get(&b->anchor_index, name);
    return idx ? &b->anchors[*idx] : NULL;
}

/* ------------------------------------------------------------------------ */
/* Mapping keys                                                             */

static int key_exists(const struct frame *f, const char *key)
{
    if (f->keyset.cap)
        return strmap_get(&f->keyset, key) != NULL;
    for (const cJSON *c = f->node->child; c; c = c->next)
        if (strcmp(c->string, key) == 0)
            return 1;
    return 0;
}

/* Keep the hash set in step once the mapping is large enough to need it. */
static int index_member(struct frame *f, const cJSON *member)
{
    f->nkeys++;
    if (f->keyset.cap)
        return strmap_put(&f->keyset, member->string, 0);
    if (f->nkeys < YJ_KEYSET_THRESHOLD)
        return 0;
    for (const cJSON *c = f->node->child; c; c = c->next)
        if (strmap_put(&f->keyset, c->string, 0) != 0)
            return -1;
    return 0;
}

static int take_key(struct builder *b, const char *text, yaml_mark_t mark)
{
    struct frame *f = top(b);
    if (key_exists(f, text))
        return fail_at(b, mark, "duplicate mapping key \"%.64s\"", text);
    f->key = dup_str(text);
    return f->key ? 0 : oom(b, mark);
}

/* ------------------------------------------------------------------------ */
/* Placing nodes                                                            */

/* Attach node (taken over) to the open container, or make it the document
 * root. height is its container nesting, tracked for anchors' depth checks. */
static int place(struct builder *b, cJSON *node, int height, yaml_mark_t mark)
{
    struct frame *f = top(b);
    if (!f) {
        b->root = node;
        return 0;
    }
    if (height > f->child_height)
        f->child_height = height;
    if (cJSON_IsArray(f->node)) {
        if (cJSON_AddItemToArray(f->node, node))
            return 0;
        cJSON_Delete(node);
        return oom(b, mark);
    }
    int ok = cJSON_AddItemToObject(f->node, f->key, node);
    free(f->key);
    f->key = NULL;
    if (!ok) {
        cJSON_Delete(node);
        return oom(b, mark);
    }
    return index_member(f, node) == 0 ? 0 : oom(b, mark);
}

/* The kind a scalar event resolves to; -1 (failure recorded) on error. */
static int scalar_kind(struct builder *b, const yaml_event_t *ev, double *num)
{
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    const char *typed = tag ? typing_tag(tag) : NULL;
    if (tag && !typed)
        return YJ_STRING; /* !!str, "!", !!binary, !!timestamp, local tags */
    if (!tag && ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return YJ_STRING; /* quoted and block scalars */
    int kind = classify_plain(text, len, num);
    if (kind < 0)
        return oom(b, ev->start_mark);
    if (typed && !tag_accepts(typed, kind))
        return fail_at(b, ev->start_mark, "cannot decode `%.64s` as !!%s", text, typed);
    return kind;
}

static cJSON *scalar_node(struct builder *b, const yaml_event_t *ev)
{
    double num = 0;
    int kind = scalar_kind(b, ev, &num);
    if (kind < 0)
        return NULL;
    /* libyaml NUL-terminates scalar values (its buffers are zero-filled). */
    cJSON *node = node_of_kind(kind, num, (const char *)ev->data.scalar.value);
    if (!node)
        oom(b, ev->start_mark);
    return node;
}

static int on_key_scalar(struct builder *b, const yaml_event_t *ev)
{
    const char *text = (const char *)ev->data.scalar.value;
    const char *anchor = (const char *)ev->data.scalar.anchor;
    if (!ev->data.scalar.tag && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strcmp(text, "<<") == 0)
        return fail_at(b, ev->start_mark, "merge keys (<<) are not supported");
    /* Keys stay text, but a tagged key must still type-check, and an anchored
     * one may later be aliased as a value. */
    if (anchor || ev->data.scalar.tag) {
        cJSON *node = scalar_node(b, ev);
        if (!node)
            return -1;
        if (!anchor)
            cJSON_Delete(node);
        else if (add_anchor(b, dup_str(anchor), node, 1, text, 1, 0, ev->start_mark) != 0)
            return -1;
    }
    return take_key(b, text, ev->start_mark);
}

static int on_scalar(struct builder *b, const yaml_event_t *ev)
{
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *anchor = (const char *)ev->data.scalar.anchor;
    /* cJSON strings end at the first NUL; refuse rather than truncate. */
    if (memchr(text, '\0', len))
        return fail_at(b, ev->start_mark, "NUL characters in scalars are not supported");
    if (expecting_key(b))
        return on_key_scalar(b, ev);
    cJSON *node = scalar_node(b, ev);
    if (!node)
        return -1;
    if (!top(b) && len == 0 && !anchor && !ev->data.scalar.tag && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        b->root_empty = 1;
    b->nodes++;
    if (place(b, node, 0, ev->start_mark) != 0)
        return -1;
    if (!anchor)
        return 0;
    return add_anchor(b, dup_str(anchor), node, 0, text, 1, 0, ev->start_mark);
}

/* Drop the member name cJSON_Duplicate copied along with the value. */
static void clear_member_name(cJSON *node)
{
    if (node->string && !(node->type & cJSON_StringIsConst))
        cJSON_free(node->string);
    node->string = NULL;
    node->type &= ~cJSON_StringIsConst;
}

static int on_alias(struct builder *b, const yaml_event_t *ev)
{
    const char *name = (const char *)ev->data.alias.anchor;
    const struct anchor *a = find_anchor(b, name);
    if (!a)
        return fail_at(b, ev->start_mark, "unknown anchor '%.64s' referenced", name);
    if (expecting_key(b)) {
        if (!a->text)
            return fail_at(b, ev->start_mark, "mapping keys must be scalars");
        return take_key(b, a->text, ev->start_mark);
    }
    /* Charge the copy before making it, so a bomb fails before it allocates. */
    if (a->size > YJ_MAX_ALIAS_NODES - b->expanded)
        return fail_at(b, ev->start_mark, "aliases expand to more than %u nodes", YJ_MAX_ALIAS_NODES);
    if (b->depth + (size_t)a->height > YJ_MAX_DEPTH)
        return fail_at(b, ev->start_mark, "nesting deeper than %d levels", YJ_MAX_DEPTH);
    cJSON *copy = cJSON_Duplicate(a->node, 1);
    if (!copy)
        return oom(b, ev->start_mark);
    clear_member_name(copy);
    b->expanded += a->size;
    b->nodes += a->size;
    return place(b, copy, a->height, ev->start_mark);
}

static int push_frame(struct builder *b, cJSON *node, char *anchor)
{
    struct frame *grown = grow_array(b->stack, &b->stack_cap, b->depth + 1, sizeof(*grown), 16);
    if (!grown)
        return -1;
    b->stack = grown;
    b->stack[b->depth++] = (struct frame){.node = node, .anchor = anchor, .first_node = b->nodes - 1};
    return 0;
}

static int open_container(struct builder *b, const yaml_event_t *ev, const yaml_char_t *anchor, int is_map)
{
    if (expecting_key(b))
        return fail_at(b, ev->start_mark, "mapping keys must be scalars");
    if (b->depth >= YJ_MAX_DEPTH)
        return fail_at(b, ev->start_mark, "nesting deeper than %d levels", YJ_MAX_DEPTH);
    char *name = anchor ? dup_str((const char *)anchor) : NULL;
    cJSON *node = is_map ? cJSON_CreateObject() : cJSON_CreateArray();
    if ((anchor && !name) || !node) {
        free(name);
        cJSON_Delete(node);
        return oom(b, ev->start_mark);
    }
    b->nodes++;
    /* Attached before it is filled, so the tree owns it from now on. */
    if (place(b, node, 0, ev->start_mark) != 0) {
        free(name);
        return -1;
    }
    if (push_frame(b, node, name) != 0) {
        free(name);
        return oom(b, ev->start_mark);
    }
    return 0;
}

static int close_container(struct builder *b, yaml_mark_t mark)
{
    struct frame f = b->stack[--b->depth];
    int height = f.child_height + 1;
    strmap_free(&f.keyset);
    free(f.key);
    if (b->depth && height > top(b)->child_height)
        top(b)->child_height = height;
    if (!f.anchor)
        return 0;
    return add_anchor(b, f.anchor, f.node, 0, NULL, b->nodes - f.first_node, height, mark);
}

/* ------------------------------------------------------------------------ */
/* Documents and the event loop                                             */

static int begin_document(struct builder *b)
{
    reset_anchors(b);
    b->root = NULL;
    b->root_empty = 0;
    return 0;
}

static int end_document(struct builder *b, yaml_mark_t mark)
{
    cJSON *root = b->root;
    b->root = NULL;
    if (!root)
        return 0;
    if (b->root_empty) {
        cJSON_Delete(root);
        return 0;
    }
    if ((!b->docs && !(b->docs = cJSON_CreateArray())) || !cJSON_AddItemToArray(b->docs, root)) {
        cJSON_Delete(root);
        return oom(b, mark);
    }
    return 0;
}

static int handle_event(struct builder *b, const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        return begin_document(b);
    case YAML_DOCUMENT_END_EVENT:
        return end_document(b, ev->start_mark);
    case YAML_SCALAR_EVENT:
        return on_scalar(b, ev);
    case YAML_ALIAS_EVENT:
        return on_alias(b, ev);
    case YAML_SEQUENCE_START_EVENT:
        return open_container(b, ev, ev->data.sequence_start.anchor, 0);
    case YAML_MAPPING_START_EVENT:
        return open_container(b, ev, ev->data.mapping_start.anchor, 1);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return close_container(b, ev->start_mark);
    default:
        return 0; /* stream start and end carry nothing */
    }
}

/* Reader errors carry a byte offset instead of a mark; count lines up to it
 * (columns in characters, like libyaml's marks). */
static yaml_mark_t mark_of_offset(const struct builder *b, size_t offset)
{
    yaml_mark_t m = {0, 0, 0};
    for (size_t i = 0; i < offset && i < b->input_len; i++) {
        unsigned char c = (unsigned char)b->input[i];
        if (c == '\n') {
            m.line++;
            m.column = 0;
        } else if ((c & 0xC0) != 0x80) {
            m.column++;
        }
    }
    return m;
}

static void parser_error(struct builder *b)
{
    const yaml_parser_t *p = &b->parser;
    const char *problem = p->problem ? p->problem : "invalid YAML";
    switch (p->error) {
    case YAML_MEMORY_ERROR:
        oom(b, p->mark);
        break;
    case YAML_READER_ERROR:
        if (p->problem_value >= 0)
            fail_at(b, mark_of_offset(b, p->problem_offset), "%s (#x%X)", problem, (unsigned)p->problem_value);
        else
            fail_at(b, mark_of_offset(b, p->problem_offset), "%s", problem);
        break;
    default:
        if (p->context)
            fail_at(b, p->problem_mark, "%s (%s at line %zu, column %zu)", problem, p->context,
                    p->context_mark.line + 1, p->context_mark.column + 1);
        else
            fail_at(b, p->problem_mark, "%s", problem);
    }
}

/* A stream of one document is that document; of several, an array of them. */
static cJSON *finish(struct builder *b, yaml_mark_t mark)
{
    int n = b->docs ? cJSON_GetArraySize(b->docs) : 0;
    cJSON *result = b->docs;
    if (n == 0) {
        fail_at(b, mark, "empty document");
        return NULL;
    }
    b->docs = NULL;
    if (n == 1) {
        cJSON *only = cJSON_DetachItemFromArray(result, 0);
        cJSON_Delete(result);
        return only;
    }
    return result;
}

static cJSON *run(struct builder *b)
{
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&b->parser, &ev)) {
            parser_error(b);
            return NULL;
        }
        int rc = handle_event(b, &ev);
        int done = ev.type == YAML_STREAM_END_EVENT;
        yaml_mark_t mark = ev.start_mark;
        yaml_event_delete(&ev);
        if (rc != 0)
            return NULL;
        if (done)
            return finish(b, mark);
    }
}

static void builder_free(struct builder *b)
{
    for (size_t i = 0; i < b->depth; i++) {
        free(b->stack[i].key);
        free(b->stack[i].anchor);
        strmap_free(&b->stack[i].keyset);
    }
    free(b->stack);
    reset_anchors(b);
    free(b->anchors);
    cJSON_Delete(b->root);
    cJSON_Delete(b->docs);
    free(b->err);
    yaml_parser_delete(&b->parser);
    free(b);
}

static void report(char **err, const char *msg)
{
    if (err)
        *err = msg ? dup_str(msg) : NULL;
}

cJSON *yaml_to_json(const char *buf, size_t len, char **err)
{
    if (err)
        *err = NULL;
    struct builder *b = calloc(1, sizeof *b);
    if (!b) {
        report(err, "out of memory");
        return NULL;
    }
    if (!yaml_parser_initialize(&b->parser)) {
        free(b);
        report(err, "out of memory");
        return NULL;
    }
    b->input = buf ? buf : "";
    b->input_len = buf ? len : 0;
    yaml_parser_set_input_string(&b->parser, (const unsigned char *)b->input, b->input_len);
    cJSON *result = run(b);
    if (!result && err) {
        *err = b->err; /* NULL only if the message itself could not be allocated */
        b->err = NULL;
    }
    builder_free(b);
    return result;
}

int text_looks_like_json(const char *buf, size_t len)
{
    for (size_t i = 0; buf && i < len; i++) {
        char c = buf[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            continue;
        return c == '{' || c == '[';
    }
    return 0;
}

/* ---- JSON -> YAML (output) ------------------------------------------------ */

/* Would a plain scalar of s read back as this very string? */
static bool plain_safe(const char *s)
{
    static const char *const special[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"};
    if (!*s || strlen(s) > 200)
        return false;
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        if (strcasecmp(s, special[i]) == 0)
            return false;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '/' || s[0] == '_'))
        return false; /* numbers, signs, indicators */
    for (const char *c = s; *c; c++)
        if (!(isalnum((unsigned char)*c) || strchr("-_./ ()=,+", *c)) || (*c == ' ' && (c[1] == '\0' || c[1] == '#')))
            return false;
    return true;
}

static void yaml_string(struct strbuf *out, const char *s)
{
    if (plain_safe(s))
        strbuf_puts(out, s);
    else
        strbuf_json_string(out, s);
}

static void yaml_scalar(struct strbuf *out, const cJSON *v)
{
    if (cJSON_IsString(v)) {
        yaml_string(out, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        strbuf_puts(out, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNumber(v)) {
        char *text = cJSON_PrintUnformatted(v);
        strbuf_puts(out, text ? text : "0");
        free(text);
    } else {
        strbuf_puts(out, "null");
    }
}

static bool is_collection(const cJSON *v)
{
    return (cJSON_IsObject(v) || cJSON_IsArray(v)) && v->child;
}

static void yaml_value(struct strbuf *out, const cJSON *v, int indent, bool after_dash);

static void yaml_object(struct strbuf *out, const cJSON *v, int indent, bool after_dash)
{
    bool first = true;
    for (const cJSON *m = v->child; m; m = m->next) {
        if (!(first && after_dash))
            strbuf_printf(out, "%*s", indent, "");
        first = false;
        yaml_string(out, m->string ? m->string : "");
        strbuf_putc(out, ':');
        if (is_collection(m)) {
            strbuf_putc(out, '\n');
            yaml_value(out, m, cJSON_IsArray(m) ? indent : indent + 2, false);
        } else {
            strbuf_putc(out, ' ');
            yaml_value(out, m, indent + 2, false);
        }
    }
}

static void yaml_value(struct strbuf *out, const cJSON *v, int indent, bool after_dash)
{
    if (cJSON_IsObject(v) && v->child) {
        yaml_object(out, v, indent, after_dash);
    } else if (cJSON_IsArray(v) && v->child) {
        bool first = true;
        for (const cJSON *e = v->child; e; e = e->next) {
            if (!(first && after_dash))
                strbuf_printf(out, "%*s", indent, "");
            first = false;
            strbuf_puts(out, "- ");
            yaml_value(out, e, indent + 2, true);
        }
    } else {
        if (cJSON_IsObject(v))
            strbuf_puts(out, "{}");
        else if (cJSON_IsArray(v))
            strbuf_puts(out, "[]");
        else
            yaml_scalar(out, v);
        strbuf_putc(out, '\n');
    }
}

void json_to_yaml(const cJSON *value, struct strbuf *out)
{
    yaml_value(out, value, 0, false);
}
