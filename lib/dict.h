/*
 * dict.h - a string-keyed hash table (open addressing, linear probing).
 *
 * Owns lookup by name for the cluster cache (nodes by name, pods by key,
 * ConfigMaps by namespace/name). Keys are copied and owned by the table;
 * values are opaque pointers owned by the caller. Not thread-safe: the cache
 * guards every table with its own lock.
 */
#ifndef GQA_DICT_H
#define GQA_DICT_H

#include <stddef.h>
#include <stdint.h>

struct dict_entry {
    char *key; /* NULL: empty slot; DICT_TOMBSTONE: deleted */
    void *value;
    /* The key's hash's high half (its low bits chose the slot) and the
     * key's length: a probe compares both before the key, and then the
     * key with memcmp of a known length, not strncmp. */
    uint32_t tag;
    uint32_t len;
};

struct dict {
    struct dict_entry *slots;
    size_t cap;    /* power of two */
    size_t used;   /* live entries */
    size_t filled; /* live entries + tombstones */
};

int dict_init(struct dict *d, size_t expected);
/* Free the table; values are untouched (free them first with dict_next). */
void dict_free(struct dict *d);
void *dict_get(const struct dict *d, const char *key);
/* Insert or replace. Returns 0, or -1 on allocation failure (table unchanged).
 * When a value was replaced, *old receives it (else NULL). */
int dict_set(struct dict *d, const char *key, void *value, void **old);
/* Remove and return the value (NULL if absent). */
void *dict_del(struct dict *d, const char *key);
/* Batched lookups: values[i] = the value of keys[i] (lens[i] bytes, no NUL
 * needed), or NULL. The keys are hashed first, then each stage (slot, key
 * and value) is fetched ahead for 32 keys at a time, so the memory latency
 * of many lookups overlaps instead of adding up (a 5000-node request is
 * bound by cache misses, not by work). */
void dict_get_many(const struct dict *d, const char *const *keys, const size_t *lens, void **values, size_t n);

/* Iterate: start with *pos = 0; returns the next entry or NULL at the end.
 * The table must not be modified during iteration. */
struct dict_entry *dict_next(const struct dict *d, size_t *pos);

static inline size_t dict_size(const struct dict *d)
{
    return d->used;
}

#endif
