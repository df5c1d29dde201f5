/*
 * families.c - the registry of device families (family.h): the one place a
 * family is added, and what is derived from the table (the container
 * resource keys, the order nodes count GPUs in, classifying a container).
 */
#include "cluster/family.h"
#include "cluster/nodespec.h"
#include "cluster/podinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The registration: one X(name) per family, defined as gpu_family_<name>
 * in cluster/family_<name>.c. The order is the order nodes count their
 * GPUs by (design.md section 3: vcuda-core, else mps-core, else
 * nvidia.com/gpu) and container resource keys are read in. */
#define GPU_FAMILIES(X) X(vcuda) X(mps) X(pgpu) X(hami) X(mig)

#define DECLARE_FAMILY(name) extern const struct gpu_family gpu_family_##name;
#define LIST_FAMILY(name) &gpu_family_##name,
GPU_FAMILIES(DECLARE_FAMILY)
static const struct gpu_family *const families[] = {GPU_FAMILIES(LIST_FAMILY)};
#define FAMILY_COUNT (sizeof(families) / sizeof(families[0]))
_Static_assert(FAMILY_COUNT <= GPU_FAMILY_MAX, "a node summary keeps one bit per family");

size_t gpu_family_count(void)
{
    return FAMILY_COUNT;
}

const struct gpu_family *gpu_family_at(size_t i)
{
    return i < FAMILY_COUNT ? families[i] : NULL;
}

size_t gpu_family_index(const struct gpu_family *f)
{
    for (size_t i = 0; i < FAMILY_COUNT; i++)
        if (families[i] == f)
            return i;
    abort(); /* a family outside the table: a programming error */
}

const struct gpu_family *gpu_family_named(const char *name)
{
    for (size_t i = 0; i < FAMILY_COUNT; i++)
        if (strcmp(families[i]->name, name) == 0)
            return families[i];
    return NULL;
}

/* ---- container resource keys ------------------------------------------------ */

static const char *keys[GPU_AMOUNT_KEYS_MAX];
static size_t key_len[GPU_AMOUNT_KEYS_MAX];
static bool key_given_at_zero[GPU_AMOUNT_KEYS_MAX];
static int nkeys;
/* Bit k: family f reads key k (names_family asks this of every container). */
static uint32_t family_keys[FAMILY_COUNT];
/* Every family's interest-only names, in table order. */
static const char *interest[GPU_AMOUNT_KEYS_MAX];
static int ninterest;

static int find_key(const char *name, size_t len)
{
    for (int k = 0; k < nkeys; k++)
        if (key_len[k] == len && memcmp(keys[k], name, len) == 0)
            return k;
    return -1;
}

static void build_interest(void)
{
    for (size_t f = 0; f < FAMILY_COUNT; f++)
        for (const char *const *n = families[f]->interest_only; n && *n; n++) {
            if (ninterest == GPU_AMOUNT_KEYS_MAX) {
                fprintf(stderr, "device families: too many interest-only names\n");
                abort();
            }
            interest[ninterest++] = *n;
        }
}

/* Built before main (a constructor), from constant tables, so every thread
 * reads a finished list. A table that cannot be built is a programming
 * error, found by every test at start. */
__attribute__((constructor)) static void build_keys(void)
{
    for (size_t f = 0; f < FAMILY_COUNT; f++)
        for (int r = 0; r < GPU_FAMILY_RESOURCES && families[f]->resources[r].name; r++) {
            const struct gpu_resource *res = &families[f]->resources[r];
            int k = find_key(res->name, strlen(res->name));
            if (k >= 0 && key_given_at_zero[k] == res->given_at_zero) {
                family_keys[f] |= 1u << k;
                continue;
            }
            if (k >= 0 || nkeys == GPU_AMOUNT_KEYS_MAX) {
                fprintf(stderr, "device families: resource %s declared twice differently, or too many keys\n",
                        res->name);
                abort();
            }
            family_keys[f] |= 1u << nkeys;
            keys[nkeys] = res->name;
            key_len[nkeys] = strlen(res->name);
            key_given_at_zero[nkeys++] = res->given_at_zero;
        }
    build_interest();
}

int gpu_amount_key_count(void)
{
    return nkeys;
}

const char *gpu_amount_key_name(int k)
{
    return k >= 0 && k < nkeys ? keys[k] : NULL;
}

int gpu_amount_key_of(const char *name, size_t len)
{
    return find_key(name, len);
}

void gpu_amounts_set(struct gpu_amounts *a, int k, int64_t value)
{
    if (k < 0 || k >= nkeys)
        return;
    a->value[k] = value;
    if (key_given_at_zero[k] || value > 0)
        a->given |= 1u << k;
    else
        a->given &= ~(1u << k);
}

