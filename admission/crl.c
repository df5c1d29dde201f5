/*
 * admission/crl.c - CustomResourceLimitation ConfigMaps; see crl.h and
 * design.md section 7.
 *
 * Validation reads every field once into a view, then runs one check per
 * rule; a field that is present but not a string is reported once where it is
 * read and skipped by the rule checks, so each problem yields one message.
 */
#include "admission/crl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/quantity.h"
#include "lib/strbuf.h"

#define REQUESTS_PREFIX "requests."
#define DNS1123_SUBDOMAIN_MAX 253
#define QUALIFIED_NAME_MAX 63

static const char *const limits_names[] = {"disabled", "required", "optional"};
static const char *const requests_names[] = {"disabled", "required", "fromLimits"};

/* ------------------------------------------------------------------ */
/* Problem lists                                                        */

void crl_problems_free(struct crl_problems *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        free(p->items[i]);
    free(p->items);
    p->items = NULL;
    p->count = 0;
    p->failed = false;
}

/* Append msg (owned); a NULL msg is an allocation failure already. */
static void problems_take(struct crl_problems *p, char *msg)
{
    char **items = msg ? realloc(p->items, (p->count + 1) * sizeof(*items)) : NULL;
    if (!items) {
        free(msg);
        p->failed = true;
        return;
    }
    items[p->count++] = msg;
    p->items = items;
}

/* A tiny formatter with only %s (as is) and %q (a JSON string literal):
 * offending values come from users, and quoting them with escapes keeps a
 * value containing quotes or newlines from blurring the message. Every
 * argument is a const char *. */
static void vformat(struct strbuf *sb, const char *fmt, va_list ap)
{
    const char *run = fmt;
    for (const char *f = fmt; *f; f++) {
        if (f[0] != '%' || (f[1] != 's' && f[1] != 'q'))
            continue;
        strbuf_append(sb, run, (size_t)(f - run));
        const char *arg = va_arg(ap, const char *);
        if (f[1] == 's')
            strbuf_puts(sb, arg);
        else
            strbuf_json_string(sb, arg);
        f++;
        run = f + 1;
    }
    strbuf_puts(sb, run);
}

static void problem_add(struct crl_problems *p, const char *fmt, ...)
{
    struct strbuf sb;
    strbuf_init(&sb);
    va_list ap;
    va_start(ap, fmt);
    vformat(&sb, fmt, ap);
    va_end(ap);
    problems_take(p, strbuf_detach(&sb, NULL));
}

/* ------------------------------------------------------------------ */
/* Reading a ConfigMap                                                  */

enum fstate { F_MISSING, F_OK, F_BAD };

struct field {
    const char *s; /* F_OK only */
    enum fstate st;
};

struct cm_view {
    struct field ns, name;
    struct field type, group_label, enabled;
    bool has_data;
    struct field key, data_type, def, group, limits, requests;
};

static const char *json_type_name(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "an invalid value";
}

/* ConfigMap data and label values are strings; JSON null reads as "" as it
 * does in Go's decoder. Anything else is reported here, once. */
static struct field read_field(const cJSON *obj, const char *member, const char *what, struct crl_problems *p)
{
    struct field f = {NULL, F_MISSING};
    const cJSON *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, member) : NULL;
    if (!v)
        return f;
    if (cJSON_IsNull(v) || cJSON_IsString(v)) {
        f.s = cJSON_IsString(v) ? v->valuestring : "";
        f.st = F_OK;
        return f;
    }
    f.st = F_BAD;
    problem_add(p, "%s: must be a string, not %s", what, json_type_name(v));
    return f;
}

