/*
 * ext4_quota: with the quota feature, each quota file's usage against what
 * the inode scan counted (e2fsck's "[QUOTA WARNING] Usage inconsistent for
 * ID 0: actual (13312, 2) != expected (14336, 3)").  The files are read
 * through libext2fs, so this needs no quota support in the kernel (which
 * without CONFIG_QFMT_V2 mounts such a filesystem read-only only).
 *
 * The inode scan hands every inode in use to ext4_quota_note(): its bytes
 * (i_blocks) and one inode go to its user, group and project, as e2fsck
 * counts them (the root and ordinary inodes; not the project quota or
 * orphan file inodes, not EA inodes).  With the ea_inode feature the
 * kernel charges an EA inode to each inode whose attributes name it, not
 * to itself (ext4_xattr_inode_alloc_quota(): one inode and the value's
 * blocks, which i_blocks already holds), and so does e2fsck: an owner
 * counts one inode more per entry that names an EA inode, in its body
 * here, in its attribute block through ext4_quota_charge_inodes() when
 * ext4_xattr_refs.c reads that block after the scan.  ext4_quota_check() then reads each
 * quota file -- the kernel's v2 format: 1 KiB quota blocks, a radix tree
 * of depth 4 over the 32-bit id from block 1, leaf blocks of 72-byte
 * entries -- and compares every id either side names.
 *
 * A mismatch is a suspect: the fs block that holds the id's entry (or the
 * tree block whose reference for it is 0) is read again, and it is an
 * error if the entry still reads as first read.  The kernel journals
 * quota writes, so one it is writing is a recent transaction; and where an
 * inode of the type changed during the scan the counts are not judged.
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strbuf.h"
#include "report/checks.h"
#include "report/report.h"
#include "scan/context.h"

#define QT_BLOCK 1024		/* a quota tree block (QT_BLKSIZE_BITS 10) */
#define QT_DEPTH 4		/* tree levels above the leaves, 8 bits of the id each */
#define QT_ROOT 1		/* the tree's root block (QT_TREEOFF) */
#define QT_LEAF_HEADER 16	/* struct qt_disk_dqdbheader */
#define QT_ENTRY 72		/* struct v2r1_disk_dqblk */
/* Offsets in an entry: dqb_id, dqb_curinodes, dqb_curspace. */
#define QT_ID 0
#define QT_INODES 24
#define QT_SPACE 48
/* A larger quota file (over 900 000 ids) is not read whole into memory. */
#define QT_FILE_MAX (64u << 20)

static const char *const type_names[EXT4_QUOTA_TYPES] = { "user", "group", "project" };

struct quota_use {
	uint32_t id;
	bool used;
	uint64_t space, inodes;
};

/* One type's usage by id: open addressing, a power-of-two table. */
struct quota_tab {
	struct quota_use *v;
	size_t n, cap;
	bool changed;		/* an inode of this type changed during the scan */
	/* An attribute block that names EA inodes could not be read: charges unknown. */
	bool unknown;
};

struct ext4_quota {
	struct quota_tab tab[EXT4_QUOTA_TYPES];
};

static uint32_t *quota_inum(struct ext2_super_block *sb, unsigned t)
{
	return t == 0 ? &sb->s_usr_quota_inum : t == 1 ? &sb->s_grp_quota_inum :
	       &sb->s_prj_quota_inum;
}

static struct quota_use *tab_slot(struct quota_tab *t, uint32_t id)
{
	/* Fibonacci hashing: ids are often small and consecutive. */
	size_t i = (size_t)((id * 2654435769u) & (t->cap - 1));

	while (t->v[i].used && t->v[i].id != id)
		i = (i + 1) & (t->cap - 1);
	return &t->v[i];
}

static void tab_grow(struct quota_tab *t)
{
	struct quota_tab old = *t;

	t->cap = old.cap ? old.cap * 2 : 64;
	t->v = xcalloc(t->cap, sizeof(*t->v));
	t->n = 0;
	for (size_t i = 0; i < old.cap; i++)
		if (old.v[i].used) {
			*tab_slot(t, old.v[i].id) = old.v[i];
			t->n++;
		}
	free(old.v);
}

static struct quota_use *tab_get(struct quota_tab *t, uint32_t id)
{
	struct quota_use *u;

