/*
 * ext4_eainode: EA inodes (the ea_inode feature), judged as e2fsck's
 * pass 1 and pass 4 judge them (phase 3, after the inode scan); see ext4.h.
 *
 * An attribute value too large for the inode and its attribute block lives
 * in an inode of its own, flagged EXT4_EA_INODE_FL and named by the
 * entry's e_value_inum.  Entries with the same value share one EA inode,
 * which keeps how many name it (64 bits: i_ctime's field high, i_version's
 * low) and is freed when that reaches zero; an attribute block shared by
 * several inodes holds one reference for all of them.  It keeps the
 * value's hash in i_atime, and an entry's e_hash is its name's hash
 * continued with that.
 *
 * The inode scan notes every EA inode in use (ext4_eainode_note_inode())
 * and the entries in every inode's body (ext4_eainode_note_body());
 * ext4_xattr_refs.c notes the entries of each attribute block when it
 * reads the block after the scan, once per block.  Then, by target:
 *   - an entry naming an inode outside the inode table, one not in use, or
 *     one without EXT4_EA_INODE_FL (e2fsck: "illegal extended attribute
 *     value inode", "EA inode for parent inode missing EA_INODE flag");
 *   - an entry whose e_hash is neither the unsigned nor the signed name
 *     hash continued with the EA inode's i_atime, unless it is an old
 *     Lustre reference (the EA inode's i_mtime its owner, the same
 *     generation) (e2fsck: "has a hash which is invalid");
 *   - an EA inode in use no entry names (e2fsck pass 4: "unattached");
 *   - an EA inode whose count is not the number of entries naming it,
 *     unless i_ctime == i_atime, an old Lustre EA inode that keeps no
 *     count (e2fsck: "Extended attribute inode ref count is R, should
 *     be N").
 * Each is an ext4.ea_inode suspect (ext4_confirm.c): fresh copies of the
 * EA inode's table block, and of the owners' inode-table and attribute
 * blocks, must still say the same.  The kernel journals every reference it
 * takes or drops (the EA inode's block changes with its count), so one
 * that moved during the scan is in a recent transaction.
 *
 * Memory: 32 bytes per EA inode in use and 32 per entry that names one.
 * An attribute block that cannot be read, or an open unlinked inode's
 * (on the superblock's orphan list, which the scan passes by), leaves the
 * counts unknown: the counts and unattached EA inodes are then not judged
 * (-v says so).
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "report/checks.h"
#include "report/report.h"
#include "scan/context.h"

/* Owners named in a message: the first few say enough. */
#define NAMED_OWNERS 3
/* arg[3] of a count suspect: the entries counted, then the attribute blocks among its blocks. */
#define NX_SHIFT 32
/* ... and whether its blocks hold every owner (then the entries are counted again). */
#define ALL_OWNERS (1ull << 63)
/* arg[2] of an entry suspect: the target, and whether the entry is in an attribute block. */
#define IN_BLOCK (1ull << 32)

/* An EA inode in use, as the scan read it: 32 bytes. */
struct ea_inode {
	uint64_t stored;	/* the reference count it keeps */
	ext2_ino_t ino;
	uint32_t hash;		/* i_atime: the value's hash */
	uint32_t mtime, gen;	/* an old Lustre EA inode's owner and its generation */
	uint32_t counted;	/* entries that name it */
	bool lustre;		/* i_ctime == i_atime: no count kept */
};

/* An entry that names an EA inode: 32 bytes. */
struct ea_ref {
	blk64_t blk;		/* the attribute block that holds it, 0: the owner's body */
	ext2_ino_t target, owner;
	uint32_t owner_gen, e_hash, name_hash, name_hash_signed;
};

struct ext4_eainodes {
	struct ea_inode *v;
	size_t n, alloc;
	struct ea_ref *refs;
	size_t nr_refs, alloc_refs;
	bool incomplete;	/* an attribute block could not be read */
};

/* What is wrong with an entry's target. */
enum ea_fault { EA_SOUND, EA_RANGE, EA_FREE, EA_NOT_EA, EA_HASH };

