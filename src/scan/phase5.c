/*
 * Phase 5: verify file data (only with -x).
 *
 * Read back every allocated byte of every file.  Where FIEMAP offsets are
 * offsets on the block device, the device reader (devverify.h) reads the
 * extents phase 3 collected in physical order, maps each unreadable range
 * to the files that own it (mediamap.h) and hashes what it read for the
 * checksum ledger; then the per-file reader (dataverify.h) takes the
 * files whose extents were not all known and those a manifest lists.
 * Elsewhere (no device: FUSE, overlayfs, tmpfs, network filesystems, not
 * root) the per-file reader reads every file.  Last, the ledger judges
 * every file it hashed against its record (ledger.h).  A backend with its
 * own data verification may run its scan_data hook instead (none does).
 * Where the filesystem's own scrub verified every checksummed byte in
 * phase 2 (btrfs: backend.h, data_left), only the files it keeps no
 * checksums for and those changed since the scrub could see them are read,
 * file by file, and those a manifest lists (fs_verified_read()); the
 * ledger hashes only the first (data_checksummed).
 *
 * With --rescan-errors or --since, only some files are read, all by the
 * per-file reader; with --portion or --time-budget, only some device
 * regions, by the device reader, or where there is none, the files of some
 * buckets, by the per-file reader (regions.h).
 *
 * Reads: ctx->xlinks (phase 3, sorted by phase 4) and ctx->ledger (phase
 * 3).  Leaves: ctx->stats.bytes_read (and since_skipped); ctx->xlinks
 * emptied.
 */
#include "scan/phase.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "data/checkpoint.h"
#include "report/checks.h"
#include "scan/context.h"
#include "tree/crosslink.h"
#include "data/dataverify.h"
#include "data/devverify.h"
#include "lib/inokey.h"
#include "lib/inoset.h"
#include "data/ledger.h"
#include "data/ratelimit.h"
#include "data/regions.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

/*
 * The per-file reader, for every file or (only != NULL) for those inodes;
 * args: what else it is to know (only_sv, since), or NULL.
 */
static int read_files(struct scrub_ctx *ctx, const struct ino_key *only, size_t nr_only,
		      const struct dataverify_args *more, struct scrub_stats *stats)
{
	struct ratelimit limit;
	struct dataverify_args args = { 0 };
	int ret;

	if (more)
		args = *more;
	args.linked = inoset_new();
	args.only = only;
	args.nr_only = nr_only;
	args.limit = &limit;

	/* Depth 0: the per-file reader's reads in flight are the walk's threads,
	 * which the controller does not set; ratelimit_take() holds them back. */
	ratelimit_init(&limit, ctx->opt.limit_rate, ctx->opt.limit_auto, 0, report_limit, ctx);
	ret = walk_tree(ctx, &dataverify_visitor, &args, stats, NULL);
	ratelimit_destroy(&limit);
	inoset_free(args.linked);
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot start the data scan");
	return ret;
}

/*
 * The inodes the per-file reader takes after the device reader: those
 * whose extents are not all known, and a manifest's (sorted by
 * ino_key_cmp, distinct).
 */
static struct ino_key *per_file_inodes(struct scrub_ctx *ctx, size_t *n)
{
	struct xlink_list *l = ctx->xlinks;
	size_t nr_manifest, w = 0;
	const struct ino_key *manifest = ledger_per_file(ctx->ledger, &nr_manifest);
	struct ino_key *v = xmalloc((l->nr_unmapped + nr_manifest + 1) * sizeof(*v));

	if (l->nr_unmapped)	/* memcpy from NULL is undefined, even of 0 bytes */
		memcpy(v, l->unmapped, l->nr_unmapped * sizeof(*v));
	if (nr_manifest)
		memcpy(v + l->nr_unmapped, manifest, nr_manifest * sizeof(*v));
	*n = l->nr_unmapped + nr_manifest;
	sort_items(v, *n, sizeof(*v), ino_key_cmp);
	for (size_t i = 0; i < *n; i++)
		if (!w || !ino_key_eq(v[w - 1], v[i]))
			v[w++] = v[i];
	*n = w;
	return v;
}

