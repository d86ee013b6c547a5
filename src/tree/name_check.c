/*
 * name_check: the deceptive-name checks of phase 3; see name_check.h.
 */
#include "tree/name_check.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/names.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "lib/stx.h"
#include "tree/walk.h"

#ifndef FS_CASEFOLD_FL
#define FS_CASEFOLD_FL 0x40000000	/* linux/fs.h since 5.4 */
#endif

/*
 * Set by name_check_setup() in phase 3, before the walk threads start,
 * and only read after: look-alike names are checked (ICU loaded, not
 * FSCRUB_DEBUG_NO_NAME_CHECKS); every directory is taken as casefolded
 * (FSCRUB_DEBUG_CASEFOLD).  One scan per process: these are the run's.
 */
static bool checks_on, all_casefold;

void name_check_init(struct name_check *nc)
{
	memset(nc, 0, sizeof(*nc));
	unicrash_set_init(&nc->dir);
	unicrash_set_init(&nc->xattrs);
}

void name_check_release(struct name_check *nc)
{
	unicrash_set_release(&nc->dir);
	unicrash_set_release(&nc->xattrs);
	unicrash_members_release(&nc->members);
}

void name_check_setup(struct scrub_ctx *ctx)
{
	checks_on = all_casefold = false;
	if (getenv("FSCRUB_DEBUG_NO_NAME_CHECKS")) {
		report_verbose(ctx, "Phase 3: look-alike names not checked "
			       "(FSCRUB_DEBUG_NO_NAME_CHECKS)");
		return;
	}
	if (unicrash_setup() < 0) {
		report_operational(ctx, NULL, NULL, 0, "cannot load ICU's Unicode data: "
				   "look-alike names are not checked");
		return;
	}
	checks_on = true;
	/* Fault injection: casefold twins where the kernel has no casefolding. */
	all_casefold = getenv("FSCRUB_DEBUG_CASEFOLD") != NULL;
}

/* Only these filesystems have casefolded directories (chattr +F). */
static bool may_casefold(const struct scrub_ctx *ctx)
{
	return ctx->fstype && (!strcmp(ctx->fstype, "ext4") || !strcmp(ctx->fstype, "f2fs") ||
			       !strcmp(ctx->fstype, "tmpfs"));
}

static bool dir_casefolded(const struct scrub_ctx *ctx, int fd)
{
	int attr = 0;	/* FS_IOC_GETFLAGS passes an int, whatever its type says */

	if (all_casefold)
		return true;
	return may_casefold(ctx) && ioctl(fd, FS_IOC_GETFLAGS, &attr) == 0 &&
	       (attr & FS_CASEFOLD_FL);
}

void name_check_dir_begin(struct walk_thread *t, struct name_check *nc,
			  const struct walk_dir *d)
{
	if (!checks_on)
		return;
	/*
	 * The no-key names of a locked encrypted directory are base64url of
	 * ciphertext: 'l' and '1', a leading '-', mean nothing there.
	 */
	nc->skip_dir = d->key_absent;
	unicrash_set_reset(&nc->dir, !nc->skip_dir && dir_casefolded(t->ctx, d->fd));
	nc->collided = false;
}

/* What a name alone says: bidi, invisible, mixed scripts (what: "name", "attribute name"). */
static void check_one_name(struct scrub_ctx *ctx, const struct dir_node *dir, const char *name,
			   uint64_t ino, const char *what, const char *s, size_t len,
			   unsigned flags)
{
	struct strbuf esc = STRBUF_INIT;

	if (!(flags & (NAME_BIDI | NAME_INVISIBLE)) &&
	    (!(flags & NAME_NON_ASCII) || (flags & NAME_BAD_UTF8) ||
	     !unicrash_mixed_script(s, len)))
		return;
	names_escape(&esc, s, len);
	if (flags & NAME_BIDI)
		str_warn(ctx, CHECK_NAME_BIDI, dir, name, ino, "%s '%s' contains bidirectional "
			 "text controls, which change the order it is displayed in", what, esc.buf);
	if (flags & NAME_INVISIBLE)
		str_warn(ctx, CHECK_NAME_INVISIBLE, dir, name, ino, "%s '%s' contains "
			 "invisible characters", what, esc.buf);
	if ((flags & NAME_NON_ASCII) && !(flags & NAME_BAD_UTF8) && unicrash_mixed_script(s, len))
		str_warn(ctx, CHECK_NAME_MIXED_SCRIPT, dir, name, ino, "%s '%s' mixes scripts "
			 "that look alike (beyond Unicode TS #39's moderately restrictive level)",
			 what, esc.buf);
	strbuf_release(&esc);
}

static uint64_t entry_ino(const struct scrub_ctx *ctx, const struct walk_entry *e)
{
	if (!e->stat_err)
		return e->stx.stx_ino;
	return ctx->quirks & QUIRK_DINO_UNRELATED ? 0 : e->d_ino;
}