/* What an entry's judgement needs of its target. */
struct ea_target {
	bool in_use, flagged;
	uint32_t hash, mtime, gen;
};

/* ---- noting ---------------------------------------------------------------- */

void ext4_eainode_begin(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (ext2fs_has_feature_ea_inode(st->fs->super))
		st->ea = xcalloc(1, sizeof(*st->ea));
}

/* The count an EA inode keeps: i_ctime's field is its high half, i_version's its low. */
static uint64_t stored_count(const struct ext2_inode_large *in)
{
	return (uint64_t)in->i_ctime << 32 | in->osd1.linux1.l_i_version;
}

void ext4_eainode_note_inode(struct scrub_ctx *ctx, ext2_ino_t ino,
			     const struct ext2_inode_large *in)
{
	struct ext4_eainodes *ea = ext4_state(ctx)->ea;

	if (!ea)
		return;
	if (ea->n == ea->alloc) {
		ea->alloc = ea->alloc ? 2 * ea->alloc : 64;
		ea->v = xrealloc(ea->v, ea->alloc * sizeof(*ea->v));
	}
	ea->v[ea->n++] = (struct ea_inode){
		.stored = stored_count(in), .ino = ino, .hash = in->i_atime,
		.mtime = in->i_mtime, .gen = in->i_generation,
		.lustre = in->i_ctime == in->i_atime,
	};
}

struct note_arg {
	struct ext4_eainodes *ea;
	blk64_t blk;
	ext2_ino_t owner;
	uint32_t gen;
};

static void note_ref(void *arg, const struct ext4_ea_entry *e)
{
	struct note_arg *a = arg;
	struct ext4_eainodes *ea = a->ea;

	if (ea->nr_refs == ea->alloc_refs) {
		ea->alloc_refs = ea->alloc_refs ? 2 * ea->alloc_refs : 64;
		ea->refs = xrealloc(ea->refs, ea->alloc_refs * sizeof(*ea->refs));
	}
	ea->refs[ea->nr_refs++] = (struct ea_ref){
		.blk = a->blk, .target = e->inum, .owner = a->owner, .owner_gen = a->gen,
		.e_hash = e->e_hash, .name_hash = e->name_hash,
		.name_hash_signed = e->name_hash_signed,
	};
}

/* The entries in an inode's body (raw: its on-disk bytes): fn for each that names an EA inode. */
static unsigned body_entries(ext2_filsys fs, const unsigned char *raw, ext4_ea_entry_fn fn,
			     void *arg)
{
	unsigned off = ext4_ibody_entries(fs, raw);

	return off ? ext4_ea_entries(raw + off, raw + EXT2_INODE_SIZE(fs->super), fn, arg) : 0;
}

/* The entries of an attribute block (b: its bytes, a sound header). */
static unsigned block_entries(ext2_filsys fs, const unsigned char *b, ext4_ea_entry_fn fn,
			      void *arg)
{
	return ext4_ea_entries(b + sizeof(struct ext2_ext_attr_header), b + fs->blocksize, fn,
			       arg);
}

void ext4_eainode_note_body(struct scrub_ctx *ctx, ext2_ino_t ino,
			    const struct ext2_inode_large *in)
{
	struct ext4_state *st = ext4_state(ctx);
	struct note_arg a = { st->ea, 0, ino, in->i_generation };

	if (st->ea)
		body_entries(st->fs, (const unsigned char *)in, note_ref, &a);
}

unsigned ext4_eainode_note_block(struct scrub_ctx *ctx, blk64_t blk, ext2_ino_t owner,
				 uint32_t gen, const unsigned char *b)
{
	struct ext4_state *st = ext4_state(ctx);
	struct note_arg a = { st->ea, blk, owner, gen };

	return st->ea ? block_entries(st->fs, b, note_ref, &a) : 0;
}

void ext4_eainode_unknown(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (!st->ea)
		return;
	st->ea->incomplete = true;
	ext4_quota_unknown(ctx);
}

void ext4_eainode_release(struct ext4_state *st)
{
	if (!st->ea)
		return;
	free(st->ea->v);
	free(st->ea->refs);
	free(st->ea);
	st->ea = NULL;
}

