/*
 * ext4: the ext4 backend's private interface, shared by its files.
 *
 *   ext4.c          the ops table; phase 1 (identify, syncfs, open the
 *                   device with libext2fs) and phase 2 (superblock and its
 *                   backups, group descriptors, bitmaps, free counts).
 *   ext4_inodes.c   phase 3: the walk hooks (what the walk saw of every
 *                   inode) and the inode-table scan after the walk: inode,
 *                   extent and directory checksums and structure, orphans,
 *                   link counts and extent maps against the walk, the block
 *                   bitmap against the blocks in use, blocks shared with
 *                   metadata or the journal, the inode bitmap.
 *   ext4_bulk.c     phase 3's bulk records: the walk's inodes, and extent
 *                   maps held whole in the inode, read from the inode
 *                   tables through the block device's page cache (see
 *                   there why that, not O_DIRECT), instead of a statx,
 *                   an open and a FIEMAP per file.
 *   ext4_dirra.c    phase 3's directory prefetch: a thread reads the inode
 *                   tables and asks the kernel for every directory's
 *                   blocks in disk order, a window ahead of the walk, so
 *                   that its getdents finds them in the page cache.
 *   ext4_htree.c    an htree directory's index judged whole, from the
 *                   scan's reads of its blocks: hash ranges, references.
 *   ext4_xref.c     the inode-core checks of e2fsck's pass 1.
 *   ext4_orphans.c  the inodes the disk lists as orphans (the superblock's
 *                   list, the orphan file), for the inode scan.
 *   ext4_quota.c    the quota files' usage against the inode scan's count.
 *   ext4_eainode.c  EA inodes (ea_inode feature): their reference counts
 *                   against the entries that name them, unattached ones,
 *                   the entries' targets and hashes.
 *   ext4_journal.c  the journal: its superblock, the internal journal's
 *                   blocks (which other inodes must not claim), an
 *                   external journal device's header.
 *   ext4_confirm.c  the live-filesystem rule: every suspect is re-read
 *                   from the disk with O_DIRECT after syncfs, twice, a short
 *                   delay apart, and is an error only if the same bytes
 *                   still fail and no recent journal transaction logged any
 *                   block it involves; otherwise an info.
 *
 * libext2fs reads the device, never the kernel's cache: the block device's
 * page cache is not coherent with what ext4 is doing, and on a journalled
 * filesystem the disk lags the journal (committed transactions are written
 * to their final places only at checkpoint).  So the device is opened with
 * EXT2_FLAG_DIRECT_IO and the unix I/O manager's cache off, and everything
 * first seen wrong is only a suspect until ext4_confirm_run() says so.
 *
 * Everything here is single-threaded (phases 1-3 outside the walk) except
 * the walk hooks (ext4_check_inode(), ext4_check_dir(), ext4_bulk_inodes(),
 * ext4_bulk_extents()), which the walk threads call, and ext4_dirra.c's
 * thread, which runs alongside the walk and reads only st->fs's geometry.
 */
#ifndef FSCRUB_BACKEND_EXT4_H
#define FSCRUB_BACKEND_EXT4_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ext2fs/ext2fs.h>

struct scrub_ctx;

/* How many fs blocks one suspect may involve (an inode and its extent tree). */
#define EXT4_SUSPECT_BLOCKS 32

struct ext4_suspect;

/*
 * Is the suspect still bad, judged only from fresh copies of its blocks
 * (bufs[i] is block blocks[i], fs->blocksize bytes)?  Returns true if so.
 */
typedef bool (*ext4_still_bad_fn)(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				  unsigned char *const *bufs);

/*
 * Something seen wrong on the first read.  msg is what the error says if
 * confirmed; the suspect owns it.
 */
