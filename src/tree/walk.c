/*
 * walk: the parallel directory-tree walk; see walk.h.
 */
#include "tree/walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fscrypt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tree/backend_core.h"
#include "backends/backend.h"
#include "report/checks.h"
#include "lib/inokey.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/inoset.h"
#include "lib/names.h"
#include "data/ledger.h"
#include "lib/workqueue.h"

/*
 * 64 KiB of getdents64 records: a few hundred entries per call, enough to
 * amortise the syscall without holding much memory per thread.
 */
#define DENTS_BUFSIZE (64 * 1024)
/*
 * The most entries one such buffer holds: the smallest getdents64 record
 * is 24 bytes (19 of header, a 1-byte name and its NUL, 8-byte aligned).
 */
#define DENTS_MAX_ENTRIES (DENTS_BUFSIZE / 24)


#define FILE_OPEN_FLAGS (O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)

/*
 * Is the file opened (now) the one the walk stat'ed (then)?  Its number;
 * where numbers change with nothing moved (QUIRK_INO_UNSTABLE), a number
 * that changed with nothing else is the same file.
 */
static bool same_file(const struct scrub_ctx *ctx, const struct statx *now,
		      const struct statx *then)
{
	if (now->stx_ino == then->stx_ino)
		return true;
	if (!(ctx->quirks & QUIRK_INO_UNSTABLE))
		return false;
	struct statx renumbered = *now;

	renumbered.stx_ino = then->stx_ino;
	return stx_unchanged(&renumbered, then);
}

int walk_open_file(struct walk_thread *t, const struct walk_dir *d,
		   const struct walk_entry *e, int extra_flags)
{
	struct statx now;

	return walk_open_file_stx(t, d, e, extra_flags, &now);
}

/*
 * An fs-verity file: a kernel built without fs-verity refuses to open one
 * (EOPNOTSUPP), and says so for nothing else ext4 or f2fs keep.  A fresh
 * statx, as the walk's record may come from the backend's bulk scan.
 */
static bool is_verity(const struct walk_dir *d, const struct walk_entry *e)
{
	struct statx now;

	return stx_get(d->fd, e->name, &now) == 0 &&
	       (now.stx_attributes & STATX_ATTR_VERITY) && now.stx_ino == e->stx.stx_ino;
}

int walk_open_file_stx(struct walk_thread *t, const struct walk_dir *d,
		       const struct walk_entry *e, int extra_flags, struct statx *out)
{
	struct scrub_ctx *ctx = t->ctx;
	int flags = FILE_OPEN_FLAGS | O_NOATIME | extra_flags;
	int fd = openat(d->fd, e->name, flags);
	struct statx now;

	if (fd < 0 && errno == EPERM)
		fd = openat(d->fd, e->name, flags & ~O_NOATIME);
	if (fd < 0 && errno_is_inode_damage(ctx, errno) &&
	    !(errno == EINVAL && (extra_flags & O_DIRECT)))
		fd = openat(d->fd, e->name, flags & ~O_NOATIME);	/* look again */
	if (fd < 0) {
		int err = errno;

		if (err == EINVAL && (extra_flags & O_DIRECT))
			return -EINVAL;
		if (err == ENOKEY) {
			/* fscrypt: the key is not loaded; not damage, nothing we can do. */
			t->nr_locked++;
			return -ENOKEY;
		}
		if (err == EOPNOTSUPP && is_verity(d, e))
			return -EOPNOTSUPP;
		if (err == ENOENT || err == ELOOP || err == ENXIO || err == EWOULDBLOCK ||
		    err == ENOTDIR)
			return -1;	/* gone, replaced or leased: not ours to check */
		/* ELOOP above: O_NOFOLLOW met a symlink, the name was replaced. */
		if (errno_is_inode_damage(ctx, err))
			str_error(ctx, CHECK_INODE_UNREADABLE, d->node, e->name,
				  e->stx.stx_ino, "cannot open the file: %s", strerror(err));
		else
			report_operational(ctx, d->node, e->name, err, "cannot open");
		return -1;
	}
	if (stx_get(fd, NULL, &now) < 0 || !same_file(ctx, &now, &e->stx)) {
		close(fd);
		return -1;	/* replaced since the walk's statx */
	}
	*out = now;
	return fd;
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Iterate one getdents64 buffer; see dirent_iterate(). */
static int dirent_buffer(char *buf, long n, dirent_fn fn, void *arg)
{
	for (long pos = 0; pos < n;) {
		struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + pos);
		size_t max = d->d_reclen - offsetof(struct linux_dirent64, d_name);
		size_t len = strnlen(d->d_name, max);
		int ret = fn(arg, d->d_name, len, d->d_ino, d->d_type);

		if (ret)
			return ret;
		pos += d->d_reclen;
	}
	return 0;
}

