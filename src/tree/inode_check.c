/*
 * inode_check: the phase 3 visitor; see inode_check.h for what is checked
 * and the re-check rule.  Phase 4 (phase4.c) looks again at what it
 * handed on.
 */
#include "tree/inode_check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "tree/backend_core.h"
#include "report/checks.h"
#include "tree/crosslink.h"
#include "tree/extents.h"
#include "data/ledger.h"
#include "tree/linktable.h"
#include "tree/name_check.h"
#include "lib/names.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "tree/xattrs.h"

/*
 * A directory with more suspects than this is not a race: report what is
 * confirmed among the first ones and say the rest were not examined.
 */
#define MAX_SUSPECTS 4096

/* A directory entry that looked wrong on the first read. */
struct suspect {
	const char *check;
	char *name;
	size_t namelen;
	uint64_t d_ino;
	unsigned char d_type;
	struct statx stx;		/* the inode on the first look (if stat worked) */
	/* second read of the directory */
	unsigned seen;
	uint64_t re_dino;
	unsigned char re_dtype;
};

struct check_thread {
	struct scrub_ctx *ctx;
	struct name_set names;
	struct name_check name_check;
	struct suspect *suspects;
	size_t nr_suspects, alloc_suspects;
	bool suspects_overflow;
	struct xattr_buf xattrs;
	struct extent_buf extents;
	struct xlink_list xlinks;
	struct ledger_notes ledger;
	char *linkbuf;
	size_t linkbuf_size;
};

static void *check_thread_init(struct scrub_ctx *ctx, unsigned index)
{
	struct check_thread *ct = xcalloc(1, sizeof(*ct));

	(void)index;
	name_set_init(&ct->names);
	name_check_init(&ct->name_check);
	xattr_buf_init(&ct->xattrs);
	ct->xattrs.name_check = &ct->name_check;
	extent_buf_init(&ct->extents);
	/* Physical offsets mean something only on the mount's own device. */
	if (ctx->dev_size) {
		ct->extents.collect = &ct->xlinks;
		ct->xlinks.dev = ctx->xlinks->dev;
		/* Each thread's share of the bound on the whole list. */
		ct->xlinks.cap = XLINK_MAX_EXTENTS / (ctx->opt.nr_threads ? ctx->opt.nr_threads : 1);
	}
	ct->ctx = ctx;
	ct->linkbuf_size = 4097;
	ct->linkbuf = xmalloc(ct->linkbuf_size);
	return ct;
}

static void clear_suspects(struct check_thread *ct)
{
	for (size_t i = 0; i < ct->nr_suspects; i++)
		free(ct->suspects[i].name);
	ct->nr_suspects = 0;
	ct->suspects_overflow = false;
}

static void check_thread_free(void *p)
{
	struct check_thread *ct = p;

	crosslink_merge(ct->ctx, &ct->xlinks);	/* walk threads are gone: no lock */
	ledger_merge(ct->ctx->ledger, &ct->ledger);
	clear_suspects(ct);
	free(ct->suspects);
	name_set_release(&ct->names);
	name_check_release(&ct->name_check);
	xattr_buf_release(&ct->xattrs);
	extent_buf_release(&ct->extents);
	free(ct->linkbuf);
	free(ct);
}

static void add_suspect(struct check_thread *ct, const char *check,
			const struct walk_entry *e)
{
	if (ct->nr_suspects >= MAX_SUSPECTS) {
		ct->suspects_overflow = true;
		return;
	}
	if (ct->nr_suspects == ct->alloc_suspects) {
		ct->alloc_suspects = ct->alloc_suspects ? ct->alloc_suspects * 2 : 8;
		ct->suspects = xrealloc(ct->suspects, ct->alloc_suspects * sizeof(*ct->suspects));
	}
	struct suspect *s = &ct->suspects[ct->nr_suspects++];

	memset(s, 0, sizeof(*s));
	s->check = check;
	s->name = xstrndup(e->name, e->namelen);
	s->namelen = e->namelen;
	s->d_ino = e->d_ino;
	s->d_type = e->d_type;
	s->stx = e->stx;
}

static unsigned char mode_to_dtype(uint16_t mode)
{
	return (unsigned char)((mode & S_IFMT) >> 12);
}

