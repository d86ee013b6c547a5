/*
 * btrfs_sectors: which data sectors of a device fail their checksums,
 * read by fscrub itself.
 *
 * The kernel scrub counts checksum errors per device, and names them in
 * its log by the 64 KiB stripe (logical and physical address of the
 * stripe, not of the sector), rate-limited to 10 messages per 5 s for the
 * whole machine.  To name the damaged block, and to name it at all when
 * the log lost the message, the sectors are read again here: each
 * checksummed sector of a range (the csum tree's EXTENT_CSUM items), read
 * from the device with O_DIRECT (the disk, not a cache, and not a read
 * through the filesystem, which would repair from a mirror: -n writes
 * nothing), against its crc32c.  A sector that fails is read a second
 * time, its checksum looked up again, before it is called bad.
 *
 * Only crc32c (the default checksum) is verified; the ranges of a device
 * are those of its SINGLE, DUP and RAID1* data chunks (a stripe there is a
 * whole copy).  Never reports (the caller names the files).
 */
#ifndef FSCRUB_BTRFS_SECTORS_H
#define FSCRUB_BTRFS_SECTORS_H

#include <stdbool.h>
#include <stdint.h>

struct btrfs_sectors {
	int mnt_fd;			/* any file of the filesystem */
	uint32_t sectorsize, nodesize;
	bool crc32c;			/* the data checksum is crc32c: verifiable */
};

/* Called with the logical address of each bad sector. */
typedef void btrfs_bad_sector_fn(uint64_t logical, void *arg);

/* Fill s for the filesystem of mnt_fd: 0, or a negative errno. */
int btrfs_sectors_init(struct btrfs_sectors *s, int mnt_fd);

/*
 * The checksummed sectors of [logical, logical + len), held from physical
 * on the device devpath: bad ones to fn.  The number of bad sectors, or a
 * negative errno (-EOPNOTSUPP: not crc32c).
 */
int btrfs_sectors_verify(const struct btrfs_sectors *s, const char *devpath, uint64_t logical,
			 uint64_t physical, uint64_t len, btrfs_bad_sector_fn *fn, void *arg);

/*
 * Every checksummed data sector the device devid (at devpath) holds, in
 * its SINGLE, DUP and RAID1* chunks: the number of bad ones (each to fn),
 * or a negative errno.
 */
int btrfs_sectors_verify_dev(const struct btrfs_sectors *s, uint64_t devid,
			     const char *devpath, btrfs_bad_sector_fn *fn, void *arg);

#endif
