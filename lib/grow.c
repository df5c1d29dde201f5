/* grow.c - the growable-array helper of grow.h: doubling with overflow checks. */
#include "lib/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *grow_array(void *items, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap && items)
        return items;
    size_t want = *cap > SIZE_MAX / 2 ? SIZE_MAX : *cap * 2;
    if (want < first)
        want = first;
    if (want < need)
        want = need;
    if (size == 0 || want > SIZE_MAX / size)
        return NULL;
    void *grown = realloc(items, want * size);
    if (!grown)
        return NULL;
    *cap = want;
    return grown;
}