static const char *dtype_name(unsigned char t)
{
	switch (t) {
	case DT_REG: return "regular file";
	case DT_DIR: return "directory";
	case DT_LNK: return "symlink";
	case DT_CHR: return "character device";
	case DT_BLK: return "block device";
	case DT_FIFO: return "FIFO";
	case DT_SOCK: return "socket";
	default: return "unknown type";
	}
}

/* The name itself: corruption (empty, '/'), suspicious bytes, duplicates. */
/*
 * getdents' d_ino as a report's inode number: 0 (none printed) where it
 * means nothing.  FUSE gives every entry d_ino 0xffffffff unless the
 * daemon passes its inode numbers (use_ino, readdirplus).
 */
static uint64_t report_dino(const struct scrub_ctx *ctx, uint64_t d_ino)
{
	return ctx->quirks & QUIRK_DINO_UNRELATED ? 0 : d_ino;
}

/* The inode number to name an entry by: its own once statx answered. */
static uint64_t entry_ino(const struct scrub_ctx *ctx, const struct walk_entry *e)
{
	return e->stat_err ? report_dino(ctx, e->d_ino) : e->stx.stx_ino;
}

static void check_name(struct walk_thread *t, struct check_thread *ct,
		       struct walk_dir *d, const struct walk_entry *e)
{
	unsigned flags = names_classify(e->name, e->namelen);

	if (flags & NAME_EMPTY)
		add_suspect(ct, CHECK_NAME_EMPTY, e);
	if (flags & NAME_SLASH)
		add_suspect(ct, CHECK_NAME_SLASH, e);
	if (flags & NAME_BAD_UTF8)
		str_warn(t->ctx, CHECK_NAME_ENCODING, d->node, e->name, entry_ino(t->ctx, e),
			 "name is not valid UTF-8");
	if (flags & NAME_CONTROL)
		str_warn(t->ctx, CHECK_NAME_CONTROL, d->node, e->name, entry_ino(t->ctx, e),
			 "name contains control characters");
	if (name_set_insert(&ct->names, name_hash(e->name, e->namelen)))
		add_suspect(ct, CHECK_NAME_DUPLICATE, e);
	name_check_entry(t, &ct->name_check, d, e, flags);
}

/* statx failed: a vanished name is a race, a refused inode is damage. */
static void stat_failed(struct walk_thread *t, struct check_thread *ct,
			struct walk_dir *d, const struct walk_entry *e)
{
	struct scrub_ctx *ctx = t->ctx;
	struct statx stx;
	int err = e->stat_err;

	if (err == EINVAL && (e->namelen == 0 || memchr(e->name, '/', e->namelen)))
		return;		/* a bad name, reported by check_name */
	if (err == ENOENT) {
		/* Removed since getdents, or an entry naming a free inode. */
		add_suspect(ct, CHECK_DIRENT_DANGLING, e);
		return;
	}
	if (errno_is_stat_damage(ctx, err)) {
		int again = stx_get(d->fd, e->name, &stx);

		if (again == 0 || -again == ENOENT)
			return;		/* readable now, or gone */
		err = -again;
	}
	if (errno_is_stat_damage(ctx, err))
		str_error(ctx, CHECK_INODE_UNREADABLE, d->node, e->name, report_dino(ctx, e->d_ino),
			  "cannot read the inode: %s", strerror(err));
	else
		report_operational(ctx, d->node, e->name, err, "cannot stat");
}

/* Is the name still a link-count-0 inode?  Then 'again' holds it. */
static bool still_nlink_zero(const struct walk_dir *d, const struct walk_entry *e,
			     struct statx *again)
{
	return stx_get(d->fd, e->name, again) == 0 && again->stx_ino == e->stx.stx_ino &&
	       again->stx_nlink == 0;
}

/*
 * A reachable inode with nlink 0: look again before saying so.  An unlink
 * or a rename over the name drops the link count before the name leaves
 * the dentry cache, so a busy directory shows this for a moment; the drop
 * stamps the inode's ctime, so an inode changed during the scan is an
 * info, and any other is looked at once more after a pause.
 */
static void check_nlink_zero(struct walk_thread *t, struct walk_dir *d,
			     const struct walk_entry *e)
{
	struct statx again;

	if (e->stx.stx_nlink != 0 || !still_nlink_zero(d, e, &again))
		return;
	if (stx_changed_during_scan(t->ctx, &again)) {
		str_changed(t->ctx, CHECK_INODE_NLINK_ZERO, d->node, e->name, e->stx.stx_ino,
			    "link count 0 (being unlinked)");
		return;
	}
	nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
	if (!still_nlink_zero(d, e, &again))
		return;
	str_error(t->ctx, CHECK_INODE_NLINK_ZERO, d->node, e->name, e->stx.stx_ino,
		  "inode is reachable by this name but its link count is 0");
}