struct ext4_suspect {
	const char *check;
	uint64_t ino;			/* 0: not about one inode */
	char *msg;
	blk64_t blocks[EXT4_SUSPECT_BLOCKS];
	unsigned nr_blocks;
	ext4_still_bad_fn still_bad;
	/* For still_bad: what the suspect is about. */
	uint64_t arg[4];
	/*
	 * An extra look through the kernel (ext4_inodes.c), NULL: none.
	 * Returns why the kernel's view clears the suspect, or NULL.
	 */
	const char *(*kernel_view)(struct scrub_ctx *ctx, const struct ext4_suspect *s);
	/*
	 * Judged without the journal's recent blocks: the suspect is about the
	 * journal itself (an external device that is missing or wrong).
	 */
	bool journal_free;
	/* About an inode no name reached: the naming walk is not asked for it. */
	bool no_name;
	/*
	 * Confirmed, a warning rather than an error: what e2fsck rewrites
	 * without calling the filesystem damaged (a stale checksum over fields
	 * that agree, a backup never written).
	 */
	bool warn;
	/*
	 * The inode's extent tree or block map had more blocks than the
	 * suspect holds: the walks of its fresh copy read the others afresh.
	 */
	bool tree_beyond;
	/* Filled by ext4_confirm_run(): why it is not an error, or NULL. */
	const char *cleared;
};

/* Per-inode memory of what the walk saw (ext4_inodes.c). */
struct ext4_seen {
	_Atomic uint16_t nlink;		/* st_nlink + 1 (capped), 0: not reached */
	_Atomic uint16_t flags;		/* EXT4_SEEN_* */
	_Atomic uint32_t map_hash;	/* FIEMAP map digest (EXT4_SEEN_MAP) */
};

enum {
	EXT4_SEEN_CHANGED	= (1 << 0),	/* changed during the scan */
	EXT4_SEEN_MAP		= (1 << 1),	/* map_hash is valid */
	EXT4_SEEN_DIR		= (1 << 2),
};

/* A run of physical blocks. */
struct ext4_run {
	blk64_t start;
	uint64_t len;
};

struct ext4_bulk;
struct ext4_dirra;
struct ext4_xattr_ref;
struct ext4_quota;

struct ext4_state {
	ext2_filsys fs;
	errcode_t open_err;		/* why fs is NULL: ext2fs_open2() refused the superblock */
	int direct_fd;			/* the device, O_RDONLY|O_DIRECT */
	/* The device through its page cache, for ext4_bulk.c only (else -1). */
	int cached_fd;
	/* ext4_bulk.c: per walk thread (nr_bulk), NULL: no bulk records. */
	struct ext4_bulk *bulk;
	unsigned nr_bulk;
	/* The kernel's system zone (ext4_bulk.c): sorted, disjoint runs. */
	struct ext4_run *zones;
	size_t nr_zones, alloc_zones;
	_Atomic unsigned long long bulk_reads, bulk_records, bulk_maps;
	/* ext4_dirra.c's prefetch while it runs, else NULL. */
	struct ext4_dirra *dirra;
	/* Directories the walk has done (ext4_check_dir()): the prefetch's pace. */
	_Atomic unsigned long long walk_dirs;
	bool jmapped;			/* ext4_journal_map() has run ... */
	errcode_t jmap_err;		/* ... with this result */
	bool journal_known;		/* an internal journal we can read */
	/* An external journal device found by its UUID (O_DIRECT), else -1. */
	int jdev_fd;
	/* The internal journal's blocks (ext4_journal_map()), in file order. */
	struct ext4_run *jruns;
	size_t nr_jruns;
	bool confirm_cap;		/* open_by_handle_at works */
	/* The walk's view, one chunk of ext4_seen per block group, on demand. */
	_Atomic(struct ext4_seen *) *seen;
	dgrp_t nr_seen_groups;
	/* The list of suspects waiting for ext4_confirm_run(). */
	struct ext4_suspect *suspects;
	size_t nr_suspects, alloc_suspects;
	/* Counters for phase 6. */
	unsigned long long inodes_scanned, extent_blocks, dir_blocks, confirmed, cleared;
	/* Inodes in use no name reached while names were hidden (phase 3). */
	unsigned long long unreached;
	/* Blocks claimed by inodes and metadata (phase 3), NULL before. */
	ext2fs_block_bitmap claimed;
	/* The group metadata alone: superblocks, descriptors, bitmaps, inode tables. */
	ext2fs_block_bitmap metadata;
	/* The bad-blocks inode's blocks (phase 3, inode 1 first), NULL: none. */
	ext2fs_block_bitmap badblocks;
	/* The inodes the disk lists as orphans (ext4_orphans.c), NULL: not known. */
	ext2fs_inode_bitmap orphans;
	/* EA inodes and the entries that name them (ext4_eainode.c), NULL: no ea_inode. */
	struct ext4_eainodes *ea;
	/* Usage by user, group and project (ext4_quota.c), NULL: not checked. */
	struct ext4_quota *quota;
	/* Inodes in use and the attribute block each names (ext4_xattr_refs.c). */
	struct ext4_xattr_ref *xattr_refs;
	size_t nr_xattr_refs, alloc_xattr_refs;
	unsigned long long xattr_blocks_judged, xattr_blocks_unjudged;
};

