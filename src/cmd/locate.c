/*
 * locate: fscrub locate [--json] [--unit 512|4096|bytes] [--from FILE]
 *             DEVICE [SECTOR[+COUNT|-END]...]
 *
 * From a bad sector that a disk, the kernel log or md reported, to what it
 * holds: for each range of DEVICE, the range is followed up the block
 * stack (blockstack.h: partitions, md RAID1, device-mapper linear, loop
 * devices on files) to every device a filesystem is mounted from, and
 * each filesystem says who owns its part (owners.h): files with their
 * inode and byte range, metadata and its kind, free space.  A file that
 * is the backing file of a loop device is followed up through that loop
 * device in turn.  What no mounted filesystem covers is said to be "not
 * part of any mounted filesystem".  Nothing is written and nothing is
 * scanned: each filesystem is asked only about the range.
 *
 * Exit status: 0 every range resolved and no file owns any of it, 4 a file
 * owns part of one (something to restore), 8 a part could not be resolved
 * (a layout not followed, an owner not found, a filesystem that could not
 * be asked), 16 usage (also a range past the end of DEVICE).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fcntl.h>
#include <json-c/json.h>
#include <unistd.h>

#include "cmd/blockstack.h"
#include "lib/fsmounts.h"
#include "cmd/owners.h"
#include "lib/names.h"
#include "lib/sorted.h"
#include "report/report.h"
#include "cmd/subcmd.h"

/* A stack deeper than this is a loop of loop devices, not a real one. */
#define MAX_DEPTH 16

struct loc_opts {
	bool json;
	uint64_t unit;			/* bytes per sector; 1: bytes */
	const char *from;
};

/*
 * A file owner whose path is not known yet: its text line holds the mark
 * PATH_MARK, index, PATH_MARK; its JSON object a null "path".  All of them
 * are named by one walk of each filesystem at the end (a walk per range
 * would walk a million-file tree a thousand times).
 */
struct pending {
	const struct fsmount *m;
	dev_t devno;
	uint64_t ino;
	json_object *j;
	char *path;
};

/* Stands for a pending path in the text: a byte no escaped name contains. */
#define PATH_MARK '\001'

struct walker {
	struct bstack bs;
	struct fsmount_list mounts;
	struct bstack_loops loops;
	struct strbuf text;		/* the current range's report */
	json_object *owners;		/* the current range's owners */
	struct pending *pending;
	size_t nr_pending;
	int code;
};

static void usage(FILE *f)
{
	fputs("Usage: fscrub locate [OPTIONS] DEVICE [SECTOR[+COUNT|-END]...]\n"
	      "\n"
	      "Say which files, metadata or free space hold sectors of DEVICE, on every\n"
	      "filesystem mounted from it or from a device stacked on it.\n"
	      "\n"
	      "Options:\n"
	      "      --json           print one JSON object\n"
	      "      --unit UNIT      SECTOR counts units of 512 (default), 4096 or bytes\n"
	      "      --from FILE      read one SECTOR[+COUNT|-END] a line from FILE ('-': stdin)\n"
	      "  -h, --help           show this help and exit\n"
	      "\n"
	      "Exit status: 0 resolved, no file involved; 4 a file holds one of the sectors;\n"
	      "8 operational error (a part not resolved); 16 usage error.  See fscrub(8).\n", f);
}

static int usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "fscrub locate: %s '%s'\n"
		"Try 'fscrub locate --help' for more information.\n", msg, arg);
	return EXIT_USAGE;
}

static bool parse_u64(const char *s, const char **end, uint64_t *out)
{
	char *e;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &e, 10);
	if (errno)
		return false;
	*out = v;
	*end = e;
	return true;
}

/* "S", "S+COUNT", "S-END" (END included) in units: bytes [*off, *off + *len). */
static bool parse_range(const char *s, uint64_t unit, uint64_t *off, uint64_t *len)
{
	uint64_t a, b = 1;
	const char *p;

	if (!parse_u64(s, &p, &a))
		return false;
	if (*p == '+' && (!parse_u64(p + 1, &p, &b) || !b))
		return false;
	else if (*p == '-') {
		if (!parse_u64(p + 1, &p, &b) || b < a)
			return false;
		b = b - a + 1;
	}
	if (*p || a > UINT64_MAX / unit || b > UINT64_MAX / unit || a * unit > UINT64_MAX - b * unit)
		return false;
	*off = a * unit;
	*len = b * unit;
	return true;
}

