/*
 * extents: FIEMAP/FIBMAP extent map checks; see extents.h.
 */
#include "tree/extents.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "lib/stx.h"
#include "tree/walk.h"

/*
 * 512 extents per FIEMAP call (28 KiB): one call maps almost every file,
 * and a 100 000-extent file takes 200 calls.
 */
#define FIEMAP_BATCH 512

/*
 * FIBMAP maps one block per ioctl: stop after 2^20 blocks (4 GiB at 4 KiB)
 * per file so that a filesystem without FIEMAP is still scanned in time.
 */
#define FIBMAP_MAX_BLOCKS (1U << 20)

/* Extents whose physical offset means nothing on the device. */
#define EXTENT_PHYS_UNKNOWN (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC)

/*
 * What the walk learned about the filesystem's mapping ioctls, once for
 * the run (fscrub scans one filesystem per process), by any walk thread:
 * FIEMAP missing (said once), FIBMAP refused, FIEMAP_FLAG_XATTR refused
 * (not tried again).
 */
static atomic_bool fiemap_missing_said, fibmap_broken, fiemap_xattr_broken;

/*
 * Is extent x past the end of the device?  An encoded extent's length is
 * what it holds uncompressed (erofs: a 1 MiB cluster in 4 KiB of a 240 KiB
 * image): only its start must be on the device.
 */
static bool past_device(const struct extent_cursor *cur, const struct fiemap_extent *x)
{
	if (!cur->dev_size || (x->fe_flags & EXTENT_PHYS_UNKNOWN))
		return false;
	if (cur->encoded || (x->fe_flags & FIEMAP_EXTENT_ENCODED))
		return x->fe_physical >= cur->dev_size;
	return x->fe_physical >= cur->dev_size || x->fe_length > cur->dev_size - x->fe_physical;
}

void extent_cursor_init(struct extent_cursor *cur, uint64_t dev_size)
{
	memset(cur, 0, sizeof(*cur));
	cur->dev_size = dev_size;
}

static enum extent_problem flag_problem(struct extent_cursor *cur,
					const struct fiemap_extent *x,
					enum extent_problem p)
{
	cur->bad_logical = x->fe_logical;
	cur->bad_physical = x->fe_physical;
	cur->bad_length = x->fe_length;
	return p;
}

enum extent_problem extent_validate(struct extent_cursor *cur,
				    const struct fiemap_extent *ext, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct fiemap_extent *x = &ext[i];

		if (cur->max_extents && cur->nr_extents >= cur->max_extents)
			return flag_problem(cur, x, EXTENT_TOO_MANY);
		cur->nr_extents++;
		if (cur->saw_last)
			return flag_problem(cur, x, EXTENT_LAST_FLAG);
		if (x->fe_length == 0)
			return flag_problem(cur, x, EXTENT_ZERO_LENGTH);
		if (cur->have_prev && x->fe_logical < cur->next_logical)
			return flag_problem(cur, x, EXTENT_OVERLAP);
		if (past_device(cur, x))
			return flag_problem(cur, x, EXTENT_PAST_DEVICE);
		cur->have_prev = true;
		cur->mapped_bytes += x->fe_length;
		cur->next_logical = x->fe_logical + x->fe_length;
		if (x->fe_flags & FIEMAP_EXTENT_LAST)
			cur->saw_last = true;
	}
	return EXTENT_OK;
}

void extent_buf_init(struct extent_buf *eb)
{
	eb->max_extents = FIEMAP_BATCH;
	eb->fm = xcalloc(1, sizeof(struct fiemap) +
			 FIEMAP_BATCH * sizeof(struct fiemap_extent));
	eb->whole = xcalloc(FIEMAP_BATCH, sizeof(*eb->whole));
}

void extent_buf_release(struct extent_buf *eb)
{
	free(eb->fm);
	eb->fm = NULL;
	free(eb->whole);
	eb->whole = NULL;
}

/* Keep the data fork's map if the last FIEMAP call returned all of it. */
static void keep_whole(struct extent_buf *eb, const struct extent_cursor *cur)
{
	const struct fiemap *fm = eb->fm;

	if (cur->nr_extents != fm->fm_mapped_extents || cur->nr_extents > eb->max_extents)
		return;
	memcpy(eb->whole, fm->fm_extents, fm->fm_mapped_extents * sizeof(*eb->whole));
	eb->nr_whole = fm->fm_mapped_extents;
	eb->whole_ok = true;
}