static void read_data(const cJSON *cm, struct cm_view *v, struct crl_problems *p)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(cm, "data");
    v->has_data = cJSON_IsObject(data);
    if (!v->has_data) {
        if (data && !cJSON_IsNull(data))
            problem_add(p, "data: must be an object, not %s", json_type_name(data));
        else
            problem_add(p, "data: missing (a CRL needs key, dataType, defaultValue, group, limits, requests)");
        return;
    }
    v->key = read_field(data, "key", "data.key", p);
    v->data_type = read_field(data, "dataType", "data.dataType", p);
    v->def = read_field(data, "defaultValue", "data.defaultValue", p);
    v->group = read_field(data, "group", "data.group", p);
    v->limits = read_field(data, "limits", "data.limits", p);
    v->requests = read_field(data, "requests", "data.requests", p);
    /* Optional, but strings when present. */
    read_field(data, "descriptionZh", "data.descriptionZh", p);
    read_field(data, "descriptionEn", "data.descriptionEn", p);
}

static void read_view(const cJSON *cm, struct cm_view *v, struct crl_problems *p)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(cm, "metadata");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
    v->ns = read_field(meta, "namespace", "metadata.namespace", p);
    v->name = read_field(meta, "name", "metadata.name", p);
    v->type = read_field(labels, CRL_LABEL_TYPE, "label " CRL_LABEL_TYPE, p);
    v->group_label = read_field(labels, CRL_LABEL_GROUP, "label " CRL_LABEL_GROUP, p);
    v->enabled = read_field(labels, CRL_LABEL_ENABLED, "label " CRL_LABEL_ENABLED, p);
    read_data(cm, v, p);
}

/* ------------------------------------------------------------------ */
/* Names                                                                */

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* keyName: the part after the last '/', with everything outside [a-z0-9-]
 * replaced by '-' (design.md section 7). malloc'd, NULL on allocation failure. */
static char *key_name(const char *key)
{
    const char *slash = strrchr(key, '/');
    char *out = strdup(slash ? slash + 1 : key);
    for (char *c = out; c && *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
            *c = '-';
    return out;
}

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* apimachinery IsDNS1123Subdomain on s[0..len): dot-separated labels of
 * [a-z0-9-] that start and end with [a-z0-9] (no per-label limit there). */
static bool is_dns1123_subdomain(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max)
        return false;
    for (size_t i = 0; i < len; i++) {
        bool label_edge = i == 0 || i == len - 1 || s[i - 1] == '.' || s[i + 1] == '.';
        if (s[i] == '.' ? label_edge : !(is_lower_alnum(s[i]) || (s[i] == '-' && !label_edge)))
            return false;
    }
    return true;
}

/* apimachinery's qualified-name "name part": 1..63 characters of
 * [A-Za-z0-9_.-] that start and end with an alphanumeric. */
static bool is_qualified_name_part(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > QUALIFIED_NAME_MAX || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* Why key is not an extended resource name, or NULL when it is. Follows
 * Kubernetes' IsExtendedResourceName (pkg/apis/core/helper): not native (has
 * a '/', not in kubernetes.io/), no "requests." prefix, and "requests." + key
 * must be a qualified name; the quota prefix is why the domain may only be
 * 253 - 9 = 244 characters. */
static const char *extended_name_problem(const char *key)
{
    const char *slash = strchr(key, '/');
    if (!slash)
        return "it has no domain prefix (as in example.com/name), so it names a native resource";
    if (strstr(key, "kubernetes.io/"))
        return "names in the kubernetes.io/ domain are native resources";
    if (starts_with(key, REQUESTS_PREFIX))
        return "the \"requests.\" prefix is reserved for resource quotas";
    if (strchr(slash + 1, '/'))
        return "a qualified name has at most one '/'";
    if (!is_dns1123_subdomain(key, (size_t)(slash - key), DNS1123_SUBDOMAIN_MAX - strlen(REQUESTS_PREFIX)))
        return "its domain prefix must be a lower-case DNS-1123 subdomain of at most 244 characters";
    if (!is_qualified_name_part(slash + 1))
        return "its name part must be 1 to 63 characters of [A-Za-z0-9_.-] that start and end with a letter or digit";
    return NULL;
}

/* ------------------------------------------------------------------ */
/* One check per rule                                                   */

