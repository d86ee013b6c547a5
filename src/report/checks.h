/*
 * checks: the stable identifier of every finding fscrub can report.
 *
 * An id names one check, not one message: the text report prints it in
 * brackets, the tests match on it, and man/fscrub.8 lists every one of them
 * under CHECKS.  Never rename an id; add a new one instead.
 */
#ifndef FSCRUB_CHECKS_H
#define FSCRUB_CHECKS_H

/* directory entries */
#define CHECK_DIRENT_INO	"dirent.ino"	/* d_ino != the inode the name resolves to */
#define CHECK_DIRENT_DANGLING	"dirent.dangling"	/* the entry's inode cannot be found */
#define CHECK_DIRENT_TYPE	"dirent.type"	/* d_type != the inode's file type */
#define CHECK_DIR_DOT		"dir.dot"	/* "." is not the directory itself */
#define CHECK_DIR_DOTDOT	"dir.dotdot"	/* ".." is not the directory we came from */
#define CHECK_DIR_NLINK		"dir.nlink"	/* nlink != 2 + subdirectories */
#define CHECK_DIR_MULTIPLY_LINKED "dir.multiply_linked"	/* a directory with two names */
#define CHECK_DIR_UNREADABLE	"dir.unreadable"	/* open or getdents fails with a media/corruption error */
#define CHECK_DIR_LOCKED	"dir.locked"	/* info: encrypted, its key not loaded: contents not checked */
/* names */
#define CHECK_NAME_EMPTY	"name.empty"
#define CHECK_NAME_SLASH	"name.slash"
#define CHECK_NAME_DUPLICATE	"name.duplicate"
#define CHECK_NAME_ENCODING	"name.encoding"	/* warning: not valid UTF-8 */
#define CHECK_NAME_CONTROL	"name.control"	/* warning: control characters */
/* ... names that deceive (tree/name_check.c); warnings but casefold_twin */
#define CHECK_NAME_NFC_TWIN	"name.nfc_twin"	/* two names, one text in NFC and NFD */
#define CHECK_NAME_NFKC_TWIN	"name.nfkc_twin"	/* two names equal after NFKC */
#define CHECK_NAME_CONFUSABLE	"name.confusable"	/* two names with one confusable skeleton */
#define CHECK_NAME_CASEFOLD_TWIN "name.casefold_twin"	/* error: one name to a casefolded directory */
#define CHECK_NAME_MIXED_SCRIPT	"name.mixed_script"	/* scripts mixed beyond moderately restrictive */
#define CHECK_NAME_BIDI		"name.bidi"	/* bidi embedding, override or isolate */
#define CHECK_NAME_INVISIBLE	"name.invisible"	/* zero-width or invisible characters */
#define CHECK_NAME_OPTION_LIKE	"name.option_like"	/* begins with '-' */
/* inodes */
#define CHECK_INODE_UNREADABLE	"inode.unreadable"	/* stat/open fails with a media/corruption error */
/* info: an fs-verity file on a kernel without fs-verity: not opened */
#define CHECK_INODE_VERITY_UNSUPPORTED "inode.verity_unsupported"
#define CHECK_INODE_NLINK_ZERO	"inode.nlink_zero"	/* reachable by a name but nlink is 0 */
#define CHECK_NLINK_COUNT	"nlink.count"	/* nlink != names found */
#define CHECK_SYMLINK_SIZE	"symlink.size"	/* readlink length != st_size */
#define CHECK_SYMLINK_EMPTY	"symlink.empty"
#define CHECK_SYMLINK_UNREADABLE "symlink.unreadable"
#define CHECK_SYMLINK_UNREAD	"symlink.unread"	/* info: not read, as that would change atimes */
/* extent maps */
#define CHECK_EXTENT_UNREADABLE	"extent.unreadable"	/* FIEMAP fails with a media/corruption error */
#define CHECK_EXTENT_ZERO_LENGTH "extent.zero_length"
#define CHECK_EXTENT_OVERLAP	"extent.overlap"	/* logical ranges overlap or go backwards */
#define CHECK_EXTENT_PAST_DEVICE "extent.past_device"
#define CHECK_EXTENT_LAST_FLAG	"extent.last_flag"	/* FIEMAP_EXTENT_LAST on an extent that is not the last */
#define CHECK_EXTENT_COUNT	"extent.count"	/* more extents than the file's blocks or the filesystem's */
#define CHECK_EXTENT_CROSSLINKED "extent.crosslinked"	/* device blocks claimed twice, not shared */
#define CHECK_EXTENT_UNSUPPORTED "extent.unsupported"	/* info, once per filesystem */
/* extended attributes */
#define CHECK_XATTR_UNREADABLE	"xattr.unreadable"
#define CHECK_XATTR_SIZE	"xattr.size"	/* value length differs between probe and read */
#define CHECK_XATTR_MISSING	"xattr.missing"	/* listed but cannot be found */
/* info: more names than listxattr() can return, and no other listing */
#define CHECK_XATTR_TOO_MANY	"xattr.too_many"
/* data */
#define CHECK_DATA_READ		"data.read"	/* a data read failed at an offset */
/* media errors found reading the device in physical order (-x) */
#define CHECK_MEDIA_FILE	"media.file"	/* unreadable device blocks in a file's data */
#define CHECK_MEDIA_METADATA	"media.metadata"	/* ... in filesystem metadata */
#define CHECK_MEDIA_UNOWNED	"media.unowned"	/* warning: ... in free space, or not confirmed */
/* info (fscrub watch): the kernel logged an I/O error there, and it reads now */
#define CHECK_MEDIA_RECOVERED	"media.recovered"
/* filesystem-wide */
#define CHECK_STATFS_COUNTERS	"statfs.counters"	/* free > total in statfs */
#define CHECK_SUMMARY_COUNTS	"summary.counts"	/* info: counted vs statfs */
#define CHECK_WALK_SUBMOUNT	"walk.submount"	/* info: a mount inside was not entered */
#define CHECK_WALK_MOVED	"walk.moved"	/* info: a directory moved away while queued */
/* btrfs (backends/btrfs/btrfs.c) */
#define CHECK_BTRFS_SCRUB	"btrfs.scrub"	/* a device's scrub counters: errors left / corrected */
#define CHECK_BTRFS_DATA_CSUM	"btrfs.data_csum"	/* a file's data failed its checksum */
#define CHECK_BTRFS_TREE	"btrfs.tree"	/* a tree (metadata) block failed its checks */
#define CHECK_BTRFS_DEV_STATS	"btrfs.dev_stats"	/* warning: nonzero device error counters */
#define CHECK_BTRFS_NO_KMSG	"btrfs.no_kmsg"	/* info: the kernel log cannot be read */
#define CHECK_BTRFS_MISSING_DEVICE "btrfs.missing_device"	/* mounted degraded: a device is missing */
/* btrfs logical trees (backends/btrfs/btrfs_check.c) */
#define CHECK_BTRFS_EXTENT_REFS	"btrfs.extent_refs"	/* data extent refs != its back refs != file extent items */
#define CHECK_BTRFS_CROSSLINK	"btrfs.crosslink"	/* a file uses a data extent whose back refs name other files */
#define CHECK_BTRFS_ROOT_REF	"btrfs.root_ref"	/* ROOT_REF / ROOT_BACKREF / directory entry disagree */
#define CHECK_BTRFS_CSUM	"btrfs.csum"	/* checksummed data without csum items, nodatasum data with, csums over no extent */
#define CHECK_BTRFS_FREE_SPACE_TREE "btrfs.free_space_tree"	/* free space tree calls used space free, or miscounts */
#define CHECK_BTRFS_SPACE_CACHE	"btrfs.space_cache"	/* the v1 free space cache calls used space free */
#define CHECK_BTRFS_DIR_ITEM	"btrfs.dir_item"	/* DIR_ITEM / DIR_INDEX / INODE_REF / dir i_size disagree */
#define CHECK_BTRFS_INODE_REF	"btrfs.inode_ref"	/* nlink != the inode's names */
#define CHECK_BTRFS_ORPHAN	"btrfs.orphan"	/* no name reaches a linked inode; unlinked one not on the orphan list */
#define CHECK_BTRFS_NBYTES	"btrfs.nbytes"	/* inode nbytes != the bytes of its file extents */
#define CHECK_BTRFS_FILE_EXTENT	"btrfs.file_extent"	/* file extents overlap, or leave a hole uncovered */
#define CHECK_BTRFS_EXTENT_ITEM	"btrfs.extent_item"	/* an extent item's generation, inline reference type or level */
#define CHECK_BTRFS_BG_USED	"btrfs.bg_used"	/* block group used != its extent items */
#define CHECK_BTRFS_BYTES_USED	"btrfs.bytes_used"	/* superblock bytes_used != the block groups' used */
#define CHECK_BTRFS_CHUNK	"btrfs.chunk"	/* chunks vs device extents vs block groups; DEV_ITEM bytes_used; extents past the device */
#define CHECK_BTRFS_INODE_FLAGS	"btrfs.inode_flags"	/* inode flags no kernel defines or sets together */
#define CHECK_BTRFS_QGROUP	"btrfs.qgroup"	/* a qgroup's (any level) referenced / exclusive bytes != its extents; a relation cycle */

