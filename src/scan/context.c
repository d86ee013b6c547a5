/*
 * context: life cycle of struct scrub_ctx, and the rules that read it
 * (stx_changed_during_scan(), errno_is_inode_damage()); how a finding's
 * place is told to the report core (report_where: the path from the
 * walk's directory nodes, the subvolume, the filesystem for the advice).
 * What the phases make for each other is not released here but by
 * phases_release() (phases.h): the context knows no phase's products.
 */
#include "scan/context.h"

#include "lib/inokey.h"
#include "lib/names.h"
#include "lib/strbuf.h"
#include "lib/stx.h"
#include "report/advice.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* report_of() (report.h) casts the context to its first member. */
_Static_assert(offsetof(struct scrub_ctx, report) == 0, "struct report must come first");

/* The mount point, then each directory's name, escaped (names.h). */
static void where_path(const struct scrub_ctx *ctx, struct strbuf *out,
		       const struct dir_node *dir, const char *name)
{
	const char *mnt = ctx->mntpoint ? ctx->mntpoint : "";
	size_t depth = 0;

	names_escape(out, mnt, strlen(mnt));
	for (const struct dir_node *n = dir; n && n->parent; n = n->parent)
		depth++;
	if (depth) {
		const struct dir_node **chain = xmalloc(depth * sizeof(*chain));
		size_t i = depth;

		for (const struct dir_node *n = dir; n && n->parent; n = n->parent)
			chain[--i] = n;
		for (i = 0; i < depth; i++) {
			if (out->len == 0 || out->buf[out->len - 1] != '/')
				strbuf_addch(out, '/');
			names_escape(out, chain[i]->name, chain[i]->namelen);
		}
		free(chain);
	}
	if (name) {
		if (out->len == 0 || out->buf[out->len - 1] != '/')
			strbuf_addch(out, '/');
		names_escape(out, name, strlen(name));
	}
}

/* finding.subvol: the subvolume of dir (NULL: the mount root). */
static void where_subvol(const struct scrub_ctx *ctx, const struct dir_node *dir,
			 struct finding *f)
{
	uint64_t root_dev = makedev(ctx->root_stx.stx_dev_major, ctx->root_stx.stx_dev_minor);

	if (!dir) {
		f->has_subvol = true;
		if (!stx_subvol(&ctx->root_stx, &f->subvol))
			f->subvol = 0;
		return;
	}
	f->has_subvol = dir->has_subvol || dir->dev == root_dev;
	f->subvol = dir->has_subvol ? dir->subvol : 0;
}

static void where_advice_fs(const struct scrub_ctx *ctx, struct advice_fs *fs)
{
	fs->fstype = ctx->fstype;
	fs->root = ctx->mntpoint && !strcmp(ctx->mntpoint, "/");
}

static const struct report_where scan_where = {
	.path = where_path,
	.subvol = where_subvol,
	.advice_fs = where_advice_fs,
};

void scrub_ctx_init(struct scrub_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	report_init(&ctx->report, &scan_where);
	ctx->mnt_fd = -1;
	ctx->walk_fd = -1;
	ctx->opt.progress_fd = -1;
	pthread_mutex_init(&ctx->suspects_lock, NULL);
}

void scrub_ctx_release(struct scrub_ctx *ctx)
{
	if (ctx->dcache.lru)
		dircache_release(&ctx->dcache);
	if (ctx->walk_fd >= 0 && ctx->walk_fd != ctx->mnt_fd)
		close(ctx->walk_fd);
	if (ctx->mnt_fd >= 0)
		close(ctx->mnt_fd);
	free(ctx->mntpoint);
	free(ctx->source);
	free(ctx->fstype);
	free(ctx->fsroot);
	free(ctx->fs_uuid);
	free(ctx->rescan);
	free(ctx->rescan_sv);
	report_release(&ctx->report);
	pthread_mutex_destroy(&ctx->suspects_lock);
}

void scrub_stats_add(struct scrub_stats *to, const struct scrub_stats *from)
{
	to->dirs += from->dirs;
	to->files += from->files;
	to->symlinks += from->symlinks;
	to->symlinks_unread += from->symlinks_unread;
	to->specials += from->specials;
	to->entries += from->entries;
	to->extents += from->extents;
	to->xattrs += from->xattrs;
	to->xattr_values += from->xattr_values;
	to->xattr_unlisted += from->xattr_unlisted;
	to->names += from->names;
	to->bytes_read += from->bytes_read;
	to->since_skipped += from->since_skipped;
	to->blocks += from->blocks;
	to->inodes += from->inodes;
	to->bulk += from->bulk;
	to->bulk_maps += from->bulk_maps;
}

bool stx_changed_during_scan(const struct scrub_ctx *ctx, const struct statx *stx)
{
	return stx_ns(&stx->stx_ctime) >= ctx->changed_since_ns;
}

bool errno_is_inode_damage(const struct scrub_ctx *ctx, int err)
{
	if (errno_is_corruption(err))
		return true;
	return !(ctx->quirks & QUIRK_ERRORS_RELAYED) &&
	       (err == EINVAL || err == ENODATA || (err == EPERM && geteuid() == 0));
}

bool errno_is_stat_damage(const struct scrub_ctx *ctx, int err)
{
	return errno_is_inode_damage(ctx, err) ||
	       (err == ELOOP && !(ctx->quirks & QUIRK_ERRORS_RELAYED));
}