	if (2 * (t->n + 1) > t->cap)	/* at most half full */
		tab_grow(t);
	u = tab_slot(t, id);
	if (!u->used) {
		u->used = true;
		u->id = id;
		t->n++;
	}
	return u;
}

void ext4_quota_ids(ext2_filsys fs, const struct ext2_inode_large *in,
		    uint32_t ids[EXT4_QUOTA_TYPES])
{
	bool has_projid = EXT2_INODE_SIZE(fs->super) > EXT2_GOOD_OLD_INODE_SIZE &&
			  in->i_extra_isize >= offsetof(struct ext2_inode_large, i_projid) + 4 -
					       EXT2_GOOD_OLD_INODE_SIZE;

	ids[0] = inode_uid(*in);
	ids[1] = inode_gid(*in);
	ids[2] = has_projid ? in->i_projid : 0;
}

/* Charge space bytes and inodes inodes to the ids; recent: they changed during the scan. */
static void charge(struct ext4_quota *q, const uint32_t ids[EXT4_QUOTA_TYPES], uint64_t space,
		   uint64_t inodes, bool recent)
{
	for (unsigned t = 0; t < EXT4_QUOTA_TYPES; t++) {
		struct quota_use *u = tab_get(&q->tab[t], ids[t]);

		u->space += space;
		u->inodes += inodes;
		q->tab[t].changed |= recent;
	}
}

/* The entries in the inode's body that name an EA inode (raw: its on-disk bytes). */
static unsigned ibody_ea_inodes(ext2_filsys fs, const struct ext2_inode_large *in)
{
	const unsigned char *raw = (const unsigned char *)in;
	unsigned off;

	if (!ext2fs_has_feature_ea_inode(fs->super) || !(off = ext4_ibody_entries(fs, raw)))
		return 0;
	return ext4_ea_entries(raw + off, raw + EXT2_INODE_SIZE(fs->super), NULL, NULL);
}

void ext4_quota_note(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *in,
		     bool recent)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext2_super_block *sb = st->fs->super;
	uint32_t ids[EXT4_QUOTA_TYPES];

	if (!st->quota || (ino != EXT2_ROOT_INO && ino < EXT2_FIRST_INODE(sb)) ||
	    ino == sb->s_prj_quota_inum || ino == sb->s_orphan_file_inum ||
	    (in->i_flags & EXT4_EA_INODE_FL))
		return;
	ext4_quota_ids(st->fs, in, ids);
	charge(st->quota, ids, ext4_inode_bytes(st->fs, in), 1 + ibody_ea_inodes(st->fs, in),
	       recent);
}

void ext4_quota_charge_inodes(struct scrub_ctx *ctx, const uint32_t ids[EXT4_QUOTA_TYPES],
			      unsigned n)
{
	struct ext4_state *st = ext4_state(ctx);

	if (st->quota)
		charge(st->quota, ids, 0, n, false);
}

void ext4_quota_unknown(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	for (unsigned t = 0; st->quota && t < EXT4_QUOTA_TYPES; t++)
		st->quota->tab[t].unknown = true;
}

void ext4_quota_begin(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (!ext2fs_has_feature_quota(st->fs->super))
		return;
	st->quota = xcalloc(1, sizeof(*st->quota));
}

/* ---- the quota file -------------------------------------------------------- */

/* A quota file read whole, and where its fs blocks are. */
struct qfile {
	ext2_filsys fs;
	ext2_ino_t ino;
	unsigned char *data;
	uint64_t size;
};