/*
 * Map one fork of fd from offset 0 to the end and validate it.  Returns 0
 * with *problem set (EXTENT_OK if none), or a negative errno from FIEMAP.
 */
static int map_fork(struct extent_buf *eb, int fd, uint32_t flags,
		    struct extent_cursor *cur, enum extent_problem *problem,
		    const struct walk_entry *collect_for, bool recent)
{
	uint64_t start = 0;

	*problem = EXTENT_OK;
	for (;;) {
		struct fiemap *fm = eb->fm;

		memset(fm, 0, sizeof(*fm));
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_flags = flags;
		fm->fm_extent_count = eb->max_extents;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0)
			return -errno;
		if (fm->fm_mapped_extents == 0)
			return 0;
		*problem = extent_validate(cur, fm->fm_extents, fm->fm_mapped_extents);
		if (*problem != EXTENT_OK)
			return 0;
		if (collect_for && eb->collect &&
		    !crosslink_collect(eb->collect, ino_key_of(&collect_for->stx), recent,
				       fm->fm_extents, fm->fm_mapped_extents))
			eb->unlocated = true;
		const struct fiemap_extent *last = &fm->fm_extents[fm->fm_mapped_extents - 1];
		if ((last->fe_flags & FIEMAP_EXTENT_LAST) ||
		    fm->fm_mapped_extents < eb->max_extents)
			return 0;
		start = last->fe_logical + last->fe_length;
	}
}

static bool fiemap_unsupported(int err)
{
	return err == EOPNOTSUPP || err == ENOTTY || err == EBADR || err == EINVAL;
}

static void report_problem(struct walk_thread *t, const struct walk_dir *d,
			   const struct walk_entry *e, const char *fork,
			   enum extent_problem p, const struct extent_cursor *c)
{
	struct scrub_ctx *ctx = t->ctx;
	unsigned long long lo = c->bad_logical, ph = c->bad_physical, len = c->bad_length;
	uint64_t ino = e->stx.stx_ino;

	switch (p) {
	case EXTENT_ZERO_LENGTH:
		str_error_range(ctx, CHECK_EXTENT_ZERO_LENGTH, d->node, e->name, ino, lo, len,
			  "%s: zero-length extent at file offset %llu (physical %llu)",
			  fork, lo, ph);
		break;
	case EXTENT_OVERLAP:
		str_error_range(ctx, CHECK_EXTENT_OVERLAP, d->node, e->name, ino, lo, len,
			  "%s: extent at file offset %llu (%llu bytes) overlaps or precedes "
			  "the previous extent", fork, lo, len);
		break;
	case EXTENT_PAST_DEVICE:
		str_error_range(ctx, CHECK_EXTENT_PAST_DEVICE, d->node, e->name, ino, lo, len,
			  "%s: extent at file offset %llu maps device bytes %llu-%llu, past "
			  "the end of the device (%llu bytes)", fork, lo, ph, ph + len - 1,
			  (unsigned long long)ctx->dev_size);
		break;
	case EXTENT_LAST_FLAG:
		str_error_range(ctx, CHECK_EXTENT_LAST_FLAG, d->node, e->name, ino, lo, len,
			  "%s: extent at file offset %llu follows an extent flagged as the "
			  "last one", fork, lo);
		break;
	case EXTENT_TOO_MANY:
		str_error_range(ctx, CHECK_EXTENT_COUNT, d->node, e->name, ino, lo, len,
			  "%s: more than %llu extents, which the file's %llu blocks and the "
			  "filesystem's allow: the map is damaged, and not read past file offset "
			  "%llu", fork, c->max_extents,
			  (unsigned long long)e->stx.stx_blocks, lo);
		break;
	case EXTENT_OK:
		break;
	}
}

/* Has the file changed since the walk's statx?  (Then a finding is a race.) */
static bool file_changed(int fd, const struct walk_entry *e)
{
	struct statx now;

	return stx_get(fd, NULL, &now) < 0 || !stx_unchanged(&now, &e->stx);
}

