/*
 * ext4_htree: an htree directory's index judged whole; see ext4.h.
 *
 * The inode scan reads every block of a directory (ext4_inodes.c) and
 * checks each one by itself: checksums, entry chains, an index block's
 * count, limit and order (ext4.htree).  What no single block shows is
 * whether the index describes the leaves it points to.  So, while the
 * blocks go by, each is summed up here (no second read): a leaf by the
 * least and greatest hash of its names, an index block by a copy of its
 * entries.  After the directory's last block the index is followed from
 * the root, as a lookup by name would:
 *
 *   - every index entry's hash inside the range its parent's entry gives,
 *     every leaf's names' hashes inside the range of the entry that points
 *     to it (a name outside is one no lookup finds: e2fsck's "bad min
 *     hash" / "bad max hash"; ext4.htree_hash);
 *   - every block below the root referenced exactly once, index nodes
 *     where the root's levels put them and only there (ext4.htree).
 *
 * Hashes are computed as the kernel does: the root's hash version, made
 * unsigned by the superblock's flag, the superblock's seed, casefolded
 * names folded by the filesystem's encoding.  A directory whose names
 * cannot be hashed here (casefolded and encrypted: the hash is stored in
 * the entry; an encoding libext2fs does not know) is an info.
 *
 * The first problem found becomes a suspect whose blocks are the
 * directory's inode and the index path to the block it is about; its
 * fresh judgement reads every other block of the directory again, so the
 * same problem is found from the same bytes, or the suspect is cleared.
 */
#include "backends/ext4/ext4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/checks.h"
#include "report/report.h"
#include "lib/strbuf.h"

/* Hashes are even: the low bit of an index entry's hash marks a collision run. */
#define HASH_MASK (~(uint32_t)1)
/* Offsets of the root's and an interior node's count and limit. */
#define DX_ROOT_ENTRIES 32
#define DX_NODE_ENTRIES 8

/* One directory block, summed up. */
struct hblk {
	blk64_t pblk;			/* 0: not read (a hole, or unsound) */
	uint32_t min, max;		/* its names' hashes, when names > 0 */
	uint32_t names;
	struct ext2_dx_entry *ix;	/* an index block's entries, NULL: none */
	uint16_t count;
};

struct ext4_htree {
	ext2_filsys fs;
	ext2_ino_t ino;
	int version;			/* the hash to compute, -1: no root yet */
	int hash_flags;			/* the directory's i_flags (casefold) */
	unsigned levels;		/* the root's indirect levels */
	bool spoiled;			/* a block with a finding of its own */
	const char *unhashable;		/* why names cannot be hashed, NULL: they can */
	uint32_t n;
	struct hblk *b;
};

enum htree_kind { HT_NONE, HT_MIN, HT_MAX, HT_DUP, HT_NOTREF, HT_DEPTH };

struct htree_finding {
	enum htree_kind kind;
	uint32_t lblk;			/* the block it is about */
	uint32_t from;			/* the index block that gives its range or points to it */
	uint32_t hash, bound;		/* HT_MIN/HT_MAX; HT_DEPTH: bound is the level */
	unsigned more;			/* further problems found */
};

struct judge {
	struct ext4_htree *h;
	uint8_t *refs;			/* per block: how many index entries point to it */
	uint32_t *parent;		/* per block: the index block that first did */
	struct htree_finding f;
};

struct ext4_htree *ext4_htree_begin(ext2_filsys fs, ext2_ino_t ino,
				    const struct ext2_inode_large *in, uint32_t n)
{
	struct ext4_htree *h = xcalloc(1, sizeof(*h));

	h->fs = fs;
	h->ino = ino;
	h->version = -1;
	h->hash_flags = (int)in->i_flags;
	h->n = n;
	h->b = xcalloc(n ? n : 1, sizeof(*h->b));
	if (in->i_flags & EXT4_CASEFOLD_FL) {
		if (in->i_flags & EXT4_ENCRYPT_FL)
			h->unhashable = "casefolded and encrypted, its hashes are kept in its entries";
		else if (!fs->encoding)
			h->unhashable = "casefolded by an encoding libext2fs does not know";
	}
	return h;
}

void ext4_htree_spoil(struct ext4_htree *h)
{
	h->spoiled = true;
}