static void check_namespace(const struct cm_view *v, const char *crl_ns, struct crl_problems *p)
{
    if (v->ns.st == F_MISSING)
        problem_add(p, "metadata.namespace: missing (CRLs live in %q)", crl_ns);
    else if (v->ns.st == F_OK && strcmp(v->ns.s, crl_ns) != 0)
        problem_add(p, "metadata.namespace: %q is not the CRL namespace %q", v->ns.s, crl_ns);
}

/* name = cf-crl-<customName>-<keyName>, customName non-empty. Without a
 * usable key only the prefix can be checked (the key's rule reports it). */
static void check_name(const struct cm_view *v, struct crl_problems *p)
{
    if (v->name.st != F_OK) {
        if (v->name.st == F_MISSING)
            problem_add(p, "metadata.name: missing");
        return;
    }
    const char *name = v->name.s;
    if (!starts_with(name, CRL_NAME_PREFIX)) {
        problem_add(p, "metadata.name: %q does not match cf-crl-<customName>-<keyName>", name);
        return;
    }
    if (v->key.st != F_OK)
        return;
    char *kn = key_name(v->key.s);
    if (!kn) {
        p->failed = true;
        return;
    }
    const char *rest = name + strlen(CRL_NAME_PREFIX);
    size_t rlen = strlen(rest), klen = strlen(kn);
    bool ends = rlen > klen && rest[rlen - klen - 1] == '-' && strcmp(rest + rlen - klen, kn) == 0;
    if (strcmp(rest, kn) == 0 || (ends && rlen == klen + 1))
        problem_add(p, "metadata.name: %q has an empty customName (expected cf-crl-<customName>-%s)", name, kn);
    else if (!ends)
        problem_add(p, "metadata.name: %q does not end in \"-%s\", the keyName of data.key %q", name, kn, v->key.s);
    free(kn);
}

static void check_labels(const struct cm_view *v, struct crl_problems *p)
{
    if (v->type.st == F_MISSING)
        problem_add(p, "label " CRL_LABEL_TYPE ": missing (must be \"" CRL_TYPE_VALUE "\")");
    else if (v->type.st == F_OK && strcmp(v->type.s, CRL_TYPE_VALUE) != 0)
        problem_add(p, "label " CRL_LABEL_TYPE ": %q is not \"" CRL_TYPE_VALUE "\"", v->type.s);
    if (v->group_label.st == F_MISSING)
        problem_add(p, "label " CRL_LABEL_GROUP ": missing");
    else if (v->group_label.st == F_OK && !*v->group_label.s)
        problem_add(p, "label " CRL_LABEL_GROUP ": must not be empty");
    if (v->enabled.st == F_MISSING)
        problem_add(p, "label " CRL_LABEL_ENABLED ": missing (must be \"true\" or \"false\")");
    else if (v->enabled.st == F_OK && strcmp(v->enabled.s, "true") != 0 && strcmp(v->enabled.s, "false") != 0)
        problem_add(p, "label " CRL_LABEL_ENABLED ": %q is not \"true\" or \"false\"", v->enabled.s);
}

/* data.group must repeat the group label; without a usable label there is
 * nothing to compare with (the label's rule reports that). */
static void check_data_group(const struct cm_view *v, struct crl_problems *p)
{
    bool label = v->group_label.st == F_OK && *v->group_label.s;
    if (v->group.st == F_MISSING && label)
        problem_add(p, "data.group: missing (must equal label " CRL_LABEL_GROUP " %q)", v->group_label.s);
    else if (v->group.st == F_MISSING)
        problem_add(p, "data.group: missing");
    else if (v->group.st == F_OK && label && strcmp(v->group.s, v->group_label.s) != 0)
        problem_add(p, "data.group: %q differs from label " CRL_LABEL_GROUP " %q", v->group.s, v->group_label.s);
}

static void check_key(const struct cm_view *v, struct crl_problems *p)
{
    if (v->key.st == F_MISSING) {
        problem_add(p, "data.key: missing");
        return;
    }
    const char *why = v->key.st == F_OK ? extended_name_problem(v->key.s) : NULL;
    if (why)
        problem_add(p, "data.key: %q is not a valid extended resource name: %s", v->key.s, why);
}

