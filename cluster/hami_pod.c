/* hami_pod.c - HAMi requests, pod annotations, allocation format. See hami_pod.h. */
#include "cluster/hami_pod.h"
#include "cluster/resnames.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HAMI_MAX_ALLOC_TEXT 65536

/* ---- requests ------------------------------------------------------------------ */

static int request_memory(const struct hami_amounts *a, const char *c, struct hami_request *req, struct strbuf *err)
{
    const struct hami_config *cfg = hami_get_config();
    if (a->has_memory && a->memory > 0) {
        if (a->memory > HAMI_MAX_MEMORY_MIB) {
            strbuf_printf(err,
                          "container \"%s\": %s %" PRId64 " is above %lld; it counts MiB per vGPU (\"3Gi\" is "
                          "bytes, write 3072)",
                          c, RES_HAMI_MEMORY, a->memory, HAMI_MAX_MEMORY_MIB);
            return -1;
        }
        /* HAMi's GenerateResourceRequests multiplies gpumem by its memoryFactor
         * (when above 1) before anything else reads it. */
        int64_t factor = cfg->memory_factor > 1 ? cfg->memory_factor : 1;
        if (a->memory > HAMI_MAX_MEMORY_MIB / factor) {
            strbuf_printf(err, "container \"%s\": %s %" PRId64 " x the memory factor %" PRId64 " is above %lld MiB", c,
                          RES_HAMI_MEMORY, a->memory, factor, HAMI_MAX_MEMORY_MIB);
            return -1;
        }
        req->memory_mib = a->memory * factor; /* gpumem wins over a percentage, as in HAMi */
    } else if (a->has_percent) {
        if (a->percent < 1 || a->percent > 100) {
            strbuf_printf(err, "container \"%s\": %s %" PRId64 " is not a percentage in 1..100", c,
                          RES_HAMI_MEMORY_PERCENT, a->percent);
            return -1;
        }
        req->memory_percent = (int)a->percent;
    } else if (cfg->default_memory_mib > 0) {
        req->memory_mib = cfg->default_memory_mib;
    } else {
        req->memory_percent = 100; /* HAMi's default: the whole GPU's memory */
    }
    return 0;
}

void hami_amounts_read(const struct gpu_amounts *a, struct hami_amounts *h)
{
    h->gpus = gpu_amount(a, RES_NVIDIA_GPU, &h->has_gpus);
    h->memory = gpu_amount(a, RES_HAMI_MEMORY, &h->has_memory);
    h->percent = gpu_amount(a, RES_HAMI_MEMORY_PERCENT, &h->has_percent);
    h->cores = gpu_amount(a, RES_HAMI_CORES, &h->has_cores);
}

int hami_request_from_amounts(const struct hami_amounts *a, const char *c, struct hami_request *req, struct strbuf *err)
{
    memset(req, 0, sizeof(*req));
    if (!a->has_gpus || a->gpus == 0) {
        if (!hami_amounts_explicit(a))
            return 0;
        strbuf_printf(err,
                      "container \"%s\" asks for %s, %s or %s without nvidia.com/gpu; HAMi's admission webhook "
                      "adds nvidia.com/gpu: 1 to such containers (is it installed?)",
                      c, RES_HAMI_MEMORY, RES_HAMI_MEMORY_PERCENT, RES_HAMI_CORES);
        return -1;
    }
    if (a->gpus > HAMI_MAX_VGPUS) {
        strbuf_printf(err, "container \"%s\" asks for %" PRId64 " vGPUs; at most %d, each on its own GPU", c, a->gpus,
                      HAMI_MAX_VGPUS);
        return -1;
    }
    req->nums = (int)a->gpus;
    if (request_memory(a, c, req, err) != 0)
        return -1;
    /* Above 100 reads as 100 (exclusive use), as HAMi reads it. */
    req->cores = a->has_cores ? (int)(a->cores > 100 ? 100 : a->cores) : hami_get_config()->default_cores;
    return 0;
}

/* ---- allocation annotations ------------------------------------------------------ */