/* The root's hash version and levels (dx_bad() has checked them). */
static void root_info(struct ext4_htree *h, const unsigned char *b)
{
	const struct ext2_dx_root_info *ri = (const void *)(b + 24);

	h->version = ri->hash_version;
	/* The kernel's s_hash_unsigned: legacy, half-MD4 and TEA have unsigned twins 3 above. */
	if (h->version <= EXT2_HASH_TEA && (h->fs->super->s_flags & EXT2_FLAGS_UNSIGNED_HASH))
		h->version += EXT2_HASH_LEGACY_UNSIGNED;
	h->levels = ri->indirect_levels;
	if (h->version == EXT2_HASH_SIPHASH && !h->unhashable)
		h->unhashable = "its hash (SipHash) is kept in its entries";
}

/* A copy of the index entries at off (capped at the limit and the block). */
static void copy_index(struct ext4_htree *h, struct hblk *hb, const unsigned char *b,
		       unsigned off)
{
	const struct ext2_dx_countlimit *cl = (const void *)(b + off);
	unsigned cap = (h->fs->blocksize - off) / sizeof(struct ext2_dx_entry);
	unsigned count = cl->count;

	if (count > cl->limit)
		count = cl->limit;
	if (count > cap)
		count = cap;
	hb->count = (uint16_t)count;
	hb->ix = xmalloc((count ? count : 1) * sizeof(*hb->ix));
	memcpy(hb->ix, b + off, count * sizeof(*hb->ix));
}

/* The least and greatest hash of a leaf's names; false if one cannot be computed. */
static bool leaf_hashes(struct ext4_htree *h, const unsigned char *b, struct hblk *hb)
{
	unsigned bs = h->fs->blocksize, off = 0, rec;

	while (off + 8 <= bs) {
		struct ext2_dir_entry *de = (void *)(b + off);
		unsigned len = ext2fs_dirent_name_len(de);
		ext2_dirhash_t hash, minor;

		if (ext2fs_get_rec_len(h->fs, de, &rec) || rec < 8 || off + rec > bs)
			break;
		off += rec;
		if (!de->inode || !len || len + 8 > rec)
			continue;
		if (ext2fs_dirhash2(h->version, de->name, (int)len, h->fs->encoding,
				    h->hash_flags, h->fs->super->s_hash_seed, &hash, &minor))
			return false;
		hb->min = hb->names++ ? (hash < hb->min ? hash : hb->min) : hash;
		hb->max = hash > hb->max ? hash : hb->max;
	}
	return true;
}

void ext4_htree_block(struct ext4_htree *h, uint32_t lblk, blk64_t pblk, const unsigned char *b)
{
	const struct ext2_dir_entry *de = (const void *)b;
	unsigned rec;
	struct hblk *hb;

	if (h->spoiled || lblk >= h->n)
		return;
	if (lblk == 0) {
		root_info(h, b);
		h->b[0].pblk = pblk;
		copy_index(h, &h->b[0], b, DX_ROOT_ENTRIES);
		return;
	}
	if (h->version < 0 || h->unhashable) {
		h->spoiled = h->version < 0;
		return;
	}
	hb = &h->b[lblk];
	hb->pblk = pblk;
	/* An interior node: one fake empty entry the size of the block, its index after. */
	if (!de->inode && !ext2fs_dirent_name_len(de) &&
	    !ext2fs_get_rec_len(h->fs, (struct ext2_dir_entry *)de, &rec) && rec == h->fs->blocksize)
		copy_index(h, hb, b, DX_NODE_ENTRIES);
	if (!leaf_hashes(h, b, hb))
		h->unhashable = "a name's hash cannot be computed";
}

/* ---- following the index -------------------------------------------------- */

static void note(struct judge *j, enum htree_kind kind, uint32_t lblk, uint32_t from,
		 uint32_t hash, uint32_t bound)
{
	if (j->f.kind == HT_NONE)
		j->f = (struct htree_finding){ kind, lblk, from, hash, bound, 0 };
	else
		j->f.more++;
}

/* A block's hashes (a leaf's names, an index node's entries) against [lo, hi]. */
static void in_range(struct judge *j, uint32_t lblk, uint32_t from, uint32_t min, uint32_t max,
		     uint32_t lo, uint32_t hi)
{
	if (min < lo)
		note(j, HT_MIN, lblk, from, min, lo);
	else if (max > hi)
		note(j, HT_MAX, lblk, from, max, hi);
}

/* An index node's own entries' hashes (entry 0 has none): least and greatest. */
static bool index_span(const struct hblk *hb, uint32_t *min, uint32_t *max)
{
	if (hb->count < 2)
		return false;
	*min = *max = hb->ix[1].hash & HASH_MASK;
	for (unsigned i = 2; i < hb->count; i++) {
		uint32_t v = hb->ix[i].hash & HASH_MASK;

		*min = v < *min ? v : *min;
		*max = v > *max ? v : *max;
	}
	return true;
}

