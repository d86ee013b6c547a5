/*
 * confine: capabilities, Landlock and seccomp for the rest of a scan; see
 * confine.h.
 *
 * The order matters: no_new_privs first (Landlock and an unprivileged
 * seccomp filter need it, and nothing exec'd later could regain what is
 * dropped), then Landlock (its ruleset opens the allowed directories, so
 * before the capabilities that might be needed to reach them go), then
 * the capabilities, then seccomp last (it would refuse prctl's bounding
 * set changes if it came first).
 */
#include "scan/confine.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/landlock.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report/checks.h"
#include "scan/context.h"
#include "scan/history.h"
#include "lib/outfile.h"
#include "report/report.h"
#include "lib/strbuf.h"

/* Landlock ABI 3 (Linux 6.2) added truncate(2) and O_TRUNC; the build's headers may predate it. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

/*
 * The capabilities a scan keeps, and why.  Everything else goes, from the
 * bounding set too.  CAP_DAC_OVERRIDE is not kept: reading needs only
 * CAP_DAC_READ_SEARCH, and fscrub writes only its own files.
 */
static const struct {
	unsigned cap;
	const char *name;
} kept_caps[] = {
	{ CAP_SYS_ADMIN, "sys_admin" },		/* BULKSTAT, TREE_SEARCH, GETFSMAP, scrub, trusted.* */
	{ CAP_DAC_READ_SEARCH, "dac_read_search" },	/* every file and directory; open_by_handle_at */
	{ CAP_FOWNER, "fowner" },		/* O_NOATIME on files fscrub does not own */
	{ CAP_SYS_RAWIO, "sys_rawio" },		/* FIBMAP, where FIEMAP is missing */
	{ CAP_SYSLOG, "syslog" },		/* /dev/kmsg under dmesg_restrict: btrfs scrub's lines */
};

/*
 * System calls a scan never makes once phase 1 is done: running programs,
 * mounting and namespaces, tracing other processes, kernel modules and
 * kexec, identities, the clock, swap, BPF.  Refused with EPERM.
 */
static const char *const refused_calls[] = {
	"execve", "execveat", "ptrace", "process_vm_writev", "process_vm_readv",
	"mount", "umount2", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
	"open_tree", "mount_setattr", "pivot_root", "chroot", "unshare", "setns",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "bpf", "perf_event_open", "acct", "userfaultfd",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"setfsuid", "setfsgid", "sethostname", "setdomainname", "iopl", "ioperm",
	"add_key", "request_key", "keyctl", "personality", "mknod", "mknodat",
};

/* The sanitizers' leak check stops the world with ptrace: a sanitizer build keeps it. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZER_BUILD 1
#endif
#endif
#ifndef SANITIZER_BUILD
#define SANITIZER_BUILD 0
#endif

/* ----------------------------------------------------------------- Landlock */

static long landlock_abi(void)
{
	return syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
}

/* What Landlock is told to control: every way to change the file tree, and exec. */
static uint64_t handled_rights(long abi)
{
	uint64_t r = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
		     LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
		     LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
		     LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
		     LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		     LANDLOCK_ACCESS_FS_MAKE_SYM;

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	return r;
}

/* The rights a directory fscrub writes its results in keeps: files in it, made, replaced. */
static uint64_t writer_rights(uint64_t handled)
{
	return handled & (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_FILE |
			  LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR |
			  LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE);
}

/* A directory to write in, or a file (a FIFO, a device) to write to: NUL-separated, tagged. */
static void add_place(struct strbuf *places, char tag, const char *path)
{
	strbuf_addch(places, tag);
	strbuf_addstr(places, path);
	strbuf_addch(places, '\0');
}

/*
 * Where an output file is written, as outfile.c will write it: beside the
 * file its links lead to (a temporary file renamed over it), or to the
 * FIFO or device in place; nothing for a descriptor already open.
 */