/*
 * Would readlink() leave this symlink's atime as it is?  readlink has no
 * O_NOATIME.  Through the clone made read-only and noatime it always
 * does; without it (not root, FSCRUB_DEBUG_NO_CLONE, no mount_setattr)
 * the mount's own rule decides, as touch_atime() in the kernel's
 * fs/inode.c does: read-only or noatime never updates, strictatime always,
 * relatime only an atime not after both the mtime and the ctime, or a day
 * old.
 */
static bool readlink_keeps_atime(const struct scrub_ctx *ctx, const struct statx *stx)
{
	/* A day, less a minute for the kernel's coarse clock and ours. */
	const int64_t relatime_max_age = 24 * 3600 - 60;
	struct timespec now;

	if (ctx->walk_is_readonly || (ctx->svfs.f_flag & (ST_RDONLY | ST_NOATIME)))
		return true;
	if (!(ctx->svfs.f_flag & ST_RELATIME) || !(stx->stx_mask & STATX_ATIME) ||
	    stx_ns(&stx->stx_atime) <= stx_ns(&stx->stx_mtime) ||
	    stx_ns(&stx->stx_atime) <= stx_ns(&stx->stx_ctime))
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec - stx->stx_atime.tv_sec < relatime_max_age;
}

/* readlink length against st_size; read again before reporting. */
static void check_symlink(struct walk_thread *t, struct check_thread *ct,
			  struct walk_dir *d, const struct walk_entry *e)
{
	struct scrub_ctx *ctx = t->ctx;
	size_t want = e->stx.stx_size + 2;
	ssize_t n;

	/* Not read rather than touched: counted, and said once after phase 3. */
	if (!readlink_keeps_atime(ctx, &e->stx)) {
		t->stats.symlinks_unread++;
		return;
	}

	/* Size the buffer from st_size, but never trust a damaged st_size far. */
	if (want > ct->linkbuf_size && want <= 65536) {
		ct->linkbuf_size = want;
		ct->linkbuf = xrealloc(ct->linkbuf, want);
	}
	for (int look = 0; look < 2; look++) {
		struct statx now;

		n = readlinkat(d->fd, e->name, ct->linkbuf, ct->linkbuf_size);
		if (n < 0 && (errno == ENOENT || errno == EINVAL))
			return;		/* gone or replaced by a non-symlink */
		if (n >= 0 && (uint64_t)n == e->stx.stx_size && n > 0)
			return;
		if (stx_get(d->fd, e->name, &now) < 0 || !stx_unchanged(&now, &e->stx)) {
			str_changed(ctx, CHECK_SYMLINK_SIZE, d->node, e->name,
				    e->stx.stx_ino, "symlink");
			return;
		}
	}
	if (n < 0 && errno_is_corruption(errno))
		str_error(ctx, CHECK_SYMLINK_UNREADABLE, d->node, e->name, e->stx.stx_ino,
			  "cannot read the symlink target: %s", strerror(errno));
	else if (n < 0)
		report_operational(ctx, d->node, e->name, errno, "cannot read the symlink");
	else if (n == 0)
		str_error(ctx, CHECK_SYMLINK_EMPTY, d->node, e->name, e->stx.stx_ino,
			  "symlink has an empty target");
	else if ((size_t)n >= ct->linkbuf_size)
		str_error(ctx, CHECK_SYMLINK_SIZE, d->node, e->name, e->stx.stx_ino,
			  "symlink target is longer than its size of %llu bytes",
			  (unsigned long long)e->stx.stx_size);
	else
		str_error(ctx, CHECK_SYMLINK_SIZE, d->node, e->name, e->stx.stx_ino,
			  "symlink target is %zd bytes but its size is %llu bytes", n,
			  (unsigned long long)e->stx.stx_size);
}

/*
 * first: the first name of the inode the walk reached.  The extent maps
 * are checked, and collected for the cross-link check, at that name only:
 * an inode is one map however many names it has.
 */
/*
 * A regular file whose bulk record says it owns no blocks: no data
 * extents and no attribute blocks, so FIEMAP has nothing to map.
 */