/* Called with each getdents64 buffer before its entries are (may be NULL). */
typedef void (*dirent_batch_fn)(void *arg, const char *buf, long n);

/*
 * A directory whose reading never ends.  A damaged index can send the
 * kernel back to entries it already gave (a btrfs DIR_INDEX key whose
 * offset is past INT_MAX: every getdents64 from then on returns the entry
 * it ended the last buffer with), and every reader then loops for ever --
 * 16 million entries in two minutes in a fuzzed image.  A stream that
 * makes progress never gives one entry (name and d_off cookie) twice in a
 * row, whatever changes meanwhile: a buffer that begins with the entry the
 * last one ended with is stopped before its entries are visited (so none
 * is counted twice).  Longer cycles -- the same position gives the same
 * entries -- are caught by Brent's cycle detection over a hash of each
 * buffer's entries, within two periods of the loop, in constant memory.
 */
struct dirent_loop {
	uint64_t last;		/* the previous buffer's last entry */
	uint64_t saved;		/* the buffer at the last power of two */
	unsigned long power, lam;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h;
}

/* An entry's identity: what the kernel wrote of it (padding left out). */
static uint64_t dirent_key(const struct linux_dirent64 *d)
{
	size_t max = d->d_reclen - offsetof(struct linux_dirent64, d_name);
	uint64_t h = name_hash(d->d_name, strnlen(d->d_name, max));

	h = mix(h, d->d_ino);
	h = mix(h, (uint64_t)d->d_off);
	return mix(h, d->d_type);
}

static bool dirent_loops(struct dirent_loop *l, const char *buf, long n)
{
	uint64_t first = 0, h = 0, key = 0;

	for (long pos = 0; pos < n;) {
		const struct linux_dirent64 *d = (const struct linux_dirent64 *)(buf + pos);

		key = dirent_key(d);
		if (!pos)
			first = key;
		h = mix(h, key);
		pos += d->d_reclen;
	}
	if (l->power && (first == l->last || h == l->saved))
		return true;
	l->last = key;
	if (l->lam == l->power) {
		l->saved = h;
		l->power = l->power ? l->power * 2 : 1;
		l->lam = 0;
	}
	l->lam++;
	return false;
}

static int dirent_iterate_batched(int fd, char *buf, size_t bufsize, dirent_batch_fn batch,
				  dirent_fn fn, void *arg)
{
	struct dirent_loop loop = { 0 };

	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, bufsize);

		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		if (dirent_loops(&loop, buf, n))
			return -DIRENT_LOOPS;
		if (batch)
			batch(arg, buf, n);
		int ret = dirent_buffer(buf, n, fn, arg);
		if (ret)
			return ret;
	}
}

int dirent_iterate(int fd, char *buf, size_t bufsize, dirent_fn fn, void *arg)
{
	return dirent_iterate_batched(fd, buf, bufsize, NULL, fn, arg);
}