/* XFS backend */
#define CHECK_XFS_SCRUB		"xfs.scrub"	/* the kernel's online scrub: corrupt, or repaired */
#define CHECK_XFS_PREEN		"xfs.preen"	/* info: the kernel could optimise the object */
#define CHECK_XFS_SCRUB_WARNING	"xfs.scrub_warning"	/* cross-reference failed, incomplete, suspicious */
#define CHECK_XFS_SCRUB_UNSUPPORTED "xfs.scrub_unsupported"	/* info: no online scrub or repair */
#define CHECK_XFS_HEALTH	"xfs.health"	/* the kernel's sick masks */
#define CHECK_XFS_ORPHAN	"xfs.orphan"	/* allocated, linked inode that no name reaches */
#define CHECK_XFS_BULKSTAT	"xfs.bulkstat"	/* BULKSTAT disagrees with stat */
#define CHECK_XFS_RMAP_MISSING	"xfs.rmap_missing"	/* a mapped extent without its reverse mapping */
#define CHECK_XFS_RMAP_EXTRA	"xfs.rmap_extra"	/* a reverse mapping without its extent */
#define CHECK_XFS_FSMAP_COUNTS	"xfs.fsmap_counts"	/* free space by GETFSMAP vs the counters */
#define CHECK_XFS_ONDISK	"xfs.ondisk"	/* an AG header, btree block, counter or inode on the disk is bad */
/* ... cross-referenced with each other (backends/xfs/xfs_xref.c) */
#define CHECK_XFS_INODE_ALLOC	"xfs.inode_alloc"	/* inode in use but free in the inobt, or the reverse */
#define CHECK_XFS_UNLINKED	"xfs.unlinked"	/* an AGI unlinked list: linked, free, looping inodes */
#define CHECK_XFS_SPACE		"xfs.space"	/* blocks free and used, used twice, or owned by none */
#define CHECK_XFS_REFCOUNT	"xfs.refcount"	/* refcountbt != the owners the rmapbt gives */
#define CHECK_XFS_BLOCK_COUNT	"xfs.block_count"	/* di_nblocks != the blocks the forks map */
#define CHECK_XFS_SB_SECONDARY	"xfs.sb_secondary"	/* a secondary superblock differs from the primary */
#define CHECK_XFS_COUNTERS	"xfs.counters"	/* the kernel's inode counters != its AGs' sums */
#define CHECK_XFS_QUOTA		"xfs.quota"	/* quota usage != what the id's inodes add up to */
/* ... name indexes of directories and attribute forks (backends/xfs/xfs_dirindex.c) */
#define CHECK_XFS_DIR_HASH	"xfs.dir_hash"	/* a dir2 hash entry, leaf or da node against the names */
#define CHECK_XFS_DIR_FREE	"xfs.dir_free"	/* a best-free table or free index against the data blocks */
#define CHECK_XFS_ATTR_HASH	"xfs.attr_hash"	/* an attr leaf entry's hash, order, or a da node's */
/* The checksum ledger and manifests (data/ledger.c): -x */
#define CHECK_LEDGER_BITROT	"ledger.bitrot"	/* content changed, size and times did not */
#define CHECK_LEDGER_RECORD	"ledger.record"	/* not stored; open for writing; hidden */
#define CHECK_MANIFEST_MISMATCH	"manifest.mismatch"	/* content differs from --manifest's digest */
#define CHECK_MANIFEST_MISSING	"manifest.missing"	/* info: files listed but not on this fs */
/* ext4 backend (backends/ext4/ext4*.c): on-disk metadata read from the device */
#define CHECK_EXT4_UNCHECKED	"ext4.unchecked"	/* info: part of the ext4 checks cannot be done */
#define CHECK_EXT4_SUPERBLOCK	"ext4.superblock"	/* primary superblock checksum or geometry */
#define CHECK_EXT4_SB_BACKUP	"ext4.sb_backup"	/* a backup superblock disagrees or is damaged */
#define CHECK_EXT4_MMP		"ext4.mmp"	/* the multiple-mount protection block */
#define CHECK_EXT4_GROUP_DESC	"ext4.group_desc"	/* group descriptor checksum or locations */
#define CHECK_EXT4_BLOCK_BITMAP	"ext4.block_bitmap"	/* block bitmap checksum (info: unclaimed blocks) */
#define CHECK_EXT4_INODE_BITMAP	"ext4.inode_bitmap"	/* inode bitmap checksum */
#define CHECK_EXT4_GROUP_COUNTS	"ext4.group_counts"	/* descriptor free counts != bitmap */
#define CHECK_EXT4_STATFS	"ext4.statfs"	/* info: descriptor free counts vs statfs */
#define CHECK_EXT4_INODE_CSUM	"ext4.inode_csum"	/* inode checksum */
#define CHECK_EXT4_EXTENT	"ext4.extent_tree"	/* extent tree structure or block checksum */
#define CHECK_EXT4_BLOCK_MAP	"ext4.block_map"	/* ext2/ext3 block map: a pointer outside the fs */
#define CHECK_EXT4_EXTENT_MAP	"ext4.extent_map"	/* on-disk extents != FIEMAP */
#define CHECK_EXT4_DIR_BLOCK	"ext4.dir_block"	/* directory block checksum or entry chain */
#define CHECK_EXT4_HTREE	"ext4.htree"	/* htree root or index node, references */
#define CHECK_EXT4_HTREE_HASH	"ext4.htree_hash"	/* htree: a block's hashes outside its range */
#define CHECK_EXT4_ORPHAN	"ext4.orphan"	/* an inode in use that no name reaches */
#define CHECK_EXT4_ORPHAN_LIST	"ext4.orphan_list"	/* superblock orphan list */
#define CHECK_EXT4_NLINK	"ext4.nlink"	/* on-disk link count != the kernel's */
#define CHECK_EXT4_BLOCK_IN_USE	"ext4.block_in_use"	/* a used block is free in the bitmap */
#define CHECK_EXT4_CROSSLINK	"ext4.crosslink"	/* an inode's block is also group metadata */
/* ... inode cores against their type, features and extent trees (backends/ext4/ext4_xref.c) */
#define CHECK_EXT4_INODE_DTIME	"ext4.inode_dtime"	/* a linked inode with a deletion time */
#define CHECK_EXT4_INODE_FLAGS	"ext4.inode_flags"	/* flags the type or the features forbid */
#define CHECK_EXT4_INODE_FIELD	"ext4.inode_field"	/* a field the features forbid */
#define CHECK_EXT4_INODE_SIZE	"ext4.inode_size"	/* directory i_size against its blocks */
#define CHECK_EXT4_INODE_BLOCKS	"ext4.inode_blocks"	/* i_blocks != what the extent tree maps */
#define CHECK_EXT4_JOURNAL	"ext4.journal"	/* the journal: superblock, blocks, external device */
#define CHECK_EXT4_XATTR_REFCOUNT "ext4.xattr_refcount" /* attribute block count != its users */
#define CHECK_EXT4_QUOTA	"ext4.quota"	/* a quota file's usage != what the inodes use */
#define CHECK_EXT4_EA_INODE	"ext4.ea_inode"	/* EA inode: count, unattached, target, hash */

#endif