static bool bulk_no_blocks(const struct walk_entry *e)
{
	return e->bulk && S_ISREG(e->bulk->mode) && e->bulk->nextents == 0 &&
	       e->bulk->blocks == 0;
}

/*
 * The backend's own per-entry checks (fd: an open regular file, or -1).
 * vfs: the open file's statx, or NULL; an entry from a bulk record is
 * then handed over as the VFS shows it, which the backend may compare
 * with its own view (XFS's walkstat), as it does every stat'ed entry.
 * bulk_map: fd is -1 and the file's map came from the backend's
 * bulk_extents (extents_check_bulk()), whole in ct->extents.
 */
static void backend_check_inode(struct walk_thread *t, const struct walk_dir *d,
				const struct walk_entry *e, int fd, const struct statx *vfs,
				bool bulk_map)
{
	struct check_thread *ct = t->vstate;
	struct backend_dir bd;
	struct backend_entry be;

	if (!t->ctx->ops->check_inode)
		return;
	bd = backend_dir_of(t, d);
	be = backend_entry_of(e, fd);
	be.no_extents = bulk_no_blocks(e);
	be.bulk_map = bulk_map;
	if (vfs && e->bulk) {
		be.stx = vfs;
		be.bulk = false;
		be.opened_from = e->bulk;
	}
	if ((fd >= 0 || bulk_map) && ct->extents.whole_ok) {
		be.map = ct->extents.whole;
		be.nr_map = ct->extents.nr_whole;
	}
	t->ctx->ops->check_inode(t->ctx, &bd, &be);
}

/*
 * A bulk record without attributes: nothing to list.  (One added since
 * the record was read is left for the next run: never a false alarm.)
 */
static bool bulk_no_xattrs(const struct walk_entry *e)
{
	return e->bulk && !(e->bulk->flags & BACKEND_INODE_XATTRS);
}

/* The attributes of an entry, unless its bulk record says it has none. */
static void check_xattrs(struct walk_thread *t, struct check_thread *ct,
			 const struct walk_dir *d, const struct walk_entry *e, int fd)
{
	if (bulk_no_xattrs(e)) {
		ct->xattrs.ledger_named = false;
		return;
	}
	xattrs_check_entry(t, &ct->xattrs, d, e, fd);
}

/*
 * -x: a file whose bulk record shows attributes may carry a checksum
 * record, which the ledger notes with the file's size and times as the
 * VFS has them (a bulk record's size is the disk's): it is opened.
 */
static bool ledger_needs_open(const struct scrub_ctx *ctx, const struct walk_entry *e)
{
	return ctx->ledger && e->bulk && !bulk_no_xattrs(e);
}

/* Note a regular file for the ledger, as the VFS has it (vfs: its statx after the open). */
static void note_for_ledger(struct scrub_ctx *ctx, struct check_thread *ct,
			    const struct walk_entry *e, const struct statx *vfs)
{
	struct walk_entry now;

	if (!e->bulk) {
		ledger_note(ctx->ledger, &ct->ledger, e, ct->xattrs.ledger_named);
		return;
	}
	now = *e;
	now.stx = *vfs;
	ledger_note(ctx->ledger, &ct->ledger, &now, ct->xattrs.ledger_named);
}

static void check_regular(struct walk_thread *t, struct check_thread *ct,
			  struct walk_dir *d, const struct walk_entry *e, bool first)
{
	struct scrub_ctx *ctx = t->ctx;

	/*
	 * Its bulk record leaves no map to read: not opened, its attributes
	 * (if it may have any) listed by path, as a symlink's are.
	 */
	if (bulk_no_blocks(e) && !ledger_needs_open(ctx, e)) {
		check_xattrs(t, ct, d, e, -1);
		backend_check_inode(t, d, e, -1, NULL, false);
		return;
	}
	/* Or its map from the backend's bulk records: not opened either. */
	if (first && !ledger_needs_open(ctx, e) && extents_check_bulk(t, &ct->extents, e)) {
		check_xattrs(t, ct, d, e, -1);
		backend_check_inode(t, d, e, -1, NULL, true);
		return;
	}
	struct statx vfs;
	int fd = walk_open_file_stx(t, d, e, 0, &vfs);