static bool known_fs(const char *fstype)
{
	return !strcmp(fstype, "xfs") || !strcmp(fstype, "ext4") || !strcmp(fstype, "ext3") ||
	       !strcmp(fstype, "ext2") || !strcmp(fstype, "btrfs");
}

/* The mount of the filesystem on device devno (or one of whose devices it is), or NULL. */
static const struct fsmount *mount_of(const struct walker *w, dev_t devno)
{
	for (size_t i = 0; i < w->mounts.nr; i++)
		if (loc_mount_has_device(&w->mounts.v[i], devno))
			return &w->mounts.v[i];
	return NULL;
}

static const char *kind_name(enum loc_kind k)
{
	static const char *const names[] = { "file", "metadata", "free", "unknown" };

	return names[k];
}

static void indent(struct walker *w, int depth)
{
	for (int i = 0; i < depth + 1; i++)
		strbuf_addstr(&w->text, "  ");
}

static json_object *owner_base(const char *chain, const char *name, uint64_t off, uint64_t len,
			       const char *kind)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "kind", json_object_new_string(kind));
	json_object_object_add(o, "through", json_object_new_string(chain));
	json_object_object_add(o, "device", json_object_new_string(name));
	json_object_object_add(o, "offset", json_object_new_int64((int64_t)off));
	json_object_object_add(o, "length", json_object_new_int64((int64_t)len));
	return o;
}

/* One range of a device that no mounted filesystem covers. */
static void say_none(struct walker *w, const char *chain, const char *name, uint64_t off,
		     uint64_t len, int depth, const char *why)
{
	indent(w, depth);
	strbuf_addf(&w->text, "%s bytes %llu-%llu: not part of any mounted filesystem%s\n", name,
		    (unsigned long long)off, (unsigned long long)(off + len - 1), why);
	json_object_array_add(w->owners, owner_base(chain, name, off, len, "none"));
}

static void walk(struct walker *w, const char *chain, const char *name, uint64_t off,
		 uint64_t len, int depth);

/*
 * Parity of an md row on the lower device name: no file's bytes (a bad
 * sector there loses nothing while the rest of the row reads; the array's
 * next check or resync rewrites it).
 */
static void say_parity(struct walker *w, const char *chain, const char *name, uint64_t off,
		       uint64_t len, const struct bstack_hop *h, int depth)
{
	struct strbuf what = STRBUF_INIT;
	json_object *o;

	strbuf_addf(&what, "%s parity (%c) of %s bytes %llu-%llu", h->how, h->parity, h->name,
		    (unsigned long long)h->off, (unsigned long long)(h->off + h->len - 1));
	indent(w, depth);
	strbuf_addf(&w->text, "%s bytes %llu-%llu: %s: no file holds it\n", name,
		    (unsigned long long)off, (unsigned long long)(off + len - 1), what.buf);
	o = owner_base(chain, name, off, len, "parity");
	json_object_object_add(o, "what", json_object_new_string(what.buf));
	json_object_array_add(w->owners, o);
	strbuf_release(&what);
}

