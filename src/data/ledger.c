/*
 * ledger: record and verify content digests in the data scan; see
 * ledger.h.
 */
#include "data/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "data/contenthash.h"
#include "scan/context.h"
#include "tree/crosslink.h"
#include "lib/inoset.h"
#include "data/ledger_store.h"
#include "data/manifest.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/stx.h"
#include "tree/walk.h"

/* Read size of the re-read that confirms a mismatch. */
#define REREAD_CHUNK (4U << 20)

struct ledger {
	struct scrub_ctx *ctx;
	bool all_files;			/* --record or --ledger: note every file */
	atomic_bool noted;		/* ledger_note() kept a file */
	pthread_mutex_t lock;		/* files[].hashed, sums */
	struct ledger_file *files;	/* sorted by inode after ledger_prepare */
	size_t nr_files, alloc_files;
	struct chash_params hp;
	struct ledger_store store;
	bool store_open;
	struct manifest *manifest;
	struct ino_key *per_file;	/* the manifest's inodes, sorted */
	size_t nr_per_file;
	/* The device reader's state. */
	const struct xlink_list *xl;
	uint64_t *end_max;		/* end_max[i]: the furthest end of xl->v[0..i] */
	struct chash_chunk *sums;
	size_t nr_sums, alloc_sums;
	/* What was done, for -v. */
	atomic_ullong verified, recorded, refreshed, skipped, manifest_ok;
	atomic_ullong just_before;	/* skipped: changed in the second before the scan */
	atomic_ullong left_to_fs;	/* not noted: the filesystem checksums their data */
	atomic_bool put_error_said;
	atomic_bool no_subvol_said;	/* a file's subvolume unknown (store_subvol()) */
	bool no_statx_subvol;		/* FSCRUB_DEBUG_NO_STATX_SUBVOL: as before Linux 6.10 */
	bool read_only;			/* --record on a read-only mount: no record is put */
	/*
	 * Records in trusted.* are hidden from this process (no CAP_SYS_ADMIN):
	 * the regular files that might have one, counted once per inode
	 * (hidden_seen: those with several names).
	 */
	bool trusted_hidden;
	struct inoset *hidden_seen;
	atomic_ullong hidden;
};

/* A file's digest as hashed: base-chunk sums in chunk order (duplicates add). */
struct file_sums {
	const struct chash_chunk *v;
	size_t n;
};

/* The manifest's digest algorithms (enum manifest_alg). */
#define NR_MANIFEST_ALGS (MANIFEST_SHA512 + 1)

struct ledger_stream {
	struct ledger *lg;
	const struct ledger_file *file;		/* NULL: not ledger-hashed */
	/* The file's manifest lines (several names, or a name listed twice). */
	const struct manifest_entry *const *mentries;	/* NULL: not in the manifest */
	size_t nr_mentries;
	bool alg_used[NR_MANIFEST_ALGS];	/* by some of those lines */
	struct manifest_hash mh[NR_MANIFEST_ALGS];	/* one digest per algorithm used */
	uint64_t mpos;				/* the manifest digests are this far */
	struct chash_chunk *v;
	size_t n, alloc;
	char *scratch;
	bool failed;
};

static int cmp_file(const void *a, const void *b)
{
	return ino_key_cmp(&((const struct ledger_file *)a)->id,
			   &((const struct ledger_file *)b)->id);
}

static int cmp_chunk(const void *a, const void *b)
{
	const struct chash_chunk *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->chunk < y->chunk ? -1 : x->chunk > y->chunk;
}

static int64_t ts_ns(const struct statx_timestamp *t)
{
	return ns_of(t->tv_sec, t->tv_nsec);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Can this process read trusted.* attributes?  The kernel hides them
 * (ENODATA, not EPERM, and listxattr leaves them out) from a process
 * without CAP_SYS_ADMIN, so a record root's --record wrote there cannot be
 * told from no record at all.
 */
static bool trusted_readable(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct c[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, c) < 0)
		return geteuid() == 0;
	return c[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN);
}

int ledger_new(struct scrub_ctx *ctx, struct ledger **out)
{
	const struct scrub_options *o = &ctx->opt;
	struct ledger *lg;
	char err[512] = "";

	*out = NULL;
	if (!o->verify_data)
		return 0;
	lg = xcalloc(1, sizeof(*lg));
	lg->ctx = ctx;
	lg->all_files = ledger_will_note_all(o);
	/* FSCRUB_DEBUG_TRUSTED_HIDDEN: the unprivileged view, for the tests. */
	lg->trusted_hidden = !lg->all_files && (!trusted_readable() ||
						getenv("FSCRUB_DEBUG_TRUSTED_HIDDEN"));
	if (lg->trusted_hidden)
		lg->hidden_seen = inoset_new();
	/* Fault-injection knob for the tests of store_subvol()'s fallback. */
	lg->no_statx_subvol = getenv("FSCRUB_DEBUG_NO_STATX_SUBVOL") != NULL;
	pthread_mutex_init(&lg->lock, NULL);
	chash_params_init(&lg->hp, (unsigned)ctx->sfs.f_bsize);
	if (o->manifest_path && manifest_load(o->manifest_path, &lg->manifest, err,
					      sizeof(err)) < 0) {
		fprintf(stderr, "fscrub: %s%s\n", err, o->manifest_from_env ?
			" (named by FSCRUB_MANIFEST)" : "");
		ledger_free(lg);
		return -EINVAL;
	}
	if (o->ledger_dir) {
		struct stat st;

		if (stat(o->ledger_dir, &st) == 0 && st.st_dev == stx_devno(&ctx->root_stx)) {
			fprintf(stderr, "fscrub: --ledger %s is on the filesystem being checked: "
				"put the ledger on another one\n", o->ledger_dir);
			ledger_free(lg);
			return -EINVAL;
		}
	}
	*out = lg;
	return 0;
}

