/*
 * checkpoint: resumable runs; see checkpoint.h.
 *
 * The cursor is kept in the store as one JSON object (state.h keeps it
 * opaque):
 *
 *   {"bytes": B, "total": T, "dev_size": D, "watermark": W,
 *    "extra": [[off, len], ...], "bad": [[off, len, errno], ...],
 *    "files": [[dev, ino], ...], "findings": [{...}, ...]}
 *
 * B is the data verified, T the data in use when it was saved (B/T is the
 * percentage said on resume), W UINT64_MAX once the device scan is done.
 * A file's dev is 0 for the mount root's own st_dev, which may be another
 * number after a reboot (a loop device, a disk found in another order).
 */
#include "data/checkpoint.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "scan/context.h"
#include "lib/ioengine.h"
#include "data/ledger_store.h"
#include "data/mediamap.h"
#include "report/report.h"
#include "store/state.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

struct cp_range {
	uint64_t off, len;
};

struct cp_finding {
	int severity;
	bool has_range;
	bool unconfirmed;	/* finding.unconfirmed: changed while being checked */
	char *check, *path, *message;
	uint64_t ino, offset, length;
};

struct checkpoint {
	pthread_mutex_t lock;		/* everything below */
	pthread_mutex_t save_lock;	/* one save at a time */
	atomic_llong next_due_ms;	/* CLOCK_MONOTONIC */
	long long interval_ms;
	struct state_fs fs;		/* strings owned */
	char *options;
	int phase;
	/* --resume: what was asked and what came of it */
	bool requested, resumed;
	bool data_said;			/* checkpoint_say_data() spoke */
	char *why;			/* not resumed: why */
	int64_t from_run;
	int from_phase;
	double from_percent;
	unsigned long long bytes_before;
	/* the device cursor: all below watermark, and extra, verified */
	uint64_t watermark;
	struct cp_range *extra;
	size_t nr_extra;
	struct bad_range *bad;		/* saved ones first (nr_old_bad), then this run's */
	size_t nr_bad, nr_old_bad;
	unsigned long long bytes;	/* data verified, before and in this run */
	/* this run's read list (checkpoint_dev_plan() to _end()) */
	const struct io_range *reads;
	size_t nr_reads, next;
	bool *done;
	bool partial;			/* the list is not the whole scan: no watermark */
	uint64_t bound;			/* ... or one up to here (checkpoint_dev_bound()) */
	unsigned long long unbound_bytes;	/* read by a partial list before its bound */
	/* the per-file reader */
	struct ino_key *old_files;	/* sorted */
	size_t nr_old_files;
	struct ino_key *new_files;
	size_t nr_new_files, alloc_new_files;
	struct cp_finding *findings;	/* saved ones first (nr_old_findings), then noted */
	size_t nr_findings, alloc_findings, nr_old_findings;
	uint64_t root_dev;
};

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/*
 * The options a checkpoint's work depends on: what the data scan reads and
 * judges, as "name=value" in this order (values may hold spaces: a path).
 */
static const char *const key_names[] = {
	"x", "n", "portion", "rescan", "since", "record", "ledger", "manifest",
};
/* ... and the option each stands for, as the user gives it. */
static const char *const key_options[] = {
	"-x", "-n", "--portion", "--rescan-errors", "--since", "--record", "--ledger",
	"--manifest",
};
#define NR_KEYS (sizeof(key_names) / sizeof(key_names[0]))

static char *options_key(const struct scrub_options *o)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addf(&sb, "x=%d n=%d portion=%u rescan=%d since=%s record=%d ledger=%s "
		    "manifest=%s", o->verify_data, o->check_only, o->portion, o->rescan_errors,
		    o->since ? o->since : "", o->record, o->ledger_dir ? o->ledger_dir : "",
		    o->manifest_path ? o->manifest_path : "");
	return strbuf_detach(&sb);
}

static void add_finding(struct checkpoint *cp, const struct cp_finding *f)
{
	if (cp->nr_findings == cp->alloc_findings) {
		cp->alloc_findings = cp->alloc_findings ? 2 * cp->alloc_findings : 16;
		cp->findings = xrealloc(cp->findings, cp->alloc_findings * sizeof(*cp->findings));
	}
	cp->findings[cp->nr_findings++] = *f;
}

