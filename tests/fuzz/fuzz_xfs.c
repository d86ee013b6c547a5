/*
 * libFuzzer target: the XFS on-disk checks of phase 2 (xfs_ondisk.c,
 * xfs_btree.c, xfs_xref.c, xfs_dirindex.c) on arbitrary blocks, through
 * the same functions the scan calls: od_read_primary() on the primary
 * superblock, then od_check_ag() on each AG -- its superblock, AGF, AGI
 * and AGFL, every btree (bnobt, cntbt, inobt, finobt, rmapbt, refcountbt)
 * with its records, the inode chunks the inobt gives with their cores and
 * forks (bmbt blocks), the directories' and attribute forks' dir2/da
 * blocks, the unlinked lists and the space cross-checks.
 *
 * The "device" is a memfd the blocks are written into (sparse: what the
 * input does not place reads as zeros), so the reads are the scan's own
 * preads and io_uring batches.
 *
 * Input: a flags byte, then records of a 5-byte head -- the 512-byte
 * sector the record starts at (u32, little-endian) and its length in
 * sectors (u8, 0: 1) -- and that many bytes (the last may be short).  The
 * first record must be the primary superblock (sector 0).  Unless bit 0
 * of the flags is set, every block a record holds that carries a v5
 * magic number gets its CRC32c made right, so that the fuzzer's changes
 * get past the CRC checks and reach the parsers behind them.
 *
 * The harness's own limits: at most MAX_AGS AGs are looked at, and the
 * device is at most MAX_DEV bytes (sparse).  Invariants: no crash, no
 * undefined behaviour, no leak, no hang (libFuzzer's -timeout).
 */
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/xfs/xfs_ondisk.h"
#include "scan/context.h"
#include "lib/crc32c.h"
#include "fuzz_dev.h"

#include <xfs/xfs_da_format.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECTOR 512
#define RECORD_HEAD 5
/* Two AGs: the primary's and a secondary's superblock (xref_sb()). */
#define MAX_AGS 2
/* A sparse memfd: big enough for any AG a 16-bit-block filesystem may have. */
#define MAX_DEV (1ULL << 44)
#define FLAG_KEEP_CRC 1

static struct fuzz_dev dev = { -1, "" };

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The CRC at crc_off of the len bytes at p made right. */
static void fix_crc(uint8_t *p, size_t len, size_t crc_off)
{
	uint32_t crc;

	memset(p + crc_off, 0, 4);
	crc = htole32(~crc32c(0xffffffff, p, len));
	memcpy(p + crc_off, &crc, 4);
}

struct geom {
	uint32_t sect, bsize, dirbsize, isize;
};

/* Where the CRC of a block starting with p is, and how long the block is: false if none. */
static bool crc_place(const struct geom *g, const uint8_t *p, size_t *len, size_t *off)
{
	switch (od_get32(p)) {
	case XFS_SB_MAGIC:	*len = g->sect; *off = offsetof(struct xfs_dsb, sb_crc); return true;
	case XFS_AGF_MAGIC:	*len = g->sect; *off = XFS_AGF_CRC_OFF; return true;
	case XFS_AGI_MAGIC:	*len = g->sect; *off = XFS_AGI_CRC_OFF; return true;
	case XFS_AGFL_MAGIC:	*len = g->sect; *off = XFS_AGFL_CRC_OFF; return true;
	case XFS_ABTB_CRC_MAGIC: case XFS_ABTC_CRC_MAGIC: case XFS_IBT_CRC_MAGIC:
	case XFS_FIBT_CRC_MAGIC: case XFS_RMAP_CRC_MAGIC: case XFS_REFC_CRC_MAGIC:
		*len = g->bsize; *off = XFS_BTREE_SBLOCK_CRC_OFF; return true;
	case XFS_BMAP_CRC_MAGIC:
		*len = g->bsize; *off = XFS_BTREE_LBLOCK_CRC_OFF; return true;
	case XFS_DIR3_BLOCK_MAGIC: case XFS_DIR3_DATA_MAGIC:
		*len = g->dirbsize; *off = XFS_DIR3_DATA_CRC_OFF; return true;
	case XFS_DIR3_FREE_MAGIC:
		*len = g->dirbsize; *off = XFS_DIR3_FREE_CRC_OFF; return true;
	}
	if (od_get16(p) == XFS_DINODE_MAGIC) {
		*len = g->isize;
		*off = XFS_DINODE_CRC_OFF;
		return true;
	}
	switch (od_get16(p + 8)) {	/* xfs_da3_blkinfo's magic */
	case XFS_DIR3_LEAF1_MAGIC: case XFS_DIR3_LEAFN_MAGIC:
		*len = g->dirbsize; *off = XFS_DIR3_LEAF_CRC_OFF; return true;
	case XFS_DA3_NODE_MAGIC:
		/*
		 * a directory's (dirbsize) or an attribute fork's (bsize): the
		 * block does not say; the seeds' directory blocks are one fs block
		 * (seed_xfs.py)
		 */
		*len = g->bsize; *off = XFS_DA3_NODE_CRC_OFF; return true;
	case XFS_ATTR3_LEAF_MAGIC:
		*len = g->bsize; *off = XFS_ATTR3_LEAF_CRC_OFF; return true;
	}
	return false;
}

/* Every block of the record's bytes that carries a magic, its CRC right (inodes one by one). */
static void fix_record(const struct geom *g, uint8_t *p, size_t len)
{
	size_t at = 0;

	while (at + SECTOR <= len) {
		size_t blen, off;

		/* the geometry is the input's: a block may be too short for its CRC */
		if (crc_place(g, p + at, &blen, &off) && blen >= off + 4 && at + blen <= len) {
			fix_crc(p + at, blen, off);
			at += blen;
		} else {
			at += SECTOR;
		}
	}
}

