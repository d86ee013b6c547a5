/*
 * dircache: directory nodes and the descriptor LRU; see dircache.h.
 */
#include "tree/dircache.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/strbuf.h"

#define DIR_OPEN_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME)

#ifndef AT_HANDLE_FID
/* linux/fcntl.h since 6.5: a handle to identify the inode, not to open it. */
#define AT_HANDLE_FID AT_REMOVEDIR
#endif

static struct dir_node *node_alloc(const char *name, size_t namelen);

void dircache_init(struct dircache *dc, unsigned budget)
{
	pthread_mutex_init(&dc->lock, NULL);
	dc->lru = node_alloc("", 0);
	dc->lru->lru_next = dc->lru->lru_prev = dc->lru;
	dc->nr_open = 0;
	dc->peak_open = 0;
	dc->budget = budget ? budget : 1;
}

void dircache_release(struct dircache *dc)
{
	free(dc->lru);
	dc->lru = NULL;
	pthread_mutex_destroy(&dc->lock);
}

static struct dir_node *node_alloc(const char *name, size_t namelen)
{
	struct dir_node *node = xmalloc(sizeof(*node) + namelen + 1);

	memset(node, 0, sizeof(*node));
	atomic_init(&node->refs, 1);
	node->fd = -1;
	node->namelen = (uint16_t)namelen;
	memcpy(node->name, name, namelen);
	node->name[namelen] = '\0';
	return node;
}

struct dir_node *dir_node_new_root(int fd, uint64_t dev, uint64_t ino)
{
	struct dir_node *node = node_alloc("", 0);

	node->fd = fd;
	node->dev = dev;
	node->ino = ino;
	return node;
}

struct dir_node *dir_node_new(struct dir_node *parent, const char *name,
			      size_t namelen, uint64_t dev, uint64_t ino)
{
	struct dir_node *node = node_alloc(name, namelen);

	dir_node_get(parent);
	node->parent = parent;
	node->depth = parent->depth + 1;
	node->dev = dev;
	node->ino = ino;
	return node;
}

void dir_node_get(struct dir_node *node)
{
	atomic_fetch_add_explicit(&node->refs, 1, memory_order_relaxed);
}

static void lru_unlink(struct dir_node *node)
{
	node->lru_prev->lru_next = node->lru_next;
	node->lru_next->lru_prev = node->lru_prev;
	node->lru_next = node->lru_prev = NULL;
}

static void lru_push_front(struct dircache *dc, struct dir_node *node)
{
	node->lru_next = dc->lru->lru_next;
	node->lru_prev = dc->lru;
	dc->lru->lru_next->lru_prev = node;
	dc->lru->lru_next = node;
}

void dir_node_put(struct dircache *dc, struct dir_node *node)
{
	/* Iterative, not recursive: a chain can be 20 000 directories long. */
	while (node) {
		if (atomic_fetch_sub_explicit(&node->refs, 1, memory_order_acq_rel) != 1)
			return;
		struct dir_node *parent = node->parent;

		if (node->fd >= 0) {
			if (parent) {
				pthread_mutex_lock(&dc->lock);
				lru_unlink(node);
				dc->nr_open--;
				pthread_mutex_unlock(&dc->lock);
			}
			close(node->fd);
		}
		free(node);
		node = parent;
	}
}

/* Close least recently used, unpinned descriptors beyond the budget. */
static void evict_locked(struct dircache *dc)
{
	struct dir_node *node = dc->lru->lru_prev;

	while (dc->nr_open > dc->budget && node != dc->lru) {
		struct dir_node *prev = node->lru_prev;

		if (node->pins == 0) {
			lru_unlink(node);
			close(node->fd);
			node->fd = -1;
			dc->nr_open--;
		}
		node = prev;
	}
}

/* FNV-1a (64-bit offset basis and prime) over n bytes; never 0 (= none). */
static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t hash = 14695981039346656037ULL;

	for (size_t i = 0; i < n; i++)
		hash = (hash ^ p[i]) * 1099511628211ULL;
	return hash ? hash : 1;
}

static uint64_t handle_hash(int dirfd, const char *name)
{
	union {
		struct file_handle fh;
		unsigned char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h = { .fh.handle_bytes = MAX_HANDLE_SZ };
	int mnt_id;

	if (name_to_handle_at(dirfd, name, &h.fh, &mnt_id,
			      AT_HANDLE_FID | (*name ? 0 : AT_EMPTY_PATH)) < 0)
		return 0;
	size_t start = offsetof(struct file_handle, handle_type);	/* the type too */

	return fnv1a(h.buf + start,
		     offsetof(struct file_handle, f_handle) + h.fh.handle_bytes - start);
}

static uint64_t attrs_hash(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH)) < 0)
		return 0;
	uint64_t v[] = {
		st.st_mode, st.st_uid, st.st_gid,
		(uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec,
		(uint64_t)st.st_ctim.tv_sec, (uint64_t)st.st_ctim.tv_nsec,
	};

	return fnv1a((const unsigned char *)v, sizeof(v));
}