/*
 * --rescan-errors: only the files with open findings (ctx->rescan and
 * rescan_sv, made in phase 1 by history.c), by the per-file reader;
 * nothing when there are none (read_files() with no list would read every
 * file).
 */
static int rescan_files(struct scrub_ctx *ctx, unsigned long long *items)
{
	struct scrub_stats stats = { 0 };
	struct dataverify_args more = { .only_sv = ctx->rescan_sv, .nr_only_sv = ctx->nr_rescan_sv };
	size_t n = ctx->nr_rescan + ctx->nr_rescan_sv;
	int ret = 0;

	ledger_prepare(ctx, ctx->ledger);
	report_verbose(ctx, "Phase 5: reading back the %zu files with open findings", n);
	if (n && read_files(ctx, ctx->rescan, ctx->nr_rescan, &more, &stats) < 0)
		ret = EXIT_OPERATIONAL;
	ledger_finish(ctx, ctx->ledger);
	if (ret)
		return ret;
	xlink_list_release(ctx->xlinks);
	*items = stats.bytes_read;
	ctx->stats.bytes_read = stats.bytes_read;
	return 0;
}

/*
 * --since: only the files changed since the date (and, with --ledger, those
 * it has no record of as they are), by the per-file reader, which sees each file's statx
 * as it opens it; the device reader would read every extent.
 */
static int since_files(struct scrub_ctx *ctx, unsigned long long *items)
{
	struct scrub_stats stats = { 0 };
	struct dataverify_since since = { .ns = ctx->opt.since_ns };
	int ret = 0;

	ledger_prepare(ctx, ctx->ledger);
	if (ledger_has_database(ctx->ledger))
		since.ledger = ctx->ledger;
	report_verbose(ctx, "Phase 5: reading back the files changed since %s%s", ctx->opt.since,
		       since.ledger ? ", or without a record of their current version in the "
		       "ledger" : "");
	if (read_files(ctx, NULL, 0, &(struct dataverify_args){ .since = &since }, &stats) < 0)
		ret = EXIT_OPERATIONAL;
	ledger_finish(ctx, ctx->ledger);
	if (ret)
		return ret;
	xlink_list_release(ctx->xlinks);
	*items = stats.bytes_read;
	ctx->stats.bytes_read = stats.bytes_read;
	ctx->stats.since_skipped = since.skipped;
	report_verbose(ctx, "Phase 5: --since %s: %llu bytes read from %llu files; %llu files "
		       "(%llu bytes) skipped as unchanged", ctx->opt.since, stats.bytes_read,
		       stats.files, (unsigned long long)since.skipped,
		       (unsigned long long)since.skipped_bytes);
	return 0;
}

/*
 * One walk of the per-file reader over the buckets take; count: add each
 * file's bytes to its bucket's.  True if it read them all (no stop, no
 * operational error).
 */
static bool read_buckets(struct scrub_ctx *ctx, const bool *take, atomic_ullong *count,
			 struct scrub_stats *stats)
{
	unsigned long long operr = atomic_load(&ctx->report.nr_operational);
	struct dataverify_args more = { .buckets = take, .bucket_bytes = count,
					.budget = ctx->opt.time_budget != 0 };

	if (read_files(ctx, NULL, 0, &more, stats) < 0)
		return false;
	return !scrub_should_stop(ctx) && !regions_budget_spent(ctx) &&
	       atomic_load(&ctx->report.nr_operational) == operr;
}

/*
 * --portion, --time-budget where the device cannot be read by regions
 * (why): buckets of files instead (regions.h), by the per-file reader,
 * in one walk, or with --time-budget in up to BUCKET_WALKS walks, the
 * least recently read buckets first.
 */
