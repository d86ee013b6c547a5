/*
 * xfs: the XFS backend's private state, shared by its files.
 *
 *   xfs.c         phase 1: detection, FSGEOMETRY and AG_GEOMETRY, health
 *                 masks; the ops table and the walk hooks.
 *   xfs_kscrub.c  phase 2: the kernel's online scrub (XFS_IOC_SCRUB_METADATA)
 *                 of every metadata object in dependency order, and repair.
 *   xfs_ondisk.c  phase 2: AG headers read from the device, and the rule
 *                 that makes an error of what the disk of a live XFS shows.
 *   xfs_btree.c   phase 2: every per-AG btree block, the headers' counters,
 *                 every inode of every chunk, read from the device.
 *   xfs_xref.c    phase 2: what those reads give cross-referenced: inode
 *                 allocation, unlinked lists, free against used space,
 *                 block counts, secondary superblocks.
 *   xfs_dirindex.c phase 2: the name indexes of the directories and
 *                 attribute forks of those inodes, read from the disk.
 *   xfs_counters.c phase 2, after them: the kernel's inode counters against
 *                 the sums of its per-AG ones.
 *   xfs_inodes.c  inode health (bs_sick) from the BULKSTAT records phase 3
 *                 reads anyway; phase 3, after the walk: orphaned inodes
 *                 and the health of the inodes the walk did not BULKSTAT,
 *                 the reverse-mapping cross-check with GETFSMAP;
 *                 per-inode findings reported with the names the walk
 *                 found.
 *   xfs_walkstat.c phase 3, in the walk: the walk's bulk records (each
 *                 getdents buffer's inodes by BULKSTAT), and each inode
 *                 stat'ed or opened against its BULKSTAT, a directory's
 *                 entries in a few requests; the health flags of both.
 *   xfs_ownermap.c phase 3, in the walk: regular files' extent maps from
 *                 GETFSMAP owner records (rmapbt), where they agree with
 *                 the data fork phase 2 read from the disk; no FIEMAP.
 *   xfs_attrlist.c phase 3, in the walk: the attribute names of an inode
 *                 that listxattr() refuses (E2BIG), with
 *                 XFS_IOC_ATTRLIST_BY_HANDLE.
 *   xfs_quota.c   phase 3, after the walk: quota usage per user, group and
 *                 project against what BULKSTAT's inodes add up to.
 *
 * Everything goes through the mount's own descriptor (ctx->mnt_fd): the
 * walk's clone is read-only, and a repair needs a writable mount.
 */
#ifndef FSCRUB_BACKEND_XFS_H
#define FSCRUB_BACKEND_XFS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xfs/xfs.h>

#include "report/report.h"

struct scrub_ctx;
struct dir_node;
struct inoset;

/* Newer than the xfslibs-dev 6.1 headers: values from the kernel's ABI. */
#ifndef XFS_FSOP_GEOM_FLAGS_PARENT
#define XFS_FSOP_GEOM_FLAGS_PARENT	(1 << 25)	/* Linux 6.10 */
#endif

/*
 * A per-inode finding kept until the walk has named the inode (or one the
 * walk made, with the name it had then: dir set).
 */
struct xfs_deferred {
	uint64_t ino;
	enum severity sev;
	const char *check;
	char *msg;
	const char *file;
	int line;
	bool if_named;		/* said only if the walk reaches the inode by a name */
	struct dir_node *dir;	/* reference, or NULL: named through xfs_state.named */
	char *name;		/* with dir: NULL means the inode is the directory dir */
};

/* An inode whose name a walk is asked to record. */
struct xfs_named {
	uint64_t ino;
	struct dir_node *dir;		/* reference, NULL until found */
	char *name;			/* NULL: the inode is the directory dir */
	bool found;
};

/*
 * The inodes a walk is to name: filled single-threaded (or under lock),
 * then sorted with xfs_names_finish(); xfs_names_note() may then be
 * called from any walk thread.
 */
struct xfs_names {
	pthread_mutex_t lock;
	struct xfs_named *v;
	size_t n, alloc;
	bool sorted;
};