/* A file that backs loop devices: its range followed up through each. */
static void follow_loops(struct walker *w, const char *chain, const struct loc_owner *o,
			 dev_t devno, int depth)
{
	struct stat a = { .st_dev = devno, .st_ino = o->ino }, b;

	if (o->path && stat(o->path, &a) < 0)
		return;
	for (size_t i = 0; i < w->loops.n; i++) {
		const struct bstack_loop *l = &w->loops.v[i];
		uint64_t uoff, ulen;

		if (stat(l->backing, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
		    !bstack_loop_map(l, o->file_off, o->len, &uoff, &ulen))
			continue;
		indent(w, depth);
		strbuf_addf(&w->text, "backs %s: its bytes %llu-%llu\n", l->name,
			    (unsigned long long)uoff, (unsigned long long)(uoff + ulen - 1));
		walk(w, chain, l->name, uoff, ulen, depth + 1);
	}
}

/* The path of o in the text, or a mark for the pending path number pend. */
static void text_path(struct walker *w, const struct loc_owner *o, size_t pend)
{
	if (pend != SIZE_MAX)
		strbuf_addf(&w->text, "%c%zu%c", PATH_MARK, pend, PATH_MARK);
	else if (o->path)
		names_escape(&w->text, o->path, strlen(o->path));
	else
		strbuf_addstr(&w->text, "(no path found)");
}

static void text_owner(struct walker *w, const struct loc_owner *o, int depth, size_t pend)
{
	indent(w, depth);
	strbuf_addf(&w->text, "bytes %llu-%llu: ", (unsigned long long)o->off,
		    (unsigned long long)(o->off + o->len - 1));
	if (o->kind == LOC_FILE) {
		strbuf_addstr(&w->text, "file ");
		text_path(w, o, pend);
		strbuf_addf(&w->text, " (inode %llu", (unsigned long long)o->ino);
		if (o->root)
			strbuf_addf(&w->text, ", subvolume %llu", (unsigned long long)o->root);
		strbuf_addf(&w->text, "), %s bytes %llu-%llu\n", o->what,
			    (unsigned long long)o->file_off,
			    (unsigned long long)(o->file_off + o->len - 1));
		return;
	}
	strbuf_addf(&w->text, "%s%s", o->kind == LOC_META ? "metadata: " :
		    o->kind == LOC_UNKNOWN ? "not resolved: " : "", o->what);
	if (o->ino)
		strbuf_addf(&w->text, " (inode %llu)", (unsigned long long)o->ino);
	strbuf_addch(&w->text, '\n');
}

static json_object *json_owner(struct walker *w, const char *chain, const char *name,
			       const struct fsmount *m, const struct loc_owner *o)
{
	json_object *j = owner_base(chain, name, o->off, o->len, kind_name(o->kind));

	json_object_object_add(j, "fstype", json_object_new_string(m->fstype));
	json_object_object_add(j, "mountpoint", json_object_new_string(m->target));
	json_object_object_add(j, "what", json_object_new_string(o->what ? o->what : ""));
	if (o->ino)
		json_object_object_add(j, "inode", json_object_new_int64((int64_t)o->ino));
	if (o->root)
		json_object_object_add(j, "subvolume", json_object_new_int64((int64_t)o->root));
	if (o->kind == LOC_FILE) {
		json_object_object_add(j, "path", o->path ? json_object_new_string(o->path) : NULL);
		json_object_object_add(j, "file_offset",
				       json_object_new_int64((int64_t)o->file_off));
	}
	json_object_array_add(w->owners, j);
	return j;
}

/* A file owner of the filesystem at m without a path: pending, its number; else SIZE_MAX. */
static size_t pend(struct walker *w, const struct fsmount *m, dev_t devno,
		   const struct loc_owner *o)
{
	struct loc_fs fs = { .target = m->target, .devno = devno };

	if (!strcmp(m->fstype, "btrfs") || !loc_needs_name(&fs, o))
		return SIZE_MAX;
	w->pending = xrealloc(w->pending, (w->nr_pending + 1) * sizeof(*w->pending));
	w->pending[w->nr_pending] = (struct pending){ .m = m, .devno = devno, .ino = o->ino };
	return w->nr_pending++;
}

static int owner_cmp(const void *a, const void *b)
{
	const struct loc_owner *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* The owners a filesystem gave, in device order, with what it does not cover. */
static void say_owners(struct walker *w, const char *chain, const char *name, dev_t devno,
		       const struct fsmount *m, struct loc_owners *o, uint64_t off,
		       uint64_t len, int depth)
{
	uint64_t at = off;

	sort_items(o->v, o->n, sizeof(*o->v), owner_cmp);
	for (size_t i = 0; i < o->n; i++) {
		if (o->v[i].off > at)
			say_none(w, chain, name, at, o->v[i].off - at, depth, " (outside the filesystem)");
		size_t p = pend(w, m, devno, &o->v[i]);
		json_object *j;

		text_owner(w, &o->v[i], depth, p);
		j = json_owner(w, chain, name, m, &o->v[i]);
		if (p != SIZE_MAX)
			w->pending[p].j = j;
		if (o->v[i].kind == LOC_FILE)
			w->code |= EXIT_UNCORRECTED;
		else if (o->v[i].kind == LOC_UNKNOWN)
			w->code |= EXIT_OPERATIONAL;
		at = o->v[i].off + o->v[i].len > at ? o->v[i].off + o->v[i].len : at;
		if (o->v[i].kind == LOC_FILE)
			follow_loops(w, chain, &o->v[i], devno, depth + 1);
	}
	if (at < off + len)
		say_none(w, chain, name, at, off + len - at, depth, " (outside the filesystem)");
}

/* The filesystem mounted from name: asked about [off, off + len). */
static void ask_fs(struct walker *w, const char *chain, const char *name, dev_t devno,
		   const struct fsmount *m, uint64_t off, uint64_t len, int depth)
{
	char devpath[BSTACK_NAME_MAX + 8];
	struct loc_owners o = { 0 };
	struct loc_fs fs = { .target = m->target, .fstype = m->fstype, .devno = devno,
			     .devpath = loc_devpath(m, devno, name, devpath, sizeof(devpath)) };
	int ret;

	indent(w, depth);
	strbuf_addf(&w->text, "%s bytes %llu-%llu: %s mounted on ", name, (unsigned long long)off,
		    (unsigned long long)(off + len - 1), m->fstype);
	names_escape(&w->text, m->target, strlen(m->target));
	strbuf_addch(&w->text, '\n');
	ret = loc_owners_of(&fs, off, len, &o);
	if (ret) {
		fprintf(stderr, "fscrub locate: cannot map %s on '%s': %s\n", name, m->target,
			strerror(-ret));
		w->code |= EXIT_OPERATIONAL;
	} else {
		say_owners(w, chain, name, devno, m, &o, off, len, depth + 1);
	}
	loc_owners_release(&o);
}

/* Partitions and holders of name: each hop walked; false if there were none. */
static bool walk_up(struct walker *w, const char *chain, const char *name, dev_t devno,
		    uint64_t off, uint64_t len, int depth)
{
	struct bstack_hops hops = { 0 };
	struct strbuf unsupported = STRBUF_INIT;
	int ret = bstack_partitions(&w->bs, name, off, len, &hops);
	bool any;

	if (!ret)
		ret = bstack_holders(&w->bs, name, devno, off, len, &hops, &unsupported);
	if (ret) {
		fprintf(stderr, "fscrub locate: cannot read the devices stacked on %s: %s\n", name,
			strerror(-ret));
		w->code |= EXIT_OPERATIONAL;
	}
	if (unsupported.len) {
		indent(w, depth);
		strbuf_addf(&w->text, "not followed: %s", unsupported.buf);
		w->code |= EXIT_OPERATIONAL;
	}
	for (size_t i = 0; i < hops.n; i++) {
		if (hops.v[i].parity) {
			say_parity(w, chain, name, off, len, &hops.v[i], depth);
			continue;
		}
		indent(w, depth);
		strbuf_addf(&w->text, "%s (%s) bytes %llu-%llu\n", hops.v[i].name, hops.v[i].how,
			    (unsigned long long)hops.v[i].off,
			    (unsigned long long)(hops.v[i].off + hops.v[i].len - 1));
		walk(w, chain, hops.v[i].name, hops.v[i].off, hops.v[i].len, depth + 1);
	}
	any = hops.n || unsupported.len;
	bstack_hops_release(&hops);
	strbuf_release(&unsupported);
	return any;
}

static void walk(struct walker *w, const char *chain, const char *name, uint64_t off,
		 uint64_t len, int depth)
{
	struct strbuf here = STRBUF_INIT;
	const struct fsmount *m;
	dev_t devno;
	bool any;

	if (depth > MAX_DEPTH || bstack_devno_of(&w->bs, name, &devno)) {
		fprintf(stderr, "fscrub locate: cannot follow the devices past %s\n", name);
		w->code |= EXIT_OPERATIONAL;
		return;
	}
	strbuf_addf(&here, "%s%s%s", chain, *chain ? " > " : "", name);
	m = mount_of(w, devno);
	if (m)
		ask_fs(w, here.buf, name, devno, m, off, len, depth);
	any = walk_up(w, here.buf, name, devno, off, len, depth) || m;
	if (!any)
		say_none(w, here.buf, name, off, len, depth, "");
	strbuf_release(&here);
}

/* One range of the device: its text kept in texts, its owners added to ranges. */
static void one_range(struct walker *w, const char *name, const char *arg, uint64_t off,
		      uint64_t len, json_object *ranges, struct strbuf *text)
{
	json_object *r = json_object_new_object();

	strbuf_reset(&w->text);
	w->owners = json_object_new_array();
	walk(w, "", name, off, len, 0);
	strbuf_addf(text, "%s (bytes %llu-%llu):\n%s", arg, (unsigned long long)off,
		    (unsigned long long)(off + len - 1), w->text.buf);
	json_object_object_add(r, "range", json_object_new_string(arg));
	json_object_object_add(r, "offset", json_object_new_int64((int64_t)off));
	json_object_object_add(r, "length", json_object_new_int64((int64_t)len));
	json_object_object_add(r, "owners", w->owners);
	json_object_array_add(ranges, r);
}

/* The pending paths of the filesystem at m, by one walk of it. */
static void name_mount(struct walker *w, const struct fsmount *m)
{
	struct loc_owners o = { 0 };
	struct loc_fs fs = { .target = m->target };

	for (size_t i = 0; i < w->nr_pending; i++) {
		if (w->pending[i].m != m)
			continue;
		fs.devno = w->pending[i].devno;
		loc_owner_add(&o, LOC_FILE, 0, 0, NULL, NULL)->ino = w->pending[i].ino;
	}
	loc_name_by_walk(&fs, &o);
	for (size_t i = 0, k = 0; i < w->nr_pending; i++) {
		if (w->pending[i].m != m)
			continue;
		w->pending[i].path = o.v[k].path;
		o.v[k++].path = NULL;
		if (w->pending[i].path)
			json_object_object_add(w->pending[i].j, "path",
					       json_object_new_string(w->pending[i].path));
	}
	loc_owners_release(&o);
}

/* Every pending path named, a walk per filesystem. */
static void name_pending(struct walker *w)
{
	for (size_t i = 0; i < w->mounts.nr; i++)
		for (size_t k = 0; k < w->nr_pending; k++)
			if (w->pending[k].m == &w->mounts.v[i]) {
				name_mount(w, &w->mounts.v[i]);
				break;
			}
}

/* text with each pending mark replaced by its path (escaped), written to stdout. */
static void print_text(const struct walker *w, const char *text)
{
	struct strbuf out = STRBUF_INIT;

	for (const char *p = text; *p; p++) {
		char *end;
		size_t k;

		if (*p != PATH_MARK) {
			strbuf_addch(&out, *p);
			continue;
		}
		k = strtoul(p + 1, &end, 10);
		if (k < w->nr_pending && w->pending[k].path)
			names_escape(&out, w->pending[k].path, strlen(w->pending[k].path));
		else
			strbuf_addstr(&out, "(no path found)");
		p = end;	/* the closing mark */
	}
	fputs(out.buf, stdout);
	strbuf_release(&out);
}

static void pending_release(struct walker *w)
{
	for (size_t i = 0; i < w->nr_pending; i++)
		free(w->pending[i].path);
	free(w->pending);
	w->pending = NULL;
	w->nr_pending = 0;
}

/* Every range argument (and --from's lines) checked before anything is asked. */
struct range_list {
	char **arg;
	uint64_t *off, *len;
	size_t n;
};

static int add_range(struct range_list *rl, const char *arg, uint64_t unit, uint64_t size)
{
	uint64_t off, len;

	if (!parse_range(arg, unit, &off, &len))
		return usage_error("not a sector or range of sectors:", arg);
	if (off + len > size)
		return usage_error("past the end of the device:", arg);
	rl->arg = xrealloc(rl->arg, (rl->n + 1) * sizeof(*rl->arg));
	rl->off = xrealloc(rl->off, (rl->n + 1) * sizeof(*rl->off));
	rl->len = xrealloc(rl->len, (rl->n + 1) * sizeof(*rl->len));
	rl->arg[rl->n] = xstrdup(arg);
	rl->off[rl->n] = off;
	rl->len[rl->n++] = len;
	return 0;
}

static int read_from(struct range_list *rl, const char *path, uint64_t unit, uint64_t size)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	char line[256];
	int ret = 0;

	if (!f) {
		fprintf(stderr, "fscrub locate: cannot open '%s': %s\n", path, strerror(errno));
		return EXIT_USAGE;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		char *s = line + strspn(line, " \t");

		s[strcspn(s, " \t\r\n#")] = 0;
		if (*s)
			ret = add_range(rl, s, unit, size);
	}
	if (f != stdin)
		fclose(f);
	return ret;
}

static void range_list_release(struct range_list *rl)
{
	for (size_t i = 0; i < rl->n; i++)
		free(rl->arg[i]);
	free(rl->arg);
	free(rl->off);
	free(rl->len);
}

static int parse_opts(int argc, char **argv, struct loc_opts *opt)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'J' },
		{ "unit", required_argument, NULL, 'u' },
		{ "from", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opt->unit = 512;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'J') {
			opt->json = true;
		} else if (c == 'u') {
			if (!strcmp(optarg, "512") || !strcmp(optarg, "4096"))
				opt->unit = strtoull(optarg, NULL, 10);
			else if (!strcmp(optarg, "bytes"))
				opt->unit = 1;
			else
				return usage_error("--unit is 512, 4096 or bytes, not", optarg);
		} else if (c == 'f') {
			opt->from = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return -1;
		} else {
			fputs("Try 'fscrub locate --help' for more information.\n", stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return usage_error("a DEVICE is needed:", "");
	if (optind + 1 == argc && !opt->from)
		return usage_error("a SECTOR, a range or --from FILE is needed after", argv[optind]);
	return 0;
}

/* The device's kernel name and size; 16 if it is not a block device. */
static int the_device(struct walker *w, const char *dev, char *name, uint64_t *size)
{
	struct stat st;
	int ret;

	if (stat(dev, &st) < 0 || !S_ISBLK(st.st_mode))
		return usage_error("not a block device:", dev);
	ret = bstack_name_of(&w->bs, st.st_rdev, name, BSTACK_NAME_MAX);
	if (!ret)
		ret = bstack_size_of(&w->bs, name, size);
	if (ret) {
		fprintf(stderr, "fscrub locate: cannot find '%s' in sysfs: %s\n", dev,
			strerror(-ret));
		return EXIT_OPERATIONAL;
	}
	return 0;
}

static int run(struct walker *w, const struct loc_opts *opt, const char *dev,
	       const struct range_list *rl, const char *name)
{
	json_object *top = json_object_new_object(), *ranges = json_object_new_array();
	struct strbuf text = STRBUF_INIT;

	for (size_t i = 0; i < rl->n; i++)
		one_range(w, name, rl->arg[i], rl->off[i], rl->len[i], ranges, &text);
	name_pending(w);
	json_object_object_add(top, "device", json_object_new_string(dev));
	json_object_object_add(top, "unit", json_object_new_int64((int64_t)opt->unit));
	json_object_object_add(top, "ranges", ranges);
	json_object_object_add(top, "exit_code", json_object_new_int(w->code));
	if (opt->json)
		printf("%s\n", json_object_to_json_string_ext(top, JSON_C_TO_STRING_PRETTY |
							       JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		print_text(w, text.buf);
	json_object_put(top);
	strbuf_release(&text);
	pending_release(w);
	if (fflush(stdout) || ferror(stdout))
		w->code |= EXIT_OPERATIONAL;
	return w->code;
}

int cmd_locate(int argc, char **argv)
{
	struct loc_opts opt = { 0 };
	struct walker w = { .bs = { "/sys" }, .text = STRBUF_INIT };
	struct range_list rl = { 0 };
	char name[BSTACK_NAME_MAX];
	uint64_t size = 0;
	int ret = parse_opts(argc, argv, &opt);

	if (ret)
		return ret < 0 ? 0 : ret;
	ret = the_device(&w, argv[optind], name, &size);
	for (int i = optind + 1; !ret && i < argc; i++)
		ret = add_range(&rl, argv[i], opt.unit, size);
	if (!ret && opt.from)
		ret = read_from(&rl, opt.from, opt.unit, size);
	if (!ret)
		ret = fsmounts_collect("locate", NULL, 0, known_fs, &w.mounts);
	if (!ret) {
		bstack_loops(&w.bs, &w.loops);
		ret = run(&w, &opt, argv[optind], &rl, name);
		fsmounts_release(&w.mounts);
	}
	locate_ext4_release();
	bstack_loops_release(&w.loops);
	range_list_release(&rl);
	strbuf_release(&w.text);
	return ret;
}