/* ---- judging an entry ------------------------------------------------------ */

/* e_hash's end: the name's hash continued with the value's (16-bit rotate, xor). */
static uint32_t entry_hash(uint32_t name_hash, uint32_t value_hash)
{
	return (name_hash << 16) ^ (name_hash >> 16) ^ value_hash;
}

/* e2fsck's check_large_ea_inode() order: range, hash (or Lustre), flag; then in use. */
static enum ea_fault judge_entry(ext2_filsys fs, const struct ea_ref *r,
				 const struct ea_target *t)
{
	bool hash_ok = r->e_hash == entry_hash(r->name_hash, t->hash) ||
		       r->e_hash == entry_hash(r->name_hash_signed, t->hash);
	bool lustre = t->mtime == r->owner && t->gen == r->owner_gen;

	if (r->target < EXT2_FIRST_INODE(fs->super) || r->target > fs->super->s_inodes_count)
		return EA_RANGE;
	if (!t->flagged)
		return EA_NOT_EA;
	if (!hash_ok && !lustre)
		return EA_HASH;
	return t->in_use ? EA_SOUND : EA_FREE;
}

static void target_from_inode(struct ea_target *t, const struct ext2_inode_large *in,
			      bool in_use)
{
	*t = (struct ea_target){
		.in_use = in_use, .flagged = in->i_flags & EXT4_EA_INODE_FL,
		.hash = in->i_atime, .mtime = in->i_mtime, .gen = in->i_generation,
	};
}

static void inode_at(ext2_filsys fs, const unsigned char *table, unsigned off,
		     struct ext2_inode_large *in)
{
	unsigned isize = EXT2_INODE_SIZE(fs->super);

	memset(in, 0, sizeof(*in));
	memcpy(in, table + off, isize < sizeof(*in) ? isize : sizeof(*in));
}

/* Bit (ino - 1) % ipg of a fresh inode bitmap block: a group never initialised is free. */
static bool bit_in_use(ext2_filsys fs, ext2_ino_t ino, const unsigned char *bitmap)
{
	dgrp_t g = (ino - 1) / fs->super->s_inodes_per_group;
	uint32_t bit = (ino - 1) % fs->super->s_inodes_per_group;

	if (ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT))
		return false;
	return bitmap[bit / 8] & (1u << (bit % 8));
}

/*
 * A fault in an entry, as a suspect: blocks [the owner's inode-table
 * block, its attribute block if the entry is there, the target's
 * inode-table block and inode bitmap block if it is in range]; arg[0] the
 * owner's offset, arg[1] its generation, arg[2] the target (and IN_BLOCK),
 * arg[3] the target's offset.  Still bad: the fresh owner (or block) still has an
 * entry naming the target, and one such entry is still wrong.
 */
struct fresh_ref {
	ext2_filsys fs;
	struct ea_ref r;
	const struct ea_target *t;
	bool bad, named;
};

static void fresh_entry(void *arg, const struct ext4_ea_entry *e)
{
	struct fresh_ref *f = arg;

	if (e->inum != f->r.target)
		return;
	f->named = true;
	f->r.e_hash = e->e_hash;
	f->r.name_hash = e->name_hash;
	f->r.name_hash_signed = e->name_hash_signed;
	f->bad |= judge_entry(f->fs, &f->r, f->t) != EA_SOUND;
}

static bool ref_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			  unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large owner, target = { 0 };
	struct ea_target t = { 0 };
	bool in_block = s->arg[2] & IN_BLOCK;
	ext2_ino_t tino = (ext2_ino_t)s->arg[2];
	unsigned ti = in_block ? 2 : 1;
	struct fresh_ref f = { .fs = fs, .t = &t };

	if (!ext4_fresh_inode(ctx, s, bufs, &owner) || !owner.i_links_count)
		return false;
	if (s->nr_blocks > ti) {
		inode_at(fs, bufs[ti], (unsigned)s->arg[3], &target);
		target_from_inode(&t, &target, target.i_links_count &&
				  bit_in_use(fs, tino, bufs[ti + 1]));
	}
	f.r = (struct ea_ref){ .blk = in_block ? s->blocks[1] : 0,
			       .target = tino, .owner = (ext2_ino_t)s->ino,
			       .owner_gen = owner.i_generation };
	if (in_block)
		block_entries(fs, bufs[1], fresh_entry, &f);
	else
		body_entries(fs, bufs[0] + s->arg[0], fresh_entry, &f);
	return f.named && f.bad;
}