uint64_t dir_fid(int dirfd, const char *name, enum dir_id how)
{
	return how == DIR_ID_HANDLE ? handle_hash(dirfd, name) : attrs_hash(dirfd, name);
}

/*
 * Is the directory open at fd (st) the one node recorded?  Its number, or,
 * where node has a handle hash and the number changed, its handle.
 */
static bool same_dir(int fd, const struct stat *st, const struct dir_node *node)
{
	if ((uint64_t)st->st_dev != node->dev)
		return false;
	if ((uint64_t)st->st_ino == node->ino)
		return true;
	return node->fid && dir_fid(fd, "", node->fid_how) == node->fid;
}

/* Returns the fd of node's name in parent_fd, its number in *ino. */
static int open_child(int parent_fd, const struct dir_node *node, uint64_t *ino)
{
	int fd = openat(parent_fd, node->name, DIR_OPEN_FLAGS);
	struct stat st;

	/*
	 * O_NOATIME needs ownership or CAP_FOWNER: without it, read the
	 * directory anyway (its atime then follows the mount's rules).  Asked
	 * again for every directory, since the next one may be the user's own.
	 */
	if (fd < 0 && errno == EPERM)
		fd = openat(parent_fd, node->name, DIR_OPEN_FLAGS & ~O_NOATIME);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (!same_dir(fd, &st, node)) {
		close(fd);
		return -ESTALE;
	}
	*ino = (uint64_t)st.st_ino;
	return fd;
}

int dircache_pin(struct dircache *dc, struct dir_node *node, int *fdp)
{
	struct dir_node *anc;
	struct dir_node **chain = NULL;
	size_t nchain = 0;
	int fd, err = 0;

	pthread_mutex_lock(&dc->lock);
	if (node->fd >= 0) {
		node->pins++;
		if (node->parent) {
			lru_unlink(node);
			lru_push_front(dc, node);
		}
		*fdp = node->fd;
		pthread_mutex_unlock(&dc->lock);
		return 0;
	}
	/* Find the nearest open ancestor; the root is always open. */
	for (anc = node->parent; anc->fd < 0; anc = anc->parent)
		nchain++;
	anc->pins++;
	pthread_mutex_unlock(&dc->lock);

	/* chain[] = the closed ancestors from just below anc down to node's parent. */
	if (nchain) {
		chain = xmalloc(nchain * sizeof(*chain));
		size_t i = nchain;
		for (struct dir_node *n = node->parent; n != anc; n = n->parent)
			chain[--i] = n;
	}
	fd = anc->fd;
	for (size_t i = 0; i <= nchain; i++) {
		struct dir_node *next = i < nchain ? chain[i] : node;
		uint64_t ino = 0;
		int nfd = open_child(fd, next, &ino);

		if (fd != anc->fd)
			close(fd);
		if (nfd < 0) {
			err = nfd;
			fd = -1;
			break;
		}
		/* The same directory under a new number (see same_dir()). */
		if (ino != next->ino)
			next->ino = ino;
		fd = nfd;
	}
	free(chain);

	pthread_mutex_lock(&dc->lock);
	anc->pins--;
	if (err) {
		pthread_mutex_unlock(&dc->lock);
		return err;
	}
	if (node->fd >= 0) {
		/* Another thread opened it meanwhile: use theirs. */
		close(fd);
	} else {
		node->fd = fd;
		dc->nr_open++;
		if (dc->nr_open > dc->peak_open)
			dc->peak_open = dc->nr_open;
		lru_push_front(dc, node);
	}
	node->pins++;
	*fdp = node->fd;
	evict_locked(dc);
	pthread_mutex_unlock(&dc->lock);
	return 0;
}

void dircache_open_ahead(struct dircache *dc, struct dir_node *node)
{
	bool room;
	int fd;

	pthread_mutex_lock(&dc->lock);
	room = node->fd < 0 && node->parent && node->parent->fd >= 0 &&
	       dc->nr_open < dc->budget / 2;
	pthread_mutex_unlock(&dc->lock);
	if (!room || dircache_pin(dc, node, &fd) < 0)
		return;
	pthread_mutex_lock(&dc->lock);
	dc->opened_ahead++;
	pthread_mutex_unlock(&dc->lock);
	dircache_unpin(dc, node);
}

void dircache_unpin(struct dircache *dc, struct dir_node *node)
{
	pthread_mutex_lock(&dc->lock);
	node->pins--;
	if (node->parent && node->fd >= 0 && node->pins == 0)
		evict_locked(dc);
	pthread_mutex_unlock(&dc->lock);
}