/* The index of f's value in names[n], or -1 (reported: what names the field,
 * choices lists the names for the message). */
static int check_enum(const struct field *f, const char *what, const char *const *names, int n, const char *choices,
                      struct crl_problems *p)
{
    if (f->st == F_BAD)
        return -1;
    if (f->st == F_MISSING) {
        problem_add(p, "%s: missing (must be one of %s)", what, choices);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (strcmp(f->s, names[i]) == 0)
            return i;
    problem_add(p, "%s: %q is not one of %s", what, f->s, choices);
    return -1;
}

/* Only the integer dataType exists; an unknown dataType leaves nothing to
 * parse the default with, so the default is then not judged. */
static void check_default(const struct cm_view *v, bool integer, int limits, struct crl_problems *p)
{
    if (v->def.st == F_BAD || !integer)
        return;
    const char *s = v->def.st == F_OK ? v->def.s : "";
    if (!*s) {
        if (limits == CRL_LIMITS_OPTIONAL)
            problem_add(p, "data.defaultValue: empty, but limits: optional needs a default "
                           "(containers without the key take it)");
        return;
    }
    int64_t value;
    qty_status st = quantity_parse_int(s, strlen(s), &value);
    if (st != QTY_OK)
        problem_add(p, "data.defaultValue: %q is not an integer quantity: %s", s, quantity_status_text(st));
}

/* ------------------------------------------------------------------ */
/* Parsing one CRL                                                      */

bool crl_is_candidate(const cJSON *configmap, const char *crl_namespace)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(configmap, "metadata");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(labels, CRL_LABEL_TYPE));
    if (type && strcmp(type, CRL_TYPE_VALUE) == 0)
        return true;
    const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "namespace"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "name"));
    return ns && name && strcmp(ns, crl_namespace) == 0 && starts_with(name, CRL_NAME_PREFIX);
}

void crl_free(struct crl *crl)
{
    if (!crl)
        return;
    free(crl->name);
    free(crl->group);
    free(crl->key);
    free(crl->default_value);
    free(crl);
}

static struct crl *crl_new(const struct cm_view *v, int limits, int requests)
{
    struct crl *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->name = strdup(v->name.s);
    c->group = strdup(v->group_label.s);
    c->key = strdup(v->key.s);
    const char *def = v->def.st == F_OK ? v->def.s : "";
    c->default_value = *def ? strdup(def) : NULL;
    c->limits = (enum crl_limits)limits;
    c->requests = (enum crl_requests)requests;
    c->enabled = strcmp(v->enabled.s, "true") == 0;
    if (!c->name || !c->group || !c->key || (*def && !c->default_value)) {
        crl_free(c);
        return NULL;
    }
    return c;
}

