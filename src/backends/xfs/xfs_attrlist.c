/*
 * xfs_attrlist: the attribute names of an inode that listxattr() refuses.
 *
 * The VFS lists at most 64 KiB of names (E2BIG beyond), but an XFS
 * attribute fork is a btree that holds any number of them.  xfs_scrub and
 * xfsdump list such inodes with XFS_IOC_ATTRLIST_BY_HANDLE, which returns
 * up to 64 KiB of one namespace's names per call and a cursor to go on
 * from: so does this, for the user, root (trusted.*) and secure
 * (security.*) namespaces in turn.  The handle comes from
 * XFS_IOC_FD_TO_HANDLE on the open inode, or XFS_IOC_PATH_TO_HANDLE on
 * /proc/self/fd/DIRFD/NAME (the kernel does not follow the last component:
 * a symlink is itself).  Both need CAP_SYS_ADMIN.
 *
 * The names come back without their namespace prefix; the POSIX ACLs are
 * root-namespace attributes named SGI_ACL_FILE and SGI_ACL_DEFAULT, which
 * listxattr() calls system.posix_acl_access and system.posix_acl_default:
 * the names given to the core are listxattr()'s, so that it reads every
 * value back by the name the VFS knows.
 */
#include "backends/xfs/xfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "backends/backend.h"
#include "scan/context.h"
#include "lib/strbuf.h"

/*
 * The kernel's limit per call (XFS_XATTR_LIST_MAX, 64 KiB): the largest
 * buffer means the fewest calls, about 2400 names of 27 bytes each.
 */
#define ATTRLIST_BUF XFS_XATTR_LIST_MAX
/* Calls per namespace, a bound on a cursor that never ends: 64 Mi names at least. */
#define MAX_CALLS (1u << 20)

static const struct {
	unsigned flags;
	const char *prefix;
} namespaces[] = {
	{ 0, "user." },
	{ XFS_IOC_ATTR_ROOT, "trusted." },
	{ XFS_IOC_ATTR_SECURE, "security." },
};

/* The inode's handle: e's, or d's own when e is NULL.  0 or a negative errno. */
static int get_handle(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const struct backend_entry *e, xfs_handle_t *h, __u32 *hlen)
{
	struct xfs_fsop_handlereq req = { .ohandle = h, .ohandlen = hlen };
	struct strbuf path = STRBUF_INIT;
	int ret;

	*hlen = sizeof(*h);
	if (!e || e->fd >= 0) {
		req.fd = (__u32)(e ? e->fd : d->fd);
		return ioctl(ctx->mnt_fd, XFS_IOC_FD_TO_HANDLE, &req) < 0 ? -errno : 0;
	}
	strbuf_addf(&path, "/proc/self/fd/%d/%s", d->fd, e->name);
	req.path = path.buf;
	ret = ioctl(ctx->mnt_fd, XFS_IOC_PATH_TO_HANDLE, &req) < 0 ? -errno : 0;
	strbuf_release(&path);
	return ret;
}

/* listxattr()'s name for a root-namespace attribute (xfs_xattr_put_listent). */
static void add_name(struct strbuf *names, const char *prefix, const char *name)
{
	if (!strcmp(prefix, "trusted.") && !strcmp(name, "SGI_ACL_FILE"))
		strbuf_addstr(names, "system.posix_acl_access");
	else if (!strcmp(prefix, "trusted.") && !strcmp(name, "SGI_ACL_DEFAULT"))
		strbuf_addstr(names, "system.posix_acl_default");
	else
		strbuf_addf(names, "%s%s", prefix, name);
	strbuf_addch(names, '\0');
}

/* One namespace's names, call by call from a zero cursor. */
static int list_namespace(struct scrub_ctx *ctx, xfs_handle_t *h, __u32 hlen, unsigned ns,
			  char *buf, struct strbuf *names)
{
	struct xfs_fsop_attrlist_handlereq req = {
		.hreq = { .ihandle = h, .ihandlen = hlen },
		.flags = namespaces[ns].flags,
		.buflen = ATTRLIST_BUF,
		.buffer = buf,
	};
	const struct xfs_attrlist *al = (const struct xfs_attrlist *)buf;

	for (unsigned calls = 0; calls < MAX_CALLS; calls++) {
		if (ioctl(ctx->mnt_fd, XFS_IOC_ATTRLIST_BY_HANDLE, &req) < 0)
			return -errno;
		for (int i = 0; i < al->al_count; i++) {
			const struct xfs_attrlist_ent *ent;
			int off = al->al_offset[i];

			if (off < 0 || (size_t)off + sizeof(*ent) > ATTRLIST_BUF ||
			    !memchr(buf + off + offsetof(struct xfs_attrlist_ent, a_name), '\0',
				    ATTRLIST_BUF - (size_t)off - offsetof(struct xfs_attrlist_ent, a_name)))
				return -EUCLEAN;	/* the kernel's answer does not parse */
			ent = (const struct xfs_attrlist_ent *)(buf + off);
			add_name(names, namespaces[ns].prefix, ent->a_name);
		}
		if (!al->al_more)
			return 0;
	}
	return -ELOOP;
}

int xfs_list_xattrs(struct scrub_ctx *ctx, const struct backend_dir *d,
		    const struct backend_entry *e, struct strbuf *names)
{
	xfs_handle_t h;
	__u32 hlen;
	char *buf;
	int ret = get_handle(ctx, d, e, &h, &hlen);

	if (ret == -ENOTTY || ret == -EINVAL)
		return -EOPNOTSUPP;
	if (ret < 0)
		return ret;
	/* 8-byte aligned: the kernel's xfs_attrlist_ent records are. */
	buf = xmalloc(ATTRLIST_BUF);
	for (unsigned ns = 0; ns < sizeof(namespaces) / sizeof(namespaces[0]) && !ret; ns++)
		ret = list_namespace(ctx, &h, hlen, ns, buf, names);
	free(buf);
	return ret;
}
