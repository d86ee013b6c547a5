/*
 * ext4_confirm: the live-filesystem rule of the ext4 backend; see ext4.h.
 *
 * A check that fails on the first read queues a suspect: the blocks it
 * involves and a predicate that judges fresh copies of them.  Suspects are
 * confirmed in batches, so that the delays are paid once per batch, and
 * a block that several suspects involve is read once a round:
 *
 *   1. read the journal: every fs block logged (or revoked) by a
 *      transaction still in the log, from the on-disk journal superblock's
 *      s_start on, is "recent" -- its final place on the disk may lag;
 *   2. syncfs the mount, re-read every block with O_DIRECT, ask the
 *      predicate;
 *   3. wait CONFIRM_DELAY_MS, syncfs again, re-read, ask again, and
 *      compare the bytes with the previous read;
 *   4. read the journal again.
 *
 * The journal is the journal inode's, or an external journal's device
 * (ext4_journal.c finds it).
 *
 * A suspect is an error only if both reads fail the predicate with the same
 * bytes and none of its blocks is recent in either journal read (and, for
 * suspects that have one, the kernel's own view agrees).  Anything else is
 * an info "changed while being checked" naming why.
 *
 * A filesystem whose superblock is mounted read-only (ro, ro,noload) is not
 * in flux: the kernel writes nothing, and reads what the disk holds (with
 * noload, whatever the log holds is not replayed).  There the journal
 * clears nothing, and a journal that cannot be read makes nothing an info:
 * what the two fresh reads confirm is an error.  The mount table is asked
 * again after each batch's reads, so a remount read-write meanwhile brings
 * the journal's rule back.
 *
 * The journal tail on the disk is only ever older than the kernel's (jbd2
 * writes it after the checkpoint it follows), so transactions from s_start
 * on are a superset of those not yet checkpointed.  Fast-commit blocks are
 * not parsed: they name inodes, not blocks, and the blocks they change are
 * logged again by the next full commit.
 */
#include "backends/ext4/ext4.h"
#include "backends/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report/checks.h"
#include "lib/mountpoint.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

/*
 * The wait between the two confirming reads: longer than a disk write
 * takes to complete, far shorter than jbd2's 5 s commit interval, so a
 * block being checkpointed is caught changing, and a batch costs little.
 */
#define CONFIRM_DELAY_MS 250
/*
 * Distinct blocks confirmed at a time: bounds the buffers (two copies of
 * each; at most 2 x 2 x 4096 4 KiB blocks, 64 MiB) while thousands of
 * suspects sharing inode-table blocks pay one wait.
 */
#define CONFIRM_BATCH_BLOCKS 4096
/* More suspects than this are not queued (a filesystem this broken is said so). */
#define MAX_SUSPECTS 100000

/* jbd2's on-disk format (big-endian), from the kernel's include/linux/jbd2.h. */
#define JBD2_MAGIC		0xc03b3998U
#define JBD2_DESCRIPTOR_BLOCK	1
#define JBD2_COMMIT_BLOCK	2
#define JBD2_SUPERBLOCK_V1	3
#define JBD2_SUPERBLOCK_V2	4
#define JBD2_REVOKE_BLOCK	5
#define JBD2_FEATURE_INCOMPAT_64BIT	 0x2
#define JBD2_FEATURE_INCOMPAT_CSUM_V2	 0x8
#define JBD2_FEATURE_INCOMPAT_CSUM_V3	 0x10
#define JBD2_FEATURE_INCOMPAT_FAST_COMMIT 0x20
#define JBD2_FLAG_SAME_UUID	2
#define JBD2_FLAG_LAST_TAG	8

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

void *ext4_block_buf(const struct ext4_state *st)
{
	void *p = NULL;
	size_t bs = st->fs->blocksize;

	/* 4096: the largest logical sector size O_DIRECT may ask for. */
	if (posix_memalign(&p, 4096, bs < 4096 ? 4096 : bs))
		abort();
	memset(p, 0, bs);
	return p;
}

int ext4_read_direct(struct ext4_state *st, blk64_t blk, void *buf)
{
	size_t bs = st->fs->blocksize;
	ssize_t n;

	if (blk >= ext2fs_blocks_count(st->fs->super))
		return -ERANGE;
	n = pread(st->direct_fd, buf, bs, (off_t)(blk * bs));
	if (n < 0)
		return -errno;
	return (size_t)n == bs ? 0 : -EIO;
}