	ct->extents.whole_ok = false;	/* until this file's map is read */
	if (fd == -EOPNOTSUPP)
		str_info(ctx, CHECK_INODE_VERITY_UNSUPPORTED, d->node, e->name, e->stx.stx_ino,
			 "an fs-verity file, and this kernel has no fs-verity: it cannot be "
			 "opened; its data and FIEMAP map are not read");
	if (fd == -ENOKEY || fd == -EOPNOTSUPP) {
		/* Encrypted (key not loaded), or verity: what needs no open is still checked. */
		check_xattrs(t, ct, d, e, -1);
		backend_check_inode(t, d, e, -1, NULL, false);
	}
	if (fd < 0)
		return;
	if (first)
		extents_check_file(t, &ct->extents, d, e, fd);
	check_xattrs(t, ct, d, e, fd);
	if (ledger_wants(ctx->ledger, ct->xattrs.ledger_named)) {
		if (ctx->ops->data_checksummed && ctx->ops->data_checksummed(ctx, fd))
			ledger_leave_to_fs(ctx->ledger);
		else
			note_for_ledger(ctx, ct, e, &vfs);
	}
	backend_check_inode(t, d, e, fd, &vfs, false);
	close(fd);
}

/*
 * A single-link inode reached by a second name.  A rename during the scan
 * changes its ctime; otherwise it is a suspect for phase 4, which counts
 * its names again before it says anything.
 */
static void second_name_of_single_link(struct walk_thread *t, struct walk_dir *d,
				       const struct walk_entry *e)
{
	struct scrub_ctx *ctx = t->ctx;
	const struct statx *stx = &e->stx;

	if (stx_changed_during_scan(ctx, stx)) {
		str_changed(ctx, CHECK_NLINK_COUNT, d->node, e->name, stx->stx_ino,
			    "single-link inode reached by a second name");
		return;
	}
	linktable_add(ctx->links, stx_devno(stx), stx->stx_ino, 1, stx_ns(&stx->stx_ctime),
		      d->node, e->name, e->namelen, 2);
}

static void inode_entry(struct walk_thread *t, struct walk_dir *d,
			const struct walk_entry *e)
{
	struct scrub_ctx *ctx = t->ctx;
	struct check_thread *ct = t->vstate;
	const struct statx *stx = &e->stx;

	check_name(t, ct, d, e);
	if (e->stat_err) {
		stat_failed(t, ct, d, e);
		return;
	}
	if (e->submount) {
		str_info(ctx, CHECK_WALK_SUBMOUNT, d->node, e->name, 0,
			 "another filesystem is mounted here: not entered");
		atomic_store(&ctx->names_hidden, true);
		return;
	}
	/* btrfs subvolumes: d_ino is the subvolume id, not the root inode. */
	if (e->d_ino != stx->stx_ino && stx_devno(stx) == d->node->dev &&
	    !(ctx->quirks & QUIRK_DINO_UNRELATED))
		add_suspect(ct, CHECK_DIRENT_INO, e);
	if (e->d_type != DT_UNKNOWN && e->d_type != mode_to_dtype(stx->stx_mode))
		add_suspect(ct, CHECK_DIRENT_TYPE, e);
	check_nlink_zero(t, d, e);

	bool first = true;
	if (!S_ISDIR(stx->stx_mode) && stx->stx_nlink > 1) {
		first = linktable_add(ctx->links, stx_devno(stx), stx->stx_ino,
				      stx->stx_nlink, stx_ns(&stx->stx_ctime), d->node,
				      e->name, e->namelen, 1);
		if (!first && !atomic_load_explicit(&ctx->links_share_ino, memory_order_relaxed))
			atomic_store(&ctx->links_share_ino, true);
	} else if (!S_ISDIR(stx->stx_mode) && e->seen_before) {
		first = false;
		second_name_of_single_link(t, d, e);
	}
	if (first && !S_ISDIR(stx->stx_mode)) {
		t->stats.inodes++;
		progress_add(&ctx->progress_done, 1);
		t->stats.blocks += stx->stx_blocks;
	}

	switch (stx->stx_mode & S_IFMT) {
	case S_IFREG:
		t->stats.files++;
		check_regular(t, ct, d, e, first);
		return;
	case S_IFDIR:
		return;		/* checked when it is read */
	case S_IFLNK:
		t->stats.symlinks++;
		check_symlink(t, ct, d, e);
		break;
	default:
		t->stats.specials++;
		break;
	}
	check_xattrs(t, ct, d, e, -1);
	backend_check_inode(t, d, e, -1, NULL, false);
}