void name_check_entry(struct walk_thread *t, struct name_check *nc, const struct walk_dir *d,
		      const struct walk_entry *e, unsigned flags)
{
	struct scrub_ctx *ctx = t->ctx;
	uint64_t keys[UNICRASH_NR_KEYS];

	if (!checks_on || nc->skip_dir || (flags & (NAME_EMPTY | NAME_SLASH)))
		return;
	t->stats.names++;
	if (flags & NAME_OPTION)
		str_warn(ctx, CHECK_NAME_OPTION_LIKE, d->node, e->name, entry_ino(ctx, e),
			 "name begins with '-': a command given it reads an option");
	check_one_name(ctx, d->node, e->name, entry_ino(ctx, e), "name", e->name, e->namelen,
		       flags);
	if (flags & NAME_BAD_UTF8)
		return;		/* name.encoding says so; no normal form */
	if (unicrash_keys(e->name, e->namelen, flags, nc->dir.casefold, keys) == 0 &&
	    unicrash_set_add(&nc->dir, keys))
		nc->collided = true;
}

static const char *kind_check(enum unicrash_kind kind)
{
	switch (kind) {
	case UNICRASH_CASEFOLD: return CHECK_NAME_CASEFOLD_TWIN;
	case UNICRASH_NFC: return CHECK_NAME_NFC_TWIN;
	case UNICRASH_NFKC: return CHECK_NAME_NFKC_TWIN;
	default: return CHECK_NAME_CONFUSABLE;
	}
}

/* "name 'B' <verb> 'A' (inode N)<tail>" */
static const char *kind_verb(enum unicrash_kind kind)
{
	switch (kind) {
	case UNICRASH_CASEFOLD: return "is the same name as";
	case UNICRASH_NFC: return "is the same text as";
	case UNICRASH_NFKC: return "equals";
	default: return "looks like";
	}
}

static const char *kind_tail(enum unicrash_kind kind)
{
	switch (kind) {
	case UNICRASH_CASEFOLD:
		return " in this casefolded directory: one of them cannot be looked up";
	case UNICRASH_NFC:
		return " in another Unicode normalisation form (NFC/NFD)";
	case UNICRASH_NFKC:
		return " after compatibility normalisation (NFKC)";
	default:
		return " (equal confusable skeletons, Unicode TS #39)";
	}
}

/* Where and how a pair is reported; changed: the directory moved meanwhile. */
struct pair_report {
	struct scrub_ctx *ctx;
	const struct dir_node *dir;
	const char *name;		/* attribute names: the inode's name */
	uint64_t ino;
	const char *what;		/* "name", "attribute name" */
	bool changed;
};

static bool all_ascii(const struct unicrash_member *m)
{
	for (size_t i = 0; i < m->len; i++)
		if ((unsigned char)m->name[i] >= 0x80)
			return false;
	return true;
}

static void report_pair(void *arg, enum unicrash_kind kind, const struct unicrash_member *a,
			const struct unicrash_member *b)
{
	struct pair_report *pr = arg;
	struct strbuf ea = STRBUF_INIT, eb = STRBUF_INIT;
	bool entries = !pr->name && !strcmp(pr->what, "name");
	const char *name = entries ? b->name : pr->name;
	uint64_t ino = entries ? b->ino : pr->ino;
	enum severity sev = kind == UNICRASH_CASEFOLD ? SEV_ERROR : SEV_WARNING;
	struct strbuf msg = STRBUF_INIT;

	names_escape(&ea, a->name, a->len);
	names_escape(&eb, b->name, b->len);
	/*
	 * Two ASCII names alike ("ps1.vim" and "psl.vim", terminfo's "1" and
	 * "l") are what a stock system ships, not a spoof: an info, shown
	 * under -v.  A spoof needs a character the reader does not expect.
	 */
	if (kind == UNICRASH_CONFUSABLE && all_ascii(a) && all_ascii(b))
		sev = SEV_INFO;
	if (entries && a->ino)
		strbuf_addf(&ea, "' (inode %llu", (unsigned long long)a->ino);
	else
		strbuf_addstr(&ea, "'");
	strbuf_addf(&msg, "%s '%s' %s '%s%s%s", pr->what, eb.buf, kind_verb(kind), ea.buf,
		    entries && a->ino ? ")" : "", kind_tail(kind));
	if (pr->changed)
		str_changed(pr->ctx, kind_check(kind), pr->dir, name, ino, "%s", msg.buf);
	else
		report_at(pr->ctx, sev, kind_check(kind), pr->dir, name, ino, __FILE__,
			  __LINE__, "%s", msg.buf);
	strbuf_release(&msg);
	strbuf_release(&ea);
	strbuf_release(&eb);
}

