/* test_dict.c - unit tests for lib/dict.c: set, replace, delete with
 * tombstones, growth, iteration, the batched lookup (dict_get_many)
 * against one key at a time, keys one byte apart, and keys of one length
 * whose hashes share the tag an entry keeps (so only the bytes tell them
 * apart). lib/dict.c is compiled in (tests/CMakeLists.txt). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long probes; /* slots looked at, by find_slot and place */
#define DICT_PROBE_HOOK() (probes++)
#include "lib/dict.c" /* the static hash, for keys whose tags collide */

#define KEYS 3000

/* Key i: i zero-padded to 1 + i % 40 characters, so hashing meets short
 * keys, whole eight-byte words and tails. */
static void key_of(char *buf, size_t size, int i)
{
    snprintf(buf, size, "%0*d", 1 + i % 40, i);
}

static void *value_of(int i)
{
    return (void *)(intptr_t)(i + 1);
}

static void fill(struct dict *d, int n)
{
    assert_int_equal(dict_init(d, 4), 0); /* grows many times on the way */
    char key[64];
    for (int i = 0; i < n; i++) {
        key_of(key, sizeof(key), i);
        assert_int_equal(dict_set(d, key, value_of(i), NULL), 0);
    }
}

static void test_set_get_replace_delete(void **state)
{
    (void)state;
    struct dict d;
    fill(&d, KEYS);
    assert_int_equal(dict_size(&d), KEYS);
    char key[64];
    for (int i = 0; i < KEYS; i++) {
        key_of(key, sizeof(key), i);
        assert_ptr_equal(dict_get(&d, key), value_of(i));
    }
    void *old = NULL;
    assert_int_equal(dict_set(&d, "00000007", value_of(-1), &old), 0); /* key_of(7) */
    assert_ptr_equal(old, value_of(7));
    assert_ptr_equal(dict_get(&d, "00000007"), value_of(-1));
    assert_null(dict_get(&d, "7")); /* a prefix is another key */
    assert_int_equal(dict_size(&d), KEYS);
    /* Every other key deleted: the rest are still found past the tombstones. */
    for (int i = 0; i < KEYS; i += 2) {
        key_of(key, sizeof(key), i);
        assert_non_null(dict_del(&d, key));
        assert_null(dict_del(&d, key));
    }
    assert_int_equal(dict_size(&d), KEYS / 2);
    for (int i = 0; i < KEYS; i++) {
        key_of(key, sizeof(key), i);
        if (i % 2 == 0)
            assert_null(dict_get(&d, key));
        else if (i != 7)
            assert_ptr_equal(dict_get(&d, key), value_of(i));
    }
    size_t pos = 0, seen = 0;
    while (dict_next(&d, &pos))
        seen++;
    assert_int_equal(seen, KEYS / 2);
    dict_free(&d);
}

/* dict_get_many answers as dict_get does, key by key, for any count
 * (chunk edges included), missing keys, and keys that are not
 * NUL-terminated where their length ends. */
static void test_get_many_agrees(void **state)
{
    (void)state;
    struct dict d;
    fill(&d, KEYS);
    enum { MAX = 200 };
    char text[MAX][64];
    const char *keys[MAX];
    size_t lens[MAX];
    void *values[MAX];
    for (int i = 0; i < MAX; i++) {
        int k = (i * 37) % (KEYS + 300); /* some beyond the keys set: missing */
        key_of(text[i], sizeof(text[i]), k);
        lens[i] = strlen(text[i]);
        if (i % 3 == 0)
            memcpy(text[i] + lens[i], "xyz", 4); /* the length ends the key, not a NUL */
        else if (i % 3 == 1 && lens[i] > 1)
            lens[i]--; /* a prefix of a stored key: not found, unless it is a key */
        keys[i] = text[i];
    }
    static const size_t counts[] = {0, 1, 31, 32, 33, 64, 65, MAX};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        for (size_t i = 0; i < MAX; i++)
            values[i] = value_of(-2); /* untouched past n */
        dict_get_many(&d, keys, lens, values, n);
        for (size_t i = 0; i < MAX; i++) {
            if (i >= n) {
                assert_ptr_equal(values[i], value_of(-2));
                continue;
            }
            char one[64];
            memcpy(one, keys[i], lens[i]);
            one[lens[i]] = '\0';
            assert_ptr_equal(values[i], dict_get(&d, one));
        }
    }
    /* And they are not all misses: the comparison above means something. */
    dict_get_many(&d, keys, lens, values, MAX);
    size_t found = 0;
    for (size_t i = 0; i < MAX; i++)
        found += values[i] != NULL;
    assert_true(found > MAX / 4 && found < MAX);
    dict_free(&d);
}

/* Keys that differ from a stored one in a single byte, at every position
 * and for every length around the eight-byte compares, are other keys. */