static void inode_dir_begin(struct walk_thread *t, struct walk_dir *d)
{
	struct check_thread *ct = t->vstate;

	name_set_reset(&ct->names);
	name_check_dir_begin(t, &ct->name_check, d);
	clear_suspects(ct);
}

static int suspect_cmp(const void *a, const void *b)
{
	const struct suspect *x = a, *y = b;

	if (x->namelen != y->namelen)
		return x->namelen < y->namelen ? -1 : 1;
	return memcmp(x->name, y->name, x->namelen);
}

/* Second read of the directory: what do the suspects' entries say now? */
struct reread {
	struct check_thread *ct;
	uint64_t dot_ino;
	bool seen_dot, seen_dotdot;
};

static int reread_entry(void *arg, const char *name, size_t namelen,
			uint64_t d_ino, unsigned char d_type)
{
	struct reread *rr = arg;
	struct check_thread *ct = rr->ct;
	size_t lo = 0, hi = ct->nr_suspects;

	if (namelen == 1 && name[0] == '.') {
		rr->dot_ino = d_ino;
		rr->seen_dot = true;
	}
	if (namelen == 2 && name[0] == '.' && name[1] == '.')
		rr->seen_dotdot = true;
	/* lower bound by (length, bytes), then every suspect with this name */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct suspect *s = &ct->suspects[mid];
		int c = s->namelen != namelen ? (s->namelen < namelen ? -1 : 1)
					      : memcmp(s->name, name, namelen);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < ct->nr_suspects; i++) {
		struct suspect *s = &ct->suspects[i];

		if (s->namelen != namelen || memcmp(s->name, name, namelen))
			break;
		s->seen++;
		s->re_dino = d_ino;
		s->re_dtype = d_type;
	}
	return 0;
}

/* Report one suspect that survived the second look. */
static void confirm_suspect(struct walk_thread *t, struct walk_dir *d, struct suspect *s)
{
	struct scrub_ctx *ctx = t->ctx;
	struct statx now;
	struct strbuf esc = STRBUF_INIT;

	if (!strcmp(s->check, CHECK_NAME_EMPTY) || !strcmp(s->check, CHECK_NAME_SLASH)) {
		if (!s->seen)
			return;
		names_escape(&esc, s->name, s->namelen);
		if (report_dino(ctx, s->d_ino))
			str_error(ctx, s->check, d->node, NULL, s->d_ino,
				  "directory has an entry with an invalid name '%s' (inode %llu)",
				  esc.buf, (unsigned long long)s->d_ino);
		else
			str_error(ctx, s->check, d->node, NULL, 0,
				  "directory has an entry with an invalid name '%s'", esc.buf);
		strbuf_release(&esc);
		return;
	}
	if (!strcmp(s->check, CHECK_NAME_DUPLICATE)) {
		if (s->seen >= 2)
			str_error(ctx, s->check, d->node, s->name, 0,
				  "name appears %u times in the directory", s->seen);
		return;
	}
	/* dirent vs inode: same dirent and the same inode on the second look? */
	if (s->seen != 1 || s->re_dino != s->d_ino || s->re_dtype != s->d_type)
		return;
	if (!strcmp(s->check, CHECK_DIRENT_DANGLING)) {
		if (stx_get(d->fd, s->name, &now) != -ENOENT)
			return;
		if (report_dino(ctx, s->d_ino))
			str_error(ctx, s->check, d->node, s->name, s->d_ino,
				  "directory entry points to inode %llu, which cannot be found",
				  (unsigned long long)s->d_ino);
		else
			str_error(ctx, s->check, d->node, s->name, 0,
				  "directory entry names an inode that cannot be found");
		return;
	}
	if (stx_get(d->fd, s->name, &now) < 0 || !stx_unchanged(&now, &s->stx)) {
		str_changed(ctx, s->check, d->node, s->name, s->d_ino, "directory entry");
		return;
	}
	if (!strcmp(s->check, CHECK_DIRENT_INO))
		str_error(ctx, s->check, d->node, s->name, s->stx.stx_ino,
			  "directory entry says inode %llu, the name resolves to inode %llu",
			  (unsigned long long)s->d_ino, (unsigned long long)s->stx.stx_ino);
	else
		str_error(ctx, s->check, d->node, s->name, s->stx.stx_ino,
			  "directory entry says %s, the inode is a %s", dtype_name(s->d_type),
			  dtype_name(mode_to_dtype(s->stx.stx_mode)));
}