struct crl *crl_parse(const cJSON *configmap, const char *crl_namespace, struct crl_problems *problems)
{
    size_t before = problems->count;
    if (!cJSON_IsObject(configmap)) {
        problem_add(problems, "a ConfigMap must be a JSON object");
        return NULL;
    }
    struct cm_view v;
    memset(&v, 0, sizeof(v));
    read_view(configmap, &v, problems);
    check_namespace(&v, crl_namespace, problems);
    check_name(&v, problems);
    check_labels(&v, problems);
    if (v.has_data) {
        check_data_group(&v, problems);
        check_key(&v, problems);
        int dt = check_enum(&v.data_type, "data.dataType", (const char *const[]){"integer"}, 1, "integer", problems);
        int lim = check_enum(&v.limits, "data.limits", limits_names, 3, "disabled, required, optional", problems);
        int req =
            check_enum(&v.requests, "data.requests", requests_names, 3, "disabled, required, fromLimits", problems);
        check_default(&v, dt == 0, lim, problems);
        if (lim == CRL_LIMITS_DISABLED && req == CRL_REQUESTS_FROM_LIMITS)
            problem_add(problems, "data.limits \"disabled\" with data.requests \"fromLimits\": "
                                  "requests cannot come from disabled limits");
        if (problems->count == before && !problems->failed) {
            struct crl *c = crl_new(&v, lim, req);
            if (!c)
                problems->failed = true;
            return c;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Registry                                                             */

static const struct crl *find_key(const struct crl_registry *r, const char *key, const char *except_name)
{
    for (size_t i = 0; r && i < r->count; i++)
        if (strcmp(r->crls[i]->key, key) == 0 && (!except_name || strcmp(r->crls[i]->name, except_name) != 0))
            return r->crls[i];
    return NULL;
}

static void add_duplicate_problem(const char *key, const struct crl *holder, struct crl_problems *p)
{
    problem_add(p, "a second enabled CRL for key %s: %s already has it", key, holder->name);
}

void crl_registry_free(struct crl_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++)
        crl_free(r->crls[i]);
    free(r->crls);
    for (size_t i = 0; i < r->invalid_count; i++) {
        free(r->invalid[i].name);
        crl_problems_free(&r->invalid[i].problems);
    }
    free(r->invalid);
    free(r);
}

static const char *cm_name(const cJSON *cm)
{
    const char *name = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cm, "metadata"), "name"));
    return name ? name : "";
}

static int by_name(const void *a, const void *b)
{
    return strcmp(cm_name(*(const cJSON *const *)a), cm_name(*(const cJSON *const *)b));
}

/* Takes ownership of c (freed on failure). 0 or -1. */
static int push_crl(struct crl_registry *r, struct crl *c)
{
    struct crl **crls = realloc(r->crls, (r->count + 1) * sizeof(*crls));
    if (!crls) {
        crl_free(c);
        return -1;
    }
    r->crls = crls;
    r->crls[r->count++] = c;
    return 0;
}

/* Takes ownership of *p (emptied either way). 0 or -1. */
static int push_invalid(struct crl_registry *r, const char *ns, const char *name, struct crl_problems *p)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "%s/%s", ns, name);
    char *full = strbuf_detach(&sb, NULL);
    struct crl_invalid *inv = full ? realloc(r->invalid, (r->invalid_count + 1) * sizeof(*inv)) : NULL;
    if (!inv) {
        free(full);
        crl_problems_free(p);
        return -1;
    }
    r->invalid = inv;
    inv[r->invalid_count].name = full;
    inv[r->invalid_count++].problems = *p;
    memset(p, 0, sizeof(*p));
    return 0;
}

/* Add one candidate: the enabled valid ones to crls, the invalid ones (the
 * duplicate-key rule included) to invalid, the valid disabled ones nowhere. */
static int registry_add(struct crl_registry *r, const cJSON *cm, const char *crl_namespace)
{
    struct crl_problems p = {0};
    struct crl *c = crl_parse(cm, crl_namespace, &p);
    if (p.failed) {
        crl_problems_free(&p);
        return -1;
    }
    const struct crl *holder = c && c->enabled ? find_key(r, c->key, NULL) : NULL;
    if (holder) {
        add_duplicate_problem(c->key, holder, &p);
        crl_free(c);
        c = NULL;
        if (p.failed) {
            crl_problems_free(&p);
            return -1;
        }
    }
    if (!c)
        return push_invalid(r, crl_namespace, cm_name(cm), &p);
    if (!c->enabled) {
        crl_free(c);
        return 0;
    }
    return push_crl(r, c);
}

