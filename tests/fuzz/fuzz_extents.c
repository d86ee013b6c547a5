/*
 * libFuzzer target: extent_validate() on arbitrary FIEMAP records.
 * Input: 8 bytes of device size, then struct fiemap_extent records.
 * Invariant: the verdict does not depend on how the records are split
 * into FIEMAP batches (fscrub maps large files in several calls).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tree/extents.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct extent_cursor one, two;
	uint64_t dev_size;
	size_t n, split;
	struct fiemap_extent *ext;

	if (size < sizeof(dev_size) + 1)
		return 0;
	memcpy(&dev_size, data, sizeof(dev_size));
	split = data[sizeof(dev_size)];
	data += sizeof(dev_size) + 1;
	size -= sizeof(dev_size) + 1;
	n = size / sizeof(*ext);
	if (n == 0)
		return 0;
	ext = malloc(n * sizeof(*ext));
	memcpy(ext, data, n * sizeof(*ext));
	split %= n + 1;

	extent_cursor_init(&one, dev_size);
	enum extent_problem a = extent_validate(&one, ext, n);
	extent_cursor_init(&two, dev_size);
	enum extent_problem b = extent_validate(&two, ext, split);
	if (b == EXTENT_OK)
		b = extent_validate(&two, ext + split, n - split);
	if (a != b || (a != EXTENT_OK && (one.bad_logical != two.bad_logical ||
					  one.bad_physical != two.bad_physical)))
		abort();
	free(ext);
	return 0;
}
