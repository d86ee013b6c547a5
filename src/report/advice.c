/*
 * advice: the table of what to do per check id; see advice.h.
 *
 * One row per check id of checks.h, in its order: the action and, where
 * the action's own sentence would not say enough, a sentence of the row's.
 * tests/integration/test_cli.py reads this table: every id of checks.h
 * must have a row, and its sentence must be the one fscrub(8) gives.  Keep
 * the rows' form, "{ CHECK_..., ADVICE_..., NULL or "text" },", for it.
 */
#include "report/advice.h"

#include <ctype.h>
#include <string.h>

#include "report/checks.h"
#include "lib/strbuf.h"

struct advice_row {
	const char *check;
	enum advice_action action;
	const char *text;	/* NULL: the action's sentence */
};

static const struct advice_row advice_table[] = {
	{ CHECK_DIRENT_INO, ADVICE_OFFLINE, NULL },
	{ CHECK_DIRENT_DANGLING, ADVICE_OFFLINE, NULL },
	{ CHECK_DIRENT_TYPE, ADVICE_OFFLINE, NULL },
	{ CHECK_DIR_DOT, ADVICE_OFFLINE, NULL },
	{ CHECK_DIR_DOTDOT, ADVICE_OFFLINE, NULL },
	{ CHECK_DIR_NLINK, ADVICE_OFFLINE, NULL },
	{ CHECK_DIR_MULTIPLY_LINKED, ADVICE_OFFLINE, NULL },
	{ CHECK_DIR_UNREADABLE, ADVICE_OFFLINE, NULL },
	{ CHECK_DIR_LOCKED, ADVICE_NONE,
	  "Nothing to do: load the directory's key to have its files checked." },
	{ CHECK_NAME_EMPTY, ADVICE_OFFLINE, NULL },
	{ CHECK_NAME_SLASH, ADVICE_OFFLINE, NULL },
	{ CHECK_NAME_DUPLICATE, ADVICE_OFFLINE, NULL },
	{ CHECK_NAME_ENCODING, ADVICE_RENAME, NULL },
	{ CHECK_NAME_CONTROL, ADVICE_RENAME, NULL },
	{ CHECK_NAME_NFC_TWIN, ADVICE_RENAME, NULL },
	{ CHECK_NAME_NFKC_TWIN, ADVICE_RENAME, NULL },
	{ CHECK_NAME_CONFUSABLE, ADVICE_RENAME, NULL },
	{ CHECK_NAME_CASEFOLD_TWIN, ADVICE_OFFLINE, NULL },
	{ CHECK_NAME_MIXED_SCRIPT, ADVICE_RENAME, NULL },
	{ CHECK_NAME_BIDI, ADVICE_RENAME, NULL },
	{ CHECK_NAME_INVISIBLE, ADVICE_RENAME, NULL },
	{ CHECK_NAME_OPTION_LIKE, ADVICE_RENAME, NULL },
	{ CHECK_INODE_UNREADABLE, ADVICE_OFFLINE, NULL },
	{ CHECK_INODE_VERITY_UNSUPPORTED, ADVICE_NONE,
	  "Nothing to do: on a kernel with fs-verity the file's data is checked too." },
	{ CHECK_INODE_NLINK_ZERO, ADVICE_OFFLINE, NULL },
	{ CHECK_NLINK_COUNT, ADVICE_OFFLINE, NULL },
	{ CHECK_SYMLINK_SIZE, ADVICE_OFFLINE, NULL },
	{ CHECK_SYMLINK_EMPTY, ADVICE_OFFLINE, NULL },
	{ CHECK_SYMLINK_UNREADABLE, ADVICE_OFFLINE, NULL },
	{ CHECK_SYMLINK_UNREAD, ADVICE_NONE,
	  "Nothing to do: run as root to have symbolic links read without changing their "
	  "atime." },
	{ CHECK_EXTENT_UNREADABLE, ADVICE_OFFLINE, NULL },
	{ CHECK_EXTENT_ZERO_LENGTH, ADVICE_OFFLINE, NULL },
	{ CHECK_EXTENT_OVERLAP, ADVICE_OFFLINE, NULL },
	{ CHECK_EXTENT_PAST_DEVICE, ADVICE_OFFLINE, NULL },
	{ CHECK_EXTENT_LAST_FLAG, ADVICE_OFFLINE, NULL },
	{ CHECK_EXTENT_COUNT, ADVICE_OFFLINE, NULL },
	{ CHECK_EXTENT_CROSSLINKED, ADVICE_OFFLINE, NULL },
	{ CHECK_EXTENT_UNSUPPORTED, ADVICE_NONE, NULL },
	{ CHECK_XATTR_UNREADABLE, ADVICE_OFFLINE, NULL },
	{ CHECK_XATTR_SIZE, ADVICE_OFFLINE, NULL },
	{ CHECK_XATTR_MISSING, ADVICE_OFFLINE, NULL },
	{ CHECK_XATTR_TOO_MANY, ADVICE_NONE, NULL },
	{ CHECK_DATA_READ, ADVICE_RESTORE, NULL },
	{ CHECK_MEDIA_FILE, ADVICE_RESTORE,
	  "Restore this file from a backup, and check the device's health (smartctl -a): "
	  "sectors under it are unreadable." },
	{ CHECK_MEDIA_METADATA, ADVICE_DEVICE,
	  "Copy the device to a healthy one (ddrescue), replace it, and run the offline "
	  "checker on the copy." },
	{ CHECK_MEDIA_UNOWNED, ADVICE_RECHECK,
	  "No file is damaged: check the device's health (smartctl -a) and replace it if "
	  "unreadable sectors keep appearing." },
	{ CHECK_MEDIA_RECOVERED, ADVICE_RECHECK,
	  "Nothing is lost: check the device's health (smartctl -a); errors that come back "
	  "mean it is failing." },
	{ CHECK_STATFS_COUNTERS, ADVICE_OFFLINE, NULL },
	{ CHECK_SUMMARY_COUNTS, ADVICE_NONE, NULL },
	{ CHECK_WALK_SUBMOUNT, ADVICE_NONE, "Nothing to do: scrub that mount on its own." },
	{ CHECK_WALK_MOVED, ADVICE_NONE, NULL },
	{ CHECK_BTRFS_SCRUB, ADVICE_DEVICE,
	  "Check the device (btrfs device stats, smartctl -a), replace it if it is failing, "
	  "and restore the files the other findings name." },
	{ CHECK_BTRFS_DATA_CSUM, ADVICE_RESTORE,
	  "Restore this file from a backup: btrfs found no good copy of the range." },
	{ CHECK_BTRFS_TREE, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_DEV_STATS, ADVICE_DEVICE,
	  "Check the device's health (smartctl -a) and replace it (btrfs replace) if it is "
	  "failing; btrfs device stats -z resets the counters." },
	{ CHECK_BTRFS_NO_KMSG, ADVICE_NONE, NULL },
	{ CHECK_BTRFS_MISSING_DEVICE, ADVICE_DEVICE,
	  "Reattach the missing device and remount, or replace it: btrfs replace start DEVID "
	  "NEWDEVICE MOUNTPOINT." },
	{ CHECK_BTRFS_EXTENT_REFS, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_CROSSLINK, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_ROOT_REF, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_CSUM, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_FREE_SPACE_TREE, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_SPACE_CACHE, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_DIR_ITEM, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_INODE_REF, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_ORPHAN, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_NBYTES, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_FILE_EXTENT, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_INODE_FLAGS, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_QGROUP, ADVICE_RECHECK,
	  "Recount the quota groups while mounted: btrfs quota rescan -w MOUNTPOINT; if the "
	  "counts stay wrong, or the message names a relation cycle (a rescan does not mend "
	  "relation items), run btrfs check --readonly on the unmounted filesystem." },
	{ CHECK_BTRFS_EXTENT_ITEM, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_BG_USED, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_BYTES_USED, ADVICE_OFFLINE, NULL },
	{ CHECK_BTRFS_CHUNK, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_SCRUB, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_PREEN, ADVICE_NONE, NULL },
	{ CHECK_XFS_SCRUB_WARNING, ADVICE_RECHECK,
	  "Run fscrub again when the filesystem is quieter; a warning that stays calls for "
	  "xfs_repair -n." },
	{ CHECK_XFS_SCRUB_UNSUPPORTED, ADVICE_NONE, NULL },
	{ CHECK_XFS_HEALTH, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_ORPHAN, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_BULKSTAT, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_RMAP_MISSING, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_RMAP_EXTRA, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_FSMAP_COUNTS, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_ONDISK, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_INODE_ALLOC, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_UNLINKED, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_SPACE, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_REFCOUNT, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_BLOCK_COUNT, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_SB_SECONDARY, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_COUNTERS, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_QUOTA, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_DIR_HASH, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_DIR_FREE, ADVICE_OFFLINE, NULL },
	{ CHECK_XFS_ATTR_HASH, ADVICE_OFFLINE, NULL },
	{ CHECK_LEDGER_BITROT, ADVICE_RESTORE,
	  "Restore this file from a backup: its content changed while its size and times did "
	  "not." },
	{ CHECK_LEDGER_RECORD, ADVICE_RECHECK,
	  "Nothing is damaged: the file has no checksum record; run fscrub --record again when "
	  "it is not being written." },
	{ CHECK_MANIFEST_MISMATCH, ADVICE_RESTORE,
	  "Restore this file from a backup or reinstall its package, unless it was changed on "
	  "purpose." },
	{ CHECK_MANIFEST_MISSING, ADVICE_NONE, NULL },
	{ CHECK_EXT4_UNCHECKED, ADVICE_NONE, NULL },
	{ CHECK_EXT4_SUPERBLOCK, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_SB_BACKUP, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_MMP, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_GROUP_DESC, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_BLOCK_BITMAP, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_INODE_BITMAP, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_GROUP_COUNTS, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_STATFS, ADVICE_NONE, NULL },
	{ CHECK_EXT4_INODE_CSUM, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_EXTENT, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_BLOCK_MAP, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_EXTENT_MAP, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_DIR_BLOCK, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_HTREE, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_HTREE_HASH, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_ORPHAN, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_ORPHAN_LIST, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_NLINK, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_BLOCK_IN_USE, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_CROSSLINK, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_INODE_DTIME, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_INODE_FLAGS, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_INODE_FIELD, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_INODE_SIZE, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_INODE_BLOCKS, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_JOURNAL, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_XATTR_REFCOUNT, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_QUOTA, ADVICE_OFFLINE, NULL },
	{ CHECK_EXT4_EA_INODE, ADVICE_OFFLINE, NULL },
};