static inline struct ext4_state *ext4_state(struct scrub_ctx *ctx);

/*
 * An inode time (seconds with the epoch bits of its _extra field, and ns)
 * in ns since the epoch; INT64_MAX from 2262 on, where ns overflow 64 bits
 * (ext4's times reach 2446): such a time is after any scan.
 */
static inline int64_t ext4_time_ns(int64_t sec, int64_t nsec)
{
	return sec >= INT64_MAX / 1000000000LL ? INT64_MAX : sec * 1000000000LL + nsec;
}

/*
 * ext4.c, phase 2's steps (for tests/fuzz/fuzz_ext4.c too): the primary
 * superblock and every backup; every group's descriptor, bitmaps and free
 * counts.  What is wrong is queued as suspects.
 */
void ext4_check_superblocks(struct scrub_ctx *ctx);
/* What is wrong with a superblock's geometry, NULL if nothing. */
const char *ext4_sb_insane(ext2_filsys fs, const struct ext2_super_block *sb);
/*
 * Does inode ino's group descriptor place its inode table inside the
 * filesystem?  Asked before libext2fs reads an inode through the
 * descriptors (ext2fs_read_inode(), ext2fs_block_iterate3(), ext2fs_bmap2()
 * without the inode, ext2fs_file_open()): libext2fs 1.47.0 reads a table
 * at block 2^64-1 through its direct-I/O bounce buffer 1 KiB before the
 * buffer (found by fuzz_ext4).  Phase 2 reports such a descriptor.
 */
bool ext4_inode_placed(ext2_filsys fs, ext2_ino_t ino);
void ext4_check_groups(struct scrub_ctx *ctx);

/* ---- ext4_confirm.c ---- */

/*
 * Add a suspect (copied; msg is formatted).  Returns it so the caller can
 * add blocks and arguments; at most EXT4_SUSPECT_BLOCKS blocks are kept.
 */