void ledger_free(struct ledger *lg)
{
	if (!lg)
		return;
	if (lg->store_open)
		ledger_store_close(&lg->store);
	if (lg->manifest)
		manifest_free(lg->manifest);
	if (lg->hidden_seen)
		inoset_free(lg->hidden_seen);
	free(lg->files);
	free(lg->per_file);
	free(lg->end_max);
	free(lg->sums);
	pthread_mutex_destroy(&lg->lock);
	free(lg);
}

bool ledger_wants(const struct ledger *lg, bool has_record)
{
	return lg && (lg->all_files || has_record || lg->trusted_hidden);
}

/* A regular file with no record in sight, whose trusted.* record may be hidden. */
static void count_hidden(struct ledger *lg, struct ledger_notes *nt, const struct walk_entry *e)
{
	if (e->stx.stx_nlink > 1 &&
	    inoset_test_and_set(lg->hidden_seen, stx_devno(&e->stx), e->stx.stx_ino))
		return;		/* counted at another of its names */
	nt->hidden++;
}

void ledger_leave_to_fs(struct ledger *lg)
{
	atomic_fetch_add(&lg->left_to_fs, 1);
}

void ledger_note(struct ledger *lg, struct ledger_notes *nt, const struct walk_entry *e,
		 bool has_record)
{
	if (lg && lg->trusted_hidden && !has_record)
		count_hidden(lg, nt, e);
	if (!lg || !(lg->all_files || has_record))
		return;
	if (!atomic_load_explicit(&lg->noted, memory_order_relaxed))
		atomic_store(&lg->noted, true);
	if (nt->n == nt->alloc) {
		nt->alloc = nt->alloc ? nt->alloc * 2 : 256;
		nt->v = xrealloc(nt->v, nt->alloc * sizeof(*nt->v));
	}
	nt->v[nt->n++] = (struct ledger_file){
		.id = ino_key_of(&e->stx), .size = e->stx.stx_size,
		.mtime_ns = ts_ns(&e->stx.stx_mtime), .ctime_ns = ts_ns(&e->stx.stx_ctime),
	};
}

void ledger_merge(struct ledger *lg, struct ledger_notes *nt)
{
	if (lg && nt->hidden)
		atomic_fetch_add(&lg->hidden, nt->hidden);
	if (lg && nt->n) {
		pthread_mutex_lock(&lg->lock);
		if (lg->nr_files + nt->n > lg->alloc_files) {
			lg->alloc_files = (lg->nr_files + nt->n) * 2;
			lg->files = xrealloc(lg->files, lg->alloc_files * sizeof(*lg->files));
		}
		memcpy(lg->files + lg->nr_files, nt->v, nt->n * sizeof(*nt->v));
		lg->nr_files += nt->n;
		pthread_mutex_unlock(&lg->lock);
	}
	free(nt->v);
	*nt = (struct ledger_notes){ 0 };
}

static struct ledger_file *find_file(const struct ledger *lg, struct ino_key id)
{
	struct ledger_file key = { .id = id };

	return find_item(&key, lg->files, lg->nr_files, sizeof(*lg->files), cmp_file);
}

bool ledger_reads_per_file(const struct ledger *lg, struct ino_key id)
{
	return lg &&
	       find_item(&id, lg->per_file, lg->nr_per_file, sizeof(*lg->per_file), ino_key_cmp);
}

const struct ino_key *ledger_per_file(const struct ledger *lg, size_t *n)
{
	*n = lg ? lg->nr_per_file : 0;
	return lg ? lg->per_file : NULL;
}

/* Sort the notes, one per inode (a file with several names is noted for each). */
static void sort_files(struct ledger *lg)
{
	size_t w = 0;

	sort_items(lg->files, lg->nr_files, sizeof(*lg->files), cmp_file);
	for (size_t i = 0; i < lg->nr_files; i++)
		if (!w || !ino_key_eq(lg->files[w - 1].id, lg->files[i].id))
			lg->files[w++] = lg->files[i];
	lg->nr_files = w;
}

/*
 * --record keeps its records in the files' attributes unless --ledger
 * names a database elsewhere: a read-only mount takes none, and the user
 * asked for what cannot be done (an operational error, said once, not a
 * warning per file).  The records already there are still checked.
 */
static void refuse_record_read_only(struct scrub_ctx *ctx, struct ledger *lg)
{
	if (!ctx->opt.record || ctx->opt.ledger_dir || !(ctx->svfs.f_flag & ST_RDONLY))
		return;
	report_operational(ctx, NULL, NULL, 0, "--record: the filesystem is mounted "
			   "read-only: nothing was recorded (the records are the files' "
			   "attributes; --ledger DIR keeps them elsewhere)");
	atomic_store(&lg->put_error_said, true);
	lg->read_only = true;
}

