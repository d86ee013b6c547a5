/*
 * Unit tests for crc32c: the standard check value, and the CPU path
 * against the table at every length and alignment (the 8-byte loop and
 * its tail).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "lib/crc32c.h"

static void test_check_value(void **state)
{
	(void)state;
	/* CRC-32C of "123456789" (RFC 3720, B.4's catalogue value) */
	assert_int_equal(~crc32c(0xffffffff, "123456789", 9), 0xe3069283);
	assert_int_equal(~crc32c_portable(0xffffffff, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c(0x12345678, "", 0), 0x12345678);
}

static void test_paths_agree(void **state)
{
	uint8_t buf[600];

	(void)state;
	srand(7);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	for (size_t off = 0; off < 9; off++)
		for (size_t n = 0; n + off <= sizeof(buf); n += 1 + n / 16)
			assert_int_equal(crc32c(0xffffffff, buf + off, n),
					 crc32c_portable(0xffffffff, buf + off, n));
	/* In pieces, as the XFS checksum is taken around its CRC field. */
	uint32_t c = crc32c(0xffffffff, buf, 13);

	c = crc32c(c, buf + 13, 500);
	assert_int_equal(c, crc32c_portable(0xffffffff, buf, 513));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_value),
		cmocka_unit_test(test_paths_agree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