void hami_alloc_free(struct hami_alloc *a)
{
    for (int i = 0; a->containers && i < a->ncontainers; i++) {
        struct hami_alloc_container *c = &a->containers[i];
        for (int k = 0; c->devices && k < c->count; k++) {
            free(c->devices[k].uuid);
            free(c->devices[k].vendor);
        }
        free(c->devices);
    }
    free(a->containers);
    memset(a, 0, sizeof(*a));
}

static bool plain_text(const char *s, size_t n)
{
    if (n == 0 || n >= HAMI_MAX_TEXT)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static int bounded(const char *s, size_t n, int64_t max, int64_t *out)
{
    int64_t v = 0;
    if (n == 0 || n > 12)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* One "UUID,TYPE,mem,cores" (further fields, which newer HAMi versions may
 * add, are ignored). */
static int decode_device(const char *s, size_t n, int ci, struct hami_alloc_device *d, char **err)
{
    const char *f[4];
    size_t fl[4];
    size_t start = 0;
    int nf = 0;
    for (size_t i = 0; i <= n && nf < 4; i++) {
        if (i < n && s[i] != ',')
            continue;
        f[nf] = s + start;
        fl[nf++] = i - start;
        start = i + 1;
    }
    int64_t mem, cores;
    if (nf < 4)
        return strbuf_set_error(err, "container %d: a device has %d fields; expected UUID,TYPE,memMiB,cores", ci, nf);
    if (!plain_text(f[0], fl[0]) || !plain_text(f[1], fl[1]))
        return strbuf_set_error(err, "container %d: a device has an empty or unprintable UUID or type", ci);
    if (bounded(f[2], fl[2], HAMI_MAX_MEMORY_MIB, &mem) != 0 || bounded(f[3], fl[3], HAMI_MAX_DEVICE_CORES, &cores))
        return strbuf_set_error(err, "container %d: a device's memory or cores is not a number in range", ci);
    d->uuid = strndup(f[0], fl[0]);
    d->vendor = strndup(f[1], fl[1]);
    d->memory_mib = mem;
    d->cores = (int)cores;
    if (!d->uuid || !d->vendor)
        return (*err = NULL), -1;
    return 0;
}

static int count_pieces(const char *s, size_t n, char sep)
{
    int count = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == sep) {
            count += i > start;
            start = i + 1;
        }
    return count;
}

static int decode_container(const char *s, size_t n, int ci, struct hami_alloc_container *c, char **err)
{
    int count = count_pieces(s, n, ':');
    if (count > HAMI_MAX_VGPUS)
        return strbuf_set_error(err, "container %d lists %d devices; at most %d", ci, count, HAMI_MAX_VGPUS);
    if (count == 0)
        return 0;
    if (!(c->devices = calloc((size_t)count, sizeof(*c->devices))))
        return (*err = NULL), -1;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ':')
            continue;
        if (i > start && decode_device(s + start, i - start, ci, &c->devices[c->count++], err) != 0)
            return -1;
        start = i + 1;
    }
    return 0;
}

int hami_alloc_decode(const char *text, struct hami_alloc *out, char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    size_t len = strlen(text);
    if (len > HAMI_MAX_ALLOC_TEXT)
        return strbuf_set_error(err, "it is longer than %d bytes", HAMI_MAX_ALLOC_TEXT);
    /* Every container ends with ';'; a last container without one still counts. */
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == ';';
    n += len > 0 && text[len - 1] != ';';
    if (n > HAMI_ALLOC_ENTRIES_MAX)
        return strbuf_set_error(err, "it lists %d containers; at most %d", n, HAMI_ALLOC_ENTRIES_MAX);
    if (n == 0)
        return 0;
    if (!(out->containers = calloc((size_t)n, sizeof(*out->containers))))
        return -1;
    out->ncontainers = n;
    size_t start = 0;
    int ci = 0;
    for (size_t i = 0; i <= len && ci < n; i++) {
        if (i < len && text[i] != ';')
            continue;
        if (decode_container(text + start, i - start, ci, &out->containers[ci], err) != 0) {
            hami_alloc_free(out);
            return -1;
        }
        ci++;
        start = i + 1;
    }
    return 0;
}