struct xfs_state {
	int fd;				/* ctx->mnt_fd */
	struct xfs_fsop_geom geo;
	struct xfs_ag_geometry *ags;	/* geo.agcount of them */
	atomic_bool *bulkstat_corrupt_said;	/* per AG: "BULKSTAT stops at damage" */
	atomic_int *bulkstat_refused;	/* per AG: BULKSTATs refused as damaged (xfs_bulkstat_req) */
	bool kscrub;			/* the kernel has online scrub */
	bool krepair;			/* ... and repairs (never probed under -n) */
	bool shut_down;			/* the kernel shut the filesystem down */
	/*
	 * No kernel scrub, so no BULKSTAT pass in phase 2: the health flags
	 * come from phase 3's records (xfs_health_take()), each inode's once
	 * (health_seen), and after the walk from a BULKSTAT of the allocated
	 * inodes it did not see (health_after of them).
	 */
	bool walk_health;
	struct inoset *health_seen;
	atomic_ullong health_after;
	atomic_ullong nr_bulkstat;	/* inodes whose health was read */
	atomic_ullong nr_sick, nr_checked;
	/* Every BULKSTAT request of the scan (xfs_bulkstat_req()), and the inodes returned. */
	atomic_ullong bs_requests, bs_inodes;
	/* Phase 2's inode chunk reads, and the batches that had reads in flight. */
	atomic_ullong chunk_reads, chunk_batches;
	/* Phase 2's name indexes checked (first looks): directories, attribute forks, too big. */
	atomic_ullong index_dirs, index_attrs, index_big;
	/* Their blocks' reads (every look), and the batches that had reads in flight. */
	atomic_ullong index_reads, index_batches;
	/* Phase 2's btree blocks read ahead a level at a time, and those batches. */
	atomic_ullong bt_ahead_blocks, bt_ahead_batches;

	pthread_mutex_t lock;		/* deferred */
	struct xfs_deferred *deferred;
	size_t nr_deferred, alloc_deferred;
	struct xfs_names named;		/* phase 2's findings, named by phase 3's walk */
	struct inoset *files;		/* regular files whose maps the walk collected */
	struct xfs_walkstat *walkstat;	/* per walk thread */
	unsigned nr_walkstat;
	atomic_ullong walkstat_inodes, walkstat_requests;
	atomic_ullong walkstat_opened;	/* of those: opened files against their records */
	atomic_ullong bulk_records, bulk_requests;	/* the walk's bulk_inodes */
	struct xfs_ownermap *ownermap;	/* xfs_ownermap.c; NULL after the walk */
};

/* xfs_kscrub.c: phase 2, kernel scrub and repair of everything. */
void xfs_kscrub_probe(struct scrub_ctx *ctx);
void xfs_kscrub_all(struct scrub_ctx *ctx);

/* xfs_ondisk.c: phase 2, AG headers, btrees and inodes read from the disk. */
void xfs_ondisk_check(struct scrub_ctx *ctx);

/* xfs_counters.c: phase 2, the kernel's inode counters against its AGs'. */
void xfs_counters_check(struct scrub_ctx *ctx);

/*
 * xfs_walkstat.c: phase 3, in the walk threads.  add() holds an entry of
 * directory d (name NULL: d itself) for its BULKSTAT; flush() checks what
 * is held, at the end of d (while d->fd is open).
 */
struct backend_dir;
struct statx;
struct xfs_walkstat *xfs_walkstat_new(unsigned nr_threads);
void xfs_walkstat_free(struct xfs_walkstat *w, unsigned nr_threads);
void xfs_walkstat_add(struct scrub_ctx *ctx, const struct backend_dir *d, const char *name,
		      const struct statx *stx);
void xfs_walkstat_flush(struct scrub_ctx *ctx, const struct backend_dir *d);
/*
 * An opened file (stx: its open descriptor's statx) against rec, the
 * BULKSTAT record the walk took it from: add()ed only if they disagree.
 */
struct backend_inode;
void xfs_walkstat_opened(struct scrub_ctx *ctx, const struct backend_dir *d, const char *name,
			 const struct statx *stx, const struct backend_inode *rec);
/*
 * In check_dir: d against the record of itself its bulk requests brought
 * (see xfs_walkstat.c).  False: no such record, or it disagrees: add()
 * d for a request of its own.
 */
