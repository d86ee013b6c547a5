/*
 * readplan: the device reader's list of reads; see readplan.h.
 */
#include "readplan.h"

#include <errno.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "context.h"
#include "devverify.h"
#include "fsmap.h"
#include "strbuf.h"

uint64_t readplan_round_down(uint64_t x)
{
	return x - x % READPLAN_ALIGN;
}

uint64_t readplan_round_up(uint64_t x)
{
	return readplan_round_down(x + READPLAN_ALIGN - 1);
}

void readplan_init(struct readplan *p, uint64_t dev_size)
{
	*p = (struct readplan){ .limit = dev_size };
}

/* Append [off, off+len) to the list, split into DEVREAD_MAX pieces. */
static void push_reads(struct readplan *p, uint64_t off, uint64_t len)
{
	while (len) {
		uint64_t piece = len < DEVREAD_MAX ? len : DEVREAD_MAX;

		if (p->n == p->alloc) {
			p->alloc = p->alloc ? p->alloc * 2 : 1024;
			p->v = xrealloc(p->v, p->alloc * sizeof(*p->v));
		}
		p->v[p->n++] = (struct io_range){ .off = off, .len = piece };
		off += piece;
		len -= piece;
	}
}

void readplan_add(struct readplan *p, uint64_t start, uint64_t end)
{
	uint64_t s = readplan_round_down(start), e = readplan_round_up(end);

	if (s >= p->limit || s >= e)
		return;
	if (e > p->limit)
		e = p->limit;
	if (p->open && e <= p->end)
		return;			/* inside the current read */
	if (p->open && s <= p->end + DEVREAD_MERGE_GAP) {
		p->end = e;
		return;
	}
	if (p->open)
		push_reads(p, p->start, p->end - p->start);
	p->start = s;
	p->end = e;
	p->open = true;
}

void readplan_add_uncovered(struct readplan *p, uint64_t start, uint64_t end,
			    const struct io_range *done, size_t nr_done, size_t *cursor)
{
	uint64_t s = start;

	while (*cursor < nr_done && done[*cursor].off + done[*cursor].len <= s)
		(*cursor)++;
	for (size_t k = *cursor; s < end; k++) {
		uint64_t next = k < nr_done && done[k].off < end ? done[k].off : end;

		if (next > s)
			readplan_add(p, s, next);
		if (k >= nr_done || done[k].off >= end)
			break;
		if (done[k].off + done[k].len > s)
			s = done[k].off + done[k].len;
	}
}

void readplan_end(struct readplan *p)
{
	if (p->open)
		push_reads(p, p->start, p->end - p->start);
	p->open = false;
}

/*
 * Is the range worth reading: a file's written data, or blocks in use by
 * an unknown owner (files and directories where there is no reverse map)?
 * Free space and the metadata GETFSMAP names are not.
 */
static bool fsmap_holds_data(const struct fsmap *r)
{
	if (r->fmr_flags & FMR_OF_SPECIAL_OWNER)
		return r->fmr_owner == FMR_OWN_UNKNOWN;
	return !(r->fmr_flags & (FMR_OF_ATTR_FORK | FMR_OF_EXTENT_MAP | FMR_OF_PREALLOC));
}

struct fsmap_plan {
	struct readplan *p;
	uint64_t pos;		/* the records so far reach this far */
	uint64_t bytes;
};

/*
 * Records come in device order, several for a range with several owners.
 * A range no record describes is in use by something not reported (ext4
 * leaves most file data out): it is read too.
 */
static void plan_record(const struct fsmap *r, void *arg)
{
	struct fsmap_plan *fp = arg;
	uint64_t end = r->fmr_physical + r->fmr_length;

	if (r->fmr_physical > fp->pos) {
		fp->bytes += r->fmr_physical - fp->pos;
		readplan_add(fp->p, fp->pos, r->fmr_physical);
	}
	if (fsmap_holds_data(r) && end > fp->pos) {
		uint64_t start = r->fmr_physical > fp->pos ? r->fmr_physical : fp->pos;

		fp->bytes += end - start;
		readplan_add(fp->p, start, end);
	}
	if (end > fp->pos)
		fp->pos = end;
}

int readplan_from_fsmap(const struct scrub_ctx *ctx, struct readplan *p, uint64_t *bytes)
{
	struct fsmap_plan fp = { .p = p };
	struct stat st;
	int ret;

	if (stat(ctx->source, &st) < 0)
		return -errno;
	ret = fsmap_query(ctx->mnt_fd, fsmap_devno(st.st_rdev), 0, UINT64_MAX, plan_record, &fp);
	readplan_end(p);
	*bytes = fp.bytes;
	if (ret < 0) {
		free(p->v);
		readplan_init(p, p->limit);
	}
	return ret;
}
