/*
 * sorted: qsort() and bsearch() that take an empty array, even NULL, and
 * the comparators of plain numbers (see sorted.h).
 */
#include <stdint.h>
#include <stdlib.h>

#include "lib/sorted.h"

void sort_items(void *base, size_t n, size_t size, item_cmp_fn cmp)
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

void *find_item(const void *key, const void *base, size_t n, size_t size, item_cmp_fn cmp)
{
	return n ? bsearch(key, base, n, size, cmp) : NULL;
}

int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}
