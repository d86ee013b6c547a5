/*
 * xfs_ondisk: the AG headers and btree roots read from the block device,
 * for kernels without online scrub (and as a second opinion with it).
 *
 * After syncfs(), every AG's superblock, AGF, AGI and AGFL and the root
 * block of each of its btrees (bnobt, cntbt, rmapbt, refcountbt from the
 * AGF, inobt and finobt from the AGI) are read with O_DIRECT (the page cache
 * of the block device is not the filesystem's) and checked for what a
 * block says about itself: magic number, CRC32c, the filesystem's metadata
 * UUID, its AG number, its own disk address, version and length, and that
 * the roots and levels the headers give are within the AG and what the
 * root blocks say.  Only v5 (crc) filesystems.
 *
 * The live rule: a mounted XFS writes metadata back lazily (the log holds
 * what the disk does not yet have), so an AG with a problem is read again
 * after another syncfs and a pause; only a problem that is the same the
 * second time is an error, anything else is "changed while being checked".
 * What this cannot tell: on-disk headers that are stale but self-consistent
 * (they are checked against each other, not against the kernel's memory).
 * Whole btrees, inode clusters and record order are not walked here.
 */
#include "backends/xfs.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xfs/xfs_format.h>

#include "checks.h"
#include "context.h"
#include "report.h"
#include "strbuf.h"

/* O_DIRECT wants buffers aligned to the device's logical block size. */
#define OD_ALIGN 4096
/* Deeper than any btree of an AG of at most 2^31 blocks can grow. */
#define OD_MAX_LEVELS 9
/* Between the two looks: enough for writeback of what the log pushed. */
#define OD_PAUSE_NS 200000000L

struct od {
	struct scrub_ctx *ctx;
	struct xfs_state *xs;
	int fd;
	uint32_t sect, bsize;
	uint8_t *buf;
	uint8_t uuid[16];		/* sb_uuid of the primary superblock */
	uint8_t meta_uuid[16];		/* what the metadata blocks carry */
};

static uint32_t crc32c_table[256];

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78 : c >> 1;	/* Castagnoli, reflected */
		crc32c_table[i] = c;
	}
}

static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/* XFS's checksum: CRC32c of the block with its CRC field taken as zero. */
static bool crc_ok(const uint8_t *buf, size_t len, size_t off)
{
	static const uint8_t zero[4];
	uint32_t crc = crc32c(0xffffffff, buf, off);
	uint32_t stored;

	crc = crc32c(crc, zero, 4);
	crc = crc32c(crc, buf + off + 4, len - off - 4);
	memcpy(&stored, buf + off, 4);
	return le32toh(stored) == ~crc;
}