int64_t gpu_amount(const struct gpu_amounts *a, const char *name, bool *given)
{
    int k = find_key(name, strlen(name));
    bool g = k >= 0 && (a->given >> k & 1);
    if (given)
        *given = g;
    return k >= 0 ? a->value[k] : 0;
}

bool gpu_amount_prefixed(const char *name, size_t len)
{
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        const char *p = families[f]->resource_prefix;
        if (p && len > strlen(p) && memcmp(name, p, strlen(p)) == 0)
            return true;
    }
    return false;
}

int gpu_amounts_set_prefixed(struct gpu_amounts *a, const char *name, size_t len, int64_t value, const char *container,
                             struct strbuf *err)
{
    if (len >= GPU_AMOUNT_NAME_MAX) {
        strbuf_printf(err, "container \"%s\" names a GPU resource of %zu characters (at most %d)", container, len,
                      GPU_AMOUNT_NAME_MAX - 1);
        return -1;
    }
    if (a->nprefixed == GPU_AMOUNT_PREFIXED_MAX) {
        strbuf_printf(err, "container \"%s\" names more than %d GPU instance resources", container,
                      GPU_AMOUNT_PREFIXED_MAX);
        return -1;
    }
    memcpy(a->prefixed[a->nprefixed].name, name, len);
    a->prefixed[a->nprefixed].name[len] = '\0';
    a->prefixed[a->nprefixed++].value = value;
    return 0;
}

bool gpu_family_names_resource(const char *name, size_t len)
{
    if (find_key(name, len) >= 0 || gpu_amount_prefixed(name, len))
        return true;
    for (int i = 0; i < ninterest; i++)
        if (strlen(interest[i]) == len && memcmp(interest[i], name, len) == 0)
            return true;
    return false;
}

/* ---- classify --------------------------------------------------------------- */

/* Does the container name any resource of family f? */
static bool names_family(const struct gpu_amounts *a, size_t f)
{
    if (a->given & family_keys[f])
        return true;
    const char *prefix = families[f]->resource_prefix;
    size_t plen = prefix ? strlen(prefix) : 0;
    for (int i = 0; plen && i < a->nprefixed; i++)
        if (a->prefixed[i].value > 0 && strncmp(a->prefixed[i].name, prefix, plen) == 0)
            return true;
    return false;
}

/* "a and b" (or "a, b and c"): the first core resource of each kind in
 * the mask, in registry order. */
static void list_kinds(struct strbuf *err, uint32_t kinds)
{
    int total = __builtin_popcount(kinds), seen = 0;
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        uint32_t bit = 1u << families[f]->kind;
        if (!(kinds & bit))
            continue;
        kinds &= ~bit;
        seen++;
        strbuf_printf(err, "%s%s", seen == 1 ? "" : seen == total ? " and " : ", ", families[f]->core_resource);
    }
}

int gpu_family_classify(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err)
{
    const struct gpu_family *claimed = NULL;
    uint32_t kinds = 0;
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        if (!names_family(a, f))
            continue;
        kinds |= 1u << families[f]->kind;
        if (!claimed && families[f]->claims(a))
            claimed = families[f];
    }
    if (kinds & (kinds - 1)) {
        strbuf_printf(err, "container \"%s\" mixes GPU resources of different kinds (", c->name);
        list_kinds(err, kinds);
        strbuf_puts(err, "); a container uses one kind");
        return -1;
    }
    if (!claimed)
        return 0;
    /* The family stays set when the request is invalid: the pod still
     * uses GPUs, and fits nowhere with the reason. */
    c->family = claimed;
    c->family_bit = gpu_family_bit(claimed);
    return claimed->classify(a, c, err);
}

/* ---- nodes ------------------------------------------------------------------ */

const struct gpu_family *gpu_family_primary(const struct node_spec *s)
{
    const struct gpu_family *whole = NULL;
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        if (families[f]->gpus_counted && families[f]->gpus_counted(s) > 0)
            return families[f];
        if (!whole && (families[f]->flags & GPU_FAMILY_COUNTS_GPUS))
            whole = families[f];
    }
    return whole;
}

void gpu_family_list_core_resources(struct strbuf *sb, bool with_node_resource_only)
{
    const char *names[GPU_FAMILY_MAX];
    size_t n = 0;
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        const char *name = with_node_resource_only ? families[f]->node_core_resource : families[f]->core_resource;
        bool listed = !name;
        for (size_t i = 0; i < n && !listed; i++)
            listed = strcmp(names[i], name) == 0;
        if (!listed)
            names[n++] = name;
    }
    for (size_t i = 0; i < n; i++)
        strbuf_printf(sb, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
}

const char *gpu_memory_pool_name(int pool)
{
    for (size_t f = 0; f < FAMILY_COUNT; f++)
        if (families[f]->memory_pool == pool && families[f]->memory_resource) {
            const char *slash = strrchr(families[f]->memory_resource, '/');
            return slash ? slash + 1 : families[f]->memory_resource;
        }
    return "memory";
}