static void add_bad_locked(struct checkpoint *cp, uint64_t off, uint64_t len, int err)
{
	cp->bad = xrealloc(cp->bad, (cp->nr_bad + 1) * sizeof(*cp->bad));
	cp->bad[cp->nr_bad++] = (struct bad_range){ .off = off, .len = len, .err = err };
}

/* --- JSON of the cursor --- */

static uint64_t get_u64(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? (uint64_t)json_object_get_uint64(v) : 0;
}

static json_object *u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

static json_object *pair(uint64_t a, uint64_t b)
{
	json_object *p = json_object_new_array();

	json_object_array_add(p, u64(a));
	json_object_array_add(p, u64(b));
	return p;
}

static uint64_t at(json_object *a, size_t i)
{
	return (uint64_t)json_object_get_uint64(json_object_array_get_idx(a, i));
}

static const char *str_of(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : "";
}

static json_object *finding_json(const struct cp_finding *f)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "severity", json_object_new_int(f->severity));
	json_object_object_add(o, "check", json_object_new_string(f->check));
	json_object_object_add(o, "path", json_object_new_string(f->path));
	json_object_object_add(o, "message", json_object_new_string(f->message));
	json_object_object_add(o, "ino", u64(f->ino));
	json_object_object_add(o, "has_range", json_object_new_boolean(f->has_range));
	json_object_object_add(o, "unconfirmed", json_object_new_boolean(f->unconfirmed));
	json_object_object_add(o, "offset", u64(f->offset));
	json_object_object_add(o, "length", u64(f->length));
	return o;
}

static void load_finding(struct checkpoint *cp, json_object *o)
{
	json_object *v;
	struct cp_finding f = {
		.severity = json_object_object_get_ex(o, "severity", &v) ? json_object_get_int(v) : 0,
		.check = xstrdup(str_of(o, "check")), .path = xstrdup(str_of(o, "path")),
		.message = xstrdup(str_of(o, "message")), .ino = get_u64(o, "ino"),
		.has_range = json_object_object_get_ex(o, "has_range", &v) &&
			     json_object_get_boolean(v),
		.offset = get_u64(o, "offset"), .length = get_u64(o, "length"),
		.unconfirmed = json_object_object_get_ex(o, "unconfirmed", &v) &&
			       json_object_get_boolean(v),
	};

	if (f.severity < SEV_INFO || f.severity > SEV_REPAIRED)
		f.severity = SEV_ERROR;
	add_finding(cp, &f);
}