/* Directory-level suspects: ".", nlink; decided with the same rule. */
/*
 * Every Linux filesystem returns "." and ".." (ext4 returns nothing at all
 * from a directory block that fails its checksum); FUSE daemons may not.
 */
static bool dots_missing(const struct scrub_ctx *ctx, const struct walk_dir *d)
{
	return (!d->seen_dot || !d->seen_dotdot) && !d->read_err &&
	       !(ctx->quirks & QUIRK_DINO_UNRELATED);
}

static void check_dir_itself(struct walk_thread *t, struct walk_dir *d,
			     const struct statx *after, uint64_t dot_ino, bool seen_dots)
{
	struct scrub_ctx *ctx = t->ctx;
	uint64_t nlink = d->before.stx_nlink;

	if (d->seen_dot && d->dot_ino != d->before.stx_ino && dot_ino == d->dot_ino &&
	    !(ctx->quirks & QUIRK_DINO_UNRELATED))
		str_error(ctx, CHECK_DIR_DOT, d->node, NULL, d->before.stx_ino,
			  "'.' points to inode %llu, not to the directory itself",
			  (unsigned long long)d->dot_ino);
	if (dots_missing(ctx, d) && !seen_dots)
		str_error(ctx, CHECK_DIR_DOT, d->node, NULL, d->before.stx_ino,
			  "reading the directory returns no '%s' entry",
			  d->seen_dot ? ".." : ".");
	/*
	 * nlink 1 means "not counted" (btrfs, overlayfs merged directories,
	 * ext4 dir_nlink beyond 65000 subdirectories), as find(1) assumes.
	 */
	if (nlink != 1 && nlink != 2 + d->nr_subdirs && after->stx_nlink == nlink &&
	    !d->read_err && !(ctx->quirks & QUIRK_DIR_NLINK_ANY))
		str_error(ctx, CHECK_DIR_NLINK, d->node, NULL, d->before.stx_ino,
			  "directory link count is %llu but it has %llu subdirectories "
			  "(expected %llu)", (unsigned long long)nlink, d->nr_subdirs,
			  d->nr_subdirs + 2);
}

static bool dir_needs_second_look(const struct scrub_ctx *ctx, const struct walk_dir *d,
				  const struct check_thread *ct)
{
	uint64_t nlink = d->before.stx_nlink;
	bool dino_unrelated = ctx->quirks & QUIRK_DINO_UNRELATED;

	return ct->nr_suspects || dots_missing(ctx, d) ||
	       (d->seen_dot && d->dot_ino != d->before.stx_ino && !dino_unrelated) ||
	       (nlink != 1 && nlink != 2 + d->nr_subdirs && !d->read_err &&
		!(ctx->quirks & QUIRK_DIR_NLINK_ANY));
}

static void queue_dotdot_suspect(struct scrub_ctx *ctx, struct walk_dir *d)
{
	struct dotdot_suspect *s = xmalloc(sizeof(*s));

	dir_node_get(d->node);
	s->dir = d->node;
	s->dotdot_ino = d->dotdot_ino;
	pthread_mutex_lock(&ctx->suspects_lock);
	s->next = ctx->dotdot_suspects;
	ctx->dotdot_suspects = s;
	pthread_mutex_unlock(&ctx->suspects_lock);
}

static int no_entry(void *arg, const char *name, size_t namelen, uint64_t d_ino,
		    unsigned char d_type)
{
	(void)arg, (void)name, (void)namelen, (void)d_ino, (void)d_type;
	return 0;
}

/*
 * A read that never ended, read again from the start: damage only if it
 * loops again (a directory changing under its reader can, once in a great
 * while, hand back an entry it gave -- a name made again with the same
 * inode number at a hash collision on a buffer's edge).
 */
static bool loops_again(struct walk_thread *t, const struct walk_dir *d)
{
	return dirent_iterate(d->fd, t->dents, t->dents_size, no_entry, NULL) == -DIRENT_LOOPS;
}

