/*
 * manifest: an external checksum manifest, to check file contents against
 * digests recorded elsewhere (e.g. Debian's /var/lib/dpkg/info/PKG.md5sums,
 * or a sha256sum listing kept by the admin).
 *
 * The format is what GNU coreutils' md5sum, sha1sum, sha256sum and
 * sha512sum print, and what their --check accepts:
 *
 *	HEX  PATH	(text mode: two spaces)
 *	HEX *PATH	(binary mode: the same digest on Linux)
 *	\HEX  ESCAPED	(a name with a newline, CR or backslash in it: "\n", "\r", "\\")
 *
 * The algorithm follows from the number of hex digits (32 md5, 40 sha1,
 * 64 sha256, 128 sha512, either case), so one manifest may mix them.  As
 * --check does, blank lines and lines starting with '#' are skipped, and so
 * is leading white space and a CR before the newline (a manifest written on
 * Windows).  The BSD "--tag" format ("SHA256 (PATH) = HEX") is not read.
 *
 * Paths are relative to the mount point (a leading "./" or "/" is dropped,
 * as dpkg's lists have none and sha256sum's from "find ." have "./").  They
 * are resolved with openat2() beneath the mount's root fd, never crossing a
 * mount and never following a symlink in the last component: a manifest is
 * a list of names written by someone else, and "../../etc/shadow", an
 * absolute symlink or a file on a filesystem mounted below this one is not
 * a file of the filesystem being scrubbed.  Such an entry is simply not
 * found (ino 0), as is a name that is missing or not a regular file.
 * Files in btrfs subvolumes and snapshots are on the same mount with an
 * st_dev of their own and inode numbers that repeat in every subvolume:
 * an entry is found by (st_dev, st_ino) (inokey.h), never by the number
 * alone, and a finding about a line names the line's path, not whichever
 * name of the file the data scan reached first.
 *
 * A digest is a stream over the file from its first byte to its last, so a
 * file in a manifest is read file by file, in offset order, and not merged
 * into the device-order scan of the other files; manifest_hash_zeros()
 * feeds a hole without reading or allocating it.
 *
 * Memory: per entry its path plus about 100 bytes (the entry with room for
 * a sha512 digest, and a pointer in the inode index).
 */
#ifndef FSCRUB_MANIFEST_H
#define FSCRUB_MANIFEST_H

#include <nettle/md5.h>
#include <nettle/sha1.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "lib/inokey.h"

enum manifest_alg { MANIFEST_MD5, MANIFEST_SHA1, MANIFEST_SHA256, MANIFEST_SHA512 };

/* The largest digest: sha512's 64 bytes. */
#define MANIFEST_DIGEST_MAX 64
/* Room for the hex of any digest and its NUL. */
#define MANIFEST_HEX_MAX (2 * MANIFEST_DIGEST_MAX + 1)

struct manifest_entry {
	/* Relative to the mount point, as listed (a leading "./" or "/" removed). */
	char *path;
	enum manifest_alg alg;	/* from the hex length: 32 md5, 40 sha1, 64 sha256, 128 sha512 */
	uint8_t digest[MANIFEST_DIGEST_MAX];	/* the first manifest_alg_size(alg) bytes */
	unsigned line;		/* 1-based line number in the manifest, for messages */
	/*
	 * Set by manifest_resolve: the file's (st_dev, st_ino); id.ino 0 = not
	 * found, or not a regular file on this mount.
	 */
	struct ino_key id;
};

struct manifest {
	char *source;		/* the manifest's path */
	struct timespec mtime;	/* the manifest file's mtime */
	struct manifest_entry *v;	/* in manifest order */
	size_t n;
	/* The entries found by manifest_resolve, sorted by (st_dev, inode), then by line. */
	struct manifest_entry **by_ino;
	size_t n_found;
};