static int od_read(struct od *od, uint64_t off, size_t len)
{
	ssize_t n = pread(od->fd, od->buf, len, (off_t)off);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static void problem(struct strbuf *out, const char *what)
{
	if (out->len)
		strbuf_addstr(out, "; ");
	strbuf_addstr(out, what);
}

/* One btree root block: self-describing header and level. */
static void check_root(struct od *od, uint32_t agno, uint64_t ag_base, const char *name,
		       uint32_t magic, uint32_t agbno, uint32_t levels, uint32_t length,
		       struct strbuf *out)
{
	struct strbuf p = STRBUF_INIT;
	const struct xfs_btree_block *b = (const void *)od->buf;
	uint64_t off = ag_base + (uint64_t)agbno * od->bsize;
	int ret;

	if (!agbno || agbno >= length || !levels || levels > OD_MAX_LEVELS) {
		strbuf_addf(&p, "%s root %u (%u levels) is outside the AG", name, agbno, levels);
		problem(out, p.buf);
		strbuf_release(&p);
		return;
	}
	ret = od_read(od, off, od->bsize);
	if (ret < 0)
		strbuf_addf(&p, "%s root block %u cannot be read: %s", name, agbno, strerror(-ret));
	else if (be32toh(b->bb_magic) != magic)
		strbuf_addf(&p, "%s root block %u has magic 0x%08x", name, agbno,
			    be32toh(b->bb_magic));
	else if (!crc_ok(od->buf, od->bsize, XFS_BTREE_SBLOCK_CRC_OFF))
		strbuf_addf(&p, "%s root block %u fails its CRC", name, agbno);
	else if (be64toh(b->bb_u.s.bb_blkno) != off / 512)
		strbuf_addf(&p, "%s root block %u says it is at disk address %llu", name, agbno,
			    (unsigned long long)be64toh(b->bb_u.s.bb_blkno));
	else if (be32toh(b->bb_u.s.bb_owner) != agno)
		strbuf_addf(&p, "%s root block %u belongs to AG %u", name, agbno,
			    be32toh(b->bb_u.s.bb_owner));
	else if (memcmp(&b->bb_u.s.bb_uuid, od->meta_uuid, 16))
		strbuf_addf(&p, "%s root block %u has another filesystem's UUID", name, agbno);
	else if (be16toh(b->bb_level) != levels - 1)
		strbuf_addf(&p, "%s root block %u is at level %u, the header says %u levels",
			    name, agbno, be16toh(b->bb_level), levels);
	if (p.len)
		problem(out, p.buf);
	strbuf_release(&p);
}

/* A sector-sized AG header: read, magic, CRC, UUID, AG number. */
static bool check_header(struct od *od, uint64_t off, const char *name, uint32_t magic,
			 size_t crc_off, const void *uuid, const void *seqno_be, uint32_t agno,
			 struct strbuf *out)
{
	struct strbuf p = STRBUF_INIT;
	uint32_t m, seq;
	int ret = od_read(od, off, od->sect);

	if (ret < 0) {
		strbuf_addf(&p, "%s cannot be read: %s", name, strerror(-ret));
	} else {
		memcpy(&m, od->buf, 4);
		memcpy(&seq, seqno_be, 4);
		if (be32toh(m) != magic)
			strbuf_addf(&p, "%s has magic 0x%08x", name, be32toh(m));
		else if (!crc_ok(od->buf, od->sect, crc_off))
			strbuf_addf(&p, "%s fails its CRC", name);
		else if (memcmp(uuid, od->meta_uuid, 16))
			strbuf_addf(&p, "%s has another filesystem's UUID", name);
		else if (be32toh(seq) != agno)
			strbuf_addf(&p, "%s says it is AG %u's", name, be32toh(seq));
	}
	if (p.len)
		problem(out, p.buf);
	strbuf_release(&p);
	return !p.len;
}

static void check_ag(struct od *od, uint32_t agno, struct strbuf *out)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;
	uint64_t base = (uint64_t)agno * g->agblocks * od->bsize;
	uint32_t length = od->xs->ags[agno].ag_length;
	struct strbuf p = STRBUF_INIT;
	int ret;

	if (!length)	/* no AG geometry: all but the last AG are full */
		length = agno + 1 < g->agcount ? g->agblocks :
			 (uint32_t)(g->datablocks - (uint64_t)agno * g->agblocks);

	ret = od_read(od, base, od->sect);
	if (ret < 0) {
		strbuf_addf(&p, "superblock cannot be read: %s", strerror(-ret));
	} else {
		const struct xfs_dsb *sb = (const void *)od->buf;

		if (be32toh(sb->sb_magicnum) != XFS_SB_MAGIC)
			strbuf_addf(&p, "superblock has magic 0x%08x", be32toh(sb->sb_magicnum));
		else if (!crc_ok(od->buf, od->sect, offsetof(struct xfs_dsb, sb_crc)))
			strbuf_addf(&p, "superblock fails its CRC");
		else if (memcmp(&sb->sb_uuid, od->uuid, 16))
			strbuf_addf(&p, "superblock has another filesystem's UUID");
		else if (be32toh(sb->sb_blocksize) != od->bsize ||
			 be32toh(sb->sb_agblocks) != g->agblocks ||
			 be32toh(sb->sb_agcount) != g->agcount)
			strbuf_addf(&p, "superblock geometry (block size %u, %u AGs of %u blocks) "
				    "differs from the primary's", be32toh(sb->sb_blocksize),
				    be32toh(sb->sb_agcount), be32toh(sb->sb_agblocks));
	}
	if (p.len)
		problem(out, p.buf);
	strbuf_reset(&p);

	const struct xfs_agf *agf = (const void *)od->buf;
	if (check_header(od, base + od->sect, "AGF", XFS_AGF_MAGIC, XFS_AGF_CRC_OFF,
			 &agf->agf_uuid, &agf->agf_seqno, agno, out)) {
		uint32_t roots[XFS_BTNUM_AGF], levels[XFS_BTNUM_AGF];
		uint32_t refc_root = be32toh(agf->agf_refcount_root);
		uint32_t refc_level = be32toh(agf->agf_refcount_level);

		for (int i = 0; i < XFS_BTNUM_AGF; i++) {
			roots[i] = be32toh(agf->agf_roots[i]);
			levels[i] = be32toh(agf->agf_levels[i]);
		}
		if (be32toh(agf->agf_versionnum) != XFS_AGF_VERSION ||
		    be32toh(agf->agf_length) != length ||
		    be32toh(agf->agf_freeblks) > length)
			problem(out, "AGF version, length or free block count is impossible");
		check_root(od, agno, base, "bnobt", XFS_ABTB_CRC_MAGIC, roots[XFS_BTNUM_BNOi],
			   levels[XFS_BTNUM_BNOi], length, out);
		check_root(od, agno, base, "cntbt", XFS_ABTC_CRC_MAGIC, roots[XFS_BTNUM_CNTi],
			   levels[XFS_BTNUM_CNTi], length, out);
		if (g->flags & XFS_FSOP_GEOM_FLAGS_RMAPBT)
			check_root(od, agno, base, "rmapbt", XFS_RMAP_CRC_MAGIC,
				   roots[XFS_BTNUM_RMAPi], levels[XFS_BTNUM_RMAPi], length, out);
		if (g->flags & XFS_FSOP_GEOM_FLAGS_REFLINK)
			check_root(od, agno, base, "refcountbt", XFS_REFC_CRC_MAGIC, refc_root,
				   refc_level, length, out);
	}

	const struct xfs_agi *agi = (const void *)od->buf;
	if (check_header(od, base + 2 * od->sect, "AGI", XFS_AGI_MAGIC, XFS_AGI_CRC_OFF,
			 &agi->agi_uuid, &agi->agi_seqno, agno, out)) {
		uint32_t root = be32toh(agi->agi_root), level = be32toh(agi->agi_level);
		uint32_t froot = be32toh(agi->agi_free_root);
		uint32_t flevel = be32toh(agi->agi_free_level);

		if (be32toh(agi->agi_versionnum) != XFS_AGI_VERSION ||
		    be32toh(agi->agi_length) != length ||
		    be32toh(agi->agi_freecount) > be32toh(agi->agi_count))
			problem(out, "AGI version, length or free inode count is impossible");
		check_root(od, agno, base, "inobt", XFS_IBT_CRC_MAGIC, root, level, length, out);
		if (g->flags & XFS_FSOP_GEOM_FLAGS_FINOBT)
			check_root(od, agno, base, "finobt", XFS_FIBT_CRC_MAGIC, froot, flevel,
				   length, out);
	}

	const struct xfs_agfl *agfl = (const void *)od->buf;
	check_header(od, base + 3 * od->sect, "AGFL", XFS_AGFL_MAGIC, XFS_AGFL_CRC_OFF,
		     &agfl->agfl_uuid, &agfl->agfl_seqno, agno, out);
	strbuf_release(&p);
}

