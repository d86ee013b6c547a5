/*
 * health: what a mounted filesystem already knows about its own health,
 * as a backend's health hook (backend.h) reads it for fscrub health
 * (cmd/health.c), in well under a second and without scanning anything:
 *
 *   backends/ext4/ext4_health.c    the superblock's error count and
 *                                  first/last error, as /sys/fs/ext4/<device>/
 *                                  shows them
 *   backends/xfs/xfs_health.c      the kernel's sick and checked flags:
 *                                  filesystem (FSGEOMETRY v5), per AG
 *                                  (AG_GEOMETRY), per inode (BULKSTAT
 *                                  bs_sick, within a time budget)
 *   backends/btrfs/btrfs_health.c  every device's error counters
 *                                  (GET_DEV_STATS); also polled by the
 *                                  backend's watch hooks
 *
 * Each source fills one struct health: a problem is a finding (the
 * filesystem is then sick), a line is information; both go to the text
 * form, and the source's numbers go to its JSON object.  A source returns
 * a negative errno when it cannot be read (an operational error); never
 * prints.
 */
#ifndef FSCRUB_HEALTH_H
#define FSCRUB_HEALTH_H

#include <json-c/json.h>
#include <stdbool.h>

#include "lib/strbuf.h"

struct fsmount;

struct health {
	const struct fsmount *m;
	const char *source;		/* what was read, e.g. "ext4 sysfs"; NULL: nothing */
	bool sick;			/* at least one problem */
	struct strbuf text;		/* "  ...\n" lines for the text form */
	json_object *problems;		/* array of strings */
	json_object *detail;		/* the source's numbers */
};

void health_init(struct health *h, const struct fsmount *m);
void health_release(struct health *h);

/* A problem (makes h sick) or an information line, in the text and the JSON. */
void health_problem(struct health *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void health_line(struct health *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* h->m's mount point, opened O_RDONLY for the source's ioctls: a descriptor or -errno. */
int health_open_root(const struct health *h);

#endif