/* ---- the journal's recent blocks ---------------------------------------- */

struct blkset {
	blk64_t *b;
	size_t n, alloc;
};

static void blkset_add(struct blkset *s, blk64_t b)
{
	if (s->n == s->alloc) {
		s->alloc = s->alloc ? 2 * s->alloc : 256;
		s->b = xrealloc(s->b, s->alloc * sizeof(*s->b));
	}
	s->b[s->n++] = b;
}

static int blk_cmp(const void *a, const void *b)
{
	blk64_t x = *(const blk64_t *)a, y = *(const blk64_t *)b;

	return x < y ? -1 : x > y;
}

static bool blkset_has(const struct blkset *s, blk64_t b)
{
	return find_item(&b, s->b, s->n, sizeof(*s->b), blk_cmp);
}

/* Journal block (logical, in the journal inode) to fs block. */
static int journal_bmap(struct ext4_state *st, blk64_t lblk, blk64_t *pblk)
{
	errcode_t err = !ext4_inode_placed(st->fs, st->fs->super->s_journal_inum) ||
			ext2fs_bmap2(st->fs, st->fs->super->s_journal_inum, NULL, NULL, 0,
				     lblk, NULL, pblk);

	return err || !*pblk ? -EIO : 0;
}

/*
 * Journal block lblk: of the journal inode, or of the external journal's
 * device, where journal blocks are device blocks.
 */
static int journal_read(struct ext4_state *st, blk64_t lblk, unsigned char *buf)
{
	size_t bs = st->fs->blocksize;
	blk64_t pblk;
	ssize_t n;
	int ret;

	if (st->jdev_fd >= 0) {
		n = pread(st->jdev_fd, buf, bs, (off_t)(lblk * bs));
		return n < 0 ? -errno : (size_t)n == bs ? 0 : -EIO;
	}
	ret = journal_bmap(st, lblk, &pblk);
	return ret ? ret : ext4_read_direct(st, pblk, buf);
}

struct jsb {
	uint32_t blocksize, maxlen, first, sequence, start, incompat, fc_blocks;
};

static size_t tag_bytes(uint32_t incompat)
{
	size_t sz;

	if (incompat & JBD2_FEATURE_INCOMPAT_CSUM_V3)
		return 16;
	sz = 12;
	if (incompat & JBD2_FEATURE_INCOMPAT_CSUM_V2)
		sz += 2;
	return (incompat & JBD2_FEATURE_INCOMPAT_64BIT) ? sz : sz - 4;
}

/* Parse a descriptor block: add its fs blocks; return how many data blocks follow. */
static unsigned parse_descriptor(const struct jsb *j, const unsigned char *b, size_t bs,
				 struct blkset *out)
{
	size_t tb = tag_bytes(j->incompat), off = 12, end = bs;
	bool v3 = j->incompat & JBD2_FEATURE_INCOMPAT_CSUM_V3;
	unsigned n = 0;

	if (j->incompat & (JBD2_FEATURE_INCOMPAT_CSUM_V2 | JBD2_FEATURE_INCOMPAT_CSUM_V3))
		end -= 4;	/* struct jbd2_journal_block_tail */
	while (off + tb <= end) {
		const unsigned char *t = b + off;
		uint32_t flags = v3 ? be32(t + 4) : be16(t + 6);
		blk64_t blk = be32(t);

		if ((j->incompat & JBD2_FEATURE_INCOMPAT_64BIT) && tb >= 12)
			blk |= (blk64_t)be32(t + 8) << 32;
		blkset_add(out, blk);
		n++;
		off += tb;
		if (!(flags & JBD2_FLAG_SAME_UUID))
			off += 16;
		if (flags & JBD2_FLAG_LAST_TAG)
			break;
	}
	return n;
}

static void parse_revoke(const struct jsb *j, const unsigned char *b, size_t bs,
			 struct blkset *out)
{
	size_t rec = (j->incompat & JBD2_FEATURE_INCOMPAT_64BIT) ? 8 : 4;
	size_t count = be32(b + 12), off = 16;

	if (count > bs)
		count = bs;
	for (; off + rec <= count; off += rec)
		blkset_add(out, rec == 8 ? (blk64_t)be32(b + off) << 32 | be32(b + off + 4)
					 : be32(b + off));
}

/*
 * Every fs block named by a transaction from the journal's tail on, into
 * out (sorted).  Returns 0, or a negative errno if the journal cannot be
 * read (then nothing can be said to be old: the caller clears everything).
 */