/* Fill cp's cursor from the saved JSON; false if it is not one of ours. */
static bool cursor_load(struct checkpoint *cp, const char *text, uint64_t *dev_size)
{
	json_object *o = text ? json_tokener_parse(text) : NULL, *a;

	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return false;
	}
	cp->bytes = get_u64(o, "bytes");
	*dev_size = get_u64(o, "dev_size");
	cp->watermark = get_u64(o, "watermark");
	if (json_object_object_get_ex(o, "extra", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++) {
			json_object *p = json_object_array_get_idx(a, i);

			cp->extra = xrealloc(cp->extra, (cp->nr_extra + 1) * sizeof(*cp->extra));
			cp->extra[cp->nr_extra++] = (struct cp_range){ at(p, 0), at(p, 1) };
		}
	if (json_object_object_get_ex(o, "bad", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++) {
			json_object *p = json_object_array_get_idx(a, i);

			add_bad_locked(cp, at(p, 0), at(p, 1), (int)at(p, 2));
		}
	cp->nr_old_bad = cp->nr_bad;
	if (json_object_object_get_ex(o, "files", &a)) {
		cp->nr_old_files = json_object_array_length(a);
		cp->old_files = xmalloc((cp->nr_old_files + 1) * sizeof(*cp->old_files));
		for (size_t i = 0; i < cp->nr_old_files; i++) {
			json_object *p = json_object_array_get_idx(a, i);
			uint64_t dev = at(p, 0);

			cp->old_files[i] = (struct ino_key){ dev ? dev : cp->root_dev, at(p, 1) };
		}
		sort_items(cp->old_files, cp->nr_old_files, sizeof(*cp->old_files), ino_key_cmp);
	}
	if (json_object_object_get_ex(o, "findings", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++)
			load_finding(cp, json_object_array_get_idx(a, i));
	cp->nr_old_findings = cp->nr_findings;
	json_object_put(o);
	return true;
}

/* --- the device cursor --- */

static void add_extra(struct cp_range **v, size_t *n, uint64_t off, uint64_t len)
{
	if (*n && (*v)[*n - 1].off + (*v)[*n - 1].len >= off) {
		uint64_t end = off + len;

		if (end > (*v)[*n - 1].off + (*v)[*n - 1].len)
			(*v)[*n - 1].len = end - (*v)[*n - 1].off;
		return;
	}
	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = (struct cp_range){ off, len };
}

/*
 * The cursor as of now, under the lock: the reads of this run's list that
 * all completed from its start move the watermark to the first that did
 * not (everything planned below it is read: the plan left out only what
 * was verified), the others completed are extra.
 */
static void current_cursor(struct checkpoint *cp, uint64_t *w, struct cp_range **ex, size_t *nex)
{
	size_t i = 0, k;

	*w = cp->watermark;
	*ex = NULL;
	*nex = 0;
	if (cp->reads && !cp->partial) {
		while (cp->next < cp->nr_reads && cp->done[cp->next])
			cp->next++;
		uint64_t to = cp->next == cp->nr_reads ? UINT64_MAX : cp->reads[cp->next].off;

		if (to > cp->bound)
			to = cp->bound;
		if (to > *w)
			*w = to;
	}
	/* Merge the old extras and this run's later reads, both in device order. */
	k = cp->reads && !cp->partial ? cp->next + 1 : 0;
	while (i < cp->nr_extra || (cp->reads && k < cp->nr_reads)) {
		bool take_old = i < cp->nr_extra &&
				(!cp->reads || k >= cp->nr_reads || cp->extra[i].off <= cp->reads[k].off);

		if (take_old) {
			if (cp->extra[i].off + cp->extra[i].len > *w)
				add_extra(ex, nex, cp->extra[i].off, cp->extra[i].len);
			i++;
		} else {
			if (cp->done[k] && cp->reads[k].off >= *w)
				add_extra(ex, nex, cp->reads[k].off, cp->reads[k].len);
			k++;
		}
	}
}

static bool in_cursor(uint64_t w, const struct cp_range *ex, size_t nex, uint64_t off)
{
	if (off < w)
		return true;
	for (size_t i = 0; i < nex; i++)
		if (off >= ex[i].off && off < ex[i].off + ex[i].len)
			return true;
	return false;
}

bool checkpoint_dev_verified(const struct checkpoint *cp, uint64_t off, uint64_t *until)
{
	*until = UINT64_MAX;
	if (!cp || !cp->resumed)
		return false;
	if (off < cp->watermark) {
		*until = cp->watermark;
		return true;
	}
	for (size_t i = 0; i < cp->nr_extra; i++) {
		if (off < cp->extra[i].off) {
			*until = cp->extra[i].off;
			return false;
		}
		if (off < cp->extra[i].off + cp->extra[i].len) {
			*until = cp->extra[i].off + cp->extra[i].len;
			return true;
		}
	}
	return false;
}

void checkpoint_dev_begin(struct checkpoint *cp, bool ledger_judges)
{
	if (!cp || !cp->resumed || !ledger_judges)
		return;
	pthread_mutex_lock(&cp->lock);
	cp->watermark = 0;
	cp->nr_extra = 0;
	cp->nr_bad = cp->nr_old_bad = 0;
	cp->bytes = cp->bytes_before = cp->unbound_bytes = 0;
	pthread_mutex_unlock(&cp->lock);
}

void checkpoint_dev_plan(struct checkpoint *cp, const struct io_range *reads, size_t n,
			 bool partial)
{
	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	cp->partial = partial;
	cp->bound = UINT64_MAX;
	cp->reads = reads;
	cp->nr_reads = n;
	cp->next = 0;
	cp->done = xcalloc(n + 1, sizeof(*cp->done));
	pthread_mutex_unlock(&cp->lock);
}

void checkpoint_dev_bound(struct checkpoint *cp, uint64_t bound)
{
	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	if (cp->reads && cp->partial) {
		cp->partial = false;
		cp->bound = bound;
		cp->bytes += cp->unbound_bytes;
	}
	cp->unbound_bytes = 0;
	pthread_mutex_unlock(&cp->lock);
}

void checkpoint_dev_done(struct checkpoint *cp, size_t i)
{
	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	if (cp->reads && i < cp->nr_reads && !cp->done[i]) {
		cp->done[i] = true;
		if (cp->partial)
			cp->unbound_bytes += cp->reads[i].len;
		else
			cp->bytes += cp->reads[i].len;
	}
	pthread_mutex_unlock(&cp->lock);
}

void checkpoint_dev_bad(struct checkpoint *cp, uint64_t off, uint64_t len, int err)
{
	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	add_bad_locked(cp, off, len, err);
	pthread_mutex_unlock(&cp->lock);
}

const struct bad_range *checkpoint_dev_saved_bad(const struct checkpoint *cp, size_t *n)
{
	*n = cp && cp->resumed ? cp->nr_old_bad : 0;
	return *n ? cp->bad : NULL;
}

void checkpoint_dev_end(struct checkpoint *cp)
{
	struct cp_range *ex;
	size_t nex;
	uint64_t w;

	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	if (cp->reads) {
		current_cursor(cp, &w, &ex, &nex);
		free(cp->extra);
		cp->watermark = w;
		cp->extra = ex;
		cp->nr_extra = nex;
		cp->reads = NULL;
	}
	free(cp->done);		/* (allocated for an empty plan too) */
	cp->done = NULL;
	pthread_mutex_unlock(&cp->lock);
}

/* --- the per-file reader --- */

bool checkpoint_file_skip(const struct checkpoint *cp, struct ino_key id)
{
	return cp && cp->resumed &&
	       find_item(&id, cp->old_files, cp->nr_old_files, sizeof(id), ino_key_cmp);
}

void checkpoint_file_done(struct checkpoint *cp, struct ino_key id, uint64_t bytes)
{
	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	if (cp->nr_new_files == cp->alloc_new_files) {
		cp->alloc_new_files = cp->alloc_new_files ? 2 * cp->alloc_new_files : 64;
		cp->new_files = xrealloc(cp->new_files, cp->alloc_new_files * sizeof(id));
	}
	cp->new_files[cp->nr_new_files++] = id;
	cp->bytes += bytes;
	pthread_mutex_unlock(&cp->lock);
}

void checkpoint_note_finding(struct checkpoint *cp, const struct finding *f)
{
	struct cp_finding k;

	if (!cp || !f->ino || !check_is_content(f->check))
		return;
	pthread_mutex_lock(&cp->lock);
	if (cp->phase == 5) {
		k = (struct cp_finding){
			.severity = (int)f->severity, .has_range = f->has_range,
			.check = xstrdup(f->check), .path = xstrdup(f->path),
			.message = xstrdup(f->message), .ino = f->ino, .offset = f->offset,
			.length = f->length, .unconfirmed = f->unconfirmed,
		};
		add_finding(cp, &k);
	}
	pthread_mutex_unlock(&cp->lock);
}

/* The inode numbers of the files read to their end (by any run), sorted. */
static uint64_t *done_inos(const struct checkpoint *cp, size_t *n)
{
	uint64_t *v = xmalloc((cp->nr_old_files + cp->nr_new_files + 1) * sizeof(*v));

	*n = 0;
	for (size_t i = 0; i < cp->nr_old_files; i++)
		v[(*n)++] = cp->old_files[i].ino;
	for (size_t i = 0; i < cp->nr_new_files; i++)
		v[(*n)++] = cp->new_files[i].ino;
	sort_items(v, *n, sizeof(*v), u64_cmp);
	return v;
}

/* --- saving --- */

static json_object *files_json(const struct checkpoint *cp)
{
	json_object *a = json_object_new_array();
	const struct ino_key *lists[] = { cp->old_files, cp->new_files };
	size_t counts[] = { cp->nr_old_files, cp->nr_new_files };

	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < counts[l]; i++)
			json_object_array_add(a, pair(lists[l][i].dev == cp->root_dev ? 0 :
						      lists[l][i].dev, lists[l][i].ino));
	return a;
}

/* Only the media errors in what was verified: the others are found again. */
static json_object *bad_json(const struct checkpoint *cp, uint64_t w, const struct cp_range *ex,
			     size_t nex)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < cp->nr_bad; i++)
		if (i < cp->nr_old_bad || in_cursor(w, ex, nex, cp->bad[i].off)) {
			json_object *p = pair(cp->bad[i].off, cp->bad[i].len);

			json_object_array_add(p, u64((uint64_t)cp->bad[i].err));
			json_object_array_add(a, p);
		}
	return a;
}

