/* test_dict.c - unit tests for lib/dict.c: set, replace, delete with
 * tombstones, growth, iteration, and the batched lookup (dict_get_many)
 * against one key at a time. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/dict.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_get_replace_delete),
        cmocka_unit_test(test_get_many_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