char *hami_alloc_encode(const struct hami_alloc *a)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < a->ncontainers; i++) {
        const struct hami_alloc_container *c = &a->containers[i];
        for (int k = 0; k < c->count; k++)
            strbuf_printf(&sb, "%s,%s,%" PRId64 ",%d:", c->devices[k].uuid, c->devices[k].vendor,
                          c->devices[k].memory_mib, c->devices[k].cores);
        strbuf_putc(&sb, ';');
    }
    return strbuf_detach(&sb, NULL);
}

int hami_alloc_copy(struct hami_alloc *dst, const struct hami_alloc *src)
{
    memset(dst, 0, sizeof(*dst));
    if (src->ncontainers == 0)
        return 0;
    if (!(dst->containers = calloc((size_t)src->ncontainers, sizeof(*dst->containers))))
        return -1;
    dst->ncontainers = src->ncontainers;
    for (int i = 0; i < src->ncontainers; i++) {
        const struct hami_alloc_container *s = &src->containers[i];
        struct hami_alloc_container *d = &dst->containers[i];
        if (s->count == 0)
            continue;
        if (!(d->devices = calloc((size_t)s->count, sizeof(*d->devices))))
            goto oom;
        for (int k = 0; k < s->count; k++, d->count++) {
            d->devices[k] = s->devices[k];
            d->devices[k].uuid = strdup(s->devices[k].uuid);
            d->devices[k].vendor = strdup(s->devices[k].vendor);
            if (!d->devices[k].uuid || !d->devices[k].vendor) {
                d->count++;
                goto oom;
            }
        }
    }
    return 0;
oom:
    hami_alloc_free(dst);
    return -1;
}

/* ---- pod annotations ---------------------------------------------------------------- */

int hami_pack_parse(const char *text, enum hami_pack *out)
{
    if (strcmp(text, "binpack") == 0)
        *out = HAMI_PACK_BINPACK;
    else if (strcmp(text, "spread") == 0)
        *out = HAMI_PACK_SPREAD;
    else if (strcmp(text, "topology-aware") == 0)
        *out = HAMI_PACK_DEFAULT;
    else
        return -1;
    return 0;
}

static void list_free(struct hami_list *l)
{
    for (int i = 0; l->items && i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static int list_add(struct hami_list *l, const char *s, size_t n, bool upper)
{
    char **items = realloc(l->items, sizeof(*items) * (size_t)(l->count + 1));
    if (!items)
        return -1;
    l->items = items;
    char *v = strndup(s, n);
    if (!v)
        return -1;
    for (char *p = v; upper && *p; p++)
        *p = (char)toupper((unsigned char)*p);
    l->items[l->count++] = v;
    return 0;
}

static int by_length(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t nx = strlen(x), ny = strlen(y);
    return nx != ny ? (nx < ny ? -1 : 1) : strcmp(x, y);
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted (types by length, UUIDs by text: see the matchers) without
 * duplicates, so matching a device costs at most one pass of the list. */
static void list_sort_unique(struct hami_list *l, bool types)
{
    if (l->count < 2)
        return;
    qsort(l->items, (size_t)l->count, sizeof(*l->items), types ? by_length : by_text);
    int kept = 1;
    for (int i = 1; i < l->count; i++) {
        if (strcmp(l->items[i], l->items[kept - 1]) == 0)
            free(l->items[i]);
        else
            l->items[kept++] = l->items[i];
    }
    l->count = kept;
}

/* The first problem of a request is the one reported. 0, or -1 (out of memory). */
static int refuse(char **request_error, const char *key, const char *what, size_t have, size_t bound)
{
    if (*request_error)
        return 0;
    *request_error = strbuf_format("annotation %s %s %zu %s (at most %zu)", key, what, have,
                                   strcmp(what, "is") == 0 ? "bytes long" : "entries", bound);
    return *request_error ? 0 : -1;
}

/* A comma list; blanks around entries are dropped (HAMi keeps them, so
 * "A10, T4" would never match "T4" there), empty entries are skipped. A
 * list past its bounds is refused (request_error) and left empty. */
static int read_list(const cJSON *ann, const char *key, bool types, struct hami_list *out, char **request_error)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, key);
    if (!cJSON_IsString(v))
        return 0;
    const char *s = v->valuestring;
    size_t max_bytes = types ? HAMI_TYPE_LIST_MAX_BYTES : HAMI_UUID_LIST_MAX_BYTES;
    size_t max_items = types ? HAMI_TYPE_LIST_MAX_ITEMS : HAMI_UUID_LIST_MAX_ITEMS;
    size_t len = strlen(s);
    if (len > max_bytes)
        return refuse(request_error, key, "is", len, max_bytes);
    for (;;) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        const char *a = s, *b = s + n;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (b > a && list_add(out, a, (size_t)(b - a), types) != 0)
            return -1;
        if (!end)
            break;
        s = end + 1;
    }
    list_sort_unique(out, types);
    if ((size_t)out->count > max_items) {
        size_t have = (size_t)out->count;
        list_free(out);
        return refuse(request_error, key, "has", have, max_items);
    }
    return 0;
}

