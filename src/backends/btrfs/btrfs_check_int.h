/*
 * btrfs_check_int: what the modules of the btrfs tree check share (the
 * state of a pass and its findings).  Only btrfs_check.c and the modules it
 * drives include this: btrfs_names.c (the namespace), btrfs_roots.c
 * (subvolume references), btrfs_csum.c (the csum tree), btrfs_fst.c (the
 * free space tree), btrfs_v1cache.c (the v1 space cache), btrfs_chunks.c
 * (chunks, device extents), btrfs_qgroup.c (qgroups) and
 * btrfs_check_report.c (the messages).
 */
#ifndef FSCRUB_BTRFS_CHECK_INT_H
#define FSCRUB_BTRFS_CHECK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/btrfs/btrfs_devtree.h"
#include "backends/btrfs/btrfs_names.h"
#include "backends/btrfs/btrfs_trees.h"
#include "report/report.h"

struct scrub_ctx;

enum finding_kind {
	F_REFS_SUM,	/* extent item refs != sum of its back references */
	F_REF_COUNT,	/* a data back reference's count != file extent items */
	F_NO_BACKREF,	/* a file extent item without a back reference */
	F_CROSSLINK,	/* ... to an extent whose back references name other files */
	F_NO_EXTENT,	/* a file extent item pointing at no data extent item */
	F_REF_NO_ROOT,	/* a data back reference naming a tree that does not exist */
	F_NBYTES,
	F_EXTENT_OVERLAP,	/* a file extent item begins before the one before it ends */
	F_EXTENT_HOLE,		/* without no-holes: file bytes below i_size no item covers */
	F_BG_USED,
	F_BYTES_USED,
	F_ROOT_REF_ALONE,	/* a ROOT_REF without its ROOT_BACKREF or v.v. (a: key type) */
	F_ROOT_REF_DIR,		/* a ROOT_REF without its directory entry */
	F_ROOT_UNREFERENCED,	/* a live subvolume no ROOT_BACKREF names */
	F_CSUM_MISSING,		/* checksummed file data without csum items */
	F_CSUM_UNEXPECTED,	/* nodatasum file data with csum items */
	F_CSUM_ORPHAN,		/* csum items over bytes no data extent holds */
	F_CSUM_COMPRESSED,	/* a compressed extent of a nodatasum file without csums */
	F_CSUM_OVERLAP,		/* a csum item begins before the one before it ends (a: its end) */
	/* an extent item's own fields (btrfs_check.c: check_extent_fields()) */
	F_EXTENT_GEN,		/* generation past the superblock's (a: it, b: the superblock's) */
	F_EXTENT_IREF,		/* an inline reference of no known type (a: type, b: where) */
	F_EXTENT_LEVEL,		/* a METADATA_ITEM's level past the deepest tree (a: it) */
	F_EXTENT_STRIPE,	/* a tree block across a 64 KiB stripe boundary */
	F_EXTENT_TYPE,		/* an extent in a block group of another type (a: its, b: the group's) */
	F_FST_USED_FREE,	/* the free space tree calls an extent's bytes free */
	F_FST_COUNT,		/* a FREE_SPACE_INFO's extent count != its free ranges */
	F_FST_NO_BG,		/* a FREE_SPACE_INFO past the last block group */
	F_V1_USED_FREE,		/* the v1 space cache calls an extent's bytes free */
	/* btrfs_chunks.c */
	F_CHUNK_NO_BG,		/* a chunk without a block group item */
	F_BG_NO_CHUNK,		/* a block group item without a chunk */
	F_CHUNK_BG_DIFF,	/* a chunk and its block group differ: length or type */
	F_STRIPE_NO_DEV_EXTENT,	/* a chunk's stripe without its DEV_EXTENT */
	F_DEV_EXTENT_ORPHAN,	/* a DEV_EXTENT that is no chunk's stripe */
	F_DEV_EXTENT_LEN,	/* a DEV_EXTENT of another length than its chunk's stripes */
	F_DEV_BYTES_USED,	/* a DEV_ITEM's bytes_used != its device extents */
	F_DEV_EXTENT_PAST_END,	/* a DEV_EXTENT ending past its device's total_bytes */
	/* btrfs_names.c */
	F_DIR_PAIR,		/* a directory's DIR_ITEMs and DIR_INDEXes differ */
	F_DIR_ISIZE,		/* a directory's i_size != its names' bytes */
	F_ENTRY_NO_REF,		/* a DIR_INDEX entry without the inode's INODE_REF */
	F_REF_NO_ENTRY,		/* an INODE_REF without the directory's DIR_INDEX */
	F_NLINK_REFS,		/* nlink != INODE_REF / INODE_EXTREF names */
	F_UNNAMED,		/* linked inode without any name */
	F_ORPHAN_LOST,		/* unlinked inode not on the orphan list */
	/* btrfs_check.c: an inode item's flags */
	F_FLAGS_UNKNOWN,	/* bits no kernel defines (a: the flags, b: those bits) */
	F_FLAGS_SYMLINK,	/* a symlink immutable or append-only */
	F_FLAGS_COMPRESS,	/* COMPRESS and NOCOMPRESS both */
	/* btrfs_qgroup.c: a qgroup (root: its id) against the extents (a: recorded, b: counted) */
	F_QGROUP_RFER,
	F_QGROUP_EXCL,
	F_QGROUP_CYCLE,		/* a qgroup its own ancestor through relation items */
	F_ROOT_KEY,		/* a global tree's ROOT_ITEM key offset != 0 (logical: tree, a: it) */
};