bool ledger_prepare(struct scrub_ctx *ctx, struct ledger *lg)
{
	char err[512] = "";
	int ret;

	if (!lg)
		return false;
	refuse_record_read_only(ctx, lg);
	sort_files(lg);
	if (lg->manifest) {
		size_t found = manifest_resolve(lg->manifest, ctx->walk_fd);

		lg->per_file = manifest_inodes(lg->manifest, &lg->nr_per_file);
		report_verbose(ctx, "Phase 5: manifest %s: %zu of %zu files found on %s",
			       lg->manifest->source, found, lg->manifest->n, ctx->mntpoint);
		if (found < lg->manifest->n)
			str_info(ctx, CHECK_MANIFEST_MISSING, NULL, NULL, 0,
				 "%zu of the %zu files in the manifest %s are not regular files "
				 "on this filesystem (gone, or elsewhere)",
				 lg->manifest->n - found, lg->manifest->n, lg->manifest->source);
	}
	if (!lg->nr_files)
		return lg->nr_per_file != 0;
	/*
	 * The disk must hold what the page cache does: that is what is hashed
	 * when the device reader reads the files' extents.  Where files are
	 * read only through the filesystem (no device offsets: btrfs), -n
	 * writes nothing -- syncfs would commit a transaction: an O_DIRECT
	 * read writes back the dirty pages of its range first, and a buffered
	 * read hashes the page cache itself.
	 */
	if (!(ctx->opt.check_only && !ctx->dev_size) && syncfs(ctx->mnt_fd) < 0)
		report_verbose(ctx, "Phase 5: syncfs: %s", strerror(errno));
	ret = ledger_store_open(&lg->store, ctx->opt.ledger_dir, !ctx->opt.check_only,
				ctx->mnt_fd, err, sizeof(err));
	if (ret < 0) {
		report_operational(ctx, NULL, NULL, -ret, "%s: files are not checked against "
				   "their records", err);
		lg->nr_files = 0;
		return lg->nr_per_file != 0;
	}
	lg->store_open = true;
	return true;
}

/* --- the device reader --- */

/*
 * The same extent of the same file listed again: a file with several names
 * is mapped once per name.  The list is sorted by device offset, then
 * inode, so the copies are neighbours.
 */
static bool repeats_previous(const struct xlink_list *l, size_t i)
{
	const struct xlink_extent *x = &l->v[i];

	for (size_t j = i; j-- > 0 && l->v[j].phys_sec == x->phys_sec;)
		if (l->v[j].ino == x->ino && l->v[j].logical_sec == x->logical_sec &&
		    xlink_len(&l->v[j]) == xlink_len(x))
			return true;
	return false;
}

bool ledger_notes_all(const struct ledger *lg)
{
	return lg && lg->all_files;
}

bool ledger_will_note_all(const struct scrub_options *o)
{
	return o->verify_data && (o->record || o->ledger_dir);
}

bool ledger_noted(struct ledger *lg)
{
	return lg && atomic_load_explicit(&lg->noted, memory_order_relaxed);
}

bool ledger_hashes_files(const struct ledger *lg)
{
	return lg && lg->nr_files;
}

void ledger_device_begin(struct ledger *lg, const struct xlink_list *l)
{
	uint64_t m = 0;

	if (!lg || !lg->nr_files || !l->n)
		return;
	lg->xl = l;
	lg->end_max = xmalloc(l->n * sizeof(*lg->end_max));
	for (size_t i = 0; i < l->n; i++) {
		const struct xlink_extent *x = &l->v[i];
		struct ledger_file *f;

		if (xlink_end(x) > m)
			m = xlink_end(x);
		lg->end_max[i] = m;
		/* What of this extent holds file data the reader will hash. */
		f = x->unwritten || repeats_previous(l, i) ? NULL : find_file(lg, xlink_key(l, x));
		if (f && xlink_logical(x) < f->size)
			f->expect += xlink_logical(x) + xlink_len(x) > f->size ? f->size - xlink_logical(x) : xlink_len(x);
	}
}

struct sum_buf {
	uint64_t ino;
	struct chash_chunk *v;
	size_t n, alloc;
	uint64_t bytes;
};

static void sum_emit(void *arg, uint64_t chunk, struct chash128 sum)
{
	struct sum_buf *b = arg;

	if (b->n == b->alloc) {
		b->alloc = b->alloc ? b->alloc * 2 : 64;
		b->v = xrealloc(b->v, b->alloc * sizeof(*b->v));
	}
	b->v[b->n++] = (struct chash_chunk){ .ino = b->ino, .chunk = chunk, .sum = sum };
}