static void judge_node(struct judge *j, uint32_t node, unsigned level, uint32_t lo, uint32_t hi);

/* The block entry i of node points to, with the range [lo, hi] the entry gives. */
static void judge_child(struct judge *j, uint32_t node, unsigned level, uint32_t child,
			uint32_t lo, uint32_t hi)
{
	struct ext4_htree *h = j->h;
	const struct hblk *c;

	if (child >= h->n || !h->b[child].pblk)
		return;		/* past the end (dx_bad() says so) or not read */
	if (j->refs[child]++) {
		note(j, HT_DUP, child, node, 0, 0);
		return;
	}
	j->parent[child] = node;
	c = &h->b[child];
	if (level < h->levels) {
		if (!c->ix)
			note(j, HT_DEPTH, child, node, 0, level + 1);
		else
			judge_node(j, child, level + 1, lo, hi);
	} else if (c->names) {
		in_range(j, child, node, c->min, c->max, lo, hi);
	}
}

static void judge_node(struct judge *j, uint32_t node, unsigned level, uint32_t lo, uint32_t hi)
{
	const struct hblk *hb = &j->h->b[node];
	uint32_t min, max;

	if (node && index_span(hb, &min, &max))
		in_range(j, node, j->parent[node], min, max, lo, hi);
	for (unsigned i = 0; i < hb->count; i++) {
		uint32_t clo = i ? hb->ix[i].hash & HASH_MASK : lo;
		uint32_t chi = i + 1 < hb->count ? hb->ix[i + 1].hash & HASH_MASK : hi;

		judge_child(j, node, level, hb->ix[i].block & EXT4_DX_BLOCK_MASK, clo, chi);
	}
}

/* The first problem of the index (f->kind HT_NONE: none); j's arrays stay for the path. */
static void judge(struct judge *j, struct ext4_htree *h)
{
	memset(j, 0, sizeof(*j));
	j->h = h;
	j->refs = xcalloc(h->n ? h->n : 1, 1);
	j->parent = xcalloc(h->n ? h->n : 1, sizeof(*j->parent));
	if (h->spoiled || h->unhashable || h->version < 0 || !h->n)
		return;
	j->refs[0] = 1;		/* the root: no entry may point to it */
	judge_node(j, 0, 0, 0, UINT32_MAX);
	for (uint32_t b = 1; b < h->n; b++)
		if (h->b[b].pblk && !j->refs[b])
			note(j, HT_NOTREF, b, 0, 0, 0);
}

static void judge_release(struct judge *j)
{
	free(j->refs);
	free(j->parent);
}

static void htree_free(struct ext4_htree *h)
{
	for (uint32_t b = 0; b < h->n; b++)
		free(h->b[b].ix);
	free(h->b);
	free(h);
}

/* ---- the suspect ---------------------------------------------------------- */

static const char *finding_check(const struct htree_finding *f)
{
	return f->kind == HT_MIN || f->kind == HT_MAX ? CHECK_EXT4_HTREE_HASH : CHECK_EXT4_HTREE;
}

static void finding_text(const struct ext4_htree *h, const struct htree_finding *f,
			 struct strbuf *sb)
{
	const struct hblk *hb = &h->b[f->lblk];

	strbuf_addf(sb, "htree: directory block %u (block %llu) ", f->lblk,
		    (unsigned long long)hb->pblk);
	switch (f->kind) {
	case HT_MIN:
		strbuf_addf(sb, "holds hash 0x%08x, below 0x%08x, where the index entry in block "
			    "%u that points to it starts", f->hash, f->bound, f->from);
		break;
	case HT_MAX:
		strbuf_addf(sb, "holds hash 0x%08x, above 0x%08x, where the next index entry in "
			    "block %u starts", f->hash, f->bound, f->from);
		break;
	case HT_DUP:
		strbuf_addf(sb, "is pointed to twice by the index (again by block %u)", f->from);
		break;
	case HT_NOTREF:
		strbuf_addf(sb, "is not pointed to by the index");
		break;
	case HT_DEPTH:
		strbuf_addf(sb, "is at index level %u of %u but is not an index node", f->bound,
			    h->levels);
		break;
	case HT_NONE:
		break;
	}
	if (f->more)
		strbuf_addf(sb, " (and %u more in this directory's index)", f->more);
}

/*
 * The blocks a finding involves: the block it is about, and the index
 * blocks from it up to the root (for an unreferenced block: every index
 * node followed).
 */
