/*
 * xfs_media: what the sectors of a media error hold; see xfs_media.h.
 */
#include "backends/xfs/xfs_media.h"

#include <errno.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <xfs/xfs.h>

#include "lib/fsmap.h"
#include "lib/strbuf.h"

struct take {
	struct media_owners *out;
	uint64_t lo, end;	/* the bad range */
};

static void take_record(const struct fsmap *m, void *arg)
{
	struct take *t = arg;
	uint64_t s = m->fmr_physical > t->lo ? m->fmr_physical : t->lo;
	uint64_t e = m->fmr_physical + m->fmr_length < t->end ?
		     m->fmr_physical + m->fmr_length : t->end;
	struct media_owners *out = t->out;

	if (e <= s)
		return;
	out->v = xrealloc(out->v, (out->n + 1) * sizeof(*out->v));
	out->v[out->n++] = (struct media_owner){
		.dev_off = s, .len = e - s, .owner = m->fmr_owner, .flags = m->fmr_flags,
		.file_off = m->fmr_flags & FMR_OF_SPECIAL_OWNER ? 0 :
			    m->fmr_offset + (s - m->fmr_physical),
	};
}

/* The generation of XFS inode ino: BULKSTAT from ino, one record. */
static uint32_t inode_gen(int fd, uint64_t ino)
{
	struct xfs_bulkstat_req *req = xcalloc(1, XFS_BULKSTAT_REQ_SIZE(1));
	uint32_t gen = 0;

	req->hdr.ino = ino;
	req->hdr.icount = 1;
	if (ioctl(fd, XFS_IOC_BULKSTAT, req) == 0 && req->hdr.ocount == 1 &&
	    req->bulkstat[0].bs_ino == ino)
		gen = req->bulkstat[0].bs_gen;
	free(req);
	return gen;
}

int xfs_media_owners(int root_fd, dev_t dev, uint64_t off, uint64_t len,
		       struct media_owners *out)
{
	struct take t = { .out = out, .lo = off, .end = off + len };
	size_t first = out->n;
	int ret;

	if (!len)
		return 0;
	ret = fsmap_query(root_fd, fsmap_dev(major(dev), minor(dev)), off, off + len - 1,
			  take_record, &t);
	for (size_t i = first; i < out->n; i++)
		if (media_owner_is_inode(&out->v[i]))
			out->v[i].gen = inode_gen(root_fd, out->v[i].owner);
	return ret;
}

bool media_owner_is_inode(const struct media_owner *o)
{
	return !(o->flags & FMR_OF_SPECIAL_OWNER);
}

bool media_owner_is_data(const struct media_owner *o)
{
	return !(o->flags & (FMR_OF_SPECIAL_OWNER | FMR_OF_ATTR_FORK | FMR_OF_EXTENT_MAP));
}

void media_owner_describe(const struct media_owner *o, struct strbuf *sb)
{
	const char *name = fsmap_xfs_owner_name(o->owner);
	const char *fork = o->flags & FMR_OF_ATTR_FORK ? "attribute" : "data";

	if (o->flags & FMR_OF_EXTENT_MAP)
		strbuf_addf(sb, "the extent map (%s fork) of inode %llu", fork,
			    (unsigned long long)o->owner);
	else if (!(o->flags & FMR_OF_SPECIAL_OWNER))
		strbuf_addf(sb, "%s of inode %llu at bytes %llu-%llu",
			    o->flags & FMR_OF_ATTR_FORK ? "the attribute fork" : "data",
			    (unsigned long long)o->owner, (unsigned long long)o->file_off,
			    (unsigned long long)(o->file_off + o->len - 1));
	else if (o->owner == FMR_OWN_FREE)
		strbuf_addstr(sb, "free space");
	else if (o->owner == FMR_OWN_UNKNOWN)
		strbuf_addstr(sb, "allocated blocks of no known owner");
	else if (name)
		strbuf_addf(sb, "filesystem metadata: %s", name);
	else
		strbuf_addf(sb, "filesystem metadata (owner %u:%u)", FMR_OWNER_TYPE(o->owner),
			    FMR_OWNER_CODE(o->owner));
}

void media_owners_release(struct media_owners *o)
{
	free(o->v);
	o->v = NULL;
	o->n = 0;
}