/* A finding's sentence when its row has none (offline: composed, offline_text()). */
static const char *const action_text[ADVICE_ACTIONS] = {
	[ADVICE_NONE] = "Nothing to do.",
	[ADVICE_RENAME] = "Nothing is damaged: rename it if you want to.",
	[ADVICE_RECHECK] = "Run fscrub again; if the finding stays, run the offline checker.",
	[ADVICE_RESTORE] = "Restore this file from a backup.",
	[ADVICE_DEVICE] = "Check the device's health (smartctl -a); replace it if it is failing.",
};

/* The summary's sentence of each action (offline: composed). */
static const char *const summary_text[ADVICE_ACTIONS] = {
	[ADVICE_RENAME] = "Nothing is damaged: rename what the warnings name if you want to.",
	[ADVICE_RECHECK] = "Run fscrub again to see whether the warnings stay.",
	[ADVICE_RESTORE] = "Restore the damaged files from a backup (fscrub status lists them).",
	[ADVICE_DEVICE] = "Check the devices first (smartctl -a): replace a failing one, reattach "
			  "a missing one.",
};

static const char *const action_name[ADVICE_ACTIONS] = {
	[ADVICE_NONE] = "none", [ADVICE_RENAME] = "rename", [ADVICE_RECHECK] = "recheck",
	[ADVICE_RESTORE] = "restore", [ADVICE_OFFLINE] = "offline", [ADVICE_DEVICE] = "device",
};