struct ext4_suspect *ext4_suspect_add(struct scrub_ctx *ctx, const char *check, uint64_t ino,
				      ext4_still_bad_fn still_bad, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void ext4_suspect_block(struct ext4_suspect *s, blk64_t blk);
/* Is blk already among the suspect's blocks? */
bool ext4_suspect_has_block(const struct ext4_suspect *s, blk64_t blk);
/*
 * An inode's extent tree or block map blocks into s, after the blocks it
 * holds already: tree, the first nr_tree of them in walk order (nr_tree ==
 * EXT4_SUSPECT_BLOCKS: there were more).  A tree with more than fit gets
 * tree_beyond, and its other blocks are read afresh when it is judged.
 */
void ext4_suspect_tree(struct ext4_suspect *s, const blk64_t *tree, unsigned nr_tree);
/*
 * Confirm or clear every queued suspect and report it: an error if still
 * bad in two fresh O_DIRECT reads after syncfs, with the same bytes, in
 * blocks no recent journal transaction logged; else an info.  With
 * name_inodes (after the walk), errors about inodes are reported by the
 * names a second walk finds for them.
 */
void ext4_confirm_run(struct scrub_ctx *ctx, bool name_inodes);
/*
 * Read one block from the disk, bypassing every cache, into buf (aligned,
 * fs->blocksize bytes).  Returns 0 or a negative errno.
 */
int ext4_read_direct(struct ext4_state *st, blk64_t blk, void *buf);
/* An aligned buffer of one fs block, zeroed; free() it. */
void *ext4_block_buf(const struct ext4_state *st);

/* ---- ext4_inodes.c ---- */

/* Phase 3 walk hooks. */
struct backend_dir;
struct backend_entry;
void ext4_check_inode(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const struct backend_entry *e);
void ext4_check_dir(struct scrub_ctx *ctx, const struct backend_dir *d);
/* Phase 3 after the walk. */
int ext4_scan_inodes(struct scrub_ctx *ctx);
/*
 * ext4_scan_inodes()'s steps, for tests/fuzz/fuzz_ext4.c too.  begin():
 * the bitmaps as they are now, the metadata's blocks claimed, the
 * journal's mapped, groups whose inode table is outside the filesystem
 * left out; NULL (said) if the inodes cannot be scanned.  tables(): the
 * inodes of the tables in order, at most max of them; after(): the
 * directories still batched, the orphan list, the attribute blocks'
 * reference counts, inodes reached but marked free.
 */
struct ext4_iscan;
struct ext4_iscan *ext4_iscan_begin(struct scrub_ctx *ctx);
void ext4_iscan_tables(struct scrub_ctx *ctx, struct ext4_iscan *is, unsigned long long max);
void ext4_iscan_after(struct scrub_ctx *ctx, struct ext4_iscan *is);
void ext4_iscan_free(struct scrub_ctx *ctx, struct ext4_iscan *is);

/*
 * For an inode suspect (blocks[0] its inode-table block, arg[0] the
 * inode's offset in it, arg[1] its generation; the extent tree's blocks
 * among blocks): does the inode in the fresh bufs, still in use and still
 * mapped by blocks (an extent tree or a block map), map block b?
 */
bool ext4_fresh_maps(struct scrub_ctx *ctx, const struct ext4_suspect *s,
		     unsigned char *const *bufs, blk64_t b);
/*
 * An inode suspect: the message, and as blocks[0] the inode's table block,
 * arg[0] its offset there, arg[1] its generation (cleared if the table
 * cannot be found).
 */
struct ext4_suspect *ext4_inode_suspect(struct scrub_ctx *ctx, const char *check,
					ext2_ino_t ino, const struct ext2_inode_large *in,
					ext4_still_bad_fn fn, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* Such a suspect's inode out of the fresh bufs: false if its generation moved. */
bool ext4_fresh_inode(struct scrub_ctx *ctx, const struct ext4_suspect *s,
		      unsigned char *const *bufs, struct ext2_inode_large *in);
/*
 * The same inode's tree from those bufs, walked whole: *count and
 * *written_end as ext4_xref_tree() takes them, *in the fresh inode.  False
 * if the inode is no longer in use, mapped by blocks and this generation,
 * or its tree does not parse or uses a block not among the suspect's (but
 * with tree_beyond).
 */
bool ext4_fresh_tree_totals(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs, struct ext2_inode_large *in,
			    uint64_t *count, uint64_t *written_end);
/* The same walk's file blocks below i_size that are mapped, into *mapped_in_size. */
bool ext4_fresh_tree_in_size(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs, struct ext2_inode_large *in,
			     uint64_t *mapped_in_size);

/* ---- ext4_htree.c ---- */

/*
 * An htree directory's index, summed up block by block while the inode
 * scan reads the directory (n: its blocks up to the last one mapped), then
 * judged whole by ext4_htree_end().
 */
struct ext4_htree;
struct ext4_htree *ext4_htree_begin(ext2_filsys fs, ext2_ino_t ino,
				    const struct ext2_inode_large *in, uint32_t n);
/* Block lblk (at pblk), sound by itself: the root first, then in any order. */
void ext4_htree_block(struct ext4_htree *h, uint32_t lblk, blk64_t pblk, const unsigned char *b);
/* A block with a finding of its own, or unread: the index is not judged. */
void ext4_htree_spoil(struct ext4_htree *h);
/*
 * After the directory's last block: hash ranges (ext4.htree_hash) and
 * references (ext4.htree) become a suspect, names that cannot be hashed
 * an info; frees h.
 */
void ext4_htree_end(struct scrub_ctx *ctx, struct ext4_htree *h,
		    const struct ext2_inode_large *in);

/* ---- ext4_bulk.c ---- */

/*
 * End of phase 2 (main thread): the system zone and the per-thread
 * buffers of the bulk hooks; without them (a damaged descriptor, an
 * unknown journal) the hooks answer -EOPNOTSUPP and the walk stats.
 */
void ext4_bulk_init(struct scrub_ctx *ctx);
void ext4_bulk_free(struct ext4_state *st);
/* After the walk, under -v: what the bulk hooks served. */
void ext4_bulk_report(struct scrub_ctx *ctx);
/* The bulk_inodes and bulk_extents hooks (backend.h). */
struct backend_inode;
struct fiemap_extent;
int ext4_bulk_inodes(struct scrub_ctx *ctx, const struct backend_dir *d,
		     const uint64_t *inos, size_t n, struct backend_inode *out);
int ext4_bulk_extents(struct scrub_ctx *ctx, unsigned thread, const struct backend_inode *r,
		      struct fiemap_extent *out, size_t max);

/* ---- ext4_dirra.c ---- */

/*
 * End of phase 2 (main thread, after ext4_bulk_init()): start the
 * directory prefetch thread, unless it is off (-v says why).
 */
void ext4_dirra_start(struct scrub_ctx *ctx);
/*
 * After the walk, before anything changes st->fs (main thread): stop and
 * join the thread, free it; say: tell under -v what it prefetched.  Does
 * nothing if none runs.
 */
void ext4_dirra_stop(struct scrub_ctx *ctx, bool say);

/* ---- ext4_xref.c ---- */

/*
 * e2fsck's pass-1 checks of an inode core in use (checksum good): dtime,
 * flags, directory size; what is wrong becomes a suspect.  False if the
 * flags are wrong: the inode cannot be read by them (its tree is not
 * judged).
 */
bool ext4_xref_inode(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *in);
/* The bytes i_blocks says the inode uses (both halves, huge_file's unit). */
uint64_t ext4_inode_bytes(ext2_filsys fs, const struct ext2_inode_large *in);
/*
 * The same for what the inode's extent tree or block map maps, walked
 * whole and found sound (ext4_inodes.c): count, the blocks its leaves map (unwritten
 * included) and its own tree blocks; written_end, the file block after its
 * last written extent (0: none); tree, its first nr_tree tree blocks
 * (nr_tree == EXT4_SUSPECT_BLOCKS: more than the suspect can hold).
 * i_blocks against count, a regular file's i_size against written_end.
 */
void ext4_xref_tree(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *in,
		    uint64_t count, uint64_t written_end, const blk64_t *tree, unsigned nr_tree);
/*
 * The internal journal's map, walked whole and found sound: jbd2 needs
 * every block of its i_size, so mapped_in_size (those that are mapped)
 * must be all of them, no hole (e2fsck: "Superblock has an invalid
 * journal").  Blocks past the end are not judged: old mke2fs mapped one
 * more, and e2fsck passes it.  An ext4.journal suspect.
 */
void ext4_xref_journal(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *in,
		       uint64_t mapped_in_size, const blk64_t *tree, unsigned nr_tree);

/* ---- ext4_journal.c ---- */

/*
 * Phase 1: an external journal's device, found by the UUID the superblock
 * names, opened into st->jdev_fd (-1 if it is not found: phase 3 says so).
 */
void ext4_journal_open(struct scrub_ctx *ctx);
/*
 * Before the walk (ext4_bulk_init()) and the inode scan: the internal
 * journal's runs into st->jruns, once; say: tell under -v what it found.
 */
void ext4_journal_map(struct scrub_ctx *ctx, bool say);
/*
 * Do blocks [p, p + len) meet the internal journal's?  If so, *first and
 * *last are the first and last shared blocks.
 */
bool ext4_journal_overlap(const struct ext4_state *st, blk64_t p, uint64_t len,
			  blk64_t *first, blk64_t *last);
/*
 * After the inode scan: the internal journal's superblock against the
 * filesystem, or the external journal device's header; suspects.
 */
void ext4_journal_check(struct scrub_ctx *ctx);
/*
 * What group metadata block b is ("the inode table of group 3"), into buf;
 * NULL if it is none.
 */
const char *ext4_metadata_owner(ext2_filsys fs, blk64_t b, char *buf, size_t len);

/* ---- ext4_orphans.c ---- */

/* Before the inode scan: the superblock's orphan list and the orphan file into st->orphans. */
void ext4_orphans_collect(struct scrub_ctx *ctx);
/* Does the disk list inode ino as an orphan?  True when the orphans are not known. */
bool ext4_orphan_listed(const struct ext4_state *st, ext2_ino_t ino);

/* ---- ext4_quota.c ---- */

/* User, group, project. */
#define EXT4_QUOTA_TYPES 3

/* Before the inode scan: with the quota feature, st->quota to count into. */
void ext4_quota_begin(struct scrub_ctx *ctx);
/* The inode scan: inode ino is in use (recent: it changed during the scan). */
void ext4_quota_note(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *in,
		     bool recent);
/* An inode's user, group and project ids. */
void ext4_quota_ids(ext2_filsys fs, const struct ext2_inode_large *in,
		    uint32_t ids[EXT4_QUOTA_TYPES]);
/* After the scan, before the check: n more inodes (EA inodes) charged to the ids. */
void ext4_quota_charge_inodes(struct scrub_ctx *ctx, const uint32_t ids[EXT4_QUOTA_TYPES],
			      unsigned n);
/* An attribute block could not be read: what it charges is unknown, nothing is judged. */
void ext4_quota_unknown(struct scrub_ctx *ctx);
/* After the scan: every quota file's usage against the count; suspects. */
void ext4_quota_check(struct scrub_ctx *ctx);
void ext4_quota_release(struct ext4_state *st);

/* ---- ext4_xattr_refs.c ---- */

/* The inode scan: inode ino (in), in use, keeps its attributes in block blk. */
void ext4_xattr_refs_note(struct ext4_state *st, ext2_ino_t ino,
			  const struct ext2_inode_large *in, blk64_t blk);
/*
 * After the scan: each noted block's reference count against the inodes
 * that name it (suspects and infos); frees the notes.
 */
void ext4_xattr_refs_check(struct scrub_ctx *ctx);
void ext4_xattr_refs_release(struct ext4_state *st);
/*
 * The blocks ext4 charges to an inode's i_blocks for its attribute values
 * kept in EA inodes (0 without the ea_inode feature): raw, the inode's
 * EXT2_INODE_SIZE bytes as on the disk; acl, its attribute block's bytes,
 * or NULL for none (a block without an attribute header counts nothing).
 */
uint64_t ext4_ea_inode_blocks(ext2_filsys fs, const void *raw, const unsigned char *acl);
/*
 * Where the attribute entries in an inode's body begin (past their magic),
 * as an offset in raw (its EXT2_INODE_SIZE bytes), or 0: none.
 */
unsigned ext4_ibody_entries(ext2_filsys fs, const void *raw);
/* An attribute entry that names an EA inode (host byte order). */
struct ext4_ea_entry {
	uint32_t inum, value_size, e_hash;
	/* The name's hash, with unsigned and with signed chars (e_hash's start). */
	uint32_t name_hash, name_hash_signed;
};
typedef void (*ext4_ea_entry_fn)(void *arg, const struct ext4_ea_entry *e);
/*
 * The entries from p up to end (or the 4 zero bytes that end them) that
 * name an EA inode: fn (if not NULL) is called for each; returns how many.
 * An entry whose name would cross end stops the walk.
 */
unsigned ext4_ea_entries(const unsigned char *p, const unsigned char *end,
			 ext4_ea_entry_fn fn, void *arg);

/* ---- ext4_eainode.c ---- */

/* Before the inode scan: with the ea_inode feature, st->ea to note into. */
void ext4_eainode_begin(struct scrub_ctx *ctx);
/* The inode scan: inode ino, in use (the bitmap), has EXT4_EA_INODE_FL. */
void ext4_eainode_note_inode(struct scrub_ctx *ctx, ext2_ino_t ino,
			     const struct ext2_inode_large *in);
/* The inode scan: inode ino, in use, not deleted: the entries in its body. */
void ext4_eainode_note_body(struct scrub_ctx *ctx, ext2_ino_t ino,
			    const struct ext2_inode_large *in);
/*
 * After the scan (ext4_xattr_refs.c): attribute block blk (its bytes in b,
 * a sound header), first named by inode owner of generation gen: its
 * entries that name EA inodes, one reference each.  Returns how many.
 */
unsigned ext4_eainode_note_block(struct scrub_ctx *ctx, blk64_t blk, ext2_ino_t owner,
				 uint32_t gen, const unsigned char *b);
/*
 * An attribute block could not be read, or is not noted (an open, unlinked
 * inode's): the references and the quota charges are not all known.
 */
void ext4_eainode_unknown(struct scrub_ctx *ctx);
/*
 * After ext4_xattr_refs_check(): the counts, unattached EA inodes, the
 * entries' targets and hashes (ext4.ea_inode suspects); frees the notes.
 */
void ext4_eainode_check(struct scrub_ctx *ctx);
void ext4_eainode_release(struct ext4_state *st);

/* ---- ext4.c ---- */

/* Are all len bytes at p zero (a block or inode slot never written)? */
bool ext4_all_zero(const void *p, size_t len);
/* Are blocks [b, b + n) inside the filesystem? */
bool ext4_blocks_in_fs(ext2_filsys fs, blk64_t b, blk64_t n);
/* The block and the byte offset in it of inode ino in the inode table. */
bool ext4_inode_location(ext2_filsys fs, ext2_ino_t ino, blk64_t *blk, unsigned *off);
/*
 * How many of group g's inode-table slots may be in use: all without
 * group descriptor checksums, none while its inodes are uninitialised,
 * else all but its unused tail (bg_itable_unused; one longer than the
 * group counts for nothing: phase 2 says so).  From the descriptors read
 * at phase 1: the tail only shrinks since, so an inode allocated past it
 * meanwhile counts as not in use (ext4_bulk.c leaves it to a statx).
 */
uint32_t ext4_itable_in_use(ext2_filsys fs, dgrp_t g);
/* The block that holds group g's descriptor. */
blk64_t ext4_gd_block(ext2_filsys fs, dgrp_t g);
/* Fresh bytes of group g's descriptor, out of its descriptor block. */
const void *ext4_gd_in_block(ext2_filsys fs, dgrp_t g, const unsigned char *blockbuf);
/* A libext2fs error code as text. */
const char *ext4_strerror(errcode_t err);
/*
 * crc32c of len bytes at b, continued from an inode's checksum seed (the
 * filesystem's seed, the inode's number, its generation): where inode,
 * extent-block and directory-block checksums start (metadata_csum).
 * Through crc32c.h (the CPU's crc32 instruction): libext2fs's own is a
 * table, and every inode is checked two or three times.
 */
uint32_t ext4_csum(ext2_filsys fs, ext2_ino_t ino, uint32_t gen, const void *b, size_t len);
/* ext2fs_inode_csum_verify()'s verdict on the inode at raw (its whole on-disk size). */
bool ext4_inode_csum_ok(ext2_filsys fs, ext2_ino_t ino, const void *raw);

/*
 * The hooks for the subcommands (ext4_health.c): fscrub health reads the
 * superblock's error record from sysfs; fscrub watch follows the kernel's
 * FAN_FS_ERROR events (WATCH_FS_ERROR), ext4's only error events.
 */
struct health;
struct watch_fs;
struct watch_source;
int ext4_health(struct health *h);
int ext4_watch_open(struct watch_fs *wf, int root, struct watch_source *src);

#include "scan/context.h"

static inline struct ext4_state *ext4_state(struct scrub_ctx *ctx)
{
	return ctx->backend;
}

#endif