/*
 * Parse the manifest at path.  Returns 0 and sets *out (free it with
 * manifest_free), or a negative errno with a message in err (*out is not
 * touched):
 *   -errno   the file cannot be opened or read: "cannot read FILE: strerror"
 *   -EINVAL  a line that is not a checksum line: "FILE:LINE: not a checksum line",
 *            "FILE:LINE: odd digest length (N hex digits)",
 *            "FILE:LINE: unknown digest length (N hex digits)" or
 *            "FILE:LINE: bad escape in the file name";
 *            or no checksum line at all: "FILE: no checksum lines".
 * err may be NULL or errlen 0 when the caller wants no message.
 */
int manifest_load(const char *path, struct manifest **out, char *err, size_t errlen);
/* Free the manifest, its entries and its index; m may be NULL. */
void manifest_free(struct manifest *m);

/*
 * Look every entry up beneath root_fd (the mount point): openat2 with
 * RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS and O_PATH |
 * O_NOFOLLOW, so symlinks in directory components are followed if they stay
 * beneath root_fd, and a final symlink is not a regular file.  Every entry
 * that is a regular file on root_fd's mount gets its (st_dev, st_ino), every
 * other one ino 0.  "On the mount" is the statx mount id of root_fd where
 * the kernel gives one (a btrfs subvolume's files have an st_dev of their
 * own but are on the mount), else st_dev equal to root_fd's.  Returns how
 * many were found, and builds the index for manifest_find and
 * manifest_inodes.  Without openat2 (ENOSYS: a kernel before 5.6) it falls
 * back to openat with O_NOFOLLOW and refuses any ".." component; the mount
 * test still keeps out other filesystems.  May be called again (after a
 * remount, say): every entry is looked up afresh.
 */
size_t manifest_resolve(struct manifest *m, int root_fd);
/*
 * The entries for that inode, in manifest order (a name listed twice, or
 * several names of one file): *n of them from the returned pointer, or
 * NULL and *n = 0.  After manifest_resolve only: before it, nothing is
 * found.  O(log n).
 */
const struct manifest_entry *const *manifest_find_all(const struct manifest *m,
						      struct ino_key id, size_t *n);
/* The first entry for that inode in manifest order, or NULL. */
const struct manifest_entry *manifest_find(const struct manifest *m, struct ino_key id);
/*
 * Every inode found, sorted by ino_key_cmp and distinct: a malloc'd array
 * of *n entries that the caller frees (never NULL, even when *n is 0).
 */
struct ino_key *manifest_inodes(const struct manifest *m, size_t *n);

/* The digest's size in bytes (16, 20, 32 or 64) and its name ("md5", "sha256", ...). */
size_t manifest_alg_size(enum manifest_alg alg);
const char *manifest_alg_name(enum manifest_alg alg);
/* The hex (lower case) of the entry's expected digest, into out (MANIFEST_HEX_MAX bytes). */
void manifest_entry_hex(const struct manifest_entry *e, char *out);

/*
 * A streaming digest in an entry's algorithm.  init, then update and zeros
 * in file order, then manifest_hash_matches and/or manifest_hash_hex: the
 * first of them finishes the digest, and both see the same result.  To hash
 * another file, init again.
 */
struct manifest_hash {
	enum manifest_alg alg;
	union {
		struct md5_ctx md5;
		struct sha1_ctx sha1;
		struct sha256_ctx sha256;
		struct sha512_ctx sha512;
	} u;
	bool finished;
	uint8_t result[MANIFEST_DIGEST_MAX];	/* once finished */
};

void manifest_hash_init(struct manifest_hash *h, enum manifest_alg alg);
void manifest_hash_update(struct manifest_hash *h, const void *buf, size_t len);
/* len zero bytes (a hole in a sparse file), without allocating len bytes. */
void manifest_hash_zeros(struct manifest_hash *h, uint64_t len);
/* Finish and compare with e->digest; false if e is in another algorithm. */
bool manifest_hash_matches(struct manifest_hash *h, const struct manifest_entry *e);
/* Finish and write the hex (lower case) into out: 2 * size + 1 bytes, at most MANIFEST_HEX_MAX. */
void manifest_hash_hex(struct manifest_hash *h, char *out);

#endif