static int journal_recent(struct ext4_state *st, struct blkset *out)
{
	size_t bs = st->fs->blocksize;
	unsigned char *b = ext4_block_buf(st);
	struct jsb j;
	int ret = 0;

	out->n = 0;
	if (!st->journal_known && st->jdev_fd < 0) {
		/* An external journal that is not found: nothing is known old. */
		if (ext2fs_has_feature_journal(st->fs->super))
			ret = -ENODEV;
		goto done;
	}
	/* The superblock: the journal's first block, or on its device after the ext2 one's. */
	if ((ret = journal_read(st, st->jdev_fd >= 0 ? (blk64_t)ext2fs_journal_sb_start((int)bs) :
				0, b)) < 0)
		goto done;
	if (be32(b) != JBD2_MAGIC ||
	    (be32(b + 4) != JBD2_SUPERBLOCK_V1 && be32(b + 4) != JBD2_SUPERBLOCK_V2)) {
		ret = -EUCLEAN;
		goto done;
	}
	j.blocksize = be32(b + 12);
	j.maxlen = be32(b + 16);
	j.first = be32(b + 20);
	j.sequence = be32(b + 24);
	j.start = be32(b + 28);
	j.incompat = be32(b + 4) == JBD2_SUPERBLOCK_V2 ? be32(b + 40) : 0;
	j.fc_blocks = 0;
	if (j.incompat & JBD2_FEATURE_INCOMPAT_FAST_COMMIT)
		j.fc_blocks = be32(b + 84) ? be32(b + 84) : 256;	/* JBD2_DEFAULT_FAST_COMMIT_BLOCKS */
	if (j.blocksize != bs || j.first == 0 || j.maxlen <= j.first + j.fc_blocks) {
		ret = -EUCLEAN;
		goto done;
	}
	if (j.start == 0)
		goto done;		/* empty: everything is checkpointed */

	uint32_t last = j.maxlen - j.fc_blocks, pos = j.start, seq = j.sequence;

	/* Visit each log block at most once: the log is circular. */
	for (uint32_t visited = 0; visited < last - j.first; visited++) {
		if (pos < j.first || pos >= last)
			break;
		if (journal_read(st, pos, b) < 0 || be32(b) != JBD2_MAGIC || be32(b + 8) != seq)
			break;
		uint32_t type = be32(b + 4);
		uint32_t skip = 0;

		if (type == JBD2_DESCRIPTOR_BLOCK)
			skip = parse_descriptor(&j, b, bs, out);
		else if (type == JBD2_REVOKE_BLOCK)
			parse_revoke(&j, b, bs, out);
		else if (type == JBD2_COMMIT_BLOCK)
			seq++;
		else
			break;
		visited += skip;
		pos += 1 + skip;
		if (pos >= last)
			pos = j.first + (pos - last);
	}
done:
	free(b);
	sort_items(out->b, out->n, sizeof(*out->b), blk_cmp);
	return ret;
}

/* ---- suspects ------------------------------------------------------------ */

struct ext4_suspect *ext4_suspect_add(struct scrub_ctx *ctx, const char *check, uint64_t ino,
				      ext4_still_bad_fn still_bad, const char *fmt, ...)
{
	struct ext4_state *st = ext4_state(ctx);
	static struct ext4_suspect overflow;	/* absorbs what is not queued */
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	if (st->nr_suspects >= MAX_SUSPECTS) {
		if (st->nr_suspects++ == MAX_SUSPECTS)
			str_info(ctx, check, NULL, NULL, ino, "more than %d suspects: the rest "
				 "are not examined", MAX_SUSPECTS);
		memset(&overflow, 0, sizeof(overflow));
		return &overflow;
	}
	if (st->nr_suspects == st->alloc_suspects) {
		st->alloc_suspects = st->alloc_suspects ? 2 * st->alloc_suspects : 16;
		st->suspects = xrealloc(st->suspects, st->alloc_suspects * sizeof(*st->suspects));
	}
	struct ext4_suspect *s = &st->suspects[st->nr_suspects++];

	memset(s, 0, sizeof(*s));
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	s->check = check;
	s->ino = ino;
	s->still_bad = still_bad;
	s->msg = strbuf_detach(&sb);
	return s;
}

bool ext4_suspect_has_block(const struct ext4_suspect *s, blk64_t blk)
{
	for (unsigned i = 0; i < s->nr_blocks; i++)
		if (s->blocks[i] == blk)
			return true;
	return false;
}

