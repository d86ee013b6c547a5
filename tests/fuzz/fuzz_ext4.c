/*
 * libFuzzer target: the ext4 backend's checks of what it reads from the
 * device, on arbitrary images, through the same functions the scan calls:
 * phase 2's ext4_check_superblocks() and ext4_check_groups() (the
 * primary superblock and its backups, group descriptors, bitmaps and free
 * counts), then phase 3's inode-table scan, ext4_iscan_begin(),
 * ext4_iscan_tables() (every inode in table order), ext4_iscan_after() --
 * inode checksums and cores (ext4_xref.c), in-inode attributes, extent
 * tree nodes (header, index and leaf entries) and ext2/ext3 block maps
 * (indirect blocks), directory blocks and htree roots and nodes
 * (ext4_htree.c), the orphan list, attribute blocks and their reference
 * counts -- and ext4_journal_check() (the journal superblock); the
 * suspects they queue are freed by the backend's cleanup, never confirmed
 * (confirming re-reads after a pause).
 *
 * The device is a memfd the image is written into (sparse: what the input
 * does not place reads as zeros), opened by libext2fs as the scan opens
 * the device (ext2fs_open2() with the scan's flags, through /proc/self/fd)
 * and read by the backend's own O_DIRECT reads.
 *
 * Input: a flags byte (bit 0: skip phase 2, bit 1: skip phase 3), then
 * records of a 5-byte head -- the KiB the record starts at (u32,
 * little-endian) and its length in KiB (u8, 0: 1) -- and that many bytes
 * (the last may be short).  The superblock is at KiB 1.  Checksums are not
 * made right here: the seeds (seed_ext4.py) are mostly of a filesystem
 * without metadata_csum, so that what the fuzzer changes reaches the
 * parsers; one with metadata_csum keeps the checksum paths covered.
 *
 * The harness's own limits: at most MAX_GROUPS groups (a filesystem with
 * more is not looked at) and the first MAX_INODES inodes of the tables.
 * Invariants: no crash, no undefined behaviour, no leak, no hang.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/ext4/ext4.h"
#include "scan/context.h"
#include "fuzz_dev.h"
#include "lib/strbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KIB 1024
#define RECORD_HEAD 5
/* A sparse memfd: as big as any filesystem of 2^28 blocks of 4 KiB. */
#define MAX_DEV (1ULL << 40)
#define MAX_GROUPS 64
#define MAX_INODES 4096
#define FLAG_NO_PHASE2 1
#define FLAG_NO_PHASE3 2

static struct fuzz_dev dev = { -1, "" };
static FILE *devnull;

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void setup(void)
{
	add_error_table(&et_ext2_error_table);
	fuzz_dev_open(&dev, "fuzz_ext4");
	if (!(devnull = fopen("/dev/null", "w")))
		abort();
}

/* The records into the device. */
static void place(const uint8_t *data, size_t size)
{
	fuzz_dev_reset(&dev, MAX_DEV);
	while (size > RECORD_HEAD) {
		uint64_t at = (uint64_t)get_le32(data) * KIB;
		size_t len = (size_t)(data[4] ? data[4] : 1) * KIB;

		data += RECORD_HEAD;
		size -= RECORD_HEAD;
		if (len > size)
			len = size;
		if (pwrite(dev.fd, data, len, (off_t)at) < 0)
			abort();
		data += len;
		size -= len;
	}
}

/* The backend's state as ext4_scan_fs() leaves it; false if libext2fs refuses the image. */
static bool open_fs(struct scrub_ctx *ctx, struct ext4_state *st)
{
	st->direct_fd = dup(dev.fd);
	st->cached_fd = st->jdev_fd = -1;
	ctx->backend = st;
	if (ext2fs_open2(dev.path, "cache=off", EXT2_FLAG_64BITS | EXT2_FLAG_DIRECT_IO |
			 EXT2_FLAG_IGNORE_CSUM_ERRORS | EXT2_FLAG_SKIP_MMP, 0, 0,
			 unix_io_manager, &st->fs)) {
		st->fs = NULL;
		return false;
	}
	st->nr_seen_groups = st->fs->group_desc_count;
	st->seen = xcalloc(st->nr_seen_groups, sizeof(*st->seen));
	/* An external journal is not looked for (ext4_journal_open() asks blkid). */
	st->journal_known = ext2fs_has_feature_journal(st->fs->super) &&
			    !ext2fs_has_feature_journal_dev(st->fs->super) &&
			    st->fs->super->s_journal_inum != 0;
	return st->fs->group_desc_count <= MAX_GROUPS;
}

/* Phase 3's inode scan, as ext4_scan_inodes() runs it, up to MAX_INODES. */
static void scan_inodes(struct scrub_ctx *ctx)
{
	struct ext4_iscan *is = ext4_iscan_begin(ctx);

	if (!is)
		return;
	ext4_iscan_tables(ctx, is, MAX_INODES);
	ext4_iscan_after(ctx, is);
	ext4_journal_check(ctx);
	ext4_iscan_free(ctx, is);
}

/* FUZZ_VERBOSE=1: the suspects on stderr, to read a seed. */
static void say(const struct ext4_state *st)
{
	if (!getenv("FUZZ_VERBOSE"))
		return;
	for (size_t i = 0; i < st->nr_suspects; i++)
		fprintf(stderr, "%s: inode %llu: %s\n", st->suspects[i].check,
			(unsigned long long)st->suspects[i].ino, st->suspects[i].msg);
	fprintf(stderr, "%zu suspects; %llu inodes, %llu tree blocks, %llu directory blocks\n",
		st->nr_suspects, st->inodes_scanned, st->extent_blocks, st->dir_blocks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scrub_ctx *ctx;
	struct ext4_state *st;

	if (size < 1)
		return 0;
	if (dev.fd < 0)
		setup();
	place(data + 1, size - 1);
	ctx = xcalloc(1, sizeof(*ctx));
	st = xcalloc(1, sizeof(*st));
	ctx->report.text_out = devnull;
	if (open_fs(ctx, st)) {
		if (!(data[0] & FLAG_NO_PHASE2)) {
			ext4_check_superblocks(ctx);
			ext4_check_groups(ctx);
		}
		if (!(data[0] & FLAG_NO_PHASE3))
			scan_inodes(ctx);
		say(st);
	}
	ext4_ops.cleanup(ctx);
	free(ctx);
	return 0;
}