/* Whether the qgroups are checked, and why not (btrfs_qgroup.c). */
enum qg_state {
	QG_OFF,			/* quotas not enabled */
	QG_CHECKED,
	QG_RESCAN,		/* a rescan is running */
	QG_INCONSISTENT,	/* the kernel marked them inconsistent */
	QG_SIMPLE,		/* simple quotas: another accounting */
	QG_DROPPING,		/* a subvolume is being dropped */
	QG_NO_MEMORY,
};

/* A finding, kept until the second pass has confirmed it. */
struct tfinding {
	enum finding_kind kind;
	uint64_t root, ino, file_off;	/* the file named (0: none) */
	uint64_t logical, len;
	uint64_t a, b;			/* recorded vs found */
	uint64_t ref_off;		/* F_REF_COUNT: the back reference's offset;
					   F_V1_USED_FREE: the cache's generation */
	uint64_t other_root, other_ino;	/* F_CROSSLINK: the file the extent belongs to */
	uint64_t devid, physical;	/* chunk findings: the device and offset */
	const char *name;		/* a name, owned by the pass (root refs, dir entries) */
	uint64_t transid;		/* newest leaf among the items involved */
	/*
	 * What the compared fields were counted from, where counts alone could
	 * repeat while the items change (a directory's entries come and go
	 * in threes and fours): the inode's stamp (btrfs_inode_stamp()), the
	 * names' hash sums, a data extent item's generation (d_gen below).
	 * Compared between readings with the fields.
	 */
	uint64_t stamp;
	/* the same item seen again through snapshots sharing its leaf */
	unsigned long long shared_by;
	uint64_t shared_root;		/* one of them */
	bool dup;			/* this is such a sighting: not reported */
	bool confirmed;			/* read the same twice: reported as an error */
	/*
	 * Read the same as in the reading before, but the leaf that holds its
	 * subject was being rewritten (btrfs_check.c: subject_in_flux()): one
	 * more reading the same confirms it.
	 */
	bool agreed;
};

/*
 * Keep a finding of this pass (btrfs_check.c): the second pass and the
 * live-filesystem rule decide later whether it is an error.
 */
void btrfs_add_finding(struct pass *p, const struct tfinding *f);