static int read_vgpu_mode(const cJSON *ann, char **out, char **request_error)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, HAMI_VGPU_MODE_ANNOTATION);
    if (!cJSON_IsString(v))
        return 0;
    size_t len = strlen(v->valuestring);
    if (len > HAMI_VGPU_MODE_MAX_BYTES)
        return refuse(request_error, HAMI_VGPU_MODE_ANNOTATION, "is", len, HAMI_VGPU_MODE_MAX_BYTES);
    return (*out = strdup(v->valuestring)) ? 0 : -1;
}

/* One entry of a GPU policy chain (len bytes): binpack or spread set *out
 * (the first one found wins), HAMi v2.10's mutex and numa and
 * topology-aware are taken without an order of their own. -1: unknown. */
static int chain_entry(const char *s, size_t len, enum hami_pack *out, bool *ordered)
{
    static const char *const plain[] = {"topology-aware", "mutex", "numa"};
    char word[16];
    if (len == 0 || len >= sizeof(word))
        return -1;
    memcpy(word, s, len);
    word[len] = '\0';
    enum hami_pack pack;
    if (hami_pack_parse(word, &pack) == 0) {
        if (!*ordered && pack != HAMI_PACK_DEFAULT)
            *out = pack;
        *ordered |= pack != HAMI_PACK_DEFAULT;
        return 0;
    }
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (strcmp(word, plain[i]) == 0)
            return 0;
    return -1;
}

/* hami.io/gpu-scheduler-policy: one policy, or (HAMi v2.10) a comma chain
 * of them, entries trimmed. 0, or -1 when an entry is unknown or empty. */
static int gpu_policy_chain(const char *text, enum hami_pack *out)
{
    enum hami_pack pack = HAMI_PACK_DEFAULT;
    bool ordered = false;
    for (const char *s = text;;) {
        const char *end = strchr(s, ',');
        const char *a = s, *b = end ? end : s + strlen(s);
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (chain_entry(a, (size_t)(b - a), &pack, &ordered) != 0)
            return -1;
        if (!end)
            break;
        s = end + 1;
    }
    *out = pack;
    return 0;
}

static int read_policy(const cJSON *ann, const char *key, enum hami_pack *out, char **request_error)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, key);
    if (!v)
        return 0;
    bool chain = strcmp(key, HAMI_GPU_POLICY_ANNOTATION) == 0;
    if (cJSON_IsString(v) &&
        (chain ? gpu_policy_chain(v->valuestring, out) : hami_pack_parse(v->valuestring, out)) == 0)
        return 0;
    if (*request_error)
        return 0;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "annotation %s ", key);
    if (cJSON_IsString(v))
        strbuf_json_string_n(&sb, v->valuestring, strlen(v->valuestring) > 64 ? 64 : strlen(v->valuestring));
    else
        strbuf_puts(&sb, "(not a string)");
    strbuf_puts(&sb, chain ? " is not binpack, spread, mutex, numa or topology-aware (or a comma chain of them)"
                           : " is not binpack or spread");
    *request_error = strbuf_detach(&sb, NULL);
    return *request_error ? 0 : -1;
}

/* One "key=value" of hami.io/device-scoring-weights (HAMi v2.10's
 * ParseDeviceScoringWeights): key and value trimmed, the value a
 * non-negative integer. 0, or -1. */
