/*
 * Phase 4: check link counts, back pointers and cross-linked blocks.
 *
 * What phase 3 could only suspect is looked at again here, once the whole
 * tree has been read: a ".." that did not point back is read again with
 * its directory and parent stat'ed around it; an inode whose link count
 * differs from the names found is stat'ed again at its name and, if it is
 * still the same inode with the same count and ctime, its names are
 * counted by a second walk; only a count that two walks agree on and
 * that nothing explains (directories changing, names the walk cannot
 * see, a filesystem that breaks hard links) is an error.  Then blocks
 * claimed by two files are swept for and looked at again (crosslink.h).
 *
 * Reads: ctx->links and ctx->dotdot_suspects (phase 3), ctx->xlinks
 * (phase 3; sorted here by physical offset).  Leaves: ctx->xlinks sorted
 * for phase 5's reads, or released when no data is verified.
 */
#include "scan/phase.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "report/checks.h"
#include "scan/context.h"
#include "tree/crosslink.h"
#include "tree/dircache.h"
#include "tree/linktable.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

struct dotdot_look {
	uint64_t dotdot_ino;
	bool seen;
};

static int find_dotdot(void *arg, const char *name, size_t namelen,
		       uint64_t d_ino, unsigned char d_type)
{
	struct dotdot_look *l = arg;

	(void)d_type;
	if (namelen == 2 && name[0] == '.' && name[1] == '.') {
		l->dotdot_ino = d_ino;
		l->seen = true;
		return 1;
	}
	return 0;
}

/* Is dir still at parent/name, with ".." still pointing elsewhere? */
static void recheck_dotdot(struct scrub_ctx *ctx, struct dotdot_suspect *s, char *buf,
			   size_t bufsize)
{
	struct dir_node *dir = s->dir, *parent = dir->parent;
	struct dotdot_look look = { 0 };
	struct statx at_name, before, after;
	int fd, pfd;

	if (dircache_pin(&ctx->dcache, dir, &fd) < 0) {
		str_changed(ctx, CHECK_DIR_DOTDOT, dir, NULL, dir->ino, "directory");
		return;
	}
	if (dircache_pin(&ctx->dcache, parent, &pfd) < 0) {
		dircache_unpin(&ctx->dcache, dir);
		str_changed(ctx, CHECK_DIR_DOTDOT, dir, NULL, dir->ino, "parent directory");
		return;
	}
	bool ok = stx_get(fd, NULL, &before) == 0 &&
		  dirent_iterate(fd, buf, bufsize, find_dotdot, &look) >= 0 &&
		  stx_get(pfd, dir->name, &at_name) == 0 &&
		  stx_get(fd, NULL, &after) == 0;

	if (!ok || !look.seen || at_name.stx_ino != dir->ino || stx_devno(&at_name) != dir->dev ||
	    !stx_unchanged(&before, &after))
		str_changed(ctx, CHECK_DIR_DOTDOT, dir, NULL, dir->ino, "directory");
	else if (look.dotdot_ino != parent->ino && look.dotdot_ino == s->dotdot_ino)
		str_error(ctx, CHECK_DIR_DOTDOT, dir, NULL, dir->ino,
			  "'..' points to inode %llu, but the directory is in inode %llu",
			  (unsigned long long)look.dotdot_ino, (unsigned long long)parent->ino);
	dircache_unpin(&ctx->dcache, parent);
	dircache_unpin(&ctx->dcache, dir);
}

/* Link-count suspects that survived the first look, and their recount. */
struct link_suspects {
	struct scrub_ctx *ctx;
	struct link_entry **e;
	atomic_uint *recount;
	size_t n, alloc;
};

/* First look again: the same inode, link count and ctime at its name? */
static void recheck_links(struct link_entry *e, void *arg)
{
	struct link_suspects *ls = arg;
	struct scrub_ctx *ctx = ls->ctx;
	struct statx now;
	int fd;

	if (scrub_should_stop(ctx))
		return;
	if (e->changed || !e->dir || dircache_pin(&ctx->dcache, e->dir, &fd) < 0) {
		str_changed(ctx, CHECK_NLINK_COUNT, e->dir, e->name, e->ino, "link count");
		return;
	}
	int ret = stx_get(fd, e->name, &now);

	dircache_unpin(&ctx->dcache, e->dir);
	if (ret < 0 || now.stx_ino != e->ino || stx_devno(&now) != e->dev ||
	    now.stx_nlink != e->nlink ||
	    stx_ns(&now.stx_ctime) != e->ctime_ns || stx_changed_during_scan(ctx, &now)) {
		str_changed(ctx, CHECK_NLINK_COUNT, e->dir, e->name, e->ino, "link count");
		return;
	}
	if (ls->n == ls->alloc) {
		ls->alloc = ls->alloc ? 2 * ls->alloc : 16;
		ls->e = xrealloc(ls->e, ls->alloc * sizeof(*ls->e));
	}
	ls->e[ls->n++] = e;
}

