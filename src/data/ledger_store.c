/*
 * ledger_store: record format and the xattr and SQLite stores; see
 * ledger_store.h.
 */
#include "data/ledger_store.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/mountpoint.h"
#include "lib/strbuf.h"

#define REC_MAGIC "FSL1"
#define REC_VERSION 1
#define REC_ALG_XXH3_SUM 1

/* Debian 12's kernel headers predate FS_IOC_GETFSUUID (Linux 6.5). */
#ifndef FS_IOC_GETFSUUID
struct fsuuid2 {
	uint8_t len;
	uint8_t uuid[16];
};
#define FS_IOC_GETFSUUID _IOR(0x15, 0, struct fsuuid2)
#endif

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

size_t ledger_record_encode(const struct ledger_record *r, unsigned char *buf)
{
	memcpy(buf, REC_MAGIC, 4);
	buf[4] = REC_VERSION;
	buf[5] = REC_ALG_XXH3_SUM;
	buf[6] = (unsigned char)r->block_shift;
	buf[7] = (unsigned char)r->chunk_shift;
	put64(buf + 8, r->ino);
	put64(buf + 16, r->gen);
	put64(buf + 24, r->size);
	put64(buf + 32, (uint64_t)r->mtime_ns);
	put64(buf + 40, (uint64_t)r->ctime_ns);
	put64(buf + 48, (uint64_t)r->written_ns);
	put64(buf + 56, r->nr_chunks);		/* u32 count, u32 zero */
	put64(buf + 64, r->whole.lo);
	put64(buf + 72, r->whole.hi);
	for (uint32_t i = 0; i < r->nr_chunks; i++)
		put64(buf + LEDGER_REC_HEADER + 8 * i, r->chunk[i]);
	return LEDGER_REC_HEADER + 8 * (size_t)r->nr_chunks;
}

int ledger_record_decode(const unsigned char *buf, size_t len, struct ledger_record *r)
{
	if (len < LEDGER_REC_HEADER || memcmp(buf, REC_MAGIC, 4) || buf[4] != REC_VERSION ||
	    buf[5] != REC_ALG_XXH3_SUM || buf[6] < 9 || buf[6] > 20 ||
	    buf[7] < CHASH_BASE_SHIFT || buf[7] > 62)
		return -EINVAL;
	uint64_t n = get64(buf + 56);

	if (n > LEDGER_MAX_CHUNKS || len != LEDGER_REC_HEADER + 8 * n)
		return -EINVAL;
	*r = (struct ledger_record){
		.block_shift = buf[6], .chunk_shift = buf[7],
		.ino = get64(buf + 8), .gen = get64(buf + 16), .size = get64(buf + 24),
		.mtime_ns = (int64_t)get64(buf + 32), .ctime_ns = (int64_t)get64(buf + 40),
		.written_ns = (int64_t)get64(buf + 48), .nr_chunks = (uint32_t)n,
		.whole = { .lo = get64(buf + 64), .hi = get64(buf + 72) },
	};
	for (uint64_t i = 0; i < n; i++)
		r->chunk[i] = get64(buf + LEDGER_REC_HEADER + 8 * i);
	return 0;
}

void fs_identity(int fd, char *out, size_t len)
{
	struct fsuuid2 u = { .len = 16 };
	struct statfs sfs;

	if (ioctl(fd, FS_IOC_GETFSUUID, &u) == 0 && u.len == 16) {
		for (int i = 0; i < 16; i++)
			snprintf(out + 2 * i, len - 2 * (size_t)i, "%02x", u.uuid[i]);
		return;
	}
	if (fstatfs(fd, &sfs) == 0) {
		unsigned v[2];

		memcpy(v, &sfs.f_fsid, sizeof(v));
		/* f_fsid 0 (FUSE) is every such filesystem's: tell them apart by their mount. */
		if ((v[0] || v[1]) || mount_key(fd, out, len) < 0)
			snprintf(out, len, "fsid-%08x%08x", v[0], v[1]);
		return;
	}
	snprintf(out, len, "unknown");
}