/* One pass over the trees (btrfs_check.c owns it; the modules fill parts). */
struct fs_root {
	uint64_t id;
	bool shared;		/* a snapshot: may hold leaves owned by another tree */
	bool dead;		/* deleted, being dropped (refs 0) */
	int err;		/* -EIO, -EUCLEAN: the kernel refuses a block of it */
	uint64_t transid;	/* of the leaf holding its ROOT_ITEM */
	uint64_t created;	/* a snapshot's: the transaction that took it */
};

/* A ROOT_REF (parent -> child) or ROOT_BACKREF (child -> parent). */
struct root_ref {
	bool back;
	uint64_t parent, child, dirid, seq, transid;
	char *name;
};

/* A file extent item with a disk extent: what its back reference must say. */
struct fe_rec {
	uint64_t bytenr, root, ino, ref_off, file_off, transid;
	uint64_t cs_start, cs_len;	/* the disk bytes its checksums cover */
	/*
	 * 1: must have csums, -1: must not, 0: either; WANT_CSUM_COMPRESSED:
	 * must have, being compressed, although the file is nodatasum.
	 */
	int want_csum;
};

#define WANT_CSUM_COMPRESSED 2

/* A FREE_SPACE_INFO: the block group it claims to describe. */
struct fst_info {
	uint64_t start, len, transid;
};

/* A free range of the free space tree: an extent, or a bitmap's range. */
struct fst_range {
	uint64_t start, end, transid;
	unsigned char *bitmap;		/* NULL: all free; else a bit per sector */
};

/* The logical range [start, end) one csum item covers. */
struct csum_iv {
	uint64_t start, end, transid;
};

/* A data back reference of the extent being looked at. */
struct data_ref {
	bool shared;
	uint64_t root, ino, off;	/* shared: root is the parent leaf */
	uint32_t count;
	uint64_t transid;
};

/* The inode being summed in the fs tree being read. */
struct inode_sum {
	uint64_t ino, nbytes, found, transid, stamp;
	uint32_t nlink, mode;
	uint64_t flags, size;
	bool active;
	/*
	 * The file extent items seen so far: the start of the first, the end
	 * of the last; the first overlap (where, and the end it overlaps) and
	 * the first gap between two of them.
	 */
	bool have_ext, overlap, gap;
	uint64_t ext_start, ext_end, overlap_at, overlap_end, gap_at;
};

struct bgroup {
	uint64_t start, len, used, found, transid;
	uint64_t found_transid;		/* the newest leaf of the extent items in it */
	uint64_t flags;			/* BTRFS_BLOCK_GROUP_*: type and profile */
};

struct subvol_ino;

/*
 * Trees a rescue= mount left unloaded (ignorebadroots: the kernel could not
 * read them; ignoredatacsums: the csum tree): the tree search finds no such
 * tree (ENOENT).  What needs them is not checked, and said so (infos).
 */
enum unloaded_tree {
	UNLOADED_EXTENT = 1 << 0,	/* the extent tree, or the block group tree */
	UNLOADED_DEV = 1 << 1,		/* the device tree */
};