static void add_output(struct strbuf *places, const char *name)
{
	struct strbuf target = STRBUF_INIT;
	int kind;

	if (!name)
		return;
	kind = outfile_target(name, &target);
	if (kind == OUTFILE_REPLACE)
		add_place(places, 'd', dirname(target.buf));
	else if (kind == OUTFILE_DEVICE)
		add_place(places, 'f', target.buf);
	strbuf_release(&target);
}

/* Allow rights beneath path (a directory, or one file); false (errno) if it cannot be opened. */
static bool allow_beneath(int ruleset, const char *path, uint64_t rights)
{
	struct landlock_path_beneath_attr pb = { .allowed_access = rights };
	int ret;

	pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (pb.parent_fd < 0)
		return false;
	ret = (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	close(pb.parent_fd);
	return ret == 0;
}

/*
 * Writes only beneath the run history's directory, the ledger's, and the
 * directories of the JSON report and the metrics file; no exec anywhere.
 * Returns 0, -ENOSYS where the kernel has no Landlock, or a negative errno.
 */
static int confine_writes(struct scrub_ctx *ctx, struct strbuf *said)
{
	long abi = landlock_abi();
	struct landlock_ruleset_attr attr;
	struct strbuf dirs = STRBUF_INIT;
	int ruleset, err = 0;

	if (abi < 1)
		return -ENOSYS;
	attr.handled_access_fs = handled_rights(abi);
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0)
		return -errno;
	if (history_dir(ctx))
		add_place(&dirs, 'd', history_dir(ctx));
	if (ctx->opt.ledger_dir)
		add_place(&dirs, 'd', ctx->opt.ledger_dir);
	add_output(&dirs, ctx->opt.json_path);
	add_output(&dirs, ctx->opt.metrics_path);
	strbuf_addf(said, "Landlock ABI %ld: writes only in", abi);
	for (const char *d = dirs.buf; dirs.len && d < dirs.buf + dirs.len; d += strlen(d) + 1) {
		uint64_t rights = d[0] == 'd' ? writer_rights(attr.handled_access_fs)
					      : attr.handled_access_fs & LANDLOCK_ACCESS_FS_WRITE_FILE;

		/* A directory that is not there cannot be written in: nothing to allow. */
		if (!allow_beneath(ruleset, d + 1, rights) && errno != ENOENT && errno != ENOTDIR) {
			err = -errno;
			break;
		}
		strbuf_addf(said, " %s", d + 1);
	}
	if (dirs.len == 0)
		strbuf_addstr(said, " no place");
	if (!err && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		err = -errno;
	close(ruleset);
	strbuf_release(&dirs);
	return err;
}

/* ------------------------------------------------------------- capabilities */

static bool is_kept(unsigned cap)
{
	for (size_t i = 0; i < sizeof(kept_caps) / sizeof(kept_caps[0]); i++)
		if (kept_caps[i].cap == cap)
			return true;
	return false;
}

/* Does the process hold a capability (effective or permitted) it would not keep? */
static bool holds_more(void)
{
	for (unsigned cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (!is_kept(cap) &&
		    (capng_have_capability(CAPNG_EFFECTIVE, cap) ||
		     capng_have_capability(CAPNG_PERMITTED, cap)))
			return true;
	return false;
}

/*
 * Keep kept_caps, effective and permitted; empty the ambient set, and the
 * bounding set where CAP_SETPCAP allows.  Under the systemd unit the
 * capabilities are already no more than these (CapabilityBoundingSet=)
 * and capset(2) is refused (~@privileged): nothing to do then.
 */
static int drop_capabilities(struct strbuf *said)
{
	capng_select_t which = CAPNG_SELECT_CAPS | CAPNG_SELECT_AMBIENT;
	bool held[sizeof(kept_caps) / sizeof(kept_caps[0])];

	if (capng_get_caps_process() < 0)
		return -EIO;
	if (!holds_more()) {
		strbuf_addstr(said, "; capabilities: none beyond those kept");
		return 0;
	}
	if (capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP))
		which |= CAPNG_SELECT_BOUNDS;
	/* What is kept must be held already: capset(2) adds nothing to the permitted set. */
	for (size_t i = 0; i < sizeof(kept_caps) / sizeof(kept_caps[0]); i++)
		held[i] = capng_have_capability(CAPNG_PERMITTED, kept_caps[i].cap);
	capng_clear(CAPNG_SELECT_ALL);
	strbuf_addstr(said, "; capabilities left:");
	for (size_t i = 0; i < sizeof(kept_caps) / sizeof(kept_caps[0]); i++) {
		if (!held[i])
			continue;
		capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET,
			     kept_caps[i].cap);
		strbuf_addf(said, " %s", kept_caps[i].name);
	}
	if (!(which & CAPNG_SELECT_BOUNDS))
		strbuf_addstr(said, " (bounding set left as it was: no CAP_SETPCAP)");
	if (capng_apply(which) < 0)
		return -EPERM;
	return 0;
}

