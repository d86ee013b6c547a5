/*
 * xfs_media: what the sectors of a media error hold, for fscrub watch
 * (xfs_watch.c) and fscrub locate (cmd/owners.c).
 *
 * The XFS health monitor reports a media error as a range of 512-byte
 * sectors of a device, nothing more.  GETFSMAP (fsmap.h) over that range
 * of the data device says who owns each part of it -- a file's data or
 * attribute fork (its inode and the file offset), an inode's extent map,
 * a kind of filesystem metadata, or free space -- as the media scan's
 * mapping does for the bad ranges its walk did not map (mediamap.c).
 * BULKSTAT gives each file's generation, which XFS's file handles hold,
 * so that the watcher can open the file by its handle and say its path.
 *
 * Library code: no logging; the watcher says what was found and checks
 * the files.  Calls only utilities (fsmap.h, strbuf.h).
 */
#ifndef FSCRUB_XFS_MEDIA_H
#define FSCRUB_XFS_MEDIA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct strbuf;

/* The part of the bad range one GETFSMAP record owns. */
struct media_owner {
	uint64_t dev_off, len;	/* device bytes, inside the bad range */
	uint64_t owner;		/* an inode number, or a special owner (FMR_OWN_*) */
	uint64_t file_off;	/* a fork of an inode: the fork's offset of dev_off */
	uint32_t flags;		/* the record's FMR_OF_* */
	uint32_t gen;		/* an inode's generation (BULKSTAT); 0 if not found */
};

struct media_owners {
	struct media_owner *v;
	size_t n;
};

/*
 * The owners of the device bytes [off, off+len) of the filesystem whose
 * root directory is root_fd, dev its data device (st_dev of the
 * filesystem), appended to out in device order, each clipped to the
 * range.  Returns 0 or a negative errno: -EOPNOTSUPP (or -EINVAL) where
 * the filesystem has no GETFSMAP, -EPERM without CAP_SYS_ADMIN.  XFS
 * without the reverse-mapping btree has no inode owners: its allocated
 * space is owned by "unknown".
 */
int xfs_media_owners(int root_fd, dev_t dev, uint64_t off, uint64_t len,
		       struct media_owners *out);

/* Is o part of an inode: its data or attribute fork, or its extent map? */
bool media_owner_is_inode(const struct media_owner *o);

/* Is o the data of a file (not an attribute fork or an extent map)? */
bool media_owner_is_data(const struct media_owner *o);

/*
 * What o holds, for a log line: "data of inode 131 at bytes 8192-16383",
 * "the extent map (data fork) of inode 131", "filesystem metadata: the
 * journal", "free space".
 */
void media_owner_describe(const struct media_owner *o, struct strbuf *sb);

void media_owners_release(struct media_owners *o);

#endif