struct walk_state {
	struct scrub_ctx *ctx;
	const struct walk_visitor *v;
	bool use_bulk;			/* ask the backend's bulk_inodes hook */
	/*
	 * FSCRUB_DEBUG_AFTER_BULK: a shell command run once, after the first
	 * bulk records and before their entries are visited (for the tests of
	 * an inode that changes in between).
	 */
	const char *after_bulk;
	atomic_bool after_bulk_ran;
	bool open_ahead;		/* dircache_open_ahead() each directory found */
	struct inoset *seen;		/* every inode reached */
	struct workqueue wq;
	struct walk_thread *threads;
};

struct dir_visit {
	struct walk_state *ws;
	struct walk_thread *t;
	struct walk_dir *d;
	struct wq_item *found;		/* subdirectories of this buffer, last found first */
};

/*
 * Queue the subdirectories found in a getdents buffer once it has been
 * visited, the last found first: the stack then hands them to the walk
 * threads in the directory's order, which is mostly the order they were
 * made in, and so the order their inodes, blocks and files lie in on the
 * disk.  Queued as found, the stack handed them out last first, against
 * the disk's order: on a million small files in 9 600 directories on XFS
 * the scan took 5.98 s, in this order 5.56 s (medians of 5, cold); ext4
 * takes its inodes from its own reads and did not change (2.35 s).
 */
static void queue_found(struct dir_visit *dv)
{
	while (dv->found) {
		struct wq_item *item = dv->found;

		dv->found = item->next;
		workqueue_add(&dv->ws->wq, item);
	}
}