/* The first extent that may reach into [off, ...): end_max is non-decreasing. */
static size_t first_reaching(const struct ledger *lg, uint64_t off)
{
	size_t lo = 0, hi = lg->xl->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (lg->end_max[mid] > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Hash the part of extent x inside the buffer [off, off + len); its file, or NULL. */
static struct ledger_file *hash_piece(struct ledger *lg, const struct xlink_extent *x,
				      uint64_t off, uint64_t len, const char *buf, char *scratch,
				      struct sum_buf *b)
{
	uint64_t s = xlink_phys(x) > off ? xlink_phys(x) : off;
	uint64_t e = xlink_end(x) < off + len ? xlink_end(x) : off + len;
	uint64_t logical = xlink_logical(x) + (s - xlink_phys(x));
	struct ledger_file *f = find_file(lg, xlink_key(lg->xl, x));
	size_t before = b->n;

	if (!f || e <= s || logical >= f->size || (logical & (lg->hp.block_size - 1)) ||
	    ledger_reads_per_file(lg, xlink_key(lg->xl, x)))
		return NULL;
	b->ino = x->ino;
	chash_range(&lg->hp, logical, buf + (s - off), e - s, f->size, scratch, sum_emit, b);
	if (b->n > before)
		b->bytes += (logical + (e - s) > f->size ? f->size - logical : e - s);
	return f;
}

void ledger_hash_read(struct ledger *lg, uint64_t off, uint64_t len, const char *buf)
{
	struct sum_buf b = { 0 };
	char *scratch;

	if (!lg || !lg->end_max)
		return;
	scratch = xmalloc(lg->hp.block_size);
	for (size_t i = first_reaching(lg, off); i < lg->xl->n; i++) {
		const struct xlink_extent *x = &lg->xl->v[i];
		uint64_t bytes = b.bytes;
		struct ledger_file *f;

		if (xlink_phys(x) >= off + len)
			break;
		if (x->unwritten || xlink_end(x) <= off || repeats_previous(lg->xl, i))
			continue;
		f = hash_piece(lg, x, off, len, buf, scratch, &b);
		if (f && b.bytes != bytes) {
			pthread_mutex_lock(&lg->lock);
			f->hashed += b.bytes - bytes;
			pthread_mutex_unlock(&lg->lock);
		}
	}
	free(scratch);
	if (!b.n)
		return;
	pthread_mutex_lock(&lg->lock);
	if (lg->nr_sums + b.n > lg->alloc_sums) {
		lg->alloc_sums = (lg->nr_sums + b.n) * 2;
		lg->sums = xrealloc(lg->sums, lg->alloc_sums * sizeof(*lg->sums));
	}
	memcpy(lg->sums + lg->nr_sums, b.v, b.n * sizeof(*b.v));
	lg->nr_sums += b.n;
	pthread_mutex_unlock(&lg->lock);
	free(b.v);
}

/* --- judging a file --- */

/* Chunk size for a file: 1 MiB, doubled until LEDGER_MAX_CHUNKS cover it. */
static unsigned chunk_shift_for(uint64_t size, unsigned max_chunks)
{
	unsigned s = CHASH_BASE_SHIFT;

	while (s < 62 && (size + (1ULL << s) - 1) >> s > max_chunks)
		s++;
	return s;
}

/* The record-sized chunks' digests, from base-chunk sums. */
static size_t fold_chunks(const struct file_sums *fs, uint64_t size, unsigned shift,
			  struct chash128 *out)
{
	size_t n = (size_t)((size + (1ULL << shift) - 1) >> shift);

	memset(out, 0, n * sizeof(*out));
	for (size_t i = 0; i < fs->n; i++) {
		uint64_t c = fs->v[i].chunk >> (shift - CHASH_BASE_SHIFT);

		if (c < n)
			chash_add(&out[c], fs->v[i].sum);
	}
	return n;
}

/* The file's digest as a record: fs hashed from it at size, mtime, ctime. */
static void make_record(struct ledger *lg, const struct file_sums *fs, const struct statx *stx,
			uint64_t gen, unsigned max_chunks, struct ledger_record *r)
{
	struct chash128 *chunks = xcalloc(LEDGER_MAX_CHUNKS, sizeof(*chunks));

	*r = (struct ledger_record){
		.block_shift = lg->hp.block_shift, .chunk_shift = chunk_shift_for(stx->stx_size,
										 max_chunks),
		.ino = stx->stx_ino, .gen = gen, .size = stx->stx_size,
		.mtime_ns = ts_ns(&stx->stx_mtime), .ctime_ns = ts_ns(&stx->stx_ctime),
	};
	r->nr_chunks = (uint32_t)fold_chunks(fs, r->size, r->chunk_shift, chunks);
	r->whole = chash_whole(r->size, chunks, r->nr_chunks);
	for (uint32_t i = 0; i < r->nr_chunks; i++)
		r->chunk[i] = chunks[i].lo;
	free(chunks);
}

static uint64_t file_generation(int fd)
{
	int gen = 0;

	return ioctl(fd, FS_IOC_GETVERSION, &gen) == 0 ? (uint32_t)gen : 0;
}

/* Is someone writing the file?  A read lease is refused if so. */
static bool open_for_writing(int fd)
{
	if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
		return errno == EAGAIN;
	fcntl(fd, F_SETLEASE, F_UNLCK);
	return false;
}

/* A descriptor that can write the file's xattrs: the walk's clone is read-only. */
static int writable_fd(struct scrub_ctx *ctx, int fd)
{
	_Alignas(struct file_handle) unsigned char buf[sizeof(struct file_handle) + 128];
	struct file_handle *fh = (void *)buf;
	int mnt_id;

	if (!ctx->walk_is_readonly)
		return dup(fd);
	fh->handle_bytes = 128;
	if (name_to_handle_at(fd, "", fh, &mnt_id, AT_EMPTY_PATH) < 0)
		return -1;
	return open_by_handle_at(ctx->mnt_fd, fh, O_RDONLY | O_NOATIME | O_CLOEXEC);
}

/* Store a new record of the file; with xattrs, the ctime it causes is its own. */
static void put_record(struct walk_thread *t, const struct walk_dir *d,
		       const struct walk_entry *e, int fd, const struct file_sums *fs,
		       const struct statx *stx, uint64_t subvol, uint64_t gen, bool refresh)
{
	struct ledger *lg = t->ctx->ledger;
	struct ledger_record r;
	int wfd = lg->store.db ? -1 : writable_fd(t->ctx, fd);
	int ret = -EBADF;

	for (unsigned max = LEDGER_MAX_CHUNKS; max >= 1; max /= 2) {
		make_record(lg, fs, stx, gen, max, &r);
		r.written_ns = lg->store.db ? r.ctime_ns : now_ns() + 1000000000;
		if (!lg->store.db && wfd < 0)
			break;
		ret = ledger_store_put(&lg->store, wfd, subvol, &r);
		/* Too big for this filesystem's xattrs: fewer, larger chunks. */
		if (ret != -ENOSPC && ret != -E2BIG)
			break;
	}
	if (wfd >= 0)
		close(wfd);
	if (ret == 0) {
		atomic_fetch_add(refresh ? &lg->refreshed : &lg->recorded, 1);
		return;
	}
	if (!atomic_exchange(&lg->put_error_said, true))
		str_warn(t->ctx, CHECK_LEDGER_RECORD, d->node, e->name, e->stx.stx_ino,
			 "cannot store the checksum record: %s (said once)",
			 strerror(ret == -EBADF ? errno : -ret));
}

/* Hash the file again from the start through fd (O_DIRECT where it can). */
static bool rehash(int fd, uint64_t size, struct ledger_stream *s)
{
	char *buf;

	if (posix_memalign((void **)&buf, 4096, REREAD_CHUNK))
		return false;
	for (uint64_t off = 0; off < size && !s->failed;) {
		ssize_t n = pread(fd, buf, REREAD_CHUNK, (off_t)off);

		if (n <= 0) {
			s->failed = true;
			break;
		}
		ledger_stream_feed(s, off, buf, (uint64_t)n);
		off += (uint64_t)n;
	}
	free(buf);
	return !s->failed;
}

static bool same_version(const struct statx *a, const struct ledger_file *f)
{
	return a->stx_size == f->size && ts_ns(&a->stx_mtime) == f->mtime_ns &&
	       ts_ns(&a->stx_ctime) == f->ctime_ns;
}

/*
 * A file that phase 3 saw as it is now, whose ctime falls in the second
 * before the scan began (scan/phase3.c: changed_since_ns is the start less
 * 1 s).  Coarse timestamps cannot tell such a change from one during the
 * scan, so it is skipped like one, but it is not one: it was written just
 * before the run (the usual case right after copying files in), and the
 * next run judges or records it.
 */
static bool changed_just_before_scan(const struct scrub_ctx *ctx, const struct statx *stx)
{
	return ts_ns(&stx->stx_ctime) < (int64_t)(ctx->changed_since_ns + 1000000000ULL);
}

/* The record is of this version of the file: size and mtime, ctime its own. */
static bool record_matches(const struct ledger_record *r, const struct statx *stx)
{
	int64_t c = ts_ns(&stx->stx_ctime);

	return r->size == stx->stx_size && r->mtime_ns == ts_ns(&stx->stx_mtime) &&
	       (c == r->ctime_ns || (c > r->ctime_ns && c <= r->written_ns));
}

/* The first chunk whose digest is not the record's (index). */
static size_t first_bad_chunk(const struct ledger_record *r, const struct file_sums *fs)
{
	struct chash128 *chunks = xcalloc(LEDGER_MAX_CHUNKS, sizeof(*chunks));
	size_t n = fold_chunks(fs, r->size, r->chunk_shift, chunks), i;

	for (i = 0; i < n && i < r->nr_chunks; i++)
		if (chunks[i].lo != r->chunk[i])
			break;
	free(chunks);
	return i < n ? i : 0;
}

static bool digest_matches(const struct ledger_record *r, const struct file_sums *fs)
{
	struct chash128 *chunks = xcalloc(LEDGER_MAX_CHUNKS, sizeof(*chunks));
	size_t n = fold_chunks(fs, r->size, r->chunk_shift, chunks);
	bool ok = n == r->nr_chunks && chash_equal(chash_whole(r->size, chunks, n), r->whole);

	free(chunks);
	return ok;
}

static void sort_sums(struct chash_chunk *v, size_t n)
{
	sort_items(v, n, sizeof(*v), cmp_chunk);
}

/*
 * A mismatch: read the file again and hash it from its own bytes; only a
 * second mismatch of a file still unchanged is bit rot.
 */
static void confirm_bitrot(struct walk_thread *t, const struct walk_dir *d,
			   const struct walk_entry *e, const struct ledger_record *r,
			   const struct ledger_file *f)
{
	struct scrub_ctx *ctx = t->ctx;
	struct ledger *lg = ctx->ledger;
	struct ledger_stream s = { .lg = lg, .file = f };
	int fd = walk_open_file(t, d, e, O_DIRECT);
	struct statx now;
	bool ok;

	if (fd == -EINVAL)
		fd = walk_open_file(t, d, e, 0);
	if (fd < 0)
		return;
	s.scratch = xmalloc(lg->hp.block_size);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);	/* the disk, not the cache */
	ok = rehash(fd, f->size, &s);
	if (ok && statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &now) == 0 &&
	    same_version(&now, f) && !open_for_writing(fd)) {
		struct file_sums fs = { s.v, s.n };

		sort_sums(s.v, s.n);
		if (digest_matches(r, &fs)) {
			atomic_fetch_add(&lg->verified, 1);
		} else {
			size_t c = first_bad_chunk(r, &fs);
			uint64_t csize = 1ULL << r->chunk_shift, off = (uint64_t)c * csize;

			str_error_range(ctx, CHECK_LEDGER_BITROT, d->node, e->name,
					e->stx.stx_ino, off, csize,
					"content changed without modification (bitrot): the %llu "
					"bytes at offset %llu differ from the checksum record, "
					"while size, mtime and ctime are as recorded",
					(unsigned long long)csize, (unsigned long long)off);
		}
	} else if (ok) {
		str_changed(ctx, CHECK_LEDGER_BITROT, d->node, e->name, e->stx.stx_ino,
			    "file (its content differs from its record)");
	}
	free(s.v);
	free(s.scratch);
	close(fd);
}