/* Check one fork; returns false if FIEMAP is not supported for that fork. */
static bool check_fork(struct walk_thread *t, struct extent_buf *eb,
		       const struct walk_dir *d, const struct walk_entry *e, int fd,
		       uint32_t flags, const char *fork)
{
	struct scrub_ctx *ctx = t->ctx;
	/* A realtime file's data extents are on the realtime device: not ours to place. */
	bool elsewhere = !flags && eb->elsewhere;
	uint64_t dev_size = elsewhere ? 0 : ctx->dev_size;
	struct extent_cursor cur;
	enum extent_problem p;
	int ret;

	extent_cursor_init(&cur, dev_size);
	cur.encoded = eb->compressed;
	cur.max_extents = stx_max_extents(&e->stx, &ctx->svfs);
	/* A compressed file's bytes have no known place: the file is read as a file. */
	ret = map_fork(eb, fd, flags, &cur, &p, flags || elsewhere || eb->compressed ? NULL : e,
		       stx_changed_during_scan(ctx, &e->stx));
	if (ret < 0 && fiemap_unsupported(-ret))
		return false;
	t->stats.extents += cur.nr_extents;
	if (ret == 0 && p == EXTENT_OK) {
		if (!flags) {
			eb->collected = !eb->unlocated && !elsewhere && !eb->compressed;
			eb->data_bytes = cur.mapped_bytes;
			keep_whole(eb, &cur);
		}
		return true;
	}

	/* Look again from scratch before saying anything. */
	extent_cursor_init(&cur, dev_size);
	cur.encoded = eb->compressed;
	cur.max_extents = stx_max_extents(&e->stx, &ctx->svfs);
	ret = map_fork(eb, fd, flags, &cur, &p, NULL, false);
	if (ret == 0 && p == EXTENT_OK)
		return true;
	if (file_changed(fd, e)) {
		str_changed(ctx, ret < 0 ? CHECK_EXTENT_UNREADABLE : CHECK_EXTENT_OVERLAP,
			    d->node, e->name, e->stx.stx_ino, "%s map", fork);
	} else if (ret < 0 && errno_is_corruption(-ret)) {
		str_error(ctx, CHECK_EXTENT_UNREADABLE, d->node, e->name, e->stx.stx_ino,
			  "cannot map the %s: %s", fork, strerror(-ret));
	} else if (ret < 0) {
		report_operational(ctx, d->node, e->name, -ret, "FIEMAP of the %s", fork);
	} else {
		report_problem(t, d, e, fork, p, &cur);
	}
	return true;
}

/* FIBMAP: one block at a time, holes read as 0; check against the device. */
static void check_fibmap(struct walk_thread *t, const struct walk_dir *d,
			 const struct walk_entry *e, int fd)
{
	struct scrub_ctx *ctx = t->ctx;
	int bsz = 0;

	if (atomic_load(&fibmap_broken))
		return;
	if (ioctl(fd, FIGETBSZ, &bsz) < 0 || bsz <= 0)
		goto broken;
	uint64_t nblocks = (e->stx.stx_size + (uint64_t)bsz - 1) / (uint64_t)bsz;
	if (nblocks > FIBMAP_MAX_BLOCKS)
		nblocks = FIBMAP_MAX_BLOCKS;
	for (uint64_t i = 0; i < nblocks && !scrub_should_stop(ctx); i++) {
		int blk = (int)i;

		if (ioctl(fd, FIBMAP, &blk) < 0)
			goto broken;
		t->stats.extents += blk != 0;
		if (blk && ctx->dev_size &&
		    ((uint64_t)(unsigned)blk + 1) * (uint64_t)bsz > ctx->dev_size &&
		    !file_changed(fd, e)) {
			str_error(ctx, CHECK_EXTENT_PAST_DEVICE, d->node, e->name,
				  e->stx.stx_ino,
				  "block at file offset %llu maps device block %u, past the end "
				  "of the device (%llu bytes)",
				  (unsigned long long)i * (unsigned)bsz, (unsigned)blk,
				  (unsigned long long)ctx->dev_size);
			return;
		}
	}
	return;
broken:
	/* No bmap, or no CAP_SYS_RAWIO: say so once and stop trying. */
	if (!atomic_exchange(&fibmap_broken, true))
		str_info(ctx, CHECK_EXTENT_UNSUPPORTED, NULL, NULL, 0,
			 "FIBMAP fails too (%s): those extent maps are not checked",
			 strerror(errno));
}

