/* labelsel.c - label selectors. See labelsel.h. */
#include "lib/labelsel.h"
#include "lib/strbuf.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum sel_op { OP_EXISTS, OP_NOT_EXISTS, OP_EQ, OP_NE, OP_IN, OP_NOTIN };

struct requirement {
    char *key;
    enum sel_op op;
    char **values;
    int nvalues;
};

struct label_selector {
    struct requirement *reqs;
    int count;
};

struct sel_parse {
    const char *text;
    const char *p;
    char **err;
};

void label_selector_free(struct label_selector *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->count; i++) {
        free(s->reqs[i].key);
        for (int k = 0; k < s->reqs[i].nvalues; k++)
            free(s->reqs[i].values[k]);
        free(s->reqs[i].values);
    }
    free(s->reqs);
    free(s);
}

static int sel_fail(struct sel_parse *ps, const char *what)
{
    strbuf_set_error(ps->err, "label selector \"%s\": %s at position %d", ps->text, what, (int)(ps->p - ps->text) + 1);
    return -1;
}

static void skip_space(struct sel_parse *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t')
        ps->p++;
}

static bool word_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '/';
}

/* A label name or value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
static bool valid_name(const char *s, size_t n, bool empty_ok)
{
    if (n == 0)
        return empty_ok;
    if (n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* A key: [DNS subdomain prefix "/"] name. */
static bool valid_key(const char *s, size_t n)
{
    const char *slash = memchr(s, '/', n);
    if (!slash)
        return valid_name(s, n, false);
    size_t plen = (size_t)(slash - s);
    if (plen == 0 || plen > 253 || memchr(slash + 1, '/', n - plen - 1))
        return false;
    for (size_t i = 0; i < plen; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' || s[i] == '.'))
            return false;
    return valid_name(slash + 1, n - plen - 1, false);
}

static char *take_word(struct sel_parse *ps, size_t *len)
{
    const char *start = ps->p;
    while (word_char(*ps->p))
        ps->p++;
    *len = (size_t)(ps->p - start);
    return strndup(start, *len);
}

static int add_value(struct requirement *r, char *v)
{
    char **grown = realloc(r->values, sizeof(*grown) * (size_t)(r->nvalues + 1));
    if (!grown) {
        free(v);
        return -1;
    }
    r->values = grown;
    r->values[r->nvalues++] = v;
    return 0;
}

static int parse_value(struct sel_parse *ps, struct requirement *r)
{
    skip_space(ps);
    size_t n;
    char *v = take_word(ps, &n);
    if (!v)
        return -1;
    if (!valid_name(v, n, true)) {
        free(v);
        return sel_fail(ps, "invalid label value");
    }
    return add_value(r, v);
}

/* "(a, b, c)" after in/notin. */
static int parse_set(struct sel_parse *ps, struct requirement *r)
{
    skip_space(ps);
    if (*ps->p != '(')
        return sel_fail(ps, "expected \"(\"");
    ps->p++;
    skip_space(ps);
    if (*ps->p == ')')
        return sel_fail(ps, "the set of values of in and notin cannot be empty");
    for (;;) {
        if (parse_value(ps, r) != 0)
            return -1;
        skip_space(ps);
        if (*ps->p == ')') {
            ps->p++;
            return 0;
        }
        if (*ps->p != ',')
            return sel_fail(ps, "expected \",\" or \")\"");
        ps->p++;
    }
}

static bool keyword(struct sel_parse *ps, const char *kw)
{
    size_t n = strlen(kw);
    if (strncmp(ps->p, kw, n) != 0 || word_char(ps->p[n]))
        return false;
    ps->p += n;
    return true;
}

/* After the key: an operator and its values, or nothing (exists). */
static int parse_operator(struct sel_parse *ps, struct requirement *r)
{
    skip_space(ps);
    if (ps->p[0] == '=' || (ps->p[0] == '!' && ps->p[1] == '=')) {
        r->op = ps->p[0] == '=' ? OP_EQ : OP_NE;
        ps->p += (ps->p[0] == '!' || ps->p[1] == '=') ? 2 : 1;
        return parse_value(ps, r);
    }
    if (keyword(ps, "notin")) {
        r->op = OP_NOTIN;
        return parse_set(ps, r);
    }
    if (keyword(ps, "in")) {
        r->op = OP_IN;
        return parse_set(ps, r);
    }
    r->op = OP_EXISTS;
    return 0;
}

static int parse_requirement(struct sel_parse *ps, struct requirement *r)
{
    skip_space(ps);
    bool negated = *ps->p == '!';
    if (negated)
        ps->p++;
    skip_space(ps);
    size_t n;
    if (!(r->key = take_word(ps, &n)))
        return -1;
    if (!valid_key(r->key, n))
        return sel_fail(ps, n ? "invalid label key" : "expected a label key");
    if (negated) {
        r->op = OP_NOT_EXISTS;
        return 0;
    }
    return parse_operator(ps, r);
}

struct label_selector *label_selector_parse(const char *text, char **err)
{
    if (err)
        *err = NULL;
    struct sel_parse ps = {text, text, err};
    struct label_selector *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    skip_space(&ps);
    while (*ps.p) {
        struct requirement *grown = realloc(s->reqs, sizeof(*grown) * (size_t)(s->count + 1));
        if (!grown)
            goto fail;
        s->reqs = grown;
        memset(&s->reqs[s->count], 0, sizeof(s->reqs[0]));
        if (parse_requirement(&ps, &s->reqs[s->count++]) != 0)
            goto fail;
        skip_space(&ps);
        if (*ps.p == ',') {
            ps.p++;
            skip_space(&ps);
            if (!*ps.p) {
                sel_fail(&ps, "expected a requirement after \",\"");
                goto fail;
            }
        } else if (*ps.p) {
            sel_fail(&ps, "unexpected character");
            goto fail;
        }
    }
    return s;
fail:
    label_selector_free(s);
    return NULL;
}

static bool in_values(const struct requirement *r, const char *v)
{
    for (int i = 0; i < r->nvalues; i++)
        if (strcmp(r->values[i], v) == 0)
            return true;
    return false;
}

bool label_selector_matches(const struct label_selector *s, label_lookup_fn get, const void *ctx)
{
    for (int i = 0; s && i < s->count; i++) {
        const struct requirement *r = &s->reqs[i];
        const char *v = get(ctx, r->key);
        bool ok;
        switch (r->op) {
        case OP_EXISTS:
            ok = v != NULL;
            break;
        case OP_NOT_EXISTS:
            ok = v == NULL;
            break;
        case OP_EQ:
        case OP_IN:
            ok = v && in_values(r, v);
            break;
        default: /* != and notin also match a missing label, as in Kubernetes */
            ok = !v || !in_values(r, v);
            break;
        }
        if (!ok)
            return false;
    }
    return true;
}
