/* dict.c - string-keyed open-addressing hash table; see dict.h. */
#include "lib/dict.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Tests count probes (tests/unit/test_dict.c defines this before it
 * includes the file): collisions show as probes, not as wall-clock time. */
#ifndef DICT_PROBE_HOOK
#define DICT_PROBE_HOOK() ((void)0)
#endif

static char tombstone_marker;
#define DICT_TOMBSTONE (&tombstone_marker)

/* A keyed hash (issue 22): the keys are pod and node names, which users
 * choose, so an unkeyed hash lets anyone who can create pods put all their
 * names in one probe chain (the former hash, eight bytes per multiply and
 * murmur3's final mix, is invertible step by step and has seed-free
 * collisions). This one folds sixteen bytes per 64x64->128-bit multiply
 * (the high and low halves xored, a mixing step Go's runtime uses for its
 * map hash when AES is unavailable) with four 64-bit secrets drawn from
 * getrandom() once per process, so collisions cannot be computed without
 * them. It stays about as fast as the former one on 10-40 byte names. */
static uint64_t hash_key[4];

/* Drawn before main (a constructor), so every table and every thread
 * sees the same key without a check per hash. */
__attribute__((constructor)) static void hash_key_init(void)
{
    uint64_t k[4];
    size_t got = 0;
    while (got < sizeof(k)) {
        ssize_t n = getrandom((char *)k + got, sizeof(k) - got, 0);
        if (n > 0) {
            got += (size_t)n;
        } else if (n < 0 && errno != EINTR) {
            /* No entropy source (seccomp, very old kernel): a weaker key
             * from the clock and the address space still differs per process. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            k[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t)ts.tv_sec;
            k[1] = (uint64_t)(uintptr_t)&ts ^ (uint64_t)getpid() << 32;
            k[2] = (uint64_t)(uintptr_t)&hash_key_init * 0xff51afd7ed558ccdULL;
            k[3] = k[0] * 0xc4ceb9fe1a85ec53ULL ^ k[1];
            break;
        }
    }
    /* Odd, and never zero: a zero factor would drop the other operand. */
    for (int i = 0; i < 4; i++)
        hash_key[i] = k[i] | 1;
}

static inline uint64_t fold_mul(uint64_t a, uint64_t b)
{
    unsigned __int128 p = (unsigned __int128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
}

static inline uint64_t word_at(const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

static inline uint64_t half_at(const char *s)
{
    uint32_t w;
    memcpy(&w, s, 4);
    return w;
}

static inline uint64_t hash_bytes(const char *s, size_t len)
{
    const uint64_t *key = hash_key;
    uint64_t h = key[0] ^ fold_mul(len ^ key[1], key[2]);
    for (; len > 16; s += 16, len -= 16)
        h = fold_mul(word_at(s) ^ key[1], word_at(s + 8) ^ h);
    /* The last 1-16 bytes as two words; overlapping reads are fine, the
     * length is in h already. */
    uint64_t a = 0, b = 0;
    if (len >= 8) {
        a = word_at(s);
        b = word_at(s + len - 8);
    } else if (len >= 4) {
        a = half_at(s) << 32 | half_at(s + len - 4);
    } else if (len > 0) {
        a = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[len / 2] << 8 | (unsigned char)s[len - 1];
    }
    h = fold_mul(a ^ key[2], b ^ h ^ key[3]);
    return fold_mul(h ^ key[1], key[3]);
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
        DICT_PROBE_HOOK();
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
    while (slots[i].key) {
        DICT_PROBE_HOOK();
        i = (i + 1) & mask;
    }
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