/*
 * The subvolume part of the file's key in the --ledger database
 * (ledger_store.h): the kernel's subvolume id (STATX_SUBVOL, asked for
 * with the file's statx), else 0 for a file on the mount root's st_dev.
 * False for a file on another st_dev whose subvolume the kernel does not
 * name (btrfs before Linux 6.10): no key would tell it from the files of
 * other subvolumes with its inode number, so it is not kept in the
 * database.  The xattr store needs no key: the record is on the file.
 */
static bool store_subvol(const struct ledger *lg, const struct statx *now, uint64_t *subvol)
{
	*subvol = 0;
	if (!lg->store.db_mode || (!lg->no_statx_subvol && stx_subvol(now, subvol)))
		return true;
	return stx_devno(now) == stx_devno(&lg->ctx->root_stx);
}

/* Judge one hashed file against its record; fd is open on it. */
static void judge(struct walk_thread *t, const struct walk_dir *d, const struct walk_entry *e,
		  int fd, const struct ledger_file *f, struct file_sums *fs, bool complete)
{
	struct scrub_ctx *ctx = t->ctx;
	struct ledger *lg = ctx->ledger;
	struct ledger_record r;
	struct statx now;
	uint64_t gen, subvol;
	int have;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_SUBVOL, &now) < 0) {
		atomic_fetch_add(&lg->skipped, 1);
		return;
	}
	if (!same_version(&now, f) || stx_changed_during_scan(ctx, &now)) {
		/* changing: next time */
		if (same_version(&now, f) && changed_just_before_scan(ctx, &now))
			atomic_fetch_add(&lg->just_before, 1);
		else
			atomic_fetch_add(&lg->skipped, 1);
		return;
	}
	if (!store_subvol(lg, &now, &subvol)) {
		if (!atomic_exchange(&lg->no_subvol_said, true))
			str_info(ctx, CHECK_LEDGER_RECORD, d->node, e->name, e->stx.stx_ino,
				 "the kernel does not name this file's subvolume (STATX_SUBVOL, "
				 "Linux 6.10): files outside the mount's own subvolume are not "
				 "kept in %s (said once)", ctx->opt.ledger_dir);
		atomic_fetch_add(&lg->skipped, 1);
		return;
	}
	gen = file_generation(fd);
	have = ledger_store_get(&lg->store, fd, subvol, now.stx_ino, gen, &r);
	if (have == 0 && (r.ino != now.stx_ino || r.gen != gen || r.block_shift != lg->hp.block_shift))
		have = -ENODATA;	/* a copy's record, or another filesystem's */
	if (have < 0 && have != -ENODATA && have != -EINVAL)
		report_operational(ctx, d->node, e->name, -have, "cannot read the checksum record");
	if (have < 0 && !ctx->opt.record)
		return;
	if (open_for_writing(fd)) {
		str_info(ctx, CHECK_LEDGER_RECORD, d->node, e->name, e->stx.stx_ino,
			 "open for writing: not checked against its checksum record");
		atomic_fetch_add(&lg->skipped, 1);
		return;
	}
	if (have == 0 && record_matches(&r, &now)) {
		if (complete && digest_matches(&r, fs))
			atomic_fetch_add(&lg->verified, 1);
		else
			confirm_bitrot(t, d, e, &r, f);
		return;
	}
	if (ctx->opt.check_only || lg->read_only)
		return;
	if (!complete) {
		atomic_fetch_add(&lg->skipped, 1);	/* not all of it was read */
		return;
	}
	put_record(t, d, e, fd, fs, &now, subvol, gen, have == 0);
}