bool xfs_walkstat_dir(struct scrub_ctx *ctx, const struct backend_dir *d);
/* The bulk_inodes hook (backend.h): the walk's inodes by BULKSTAT. */
struct backend_inode;
int xfs_walkstat_bulk(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const uint64_t *inos, size_t n, struct backend_inode *out);
/*
 * In check_inode (walk_health): the health flags of the entry's record
 * from the thread's last bulk_inodes call, taken as xfs_health_take()
 * does; false if that call had no record of it.
 */
bool xfs_walkstat_health(struct scrub_ctx *ctx, const struct backend_dir *d, const char *name,
			 uint64_t ino);
/* "N inodes compared with BULKSTAT in M requests" (-v), after the walk. */
void xfs_walkstat_report(struct scrub_ctx *ctx);

/*
 * xfs_ownermap.c (its state; phase 2's side is in xfs_ondisk.h).  init()
 * after the geometry; extents() is the bulk_extents hook (backend.h);
 * report() says under -v what it served, after the walk; release() frees
 * it (then the hook answers -EOPNOTSUPP).
 */
struct xfs_ownermap;
struct fiemap_extent;
void xfs_ownermap_init(struct xfs_state *xs);
/*
 * Phase 2, before its reads: the GETFSMAP pass begins, on threads of its
 * own, where the walk will want the map (else the pass is made when the
 * walk first asks).
 */
void xfs_ownermap_start(struct scrub_ctx *ctx);
/* Phase 2's end: the pass waited for, under FSCRUB_DEBUG_AFTER_FSMAP only. */
void xfs_ownermap_wait(struct scrub_ctx *ctx);
/* The map, once, in a walk thread: before the walk's first BULKSTAT. */
void xfs_ownermap_prepare(struct scrub_ctx *ctx);
int xfs_ownermap_extents(struct scrub_ctx *ctx, unsigned thread,
			 const struct backend_inode *b, struct fiemap_extent *out, size_t max);
/*
 * For the bulk records: may BULKSTAT's HASATTR inode ino (ctime as
 * BULKSTAT gives it) be left unlisted?  True when phase 2 read its
 * attribute fork from the disk without a name listxattr would give (empty,
 * or parent pointers only) and the inode's ctime is still the one on the
 * disk then: setting or removing an attribute changes the ctime.
 */
bool xfs_ownermap_nameless(struct scrub_ctx *ctx, uint64_t ino, int64_t ctime_sec,
			   uint32_t ctime_nsec);
/* The bulk_extents_keep hook (backend.h): the walk took b's map. */
void xfs_ownermap_keep(struct scrub_ctx *ctx, const struct backend_inode *b);
/* After the walk: the maps the walk took into phase 3's extent list, the records freed. */
void xfs_ownermap_handover(struct scrub_ctx *ctx);
void xfs_ownermap_report(struct scrub_ctx *ctx);
void xfs_ownermap_release(struct xfs_state *xs);
struct fsmap;
/* Does the record map a file's data fork (not metadata, attr fork or bmbt)? */
bool xfs_is_data_rmap(const struct fsmap *m);

/* xfs_attrlist.c: the list_xattrs hook (backend.h), in the walk threads. */
struct backend_entry;
struct strbuf;
int xfs_list_xattrs(struct scrub_ctx *ctx, const struct backend_dir *d,
		    const struct backend_entry *e, struct strbuf *names);

/* xfs_quota.c: phase 3, after the walk: quota usage against the inodes. */
void xfs_quota_check(struct scrub_ctx *ctx);

/* xfs.c */
const char *xfs_inode_sick_name(unsigned bit);
/*
 * fn(arg, agno, thread) for every AG, the AGs in parallel on -j threads
 * (thread: 0 .. the thread count - 1, for per-thread state).  Returns 0,
 * or a negative errno if the threads cannot be started (fn never ran).
 */
typedef void (*xfs_ag_fn)(void *arg, uint32_t agno, unsigned thread);
int xfs_for_each_ag(struct scrub_ctx *ctx, xfs_ag_fn fn, void *arg);
/* How many threads xfs_for_each_ag() runs. */
unsigned xfs_ag_threads(const struct scrub_ctx *ctx);

