/*
 * crc32c: CRC-32C (Castagnoli, reflected), the checksum of XFS metadata.
 *
 * With SSE4.2 (checked once, at run time) the CPU's crc32 instruction
 * does 8 bytes at a time; elsewhere a byte-wise table.  Phase 2's on-disk
 * inode walk checks every inode this way: half a gigabyte per million
 * 512-byte inodes, which the table alone takes over a second of CPU for.
 */
#ifndef FSCRUB_CRC32C_H
#define FSCRUB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue crc over p[0..n); start with 0xffffffff, finish with ~. */
uint32_t crc32c(uint32_t crc, const void *p, size_t n);
/* The same with the table only (for the tests' comparison). */
uint32_t crc32c_portable(uint32_t crc, const void *p, size_t n);

#endif