struct regather {
	struct name_check *nc;
	const struct scrub_ctx *ctx;
};

static int regather_entry(void *arg, const char *name, size_t namelen, uint64_t d_ino,
			  unsigned char d_type)
{
	struct regather *rg = arg;
	unsigned flags = names_classify(name, namelen);
	uint64_t keys[UNICRASH_NR_KEYS];

	(void)d_type;
	if ((namelen == 1 && name[0] == '.') || (namelen == 2 && !memcmp(name, "..", 2)) ||
	    (flags & (NAME_EMPTY | NAME_SLASH | NAME_BAD_UTF8)))
		return 0;
	if (unicrash_keys(name, namelen, flags, rg->nc->dir.casefold, keys) == 0)
		unicrash_gather(&rg->nc->members, &rg->nc->dir, name, namelen, keys,
				rg->ctx->quirks & QUIRK_DINO_UNRELATED ? 0 : d_ino);
	return 0;
}

void name_check_dir_end(struct walk_thread *t, struct name_check *nc, struct walk_dir *d)
{
	struct scrub_ctx *ctx = t->ctx;
	struct regather rg = { .nc = nc, .ctx = ctx };
	struct pair_report pr = { .ctx = ctx, .dir = d->node, .what = "name" };
	struct statx after;

	if (!checks_on || !nc->collided || d->locked)
		return;		/* locked: v1 no-key names, known only now */
	/* Second read: the names behind the keys that collided. */
	if (dirent_iterate(d->fd, t->dents, t->dents_size, regather_entry, &rg) < 0) {
		unicrash_members_clear(&nc->members);
		return;		/* the first read's error, if any, is reported */
	}
	pr.changed = stx_get(d->fd, NULL, &after) < 0 || !stx_unchanged(&after, &d->before);
	unicrash_report(&nc->members, nc->dir.casefold, report_pair, &pr);
	if (nc->members.overflow)
		str_info(ctx, CHECK_NAME_CONFUSABLE, d->node, NULL, d->before.stx_ino,
			 "more than %d look-alike names: only the first were compared",
			 UNICRASH_MAX_MEMBERS);
	unicrash_members_clear(&nc->members);
}

void name_check_xattrs(struct walk_thread *t, struct name_check *nc,
		       const struct dir_node *dir, const char *name, uint64_t ino,
		       const char *list, size_t n)
{
	struct scrub_ctx *ctx = t->ctx;
	struct pair_report pr = { .ctx = ctx, .dir = dir, .name = name, .ino = ino,
				  .what = "attribute name" };
	uint64_t keys[UNICRASH_NR_KEYS];
	bool collided = false;

	if (!checks_on || n == 0)
		return;
	unicrash_set_reset(&nc->xattrs, false);
	for (size_t off = 0; off < n; off += strlen(list + off) + 1) {
		size_t len = strlen(list + off);
		unsigned flags = len ? names_classify(list + off, len) : NAME_EMPTY;

		if (flags & (NAME_EMPTY | NAME_BAD_UTF8))
			continue;
		t->stats.names++;
		check_one_name(ctx, dir, name, ino, "attribute name", list + off, len, flags);
		if (unicrash_keys(list + off, len, flags, false, keys) == 0)
			collided |= unicrash_set_add(&nc->xattrs, keys);
	}
	if (!collided)
		return;
	for (size_t off = 0; off < n; off += strlen(list + off) + 1) {
		size_t len = strlen(list + off);
		unsigned flags = len ? names_classify(list + off, len) : NAME_EMPTY;

		if (!(flags & (NAME_EMPTY | NAME_BAD_UTF8)) &&
		    unicrash_keys(list + off, len, flags, false, keys) == 0)
			unicrash_gather(&nc->members, &nc->xattrs, list + off, len, keys, ino);
	}
	unicrash_report(&nc->members, false, report_pair, &pr);
	unicrash_members_clear(&nc->members);
}

void name_check_label(struct scrub_ctx *ctx, int fd)
{
	char label[FSLABEL_MAX + 1] = "";
	size_t len;
	unsigned flags;

	if (!checks_on || ioctl(fd, FS_IOC_GETFSLABEL, label) < 0)
		return;		/* no label, or no such ioctl on this filesystem */
	label[FSLABEL_MAX] = '\0';
	len = strlen(label);
	if (!len)
		return;
	ctx->stats.names++;
	flags = names_classify(label, len);
	if (flags & NAME_CONTROL) {
		struct strbuf esc = STRBUF_INIT;

		names_escape(&esc, label, len);
		str_warn(ctx, CHECK_NAME_CONTROL, NULL, NULL, 0, "filesystem label '%s' "
			 "contains control characters", esc.buf);
		strbuf_release(&esc);
	}
	check_one_name(ctx, NULL, NULL, 0, "filesystem label", label, len, flags);
}