static const char *fault_text(enum ea_fault k)
{
	switch (k) {
	case EA_RANGE:
		return "which is outside the inode table (e2fsck: illegal extended attribute "
		       "value inode)";
	case EA_FREE:
		return "which is not in use: its value is lost, and the inode may be given to "
		       "another file";
	case EA_NOT_EA:
		return "which is not an EA inode (no EA_INODE_FL; e2fsck: illegal extended "
		       "attribute value inode, or EA inode missing EA_INODE flag)";
	case EA_HASH:
		return "but its hash is not that of its name and the EA inode's value hash "
		       "(i_atime) (e2fsck: extended attribute has a hash which is invalid)";
	case EA_SOUND:
		break;
	}
	return "";
}

static void ref_suspect(struct scrub_ctx *ctx, const struct ea_ref *r, enum ea_fault k)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext4_suspect *s;
	char where[64] = "in its body";
	blk64_t tb, ob;
	unsigned toff, ooff;

	if (r->blk)
		snprintf(where, sizeof(where), "in attribute block %llu",
			 (unsigned long long)r->blk);
	s = ext4_suspect_add(ctx, CHECK_EXT4_EA_INODE, r->owner, ref_still_bad,
			     "an extended attribute %s names value inode %u, %s", where, r->target,
			     fault_text(k));
	if (!ext4_inode_location(fs, r->owner, &ob, &ooff)) {
		s->cleared = "its inode table cannot be found";
		return;
	}
	ext4_suspect_block(s, ob);
	if (r->blk)
		ext4_suspect_block(s, r->blk);
	s->arg[0] = ooff;
	s->arg[1] = r->owner_gen;
	s->arg[2] = r->target | (r->blk ? IN_BLOCK : 0);
	if (k == EA_RANGE || !ext4_inode_location(fs, r->target, &tb, &toff))
		return;
	/* Both blocks even where one of them is already held: ref_still_bad() counts them. */
	s->blocks[s->nr_blocks++] = tb;
	s->blocks[s->nr_blocks++] = ext2fs_inode_bitmap_loc(fs, (r->target - 1) /
							    fs->super->s_inodes_per_group);
	s->arg[3] = toff;
}

/* A target the scan did not note as an EA inode in use: read now (a fault, rare). */
static void read_target(struct scrub_ctx *ctx, ext2_ino_t ino, struct ea_target *t,
			unsigned char *buf)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext2_inode_large in;
	blk64_t b;
	unsigned off;

	memset(t, 0, sizeof(*t));
	if (!ext4_inode_location(st->fs, ino, &b, &off) || ext4_read_direct(st, b, buf) < 0)
		return;
	inode_at(st->fs, buf, off, &in);
	/* Not noted: free in the bitmap (or unreadable in the scan), whatever it holds. */
	target_from_inode(t, &in, false);
}

/* ---- judging an EA inode --------------------------------------------------- */

static int ea_cmp(const void *a, const void *b)
{
	ext2_ino_t x = ((const struct ea_inode *)a)->ino, y = ((const struct ea_inode *)b)->ino;

	return (x > y) - (x < y);
}

static int ref_cmp(const void *a, const void *b)
{
	const struct ea_ref *x = a, *y = b;

	if (x->target != y->target)
		return x->target < y->target ? -1 : 1;
	return (x->owner > y->owner) - (x->owner < y->owner);
}

/* The entries naming target in the fresh owners' blocks: all slots of the table blocks. */
struct recount {
	ext2_ino_t target;
	uint64_t n;
};