void ext4_suspect_block(struct ext4_suspect *s, blk64_t blk)
{
	if (ext4_suspect_has_block(s, blk))
		return;
	if (s->nr_blocks < EXT4_SUSPECT_BLOCKS)
		s->blocks[s->nr_blocks++] = blk;
	else
		s->cleared = "it involves too many blocks to be confirmed";
}

void ext4_suspect_tree(struct ext4_suspect *s, const blk64_t *tree, unsigned nr_tree)
{
	for (unsigned i = 0; i < nr_tree && i < EXT4_SUSPECT_BLOCKS - 1; i++) {
		if (s->nr_blocks == EXT4_SUSPECT_BLOCKS) {
			s->tree_beyond = true;
			return;
		}
		ext4_suspect_block(s, tree[i]);
	}
	if (nr_tree >= EXT4_SUSPECT_BLOCKS)
		s->tree_beyond = true;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * A batch's blocks, each read once a round however many suspects hold it
 * (thousands of suspects may share a few inode-table blocks): set, sorted
 * and distinct; buf[round][i] the bytes of set.b[i]; unreadable[round][i]
 * and changed[i] (the two rounds read different bytes) what the rounds
 * found of it.
 */
struct batch_blocks {
	struct blkset set;
	unsigned char **buf[2];
	bool *unreadable[2], *changed;
};

/* Sort and deduplicate s in place. */
static void blkset_compact(struct blkset *s)
{
	size_t m = 0;

	sort_items(s->b, s->n, sizeof(*s->b), blk_cmp);
	for (size_t i = 0; i < s->n; i++)
		if (!m || s->b[m - 1] != s->b[i])
			s->b[m++] = s->b[i];
	s->n = m;
}

/*
 * How many of open[0 .. n) make the next batch (at least one), their
 * distinct blocks into set: the set is compacted whenever its entries would
 * pass twice CONFIRM_BATCH_BLOCKS, and the batch ends at a compaction that
 * leaves more than CONFIRM_BATCH_BLOCKS; so it never holds more than twice
 * that, and compacts once per CONFIRM_BATCH_BLOCKS entries at most often.
 */
static size_t next_batch(struct ext4_suspect *const *open, size_t n, struct blkset *set)
{
	size_t i;

	set->n = 0;
	for (i = 0; i < n; i++) {
		if (set->n + open[i]->nr_blocks > 2 * CONFIRM_BATCH_BLOCKS) {
			blkset_compact(set);
			if (i && set->n + open[i]->nr_blocks > CONFIRM_BATCH_BLOCKS)
				break;
		}
		for (unsigned k = 0; k < open[i]->nr_blocks; k++)
			blkset_add(set, open[i]->blocks[k]);
	}
	blkset_compact(set);
	return i;
}

static size_t block_index(const struct batch_blocks *bb, blk64_t b)
{
	const blk64_t *p = find_item(&b, bb->set.b, bb->set.n, sizeof(b), blk_cmp);

	return (size_t)(p - bb->set.b);
}

/* syncfs, then every block of the batch read again; compared with the last round's. */
static void read_round(struct scrub_ctx *ctx, struct batch_blocks *bb, int round)
{
	struct ext4_state *st = ext4_state(ctx);

	/* FSCRUB_DEBUG_CONFIRM_READ_FAILS: every read fails (for the tests). */
	bool fail = getenv("FSCRUB_DEBUG_CONFIRM_READ_FAILS") != NULL;

	if (syncfs(ctx->mnt_fd) < 0)
		report_verbose(ctx, "ext4: syncfs failed (%s)", strerror(errno));
	for (size_t i = 0; i < bb->set.n; i++) {
		if (fail || ext4_read_direct(st, bb->set.b[i], bb->buf[round][i]) < 0)
			bb->unreadable[round][i] = true;
		else if (round && !bb->unreadable[0][i] &&
			 memcmp(bb->buf[0][i], bb->buf[1][i], st->fs->blocksize))
			bb->changed[i] = true;
	}
}

/*
 * One round's judgement of each suspect, on the round's copies of its
 * blocks.  A block that cannot be read in a round says nothing in it: a
 * read that fails is no sign of a change (it was taken for one, and the
 * damage of a block that reads bad and then not at all was an info).
 * Where neither round could read a block, the first reading stands.
 */
static void judge_round(struct scrub_ctx *ctx, struct ext4_suspect *const *batch, size_t n,
			const struct batch_blocks *bb, int round)
{
	for (size_t i = 0; i < n; i++) {
		struct ext4_suspect *s = batch[i];
		unsigned char *now[EXT4_SUSPECT_BLOCKS];
		bool unread = false;

		for (unsigned k = 0; k < s->nr_blocks && !s->cleared; k++) {
			size_t j = block_index(bb, s->blocks[k]);

			if (bb->unreadable[round][j])
				unread = true;
			else if (bb->changed[j])
				s->cleared = "its blocks changed on the disk";
			now[k] = bb->buf[round][j];
		}
		if (unread && !s->cleared)
			report_verbose(ctx, "ext4: %s: a block of \"%s\" cannot be read again (%s "
				       "read): that read says nothing", s->check, s->msg,
				       round ? "third" : "second");
		else if (!s->cleared && !s->still_bad(ctx, s, now))
			s->cleared = round ? "it was right on the third read" :
					     "it was right when read again";
	}
}

static void batch_blocks_alloc(const struct ext4_state *st, struct batch_blocks *bb)
{
	size_t m = bb->set.n;

	for (int r = 0; r < 2; r++) {
		bb->buf[r] = xcalloc(m ? m : 1, sizeof(*bb->buf[r]));
		for (size_t i = 0; i < m; i++)
			bb->buf[r][i] = ext4_block_buf(st);
	}
	for (int r = 0; r < 2; r++)
		bb->unreadable[r] = xcalloc(m ? m : 1, sizeof(bool));
	bb->changed = xcalloc(m ? m : 1, sizeof(bool));
}

static void batch_blocks_release(struct batch_blocks *bb)
{
	for (int r = 0; r < 2; r++) {
		for (size_t i = 0; i < bb->set.n; i++)
			free(bb->buf[r][i]);
		free(bb->buf[r]);
	}
	free(bb->unreadable[0]);
	free(bb->unreadable[1]);
	free(bb->changed);
}

/* Rule 4 after the reads, then the kernel's view; counts the outcome. */
/* Is the filesystem read-only as a whole (not in flux)? */
static bool fs_readonly(struct scrub_ctx *ctx)
{
	return mount_sb_readonly(stx_devno(&ctx->root_stx));
}

/* Rule 4 for one suspect: cleared if the journal logged one of its blocks or cannot be read. */
static void clear_if_journalled(struct ext4_suspect *s, bool journal_ok, const struct blkset *j0,
				const struct blkset *j1)
{
	for (unsigned k = 0; k < s->nr_blocks && !s->cleared && !s->journal_free; k++)
		if (!journal_ok)
			s->cleared = "the journal cannot be read to tell old from recent";
		else if (blkset_has(j0, s->blocks[k]) || blkset_has(j1, s->blocks[k]))
			s->cleared = "a recent journal transaction logged one of its blocks";
}

static void judge_journal(struct scrub_ctx *ctx, struct ext4_suspect *const *batch, size_t n,
			  bool journal_ok, const struct blkset *j0, const struct blkset *j1)
{
	struct ext4_state *st = ext4_state(ctx);
	bool readonly = fs_readonly(ctx);

	for (size_t i = 0; i < n; i++) {
		struct ext4_suspect *s = batch[i];

		if (!readonly)
			clear_if_journalled(s, journal_ok, j0, j1);
		if (!s->cleared && s->kernel_view)
			s->cleared = s->kernel_view(ctx, s);
		if (s->cleared)
			st->cleared++;
		else
			st->confirmed++;
	}
}

/* The batch's distinct blocks are in bb->set (next_batch()). */
static void confirm_batch(struct scrub_ctx *ctx, struct ext4_suspect *const *batch, size_t n,
			  struct batch_blocks *bb)
{
	struct ext4_state *st = ext4_state(ctx);
	struct blkset j0 = { 0 }, j1 = { 0 };
	bool journal_ok = journal_recent(st, &j0) == 0;

	batch_blocks_alloc(st, bb);
	read_round(ctx, bb, 0);
	judge_round(ctx, batch, n, bb, 0);
	sleep_ms(CONFIRM_DELAY_MS);
	read_round(ctx, bb, 1);
	judge_round(ctx, batch, n, bb, 1);
	journal_ok = journal_recent(st, &j1) == 0 && journal_ok;
	judge_journal(ctx, batch, n, journal_ok, &j0, &j1);
	batch_blocks_release(bb);
	free(j0.b);
	free(j1.b);
}

/*
 * Rule 4 first, from one read of the journal: a suspect whose blocks a
 * transaction still in the log holds is cleared whatever its reads say, so
 * it is not worth a batch's reads, syncfs calls and wait.  A scan beside a
 * burst of creations finds tens of thousands of such (inodes in use whose
 * bitmap bits are not yet on the disk): 381 batches took 139 s.  The
 * suspects left to confirm go into open, in order; returns how many.
 */
static size_t clear_recent(struct ext4_state *st, struct ext4_suspect *v, size_t n,
			   bool readonly, struct ext4_suspect **open)
{
	struct blkset j = { 0 };
	bool journal_ok = !readonly && journal_recent(st, &j) == 0;
	size_t nopen = 0;

	for (size_t i = 0; i < n; i++) {
		struct ext4_suspect *s = &v[i];

		/* The journal unread (or read-only): the batches judge. */
		if (journal_ok)
			clear_if_journalled(s, true, &j, &j);
		if (s->cleared)
			st->cleared++;
		else
			open[nopen++] = s;
	}
	free(j.b);
	return nopen;
}

/* An error about an inode that may have a name (not one the walk did not reach). */
static bool wants_name(const struct ext4_suspect *s)
{
	return !s->cleared && s->ino && !s->no_name;
}

/*
 * Names for the confirmed errors about inodes: the scan found them by
 * number, so a second walk looks for their names (only when there are
 * any, and only after phase 3's walk).  An inode it does not find (no
 * name, or under a directory the walk cannot read) is reported by number.
 */
static void name_errors(struct scrub_ctx *ctx, const struct ext4_suspect *v, size_t n,
			struct backend_names *bn)
{
	size_t asked;
	int named;

	for (size_t i = 0; i < n; i++)
		if (wants_name(&v[i]))
			backend_names_add(bn, v[i].ino);
	named = backend_names_walk(bn, &asked);
	if (asked && named >= 0)
		report_verbose(ctx, "ext4: %d of %zu inodes with errors named by a second walk",
			       named, asked);
}

static void report_suspect(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			   struct backend_names *bn)
{
	const struct dir_node *dir = NULL;
	const char *name = NULL;

	if (wants_name(s))
		backend_names_get(bn, s->ino, &dir, &name);

	if (s->cleared)
		str_changed(ctx, s->check, NULL, NULL, s->ino, "%s (%s)", s->msg, s->cleared);
	else if (s->warn)
		str_warn(ctx, s->check, dir, name, s->ino, "%s", s->msg);
	else
		str_error(ctx, s->check, dir, name, s->ino, "%s", s->msg);
}

void ext4_confirm_run(struct scrub_ctx *ctx, bool name_inodes)
{
	struct ext4_state *st = ext4_state(ctx);
	size_t n = st->nr_suspects > MAX_SUSPECTS ? MAX_SUSPECTS : st->nr_suspects;
	struct backend_names *bn = backend_names_new(ctx, "walk that names the errors");

	struct ext4_suspect **open = xcalloc(n ? n : 1, sizeof(*open));
	bool readonly = n && fs_readonly(ctx);
	size_t nopen = n ? clear_recent(st, st->suspects, n, readonly, open) : 0;

	if (n)
		report_verbose(ctx, "ext4: %zu %s to confirm from the disk (%zu left after the "
			       "journal's recent blocks%s)", n, n == 1 ? "suspect" : "suspects", nopen,
			       readonly ? "; read-only: the journal clears none" : "");
	for (size_t i = 0, len; i < nopen && !scrub_should_stop(ctx); i += len) {
		struct batch_blocks bb = { 0 };

		len = next_batch(open + i, nopen - i, &bb.set);
		report_verbose(ctx, "ext4: %zu suspects confirmed together, from %zu distinct "
			       "blocks", len, bb.set.n);
		confirm_batch(ctx, open + i, len, &bb);
		free(bb.set.b);
	}
	free(open);
	if (name_inodes && !scrub_should_stop(ctx))
		name_errors(ctx, st->suspects, n, bn);
	for (size_t i = 0; i < n; i++) {
		if (!scrub_should_stop(ctx))
			report_suspect(ctx, &st->suspects[i], bn);
		free(st->suspects[i].msg);
	}
	backend_names_free(bn);
	st->nr_suspects = 0;
}