struct crl_registry *crl_registry_build(const cJSON *const *configmaps, size_t n, const char *crl_namespace)
{
    struct crl_registry *r = calloc(1, sizeof(*r));
    const cJSON **cands = calloc(n + 1, sizeof(*cands));
    size_t nc = 0;
    bool ok = r && cands;
    for (size_t i = 0; ok && i < n; i++) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(configmaps[i], "metadata");
        const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "namespace"));
        if (ns && strcmp(ns, crl_namespace) == 0 && crl_is_candidate(configmaps[i], crl_namespace))
            cands[nc++] = configmaps[i];
    }
    /* "The first by name wins" must not depend on the order ConfigMaps
     * arrive in (watch order, hash order), so decide in name order. */
    if (ok)
        qsort(cands, nc, sizeof(*cands), by_name);
    for (size_t i = 0; ok && i < nc; i++)
        ok = registry_add(r, cands[i], crl_namespace) == 0;
    free(cands);
    if (!ok) {
        crl_registry_free(r);
        return NULL;
    }
    return r;
}

void crl_validate_against(const struct crl_registry *r, const cJSON *configmap, const char *crl_namespace,
                          struct crl_problems *problems)
{
    crl_free(crl_parse(configmap, crl_namespace, problems));
    /* The duplicate rule is judged on the raw fields, so a CRL with other
     * problems still learns that its key is taken. An UPDATE of the holder
     * itself (same name) is no duplicate. */
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(configmap, "metadata");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
    const char *enabled = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(labels, CRL_LABEL_ENABLED));
    const char *key = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(configmap, "data"), "key"));
    if (!enabled || strcmp(enabled, "true") != 0 || !key)
        return;
    const struct crl *holder = find_key(r, key, cm_name(configmap));
    if (holder)
        add_duplicate_problem(key, holder, problems);
}

/* ------------------------------------------------------------------ */
/* Enforcement on a pod                                                 */

void crl_defaults_free(struct crl_defaults *d)
{
    if (!d)
        return;
    free(d->items);
    d->items = NULL;
    d->count = 0;
}

struct container_view {
    int index;
    char *label; /* container "name" / container #i, for messages */
    const cJSON *limits, *requests;
};

static const cJSON *resource(const cJSON *map, const char *key)
{
    return cJSON_IsObject(map) ? cJSON_GetObjectItemCaseSensitive(map, key) : NULL;
}

/* A quantity as text: strings as written, JSON numbers (which the API server
 * also accepts) printed back. */
static const char *quantity_text(const cJSON *v, char *buf, size_t size)
{
    if (cJSON_IsString(v))
        return v->valuestring;
    if (!cJSON_IsNumber(v))
        return "<not a quantity>";
    double d = v->valuedouble;
    if (d >= -9e15 && d <= 9e15 && d == (double)(int64_t)d)
        snprintf(buf, size, "%" PRId64, (int64_t)d);
    else
        snprintf(buf, size, "%.17g", d);
    return buf;
}

/* Numeric equality as Quantity.Cmp does ("1k" == "1000"); text that does
 * not parse is compared as text (the API server rejects it anyway). */
static bool same_quantity(const char *a, const char *b)
{
    int64_t ma, mb;
    if (quantity_parse_milli(a, strlen(a), &ma) == QTY_OK && quantity_parse_milli(b, strlen(b), &mb) == QTY_OK)
        return ma == mb;
    return strcmp(a, b) == 0;
}

bool crl_registry_has_defaults(const struct crl_registry *r)
{
    for (size_t i = 0; r && i < r->count; i++)
        if (r->crls[i]->limits == CRL_LIMITS_OPTIONAL && r->crls[i]->default_value)
            return true;
    return false;
}

static int add_default(struct crl_defaults *d, int container, const struct crl *c, bool set_request)
{
    struct crl_default *items = realloc(d->items, (d->count + 1) * sizeof(*items));
    if (!items)
        return -1;
    d->items = items;
    items[d->count++] = (struct crl_default){container, c->key, c->default_value, set_request};
    return 0;
}

/* requests: disabled/fromLimits: a request must equal the limit the
 * container ends up with (its own, or the default it is about to take). */
