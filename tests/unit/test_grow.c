/* test_grow.c - unit tests for lib/grow.c: doubling, first size, overflow. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "lib/grow.h"

static void test_grows_by_doubling(void **state)
{
    (void)state;
    size_t cap = 0;
    int *a = grow_array(NULL, &cap, 1, sizeof(*a), 4);
    assert_non_null(a);
    assert_int_equal(cap, 4);
    for (int i = 0; i < 4; i++)
        a[i] = i;
    /* Room enough: the same array, the same capacity. */
    assert_ptr_equal(grow_array(a, &cap, 4, sizeof(*a), 4), a);
    assert_int_equal(cap, 4);
    a = grow_array(a, &cap, 5, sizeof(*a), 4);
    assert_non_null(a);
    assert_int_equal(cap, 8);
    assert_int_equal(a[3], 3); /* the contents move with it */
    /* A jump past twice the capacity takes what is needed. */
    a = grow_array(a, &cap, 100, sizeof(*a), 4);
    assert_non_null(a);
    assert_int_equal(cap, 100);
    free(a);
}

static void test_overflow_leaves_the_array(void **state)
{
    (void)state;
    size_t cap = 2;
    char *a = malloc(2);
    assert_non_null(a);
    assert_null(grow_array(a, &cap, SIZE_MAX / 2, 4, 1));
    assert_int_equal(cap, 2);
    size_t huge = SIZE_MAX / 2 + 1;
    assert_null(grow_array(a, &huge, SIZE_MAX, 2, 1));
    assert_int_equal(huge, SIZE_MAX / 2 + 1);
    assert_null(grow_array(a, &cap, 3, 0, 1));
    a[1] = 'x'; /* still the caller's */
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grows_by_doubling),
        cmocka_unit_test(test_overflow_leaves_the_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