/* The primary superblock gives the UUIDs every metadata block must carry. */
static int read_primary(struct od *od)
{
	const struct xfs_dsb *sb = (const void *)od->buf;
	int ret = od_read(od, 0, od->sect);

	if (ret < 0)
		return ret;
	if (be32toh(sb->sb_magicnum) != XFS_SB_MAGIC)
		return -EINVAL;
	memcpy(od->uuid, &sb->sb_uuid, 16);
	if (be32toh(sb->sb_features_incompat) & XFS_SB_FEAT_INCOMPAT_META_UUID)
		memcpy(od->meta_uuid, &sb->sb_meta_uuid, 16);
	else
		memcpy(od->meta_uuid, &sb->sb_uuid, 16);
	return 0;
}

void xfs_ondisk_check(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct od od = {
		.ctx = ctx, .xs = xs, .sect = xs->geo.sectsize, .bsize = xs->geo.blocksize,
	};
	unsigned long long ags = 0;
	int ret;

	if (!(xs->geo.flags & XFS_FSOP_GEOM_FLAGS_V5SB) || !ctx->dev_size) {
		report_verbose(ctx, "Phase 2: %s: AG headers are not read from the disk",
			       ctx->dev_size ? "not a v5 (crc) filesystem" :
			       "the mount source is not the filesystem's block device");
		return;
	}
	od.fd = open(ctx->source, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (od.fd < 0) {
		report_verbose(ctx, "Phase 2: cannot open %s (%s): AG headers are not read from "
			       "the disk", ctx->source, strerror(errno));
		return;
	}
	if (posix_memalign((void **)&od.buf, OD_ALIGN, od.bsize > od.sect ? od.bsize : od.sect)) {
		close(od.fd);
		return;
	}
	crc32c_init();
	syncfs(ctx->mnt_fd);	/* the log forced: what is committed is on the disk */
	ret = read_primary(&od);
	if (ret < 0) {
		str_error(ctx, CHECK_XFS_ONDISK, NULL, NULL, 0,
			  "the primary superblock cannot be read from %s: %s", ctx->source,
			  strerror(-ret));
		goto out;
	}
	for (uint32_t ag = 0; ag < xs->geo.agcount && !scrub_should_stop(ctx); ag++, ags++) {
		struct strbuf first = STRBUF_INIT, again = STRBUF_INIT;
		struct timespec pause = { 0, OD_PAUSE_NS };

		check_ag(&od, ag, &first);
		if (first.len) {
			syncfs(ctx->mnt_fd);
			nanosleep(&pause, NULL);
			check_ag(&od, ag, &again);
			if (!strcmp(first.buf, again.buf))
				str_error(ctx, CHECK_XFS_ONDISK, NULL, NULL, 0, "AG %u on disk: %s",
					  ag, again.buf);
			else
				str_changed(ctx, CHECK_XFS_ONDISK, NULL, NULL, 0,
					    "AG %u on disk: %s", ag, first.buf);
		}
		strbuf_release(&first);
		strbuf_release(&again);
	}
	report_verbose(ctx, "Phase 2: %llu AGs' headers and btree roots read from %s", ags,
		       ctx->source);
out:
	free(od.buf);
	close(od.fd);
}