struct pass {
	struct scrub_ctx *ctx;
	int fd;
	bool rescue;			/* a rescue= mount: trees may be unloaded */
	unsigned unloaded;		/* enum unloaded_tree */
	/*
	 * A read-only rescue= mount: an unloaded tree is read from the
	 * devices instead (btrfs_tree_fallback()); what that met.
	 */
	bool devread;
	struct btrfs_devtree_log devlog;
	/* the extent or block group tree refused (UNLOADED_EXTENT set too):
	 * -EIO/-EUCLEAN read twice, -EAGAIN read through the second time */
	int extent_err;
	uint64_t extent_err_tree;
	/* the extent or block group tree its ROOT_ITEM's key hides (ENOENT), or 0 */
	uint64_t hidden_tree;
	uint32_t nodesize;
	struct fs_root *roots;
	size_t nr_roots, alloc_roots;
	size_t nr_unreadable;		/* roots the kernel refuses a block of (err) */
	unsigned long long unreadable_skipped;	/* their findings, left out */
	struct root_ref *rrefs;
	size_t nr_rrefs, alloc_rrefs;
	struct fe_rec *fe;
	size_t nr_fe, alloc_fe, fe_pos;
	/* regular files with the NODATASUM flag and a size: what -x reads (btrfs_datasum.h) */
	struct subvol_ino *nodatasum;
	size_t nr_nodatasum, alloc_nodatasum;
	bool nodatasum_lost;
	struct bgroup *bg;
	size_t nr_bg, alloc_bg;
	bool bg_tree;
	struct inode_sum cur_inode;	/* the inode being summed */
	struct btrfs_names names;	/* the namespace of the fs tree being read */
	/* the csum tree, read alongside the extent tree */
	struct btrfs_tree_reader csr;
	bool csr_end;
	int csr_err;
	/*
	 * Global trees whose ROOT_ITEM key is damaged (F_ROOT_KEY), by
	 * objectid bit: the kernel finds them by (id, ROOT_ITEM, 0), so its
	 * search of them fails with ENOENT -- said by the finding, not a
	 * failure to check.
	 */
	uint32_t bad_root_keys;
	struct csum_iv *cs;
	size_t nr_cs, alloc_cs;
	uint32_t csum_size, sectorsize;
	bool no_holes;			/* the no-holes feature: holes have no items */
	bool extent_tree_v2;		/* several global roots, numbered by key offset */
	unsigned long long csum_items;
	uint64_t cs_done;		/* the end of the last data extent checked */
	uint64_t cs_last_end;		/* the end of the last csum item read */
	uint64_t orphan_start, orphan_end, orphan_transid;	/* csums without extent */
	/* the free space tree, read alongside the extent tree */
	bool fst;
	struct btrfs_tree_reader fsr;
	bool fsr_end;
	int fsr_err;
	uint64_t fsr_last;		/* objectid of the last item read */
	struct fst_range *fq;
	size_t nr_fq, alloc_fq;
	bool in_info;
	uint64_t info_start, info_len, info_transid, run_end;
	uint32_t info_count, counted;
	struct fst_info *fsi;		/* every FREE_SPACE_INFO, in key order */
	size_t nr_fsi, alloc_fsi;
	unsigned long long fst_items;
	/* the v1 space cache, when there is no free space tree (btrfs_v1cache.c) */
	struct v1cache *v1;
	int v1_err;
	unsigned long long v1_caches, v1_loaded, v1_stale, v1_unread;
	uint64_t pending_at, pending_sum;	/* extents at a bg start before its item */
	uint64_t pending_transid;		/* ... the newest of their leaves */
	/* the data extent being read */
	bool in_data;
	uint64_t d_bytenr, d_len, d_refs, d_transid;
	/*
	 * The data extent item's generation: its findings' stamp.  A file
	 * rewritten over and over frees an extent at one commit and may get
	 * the same logical address back at the next, with the same length,
	 * inode and offset: two readings then see "the same" stale back
	 * reference, each a different extent of another transaction.
	 */
	uint64_t d_gen;
	struct data_ref *refs;
	size_t nr_refs, alloc_refs;
	/* findings */
	struct tfinding *f;
	size_t nr_f;
	unsigned long long dropped;
	/* counters for -v */
	unsigned long long root_items, fs_items, extent_items, bg_items, calls;
	unsigned long long data_extents, tree_blocks, file_extents, inodes;
	unsigned long long chunk_items, dev_items;
	uint64_t sb_bytes_used, sb_generation, sb_cache_generation;
	uint64_t max_transid;		/* the newest leaf read: what must be committed */
	/* the qgroups, counted alongside the extent tree (btrfs_qgroup.c) */
	struct qgroups *qg;
	enum qg_state qg_state;
	uint64_t qg_flags;		/* the QGROUP_STATUS item's */
	size_t qg_nr[2];		/* qgroups compared: of level 0, above it */
	unsigned long long quota_items;
	bool sb_ok;
};

