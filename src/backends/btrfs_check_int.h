/*
 * btrfs_check_int: what the modules of the btrfs tree check share (the
 * findings of a pass).  Only btrfs_check.c and the modules it drives
 * (btrfs_names.c) include this.
 */
#ifndef FSCRUB_BTRFS_CHECK_INT_H
#define FSCRUB_BTRFS_CHECK_INT_H

#include <stdint.h>

struct pass;

enum finding_kind {
	F_REFS_SUM,	/* extent item refs != sum of its back references */
	F_REF_COUNT,	/* a data back reference's count != file extent items */
	F_NO_BACKREF,	/* a file extent item without a back reference */
	F_CROSSLINK,	/* ... to an extent whose back references name other files */
	F_NO_EXTENT,	/* a file extent item pointing at no data extent item */
	F_REF_NO_ROOT,	/* a data back reference naming a tree that does not exist */
	F_NBYTES,
	F_BG_USED,
	F_BYTES_USED,
	F_ROOT_REF_ALONE,	/* a ROOT_REF without its ROOT_BACKREF or v.v. (a: key type) */
	F_ROOT_REF_DIR,		/* a ROOT_REF without its directory entry */
	F_ROOT_UNREFERENCED,	/* a live subvolume no ROOT_BACKREF names */
	F_CSUM_MISSING,		/* checksummed file data without csum items */
	F_CSUM_UNEXPECTED,	/* nodatasum file data with csum items */
	F_FST_USED_FREE,	/* the free space tree calls an extent's bytes free */
	F_FST_COUNT,		/* a FREE_SPACE_INFO's extent count != its free ranges */
	/* btrfs_names.c */
	F_DIR_PAIR,		/* a directory's DIR_ITEMs and DIR_INDEXes differ */
	F_DIR_ISIZE,		/* a directory's i_size != its names' bytes */
	F_ENTRY_NO_REF,		/* a DIR_INDEX entry without the inode's INODE_REF */
	F_REF_NO_ENTRY,		/* an INODE_REF without the directory's DIR_INDEX */
	F_NLINK_REFS,		/* nlink != INODE_REF / INODE_EXTREF names */
	F_UNNAMED,		/* linked inode without any name */
	F_ORPHAN_LOST,		/* unlinked inode not on the orphan list */
};

/* A finding, kept until the second pass has confirmed it. */
struct tfinding {
	enum finding_kind kind;
	uint64_t root, ino, file_off;	/* the file named (0: none) */
	uint64_t logical, len;
	uint64_t a, b;			/* recorded vs found */
	uint64_t ref_off;		/* F_REF_COUNT: the back reference's offset */
	uint64_t other_root, other_ino;	/* F_CROSSLINK: the file the extent belongs to */
	const char *name;		/* a name, owned by the pass (root refs, dir entries) */
	uint64_t transid;		/* newest leaf among the items involved */
};

/*
 * Keep a finding of this pass (btrfs_check.c): the second pass and the
 * live-filesystem rule decide later whether it is an error.
 */
void btrfs_add_finding(struct pass *p, const struct tfinding *f);

#endif
