/*
 * Unit tests for walk.c: walk_tree() over a small tree made in a temporary
 * directory under /tmp, with a visitor that records what it is handed.
 * The context is set up the way phase 1 and phase 3 do it: walk_fd and
 * mnt_fd on the directory, root_stx and the mount id from stx_get(), a
 * directory cache with a descriptor budget, changed_since_ns a second
 * before now.
 *
 * Checked, with one thread and with two: every name is handed to the
 * visitor exactly once and "." and ".." never; each directory is begun
 * and ended once, on one thread, with its entries in between and nothing
 * else; a symlink to a directory is not followed; a second name of a
 * multiply-linked file is not seen_before, while a single-link file or a
 * directory reached again by another name (moved by the visitor into a
 * directory not yet read) is.  Deterministic: a directory the visitor
 * moves things into is not read until they have been moved.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "scan/context.h"
#include "lib/inoset.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

#define MAX_EVENTS 256
#define MAX_THREADS 2
/* Depth of the /deep chain: more than the smallest budget, to reopen. */
#define DEEP 8

enum ev_type { EV_BEGIN, EV_ENTRY, EV_END };

struct event {
	enum ev_type type;
	char path[128];			/* the directory's, or the entry's */
	char dir[128];			/* the entry's directory */
	mode_t mode;
	uint64_t ino;
	bool seen_before;
	/* EV_END: what the walk counted in the directory */
	bool seen_dot, seen_dotdot, dot_is_self;
	unsigned long long nr_entries;
};

struct thread_log {
	struct event ev[MAX_EVENTS];
	size_t n;
	bool overflow;
};

/* The visitor's state: one log per thread; arg of walk_tree(). */
struct recorder {
	struct thread_log log[MAX_THREADS];
	/* The moves: done by root's entries, awaited by /z's dir_begin. */
	bool do_moves;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned nr_moved;
	int move_err;
};

static struct recorder rec;

static void *rec_thread_init(struct scrub_ctx *ctx, unsigned index)
{
	(void)ctx;
	return index < MAX_THREADS ? &rec.log[index] : NULL;
}

static struct event *add_event(struct walk_thread *t, enum ev_type type)
{
	struct thread_log *log = t->vstate;

	if (!log || log->n == MAX_EVENTS) {
		if (log)
			log->overflow = true;
		return NULL;
	}
	memset(&log->ev[log->n], 0, sizeof(log->ev[0]));
	log->ev[log->n].type = type;
	return &log->ev[log->n++];
}

static void dir_path(struct walk_thread *t, const struct walk_dir *d, const char *name,
		     char *out, size_t size)
{
	struct strbuf sb = STRBUF_INIT;

	report_path(t->ctx, &sb, d->node, name);	/* mntpoint NULL: "/a/b" */
	snprintf(out, size, "%s", sb.len ? sb.buf : "/");
	strbuf_release(&sb);
}

static void rec_dir_begin(struct walk_thread *t, struct walk_dir *d)
{
	struct event *ev = add_event(t, EV_BEGIN);

	if (ev)
		dir_path(t, d, NULL, ev->path, sizeof(ev->path));
	if (!rec.do_moves || !ev || strcmp(ev->path, "/z"))
		return;
	/* Not read before root's entries have moved s0 and m into it. */
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&rec.lock);
	while (rec.nr_moved < 2 &&
	       pthread_cond_timedwait(&rec.cond, &rec.lock, &until) == 0)
		;
	pthread_mutex_unlock(&rec.lock);
}

/* Root's entries s0 and m: moved into /z once the walk has reached them. */
static void maybe_move(const struct walk_dir *d, const struct walk_entry *e)
{
	const char *to = NULL;

	if (d->node->parent)
		return;
	if (!strcmp(e->name, "s0"))
		to = "z/s0moved";
	else if (!strcmp(e->name, "m"))
		to = "z/m";
	if (!to)
		return;
	int ret = renameat(d->fd, e->name, d->fd, to);

	pthread_mutex_lock(&rec.lock);
	if (ret < 0)
		rec.move_err = errno;
	rec.nr_moved++;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
}