static bool is_submount(const struct scrub_ctx *ctx, const struct statx *stx)
{
	if (ctx->have_mnt_id && (stx->stx_mask & STATX_MNT_ID))
		return stx->stx_mnt_id != ctx->walk_mnt_id;
	return (stx->stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	       (stx->stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* A directory reached by a second name: moved during the scan, or damage. */
static void second_dir_name(struct scrub_ctx *ctx, struct walk_dir *d,
			    const struct walk_entry *e)
{
	struct statx again;

	if (stx_changed_during_scan(ctx, &e->stx) ||
	    stx_get(d->fd, e->name, &again) < 0 || !stx_unchanged(&again, &e->stx))
		str_changed(ctx, CHECK_WALK_MOVED, d->node, e->name, e->stx.stx_ino,
			    "directory reached a second time: moved during the scan");
	else
		str_error(ctx, CHECK_DIR_MULTIPLY_LINKED, d->node, e->name, e->stx.stx_ino,
			  "directory was already reached by another name");
}

/*
 * Before a getdents buffer's entries are visited: the backend's records
 * of the inodes of its non-directory entries (directories are stat'ed:
 * the walk needs their mount id), in t->bulk, sorted by inode.
 */
static void bulk_fetch(struct dir_visit *dv, const char *buf, long n)
{
	struct walk_thread *t = dv->t;
	struct scrub_ctx *ctx = t->ctx;
	size_t k = 0, u = 0;

	t->nr_bulk = 0;
	for (long pos = 0; pos < n;) {
		const struct linux_dirent64 *d = (const struct linux_dirent64 *)(buf + pos);

		if (d->d_type != DT_DIR && d->d_type != DT_UNKNOWN && d->d_ino &&
		    k < DENTS_MAX_ENTRIES)
			t->bulk_inos[k++] = d->d_ino;
		pos += d->d_reclen;
	}
	if (!k || scrub_should_stop(ctx))
		return;
	sort_items(t->bulk_inos, k, sizeof(*t->bulk_inos), u64_cmp);
	for (size_t i = 0; i < k; i++)
		if (!u || t->bulk_inos[u - 1] != t->bulk_inos[i])
			t->bulk_inos[u++] = t->bulk_inos[i];
	struct backend_dir bd = backend_dir_of(t, dv->d);

	if (ctx->ops->bulk_inodes(ctx, &bd, t->bulk_inos, u, t->bulk) <= 0)
		return;
	t->nr_bulk = u;
	if (dv->ws->after_bulk && !atomic_exchange(&dv->ws->after_bulk_ran, true) &&
	    system(dv->ws->after_bulk) != 0)
		report_verbose(ctx, "FSCRUB_DEBUG_AFTER_BULK failed");
}

/* Before a getdents buffer's entries are visited: the last buffer's subdirectories queued. */
static void buffer_read(void *arg, const char *buf, long n)
{
	struct dir_visit *dv = arg;

	queue_found(dv);
	if (dv->ws->use_bulk)
		bulk_fetch(dv, buf, n);
}

/*
 * The bulk record that may stand for this entry's statx: one of a
 * single-link non-directory whose type is the entry's.  Anything else
 * (a hard link, whose count phase 4 compares with its names; a type the
 * entry disagrees with, a suspect) is stat'ed.
 */
/*
 * An entry whose inode the kernel refused as damaged (inode.unreadable),
 * where d_ino is the inode's number (the directory's own st_dev then).
 */
static bool unreadable_but_named(const struct scrub_ctx *ctx, const struct walk_entry *e)
{
	return e->stat_err && e->stat_err != EINVAL && e->d_ino &&
	       errno_is_stat_damage(ctx, e->stat_err) &&
	       !(ctx->quirks & QUIRK_DINO_UNRELATED);
}

static const struct backend_inode *bulk_record(const struct walk_thread *t, uint64_t d_ino,
					       unsigned char d_type)
{
	size_t i = bulk_index_of(t->bulk_inos, t->nr_bulk, d_ino);

	if (i == t->nr_bulk)
		return NULL;
	const struct backend_inode *b = &t->bulk[i];

	if (b->ino != d_ino || b->nlink != 1 || S_ISDIR(b->mode) ||
	    ((b->mode & S_IFMT) >> 12) != d_type)
		return NULL;
	return b;
}

static void ts_of_ns(struct statx_timestamp *ts, int64_t ns)
{
	int64_t sec = ns / 1000000000LL, nsec = ns % 1000000000LL;

	if (nsec < 0) {
		sec--;
		nsec += 1000000000LL;
	}
	ts->tv_sec = sec;
	ts->tv_nsec = (uint32_t)nsec;
}

/*
 * The statx the walk would have got, as far as the record tells; its
 * st_dev and subvolume are its directory's (d): a non-directory is in its
 * directory's subvolume (btrfs gives each its own st_dev).
 */
static void stx_of_bulk(const struct scrub_ctx *ctx, const struct walk_dir *d,
			const struct backend_inode *b, struct statx *stx)
{
	uint64_t subvol;

	memset(stx, 0, sizeof(*stx));
	stx->stx_mask = STATX_BASIC_STATS | (b->btime_ns ? STATX_BTIME : 0);
	if (stx_subvol(&d->before, &subvol)) {
		stx->stx_mask |= STATX_SUBVOL;
		memcpy((char *)stx + STATX_SUBVOL_OFFSET, &subvol, sizeof(subvol));
	}
	stx->stx_blksize = ctx->root_stx.stx_blksize;
	stx->stx_nlink = b->nlink;
	stx->stx_uid = b->uid;
	stx->stx_gid = b->gid;
	stx->stx_mode = b->mode;
	stx->stx_ino = b->ino;
	stx->stx_size = b->size;
	stx->stx_blocks = b->blocks;
	ts_of_ns(&stx->stx_atime, b->atime_ns);
	ts_of_ns(&stx->stx_btime, b->btime_ns);
	ts_of_ns(&stx->stx_ctime, b->ctime_ns);
	ts_of_ns(&stx->stx_mtime, b->mtime_ns);
	stx->stx_dev_major = d->before.stx_dev_major;
	stx->stx_dev_minor = d->before.stx_dev_minor;
}

static int visit_entry(void *arg, const char *name, size_t namelen,
		       uint64_t d_ino, unsigned char d_type)
{
	struct dir_visit *dv = arg;
	struct scrub_ctx *ctx = dv->ws->ctx;
	struct walk_dir *d = dv->d;
	struct walk_entry e = {
		.name = name, .namelen = namelen, .d_ino = d_ino, .d_type = d_type,
	};

	if (scrub_should_stop(ctx))
		return 1;
	if (namelen == 1 && name[0] == '.') {
		d->seen_dot = true;
		d->dot_ino = d_ino;
		return 0;
	}
	if (namelen == 2 && name[0] == '.' && name[1] == '.') {
		d->seen_dotdot = true;
		d->dotdot_ino = d_ino;
		return 0;
	}
	d->nr_entries++;
	dv->t->stats.entries++;
	/* A name with '/' or NUL cannot be looked up; the visitor reports it. */
	if (namelen == 0 || memchr(name, '/', namelen)) {
		e.stat_err = EINVAL;
	} else if ((e.bulk = bulk_record(dv->t, d_ino, d_type)) != NULL) {
		stx_of_bulk(ctx, d, e.bulk, &e.stx);
		dv->t->stats.bulk++;
	} else {
		int ret = stx_get(d->fd, name, &e.stx);

		e.stat_err = ret < 0 ? -ret : 0;
	}
	if (!e.stat_err && S_ISDIR(e.stx.stx_mode)) {
		d->nr_subdirs++;
		e.submount = is_submount(ctx, &e.stx);
	}
	if (!e.stat_err && !e.submount) {
		/* Every inode goes in, for backend_reached(); a second name of a
		 * multiply-linked file is not "seen before", it is expected. */
		bool seen = inoset_test_and_set(dv->ws->seen, stx_devno(&e.stx),
						e.stx.stx_ino);

		e.seen_before = seen && (S_ISDIR(e.stx.stx_mode) || e.stx.stx_nlink == 1);
	} else if (unreadable_but_named(ctx, &e)) {
		/*
		 * A name reaches it: its finding is the stat's, not a lost
		 * inode's, and a directory by its entry's type is one of the
		 * subdirectories the link count counts -- but one refused
		 * with ELOOP, a second name of a directory above.
		 */
		inoset_test_and_set(dv->ws->seen, d->node->dev, d_ino);
		d->nr_subdirs += d_type == DT_DIR && e.stat_err != ELOOP;
	}
	dv->ws->v->entry(dv->t, d, &e);
	if (e.seen_before && S_ISDIR(e.stx.stx_mode))
		second_dir_name(ctx, d, &e);
	else if (!e.stat_err && S_ISDIR(e.stx.stx_mode) && !e.submount) {
		struct dir_node *child = dir_node_new(d->node, name, namelen,
						      stx_devno(&e.stx), e.stx.stx_ino);

		child->has_subvol = stx_subvol(&e.stx, &child->subvol);
		if (ctx->quirks & (QUIRK_DIR_INO_UNSTABLE | QUIRK_INO_UNSTABLE)) {
			child->fid_how = ctx->quirks & QUIRK_DIR_INO_UNSTABLE ?
					 DIR_ID_HANDLE : DIR_ID_ATTRS;
			child->fid = dir_fid(d->fd, name, child->fid_how);
		}
		if (dv->ws->open_ahead)
			dircache_open_ahead(&ctx->dcache, child);
		child->work.next = dv->found;
		dv->found = &child->work;
	}
	return 0;
}

/*
 * Is this encrypted directory's key absent?  Asked of the kernel for v2
 * policies only: a v1 key may sit in a process keyring the kernel's
 * answer does not cover, so there only ENOKEY on open tells.
 */
static bool dir_key_absent(int fd, const struct statx *stx)
{
	struct fscrypt_get_policy_ex_arg pol = { .policy_size = sizeof(pol.policy) };
	struct fscrypt_get_key_status_arg ks = {
		.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER,
	};

	if (!(stx->stx_attributes & STATX_ATTR_ENCRYPTED) ||
	    ioctl(fd, FS_IOC_GET_ENCRYPTION_POLICY_EX, &pol) < 0 ||
	    pol.policy.version != FSCRYPT_POLICY_V2)
		return false;
	memcpy(ks.key_spec.u.identifier, pol.policy.v2.master_key_identifier,
	       FSCRYPT_KEY_IDENTIFIER_SIZE);
	return ioctl(fd, FS_IOC_GET_ENCRYPTION_KEY_STATUS, &ks) == 0 &&
	       ks.status == FSCRYPT_KEY_STATUS_ABSENT;
}

static void walk_dir_fail(struct scrub_ctx *ctx, struct dir_node *node, int err)
{
	/* The names below it are not seen: link counts cannot be trusted. */
	atomic_store(&ctx->names_hidden, true);
	if (err == ESTALE || err == ENOENT || err == ENOTDIR || err == ELOOP)
		str_changed(ctx, CHECK_WALK_MOVED, node, NULL, node->ino,
			    "directory was moved, replaced or removed before it was read");
	else if (errno_is_inode_damage(ctx, err))
		str_error(ctx, CHECK_DIR_UNREADABLE, node, NULL, node->ino,
			  "cannot open directory: %s", strerror(err));
	else if (!inoset_test_and_set(ctx->dirs_unopened, node->dev, node->ino))
		report_operational(ctx, node, NULL, err, "cannot open directory");
	/* else an earlier walk (phase 3's, before phase 5's) said so and counted it */
}

static void walk_one_dir(struct workqueue *wq, struct wq_item *item,
			 unsigned thread, void *arg)
{
	struct walk_state *ws = arg;
	struct scrub_ctx *ctx = ws->ctx;
	struct dir_node *node = (struct dir_node *)item;
	struct walk_thread *t = &ws->threads[thread];
	struct walk_dir d = { .node = node };
	struct dir_visit dv = { .ws = ws, .t = t, .d = &d };
	int ret;

	(void)wq;
	if (scrub_should_stop(ctx))
		goto out;
	uint64_t found_ino = node->ino;

	ret = dircache_pin(&ctx->dcache, node, &d.fd);
	if (ret < 0 && errno_is_inode_damage(ctx, -ret))
		ret = dircache_pin(&ctx->dcache, node, &d.fd);	/* look again */
	if (ret < 0) {
		walk_dir_fail(ctx, node, -ret);
		goto out;
	}
	/* Renumbered since its entry was read (QUIRK_DIR_INO_UNSTABLE): reached too. */
	if (node->ino != found_ino)
		inoset_test_and_set(ws->seen, node->dev, node->ino);
	ret = stx_get(d.fd, NULL, &d.before);
	if (ret < 0) {
		walk_dir_fail(ctx, node, -ret);
		dircache_unpin(&ctx->dcache, node);
		goto out;
	}
	/*
	 * A directory that changed during the scan may have lost a
	 * subdirectory to the part of the tree already read: the names in it
	 * are then seen by neither walk (see inode_check_links()).
	 */
	if (stx_changed_during_scan(ctx, &d.before))
		atomic_store(&ctx->dirs_changed, true);
	t->stats.dirs++;
	t->stats.inodes++;
	progress_add(&ctx->progress_done, 1);
	t->stats.blocks += d.before.stx_blocks;
	d.key_absent = dir_key_absent(d.fd, &d.before);
	if (ws->v->dir_begin)
		ws->v->dir_begin(t, &d);
	unsigned long long locked = t->nr_locked;

	ret = dirent_iterate_batched(d.fd, t->dents, t->dents_size, buffer_read, visit_entry, &dv);
	queue_found(&dv);
	t->nr_bulk = 0;
	if (ret < 0)
		d.read_err = -ret;
	d.nr_locked = t->nr_locked - locked;
	d.locked = d.nr_locked || d.key_absent;
	if (ws->v->dir_end && !scrub_should_stop(ctx))
		ws->v->dir_end(t, &d);
	dircache_unpin(&ctx->dcache, node);
out:
	dir_node_put(&ctx->dcache, node);
}

int walk_tree(struct scrub_ctx *ctx, const struct walk_visitor *v, void *arg,
	      struct scrub_stats *stats, unsigned long long *items)
{
	struct walk_state ws = { .ctx = ctx, .v = v, .seen = inoset_new() };
	unsigned n = ctx->opt.nr_threads ? ctx->opt.nr_threads : 1;
	int fd = fcntl(ctx->walk_fd, F_DUPFD_CLOEXEC, 3);
	int ret;

	if (fd < 0) {
		inoset_free(ws.seen);
		return -errno;
	}
	inoset_test_and_set(ws.seen, stx_devno(&ctx->root_stx), ctx->root_stx.stx_ino);
	if (!ctx->dirs_unopened)
		ctx->dirs_unopened = inoset_new();
	/*
	 * Not when the checksum ledger notes every file (--record, --ledger):
	 * it notes each file's size and mtime as the VFS has them (a bulk
	 * record's size is the one on disk).  Otherwise it notes only files
	 * with a record, in an attribute: inode_check.c opens every file
	 * whose bulk record shows attributes.
	 */
	ws.use_bulk = v->bulk && ctx->ops->bulk_inodes && !ledger_notes_all(ctx->ledger) &&
		      !getenv("FSCRUB_DEBUG_NO_BULK");
	ws.after_bulk = getenv("FSCRUB_DEBUG_AFTER_BULK");
	ws.open_ahead = !getenv("FSCRUB_DEBUG_NO_OPEN_AHEAD");
	ws.threads = xcalloc(n, sizeof(*ws.threads));
	for (unsigned i = 0; i < n; i++) {
		ws.threads[i].ctx = ctx;
		ws.threads[i].index = i;
		ws.threads[i].dents_size = DENTS_BUFSIZE;
		ws.threads[i].dents = xmalloc(DENTS_BUFSIZE);
		ws.threads[i].varg = arg;
		if (ws.use_bulk) {
			ws.threads[i].bulk_inos = xcalloc(DENTS_MAX_ENTRIES,
							  sizeof(*ws.threads[i].bulk_inos));
			ws.threads[i].bulk = xcalloc(DENTS_MAX_ENTRIES,
						     sizeof(*ws.threads[i].bulk));
		}
		if (v->thread_init)
			ws.threads[i].vstate = v->thread_init(ctx, i);
	}
	struct dir_node *root = dir_node_new_root(fd, stx_devno(&ctx->root_stx),
						  ctx->root_stx.stx_ino);

	root->has_subvol = stx_subvol(&ctx->root_stx, &root->subvol);

	ret = workqueue_init(&ws.wq, n, walk_one_dir, &ws);
	if (ret < 0) {
		dir_node_put(&ctx->dcache, root);
	} else {
		workqueue_add(&ws.wq, &root->work);
		workqueue_wait(&ws.wq);
		if (items)
			*items = ws.wq.done;
		workqueue_destroy(&ws.wq);
	}
	for (unsigned i = 0; i < n; i++) {
		scrub_stats_add(stats, &ws.threads[i].stats);
		if (v->thread_free)
			v->thread_free(ws.threads[i].vstate);
		free(ws.threads[i].dents);
		free(ws.threads[i].bulk_inos);
		free(ws.threads[i].bulk);
	}
	free(ws.threads);
	if (v->keep_reached && ret >= 0) {
		inoset_free(ctx->reached);
		ctx->reached = ws.seen;
	} else {
		inoset_free(ws.seen);
	}
	return ret;
}