static int link_entry_cmp(const void *a, const void *b)
{
	const struct link_entry *x = *(struct link_entry *const *)a;
	const struct link_entry *y = *(struct link_entry *const *)b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The recount walk's visitor: count the names of the suspects only. */
static void recount_entry(struct walk_thread *t, struct walk_dir *d,
			  const struct walk_entry *e)
{
	struct link_suspects *ls = t->varg;
	struct link_entry key = { .dev = stx_devno(&e->stx), .ino = e->stx.stx_ino };
	struct link_entry *kp = &key, **hit;

	(void)d;
	if (e->stat_err || e->submount || S_ISDIR(e->stx.stx_mode))
		return;
	hit = find_item(&kp, ls->e, ls->n, sizeof(*ls->e), link_entry_cmp);
	if (hit)
		atomic_fetch_add(&ls->recount[hit - ls->e], 1);
}

static const struct walk_visitor recount_visitor = {
	.name = "link recount",
	.entry = recount_entry,
};

/*
 * The second look at link counts: count every suspect's names again in a
 * second walk.  A name in a directory that moved from the unread part of
 * the tree into the part already read is missed by one walk, but it is
 * very unlikely to be missed by two in the same way.
 */
static void recount_links(struct scrub_ctx *ctx, struct link_suspects *ls)
{
	struct scrub_stats stats = { 0 };

	sort_items(ls->e, ls->n, sizeof(*ls->e), link_entry_cmp);
	ls->recount = xcalloc(ls->n, sizeof(*ls->recount));
	report_verbose(ctx, "Phase 4: %zu link %s to look at again: counting names a "
		       "second time", ls->n, ls->n == 1 ? "count" : "counts");
	if (walk_tree(ctx, &recount_visitor, ls, &stats, NULL) < 0) {
		report_operational(ctx, NULL, NULL, 0, "cannot start the link recount");
		return;
	}
	for (size_t i = 0; i < ls->n && !scrub_should_stop(ctx); i++) {
		struct link_entry *e = ls->e[i];
		unsigned again = atomic_load(&ls->recount[i]);

		if (again != e->found)
			str_changed(ctx, CHECK_NLINK_COUNT, e->dir, e->name, e->ino,
				    "%u names found, then %u", e->found, again);
		else if (e->found < e->nlink && atomic_load(&ctx->dirs_changed))
			/*
			 * A directory moved from the part of the tree not yet read
			 * into the part already read is seen by no walk, and
			 * nothing about the inodes below it changes.  Once any
			 * directory changed during the scan, a missing name is
			 * not proof; an extra name still is.
			 */
			str_changed(ctx, CHECK_NLINK_COUNT, e->dir, e->name, e->ino,
				    "link count is %u but %u names were found while directories "
				    "were changing", e->nlink, e->found);
		else if (ctx->quirks & QUIRK_NLINK_NAMES_ANY)
			str_info(ctx, CHECK_NLINK_COUNT, e->dir, e->name, e->ino,
				 "link count is %u but %u %s found: %s breaks hard links on "
				 "copy-up without index=on", e->nlink, e->found,
				 e->found == 1 ? "name was" : "names were", ctx->fstype);
		else if (e->found < e->nlink && atomic_load(&ctx->names_hidden))
			str_info(ctx, CHECK_NLINK_COUNT, e->dir, e->name, e->ino,
				 "link count is %u but %u names were found; the others may be "
				 "in places the walk could not see", e->nlink, e->found);
		else
			str_error(ctx, CHECK_NLINK_COUNT, e->dir, e->name, e->ino,
				  "link count is %u but %u %s found", e->nlink, e->found,
				  e->found == 1 ? "name was" : "names were");
	}
}

static void count_mismatch(struct link_entry *e, void *arg)
{
	(void)e;
	++*(unsigned long long *)arg;
}

/*
 * Are inode numbers per name here (QUIRK_INO_MAYBE_PER_NAME)?  Then no
 * multiply-linked inode was reached by two names, and every link count
 * looks wrong: the check is not done, and that is said once.
 */
static bool links_uncheckable(struct scrub_ctx *ctx)
{
	unsigned long long n = 0;

	if (!(ctx->quirks & QUIRK_INO_MAYBE_PER_NAME) || atomic_load(&ctx->links_share_ino))
		return false;
	linktable_for_each_mismatch(ctx->links, count_mismatch, &n);
	if (n)
		str_info(ctx, CHECK_NLINK_COUNT, NULL, NULL, 0,
			 "%llu files have more links than names, and no two names share an "
			 "inode number: this %s filesystem gives each name its own inode "
			 "number (a FUSE daemon without use_ino), so link counts are not "
			 "checked", n, ctx->fstype);
	return true;
}

int phase4_links(struct scrub_ctx *ctx, unsigned long long *items)
{
	size_t bufsize = 64 * 1024;	/* one getdents64 buffer, as the walk's */
	char *buf = xmalloc(bufsize);
	struct link_suspects ls = { .ctx = ctx };

	*items = linktable_count(ctx->links);
	for (struct dotdot_suspect *s = ctx->dotdot_suspects; s; s = s->next) {
		if (scrub_should_stop(ctx))
			break;
		recheck_dotdot(ctx, s, buf, bufsize);
	}
	free(buf);
	if (!links_uncheckable(ctx))
		linktable_for_each_mismatch(ctx->links, recheck_links, &ls);
	if (ls.n && !scrub_should_stop(ctx))
		recount_links(ctx, &ls);
	free(ls.e);
	free(ls.recount);
	crosslink_check(ctx);
	return 0;
}