static uint32_t le32_at(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t le64_at(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static errcode_t qfile_read(ext2_filsys fs, ext2_ino_t ino, struct qfile *q)
{
	ext2_file_t f;
	unsigned got;
	errcode_t err;

	q->fs = fs;
	q->ino = ino;
	if (!ext4_inode_placed(fs, ino))
		return EXT2_ET_GDESC_BAD_INODE_TABLE;
	if ((err = ext2fs_file_open(fs, ino, 0, &f)))
		return err;
	q->size = ext2fs_file_get_size(f);
	if (q->size > QT_FILE_MAX)
		q->size = QT_FILE_MAX;
	q->data = xcalloc(1, q->size + 1);
	err = ext2fs_file_read(f, q->data, (unsigned)q->size, &got);
	q->size = got;
	ext2fs_file_close(f);
	return err;
}

/* The quota block qb's bytes, NULL past the file. */
static const unsigned char *qblock(const struct qfile *q, uint32_t qb)
{
	return (uint64_t)(qb + 1) * QT_BLOCK <= q->size ? q->data + (uint64_t)qb * QT_BLOCK : NULL;
}

/* The fs block and offset in it of byte pos of the file; 0: a hole or unreadable. */
static blk64_t qfile_where(const struct qfile *q, uint64_t pos, unsigned *off)
{
	blk64_t pblk = 0;

	*off = (unsigned)(pos % q->fs->blocksize);
	if (ext2fs_bmap2(q->fs, q->ino, NULL, NULL, 0, pos / q->fs->blocksize, NULL, &pblk))
		return 0;
	return pblk;
}

/* The entry for id in leaf block bytes b (QT_BLOCK of them), or NULL. */
static const unsigned char *leaf_entry(const unsigned char *b, uint32_t id)
{
	for (unsigned off = QT_LEAF_HEADER; off + QT_ENTRY <= QT_BLOCK; off += QT_ENTRY) {
		const unsigned char *e = b + off;

		if (le32_at(e + QT_ID) == id && !ext4_all_zero(e, QT_ENTRY))
			return e;
	}
	return NULL;
}

/*
 * Where id's entry is, or the reference that is 0 for it: the byte of the
 * file (the leaf block, or the tree block's reference) into *pos, *leaf
 * true for a leaf block.  False: the tree leaves the file.
 */
static bool qtree_find(const struct qfile *q, uint32_t id, uint64_t *pos, bool *leaf)
{
	uint32_t qb = QT_ROOT;

	for (unsigned depth = 0; depth < QT_DEPTH; depth++) {
		const unsigned char *b = qblock(q, qb);
		unsigned idx = (id >> ((QT_DEPTH - depth - 1) * 8)) & 0xff;

		if (!b)
			return false;
		qb = le32_at(b + idx * 4);
		if (!qb) {
			*pos = (uint64_t)(b - q->data) + idx * 4;
			*leaf = false;
			return true;
		}
	}
	*pos = (uint64_t)qb * QT_BLOCK;
	*leaf = true;
	return qblock(q, qb) != NULL;
}

/*
 * Every id in the tree below quota block qb at depth into tab (usage from
 * the file).  Each block is read once (seen: a bit per quota block): a
 * leaf holds several ids' entries, and a damaged tree whose references
 * all name one block would otherwise be walked 256^4 times.
 */
static void qtree_collect(const struct qfile *q, uint32_t qb, unsigned depth,
			  struct quota_tab *tab, unsigned char *seen)
{
	const unsigned char *b = qblock(q, qb);

	if (!b || qb == 0 || (seen[qb / 8] >> (qb % 8) & 1))
		return;
	seen[qb / 8] |= (unsigned char)(1u << (qb % 8));
	if (depth == QT_DEPTH) {
		for (unsigned off = QT_LEAF_HEADER; off + QT_ENTRY <= QT_BLOCK; off += QT_ENTRY)
			if (!ext4_all_zero(b + off, QT_ENTRY))
				tab_get(tab, le32_at(b + off + QT_ID));
		return;
	}
	for (unsigned i = 0; i < QT_BLOCK / 4; i++)
		qtree_collect(q, le32_at(b + i * 4), depth + 1, tab, seen);
}

/* ---- the comparison -------------------------------------------------------- */

/*
 * blocks[0] the fs block of the entry (arg[0]: its leaf block's offset in
 * it, arg[3] 1) or of the 0 reference (arg[0] its offset, arg[3] 0);
 * arg[1] the id, arg[2] the first read's entry digest (space ^ inodes
 * rotated), or 0 for no entry.
 */
static uint64_t entry_digest(const unsigned char *e)
{
	uint64_t sp = le64_at(e + QT_SPACE), in = le64_at(e + QT_INODES);

	return (sp ^ (in << 32 | in >> 32)) | 1;	/* never 0, which is "no entry" */
}

static bool quota_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	const unsigned char *at = bufs[0] + s->arg[0];

	(void)ctx;
	if (!s->arg[3])
		return le32_at(at) == 0;
	const unsigned char *e = leaf_entry(at, (uint32_t)s->arg[1]);

	return e ? entry_digest(e) == s->arg[2] : s->arg[2] == 0;
}

static void quota_suspect(struct scrub_ctx *ctx, const struct qfile *q, unsigned t,
			  const struct quota_use *counted, const unsigned char *e, uint64_t pos,
			  bool leaf)
{
	unsigned off;
	blk64_t pblk = qfile_where(q, pos, &off);
	struct ext4_suspect *s;

	s = ext4_suspect_add(ctx, CHECK_EXT4_QUOTA, q->ino, quota_still_bad,
			     "%s quota of id %u: the quota file says %llu bytes in %llu inodes, "
			     "the inodes use %llu bytes in %llu", type_names[t], counted->id,
			     (unsigned long long)(e ? le64_at(e + QT_SPACE) : 0),
			     (unsigned long long)(e ? le64_at(e + QT_INODES) : 0),
			     (unsigned long long)counted->space,
			     (unsigned long long)counted->inodes);
	s->no_name = true;
	if (!pblk || off + (leaf ? QT_BLOCK : 4) > q->fs->blocksize) {
		s->cleared = "the quota file's block cannot be found again";
		return;
	}
	ext4_suspect_block(s, pblk);
	s->arg[0] = off;
	s->arg[1] = counted->id;
	s->arg[2] = e ? entry_digest(e) : 0;
	s->arg[3] = leaf;
}

/* One id of type t: the file's entry against the count (an id not counted has none in use). */
static void compare_id(struct scrub_ctx *ctx, const struct qfile *q, unsigned t,
		       struct quota_use *counted)
{
	uint64_t pos;
	bool leaf;
	const unsigned char *e = NULL;

	if (!qtree_find(q, counted->id, &pos, &leaf))
		return;		/* a tree that leaves its file: not judged here */
	if (leaf)
		e = leaf_entry(q->data + pos, counted->id);
	if (e ? le64_at(e + QT_SPACE) == counted->space &&
		le64_at(e + QT_INODES) == counted->inodes :
	    !counted->space && !counted->inodes)
		return;
	quota_suspect(ctx, q, t, counted, e, pos, leaf);
}

static void check_type(struct scrub_ctx *ctx, unsigned t)
{
	struct ext4_state *st = ext4_state(ctx);
	struct quota_tab *tab = &st->quota->tab[t];
	ext2_ino_t ino = *quota_inum(st->fs->super, t);
	struct qfile q = { 0 };
	errcode_t err;

	if (!ino || ino > st->fs->super->s_inodes_count)
		return;		/* no such quota, or ext4.superblock's finding */
	if (tab->changed) {
		report_verbose(ctx, "Phase 3: ext4: %s quota usage is not judged: inodes changed "
			       "during the scan", type_names[t]);
		return;
	}
	if (tab->unknown) {
		report_verbose(ctx, "Phase 3: ext4: %s quota usage is not judged: an attribute "
			       "block that may name EA inodes was not read", type_names[t]);
		return;
	}
	if ((err = qfile_read(st->fs, ino, &q))) {
		str_info(ctx, CHECK_EXT4_UNCHECKED, NULL, NULL, 0, "the %s quota file (inode %u) "
			 "cannot be read: %s", type_names[t], ino, ext4_strerror(err));
	} else {
		unsigned char *seen = xcalloc(1, q.size / QT_BLOCK / 8 + 1);

		qtree_collect(&q, QT_ROOT, 0, tab, seen);	/* the file's ids join the counted */
		free(seen);
		for (size_t i = 0; i < tab->cap; i++)
			if (tab->v[i].used)
				compare_id(ctx, &q, t, &tab->v[i]);
	}
	free(q.data);
}

void ext4_quota_check(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	for (unsigned t = 0; st->quota && t < EXT4_QUOTA_TYPES && !scrub_should_stop(ctx); t++)
		check_type(ctx, t);
}

void ext4_quota_release(struct ext4_state *st)
{
	if (!st->quota)
		return;
	for (unsigned t = 0; t < EXT4_QUOTA_TYPES; t++)
		free(st->quota->tab[t].v);
	free(st->quota);
	st->quota = NULL;
}