static void test_one_byte_apart(void **state)
{
    (void)state;
    struct dict d;
    assert_int_equal(dict_init(&d, 64), 0);
    const char base[] = "abcdefghijklmnopqrstu"; /* 21 bytes */
    for (size_t len = 1; len < sizeof(base); len++) {
        char key[32];
        memcpy(key, base, len);
        key[len] = '\0';
        assert_int_equal(dict_set(&d, key, value_of((int)len), NULL), 0);
    }
    for (size_t len = 1; len < sizeof(base); len++) {
        char key[32];
        memcpy(key, base, len);
        key[len] = '\0';
        assert_ptr_equal(dict_get(&d, key), value_of((int)len));
        for (size_t at = 0; at < len; at++) {
            key[at] = 'Z';
            const char *keys[] = {key};
            size_t lens[] = {len};
            void *got = value_of(-3);
            dict_get_many(&d, keys, lens, &got, 1);
            assert_null(got);
            assert_null(dict_get(&d, key));
            key[at] = base[at];
        }
    }
    dict_free(&d);
}

/* Two different keys of `len` (6 to 30) bytes whose tags and lengths are
 * equal and whose probes start at the same slot of a 16-slot table (so
 * looking one up meets the other), by a birthday search over numbered
 * keys; false when none was found. The keys are a six-digit number and
 * padding, the number last or first, so two of them differ only at one
 * end: a compare that skipped bytes there would take one for the other. */
struct tagged {
    uint64_t probe; /* the tag, and the first slot in a table of 16 */
    uint32_t n;
};

static int by_probe(const void *a, const void *b)
{
    const struct tagged *x = a, *y = b;
    return x->probe < y->probe ? -1 : x->probe > y->probe ? 1 : (x->n > y->n) - (x->n < y->n);
}

static void key_numbered(char *key, int len, bool number_first, uint32_t n)
{
    static const char pad[] = "pppppppppppppppppppppppp";
    if (number_first)
        snprintf(key, 32, "%06u%.*s", n, len - 6, pad);
    else
        snprintf(key, 32, "%.*s%06u", len - 6, pad, n);
}

static bool colliding_pair(int len, bool number_first, char *a, char *b)
{
    enum { TRIES = 1000000 }; /* 36 bits to match: about 7 pairs expected */
    struct tagged *t = malloc(TRIES * sizeof(*t));
    assert_non_null(t);
    char key[32];
    for (uint32_t n = 0; n < TRIES; n++) {
        key_numbered(key, len, number_first, n);
        uint64_t h = hash_bytes(key, (size_t)len);
        t[n] = (struct tagged){(uint64_t)tag_of(h) << 4 | (h & 15), n};
    }
    qsort(t, TRIES, sizeof(*t), by_probe);
    bool found = false;
    for (size_t i = 1; i < TRIES && !found; i++) {
        if (t[i].probe == t[i - 1].probe) {
            key_numbered(a, len, number_first, t[i - 1].n);
            key_numbered(b, len, number_first, t[i].n);
            found = true;
        }
    }
    free(t);
    return found;
}

/* Only the bytes tell such keys apart: each is found as itself, and one
 * stored is not found for the other, for short keys, keys of one or two
 * eight-byte words, and long keys. */
static void test_same_tag_other_key(void **state)
{
    (void)state;
    static const struct {
        int len;
        bool number_first;
    } shapes[] = {{6, false}, {12, false}, {14, true}, {16, false}, {24, false}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        char a[32], b[32];
        assert_true(colliding_pair(shapes[i].len, shapes[i].number_first, a, b));
        assert_string_not_equal(a, b);
        struct dict d;
        assert_int_equal(dict_init(&d, 4), 0);
        assert_int_equal(d.cap, 16);
        assert_int_equal(dict_set(&d, a, value_of(1), NULL), 0);
        assert_null(dict_get(&d, b));
        const char *keys[] = {b};
        size_t klen[] = {strlen(b)};
        void *got = value_of(-3);
        dict_get_many(&d, keys, klen, &got, 1);
        assert_null(got);
        assert_int_equal(dict_set(&d, b, value_of(2), NULL), 0);
        assert_ptr_equal(dict_get(&d, a), value_of(1));
        assert_ptr_equal(dict_get(&d, b), value_of(2));
        assert_int_equal(dict_size(&d), 2);
        dict_free(&d);
    }
}

/* ---- crafted collisions (issue 22) ------------------------------------------ */

/* The hash dict.c used before it was keyed: eight bytes per multiply, then
 * murmur3's final mix, no secret. Kept here to craft names that collide
 * under it, so the test shows what the keyed hash changed. */
