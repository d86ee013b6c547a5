/*
 * xfs_health: what the XFS kernel already knows is sick, for fscrub
 * health (the backend's health hook; backends/health.h).
 *
 * XFS keeps in-memory health flags: a metadata object is marked sick when
 * a read finds it corrupt or a scrub (xfs_scrub, fscrub) fails it, and
 * checked when a scrub has looked at it since mount.  FSGEOMETRY (v5)
 * gives the filesystem-wide ones (summary counters, quota, realtime
 * metadata), AG_GEOMETRY those of each AG's headers and btrees, BULKSTAT
 * (bs_sick, bs_checked) those of each inode.  The flags are lost at
 * unmount, and an inode's with the inode when it leaves the cache.
 *
 * BULKSTAT reads every inode cluster: on a big filesystem that is a scan,
 * so it stops after INODE_BUDGET_NS and says how far it got.
 */
#include "backends/xfs/xfs_health.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <xfs/xfs.h>

#include "backends/health.h"
#include "lib/strbuf.h"

/*
 * fscrub health answers in under a second: the inodes of one filesystem get
 * a fifth of it (about 80,000 inodes on a small VM, all of a typical root).
 */
#define INODE_BUDGET_NS 200000000LL
/* Inodes per BULKSTAT call: 64 KiB of records. */
#define BULKSTAT_BATCH 256
/* Sick inodes listed by number; the rest are counted. */
#define FIRST_SICK_MAX 10

/* Bit names as xfs_fs.h defines them; newer bits print as "bitN". */
static const char *const fs_names[] = {
	"counters", "uquota", "gquota", "pquota", "rtbitmap", "rtsummary", "quotacheck",
	"nlinks", "metadir", "metapath",
};
static const char *const ag_names[] = {
	"sb", "agf", "agfl", "agi", "bnobt", "cntbt", "inobt", "finobt",
	"rmapbt", "refcountbt", "inodes",
};
static const char *const ino_names[] = {
	"core", "bmapbtd", "bmapbta", "bmapbtc", "directory", "xattr", "symlink",
	"parent", "dirtree",
};
static const char *const rtgroup_names[] = {
	"super", "bitmap", "summary", "rmapbt", "refcountbt",
};

/* The set bits of mask as names (or "bitN"), into arr and text. */
static json_object *flag_names(uint32_t mask, const char *const *names, size_t nr,
			       struct strbuf *text)
{
	json_object *arr = json_object_new_array();

	for (unsigned b = 0; b < 32; b++) {
		char tmp[16];
		const char *n = tmp;

		if (!(mask & (1U << b)))
			continue;
		if (b < nr)
			n = names[b];
		else
			snprintf(tmp, sizeof(tmp), "bit%u", b);
		json_object_array_add(arr, json_object_new_string(n));
		strbuf_addf(text, "%s%s", text->len ? " " : "", n);
	}
	return arr;
}

#define NAMES(a) (a), sizeof(a) / sizeof((a)[0])

void xfs_health_flag_text(enum xfs_health_flags which, uint32_t mask, struct strbuf *text)
{
	json_object *arr;

	switch (which) {
	case XFS_HEALTH_FS:
		arr = flag_names(mask, NAMES(fs_names), text);
		break;
	case XFS_HEALTH_AG:
		arr = flag_names(mask, NAMES(ag_names), text);
		break;
	case XFS_HEALTH_RTGROUP:
		arr = flag_names(mask, NAMES(rtgroup_names), text);
		break;
	default:
		arr = flag_names(mask, NAMES(ino_names), text);
		break;
	}
	json_object_put(arr);
}

static int fs_flags(struct health *h, int fd, uint32_t *agcount)
{
	struct xfs_fsop_geom geo;
	struct strbuf sick = STRBUF_INIT, checked = STRBUF_INIT;

	memset(&geo, 0, sizeof(geo));
	if (ioctl(fd, XFS_IOC_FSGEOMETRY, &geo) < 0)
		return -errno;
	*agcount = geo.agcount;
	json_object_object_add(h->detail, "sick", flag_names(geo.sick, NAMES(fs_names), &sick));
	json_object_object_add(h->detail, "checked",
			       flag_names(geo.checked, NAMES(fs_names), &checked));
	if (geo.sick)
		health_problem(h, "filesystem metadata sick: %s", sick.buf);
	health_line(h, "filesystem metadata checked since mount: %s",
		    checked.len ? checked.buf : "none");
	strbuf_release(&sick);
	strbuf_release(&checked);
	return 0;
}