/* xfs_inodes.c */
typedef void (*xfs_inode_fn)(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs, void *arg);
/*
 * BULKSTAT every inode, the AGs in parallel (fn runs in the threads).
 * Returns 0 or a negative errno.
 */
int xfs_bulkstat_each(struct scrub_ctx *ctx, xfs_inode_fn fn, void *arg);
/*
 * XFS_IOC_BULKSTAT, counted in xs->bs_requests and bs_inodes: 0 or -errno.
 * A request that names no AG is kept to the AG of its first inode.
 */
int xfs_bulkstat_req(struct xfs_state *xs, struct xfs_bulkstat_req *req);
/* One inode by number, fresh: 1 found (allocated), 0 not, or -errno. */
int xfs_bulkstat_one(struct xfs_state *xs, uint64_t ino, struct xfs_bulkstat *bs);
/* Phase 2 (kernel scrub): BULKSTAT health of one inode, named by phase 3's walk. */
void xfs_inode_health(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs);
/*
 * Without the kernel scrub (xs->walk_health): the health flags of inode
 * ino as a BULKSTAT record gives them, the first time the inode is seen
 * (thread-safe); dir and name (NULL: ino is the directory dir) name it,
 * dir NULL: no name (after the walk).
 */
void xfs_health_take(struct scrub_ctx *ctx, uint64_t ino, uint32_t sick, uint32_t checked,
		     struct dir_node *dir, const char *name);

/* Phase 3, after the walk. */
void xfs_inodes_after_walk(struct scrub_ctx *ctx);
/* Open an inode by its handle (fsid of the mount, number, generation): fd or -errno. */
int xfs_open_by_ino(struct xfs_state *xs, uint64_t ino, uint32_t gen);
/*
 * xfs_refcount.c, phase 3 after the walk, without the rmapbt: the files'
 * extents against the refcountbt (xfs.refcount).  collect() compares and
 * looks again at what differs; the owners of what is left go into names
 * for the second walk, and report() says it with their names.  NULL: the
 * check does not apply here (said under -v).
 */
struct xfs_names;
struct refc_check;
struct refc_check *xfs_refcount_collect(struct scrub_ctx *ctx, struct xfs_names *names);
void xfs_refcount_report(struct refc_check *rc, struct xfs_names *names);
/* Created or changed (ctime, btime) since the scan began. */
bool xfs_bs_changed_during_scan(const struct scrub_ctx *ctx, const struct xfs_bulkstat *bs);
/* Hold a per-inode finding back for the name (thread-safe). */
void xfs_defer_at(struct xfs_state *xs, uint64_t ino, enum severity sev, const char *check,
		  const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
#define xfs_defer(xs, ino, sev, check, ...) \
	xfs_defer_at(xs, ino, sev, check, __FILE__, __LINE__, __VA_ARGS__)
/*
 * The same, said only if the walk reaches the inode by a name; an error
 * then only if BULKSTAT still gives it no link (else it was linked since,
 * as an O_TMPFILE is: "changed while being checked").
 */
void xfs_defer_if_named_at(struct xfs_state *xs, uint64_t ino, enum severity sev,
			   const char *check, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
#define xfs_defer_if_named(xs, ino, sev, check, ...) \
	xfs_defer_if_named_at(xs, ino, sev, check, __FILE__, __LINE__, __VA_ARGS__)

void xfs_names_init(struct xfs_names *nl);
void xfs_names_add(struct xfs_names *nl, uint64_t ino);	/* thread-safe */
void xfs_names_finish(struct xfs_names *nl);
/* A walk reached ino as dir/name (name NULL: ino is dir itself). */
void xfs_names_note(struct xfs_names *nl, struct dir_node *dir, const char *name,
		    size_t namelen, uint64_t ino);
struct xfs_named *xfs_names_find(struct xfs_names *nl, uint64_t ino);
void xfs_names_release(struct scrub_ctx *ctx, struct xfs_names *nl);
/* Free the deferred findings (cleanup). */
void xfs_inodes_release(struct scrub_ctx *ctx);

#include "scan/context.h"

static inline struct xfs_state *xfs_state(const struct scrub_ctx *ctx)
{
	return ctx->backend;
}

#endif