static int weight_entry(const char *a, const char *b, struct hami_pod *p, unsigned *seen)
{
    static const char *const keys[] = {"slot", "core", "memory"};
    int *slots[] = {&p->weight_slot, &p->weight_core, &p->weight_memory};
    const char *eq = memchr(a, '=', (size_t)(b - a));
    if (!eq)
        return -1;
    const char *ke = eq, *v = eq + 1;
    while (ke > a && isspace((unsigned char)ke[-1]))
        ke--;
    while (a < ke && isspace((unsigned char)*a))
        a++;
    while (v < b && isspace((unsigned char)*v))
        v++;
    while (b > v && isspace((unsigned char)b[-1]))
        b--;
    if (v == b || (size_t)(b - v) > 7)
        return -1;
    int64_t n = 0;
    for (const char *q = v; q < b; q++) {
        if (*q < '0' || *q > '9')
            return -1;
        n = n * 10 + (*q - '0');
    }
    if (n > HAMI_MAX_SCORING_WEIGHT)
        return -1;
    for (int k = 0; k < 3; k++)
        if ((size_t)(ke - a) == strlen(keys[k]) && memcmp(a, keys[k], (size_t)(ke - a)) == 0) {
            if (*seen & (1u << k))
                return -1;
            *seen |= 1u << k;
            *slots[k] = (int)n;
            return 0;
        }
    return -1;
}

/* hami.io/device-scoring-weights: exactly slot, core and memory, each once,
 * at least one above 0, as HAMi's ParseDeviceScoringWeights. A bad value is
 * an invalid request (HAMi refuses it with an error too). */
static int read_weights(const cJSON *ann, struct hami_pod *p, char **request_error)
{
    p->weight_slot = p->weight_core = p->weight_memory = 1;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, HAMI_SCORING_WEIGHTS_ANNOTATION);
    if (!v)
        return 0;
    unsigned seen = 0;
    int parts = 0;
    bool ok = cJSON_IsString(v);
    for (const char *s = ok ? v->valuestring : ""; ok;) {
        const char *end = strchr(s, ',');
        const char *b = end ? end : s + strlen(s);
        ok = ++parts <= 3 && weight_entry(s, b, p, &seen) == 0;
        if (!end)
            break;
        s = end + 1;
    }
    if (ok && parts == 3 && (p->weight_slot || p->weight_core || p->weight_memory))
        return 0;
    p->weight_slot = p->weight_core = p->weight_memory = 1;
    if (*request_error)
        return 0;
    *request_error = strbuf_format("annotation %s is not \"slot=N,core=N,memory=N\" (each once, integers 0..%d, "
                                   "at least one above 0)",
                                   HAMI_SCORING_WEIGHTS_ANNOTATION, HAMI_MAX_SCORING_WEIGHT);
    return *request_error ? 0 : -1;
}

/* The allocation the pod holds: -allocated (what HAMi's plugin keeps), else
 * -to-allocate. An unreadable one is remembered, so the charge can say why
 * it is unattributed. */
static int read_alloc(const cJSON *ann, struct hami_pod *p)
{
    static const char *const keys[] = {HAMI_ALLOCATED_ANNOTATION, HAMI_TO_ALLOCATE_ANNOTATION};
    for (int i = 0; i < 2 && !p->has_alloc; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, keys[i]);
        if (!cJSON_IsString(v))
            continue;
        char *err = NULL;
        if (hami_alloc_decode(v->valuestring, &p->alloc, &err) == 0) {
            p->has_alloc = true;
            p->alloc_done = i == 0;
            free(p->alloc_error);
            p->alloc_error = NULL;
        } else if (!err) {
            return -1;
        } else if (!p->alloc_error) {
            p->alloc_error = strbuf_format("%s: %s", keys[i], err);
            free(err);
            if (!p->alloc_error)
                return -1;
        } else {
            free(err);
        }
    }
    return 0;
}

/* hami.io/vgpu-mig-allocations: read as HAMi's DecodeMigAllocations reads
 * it (a bad value is all unusable; its reason is kept). */