static void report_read_error(struct walk_thread *t, struct walk_dir *d)
{
	struct scrub_ctx *ctx = t->ctx;

	/*
	 * getdents on a directory removed while it was read (rmdir, or a
	 * btrfs snapshot deleted under the walk) fails with ENOENT: a race.
	 */
	if (d->read_err == DIRENT_LOOPS && loops_again(t, d))
		str_error(ctx, CHECK_DIR_UNREADABLE, d->node, NULL, d->before.stx_ino,
			  "reading the directory never ends: the kernel gives the same entries "
			  "again (a loop in its index); the entries after them are not checked");
	else if (d->read_err == DIRENT_LOOPS)
		str_changed(ctx, CHECK_DIR_UNREADABLE, d->node, NULL, d->before.stx_ino,
			    "the directory's reading gave an entry twice, then ended when read "
			    "again");
	else if (d->read_err == ENOENT || d->read_err == ESTALE)
		str_changed(ctx, CHECK_WALK_MOVED, d->node, NULL, d->before.stx_ino,
			    "directory was removed while it was read");
	else if (errno_is_corruption(d->read_err))
		str_error(ctx, CHECK_DIR_UNREADABLE, d->node, NULL, d->before.stx_ino,
			  "cannot read the directory entries: %s", strerror(d->read_err));
	else
		report_operational(ctx, d->node, NULL, d->read_err,
				   "cannot read the directory");
	/* Names in the unread part are not seen: link counts cannot be trusted. */
	atomic_store(&ctx->names_hidden, true);
}

static void inode_dir_end(struct walk_thread *t, struct walk_dir *d)
{
	struct scrub_ctx *ctx = t->ctx;
	struct check_thread *ct = t->vstate;
	struct statx after;

	if (d->read_err)
		report_read_error(t, d);
	name_check_dir_end(t, &ct->name_check, d);
	if (d->locked)
		str_info(ctx, CHECK_DIR_LOCKED, d->node, NULL, d->before.stx_ino,
			 "encrypted directory whose key is not loaded: the contents, extent maps "
			 "and data of its files (%llu here) are not checked; names are checked as "
			 "the encoded bytes the kernel shows", d->nr_locked);
	xattrs_check_dir(t, &ct->xattrs, d);
	if (d->node->parent && d->seen_dotdot && d->dotdot_ino != d->node->parent->ino &&
	    !(ctx->quirks & QUIRK_DINO_UNRELATED))
		queue_dotdot_suspect(ctx, d);
	if (ctx->ops->check_dir) {
		struct backend_dir bd = backend_dir_of(t, d);

		ctx->ops->check_dir(ctx, &bd);
	}
	if (!dir_needs_second_look(ctx, d, ct))
		return;

	if (stx_get(d->fd, NULL, &after) < 0 || !stx_unchanged(&after, &d->before)) {
		for (size_t i = 0; i < ct->nr_suspects; i++)
			str_changed(ctx, ct->suspects[i].check, d->node, ct->suspects[i].name,
				    report_dino(ctx, ct->suspects[i].d_ino), "directory");
		if (!ct->nr_suspects)
			str_changed(ctx, CHECK_DIR_NLINK, d->node, NULL, d->before.stx_ino,
				    "directory");
		return;
	}
	struct reread rr = { .ct = ct, .dot_ino = d->dot_ino };

	sort_items(ct->suspects, ct->nr_suspects, sizeof(*ct->suspects), suspect_cmp);
	int ret = dirent_iterate(d->fd, t->dents, t->dents_size, reread_entry, &rr);
	struct statx final;

	if (ret < 0 || stx_get(d->fd, NULL, &final) < 0 || !stx_unchanged(&final, &d->before)) {
		str_changed(ctx, CHECK_DIR_NLINK, d->node, NULL, d->before.stx_ino,
			    "directory (second read)");
		return;
	}
	for (size_t i = 0; i < ct->nr_suspects; i++)
		confirm_suspect(t, d, &ct->suspects[i]);
	if (ct->suspects_overflow)
		str_info(ctx, CHECK_DIRENT_INO, d->node, NULL, d->before.stx_ino,
			 "more than %d suspicious entries: only the first were examined",
			 MAX_SUSPECTS);
	check_dir_itself(t, d, &final, rr.dot_ino, rr.seen_dot && rr.seen_dotdot);
}

const struct walk_visitor inode_check_visitor = {
	.name = "inode checks",
	.thread_init = check_thread_init,
	.thread_free = check_thread_free,
	.dir_begin = inode_dir_begin,
	.entry = inode_entry,
	.dir_end = inode_dir_end,
	.keep_reached = true,
	.bulk = true,
};