/* Only the findings of the files read to their end: the others are found again. */
static json_object *findings_json(const struct checkpoint *cp)
{
	json_object *a = json_object_new_array();
	size_t n;
	uint64_t *inos = done_inos(cp, &n);

	for (size_t i = 0; i < cp->nr_findings; i++)
		if (i < cp->nr_old_findings ||
		    find_item(&cp->findings[i].ino, inos, n, sizeof(*inos), u64_cmp))
			json_object_array_add(a, finding_json(&cp->findings[i]));
	free(inos);
	return a;
}

/* The cursor's JSON, under the lock. */
static char *cursor_json(struct checkpoint *cp, uint64_t total, uint64_t dev_size)
{
	json_object *o = json_object_new_object(), *a = json_object_new_array();
	struct cp_range *ex;
	size_t nex;
	uint64_t w;
	char *s;

	current_cursor(cp, &w, &ex, &nex);
	json_object_object_add(o, "bytes", u64(cp->bytes));
	json_object_object_add(o, "total", u64(total));
	json_object_object_add(o, "dev_size", u64(dev_size));
	json_object_object_add(o, "watermark", u64(w));
	for (size_t i = 0; i < nex; i++)
		json_object_array_add(a, pair(ex[i].off, ex[i].len));
	json_object_object_add(o, "extra", a);
	json_object_object_add(o, "bad", bad_json(cp, w, ex, nex));
	json_object_object_add(o, "files", files_json(cp));
	json_object_object_add(o, "findings", findings_json(cp));
	s = xstrdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	free(ex);
	return s;
}