bool ledger_has_database(const struct ledger *lg)
{
	return lg && lg->store_open && lg->store.db_mode;
}

bool ledger_has_current_record(struct ledger *lg, int fd, const struct statx *stx)
{
	struct ledger_record r;
	uint64_t subvol, gen;

	if (!ledger_has_database(lg) || !store_subvol(lg, stx, &subvol))
		return false;
	gen = file_generation(fd);
	if (ledger_store_get(&lg->store, fd, subvol, stx->stx_ino, gen, &r) < 0)
		return false;
	return r.ino == stx->stx_ino && r.gen == gen && r.block_shift == lg->hp.block_shift &&
	       record_matches(&r, stx);
}

/* --- the walk after the device reader --- */

struct judge_args {
	struct ledger *lg;
	const struct ino_key *skip;
	size_t nr_skip;
	struct inoset *linked;
};

static void judge_entry(struct walk_thread *t, struct walk_dir *d, const struct walk_entry *e)
{
	const struct judge_args *a = t->varg;
	struct ledger *lg = a->lg;
	struct ledger_file *f;
	struct chash_chunk key = { .ino = e->stx.stx_ino };
	struct file_sums fs;
	size_t lo, hi;
	int fd;

	if (e->stat_err || e->submount || !S_ISREG(e->stx.stx_mode) || e->seen_before)
		return;
	f = find_file(lg, ino_key_of(&e->stx));
	/* The device reader's sums are of its list's st_dev only (crosslink.h). */
	if (!f || f->id.dev != lg->xl->dev ||
	    find_item(&f->id, a->skip, a->nr_skip, sizeof(*a->skip), ino_key_cmp))
		return;
	if (e->stx.stx_nlink > 1 &&
	    inoset_test_and_set(a->linked, stx_devno(&e->stx), e->stx.stx_ino))
		return;
	fd = walk_open_file(t, d, e, 0);
	if (fd < 0)
		return;
	/* This file's base-chunk sums: a run in the sorted list. */
	lo = 0, hi = lg->nr_sums;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp_chunk(&lg->sums[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (hi = lo; hi < lg->nr_sums && lg->sums[hi].ino == f->id.ino; hi++)
		;
	/* No file with a sum (all empty): sums is NULL, and NULL + 0 undefined. */
	fs = (struct file_sums){ lg->sums ? lg->sums + lo : NULL, hi - lo };
	judge(t, d, e, fd, f, &fs, f->hashed == f->expect);
	close(fd);
}

static const struct walk_visitor judge_visitor = {
	.name = "checksum ledger",
	.entry = judge_entry,
};

int ledger_judge_walk(struct scrub_ctx *ctx, struct ledger *lg, const struct ino_key *skip,
		      size_t nr_skip)
{
	struct judge_args a = { .lg = lg, .skip = skip, .nr_skip = nr_skip };
	struct scrub_stats stats = { 0 };
	int ret;

	if (!lg || !lg->nr_files || !lg->end_max)
		return 0;
	sort_sums(lg->sums, lg->nr_sums);
	a.linked = inoset_new();
	ret = walk_tree(ctx, &judge_visitor, &a, &stats, NULL);
	inoset_free(a.linked);
	return ret;
}

/* --- the per-file reader --- */

struct ledger_stream *ledger_stream_begin(struct ledger *lg, const struct walk_entry *e)
{
	const struct ledger_file *f = lg && lg->store_open ? find_file(lg, ino_key_of(&e->stx))
							     : NULL;
	const struct manifest_entry *const *m = NULL;
	size_t nr_m = 0;
	struct ledger_stream *s;

	if (lg && lg->manifest && lg->nr_per_file)
		m = manifest_find_all(lg->manifest, ino_key_of(&e->stx), &nr_m);
	if (!f && !m)
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->lg = lg;
	s->file = f;
	s->mentries = m;
	s->nr_mentries = nr_m;
	for (size_t i = 0; i < nr_m; i++) {
		if (!s->alg_used[m[i]->alg])
			manifest_hash_init(&s->mh[m[i]->alg], m[i]->alg);
		s->alg_used[m[i]->alg] = true;
	}
	s->scratch = xmalloc(lg->hp.block_size);
	return s;
}

static void stream_emit(void *arg, uint64_t chunk, struct chash128 sum)
{
	struct ledger_stream *s = arg;

	if (s->n && s->v[s->n - 1].chunk == chunk) {
		chash_add(&s->v[s->n - 1].sum, sum);
		return;
	}
	if (s->n == s->alloc) {
		s->alloc = s->alloc ? s->alloc * 2 : 16;
		s->v = xrealloc(s->v, s->alloc * sizeof(*s->v));
	}
	s->v[s->n++] = (struct chash_chunk){ .ino = s->file->id.ino, .chunk = chunk, .sum = sum };
}

void ledger_stream_feed(struct ledger_stream *s, uint64_t off, const char *buf, uint64_t len)
{
	if (!s || s->failed)
		return;
	if (s->file)
		chash_range(&s->lg->hp, off, buf, len, s->file->size, s->scratch, stream_emit, s);
	if (s->mentries) {
		if (off < s->mpos) {
			s->failed = true;	/* not in order: cannot be */
			return;
		}
		for (int a = 0; a < NR_MANIFEST_ALGS; a++) {
			if (!s->alg_used[a])
				continue;
			manifest_hash_zeros(&s->mh[a], off - s->mpos);	/* a hole */
			manifest_hash_update(&s->mh[a], buf, (size_t)len);
		}
		s->mpos = off + len;
	}
}

void ledger_stream_fail(struct ledger_stream *s)
{
	if (s)
		s->failed = true;
}

/*
 * One manifest line against the file's digest: an error if the file was
 * not modified since the manifest was written.  The finding names the
 * line's path: the data scan reads a file at whichever of its names it
 * reaches first, which need not be the one listed.
 */
static void judge_manifest_line(struct scrub_ctx *ctx, struct ledger_stream *s,
				const struct manifest_entry *me, const struct statx *now)
{
	const struct manifest *m = s->lg->manifest;
	int64_t mtime = ts_ns(&now->stx_mtime);
	int64_t listed = (int64_t)m->mtime.tv_sec * 1000000000 + m->mtime.tv_nsec;

	if (manifest_hash_matches(&s->mh[me->alg], me)) {
		atomic_fetch_add(&s->lg->manifest_ok, 1);
		return;
	}
	if (mtime < listed)
		str_error(ctx, CHECK_MANIFEST_MISMATCH, NULL, me->path, now->stx_ino,
			  "content differs from %s line %u, and the file was not modified "
			  "since the manifest was written", m->source, me->line);
	else
		str_warn(ctx, CHECK_MANIFEST_MISMATCH, NULL, me->path, now->stx_ino,
			 "content differs from %s line %u (modified after the manifest was "
			 "written)", m->source, me->line);
}

/* The file against each of its manifest lines, if it did not change while read. */
static void judge_manifest(struct walk_thread *t, const struct walk_entry *e, int fd,
			   struct ledger_stream *s)
{
	struct scrub_ctx *ctx = t->ctx;
	struct statx now;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &now) < 0 ||
	    !stx_unchanged(&now, &e->stx) || stx_changed_during_scan(ctx, &now))
		return;
	if (s->mpos > now.stx_size)
		return;		/* read past the end: it grew and shrank */
	for (int a = 0; a < NR_MANIFEST_ALGS; a++)
		if (s->alg_used[a] && s->mpos < now.stx_size)
			manifest_hash_zeros(&s->mh[a], now.stx_size - s->mpos);	/* a trailing hole */
	for (size_t i = 0; i < s->nr_mentries; i++)
		judge_manifest_line(ctx, s, s->mentries[i], &now);
}