static void recount_entry(void *arg, const struct ext4_ea_entry *e)
{
	struct recount *rc = arg;

	rc->n += e->inum == rc->target;
}

/* An inode slot whose attributes count: not deleted (a freed slot keeps its dtime). */
static bool slot_counts(ext2_filsys fs, const struct ext2_inode_large *in)
{
	return in->i_links_count || !in->i_dtime || in->i_dtime <= fs->super->s_inodes_count;
}

static uint64_t recount_table(ext2_filsys fs, const unsigned char *table, ext2_ino_t target)
{
	unsigned isize = EXT2_INODE_SIZE(fs->super);
	struct recount rc = { target, 0 };
	struct ext2_inode_large in;

	for (unsigned off = 0; off + isize <= fs->blocksize; off += isize) {
		inode_at(fs, table, off, &in);
		if (slot_counts(fs, &in))
			body_entries(fs, table + off, recount_entry, &rc);
	}
	return rc.n;
}

/*
 * A count suspect: blocks [the EA inode's table block, nx attribute
 * blocks, the owners' table blocks]; arg[2] the count first read, arg[3]
 * the entries counted, nx and ALL_OWNERS.  Still bad: the fresh EA inode
 * keeps the same count, and the entries in the fresh blocks (when they
 * hold every owner) still number otherwise.
 */
static bool count_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	unsigned nx = (unsigned)((s->arg[3] >> NX_SHIFT) & 0xffff);
	struct ext2_inode_large in;
	struct recount rc = { (ext2_ino_t)s->ino, 0 };

	if (!ext4_fresh_inode(ctx, s, bufs, &in) || !(in.i_flags & EXT4_EA_INODE_FL) ||
	    !in.i_links_count || stored_count(&in) != s->arg[2])
		return false;
	if (!(s->arg[3] & ALL_OWNERS))
		return true;
	for (unsigned i = 1; i <= nx; i++)
		block_entries(fs, bufs[i], recount_entry, &rc);
	rc.n += recount_table(fs, bufs[0], rc.target);
	for (unsigned i = 1 + nx; i < s->nr_blocks; i++)
		rc.n += recount_table(fs, bufs[i], rc.target);
	return rc.n != s->arg[2];
}

/* Unattached: the fresh EA inode is still in use, an EA inode, with the count first read. */
static bool unattached_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				 unsigned char *const *bufs)
{
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && (in.i_flags & EXT4_EA_INODE_FL) &&
	       in.i_links_count && stored_count(&in) == s->arg[2];
}

/* "inodes 12, 13 (attribute block 1234), 14 and 2 more" */
static void name_owners(struct strbuf *sb, const struct ea_ref *refs, size_t n)
{
	strbuf_addstr(sb, n == 1 ? "inode " : "inodes ");
	for (size_t i = 0; i < n && i < NAMED_OWNERS; i++) {
		strbuf_addf(sb, "%s%u", i ? ", " : "", refs[i].owner);
		if (refs[i].blk)
			strbuf_addf(sb, " (attribute block %llu)", (unsigned long long)refs[i].blk);
	}
	if (n > NAMED_OWNERS)
		strbuf_addf(sb, " and %zu more", n - NAMED_OWNERS);
}

/* The owners' blocks into s after the EA inode's: attribute blocks first (counted in arg[3]). */
static void owner_blocks(ext2_filsys fs, struct ext4_suspect *s, const struct ea_ref *refs,
			 size_t n)
{
	uint64_t nx = 0;
	bool all = true;

	for (size_t pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			blk64_t b = refs[i].blk;
			unsigned off;

			if ((pass == 0) != (b != 0))
				continue;
			if (!b && !ext4_inode_location(fs, refs[i].owner, &b, &off))
				continue;
			if (ext4_suspect_has_block(s, b))
				continue;
			if (s->nr_blocks == EXT4_SUSPECT_BLOCKS) {
				all = false;
				continue;
			}
			ext4_suspect_block(s, b);
			nx += pass == 0;
		}
	s->arg[3] |= nx << NX_SHIFT | (all ? ALL_OWNERS : 0);
}