static void check_request_equals(const struct container_view *cv, const struct crl *c, const char *req, const char *lim,
                                 bool lim_is_default, struct crl_problems *v)
{
    const char *rule = requests_names[c->requests];
    if (!lim)
        problem_add(v,
                    "%s: %s request %q is set without a limit, which CustomResourceLimitation %s forbids "
                    "(requests: %s)",
                    cv->label, c->key, req, c->name, rule);
    else if (!same_quantity(req, lim))
        problem_add(v,
                    "%s: %s request %q differs from its %slimit %q, which CustomResourceLimitation %s forbids "
                    "(requests: %s)",
                    cv->label, c->key, req, lim_is_default ? "default " : "", lim, c->name, rule);
}

static int apply_crl(const struct container_view *cv, const struct crl *c, struct crl_problems *v,
                     struct crl_defaults *d)
{
    char lbuf[40], rbuf[40];
    const cJSON *lj = resource(cv->limits, c->key), *rj = resource(cv->requests, c->key);
    const char *lim = lj ? quantity_text(lj, lbuf, sizeof(lbuf)) : NULL;
    const char *req = rj ? quantity_text(rj, rbuf, sizeof(rbuf)) : NULL;
    bool lim_is_default = false;
    if (c->limits == CRL_LIMITS_REQUIRED && !lim)
        problem_add(v, "%s: %s is required in limits by CustomResourceLimitation %s (limits: required)", cv->label,
                    c->key, c->name);
    else if (c->limits == CRL_LIMITS_DISABLED && lim)
        problem_add(v, "%s: %s is not allowed in limits by CustomResourceLimitation %s (limits: disabled)", cv->label,
                    c->key, c->name);
    else if (c->limits == CRL_LIMITS_OPTIONAL && !lim && c->default_value) {
        lim = c->default_value;
        lim_is_default = true;
        if (add_default(d, cv->index, c, c->requests != CRL_REQUESTS_REQUIRED && !req) != 0)
            return -1;
    }
    if (c->requests == CRL_REQUESTS_REQUIRED && !req)
        problem_add(v, "%s: %s is required in requests by CustomResourceLimitation %s (requests: required)", cv->label,
                    c->key, c->name);
    else if (c->requests != CRL_REQUESTS_REQUIRED && req)
        check_request_equals(cv, c, req, lim, lim_is_default, v);
    return v->failed ? -1 : 0;
}

/* A container uses a group when it names one of the group's keys in its
 * limits or requests. */
static bool group_used(const struct crl_registry *r, const char *group, const struct container_view *cv)
{
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->crls[i]->group, group) == 0 &&
            (resource(cv->limits, r->crls[i]->key) || resource(cv->requests, r->crls[i]->key)))
            return true;
    return false;
}

static bool first_of_group(const struct crl_registry *r, size_t g)
{
    for (size_t i = 0; i < g; i++)
        if (strcmp(r->crls[i]->group, r->crls[g]->group) == 0)
            return false;
    return true;
}

/* Fills cv; 0, or -1 when the label cannot be allocated. */
static int container_view_init(struct container_view *cv, const cJSON *ctr, int index)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(ctr, "resources");
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ctr, "name"));
    if (!cJSON_IsObject(res))
        res = NULL;
    cv->index = index;
    cv->limits = cJSON_GetObjectItemCaseSensitive(res, "limits");
    cv->requests = cJSON_GetObjectItemCaseSensitive(res, "requests");
    struct strbuf sb;
    strbuf_init(&sb);
    if (name) {
        strbuf_puts(&sb, "container ");
        strbuf_json_string(&sb, name);
    } else {
        strbuf_printf(&sb, "container #%d", index);
    }
    cv->label = strbuf_detach(&sb, NULL);
    return cv->label ? 0 : -1;
}

static int check_container(const struct crl_registry *r, const cJSON *ctr, int index, struct crl_problems *v,
                           struct crl_defaults *d)
{
    struct container_view cv;
    if (container_view_init(&cv, ctr, index) != 0)
        return -1;
    int rc = 0;
    for (size_t g = 0; g < r->count && rc == 0; g++) {
        if (!first_of_group(r, g) || !group_used(r, r->crls[g]->group, &cv))
            continue;
        for (size_t k = g; k < r->count && rc == 0; k++)
            if (strcmp(r->crls[k]->group, r->crls[g]->group) == 0)
                rc = apply_crl(&cv, r->crls[k], v, d);
    }
    free(cv.label);
    return rc;
}