static void finding_blocks(const struct judge *j, const struct htree_finding *f,
			   struct ext4_suspect *s)
{
	const struct ext4_htree *h = j->h;

	ext4_suspect_block(s, h->b[f->lblk].pblk);
	if (f->kind == HT_NOTREF) {
		/* More nodes than a suspect holds are read afresh by fresh_summary(). */
		for (uint32_t b = 0; b < h->n && s->nr_blocks < EXT4_SUSPECT_BLOCKS; b++)
			if (h->b[b].ix && (b == 0 || j->refs[b]))
				ext4_suspect_block(s, h->b[b].pblk);
		return;
	}
	for (uint32_t b = f->from, hops = 0; hops <= h->levels; b = j->parent[b], hops++) {
		ext4_suspect_block(s, h->b[b].pblk);
		if (b == 0)
			break;
	}
}

/* The finding's identity kept in the suspect: its kind and block. */
static uint64_t finding_key(const struct htree_finding *f)
{
	return (uint64_t)f->lblk << 8 | f->kind;
}

/* The directory's block lblk, fresh: one of the suspect's bufs, or read now into scratch. */
static const unsigned char *fresh_block(struct ext4_state *st, const struct ext4_suspect *s,
					unsigned char *const *bufs, blk64_t pblk,
					unsigned char *scratch, uint32_t *used)
{
	for (unsigned k = 1; k < s->nr_blocks; k++)
		if (s->blocks[k] == pblk) {
			*used |= 1u << k;
			return bufs[k];
		}
	return ext4_read_direct(st, pblk, scratch) ? NULL : scratch;
}

/* Every block of the directory (mapped afresh) summed up again. */
static bool fresh_summary(struct ext4_state *st, const struct ext4_suspect *s,
			  unsigned char *const *bufs, struct ext2_inode_large *in,
			  struct ext4_htree *h)
{
	unsigned char *scratch = ext4_block_buf(st);
	uint32_t used = 1;	/* bufs[0]: the inode's */
	bool ok = true;

	for (uint32_t lblk = 0; lblk < h->n && ok; lblk++) {
		const unsigned char *b;
		blk64_t pblk = 0;

		if (ext2fs_bmap2(st->fs, h->ino, (struct ext2_inode *)in, NULL, 0, lblk, NULL,
				 &pblk)) {
			ok = false;
		} else if (pblk) {
			b = fresh_block(st, s, bufs, pblk, scratch, &used);
			ok = b != NULL;
			if (ok)
				ext4_htree_block(h, lblk, pblk, b);
		}
	}
	free(scratch);
	/* Every block of the suspect still the directory's. */
	return ok && used == (s->nr_blocks >= 32 ? UINT32_MAX : (1u << s->nr_blocks) - 1);
}

static bool htree_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext2_inode_large in;
	struct ext4_htree *h;
	struct judge j;
	bool bad;

	if (!ext4_fresh_inode(ctx, s, bufs, &in) || !in.i_links_count || in.i_dtime ||
	    !LINUX_S_ISDIR(in.i_mode) || !(in.i_flags & EXT2_INDEX_FL) ||
	    EXT2_I_SIZE(&in) / st->fs->blocksize < s->arg[3])
		return false;
	h = ext4_htree_begin(st->fs, (ext2_ino_t)s->ino, &in, (uint32_t)s->arg[3]);
	bad = fresh_summary(st, s, bufs, &in, h);
	judge(&j, h);
	bad = bad && j.f.kind != HT_NONE && finding_key(&j.f) == s->arg[2];
	judge_release(&j);
	htree_free(h);
	return bad;
}

void ext4_htree_end(struct scrub_ctx *ctx, struct ext4_htree *h,
		    const struct ext2_inode_large *in)
{
	struct strbuf sb = STRBUF_INIT;
	struct ext4_suspect *s;
	struct judge j;

	if (h->unhashable && !h->spoiled)
		str_info(ctx, CHECK_EXT4_UNCHECKED, NULL, NULL, h->ino, "the htree index's "
			 "hashes of this directory are not checked: %s", h->unhashable);
	judge(&j, h);
	if (j.f.kind != HT_NONE) {
		finding_text(h, &j.f, &sb);
		s = ext4_inode_suspect(ctx, finding_check(&j.f), h->ino, in, htree_still_bad,
				       "%s", sb.buf);
		finding_blocks(&j, &j.f, s);
		s->arg[2] = finding_key(&j.f);
		s->arg[3] = h->n;
		strbuf_release(&sb);
	}
	judge_release(&j);
	htree_free(h);
}
