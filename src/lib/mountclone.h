/*
 * mountclone: reach a mount that another mount covers.
 *
 * A device mounted on /mnt/a, with a tmpfs mounted on /mnt/a after it: the
 * path shows the tmpfs, and the kernel has no call that opens a mount by
 * its id.  A child process makes itself a private copy of the mount
 * namespace (unshare(CLONE_NEWNS), every mount in it made private first,
 * so that nothing it does propagates back to the system's mounts), detaches
 * there, one at a time, the mounts that cover the wanted one, checks that
 * the path now shows exactly the wanted mount (the same target, device
 * number, root, type and source as in the system's table), and clones it
 * with open_tree(2).  The clones come back over a socket (SCM_RIGHTS); the
 * child's namespace goes away with it.  The system's mounts are never
 * touched.  It needs CAP_SYS_ADMIN.
 *
 * Layering: uses mountpoint.h (libmount) only; reports nothing itself.
 * Call it only while the process has one thread (phase 1): the child
 * allocates between fork() and _exit().
 */
#ifndef FSCRUB_MOUNTCLONE_H
#define FSCRUB_MOUNTCLONE_H

#include <stdbool.h>

#include "lib/mountpoint.h"
#include "lib/strbuf.h"

/*
 * Two detached clones of mi's mount, as O_PATH descriptors of their roots:
 * *hold (as the mount is) and *walk (made read-only and noatime if
 * *readonly).  Returns 0, or a negative errno with what failed in why.
 */
int mount_clone_covered(const struct mount_info *mi, int *hold, int *walk, bool *readonly,
			struct strbuf *why);

#endif