int crl_check_pod(const struct crl_registry *r, const cJSON *pod, struct crl_problems *violations,
                  struct crl_defaults *defaults)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    const cJSON *containers = cJSON_GetObjectItemCaseSensitive(spec, "containers");
    if (!r || !cJSON_IsArray(containers))
        return 0;
    int index = 0;
    const cJSON *ctr;
    cJSON_ArrayForEach(ctr, containers)
    {
        if (cJSON_IsObject(ctr) && check_container(r, ctr, index, violations, defaults) != 0)
            return -1;
        index++;
    }
    return violations->failed ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* The JSON patch                                                       */

/* One "add" op; key (when not NULL) is appended to path as an escaped JSON
 * pointer token (RFC 6901: '~' -> ~0, '/' -> ~1); value NULL means {}. */
static void put_add(struct strbuf *sb, int container, const char *path, const char *key, const char *value)
{
    struct strbuf ptr;
    strbuf_init(&ptr);
    strbuf_printf(&ptr, "/spec/containers/%d/resources%s", container, path);
    if (key) {
        strbuf_putc(&ptr, '/');
        for (const char *c = key; *c; c++) {
            if (*c == '~')
                strbuf_puts(&ptr, "~0");
            else if (*c == '/')
                strbuf_puts(&ptr, "~1");
            else
                strbuf_putc(&ptr, *c);
        }
    }
    if (strbuf_failed(&ptr))
        sb->failed = 1;
    /* Only the opening '[' before the first op: no comma then. */
    strbuf_puts(sb, sb->len > 1 ? ",{\"op\":\"add\",\"path\":" : "{\"op\":\"add\",\"path\":");
    strbuf_json_string_n(sb, ptr.data ? ptr.data : "", ptr.len);
    strbuf_puts(sb, ",\"value\":");
    if (value)
        strbuf_json_string(sb, value);
    else
        strbuf_puts(sb, "{}");
    strbuf_putc(sb, '}');
    strbuf_free(&ptr);
}

/* Did an earlier default of the same container already create the limits
 * (any earlier one) or requests (an earlier one with set_request) map? */
static bool earlier_in_container(const struct crl_defaults *d, size_t k, bool need_request)
{
    for (size_t j = 0; j < k; j++)
        if (d->items[j].container == d->items[k].container && (!need_request || d->items[j].set_request))
            return true;
    return false;
}

static void put_default(struct strbuf *sb, const cJSON *containers, const struct crl_defaults *d, size_t k)
{
    const struct crl_default *it = &d->items[k];
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(containers, it->container), "resources");
    bool has_res = cJSON_IsObject(res);
    bool seen = earlier_in_container(d, k, false);
    if (!has_res && !seen)
        put_add(sb, it->container, "", NULL, NULL);
    if (!(has_res && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(res, "limits"))) && !seen)
        put_add(sb, it->container, "/limits", NULL, NULL);
    put_add(sb, it->container, "/limits", it->key, it->value);
    if (!it->set_request)
        return;
    if (!(has_res && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(res, "requests"))) &&
        !earlier_in_container(d, k, true))
        put_add(sb, it->container, "/requests", NULL, NULL);
    put_add(sb, it->container, "/requests", it->key, it->value);
}

char *crl_defaults_patch(const cJSON *pod, const struct crl_defaults *d)
{
    const cJSON *containers =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers");
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_putc(&sb, '[');
    for (size_t k = 0; d && k < d->count; k++)
        put_default(&sb, containers, d, k);
    strbuf_putc(&sb, ']');
    return strbuf_detach(&sb, NULL);
}

char *crl_problems_join(const struct crl_problems *p)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < p->count; i++)
        strbuf_printf(&sb, "%s%s", i ? "; " : "", p->items[i]);
    return strbuf_detach(&sb, NULL);
}