/* btrfs_check.c: on a read-only rescue= mount, let r read an unloaded tree from the devices. */
void btrfs_pass_fallback(struct pass *p, struct btrfs_tree_reader *r);

/*
 * btrfs_check.c: read a whole tree, calling fn on every item (a signal
 * stops it: -ECANCELED); 0 or a negative errno (-ENOENT: no such tree).
 */
int btrfs_read_tree(struct pass *p, uint64_t tree, struct btrfs_tkey min, struct btrfs_tkey max,
		    int (*fn)(struct pass *, uint64_t, const struct btrfs_tree_item *));

/*
 * btrfs_qgroup.c: read the quota tree and decide p->qg_state (after the
 * root tree: a subvolume being dropped stops the check); every item of the
 * extent tree; after it, the qgroups against what the extents add up to;
 * free everything.  open: 0 or a negative errno of the quota tree's read.
 */
int btrfs_qgroup_open(struct pass *p);
void btrfs_qgroup_extent_item(struct pass *p, const struct btrfs_tree_item *it);
void btrfs_qgroup_finish(struct pass *p);
void btrfs_qgroup_release(struct pass *p);

/* btrfs_roots.c: keep a ROOT_REF / ROOT_BACKREF; check them all at the end. */
int btrfs_root_ref_item(struct pass *p, const struct btrfs_tree_item *it);
void btrfs_check_root_refs(struct pass *p);

/* btrfs_csum.c: the csums of the file extents [from, to) of the data extent p->d_*. */
void btrfs_check_csums(struct pass *p, size_t from, size_t to);
/* btrfs_csum.c: after the last data extent, the rest of the csum tree (orphans). */
void btrfs_csum_finish(struct pass *p);

/*
 * btrfs_fst.c: a used extent [a, b), in logical order, against the free
 * space tree; then the rest of the tree, for its counts.
 */
void btrfs_fst_used(struct pass *p, uint64_t a, uint64_t b, uint64_t transid);
void btrfs_fst_finish(struct pass *p);
/* btrfs_fst.c: after the block groups are known, no FREE_SPACE_INFO may lie past them. */
void btrfs_fst_check_groups(struct pass *p);

/*
 * btrfs_check.c: bytes_used, generation and cache_generation into p (and
 * p->sb_ok) from the primary superblock of the first of the filesystem's
 * devices (BTRFS_IOC_FS_INFO, BTRFS_IOC_DEV_INFO) whose magic and fsid
 * are the filesystem's, read with O_DIRECT.
 */
void btrfs_read_super(struct pass *p);

/*
 * btrfs_v1cache.c: keep the root tree's FREE_SPACE headers and cache
 * inodes (an item of the root tree; 0 or -ENOMEM); after the root tree
 * and the superblock, get ready to read the caches (0 or a negative errno
 * from the chunk tree); a used extent [a, b), in logical order, against
 * the cache of its block group; free everything.
 */
struct v1cache;
int btrfs_v1_root_item(struct pass *p, const struct btrfs_tree_item *it);
int btrfs_v1_open(struct pass *p);
void btrfs_v1_used(struct pass *p, uint64_t a, uint64_t b, uint64_t transid);
void btrfs_v1_release(struct pass *p);

/*
 * btrfs_chunks.c: read the chunk and device trees and check them against
 * each other and against the block groups in p->bg (sorted by start).
 * 0, or a negative errno from the reader.
 */
int btrfs_check_chunks(struct pass *p);

/* btrfs_check_report.c: print a finding (why: the "changed" reason, or NULL). */
void btrfs_report_finding(struct scrub_ctx *ctx, const struct tfinding *f, enum severity sev,
			  const char *why);

#endif