static int read_mig(const cJSON *ann, struct hami_pod *p)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, MIG_HAMI_ALLOCATIONS_ANNOTATION);
    if (!cJSON_IsString(v))
        return 0;
    char *err = NULL;
    if (mig_hami_decode_allocations(v->valuestring, &p->mig, &p->nmig, &err) == 0)
        return 0;
    if (!err)
        return -1;
    p->mig_error = strbuf_format("%s: %s", MIG_HAMI_ALLOCATIONS_ANNOTATION, err);
    free(err);
    return p->mig_error ? 0 : -1;
}

static int mig_copy(struct hami_pod *to, const struct hami_pod *from)
{
    if (from->nmig <= 0 || !from->mig)
        return 0;
    size_t size = sizeof(*from->mig) * (size_t)from->nmig;
    if (!(to->mig = malloc(size)))
        return -1;
    memcpy(to->mig, from->mig, size);
    to->nmig = from->nmig;
    return 0;
}

static void mig_clear(struct hami_pod *p)
{
    free(p->mig);
    p->mig = NULL;
    p->nmig = 0;
    free(p->mig_error);
    p->mig_error = NULL;
}

void hami_pod_set_mig(struct hami_pod *p, struct mig_hami_allocation **mig, int n)
{
    mig_clear(p);
    p->mig = *mig;
    p->nmig = *mig ? n : 0;
    *mig = NULL;
}

/* Any of the annotations a HAMi decision writes, whatever its value: a new
 * decision that does not use them must remove them (extender/decide). */
const char *const hami_decision_keys[HAMI_DECISION_KEY_COUNT] = {HAMI_TO_ALLOCATE_ANNOTATION, HAMI_ALLOCATED_ANNOTATION,
                                                                 HAMI_NODE_ANNOTATION, HAMI_TIME_ANNOTATION,
                                                                 MIG_HAMI_ALLOCATIONS_ANNOTATION};

static bool carries_decision_keys(const cJSON *ann)
{
    for (int i = 0; i < HAMI_DECISION_KEY_COUNT; i++)
        if (cJSON_GetObjectItemCaseSensitive(ann, hami_decision_keys[i]))
            return true;
    return false;
}

int hami_pod_from_annotations(const cJSON *ann, struct hami_pod **out, char **request_error)
{
    *out = NULL;
    struct hami_pod *p = calloc(1, sizeof(*p));
    if (!p)
        return -1;
    if (read_list(ann, HAMI_USE_TYPE_ANNOTATION, true, &p->use_types, request_error) ||
        read_list(ann, HAMI_NOUSE_TYPE_ANNOTATION, true, &p->nouse_types, request_error) ||
        read_list(ann, HAMI_USE_UUID_ANNOTATION, false, &p->use_uuids, request_error) ||
        read_list(ann, HAMI_NOUSE_UUID_ANNOTATION, false, &p->nouse_uuids, request_error) ||
        read_vgpu_mode(ann, &p->vgpu_mode, request_error) ||
        read_policy(ann, HAMI_GPU_POLICY_ANNOTATION, &p->gpu_policy, request_error) ||
        read_policy(ann, HAMI_NODE_POLICY_ANNOTATION, &p->node_policy, request_error) ||
        read_weights(ann, p, request_error) || read_alloc(ann, p) || read_mig(ann, p)) {
        hami_pod_free(p);
        return -1;
    }
    p->decision_keys = carries_decision_keys(ann);
    /* HAMi's Fit compares the whole value: a chain naming topology-aware is not it */
    const cJSON *gp = cJSON_GetObjectItemCaseSensitive(ann, HAMI_GPU_POLICY_ANNOTATION);
    p->topology_aware = cJSON_IsString(gp) && strcmp(gp->valuestring, "topology-aware") == 0;
    p->filters =
        p->use_types.count || p->nouse_types.count || p->use_uuids.count || p->nouse_uuids.count || p->vgpu_mode;
    *out = p;
    return 0;
}

void hami_pod_free(struct hami_pod *p)
{
    if (!p)
        return;
    list_free(&p->use_types);
    list_free(&p->nouse_types);
    list_free(&p->use_uuids);
    list_free(&p->nouse_uuids);
    free(p->vgpu_mode);
    hami_alloc_free(&p->alloc);
    free(p->alloc_error);
    mig_clear(p);
    free(p);
}