static int db_exec(struct ledger_store *s, const char *sql)
{
	return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* Does this statement compile (its table and columns exist)? */
static bool db_compiles(struct ledger_store *s, const char *sql)
{
	sqlite3_stmt *st;
	bool ok = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK;

	sqlite3_finalize(st);
	return ok;
}

#define RECORDS_SCHEMA "(fsid TEXT NOT NULL, subvol INTEGER NOT NULL, ino INTEGER NOT NULL, " \
		       "gen INTEGER NOT NULL, rec BLOB NOT NULL, " \
		       "PRIMARY KEY (fsid, subvol, ino, gen)) WITHOUT ROWID"

/*
 * The table, in the transaction just begun: created, or converted from the
 * first schema (no subvol column; SQLite cannot change a primary key in
 * place) with its records in subvolume 0.
 */
static int db_schema(struct ledger_store *s)
{
	if (!db_compiles(s, "SELECT 1 FROM records"))
		return db_exec(s, "CREATE TABLE records " RECORDS_SCHEMA);
	if (db_compiles(s, "SELECT subvol FROM records"))
		return 0;
	if (db_exec(s, "CREATE TABLE records_v2 " RECORDS_SCHEMA) ||
	    db_exec(s, "INSERT INTO records_v2 (fsid, subvol, ino, gen, rec) "
		    "SELECT fsid, 0, ino, gen, rec FROM records") ||
	    db_exec(s, "DROP TABLE records") ||
	    db_exec(s, "ALTER TABLE records_v2 RENAME TO records"))
		return -EIO;
	return 0;
}

static int open_db(struct ledger_store *s, const char *dir, bool write, char *err,
		   size_t errlen)
{
	struct strbuf path = STRBUF_INIT;
	int flags = write ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
	int rc;

	strbuf_addf(&path, "%s/%s", dir, LEDGER_DB_NAME);
	rc = sqlite3_open_v2(path.buf, &s->db, flags | SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc == SQLITE_CANTOPEN && !write) {
		/* -n and no database yet: no records. */
		sqlite3_close(s->db);
		s->db = NULL;
		strbuf_release(&path);
		return -ENOENT;
	}
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "cannot open %s: %s", path.buf,
			 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		sqlite3_close(s->db);
		s->db = NULL;
		strbuf_release(&path);
		return -EIO;
	}
	sqlite3_busy_timeout(s->db, 10000);
	if (write && (db_exec(s, "BEGIN IMMEDIATE") || db_schema(s))) {
		snprintf(err, errlen, "cannot use %s: %s", path.buf, sqlite3_errmsg(s->db));
		sqlite3_close(s->db);
		s->db = NULL;
		strbuf_release(&path);
		return -EIO;
	}
	s->in_transaction = write;
	s->old_schema = !write && !db_compiles(s, "SELECT subvol FROM records");
	strbuf_release(&path);
	return 0;
}

int ledger_store_open(struct ledger_store *s, const char *dir, bool write, int fs_fd,
		      char *err, size_t errlen)
{
	*s = (struct ledger_store){ 0 };
	pthread_mutex_init(&s->lock, NULL);
	fs_identity(fs_fd, s->fsid, sizeof(s->fsid));
	if (!dir)
		return 0;
	s->db_mode = true;
	int ret = open_db(s, dir, write, err, errlen);

	return ret == -ENOENT ? 0 : ret;
}

void ledger_store_close(struct ledger_store *s)
{
	if (s->db) {
		if (s->in_transaction)
			db_exec(s, "COMMIT");
		sqlite3_close(s->db);
	}
	s->db = NULL;
	pthread_mutex_destroy(&s->lock);
}

static int db_get(struct ledger_store *s, uint64_t subvol, uint64_t ino, uint64_t gen,
		  struct ledger_record *r)
{
	sqlite3_stmt *st;
	int ret = -ENODATA;
	const char *sql = s->old_schema ?
		"SELECT rec FROM records WHERE fsid = ?1 AND ino = ?2 AND gen = ?3" :
		"SELECT rec FROM records WHERE fsid = ?1 AND ino = ?2 AND gen = ?3 AND subvol = ?4";