static uint64_t unkeyed_hash(const char *s, size_t len)
{
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t h = k ^ len, w = 0;
    const char *end = s + len;
    for (; end - s >= 8; s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    assert_true(s == end); /* crafted names are whole words */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

enum { CRAFT_PAIRS = 17, CRAFT_WORDS = 2 * CRAFT_PAIRS, CRAFT_LEN = 8 * CRAFT_WORDS, CRAFT_NAMES = 100000 };

/* Name i of the crafted family: 34 words of letters; for each set bit j of
 * i, word 2j gets bit 63 flipped and word 2j+1 bits 63 and 34. Under the
 * unkeyed hash the first flip changes the state by exactly bits 63 and 34
 * (adding 2^63 commutes with an odd multiplier; h ^= h >> 29 copies bit 63
 * to 34) and the second flip cancels it: all 2^17 names share every bit of
 * the hash, whatever the letters. */
static void crafted_name(char *out, uint32_t i, const char *base)
{
    memcpy(out, base, CRAFT_LEN);
    out[CRAFT_LEN] = '\0';
    const uint64_t one = UINT64_C(1) << 63, pair = one | UINT64_C(1) << 34;
    for (int j = 0; j < CRAFT_PAIRS; j++) {
        if (!(i >> j & 1))
            continue;
        uint64_t w0, w1;
        memcpy(&w0, out + 16 * j, 8);
        memcpy(&w1, out + 16 * j + 8, 8);
        w0 ^= one;
        w1 ^= pair;
        memcpy(out + 16 * j, &w0, 8);
        memcpy(out + 16 * j + 8, &w1, 8);
    }
}

/* Probes to insert CRAFT_NAMES names made by make(i); stops early (and
 * returns what it counted) once past `give_up`, so a table that degrades
 * to one chain fails in seconds instead of hours. */
static unsigned long long insert_probes(void (*make)(char *, uint32_t, const char *), const char *base,
                                        unsigned long long give_up)
{
    struct dict d;
    assert_int_equal(dict_init(&d, 16), 0);
    char name[CRAFT_LEN + 1];
    unsigned long long start = probes;
    for (uint32_t i = 0; i < CRAFT_NAMES && probes - start <= give_up; i++) {
        make(name, i, base);
        assert_int_equal(dict_set(&d, name, value_of((int)i), NULL), 0);
    }
    unsigned long long used = probes - start;
    if (used <= give_up)
        assert_int_equal(dict_size(&d), CRAFT_NAMES);
    dict_free(&d);
    return used;
}

/* Random names of the same length and alphabet (letters, and the flipped
 * bytes the crafted ones hold). */
static void random_name(char *out, uint32_t i, const char *base)
{
    (void)base;
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ULL + 12345;
    for (int b = 0; b < CRAFT_LEN; b++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        unsigned char c = (unsigned char)('a' + (x * 0x2545F4914F6CDD1DULL >> 59) % 26);
        out[b] = (char)(b % 8 == 7 && (x & 1) ? c | 0x80 : c);
    }
    out[CRAFT_LEN] = '\0';
}

/* 100,000 names that all collide under the former unkeyed hash insert with
 * at most twice the probes of 100,000 random names (measured in probes, not
 * time). With the unkeyed hash they form one chain: about 5e9 probes. */
static void test_crafted_collisions_stay_cheap(void **state)
{
    (void)state;
    char base[CRAFT_LEN + 1], a[CRAFT_LEN + 1], b[CRAFT_LEN + 1];
    for (int i = 0; i < CRAFT_LEN; i++)
        base[i] = (char)('a' + (i * 7) % 26);
    base[CRAFT_LEN] = '\0';
    crafted_name(a, 0, base);
    for (uint32_t i = 1; i < CRAFT_NAMES; i += 997) {
        crafted_name(b, i, base);
        assert_string_not_equal(a, b);
        assert_true(unkeyed_hash(a, CRAFT_LEN) == unkeyed_hash(b, CRAFT_LEN));
    }
    unsigned long long random_probes = insert_probes(random_name, base, ~0ULL);
    unsigned long long crafted_probes = insert_probes(crafted_name, base, 2 * random_probes);
    print_message("probes for %d inserts: random names %llu, crafted names %llu\n", CRAFT_NAMES, random_probes,
                  crafted_probes);
    assert_true(crafted_probes <= 2 * random_probes);
}

/* The key is per process: a probe sequence seen in one run says nothing
 * about another. Here: it is set, and not one of the constants. */
static void test_key_is_drawn(void **state)
{
    (void)state;
    struct dict d;
    assert_int_equal(dict_init(&d, 1), 0);
    dict_free(&d);
    assert_true(hash_key[0] | hash_key[1] | hash_key[2] | hash_key[3]);
    assert_true(hash_key[0] != hash_key[1] && hash_key[2] != hash_key[3]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_get_replace_delete),
        cmocka_unit_test(test_get_many_agrees),
        cmocka_unit_test(test_one_byte_apart),
        cmocka_unit_test(test_same_tag_other_key),
        cmocka_unit_test(test_crafted_collisions_stay_cheap),
        cmocka_unit_test(test_key_is_drawn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