static int portion_files(struct scrub_ctx *ctx, const char *why, unsigned long long *items)
{
	struct scrub_stats stats = { 0 };
	struct region_plan *p;
	atomic_ullong *count = xcalloc(FILE_BUCKETS, sizeof(*count));
	bool *take = xcalloc(FILE_BUCKETS, sizeof(*take));
	size_t nr_chosen = 0, walks = ctx->opt.time_budget ? BUCKET_WALKS : 1, first = 0;

	report_verbose(ctx, "Phase 5: reading file by file: %s", why);
	ledger_prepare(ctx, ctx->ledger);
	if (regions_plan_files(ctx, &why) < 0) {
		report_operational(ctx, NULL, NULL, 0, "%s: %s; no data was read",
				   ctx->opt.portion ? "--portion" : "--time-budget", why);
		ledger_finish(ctx, ctx->ledger);
		free(count);
		free(take);
		return 0;
	}
	p = ctx->regions;
	for (size_t i = 0; i < p->nr; i++)
		nr_chosen += p->chosen[i];
	/* Walk w reads the chosen buckets of rank [first, last): oldest first. */
	for (size_t w = 0; w < walks && !scrub_should_stop(ctx) && !regions_budget_spent(ctx);
	     w++) {
		size_t last = nr_chosen * (w + 1) / walks;
		bool whole;

		for (size_t i = 0; i < p->nr; i++)
			take[i] = p->chosen[i] && p->rank[i] >= first && p->rank[i] < last;
		whole = read_buckets(ctx, take, w ? NULL : count, &stats);
		for (size_t i = 0; i < p->nr && whole; i++)
			p->done[i] |= take[i];
		first = last;
	}
	ledger_finish(ctx, ctx->ledger);
	for (size_t i = 0; i < p->nr; i++)
		p->allocated[i] = atomic_load(&count[i]);
	free(count);
	free(take);
	xlink_list_release(ctx->xlinks);
	*items = stats.bytes_read;
	ctx->stats.bytes_read = stats.bytes_read;
	report_verbose(ctx, "Phase 5: %llu bytes read from %llu files", stats.bytes_read,
		       stats.files);
	return 0;
}

/*
 * --portion, --time-budget: the device regions least recently read (regions.h), by the
 * device reader alone; the checksum records are not compared (no file is
 * known to be read whole), and files whose extents are not all known are
 * not read.  Without the device reader, buckets of files by the per-file
 * reader (portion_files()).
 */
static int portion_read(struct scrub_ctx *ctx, unsigned long long *items)
{
	unsigned long long dev_bytes = 0;
	const char *why = NULL;

	if (!ctx->state || !ctx->fs_uuid) {
		report_operational(ctx, NULL, NULL, 0, "%s needs the run history, which cannot "
				   "be used; no data was read",
				   ctx->opt.portion ? "--portion" : "--time-budget");
		return 0;
	}
	if (devverify_run(ctx, &dev_bytes, &why) < 0)
		return portion_files(ctx, why, items);
	if (ctx->xlinks->nr_unmapped)
		report_verbose(ctx, "Phase 5: --portion, --time-budget: %zu files whose extents "
			       "are not all known are not read", ctx->xlinks->nr_unmapped);
	xlink_list_release(ctx->xlinks);
	*items = dev_bytes;
	ctx->stats.bytes_read = dev_bytes;
	report_verbose(ctx, "Phase 5: %llu bytes read from the device in physical order",
		       dev_bytes);
	return 0;
}

/*
 * Where the filesystem's own scrub verified in phase 2 all the data it
 * keeps checksums of (btrfs: backend.h, data_left), only the files it
 * keeps none for, and those changed since the scrub could see them, are
 * read (and a manifest's, whose digests need the bytes), by the per-file
 * reader; with none, the tree is not walked again.
 * Reading the others again would only repeat the scrub, through reads that
 * repair a bad copy even under -n.  False when the backend cannot say
 * so (why, with -v): every file is read.  *ret: EXIT_OPERATIONAL if the
 * reader could not start.
 */
