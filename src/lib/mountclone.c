/*
 * mountclone: a covered mount, cloned from a private mount namespace; see
 * mountclone.h.
 */
#include "lib/mountclone.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmount.h>

/*
 * Mounts stacked on (or above) the wanted one that are detached before
 * giving up: more than a handful is not an accident.
 */
#define MAX_COVERS 16

/* What the child sends back with the descriptors. */
struct clone_reply {
	int err;		/* 0, or a positive errno */
	bool readonly;		/* the walk clone was made read-only, noatime */
	char what[96];		/* the step that failed */
};

static int fail(struct clone_reply *r, int err, const char *what)
{
	r->err = err;
	snprintf(r->what, sizeof(r->what), "%s", what);
	return -err;
}

/*
 * The mount that target shows, or where target does not exist (a mount
 * covers a directory above it), the mount its longest existing prefix
 * shows: the one to detach next.
 */
static int shown_on_path(const char *target)
{
	char *p = xstrdup(target);
	int id = mount_shown_id(p);

	while ((id == -ENOENT || id == -ENOTDIR) && strcmp(p, "/")) {
		char *slash = strrchr(p, '/');

		if (!slash)
			break;
		slash[slash == p] = 0;		/* "/a" -> "/" */
		id = mount_shown_id(p);
	}
	free(p);
	return id;
}

/* One step: the wanted mount's path shows it (1), or one cover less (0). */
static int uncover_step(const struct mount_info *mi, int *fd, struct clone_reply *r)
{
	int e = 0, want, shown;
	struct libmnt_table *tb = mount_table_load(NULL, &e);
	const char *cover;

	if (!tb)
		return fail(r, e, "reading the private mount table");
	want = mount_find_same(tb, mi);
	shown = shown_on_path(mi->target);
	if (want < 0 || shown < 0) {
		mount_table_free(tb);
		return fail(r, want < 0 ? ENOENT : -shown, want < 0 ? "finding the mount again" :
			    "looking at its mount point");
	}
	if (shown == want) {
		mount_table_free(tb);
		*fd = open(mi->target, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (*fd < 0)
			return fail(r, errno, "opening its mount point");
		if (mount_shown_id(mi->target) != want) {	/* not ours after all */
			close(*fd);
			return fail(r, EBUSY, "its mount point changed");
		}
		return 1;
	}
	cover = mount_target_of(tb, shown);
	if (!cover || umount2(cover, MNT_DETACH) < 0) {
		mount_table_free(tb);
		return fail(r, cover ? errno : ENOENT, "detaching the covering mount");
	}
	mount_table_free(tb);
	return 0;
}

static int child_clone(const struct mount_info *mi, int fds[2], struct clone_reply *r)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOATIME,
		.attr_clr = MOUNT_ATTR__ATIME,
	};
	int fd = -1, ret = 0;

	if (unshare(CLONE_NEWNS) < 0)
		return fail(r, errno, "making a private mount namespace");
	/* Private before anything is detached: nothing may propagate back. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(r, errno, "making the private mount namespace private");
	for (int i = 0; i <= MAX_COVERS && !ret; i++)
		if ((ret = uncover_step(mi, &fd, r)) < 0)
			return ret;
	if (!ret)
		return fail(r, ELOOP, "detaching the covering mounts");
	for (int i = 0; i < 2; i++) {
		fds[i] = (int)syscall(SYS_open_tree, fd, "",
				      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (fds[i] < 0)
			return fail(r, errno, "cloning the mount");
	}
	r->readonly = syscall(SYS_mount_setattr, fds[1], "", AT_EMPTY_PATH, &attr,
			      sizeof(attr)) == 0;
	close(fd);
	return 0;
}

static void send_reply(int sock, const struct clone_reply *r, const int fds[2])
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)r, .iov_len = sizeof(*r) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (!r->err) {
		struct cmsghdr *c;

		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(c), fds, 2 * sizeof(int));
	}
	(void)!sendmsg(sock, &msg, MSG_NOSIGNAL);
}

static int recv_reply(int sock, struct clone_reply *r, int fds[2])
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = r, .iov_len = sizeof(*r) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;

	if (n != (ssize_t)sizeof(*r))
		return fail(r, n < 0 ? errno : EPROTO, "hearing from the helper process");
	if (r->err)
		return -r->err;
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
		return fail(r, EPROTO, "receiving the clones");
	memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
	return 0;
}

int mount_clone_covered(const struct mount_info *mi, int *hold, int *walk, bool *readonly,
			struct strbuf *why)
{
	struct clone_reply r = { 0 };
	int sv[2], fds[2] = { -1, -1 }, ret;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		strbuf_addstr(why, "creating a socket");
		return -errno;
	}
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		child_clone(mi, fds, &r);
		send_reply(sv[1], &r, fds);
		_exit(0);
	}
	close(sv[1]);
	if (pid < 0) {
		ret = -errno;
		close(sv[0]);
		strbuf_addstr(why, "starting the helper process");
		return ret;
	}
	ret = recv_reply(sv[0], &r, fds);
	close(sv[0]);
	waitpid(pid, NULL, 0);
	if (ret < 0) {
		strbuf_addstr(why, r.what);
		return ret;
	}
	*hold = fds[0];
	*walk = fds[1];
	*readonly = r.readonly;
	return 0;
}