/*
 * Can the attribute fork own blocks?  st_blocks counts every block of the
 * inode -- data extents, attribute blocks, extent-tree blocks (and on XFS
 * delayed allocations, which FIEMAP lists too) -- so when the data fork
 * alone maps that much there is nothing left for attributes.  Attributes
 * kept inside the inode own no block.  This spares most files a second
 * FIEMAP: a tenth of the walk's syscalls on a tree of small files.
 */
static bool attr_fork_may_own_blocks(const struct extent_buf *eb,
				     const struct walk_entry *e)
{
	return eb->data_bytes < e->stx.stx_blocks * 512ULL;
}

bool extents_check_bulk(struct walk_thread *t, struct extent_buf *eb,
			const struct walk_entry *e)
{
	struct scrub_ctx *ctx = t->ctx;
	struct extent_cursor cur;
	int n;

	eb->whole_ok = false;
	if (!e->bulk || !ctx->ops->bulk_extents || ctx->no_fiemap ||
	    stx_changed_during_scan(ctx, &e->stx))
		return false;
	n = ctx->ops->bulk_extents(ctx, t->index, e->bulk, eb->fm->fm_extents, eb->max_extents);
	if (n <= 0)
		return false;
	extent_cursor_init(&cur, ctx->dev_size);
	if (extent_validate(&cur, eb->fm->fm_extents, (size_t)n) != EXTENT_OK)
		return false;	/* a suspect: FIEMAP on the open file says */
	eb->fm->fm_mapped_extents = (uint32_t)n;
	eb->collected = false;
	eb->unlocated = false;
	/* A backend that keeps its maps adds them to the list after the walk. */
	if (eb->collect && ctx->ops->bulk_extents_keep &&
	    ino_key_of(&e->stx).dev == eb->collect->dev) {
		ctx->ops->bulk_extents_keep(ctx, e->bulk);
		eb->collected = true;
	}
	else if (eb->collect && !crosslink_collect(eb->collect, ino_key_of(&e->stx), false,
						   eb->fm->fm_extents, (size_t)n))
		crosslink_unmapped(eb->collect, ino_key_of(&e->stx));
	else
		eb->collected = eb->collect != NULL;
	eb->data_bytes = cur.mapped_bytes;
	keep_whole(eb, &cur);
	t->stats.extents += cur.nr_extents;
	t->stats.bulk_maps++;
	return true;
}

/* An XFS realtime file (FS_XFLAG_REALTIME): its data is on the realtime device. */
void extents_check_file(struct walk_thread *t, struct extent_buf *eb,
			const struct walk_dir *d, const struct walk_entry *e, int fd)
{
	struct scrub_ctx *ctx = t->ctx;

	/*
	 * FIEMAP support is per file, not per filesystem: on overlayfs each
	 * file is served by one of the layers.  A refused FIEMAP costs one
	 * ioctl, so it is tried on every file; the fallback is said once.
	 */
	eb->collected = false;
	eb->unlocated = false;
	eb->whole_ok = false;
	eb->elsewhere = ctx->ops->data_elsewhere && ctx->ops->data_elsewhere(ctx, fd);
	eb->compressed = (e->stx.stx_attributes_mask & STATX_ATTR_COMPRESSED) &&
			 (e->stx.stx_attributes & STATX_ATTR_COMPRESSED);
	eb->data_bytes = 0;
	if (!ctx->no_fiemap) {
		bool mapped = check_fork(t, eb, d, e, fd, 0, "data fork");

		/* A file the device reader cannot know all of: read it by itself. */
		if (eb->collect && !eb->collected)
			crosslink_unmapped(eb->collect, ino_key_of(&e->stx));
		if (mapped) {
			if (attr_fork_may_own_blocks(eb, e) &&
			    !atomic_load(&fiemap_xattr_broken) &&
			    !check_fork(t, eb, d, e, fd, FIEMAP_FLAG_XATTR, "attribute fork"))
				atomic_store(&fiemap_xattr_broken, true);
			return;
		}
		if (!atomic_exchange(&fiemap_missing_said, true))
			str_info(ctx, CHECK_EXTENT_UNSUPPORTED, d->node, e->name, e->stx.stx_ino,
				 "FIEMAP is not supported here: extent maps are checked with "
				 "FIBMAP where possible");
	}
	else if (eb->collect)
		crosslink_unmapped(eb->collect, ino_key_of(&e->stx));
	check_fibmap(t, d, e, fd);
}