static void rec_entry(struct walk_thread *t, struct walk_dir *d, const struct walk_entry *e)
{
	struct event *ev = add_event(t, EV_ENTRY);

	if (ev) {
		dir_path(t, d, NULL, ev->dir, sizeof(ev->dir));
		dir_path(t, d, e->name, ev->path, sizeof(ev->path));
		ev->mode = e->stat_err ? 0 : e->stx.stx_mode;
		ev->ino = e->stx.stx_ino;
		ev->seen_before = e->seen_before;
	}
	if (rec.do_moves)
		maybe_move(d, e);
}

static void rec_dir_end(struct walk_thread *t, struct walk_dir *d)
{
	struct event *ev = add_event(t, EV_END);

	if (!ev)
		return;
	dir_path(t, d, NULL, ev->path, sizeof(ev->path));
	ev->seen_dot = d->seen_dot;
	ev->seen_dotdot = d->seen_dotdot;
	ev->dot_is_self = d->dot_ino == d->before.stx_ino;
	ev->nr_entries = d->nr_entries;
}

static const struct walk_visitor recorder_visitor = {
	.name = "test recorder",
	.thread_init = rec_thread_init,
	.dir_begin = rec_dir_begin,
	.entry = rec_entry,
	.dir_end = rec_dir_end,
	.keep_reached = true,
};

/* The tree, its paths relative to the top, directories ending in '/'. */
static const char *const tree[] = {
	"/a/", "/a/f1", "/a/b/", "/a/b/f2", "/c/", "/f0", "/s0", "/z/", "/m/", "/m/inner",
	"/deep/", "/deep/d1/", "/deep/d1/d2/", "/deep/d1/d2/d3/", "/deep/d1/d2/d3/d4/",
	"/deep/d1/d2/d3/d4/d5/", "/deep/d1/d2/d3/d4/d5/d6/", "/deep/d1/d2/d3/d4/d5/d6/d7/",
	"/deep/d1/d2/d3/d4/d5/d6/d7/d8/", "/deep/d1/d2/d3/d4/d5/d6/d7/d8/leaf",
};
#define NR_TREE (sizeof(tree) / sizeof(tree[0]))
/* And: /a/b/hl (a second name of /f0), /ln -> a, /lnf -> f0. */
#define NR_ENTRIES (NR_TREE + 3)
#define NR_DIRS 15			/* the top, and those ending in '/' */

struct fixture {
	char top[64];
	/*
	 * "." has the directory's st_ino as its d_ino: not promised on
	 * overlayfs or FUSE (QUIRK_DINO_UNRELATED), where /tmp may be.
	 */
	bool dot_ino_reliable;
	struct scrub_ctx ctx;
	struct scrub_stats stats;
	unsigned long long items;
};