void ledger_stream_end(struct walk_thread *t, const struct walk_dir *d,
		       const struct walk_entry *e, int fd, struct ledger_stream *s)
{
	if (!s)
		return;
	if (!s->failed && s->mentries)
		judge_manifest(t, e, fd, s);
	if (!s->failed && s->file) {
		struct file_sums fs = { s->v, s->n };

		judge(t, d, e, fd, s->file, &fs, true);
	}
	free(s->v);
	free(s->scratch);
	free(s);
}

/*
 * Say once, whatever -v says (an info, and a line on standard error), that
 * records this process cannot see were not compared: a non-root -x
 * otherwise reports "0 errors" for a file root's record would find
 * damaged, with nothing to tell it checked less.
 */
static void say_hidden(struct scrub_ctx *ctx, struct ledger *lg)
{
	unsigned long long n = atomic_load(&lg->hidden);

	if (!n)
		return;
	const char *files = n == 1 ? "regular file was" : "regular files were";

	str_info(ctx, CHECK_LEDGER_RECORD, NULL, NULL, 0, "%llu %s not compared with checksum "
		 "records: without CAP_SYS_ADMIN the records root keeps in %s cannot be read "
		 "(nor told from none); run as root to check them", n, files, LEDGER_XATTR_TRUSTED);
	if (!ctx->opt.verbose)
		fprintf(stderr, "fscrub: %s: %llu %s not compared with checksum records: without "
			"CAP_SYS_ADMIN the records in %s cannot be read\n", ctx->mntpoint, n, files,
			LEDGER_XATTR_TRUSTED);
}