static int list_copy(struct hami_list *dst, const struct hami_list *src)
{
    for (int i = 0; i < src->count; i++)
        if (list_add(dst, src->items[i], strlen(src->items[i]), false) != 0)
            return -1;
    return 0;
}

struct hami_pod *hami_pod_clone(const struct hami_pod *src)
{
    struct hami_pod *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->gpu_policy = src->gpu_policy;
    p->topology_aware = src->topology_aware;
    p->node_policy = src->node_policy;
    p->weight_slot = src->weight_slot;
    p->weight_core = src->weight_core;
    p->weight_memory = src->weight_memory;
    p->filters = src->filters;
    p->has_alloc = src->has_alloc;
    p->decision_keys = src->decision_keys;
    p->alloc_done = src->alloc_done;
    if (list_copy(&p->use_types, &src->use_types) || list_copy(&p->nouse_types, &src->nouse_types) ||
        list_copy(&p->use_uuids, &src->use_uuids) || list_copy(&p->nouse_uuids, &src->nouse_uuids) ||
        (src->vgpu_mode && !(p->vgpu_mode = strdup(src->vgpu_mode))) ||
        (src->alloc_error && !(p->alloc_error = strdup(src->alloc_error))) ||
        hami_alloc_copy(&p->alloc, &src->alloc) != 0 || mig_copy(p, src) != 0 ||
        (src->mig_error && !(p->mig_error = strdup(src->mig_error)))) {
        hami_pod_free(p);
        return NULL;
    }
    return p;
}

void hami_pod_set_alloc(struct hami_pod *p, struct hami_alloc *alloc)
{
    hami_alloc_free(&p->alloc);
    p->alloc = *alloc;
    memset(alloc, 0, sizeof(*alloc));
    p->has_alloc = true;
    p->alloc_done = true;
    free(p->alloc_error);
    p->alloc_error = NULL;
}

void hami_pod_clear_alloc(struct hami_pod *p)
{
    mig_clear(p);
    hami_alloc_free(&p->alloc);
    p->has_alloc = false;
    p->alloc_done = false;
    free(p->alloc_error);
    p->alloc_error = NULL;
}

int hami_pod_keep_alloc(struct hami_pod *to, const struct hami_pod *from)
{
    if (!from->has_alloc)
        return 0;
    struct hami_alloc copy;
    if (hami_alloc_copy(&copy, &from->alloc) != 0)
        return -1;
    hami_pod_set_alloc(to, &copy);
    to->alloc_done = from->alloc_done;
    mig_clear(to);
    return mig_copy(to, from);
}

/* ---- device checks --------------------------------------------------------------------- */

/* UUID lists are sorted by text: a binary search. */
static bool list_has_exact(const struct hami_list *l, const char *s)
{
    return l->count > 0 && bsearch(&s, l->items, (size_t)l->count, sizeof(*l->items), by_text) != NULL;
}

/* Type lists are sorted by length: entries longer than s cannot be in it,
 * and the scan stops at the first of them. */
static bool list_has_substring_of(const struct hami_list *l, const char *s)
{
    size_t n = strlen(s);
    for (int i = 0; i < l->count && strlen(l->items[i]) <= n; i++)
        if (strstr(s, l->items[i]))
            return true;
    return false;
}

bool hami_pod_type_ok(const struct hami_pod *p, const struct hami_device *d)
{
    if (p->use_types.count > 0 && !list_has_substring_of(&p->use_types, d->type_upper))
        return false;
    return !list_has_substring_of(&p->nouse_types, d->type_upper);
}

bool hami_pod_uuid_ok(const struct hami_pod *p, const struct hami_device *d)
{
    if (p->use_uuids.count > 0 && !list_has_exact(&p->use_uuids, d->uuid))
        return false;
    return !list_has_exact(&p->nouse_uuids, d->uuid);
}

bool hami_pod_mode_ok(const struct hami_pod *p, const struct hami_device *d)
{
    return !p->vgpu_mode || strstr(p->vgpu_mode, hami_mode_name(d->mode)) != NULL;
}
