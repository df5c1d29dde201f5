/*
 * grow.h - room in growable arrays.
 *
 * Owns the one grow-by-doubling routine the modules share, with its
 * overflow checks, so that no module repeats (and gets subtly wrong) the
 * realloc dance. Thread-safe, no state: the caller owns the array.
 */
#ifndef GQA_GROW_H
#define GQA_GROW_H

#include <stddef.h>

/* items, resized if needed to hold at least `need` elements of `size` bytes.
 * *cap is the capacity items has now, in elements. When it is too small the
 * array is reallocated to the larger of need and twice *cap (at least
 * `first`), and *cap is updated. Returns the array to use from now on, or
 * NULL on allocation failure or when the size would overflow; then items
 * and *cap are untouched and the caller still owns items. */
void *grow_array(void *items, size_t *cap, size_t need, size_t size, size_t first);

#endif