/* A filesystem's offline checker: run read-only first, then to repair. */
struct checker {
	const char *fstype;
	const char *check;
	const char *repair;	/* NULL: no repair to advise without its output */
	bool boot_fsck;		/* systemd-fsck checks it at boot with fsck.mode=force */
};

static const struct checker checkers[] = {
	{ "xfs", "xfs_repair -n", "xfs_repair", false },
	{ "ext4", "e2fsck -fn", "e2fsck -f", true },
	{ "ext3", "e2fsck -fn", "e2fsck -f", true },
	{ "ext2", "e2fsck -fn", "e2fsck -f", true },
	/* btrfs check --repair can make things worse: its own manual says so. */
	{ "btrfs", "btrfs check --readonly", NULL, false },
};

static const struct checker fallback_checker = { NULL, "fsck -n", "fsck", true };

static const struct checker *checker_of(const char *fstype)
{
	for (size_t i = 0; fstype && i < sizeof(checkers) / sizeof(checkers[0]); i++)
		if (!strcmp(checkers[i].fstype, fstype))
			return &checkers[i];
	return &fallback_checker;
}

static const struct advice_row *row_of(const char *check)
{
	for (size_t i = 0; check && i < sizeof(advice_table) / sizeof(advice_table[0]); i++)
		if (!strcmp(advice_table[i].check, check))
			return &advice_table[i];
	return NULL;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* A check id without a row (added on another branch): its class by prefix. */
static enum advice_action action_by_prefix(const char *check)
{
	if (!check)
		return ADVICE_OFFLINE;
	if (has_prefix(check, "name."))
		return ADVICE_RENAME;
	if (has_prefix(check, "data.") || has_prefix(check, "media.") ||
	    has_prefix(check, "ledger.") || has_prefix(check, "manifest."))
		return ADVICE_RESTORE;
	return ADVICE_OFFLINE;
}

static enum advice_action row_action(const char *check)
{
	const struct advice_row *row = row_of(check);

	return row ? row->action : action_by_prefix(check);
}

enum advice_action advice_action(const char *check, enum severity sev)
{
	enum advice_action a = row_action(check);

	/* An info is never damage; what was corrected needs nothing, unless a device failed. */
	if (sev == SEV_INFO || (sev == SEV_REPAIRED && a != ADVICE_DEVICE))
		return ADVICE_NONE;
	return a;
}

const char *advice_action_name(enum advice_action a)
{
	return a < ADVICE_ACTIONS ? action_name[a] : "none";
}

/* "Unmount and run CHECK, then REPAIR to repair.", or how to get there for /. */
static void offline_text(struct strbuf *sb, const struct advice_fs *fs)
{
	const struct checker *c = checker_of(fs ? fs->fstype : NULL);

	if (fs && fs->root)
		strbuf_addf(sb, "Boot from rescue media%s and run %s on the unmounted filesystem",
			    c->boot_fsck ? " (or with fsck.mode=force)" : "", c->check);
	else
		strbuf_addf(sb, "Unmount and run %s", c->check);
	if (c->repair)
		strbuf_addf(sb, ", then %s to repair.", c->repair);
	else
		strbuf_addstr(sb, "; repair only as its output advises.");
}

void advice_text(struct strbuf *sb, const char *check, enum severity sev,
		 const struct advice_fs *fs)
{
	const struct advice_row *row = row_of(check);
	enum advice_action a = advice_action(check, sev);

	if (sev == SEV_REPAIRED && a == ADVICE_NONE)
		strbuf_addstr(sb, "Nothing to do: it was corrected.");
	else if (row && row->text && row->action == a)
		strbuf_addstr(sb, row->text);
	else if (a == ADVICE_OFFLINE)
		offline_text(sb, fs);
	else
		strbuf_addstr(sb, action_text[a]);
}

enum advice_action advice_worst(unsigned actions)
{
	for (int a = ADVICE_ACTIONS - 1; a > ADVICE_NONE; a--)
		if (actions & (1u << a))
			return (enum advice_action)a;
	return ADVICE_NONE;
}

/* One action's summary sentence; "Then" before it, unless it comes first. */
static void summary_sentence(struct strbuf *sb, enum advice_action a, bool first,
			     const struct advice_fs *fs)
{
	size_t at;

	strbuf_addstr(sb, first ? " " : " Then ");
	at = sb->len;
	if (a == ADVICE_OFFLINE)
		offline_text(sb, fs);
	else
		strbuf_addstr(sb, summary_text[a]);
	if (!first)
		sb->buf[at] = (char)tolower((unsigned char)sb->buf[at]);
}

void advice_summary(struct strbuf *sb, unsigned actions, const struct advice_fs *fs)
{
	enum advice_action worst = advice_worst(actions);

	if (worst == ADVICE_NONE)
		return;
	summary_sentence(sb, worst, true, fs);
	/* The lesser actions a user must still take: the files to restore, say. */
	for (int a = (int)worst - 1; a >= ADVICE_RESTORE; a--)
		if (actions & (1u << a))
			summary_sentence(sb, (enum advice_action)a, false, fs);
}
