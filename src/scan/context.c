/*
 * context: life cycle of struct scrub_ctx, and the rules that read it
 * (stx_changed_during_scan(), errno_is_inode_damage()).  What the phases make for each
 * other is not released here but by phases_release() (phases.h): the
 * context knows no phase's products.
 */
#include "scan/context.h"

#include "data/checkpoint.h"
#include "data/regions.h"
#include "lib/stx.h"
#include "store/state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


volatile sig_atomic_t scrub_cancelled;

void scrub_ctx_init(struct scrub_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->mnt_fd = -1;
	ctx->walk_fd = -1;
	ctx->opt.progress_fd = -1;
	ctx->text_out = stdout;
	pthread_mutex_init(&ctx->report_lock, NULL);
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
	state_close(ctx->state);
	free(ctx->fs_uuid);
	region_plan_free(ctx->regions);
	checkpoint_free(ctx->checkpoint);
	ctx->checkpoint = NULL;
	free(ctx->rescan);
	free(ctx->rescan_sv);
	ctx->state = NULL;
	pthread_mutex_destroy(&ctx->report_lock);
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
