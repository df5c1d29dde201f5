/* dict.c - string-keyed open-addressing hash table; see dict.h. */
#include "lib/dict.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static char tombstone_marker;
#define DICT_TOMBSTONE (&tombstone_marker)

/* Eight bytes at a time, each word multiplied in, then murmur3's final
 * mix. Short keys (node names, namespace/name) dominate: a 16-byte node
 * name is two multiplies instead of FNV-1a's sixteen dependent ones, which
 * a 5,000-name request paid for every name (9% of a filter whose names
 * were not memoised). Not keyed, like FNV-1a before it: the keys are the
 * cluster's object names. */
static inline uint64_t hash_bytes(const char *s, size_t len)
{
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t h = k ^ len, w = 0;
    const char *end = s + len;
    for (; end - s >= 8; s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    if (s < end) {
        if (len >= 8) { /* the last eight bytes, overlapping words already taken */
            memcpy(&w, end - 8, 8);
        } else {
            w = 0;
            for (size_t i = 0; i < len; i++)
                w |= (uint64_t)(unsigned char)s[i] << (8 * i);
        }
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint32_t tag_of(uint64_t h)
{
    return (uint32_t)(h >> 32);
}

/* Equal bytes, a and b both len long: short keys (node names) with two
 * overlapping eight-byte loads each, longer ones with memcmp. */
static inline bool same_bytes(const char *a, const char *b, size_t len)
{
    if (len >= 8 && len <= 16) {
        uint64_t a0, a1, b0, b1;
        memcpy(&a0, a, 8);
        memcpy(&b0, b, 8);
        memcpy(&a1, a + len - 8, 8);
        memcpy(&b1, b + len - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    return memcmp(a, b, len) == 0;
}

static size_t capacity_for(size_t n)
{
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    return cap;
}

int dict_init(struct dict *d, size_t expected)
{
    d->cap = capacity_for(expected);
    d->used = 0;
    d->filled = 0;
    d->slots = calloc(d->cap, sizeof(*d->slots));
    return d->slots ? 0 : -1;
}

void dict_free(struct dict *d)
{
    for (size_t i = 0; i < d->cap; i++) {
        char *k = d->slots[i].key;
        if (k && k != DICT_TOMBSTONE)
            free(k);
    }
    free(d->slots);
    d->slots = NULL;
    d->cap = d->used = d->filled = 0;
}

static inline struct dict_entry *find_slot(const struct dict *d, const char *key, size_t len, uint64_t h)
{
    size_t mask = d->cap - 1;
    uint32_t tag = tag_of(h);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct dict_entry *e = &d->slots[i];
        if (!e->key)
            return NULL;
        if (e->tag == tag && e->len == len && e->key != DICT_TOMBSTONE && same_bytes(e->key, key, len))
            return e;
    }
}

#define MANY_CHUNK 32

static void get_chunk(const struct dict *d, const char *const *keys, const size_t *lens, void **values, size_t n)
{
    uint64_t hash[MANY_CHUNK];
    size_t mask = d->cap - 1;
    for (size_t i = 0; i < n; i++) {
        hash[i] = hash_bytes(keys[i], lens[i]);
        __builtin_prefetch(&d->slots[hash[i] & mask]);
    }
    /* The first probe usually is the entry: fetch its key and value too. */
    for (size_t i = 0; i < n; i++) {
        const struct dict_entry *e = &d->slots[hash[i] & mask];
        if (e->key && e->key != DICT_TOMBSTONE && e->tag == tag_of(hash[i])) {
            __builtin_prefetch(e->key);
            __builtin_prefetch(e->value);
        }
    }
    for (size_t i = 0; i < n; i++) {
        const struct dict_entry *e = find_slot(d, keys[i], lens[i], hash[i]);
        values[i] = e ? e->value : NULL;
    }
}

void dict_get_many(const struct dict *d, const char *const *keys, const size_t *lens, void **values, size_t n)
{
    for (size_t base = 0; base < n; base += MANY_CHUNK)
        get_chunk(d, keys + base, lens + base, values + base, n - base < MANY_CHUNK ? n - base : MANY_CHUNK);
}

static void *dict_get_n(const struct dict *d, const char *key, size_t len)
{
    struct dict_entry *e = find_slot(d, key, len, hash_bytes(key, len));
    return e ? e->value : NULL;
}

void *dict_get(const struct dict *d, const char *key)
{
    return dict_get_n(d, key, strlen(key));
}

/* Put e in the first free slot from its hash's (its key is hashed again:
 * an entry keeps only the hash's high half). */
static void place(struct dict_entry *slots, size_t cap, struct dict_entry e)
{
    size_t mask = cap - 1;
    size_t i = hash_bytes(e.key, e.len) & mask;
    while (slots[i].key)
        i = (i + 1) & mask;
    slots[i] = e;
}

static int resize(struct dict *d, size_t cap)
{
    struct dict_entry *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return -1;
    for (size_t i = 0; i < d->cap; i++) {
        struct dict_entry e = d->slots[i];
        if (e.key && e.key != DICT_TOMBSTONE)
            place(slots, cap, e);
    }
    free(d->slots);
    d->slots = slots;
    d->cap = cap;
    d->filled = d->used;
    return 0;
}

int dict_set(struct dict *d, const char *key, void *value, void **old)
{
    size_t len = strlen(key);
    if (len > UINT32_MAX)
        return -1;
    uint64_t h = hash_bytes(key, len);
    if (old)
        *old = NULL;
    struct dict_entry *e = find_slot(d, key, len, h);
    if (e) {
        if (old)
            *old = e->value;
        e->value = value;
        return 0;
    }
    /* Keep the load (tombstones included) under 1/2 so probes stay short. */
    if ((d->filled + 1) * 2 > d->cap && resize(d, capacity_for(d->used + 1)) != 0)
        return -1;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, key, len + 1);
    place(d->slots, d->cap, (struct dict_entry){copy, value, tag_of(h), (uint32_t)len});
    d->used++;
    d->filled++;
    return 0;
}

void *dict_del(struct dict *d, const char *key)
{
    size_t len = strlen(key);
    struct dict_entry *e = find_slot(d, key, len, hash_bytes(key, len));
    if (!e)
        return NULL;
    void *value = e->value;
    free(e->key);
    e->key = DICT_TOMBSTONE;
    e->value = NULL;
    d->used--;
    return value;
}

struct dict_entry *dict_next(const struct dict *d, size_t *pos)
{
    while (*pos < d->cap) {
        struct dict_entry *e = &d->slots[(*pos)++];
        if (e->key && e->key != DICT_TOMBSTONE)
            return e;
    }
    return NULL;
}