static bool pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v >= lo && v <= hi && !(v & (v - 1));
}

/* The primary superblock's geometry, as XFS_IOC_FSGEOMETRY would give it. */
static bool geometry(const struct xfs_dsb *sb, struct xfs_fsop_geom *geo, struct geom *g)
{
	uint32_t rocompat = be32toh(sb->sb_features_ro_compat);

	*g = (struct geom){ be16toh(sb->sb_sectsize), be32toh(sb->sb_blocksize), 0,
			    be16toh(sb->sb_inodesize) };
	/* XFS's own limits: sectors of 512 B-32 KiB, blocks of 512 B-64 KiB */
	if (!pow2_in(g->sect, SECTOR, 32768) || !pow2_in(g->bsize, SECTOR, 65536) ||
	    g->sect > g->bsize || sb->sb_dirblklog > 16 || !sb->sb_agcount || !sb->sb_agblocks)
		return false;
	g->dirbsize = g->bsize << sb->sb_dirblklog;
	*geo = (struct xfs_fsop_geom){
		.blocksize = g->bsize, .sectsize = g->sect, .inodesize = g->isize,
		.agblocks = be32toh(sb->sb_agblocks), .agcount = be32toh(sb->sb_agcount),
		.datablocks = be64toh(sb->sb_dblocks), .dirblocksize = g->dirbsize,
		.flags = XFS_FSOP_GEOM_FLAGS_V5SB,
	};
	if (rocompat & XFS_SB_FEAT_RO_COMPAT_RMAPBT)
		geo->flags |= XFS_FSOP_GEOM_FLAGS_RMAPBT;
	if (rocompat & XFS_SB_FEAT_RO_COMPAT_REFLINK)
		geo->flags |= XFS_FSOP_GEOM_FLAGS_REFLINK;
	if (rocompat & XFS_SB_FEAT_RO_COMPAT_FINOBT)
		geo->flags |= XFS_FSOP_GEOM_FLAGS_FINOBT;
	if (be16toh(sb->sb_versionnum) & XFS_SB_VERSION_BORGBIT)
		geo->flags |= XFS_FSOP_GEOM_FLAGS_DIRV2CI;
	return true;
}

/* The records into the device; false if the first is not a superblock at sector 0. */
static bool place(const uint8_t *data, size_t size, bool fix, struct xfs_fsop_geom *geo)
{
	struct geom g = { SECTOR, SECTOR, SECTOR, SECTOR };
	bool first = true;

	while (size > RECORD_HEAD) {
		uint64_t sector = get_le32(data);
		size_t len = (size_t)(data[4] ? data[4] : 1) * SECTOR;
		uint8_t *rec;

		data += RECORD_HEAD;
		size -= RECORD_HEAD;
		if (len > size)
			len = size;
		rec = malloc(len);
		if (!rec)
			return false;
		memcpy(rec, data, len);
		if (first && (sector || len < sizeof(struct xfs_dsb) ||
			      !geometry((const void *)rec, geo, &g))) {
			free(rec);
			return false;
		}
		first = false;
		if (fix)
			fix_record(&g, rec, len);
		if (pwrite(dev.fd, rec, len, (off_t)(sector * SECTOR)) != (ssize_t)len) {
			free(rec);
			return false;
		}
		free(rec);
		data += len;
		size -= len;
	}
	return !first;
}

/* The look's problems forgotten (FUZZ_VERBOSE=1: said on stderr first, to read a seed). */
static void forget(struct od *od, uint32_t ag)
{
	bool say = getenv("FUZZ_VERBOSE") != NULL;

	for (size_t i = 0; i < od->pn; i++) {
		if (say)
			fprintf(stderr, "AG %u: %s\n", ag, od->pv[i].msg);
		free(od->pv[i].msg);
	}
	od->pn = od->pdropped = 0;
}

/* One look at each AG, as xfs_ondisk_check() takes them. */
static void check(struct scrub_ctx *ctx, struct xfs_state *xs)
{
	struct od od = { .ctx = ctx, .xs = xs, .fd = dev.fd, .sect = xs->geo.sectsize,
			 .bsize = xs->geo.blocksize };

	od.ibuf_len = (size_t)XFS_INODES_PER_CHUNK * xs->geo.inodesize + 2 * od.sect;
	if (posix_memalign((void **)&od.buf, 4096, od.bsize) ||
	    posix_memalign((void **)&od.ibuf, 4096, od.ibuf_len))
		goto out;
	if (od_read_primary(&od) == 0)
		for (uint32_t ag = 0; ag < xs->geo.agcount && ag < MAX_AGS; ag++) {
			od_check_ag(&od, ag);
			forget(&od, ag);
		}
out:
	free(od.pv);
	free(od.buf);
	free(od.ibuf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scrub_ctx *ctx;
	struct xfs_state *xs;

	if (size < 1)
		return 0;
	if (dev.fd < 0)
		fuzz_dev_open(&dev, "fuzz_xfs");
	fuzz_dev_reset(&dev, MAX_DEV);
	ctx = calloc(1, sizeof(*ctx));
	xs = calloc(1, sizeof(*xs));
	if (ctx && xs && place(data + 1, size - 1, !(data[0] & FLAG_KEEP_CRC), &xs->geo) &&
	    (xs->ags = calloc(xs->geo.agcount < MAX_AGS ? xs->geo.agcount : MAX_AGS,
			      sizeof(*xs->ags)))) {
		ctx->backend = xs;
		check(ctx, xs);
	}
	if (xs)
		free(xs->ags);
	free(xs);
	free(ctx);
	return 0;
}