static int make_tree(const char *top)
{
	char p[256], q[256];

	for (size_t i = 0; i < NR_TREE; i++) {
		size_t len = strlen(tree[i]);

		snprintf(p, sizeof(p), "%s%s", top, tree[i]);
		if (tree[i][len - 1] == '/') {
			if (mkdir(p, 0755) < 0)
				return -1;
		} else {
			int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);

			if (fd < 0 || write(fd, "x", 1) != 1)
				return -1;
			close(fd);
		}
	}
	snprintf(p, sizeof(p), "%s/f0", top);
	snprintf(q, sizeof(q), "%s/a/b/hl", top);
	if (link(p, q) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/ln", top);
	if (symlink("a", p) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/lnf", top);
	return symlink("f0", p);
}

static int remove_tree(const char *top)
{
	char cmd[128];

	/* The test's own mkdtemp directory, and nothing else. */
	if (strncmp(top, "/tmp/fscrub-walk-", 17))
		return -1;
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->top, sizeof(f->top), "/tmp/fscrub-walk-XXXXXX");
	if (!mkdtemp(f->top) || make_tree(f->top) < 0)
		return -1;
	struct statfs sfs;

	f->dot_ino_reliable = statfs(f->top, &sfs) == 0 && sfs.f_type != OVERLAYFS_SUPER_MAGIC &&
			      sfs.f_type != FUSE_SUPER_MAGIC;
	scrub_ctx_init(&f->ctx);
	memset(&rec, 0, sizeof(rec));
	pthread_mutex_init(&rec.lock, NULL);
	pthread_cond_init(&rec.cond, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	inoset_free(f->ctx.reached);
	f->ctx.reached = NULL;
	inoset_free(f->ctx.dirs_unopened);	/* walk_tree()'s, freed by phases_release() */
	f->ctx.dirs_unopened = NULL;
	if (f->ctx.report.text_out && f->ctx.report.text_out != stdout)
		fclose(f->ctx.report.text_out);
	scrub_ctx_release(&f->ctx);
	pthread_mutex_destroy(&rec.lock);
	pthread_cond_destroy(&rec.cond);
	remove_tree(f->top);
	free(f);
	return 0;
}

/* Phase 1's and phase 3's part of the context, for a walk of f->top. */
static void walk(struct fixture *f, unsigned threads, unsigned budget)
{
	struct scrub_ctx *ctx = &f->ctx;
	struct timespec now;

	ctx->opt.nr_threads = threads;
	ctx->report.text_out = fopen("/dev/null", "we");
	assert_non_null(ctx->report.text_out);
	ctx->mnt_fd = open(f->top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(ctx->mnt_fd >= 0);
	ctx->walk_fd = ctx->mnt_fd;
	assert_int_equal(stx_get(ctx->walk_fd, NULL, &ctx->root_stx), 0);
	if (ctx->root_stx.stx_mask & STATX_MNT_ID) {
		ctx->have_mnt_id = true;
		ctx->walk_mnt_id = ctx->root_stx.stx_mnt_id;
	}
	dircache_init(&ctx->dcache, budget);
	clock_gettime(CLOCK_REALTIME, &now);
	ctx->changed_since_ns = ((uint64_t)now.tv_sec - 1) * 1000000000ULL +
				(uint64_t)now.tv_nsec;
	assert_int_equal(walk_tree(ctx, &recorder_visitor, NULL, &f->stats, &f->items), 0);
	for (unsigned i = 0; i < MAX_THREADS; i++)
		assert_false(rec.log[i].overflow);
}

/* The entries of the walk with this path. */
static size_t count_entries(const char *path, struct event **last)
{
	size_t n = 0;

	for (unsigned i = 0; i < MAX_THREADS; i++)
		for (size_t j = 0; j < rec.log[i].n; j++) {
			struct event *ev = &rec.log[i].ev[j];

			if (ev->type == EV_ENTRY && !strcmp(ev->path, path)) {
				n++;
				if (last)
					*last = ev;
			}
		}
	return n;
}

static size_t count_begun(const char *path)
{
	size_t n = 0;

	for (unsigned i = 0; i < MAX_THREADS; i++)
		for (size_t j = 0; j < rec.log[i].n; j++)
			n += rec.log[i].ev[j].type == EV_BEGIN &&
			     !strcmp(rec.log[i].ev[j].path, path);
	return n;
}

/*
 * Each thread's log is a sequence of BEGIN D, entries of D, END D: no
 * entry outside its directory's begin and end, no directory nested in
 * another's visit.  Returns the number of directories.
 */
static size_t check_nesting(const struct fixture *f)
{
	size_t dirs = 0;

	for (unsigned i = 0; i < MAX_THREADS; i++) {
		const struct event *open = NULL;
		unsigned long long entries = 0;

		for (size_t j = 0; j < rec.log[i].n; j++) {
			const struct event *ev = &rec.log[i].ev[j];

			switch (ev->type) {
			case EV_BEGIN:
				assert_null(open);
				open = ev;
				entries = 0;
				dirs++;
				break;
			case EV_ENTRY:
				assert_non_null(open);
				assert_string_equal(ev->dir, open->path);
				/* "." and ".." are never entries. */
				assert_null(strstr(ev->path, "/./"));
				assert_string_not_equal(strrchr(ev->path, '/'), "/.");
				assert_string_not_equal(strrchr(ev->path, '/'), "/..");
				entries++;
				break;
			case EV_END:
				assert_non_null(open);
				assert_string_equal(ev->path, open->path);
				assert_true(ev->seen_dot && ev->seen_dotdot);
				assert_true(ev->dot_is_self || !f->dot_ino_reliable);
				assert_int_equal(ev->nr_entries, entries);
				open = NULL;
				break;
			}
		}
		assert_null(open);
	}
	return dirs;
}

static void check_plain_walk(struct fixture *f)
{
	struct event *ev = NULL;
	char path[128];

	assert_int_equal(check_nesting(f), NR_DIRS);
	for (size_t i = 0; i < NR_TREE; i++) {
		size_t len = strlen(tree[i]);
		bool is_dir = tree[i][len - 1] == '/';

		snprintf(path, sizeof(path), "%.*s", (int)(is_dir ? len - 1 : len), tree[i]);
		assert_int_equal(count_entries(path, &ev), 1);
		assert_int_equal(S_ISDIR(ev->mode), is_dir);
		assert_false(ev->seen_before);
		assert_int_equal(count_begun(path), is_dir);
	}
	assert_int_equal(count_begun("/"), 1);
	/* Two names of one file: neither is "seen before". */
	struct event *f0 = NULL, *hl = NULL;

	assert_int_equal(count_entries("/f0", &f0), 1);
	assert_int_equal(count_entries("/a/b/hl", &hl), 1);
	assert_true(f0->ino == hl->ino);
	assert_false(f0->seen_before || hl->seen_before);
	/* Symlinks are entries, never followed. */
	assert_int_equal(count_entries("/ln", &ev), 1);
	assert_true(S_ISLNK(ev->mode));
	assert_int_equal(count_begun("/ln"), 0);
	assert_int_equal(count_entries("/ln/f1", NULL), 0);
	assert_int_equal(count_entries("/lnf", &ev), 1);
	assert_true(S_ISLNK(ev->mode));

	assert_int_equal(f->stats.dirs, NR_DIRS);
	assert_int_equal(f->items, NR_DIRS);
	assert_int_equal(f->stats.entries, NR_ENTRIES);
	assert_int_equal(atomic_load(&f->ctx.report.nr_errors), 0);
	assert_int_equal(atomic_load(&f->ctx.report.nr_warnings), 0);
	assert_int_equal(atomic_load(&f->ctx.report.nr_operational), 0);
	/* keep_reached: every inode reached is in ctx->reached. */
	assert_non_null(f->ctx.reached);
	assert_true(inoset_test(f->ctx.reached, stx_devno(&f->ctx.root_stx), f0->ino));
}

/* One thread; a budget of two descriptors, so /deep's chain is reopened. */
static void test_one_thread(void **state)
{
	struct fixture *f = *state;

	walk(f, 1, 2);
	check_plain_walk(f);
	assert_int_equal(rec.log[1].n, 0);
}

static void test_two_threads(void **state)
{
	struct fixture *f = *state;

	walk(f, 2, 64);
	check_plain_walk(f);
}

/*
 * s0 (one link) and the directory m are moved into /z after the walk
 * reached them in the top directory: in /z they are seen_before.  m is
 * not entered under either name (its old name is gone, its new one was
 * reached before), each an info, never an error.
 */
static void check_moved_walk(struct fixture *f)
{
	struct event *ev = NULL;

	assert_int_equal(rec.move_err, 0);
	assert_int_equal(rec.nr_moved, 2);
	check_nesting(f);
	assert_int_equal(count_entries("/s0", &ev), 1);
	assert_false(ev->seen_before);
	assert_int_equal(count_entries("/z/s0moved", &ev), 1);
	assert_true(ev->seen_before);
	assert_int_equal(count_entries("/m", &ev), 1);
	assert_false(ev->seen_before);
	assert_int_equal(count_entries("/z/m", &ev), 1);
	assert_true(S_ISDIR(ev->mode));
	assert_true(ev->seen_before);
	assert_int_equal(count_begun("/m"), 0);
	assert_int_equal(count_begun("/z/m"), 0);
	assert_int_equal(count_entries("/z/m/inner", NULL), 0);
	assert_int_equal(count_entries("/a/b/hl", &ev), 1);
	assert_false(ev->seen_before);
	assert_int_equal(atomic_load(&f->ctx.report.nr_errors), 0);
	assert_int_equal(atomic_load(&f->ctx.report.nr_infos), 2);
	assert_true(atomic_load(&f->ctx.names_hidden));
}

static void test_moved_one_thread(void **state)
{
	struct fixture *f = *state;

	rec.do_moves = true;
	walk(f, 1, 64);
	check_moved_walk(f);
}

static void test_moved_two_threads(void **state)
{
	struct fixture *f = *state;

	rec.do_moves = true;
	walk(f, 2, 64);
	check_moved_walk(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_moved_one_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_moved_two_threads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
