/*
 * health: what a mounted filesystem already knows about its own health,
 * read in well under a second without scanning anything (fscrub health).
 *
 *   health_ext4.c   the superblock's error count and first/last error, as
 *                   /sys/fs/ext4/<device>/ shows them
 *   health_xfs.c    the kernel's sick and checked flags: filesystem
 *                   (FSGEOMETRY v5), per AG (AG_GEOMETRY), per inode
 *                   (BULKSTAT bs_sick, within a time budget)
 *   health_btrfs.c  every device's error counters (GET_DEV_STATS); also
 *                   read by fscrub watch, which polls them
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
#include <stddef.h>
#include <stdint.h>

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

/* The sources; fd is an O_RDONLY descriptor of the mount point. */
int health_ext4(struct health *h);
int health_xfs(struct health *h, int fd);
int health_btrfs(struct health *h, int fd);

/* Which XFS sick flags a mask holds: FSGEOMETRY's, AG_GEOMETRY's, RTGROUP_GEOMETRY's, BULKSTAT's. */
enum health_xfs_flags { HEALTH_XFS_FS, HEALTH_XFS_AG, HEALTH_XFS_RTGROUP, HEALTH_XFS_INODE };

/* The names of mask's set bits ("inobt finobt"; "bitN" for newer ones) appended to text. */
void health_xfs_flag_text(enum health_xfs_flags which, uint32_t mask, struct strbuf *text);

/* One btrfs device's error counters (BTRFS_DEV_STAT_* order). */
#define HEALTH_BTRFS_STATS 5
struct btrfs_devstat {
	uint64_t devid;
	bool missing;			/* mounted degraded without it: no path, counters 0 */
	char path[1024];
	uint64_t v[HEALTH_BTRFS_STATS];
};

/* The counter names: "write_io_errs", ... as btrfs device stats prints them. */
extern const char *const health_btrfs_stat_names[HEALTH_BTRFS_STATS];

/*
 * Every device of the btrfs filesystem fd is on: *devs (malloc'ed, the
 * caller frees) and *nr, or a negative errno (*devs untouched).
 */
int health_btrfs_devstats(int fd, struct btrfs_devstat **devs, size_t *nr);

#endif