	if (s->old_schema && subvol)
		return -ENODATA;	/* its records are all of subvolume 0 */
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, s->fsid, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)ino);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)gen);
	if (!s->old_schema)
		sqlite3_bind_int64(st, 4, (sqlite3_int64)subvol);
	if (sqlite3_step(st) == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);

		ret = blob && n > 0 ? ledger_record_decode(blob, (size_t)n, r) : -EINVAL;
	}
	sqlite3_finalize(st);
	return ret;
}

static int db_put(struct ledger_store *s, uint64_t subvol, const struct ledger_record *r)
{
	unsigned char buf[LEDGER_REC_MAX];
	size_t len = ledger_record_encode(r, buf);
	sqlite3_stmt *st;
	int ret = 0;

	/* An older generation of the inode number is another, deleted, file. */
	if (sqlite3_prepare_v2(s->db, "DELETE FROM records WHERE fsid = ?1 AND subvol = ?3 "
			       "AND ino = ?2", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, s->fsid, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)r->ino);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)subvol);
	if (sqlite3_step(st) != SQLITE_DONE)
		ret = -EIO;
	sqlite3_finalize(st);
	if (ret)
		return ret;
	if (sqlite3_prepare_v2(s->db, "INSERT INTO records (fsid, subvol, ino, gen, rec) "
			       "VALUES (?1, ?5, ?2, ?3, ?4)", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, s->fsid, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)r->ino);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)r->gen);
	sqlite3_bind_blob(st, 4, buf, (int)len, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)subvol);
	if (sqlite3_step(st) != SQLITE_DONE)
		ret = -EIO;
	sqlite3_finalize(st);
	return ret;
}

static int xattr_get(int fd, struct ledger_record *r)
{
	unsigned char buf[LEDGER_REC_MAX];
	ssize_t n = fgetxattr(fd, LEDGER_XATTR_TRUSTED, buf, sizeof(buf));

	if (n < 0 && (errno == ENODATA || errno == EPERM || errno == EOPNOTSUPP))
		n = fgetxattr(fd, LEDGER_XATTR_USER, buf, sizeof(buf));
	if (n < 0)
		return errno == EOPNOTSUPP || errno == EPERM ? -ENODATA :
		       errno == ERANGE ? -EINVAL : -errno;
	return ledger_record_decode(buf, (size_t)n, r);
}

static int xattr_put(struct ledger_store *s, int fd, const struct ledger_record *r)
{
	unsigned char buf[LEDGER_REC_MAX];
	size_t len = ledger_record_encode(r, buf);
	bool user;

	pthread_mutex_lock(&s->lock);
	user = s->xattr_user;
	pthread_mutex_unlock(&s->lock);
	if (!user) {
		if (fsetxattr(fd, LEDGER_XATTR_TRUSTED, buf, len, 0) == 0)
			return 0;
		if (errno != EPERM && errno != EOPNOTSUPP)
			return -errno;
		pthread_mutex_lock(&s->lock);
		s->xattr_user = true;	/* not CAP_SYS_ADMIN: the user namespace */
		pthread_mutex_unlock(&s->lock);
	}
	return fsetxattr(fd, LEDGER_XATTR_USER, buf, len, 0) == 0 ? 0 : -errno;
}

int ledger_store_get(struct ledger_store *s, int fd, uint64_t subvol, uint64_t ino,
		     uint64_t gen, struct ledger_record *r)
{
	int ret;

	if (!s->db)
		return s->db_mode ? -ENODATA : xattr_get(fd, r);
	pthread_mutex_lock(&s->lock);
	ret = db_get(s, subvol, ino, gen, r);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int ledger_store_put(struct ledger_store *s, int fd, uint64_t subvol,
		     const struct ledger_record *r)
{
	int ret;

	if (!s->db)
		return s->db_mode ? -EROFS : xattr_put(s, fd, r);
	pthread_mutex_lock(&s->lock);
	ret = db_put(s, subvol, r);
	pthread_mutex_unlock(&s->lock);
	return ret;
}
