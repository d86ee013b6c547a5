/*
 * sorted: arrays kept in order -- qsort() and bsearch() that take an empty
 * array as it is, and the comparators of plain numbers.
 *
 * An array grown with realloc() from NULL is still NULL when nothing was
 * added, but C11 (7.22.5) wants qsort() and bsearch() given a valid
 * pointer even for no elements (glibc declares them nonnull, and UBSan's
 * nonnull-attribute check fires on qsort(NULL, 0, ...)).  Every sort and
 * binary search of fscrub goes through sort_items() and find_item(), which
 * take n == 0 with base NULL, so no caller needs an "if (n)" of its own.
 *
 * The comparators of struct ino_key and struct subvol_ino are in inokey.h.
 */
#ifndef FSCRUB_SORTED_H
#define FSCRUB_SORTED_H

#include <stddef.h>

typedef int (*item_cmp_fn)(const void *a, const void *b);

/* qsort(): n items of size bytes at base; fewer than two is nothing to do. */
void sort_items(void *base, size_t n, size_t size, item_cmp_fn cmp);

/*
 * bsearch(): an item of the n at base (sorted by cmp) equal to key, or
 * NULL; n == 0 finds nothing (base may be NULL).
 */
void *find_item(const void *key, const void *base, size_t n, size_t size, item_cmp_fn cmp);

/* By value: arrays of uint64_t and of uint32_t. */
int u64_cmp(const void *a, const void *b);
int u32_cmp(const void *a, const void *b);

#endif
