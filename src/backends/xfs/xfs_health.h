/*
 * xfs_health: the XFS backend's hooks for the subcommands (backend.h):
 * fscrub health reads the kernel's sick and checked flags
 * (xfs_health.c), fscrub watch follows the XFS health monitor
 * (xfs_watch.c, xfs_healthmon.h) and maps a media error's sectors to
 * their owners (xfs_media.h).
 */
#ifndef FSCRUB_XFS_HEALTH_H
#define FSCRUB_XFS_HEALTH_H

#include <stdint.h>

struct health;
struct strbuf;
struct watch_fs;
struct watch_source;

/* The health hook: the sick flags of the filesystem, each AG and the inodes. */
int xfs_health(struct health *h);

/*
 * Which XFS sick flags a mask holds: FSGEOMETRY's, AG_GEOMETRY's,
 * RTGROUP_GEOMETRY's, BULKSTAT's.
 */
enum xfs_health_flags { XFS_HEALTH_FS, XFS_HEALTH_AG, XFS_HEALTH_RTGROUP, XFS_HEALTH_INODE };

/* The names of mask's set bits ("inobt finobt"; "bitN" for newer ones) appended to text. */
void xfs_health_flag_text(enum xfs_health_flags which, uint32_t mask, struct strbuf *text);

/* The watch hooks: the health monitor, or FAN_FS_ERROR where there is none. */
int xfs_watch_open(struct watch_fs *wf, int root, struct watch_source *src);
void xfs_watch_read(struct watch_fs *wf, struct watch_source *src);
void xfs_watch_close(struct watch_source *src);

#endif