static double unix_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The data in use now: the percentage's denominator. */
static uint64_t data_in_use(const struct scrub_ctx *ctx)
{
	struct statvfs sv;

	if (fstatvfs(ctx->mnt_fd, &sv) < 0)
		return 0;
	return (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
}

/* Save now; the caller holds report.c's lock (the store is not thread-safe). */
static int save(struct scrub_ctx *ctx, struct strbuf *err)
{
	struct checkpoint *cp = ctx->checkpoint;
	struct state_checkpoint sc = {
		.run = ctx->run_id, .saved = unix_now(), .options = cp->options,
	};
	uint64_t total = data_in_use(ctx);
	int ret;

	pthread_mutex_lock(&cp->lock);
	sc.phase = cp->phase;
	sc.cursor = cursor_json(cp, total, ctx->dev_size);
	pthread_mutex_unlock(&cp->lock);
	ret = state_checkpoint_save(ctx->state, &cp->fs, &sc, err);
	free(sc.cursor);
	return ret;
}

void checkpoint_tick(struct scrub_ctx *ctx)
{
	struct checkpoint *cp = ctx->checkpoint;
	long long now;

	if (!cp || (now = now_ms()) < atomic_load(&cp->next_due_ms))
		return;
	if (pthread_mutex_trylock(&cp->save_lock))
		return;			/* another thread is saving */
	atomic_store(&cp->next_due_ms, now + cp->interval_ms);
	pthread_mutex_lock(&ctx->report.lock);
	if (ctx->state && save(ctx, NULL))
		fprintf(stderr, "fscrub: cannot save the checkpoint in '%s'; the scan goes on\n",
			state_path(ctx->state));
	pthread_mutex_unlock(&ctx->report.lock);
	pthread_mutex_unlock(&cp->save_lock);
}

int checkpoint_end(struct scrub_ctx *ctx, const char *status, struct strbuf *err)
{
	struct checkpoint *cp = ctx->checkpoint;
	int ret = 0;

	if (!cp || !ctx->state)
		return 0;
	checkpoint_dev_end(cp);
	pthread_mutex_lock(&cp->save_lock);
	if (!strcmp(status, "cancelled"))
		ret = save(ctx, err);
	else if (!strcmp(status, "complete") || !strcmp(status, "incomplete"))
		ret = state_checkpoint_delete(ctx->state, &cp->fs, err);	/* ran to its end */
	pthread_mutex_unlock(&cp->save_lock);
	return ret;
}

/* --- resuming --- */

/* The value of key_names[k] in an options key; "" if it has none. */
static char *key_value(const char *key, size_t k)
{
	struct strbuf name = STRBUF_INIT, next = STRBUF_INIT;
	const char *v, *end = NULL;

	strbuf_addf(&name, "%s%s=", k ? " " : "", key_names[k]);
	v = k ? strstr(key, name.buf) : (!strncmp(key, name.buf, name.len) ? key : NULL);
	if (v && k + 1 < NR_KEYS) {
		strbuf_addf(&next, " %s=", key_names[k + 1]);
		end = strstr(v + name.len, next.buf);
	}
	char *out = !v ? xstrdup("") : end ? xstrndup(v + name.len, (size_t)(end - v - name.len)) :
		    xstrdup(v + name.len);

	strbuf_release(&name);
	strbuf_release(&next);
	return out;
}

/* A value as the user would say it: "on"/"off" for a flag, "none" for nothing. */
static const char *value_words(const char *v)
{
	if (!strcmp(v, "1"))
		return "on";
	if (!strcmp(v, "0") || !*v)
		return "off";
	return v;
}

/* The options that differ between two keys, by name: "-n (then on, now off)". */
static void options_differ(const char *then, const char *now, struct strbuf *sb)
{
	for (size_t k = 0; k < NR_KEYS; k++) {
		char *a = key_value(then, k), *b = key_value(now, k);

		if (strcmp(a, b))
			strbuf_addf(sb, "%s%s (the stopped run: %s; this one: %s)",
				    sb->len ? ", " : "", key_options[k], value_words(a),
				    value_words(b));
		free(a);
		free(b);
	}
}

/* Why the saved checkpoint sc cannot be resumed by this run, or NULL. */
static char *stale(const struct scrub_ctx *ctx, const struct checkpoint *cp,
		   const struct state_checkpoint *sc, uint64_t dev_size)
{
	struct strbuf sb = STRBUF_INIT;
	double age = unix_now() - sc->saved;

	if (strcmp(sc->options ? sc->options : "", cp->options)) {
		struct strbuf which = STRBUF_INIT;

		options_differ(sc->options ? sc->options : "", cp->options, &which);
		strbuf_addf(&sb, "the checkpoint of run %lld is of other options: %s",
			    (long long)sc->run, which.len ? which.buf : "an older fscrub's");
		strbuf_release(&which);
	} else if (age > CHECKPOINT_MAX_AGE || age < -60)
		strbuf_addf(&sb, "the checkpoint of run %lld is stale: saved %.1f days ago, "
			    "more than %.0f", (long long)sc->run, age / 86400, CHECKPOINT_MAX_AGE / 86400);
	else if (dev_size != ctx->dev_size)
		strbuf_addf(&sb, "the checkpoint of run %lld is of a device of another size",
			    (long long)sc->run);
	else
		return NULL;
	return strbuf_detach(&sb);
}

/* Say it: on stderr always, with -v in the report too. */
static void say(struct scrub_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct scrub_ctx *ctx, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	fprintf(stderr, "fscrub: %s\n", sb.buf);
	report_verbose(ctx, "Phase 1: %s", sb.buf);
	strbuf_release(&sb);
}

/* A checkpoint that is not resumed: forget what was loaded of it. */
static void forget_loaded(struct checkpoint *cp)
{
	for (size_t i = 0; i < cp->nr_findings; i++) {
		free(cp->findings[i].check);
		free(cp->findings[i].path);
		free(cp->findings[i].message);
	}
	cp->nr_findings = cp->nr_old_findings = 0;
	cp->watermark = 0;
	cp->nr_extra = cp->nr_bad = cp->nr_old_bad = 0;
	free(cp->old_files);
	cp->old_files = NULL;
	cp->nr_old_files = 0;
	cp->bytes = 0;
}

/* The checkpoint sc, loaded into cp, is resumed: say so. */
static void resumed(struct scrub_ctx *ctx, struct checkpoint *cp,
		    const struct state_checkpoint *sc)
{
	json_object *o = json_tokener_parse(sc->cursor);
	uint64_t total = o ? get_u64(o, "total") : 0;

	json_object_put(o);
	cp->resumed = true;
	cp->from_run = sc->run;
	cp->from_phase = sc->phase;
	cp->from_percent = total ? 100.0 * (double)cp->bytes / (double)total : 0;
	if (cp->from_percent > 100)
		cp->from_percent = 100;
	cp->bytes_before = cp->bytes;
	/*
	 * How phase 5 goes on is said when it begins (checkpoint_say_data()):
	 * whether the checksum ledger needs whole files is known only then.
	 */
	say(ctx, "resuming run %lld from phase %d at %.0f %%: phases 1 to 4 run again in full",
	    (long long)sc->run, sc->phase, cp->from_percent);
}

void checkpoint_say_data(struct scrub_ctx *ctx, const char *restart)
{
	struct checkpoint *cp = ctx->checkpoint;

	if (!cp || !cp->resumed || !cp->bytes_before || cp->data_said)
		return;
	cp->data_said = true;
	if (restart)
		say(ctx, "--resume: phase 5 reads the data from its start, the %.0f %% run %lld "
		    "verified too: %s", cp->from_percent, (long long)cp->from_run, restart);
	else
		say(ctx, "--resume: phase 5 reads only what run %lld did not verify (%.0f %% was)",
		    (long long)cp->from_run, cp->from_percent);
}

static void resume(struct scrub_ctx *ctx, struct checkpoint *cp)
{
	struct state_checkpoint sc;
	uint64_t dev_size = 0;
	int ret = state_checkpoint_load(ctx->state, &cp->fs, &sc);

	if (ret == 0 && !cursor_load(cp, sc.cursor, &dev_size))
		cp->why = xstrdup("the checkpoint cannot be read");
	else if (ret == 0)
		cp->why = stale(ctx, cp, &sc, dev_size);
	else
		cp->why = xstrdup(ret == -ENOENT ? "no checkpoint of this filesystem" :
				  "the checkpoint cannot be read");
	if (cp->why && ret == -ENOENT) {
		/* The usual case (fscrub@.service and fscrub_all always pass --resume): -v only. */
		report_verbose(ctx, "Phase 1: --resume: %s: running from the start", cp->why);
	} else if (cp->why) {
		forget_loaded(cp);
		say(ctx, "--resume: %s: running from the start", cp->why);
	} else {
		resumed(ctx, cp, &sc);
	}
	state_checkpoint_release(&sc);
}

static long long interval_ms(void)
{
	const char *knob = getenv("FSCRUB_DEBUG_CHECKPOINT_MS");

	/* Test knob: a shorter interval, so tests see periodic saves in seconds. */
	return knob && atoll(knob) > 0 ? atoll(knob) : CHECKPOINT_INTERVAL_MS;
}

static void note_finding(struct scrub_ctx *ctx, void *data, const struct finding *f)
{
	(void)ctx;
	checkpoint_note_finding(data, f);
}

/* After the history's in the report core's list: it takes what that took. */
static const struct report_sink checkpoint_sink = {
	.name = "checkpoint",
	.finding = note_finding,
};

void checkpoint_begin(struct scrub_ctx *ctx)
{
	struct checkpoint *cp;

	if (!ctx->state || !ctx->fs_uuid)
		return;
	cp = xcalloc(1, sizeof(*cp));
	pthread_mutex_init(&cp->lock, NULL);
	pthread_mutex_init(&cp->save_lock, NULL);
	cp->fs.uuid = xstrdup(ctx->fs_uuid);
	cp->fs.fsroot = xstrdup(ctx->fsroot ? ctx->fsroot : "/");
	cp->options = options_key(&ctx->opt);
	cp->interval_ms = interval_ms();
	cp->phase = 1;
	cp->requested = ctx->opt.resume;
	cp->root_dev = ino_key_of(&ctx->root_stx).dev;
	atomic_store(&cp->next_due_ms, now_ms() + cp->interval_ms);
	ctx->checkpoint = cp;
	report_add_sink(ctx, &checkpoint_sink, cp);
	if (ctx->opt.resume)
		resume(ctx, cp);
}

/* Phase 5 of a resumed run: what the stopped runs found in the files they read. */
static void replay(struct scrub_ctx *ctx, struct checkpoint *cp)
{
	for (size_t i = 0; i < cp->nr_old_findings; i++) {
		const struct cp_finding *k = &cp->findings[i];
		struct finding f = {
			.severity = (enum severity)k->severity, .check = k->check, .path = k->path,
			.ino = k->ino, .has_range = k->has_range, .offset = k->offset,
			.length = k->length, .message = k->message, .unconfirmed = k->unconfirmed,
			.file = __FILE__, .line = __LINE__,
		};

		report_replay(ctx, &f);
	}
	if (cp->nr_old_findings)
		report_verbose(ctx, "Phase 5: %zu findings of the files read before the stop",
			       cp->nr_old_findings);
}

void checkpoint_phase(struct scrub_ctx *ctx, int phase)
{
	struct checkpoint *cp = ctx->checkpoint;

	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	cp->phase = phase;
	pthread_mutex_unlock(&cp->lock);
	atomic_store(&ctx->progress_base, phase == 5 && cp->resumed ? cp->bytes_before : 0);
	if (phase == 5 && cp->resumed)
		replay(ctx, cp);
}

unsigned long long checkpoint_covered(const struct checkpoint *cp)
{
	return cp && cp->resumed ? cp->bytes_before : 0;
}

json_object *checkpoint_json(const struct scrub_ctx *ctx)
{
	const struct checkpoint *cp = ctx->checkpoint;
	json_object *o;

	if (!ctx->opt.resume)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "requested", json_object_new_boolean(true));
	json_object_object_add(o, "resumed", json_object_new_boolean(cp && cp->from_run));
	if (cp && cp->from_run) {
		json_object_object_add(o, "run", json_object_new_int64(cp->from_run));
		json_object_object_add(o, "phase", json_object_new_int(cp->from_phase));
		json_object_object_add(o, "percent", json_object_new_double(cp->from_percent));
		json_object_object_add(o, "bytes_before", u64(cp->bytes_before));
	} else {
		json_object_object_add(o, "reason", json_object_new_string(
			cp && cp->why ? cp->why : "the run is not recorded"));
	}
	return o;
}

void checkpoint_free(struct checkpoint *cp)
{
	if (!cp)
		return;
	for (size_t i = 0; i < cp->nr_findings; i++) {
		free(cp->findings[i].check);
		free(cp->findings[i].path);
		free(cp->findings[i].message);
	}
	free(cp->findings);
	free(cp->new_files);
	free(cp->old_files);
	free(cp->bad);
	free(cp->extra);
	free(cp->done);
	free(cp->why);
	free(cp->options);
	free((char *)cp->fs.uuid);
	free((char *)cp->fs.fsroot);
	pthread_mutex_destroy(&cp->lock);
	pthread_mutex_destroy(&cp->save_lock);
	free(cp);
}