static struct ext4_suspect *ea_suspect(struct scrub_ctx *ctx, const struct ea_inode *e,
				       ext4_still_bad_fn fn, const char *msg)
{
	struct ext2_inode_large in = { .i_generation = e->gen };
	struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_EA_INODE, e->ino, &in, fn,
						    "%s", msg);

	s->arg[2] = e->stored;
	s->no_name = true;	/* an EA inode has no name */
	return s;
}

/* One EA inode and the n entries that name it (sorted by owner). */
static void judge_ea_inode(struct scrub_ctx *ctx, const struct ea_inode *e,
			   const struct ea_ref *refs, size_t n)
{
	struct strbuf sb = STRBUF_INIT, owners = STRBUF_INIT;
	struct ext4_suspect *s;

	if (!n) {
		strbuf_addf(&sb, "EA inode %u (an extended attribute's value, reference count "
			    "%llu) is in use, but no extended attribute names it (e2fsck: "
			    "unattached inode)", e->ino, (unsigned long long)e->stored);
		ea_suspect(ctx, e, unattached_still_bad, sb.buf);
	} else if (e->stored != n && !e->lustre) {
		name_owners(&owners, refs, n);
		strbuf_addf(&sb, "EA inode %u counts %llu %s, but %zu extended %s name it (%s): "
			    "%s", e->ino, (unsigned long long)e->stored, e->stored == 1 ?
			    "reference" : "references", n, n == 1 ? "attribute" : "attributes",
			    owners.buf, e->stored < n ? "removing that many would free the value "
			    "while the others still name it" : "it would never be freed");
		s = ea_suspect(ctx, e, count_still_bad, sb.buf);
		s->arg[3] = n;
		owner_blocks(ext4_state(ctx)->fs, s, refs, n);
	}
	strbuf_release(&sb);
	strbuf_release(&owners);
}

/* The entries naming one target (e: its EA inode as noted, or NULL). */
static void judge_refs(struct scrub_ctx *ctx, const struct ea_inode *e,
		       const struct ea_ref *refs, size_t n, unsigned char *buf)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ea_target t;

	if (e)
		t = (struct ea_target){ true, true, e->hash, e->mtime, e->gen };
	else
		read_target(ctx, refs[0].target, &t, buf);
	for (size_t i = 0; i < n; i++) {
		enum ea_fault k = judge_entry(fs, &refs[i], &t);

		if (k != EA_SOUND)
			ref_suspect(ctx, &refs[i], k);
	}
}

void ext4_eainode_check(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_eainodes *ea = st->ea;
	unsigned char *buf;
	size_t i = 0, j;

	if (!ea)
		return;
	sort_items(ea->v, ea->n, sizeof(*ea->v), ea_cmp);
	sort_items(ea->refs, ea->nr_refs, sizeof(*ea->refs), ref_cmp);
	buf = ext4_block_buf(st);
	for (size_t k = 0; k < ea->n || i < ea->nr_refs; i = j) {
		ext2_ino_t next_ea = k < ea->n ? ea->v[k].ino : 0;
		ext2_ino_t next_ref = i < ea->nr_refs ? ea->refs[i].target : 0;
		const struct ea_inode *e = NULL;
		/* no array at all when nothing names an EA inode: NULL + 0 is undefined */
		const struct ea_ref *refs = ea->refs ? ea->refs + i : NULL;

		if (next_ea && (!next_ref || next_ea <= next_ref))
			e = &ea->v[k++];
		j = i;
		if (next_ref && (!e || next_ref == e->ino))
			for (; j < ea->nr_refs && ea->refs[j].target == next_ref; j++)
				;
		if (j > i)
			judge_refs(ctx, e, refs, j - i, buf);
		if (e && !ea->incomplete)
			judge_ea_inode(ctx, e, refs, j - i);
	}
	free(buf);
	report_verbose(ctx, "Phase 3: ext4: %zu EA inodes and the %zu extended attributes that "
		       "name them checked%s", ea->n, ea->nr_refs, ea->incomplete ? " (their "
		       "reference counts not judged: an attribute block was not read)" : "");
	ext4_eainode_release(st);
}