void ledger_finish(struct scrub_ctx *ctx, struct ledger *lg)
{
	if (!lg)
		return;
	say_hidden(ctx, lg);
	if (lg->nr_files)
		report_verbose(ctx, "Phase 5: checksum ledger (%s): %llu files verified, %llu "
			       "recorded, %llu records refreshed, %llu skipped (changed during "
			       "the scan, open for writing or not all read)",
			       ctx->opt.ledger_dir ? ctx->opt.ledger_dir : "xattrs",
			       (unsigned long long)atomic_load(&lg->verified),
			       (unsigned long long)atomic_load(&lg->recorded),
			       (unsigned long long)atomic_load(&lg->refreshed),
			       (unsigned long long)atomic_load(&lg->skipped));
	if (atomic_load(&lg->left_to_fs))
		report_verbose(ctx, "Phase 5: checksum ledger: %llu files left to the %s "
			       "backend's own data checksums (verified by every read)",
			       (unsigned long long)atomic_load(&lg->left_to_fs), ctx->ops->name);
	if (atomic_load(&lg->just_before))
		report_verbose(ctx, "Phase 5: checksum ledger: %llu files skipped because they "
			       "changed within the last second before the scan began (too close "
			       "to tell from a change during it); the next %s them",
			       (unsigned long long)atomic_load(&lg->just_before),
			       ctx->opt.record ? "--record records" : "-x checks");
	if (lg->manifest)
		report_verbose(ctx, "Phase 5: manifest %s: %llu files match",
			       lg->manifest->source,
			       (unsigned long long)atomic_load(&lg->manifest_ok));
	if (lg->store_open)
		ledger_store_close(&lg->store);
	lg->store_open = false;
}
