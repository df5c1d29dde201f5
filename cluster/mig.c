/*
 * mig.c - MIG profile names, a node's MIG inventory under NVIDIA's device
 * plugin and GFD, and the MIG amounts of a container (mig.h; facts in
 * docs/mig.md).
 */
#include "cluster/mig.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/quantity.h"

#define MAX_LABEL_MIB 16777216LL /* 16 TiB, as HAMi's MiB fields */
#define MAX_LABEL_SMALL 1024     /* multiprocessors, slices, engines */

/* Reasons quote input: keep them to one line of printable ASCII. */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
}

int mig_fail(char *why, size_t why_size, const char *fmt, ...)
{
    if (why && why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
        printable(why);
    }
    return -1;
}

/* ---- profile names -------------------------------------------------------------- */

/* A decimal of 1..4 digits without a leading zero at *p; advances *p. */
static int read_number(const char **p, const char *end, int *out)
{
    const char *s = *p;
    int v = 0, digits = 0;
    while (s < end && *s >= '0' && *s <= '9' && digits < 5) {
        v = v * 10 + (*s - '0');
        s++;
        digits++;
    }
    if (digits == 0 || digits > 4 || (digits > 1 && **p == '0'))
        return -1;
    *p = s;
    *out = v;
    return 0;
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The attribute list after '+' (or '.' in the resource form): names of
 * letters and digits, first a letter, unique, separated by ',' (or '.'). */
static int parse_attrs(const char *s, const char *end, bool dots, struct mig_profile_name *out, char *attr_text,
                       size_t attr_size, char *why, size_t why_size)
{
    char names[MIG_MAX_ATTRS][MIG_MAX_ATTR_LEN + 1];
    size_t used = 0;
    attr_text[0] = '\0';
    while (s <= end) {
        const char *a = s;
        while (s < end && *s != ',' && !(dots && *s == '.'))
            s++;
        size_t n = (size_t)(s - a);
        if (n == 0)
            return mig_fail(why, why_size, "an empty attribute");
        if (n > MIG_MAX_ATTR_LEN)
            return mig_fail(why, why_size, "an attribute longer than %d characters", MIG_MAX_ATTR_LEN);
        if (!((a[0] >= 'a' && a[0] <= 'z') || (a[0] >= 'A' && a[0] <= 'Z')))
            return mig_fail(why, why_size, "an attribute must begin with a letter");
        for (size_t i = 0; i < n; i++)
            if (!is_alnum(a[i]))
                return mig_fail(why, why_size, "an attribute of other characters than letters and digits");
        if (out->nattrs == MIG_MAX_ATTRS)
            return mig_fail(why, why_size, "more than %d attributes", MIG_MAX_ATTRS);
        for (int i = 0; i < out->nattrs; i++)
            if (strlen(names[i]) == n && memcmp(names[i], a, n) == 0)
                return mig_fail(why, why_size, "attribute \"%.*s\" given twice", (int)n, a);
        memcpy(names[out->nattrs], a, n);
        names[out->nattrs][n] = '\0';
        if (n == 2 && memcmp(a, "me", 2) == 0)
            out->attrs |= MIG_ATTR_ME;
        int w = snprintf(attr_text + used, attr_size - used, "%s%.*s", out->nattrs ? "," : "", (int)n, a);
        if (w < 0 || (size_t)w >= attr_size - used)
            return mig_fail(why, why_size, "attributes too long");
        used += (size_t)w;
        out->nattrs++;
        if (s == end)
            break;
        s++; /* the separator; an attribute must follow */
    }
    return 0;
}

static int parse_profile(const char *text, size_t len, bool resource_form, struct mig_profile_name *out, char *why,
                         size_t why_size)
{
    memset(out, 0, sizeof(*out));
    if (!text || len == 0)
        return mig_fail(why, why_size, "an empty MIG profile");
    if (len >= MIG_NAME_MAX)
        return mig_fail(why, why_size, "a MIG profile longer than %d characters", MIG_NAME_MAX - 1);
    const char *p = text, *end = text + len;
    int first = 0, g = 0, gb = 0, c = 0;
    bool has_c = false;
    if (read_number(&p, end, &first) != 0)
        return mig_fail(why, why_size, "\"%.*s\" does not begin with a slice count", (int)len, text);
    if (p < end && *p == 'c') {
        c = first;
        has_c = true;
        p++;
        if (p >= end || *p != '.')
            return mig_fail(why, why_size, "\"%.*s\": \"<c>c\" must be followed by \".<g>g\"", (int)len, text);
        p++;
        if (read_number(&p, end, &g) != 0 || p >= end || *p != 'g')
            return mig_fail(why, why_size, "\"%.*s\": no \"<g>g\" after \"%dc.\"", (int)len, text, c);
    } else if (p < end && *p == 'g') {
        g = first;
    } else {
        return mig_fail(why, why_size, "\"%.*s\" is not \"[<c>c.]<g>g.<gb>gb\"", (int)len, text);
    }
    p++; /* the 'g' */
    if (p >= end || *p != '.')
        return mig_fail(why, why_size, "\"%.*s\": \"<g>g\" must be followed by \".<gb>gb\"", (int)len, text);
    p++;
    if (read_number(&p, end, &gb) != 0 || end - p < 2 || p[0] != 'g' || p[1] != 'b')
        return mig_fail(why, why_size, "\"%.*s\": no memory \"<gb>gb\" after the slices", (int)len, text);
    p += 2;
    if (g < 1 || g > MIG_MAX_SLICES)
        return mig_fail(why, why_size, "\"%.*s\": %d GPU-instance slices, not in 1..%d", (int)len, text, g,
                        MIG_MAX_SLICES);
    if (!has_c)
        c = g;
    else if (c < 1 || c > g)
        return mig_fail(why, why_size, "\"%.*s\": %d compute slices, not in 1..%d", (int)len, text, c, g);
    if (gb < 1 || gb > MIG_MAX_MEMORY_GB)
        return mig_fail(why, why_size, "\"%.*s\": %d GB, not in 1..%d", (int)len, text, gb, MIG_MAX_MEMORY_GB);
    out->compute = c;
    out->slices = g;
    out->memory_gb = gb;
    char attrs[MIG_NAME_MAX] = "";
    if (p < end) {
        bool dots = resource_form && *p == '.';
        if (*p != '+' && !dots)
            return mig_fail(why, why_size, "\"%.*s\": unexpected \"%.*s\" after \"gb\"", (int)len, text, (int)(end - p),
                            p);
        if (parse_attrs(p + 1, end, dots, out, attrs, sizeof(attrs), why, why_size) != 0)
            return -1;
    }
    int n = c == g ? snprintf(out->canonical, sizeof(out->canonical), "%dg.%dgb%s%s", g, gb, *attrs ? "+" : "", attrs)
                   : snprintf(out->canonical, sizeof(out->canonical), "%dc.%dg.%dgb%s%s", c, g, gb, *attrs ? "+" : "",
                              attrs);
    if (n < 0 || (size_t)n >= sizeof(out->canonical))
        return mig_fail(why, why_size, "a MIG profile longer than %d characters", MIG_NAME_MAX - 1);
    memcpy(out->resource, out->canonical, sizeof(out->resource));
    for (char *q = out->resource; *q; q++)
        if (*q == '+')
            *q = '.';
    return 0;
}

int mig_profile_parse(const char *text, size_t len, struct mig_profile_name *out, char *why, size_t why_size)
{
    return parse_profile(text, len, false, out, why, why_size);
}

int mig_profile_parse_resource(const char *text, size_t len, struct mig_profile_name *out, char *why, size_t why_size)
{
    return parse_profile(text, len, true, out, why, why_size);
}

/* ---- a node -------------------------------------------------------------------- */

const char *mig_strategy_name(enum mig_strategy s)
{
    static const char *const names[] = {"absent", "none", "single", "mixed", "other"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "other";
}

static void skip(struct mig_node *node, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void skip(struct mig_node *node, const char *fmt, ...)
{
    if (node->nskipped < MIG_MAX_REASONS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(node->skipped[node->nskipped], MIG_REASON_MAX, fmt, ap);
        va_end(ap);
        printable(node->skipped[node->nskipped]);
    }
    if (node->nskipped < 1000000)
        node->nskipped++;
}

static void profile_init(struct mig_node_profile *np, const struct mig_profile_name *name)
{
    memset(np, 0, sizeof(*np));
    np->profile = *name;
    np->capacity = np->allocatable = np->label_count = np->memory_mib = -1;
    np->multiprocessors = np->slices_gi = np->slices_ci = -1;
    np->engines_copy = np->engines_decoder = np->engines_encoder = np->engines_jpeg = np->engines_ofa = -1;
}

static struct mig_node_profile *find_or_add(struct mig_node *node, const struct mig_profile_name *name, bool single,
                                            const char *source)
{
    for (int i = 0; i < node->nprofiles; i++)
        if (node->profiles[i].single == single && strcmp(node->profiles[i].profile.canonical, name->canonical) == 0)
            return &node->profiles[i];
    if (node->nprofiles == MIG_MAX_NODE_PROFILES) {
        skip(node, "%s: more than %d MIG profiles on the node", source, MIG_MAX_NODE_PROFILES);
        return NULL;
    }
    struct mig_node_profile *np = &node->profiles[node->nprofiles++];
    profile_init(np, name);
    np->single = single;
    return np;
}

/* A whole number in 0..max from a JSON string (quantity or label), or -1. */
static int64_t read_amount(const cJSON *v, int64_t max, bool quantity)
{
    if (!cJSON_IsString(v) || !v->valuestring)
        return -1;
    int64_t n = 0;
    const char *s = v->valuestring;
    size_t len = strlen(s);
    if (quantity) {
        if (quantity_parse_int(s, len, &n) != QTY_OK)
            return -1;
    } else {
        /* a label value: plain decimal digits */
        if (len == 0 || len > 19)
            return -1;
        for (size_t i = 0; i < len; i++) {
            if (s[i] < '0' || s[i] > '9')
                return -1;
            n = n * 10 + (s[i] - '0');
        }
    }
    return n <= max ? n : -1;
}

/* A resource amount (capacity or allocatable) into *field, or a reason. */
static void read_resource(struct mig_node *node, const cJSON *item, int64_t *field)
{
    int64_t n = read_amount(item, MIG_MAX_INSTANCES, true);
    if (n < 0) {
        skip(node, "%s: amount is not a whole number in 0..%d", item->string, MIG_MAX_INSTANCES);
        return;
    }
    *field = n;
}

static void read_resources(struct mig_node *node, const cJSON *list, bool allocatable)
{
    if (!cJSON_IsObject(list))
        return;
    const size_t plen = strlen(MIG_RESOURCE_PREFIX);
    for (const cJSON *it = list->child; it; it = it->next) {
        if (!it->string || strncmp(it->string, MIG_RESOURCE_PREFIX, plen) != 0)
            continue;
        struct mig_profile_name name;
        char why[MIG_REASON_MAX];
        const char *prof = it->string + plen;
        if (mig_profile_parse_resource(prof, strlen(prof), &name, why, sizeof(why)) != 0) {
            skip(node, "%s: %s", it->string, why);
            continue;
        }
        struct mig_node_profile *np = find_or_add(node, &name, false, it->string);
        if (np)
            read_resource(node, it, allocatable ? &np->allocatable : &np->capacity);
    }
}

struct label_field {
    const char *suffix;
    int64_t max;
};

/* GFD's per-resource label suffixes (lm/resource.go, nvml-mig-device.go), longest match first. */
static const struct label_field label_fields[] = {
    {"engines.decoder", MAX_LABEL_SMALL},
    {"engines.encoder", MAX_LABEL_SMALL},
    {"multiprocessors", MAX_LABEL_SMALL},
    {"engines.copy", MAX_LABEL_SMALL},
    {"engines.jpeg", MAX_LABEL_SMALL},
    {"engines.ofa", MAX_LABEL_SMALL},
    {"slices.gi", MAX_LABEL_SMALL},
    {"slices.ci", MAX_LABEL_SMALL},
    {"replicas", MIG_MAX_INSTANCES},
    {"product", 0},
    {"memory", MAX_LABEL_MIB},
    {"count", MIG_MAX_INSTANCES},
};

static void set_label_number(struct mig_node_profile *np, const char *suffix, int64_t v)
{
    if (strcmp(suffix, "count") == 0)
        np->label_count = v;
    else if (strcmp(suffix, "memory") == 0)
        np->memory_mib = v;
    else if (strcmp(suffix, "multiprocessors") == 0)
        np->multiprocessors = (int)v;
    else if (strcmp(suffix, "slices.gi") == 0)
        np->slices_gi = (int)v;
    else if (strcmp(suffix, "slices.ci") == 0)
        np->slices_ci = (int)v;
    else if (strcmp(suffix, "engines.copy") == 0)
        np->engines_copy = (int)v;
    else if (strcmp(suffix, "engines.decoder") == 0)
        np->engines_decoder = (int)v;
    else if (strcmp(suffix, "engines.encoder") == 0)
        np->engines_encoder = (int)v;
    else if (strcmp(suffix, "engines.jpeg") == 0)
        np->engines_jpeg = (int)v;
    else if (strcmp(suffix, "engines.ofa") == 0)
        np->engines_ofa = (int)v;
    /* replicas: time-slicing of MIG instances, not modelled */
}

static void copy_text(char *dst, size_t size, const char *src, size_t len)
{
    if (len >= size)
        len = size - 1;
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        dst[k++] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[k] = '\0';
}

/* One label of `np` (suffix already split off). */
static void apply_label(struct mig_node *node, struct mig_node_profile *np, const struct label_field *f, const cJSON *v,
                        const char *key)
{
    if (f->max == 0) {
        if (cJSON_IsString(v) && v->valuestring)
            copy_text(np->product, sizeof(np->product), v->valuestring, strlen(v->valuestring));
        return;
    }
    int64_t n = read_amount(v, f->max, false);
    if (n < 0) {
        skip(node, "label %s: not a whole number in 0..%lld", key, (long long)f->max);
        return;
    }
    set_label_number(np, f->suffix, n);
}

static const struct label_field *split_label(const char *rest, size_t *profile_len)
{
    size_t len = strlen(rest);
    for (size_t i = 0; i < sizeof(label_fields) / sizeof(label_fields[0]); i++) {
        size_t sl = strlen(label_fields[i].suffix);
        if (len > sl + 1 && rest[len - sl - 1] == '.' && strcmp(rest + len - sl, label_fields[i].suffix) == 0) {
            *profile_len = len - sl - 1;
            return &label_fields[i];
        }
    }
    return NULL;
}

static void read_mixed_labels(struct mig_node *node, const cJSON *labels)
{
    const size_t plen = strlen(MIG_RESOURCE_PREFIX);
    for (const cJSON *it = labels->child; it; it = it->next) {
        if (!it->string || strncmp(it->string, MIG_RESOURCE_PREFIX, plen) != 0)
            continue;
        size_t profile_len = 0;
        const struct label_field *f = split_label(it->string + plen, &profile_len);
        if (!f)
            continue; /* a label of another tool */
        struct mig_profile_name name;
        char why[MIG_REASON_MAX];
        if (mig_profile_parse_resource(it->string + plen, profile_len, &name, why, sizeof(why)) != 0) {
            skip(node, "label %s: %s", it->string, why);
            continue;
        }
        struct mig_node_profile *np = find_or_add(node, &name, false, it->string);
        if (np)
            apply_label(node, np, f, it, it->string);
    }
}

static enum mig_strategy parse_strategy(const cJSON *v)
{
    if (!v)
        return MIG_STRATEGY_ABSENT;
    if (!cJSON_IsString(v) || !v->valuestring)
        return MIG_STRATEGY_OTHER;
    if (strcmp(v->valuestring, "none") == 0)
        return MIG_STRATEGY_NONE;
    if (strcmp(v->valuestring, "single") == 0)
        return MIG_STRATEGY_SINGLE;
    if (strcmp(v->valuestring, "mixed") == 0)
        return MIG_STRATEGY_MIXED;
    return MIG_STRATEGY_OTHER;
}

/* The labels nvidia.com/gpu.<suffix> of a single-strategy node. */
static void read_single_labels(struct mig_node *node, struct mig_node_profile *np, const cJSON *labels)
{
    for (size_t i = 0; i < sizeof(label_fields) / sizeof(label_fields[0]); i++) {
        char key[96];
        snprintf(key, sizeof(key), "nvidia.com/gpu.%s", label_fields[i].suffix);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(labels, key);
        if (v)
            apply_label(node, np, &label_fields[i], v, key);
    }
}

/* The single strategy: "<model>-MIG-<profile>[-SHARED]" in nvidia.com/gpu.product. */
static void read_single(struct mig_node *node, const cJSON *labels, const cJSON *capacity, const cJSON *allocatable)
{
    const cJSON *product = cJSON_GetObjectItemCaseSensitive(labels, MIG_PRODUCT_LABEL);
    if (!cJSON_IsString(product) || !product->valuestring)
        return;
    const char *value = product->valuestring, *mig = NULL;
    for (const char *q = strstr(value, "-MIG-"); q; q = strstr(q + 1, "-MIG-"))
        mig = q;
    if (!mig) {
        copy_text(node->product, sizeof(node->product), value, strlen(value));
        return;
    }
    copy_text(node->product, sizeof(node->product), value, (size_t)(mig - value));
    const char *prof = mig + 5;
    size_t plen = strlen(prof);
    if (plen >= 7 && strcmp(prof + plen - 7, "-SHARED") == 0)
        plen -= 7;
    if (plen == 7 && memcmp(prof, "INVALID", 7) == 0) {
        node->single_invalid = true;
        skip(node, "%s: GFD refused the single strategy (product %s)", MIG_PRODUCT_LABEL, value);
        return;
    }
    if (node->strategy != MIG_STRATEGY_ABSENT && node->strategy != MIG_STRATEGY_SINGLE) {
        skip(node, "%s names a MIG profile but %s is %s", MIG_PRODUCT_LABEL, MIG_STRATEGY_LABEL,
             mig_strategy_name(node->strategy));
        return;
    }
    struct mig_profile_name name;
    char why[MIG_REASON_MAX];
    if (mig_profile_parse_resource(prof, plen, &name, why, sizeof(why)) != 0) {
        skip(node, "%s: %s", MIG_PRODUCT_LABEL, why);
        return;
    }
    struct mig_node_profile *np = find_or_add(node, &name, true, MIG_PRODUCT_LABEL);
    if (!np)
        return;
    node->single = true;
    read_single_labels(node, np, labels); /* nvidia.com/gpu.product lands in np->product */
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(capacity, MIG_GPU_RESOURCE);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(allocatable, MIG_GPU_RESOURCE);
    if (c)
        read_resource(node, c, &np->capacity);
    if (a)
        read_resource(node, a, &np->allocatable);
}

void mig_node_read(const cJSON *labels, const cJSON *capacity, const cJSON *allocatable, struct mig_node *out)
{
    memset(out, 0, sizeof(*out));
    out->gpu_count = -1;
    if (!cJSON_IsObject(labels))
        labels = NULL;
    if (labels) {
        out->strategy = parse_strategy(cJSON_GetObjectItemCaseSensitive(labels, MIG_STRATEGY_LABEL));
        const cJSON *count = cJSON_GetObjectItemCaseSensitive(labels, MIG_GPU_COUNT_LABEL);
        if (count) {
            out->gpu_count = read_amount(count, MIG_MAX_INSTANCES, false);
            if (out->gpu_count < 0)
                skip(out, "label %s: not a whole number in 0..%d", MIG_GPU_COUNT_LABEL, MIG_MAX_INSTANCES);
        }
        read_single(out, labels, capacity, allocatable);
        read_mixed_labels(out, labels);
    }
    read_resources(out, capacity, false);
    read_resources(out, allocatable, true);
    /* As kube-scheduler reads a node: allocatable when the node has it (a
     * key missing there is 0), capacity only when it has none. */
    bool has_allocatable = cJSON_IsObject(allocatable) && allocatable->child;
    for (int i = 0; i < out->nprofiles; i++)
        if (out->profiles[i].allocatable < 0)
            out->profiles[i].allocatable =
                has_allocatable && out->profiles[i].capacity >= 0 ? 0 : out->profiles[i].capacity;
}

const struct mig_node_profile *mig_node_find(const struct mig_node *node, const char *name)
{
    for (int i = 0; i < node->nprofiles; i++)
        if (strcmp(node->profiles[i].profile.canonical, name) == 0 ||
            strcmp(node->profiles[i].profile.resource, name) == 0)
            return &node->profiles[i];
    return NULL;
}

/* ---- requests ------------------------------------------------------------------ */

int mig_request_add(struct mig_request *req, const char *name, const char *quantity, char *why, size_t why_size)
{
    const size_t plen = strlen(MIG_RESOURCE_PREFIX);
    if (!name || strncmp(name, MIG_RESOURCE_PREFIX, plen) != 0)
        return 0;
    struct mig_profile_name profile;
    char reason[MIG_REASON_MAX];
    if (mig_profile_parse_resource(name + plen, strlen(name + plen), &profile, reason, sizeof(reason)) != 0)
        return mig_fail(why, why_size, "%s: %s", name, reason);
    int64_t n = 0;
    qty_status st = quantity ? quantity_parse_int(quantity, strlen(quantity), &n) : QTY_ERR_SYNTAX;
    if (st != QTY_OK)
        return mig_fail(why, why_size, "%s: %s", name, quantity_status_text(st));
    if (n > MIG_MAX_REQUEST)
        return mig_fail(why, why_size, "%s: %lld instances, more than %d", name, (long long)n, MIG_MAX_REQUEST);
    for (int i = 0; i < req->n; i++)
        if (strcmp(req->items[i].profile.canonical, profile.canonical) == 0) {
            if (n == 0) {
                req->items[i] = req->items[--req->n];
                return 1;
            }
            req->items[i].count = n;
            return 1;
        }
    if (n == 0)
        return 1;
    if (req->n == MIG_MAX_REQ_PROFILES)
        return mig_fail(why, why_size, "%s: more than %d MIG profiles in one container", name, MIG_MAX_REQ_PROFILES);
    req->items[req->n].profile = profile;
    req->items[req->n].count = n;
    req->n++;
    return 1;
}