/* ------------------------------------------------------------------ seccomp */

static int refuse_calls(struct strbuf *said)
{
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
	unsigned refused = 0;
	int ret = 0;

	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(refused_calls) / sizeof(refused_calls[0]) && !ret; i++) {
		int nr = seccomp_syscall_resolve_name(refused_calls[i]);

		if (nr == __NR_SCMP_ERROR)	/* not on this architecture */
			continue;
		if (SANITIZER_BUILD && !strcmp(refused_calls[i], "ptrace"))
			continue;
		ret = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), nr, 0);
		refused++;
	}
	/* Sockets of any family but AF_UNIX (nss, syslog): a scan talks to no one. */
	if (!ret) {
		/* Spelled out: SCMP_A0() leaves datum_b to a warning of clang's. */
		const struct scmp_arg_cmp not_unix = {
			.arg = 0, .op = SCMP_CMP_NE, .datum_a = AF_UNIX, .datum_b = 0,
		};

		ret = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1, not_unix);
	}
	if (!ret)
		ret = seccomp_load(f);
	seccomp_release(f);
	if (!ret)
		strbuf_addf(said, "; seccomp: %u system calls and sockets but AF_UNIX refused",
			    refused);
	return ret;
}

/* ---------------------------------------------------------------- the run */

/* For the tests: what the confined process may do, tried and said (-v). */
static void probe(struct scrub_ctx *ctx, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	int write_err = fd < 0 ? errno : 0;
	char *const argv[] = { (char *)"true", NULL };

	if (fd >= 0)
		close(fd);
	execv("/bin/true", argv);	/* returns: it failed */
	report_verbose(ctx, "Phase 1: confinement probe: writing %s: %s; running /bin/true: %s",
		       path, write_err ? strerror(write_err) : "allowed", strerror(errno));
}

void confine_scan(struct scrub_ctx *ctx)
{
	struct strbuf said = STRBUF_INIT;
	const char *probe_path = getenv("FSCRUB_DEBUG_CONFINE_PROBE");
	int ret;

	if (getenv("FSCRUB_DEBUG_AFTER_BULK") || getenv("FSCRUB_DEBUG_AFTER_FSMAP")) {
		report_verbose(ctx, "Phase 1: not confined: a FSCRUB_DEBUG_AFTER_* hook runs a command");
		return;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		report_operational(ctx, NULL, NULL, errno, "cannot set no_new_privs: not confined");
		return;
	}
	ret = confine_writes(ctx, &said);
	if (ret == -ENOSYS || ret == -EOPNOTSUPP)
		strbuf_addstr(&said, "no Landlock in this kernel: writes not confined");
	else if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot confine writes (Landlock)");
	if ((ret = drop_capabilities(&said)) < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot drop capabilities");
	if ((ret = refuse_calls(&said)) < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot install the seccomp filter");
	report_verbose(ctx, "Phase 1: confined: %s", said.buf);
	strbuf_release(&said);
	if (probe_path)
		probe(ctx, probe_path);
}
