/*
 * crc32c: CRC-32C; see crc32c.h.
 */
#include "lib/crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78 : c >> 1;	/* Castagnoli, reflected */
		table[i] = c;
	}
}

uint32_t crc32c_portable(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	pthread_once(&table_once, table_init);
	while (n--)
		crc = table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *b, size_t n)
{
	uint64_t c = crc;

	for (; n >= 8; n -= 8, b += 8) {
		uint64_t v;

		memcpy(&v, b, 8);	/* unaligned, little-endian */
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; n; n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *b++);
	return (uint32_t)c;
}

static bool have_sse42;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe(void)
{
	have_sse42 = __builtin_cpu_supports("sse4.2");
}

uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&probe_once, probe);
	return have_sse42 ? crc32c_sse42(crc, p, n) : crc32c_portable(crc, p, n);
}
#else
uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
	return crc32c_portable(crc, p, n);
}
#endif