static bool fs_verified_read(struct scrub_ctx *ctx, struct scrub_stats *stats, int *ret)
{
	struct subvol_ino *left = NULL;
	struct ino_key *only;
	size_t nr_left = 0, nr_only;
	const char *why = NULL;

	if (!ctx->ops->data_left || ctx->ops->data_left(ctx, &left, &nr_left, &why) < 0) {
		if (why)
			report_verbose(ctx, "Phase 5: reading every file: %s", why);
		return false;
	}
	only = per_file_inodes(ctx, &nr_only);
	report_verbose(ctx, "Phase 5: the %s scrub verified the data it keeps checksums of; "
		       "left to read: %zu %s without data checksums or changed since the scrub "
		       "could see them%s", ctx->ops->name, nr_left, nr_left == 1 ? "file" : "files",
		       nr_only ? ", and the manifest's files" : "");
	if (nr_left + nr_only &&
	    read_files(ctx, only, nr_only, &(struct dataverify_args){
			.only_sv = left, .nr_only_sv = nr_left }, stats) < 0)
		*ret = EXIT_OPERATIONAL;
	free(only);
	free(left);
	return true;
}

int phase5_data(struct scrub_ctx *ctx, unsigned long long *items)
{
	struct scrub_stats stats = { 0 };
	struct xlink_list *l = ctx->xlinks;
	unsigned long long dev_bytes = 0;
	const char *why = NULL;
	int ret = 0;

	if (ctx->ops->scan_data) {
		if (ctx->opt.record || ctx->opt.manifest_path)
			str_info(ctx, CHECK_LEDGER_RECORD, NULL, NULL, 0, "the %s backend verifies "
				 "data by its own checksums: --record and --manifest are not used",
				 ctx->ops->name);
		phase_run_hook(ctx, ctx->ops->scan_data, "data verification");
		return 0;
	}
	if (ctx->opt.rescan_errors)
		return rescan_files(ctx, items);
	if (ctx->opt.since)
		return since_files(ctx, items);
	if (regions_mode(&ctx->opt))
		return portion_read(ctx, items);
	ledger_prepare(ctx, ctx->ledger);
	if (fs_verified_read(ctx, &stats, &ret)) {
		/* the filesystem's scrub and the files it left: done */
	} else if (devverify_run(ctx, &dev_bytes, &why) == 0) {
		size_t nr_only;
		struct ino_key *only = per_file_inodes(ctx, &nr_only);

		/* Then the files the device reader could not know all of. */
		if (nr_only && !scrub_should_stop(ctx)) {
			report_verbose(ctx, "Phase 5: reading %zu files file by file (extents not "
				       "all known, or in the manifest)", nr_only);
			if (read_files(ctx, only, nr_only, NULL, &stats) < 0)
				ret = EXIT_OPERATIONAL;
		}
		if (!ret && !scrub_should_stop(ctx) &&
		    ledger_judge_walk(ctx, ctx->ledger, only, nr_only) < 0) {
			report_operational(ctx, NULL, NULL, EIO, "cannot walk the tree to check "
					   "the checksum records");
			ret = EXIT_OPERATIONAL;
		}
		free(only);
	} else {
		report_verbose(ctx, "Phase 5: reading file by file: %s", why);
		checkpoint_say_data(ctx, NULL);	/* the files read to their end are skipped */
		if (read_files(ctx, NULL, 0, NULL, &stats) < 0)
			ret = EXIT_OPERATIONAL;
	}
	ledger_finish(ctx, ctx->ledger);
	if (ret)
		return ret;
	xlink_list_release(l);
	*items = stats.bytes_read + dev_bytes;
	ctx->stats.bytes_read = stats.bytes_read + dev_bytes;
	report_verbose(ctx, "Phase 5: %llu bytes read (%llu from the device in physical order, "
		       "%llu from %llu files)", ctx->stats.bytes_read, dev_bytes,
		       stats.bytes_read, stats.files);
	return 0;
}