static int ag_flags(struct health *h, int fd, uint32_t agcount)
{
	json_object *sick_ags = json_object_new_array();
	uint32_t nr_checked = 0;

	for (uint32_t ag = 0; ag < agcount; ag++) {
		struct xfs_ag_geometry g = { .ag_number = ag };
		struct strbuf sick = STRBUF_INIT;
		json_object *o;

		if (ioctl(fd, XFS_IOC_AG_GEOMETRY, &g) < 0) {
			json_object_put(sick_ags);
			return -errno;
		}
		nr_checked += g.ag_checked != 0;
		if (!g.ag_sick)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "ag", json_object_new_int64(ag));
		json_object_object_add(o, "sick", flag_names(g.ag_sick, NAMES(ag_names), &sick));
		json_object_array_add(sick_ags, o);
		health_problem(h, "AG %" PRIu32 " sick: %s", ag, sick.buf);
		strbuf_release(&sick);
	}
	json_object_object_add(h->detail, "ag_count", json_object_new_int64(agcount));
	json_object_object_add(h->detail, "ags_checked", json_object_new_int64(nr_checked));
	json_object_object_add(h->detail, "sick_ags", sick_ags);
	health_line(h, "%" PRIu32 " AGs, %" PRIu32 " with metadata checked since mount",
		    agcount, nr_checked);
	return 0;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct ino_tally {
	uint64_t seen, sick, checked;
	json_object *first;		/* [{ino, sick}] */
};

static void tally(struct ino_tally *t, const struct xfs_bulkstat *bs)
{
	t->seen++;
	t->checked += bs->bs_checked != 0;
	if (!bs->bs_sick)
		return;
	if (t->sick++ < FIRST_SICK_MAX) {
		struct strbuf sb = STRBUF_INIT;
		json_object *o = json_object_new_object();

		json_object_object_add(o, "ino", json_object_new_uint64(bs->bs_ino));
		json_object_object_add(o, "sick", flag_names(bs->bs_sick, NAMES(ino_names), &sb));
		json_object_array_add(t->first, o);
		strbuf_release(&sb);
	}
}

/* BULKSTAT until the end or the budget; complete says which. */
static int inode_flags(int fd, struct ino_tally *t, bool *complete)
{
	struct xfs_bulkstat_req *req = xcalloc(1, XFS_BULKSTAT_REQ_SIZE(BULKSTAT_BATCH));
	long long deadline = now_ns() + INODE_BUDGET_NS;
	int ret = 0;

	*complete = false;
	while (now_ns() < deadline) {
		req->hdr.icount = BULKSTAT_BATCH;
		if (ioctl(fd, XFS_IOC_BULKSTAT, req) < 0) {
			ret = -errno;
			break;
		}
		if (req->hdr.ocount == 0) {
			*complete = true;
			break;
		}
		for (uint32_t i = 0; i < req->hdr.ocount; i++)
			tally(t, &req->bulkstat[i]);
	}
	free(req);
	return ret;
}

static int inodes(struct health *h, int fd)
{
	struct ino_tally t = { .first = json_object_new_array() };
	json_object *o = json_object_new_object();
	bool complete;
	int ret = inode_flags(fd, &t, &complete);

	if (ret == -EPERM) {	/* BULKSTAT needs CAP_SYS_ADMIN: the rest is still worth having */
		json_object_put(t.first);
		json_object_put(o);
		json_object_object_add(h->detail, "inodes", NULL);
		health_line(h, "inodes not looked at: BULKSTAT needs CAP_SYS_ADMIN");
		return 0;
	}
	if (ret) {
		json_object_put(t.first);
		json_object_put(o);
		return ret;
	}
	json_object_object_add(o, "looked_at", json_object_new_uint64(t.seen));
	json_object_object_add(o, "complete", json_object_new_boolean(complete));
	json_object_object_add(o, "sick", json_object_new_uint64(t.sick));
	json_object_object_add(o, "checked", json_object_new_uint64(t.checked));
	json_object_object_add(o, "first_sick", t.first);
	json_object_object_add(h->detail, "inodes", o);
	if (t.sick)
		health_problem(h, "%" PRIu64 " sick inode%s (first: %s)", t.sick,
			       t.sick == 1 ? "" : "s",
			       json_object_to_json_string_ext(t.first, JSON_C_TO_STRING_PLAIN));
	health_line(h, "%" PRIu64 " inodes looked at%s, %" PRIu64 " checked since they were "
		    "loaded", t.seen, complete ? "" : " (stopped: time budget)", t.checked);
	return 0;
}

int xfs_health(struct health *h)
{
	uint32_t agcount;
	int fd = health_open_root(h), ret = fd;

	if (fd < 0)
		return ret;
	if (!(ret = fs_flags(h, fd, &agcount)) && !(ret = ag_flags(h, fd, agcount)) &&
	    !(ret = inodes(h, fd)))
		h->source = "xfs health flags";
	close(fd);
	return ret;
}
