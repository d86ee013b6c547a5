/*
 * mediamap: media errors mapped to files; see mediamap.h.
 */
#include "data/mediamap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fsmap.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "scan/context.h"
#include "tree/crosslink.h"
#include "lib/fsmap.h"
#include "tree/relook.h"
#include "report/report.h"
#include "data/spacemap.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

#define STEP 4096U

static void add_piece(struct media_pieces *p, const struct media_piece *x)
{
	p->v = xrealloc(p->v, (p->n + 1) * sizeof(*p->v));
	p->v[p->n++] = *x;
}

void media_index_init(struct media_index *ix, const struct xlink_list *l)
{
	uint64_t m = 0;

	ix->l = l;
	ix->end_max = l->n ? xmalloc(l->n * sizeof(*ix->end_max)) : NULL;
	for (size_t i = 0; i < l->n; i++) {
		if (xlink_end(&l->v[i]) > m)
			m = xlink_end(&l->v[i]);
		ix->end_max[i] = m;
	}
}

void media_index_release(struct media_index *ix)
{
	free(ix->end_max);
	ix->end_max = NULL;
}

/* Index of the first extent that may overlap off: end_max is non-decreasing. */
static size_t first_candidate(const struct media_index *ix, uint64_t off)
{
	size_t lo = 0, hi = ix->l->n;

	while (lo < hi) {			/* first extent with end_max > off */
		size_t mid = lo + (hi - lo) / 2;

		if (ix->end_max[mid] > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

void mediamap_split(const struct media_index *ix, const struct bad_range *b,
		    struct media_pieces *out)
{
	const struct xlink_list *l = ix->l;
	uint64_t pos = b->off, end = b->off + b->len;

	for (size_t i = first_candidate(ix, b->off); i < l->n && xlink_phys(&l->v[i]) < end; i++) {
		const struct xlink_extent *x = &l->v[i];
		uint64_t s = xlink_phys(x) > b->off ? xlink_phys(x) : b->off;
		uint64_t e = xlink_end(x) < end ? xlink_end(x) : end;

		if (e <= s || x->unwritten)
			continue;
		if (s > pos)
			add_piece(out, &(struct media_piece){ .dev_off = pos, .len = s - pos,
							      .err = b->err });
		add_piece(out, &(struct media_piece){ .dev_off = s, .len = e - s, .ino = x->ino,
						      .file_off = xlink_logical(x) + (s - xlink_phys(x)),
						      .err = b->err });
		if (e > pos)
			pos = e;
	}
	if (pos < end)
		add_piece(out, &(struct media_piece){ .dev_off = pos, .len = end - pos,
						      .err = b->err });
}

/* Read [off, off+len) of the file directly; true if it still fails. */
static bool file_range_fails(int fd, uint64_t off, uint64_t len)
{
	int fl = fcntl(fd, F_GETFL);
	void *buf;
	bool bad = false;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0 || posix_memalign(&buf, STEP, STEP))
		return false;
	for (uint64_t pos = off - off % STEP; pos < off + len && !bad; pos += STEP)
		bad = pread(fd, buf, STEP, (off_t)pos) < 0 && errno_is_corruption(errno);
	free(buf);
	return bad;
}

static void relook_pieces(struct relook *rl, struct relook_file *f, int fd,
			  const struct walk_entry *e)
{
	struct media_pieces *p = rl->arg;

	(void)e;
	for (size_t i = 0; i < p->n; i++) {
		struct media_piece *x = &p->v[i];

		if (x->ino != f->id.ino || f->id.dev != p->dev || x->still_mapped)
			continue;
		x->still_mapped = relook_still_mapped(fd, x->file_off, x->dev_off, x->len);
		x->still_bad = x->still_mapped && file_range_fails(fd, x->file_off, x->len);
	}
}

/* What GETFSMAP says owns the first byte of [off, off+len), into out. */
static bool fsmap_owner(struct scrub_ctx *ctx, uint64_t off, uint64_t len, struct strbuf *out,
			bool *is_metadata)
{
	struct stat st;
	struct fsmap_head *h = xcalloc(1, fsmap_sizeof(1));
	bool found = false;

	if (stat(ctx->source, &st) < 0)
		goto out;
	h->fmh_count = 1;
	h->fmh_keys[0].fmr_device = fsmap_dev(major(st.st_rdev), minor(st.st_rdev));
	h->fmh_keys[0].fmr_physical = off;
	h->fmh_keys[1].fmr_device = fsmap_dev(major(st.st_rdev), minor(st.st_rdev));
	h->fmh_keys[1].fmr_physical = off + len - 1;
	h->fmh_keys[1].fmr_owner = ~0ULL;
	h->fmh_keys[1].fmr_offset = ~0ULL;
	h->fmh_keys[1].fmr_flags = ~0U;
	if (ioctl(ctx->mnt_fd, FS_IOC_GETFSMAP, h) < 0 || h->fmh_entries < 1)
		goto out;
	const struct fsmap *r = &h->fmh_recs[0];

	found = true;
	*is_metadata = false;
	const struct scrub_ops *native = backend_native(ctx);
	const char *name = native->fsmap_owner_name ? native->fsmap_owner_name(r->fmr_owner)
						    : NULL;

	if (!(r->fmr_flags & FMR_OF_SPECIAL_OWNER) && (r->fmr_flags & FMR_OF_EXTENT_MAP)) {
		strbuf_addf(out, "in the extent map (%s fork) of inode %llu",
			    r->fmr_flags & FMR_OF_ATTR_FORK ? "attribute" : "data",
			    (unsigned long long)r->fmr_owner);
		*is_metadata = true;
	} else if (!(r->fmr_flags & FMR_OF_SPECIAL_OWNER)) {
		/* Directories and attributes: metadata; a file's data: written since? */
		strbuf_addf(out, "owned by inode %llu%s at offset %llu, which the walk did "
			    "not map there (a directory, or written since?)",
			    (unsigned long long)r->fmr_owner,
			    r->fmr_flags & FMR_OF_ATTR_FORK ? " (attribute fork)" : "",
			    (unsigned long long)r->fmr_offset);
		*is_metadata = r->fmr_flags & FMR_OF_ATTR_FORK;
	} else if (r->fmr_owner == FMR_OWN_FREE) {
		strbuf_addstr(out, "in free space");
	} else if (r->fmr_owner == FMR_OWN_UNKNOWN) {
		strbuf_addstr(out, "in allocated blocks of no known owner (directories, extent "
			      "trees, or data written since the walk)");
	} else if (name) {
		strbuf_addf(out, "in filesystem metadata: %s", name);
		*is_metadata = true;
	} else {
		strbuf_addf(out, "in filesystem metadata (owner %u:%u)",
			    FMR_OWNER_TYPE(r->fmr_owner), FMR_OWNER_CODE(r->fmr_owner));
		*is_metadata = true;
	}
out:
	free(h);
	return found;
}

static void report_unowned(struct scrub_ctx *ctx, const struct media_piece *x)
{
	struct strbuf what = STRBUF_INIT;
	bool metadata = false;
	unsigned long long off = x->dev_off, len = x->len;

	if (!fsmap_owner(ctx, x->dev_off, x->len, &what, &metadata)) {
		str_warn(ctx, CHECK_MEDIA_UNOWNED, NULL, NULL, 0,
			 "media error at device offset %llu (%llu bytes), not in the data of any "
			 "file the walk mapped (free space, metadata, or data written since): %s",
			 off, len, strerror(x->err));
	} else if (metadata) {
		str_error_range(ctx, CHECK_MEDIA_METADATA, NULL, NULL, 0, off, len,
				"media error at device offset %llu (%llu bytes) %s: %s", off, len,
				what.buf, strerror(x->err));
	} else {
		str_warn(ctx, CHECK_MEDIA_UNOWNED, NULL, NULL, 0,
			 "media error at device offset %llu (%llu bytes) %s: %s", off, len,
			 what.buf, strerror(x->err));
	}
	strbuf_release(&what);
}

static void report_piece(struct scrub_ctx *ctx, struct relook *rl, const struct media_piece *x)
{
	struct relook_file *f = x->ino ? relook_find(rl, (struct ino_key){ ctx->xlinks->dev,
									 x->ino }) : NULL;
	unsigned long long off = x->dev_off, len = x->len, foff = x->file_off;

	if (!x->ino) {
		report_unowned(ctx, x);
	} else if (f && f->dir && x->still_bad && !f->changed) {
		str_error_range(ctx, CHECK_MEDIA_FILE, f->dir, f->name, x->ino, foff, len,
				"media error at device offset %llu (%llu bytes): file offset %llu "
				"is unreadable: %s", off, len, foff, strerror(x->err));
	} else {
		/* The file moved away from the bad blocks, or reads them now. */
		str_warn(ctx, CHECK_MEDIA_UNOWNED, f ? f->dir : NULL, f ? f->name : NULL, x->ino,
			 "media error at device offset %llu (%llu bytes), which inode %llu mapped "
			 "at offset %llu during the walk; %s", off, len,
			 (unsigned long long)x->ino, foff,
			 !f || !f->dir ? "the file is gone" :
			 f->changed || !x->still_mapped ? "the file changed since" :
			 "a direct read of the file succeeds now");
	}
}

void mediamap_report(struct scrub_ctx *ctx, int dev_fd, const struct bad_range *bad,
		     size_t nr_bad)
{
	struct media_pieces p = { .dev = ctx->xlinks->dev };
	struct relook rl = { .ctx = ctx, .name = "media error second look",
			     .visit = relook_pieces, .arg = &p };

	struct media_index ix;

	(void)dev_fd;
	media_index_init(&ix, ctx->xlinks);
	for (size_t i = 0; i < nr_bad; i++)
		mediamap_split(&ix, &bad[i], &p);
	media_index_release(&ix);
	for (size_t i = 0; i < p.n; i++)
		if (p.v[i].ino)
			relook_add(&rl, (struct ino_key){ ctx->xlinks->dev, p.v[i].ino });
	report_verbose(ctx, "Phase 5: %zu unreadable %s on %s, %zu in file data", nr_bad,
		       nr_bad == 1 ? "range" : "ranges", ctx->source, rl.nr_files);
	if (rl.nr_files && relook_walk(&rl) < 0)
		rl.nr_files = 0;
	for (size_t i = 0; i < p.n && !scrub_should_stop(ctx); i++)
		report_piece(ctx, &rl, &p.v[i]);
	relook_release(&rl);
	free(p.v);
}
