/*
 * dataverify: phase 5 (-x), read back every allocated byte of every
 * regular file to prove it is readable.
 *
 * Only allocated data is read (SEEK_DATA/SEEK_HOLE), in reads of 4 MiB,
 * with O_DIRECT where the filesystem allows it (so the device is read,
 * not the page cache, and the cache is not flooded), else buffered with
 * POSIX_FADV_SEQUENTIAL and POSIX_FADV_DONTNEED behind the reader.  A read
 * that fails with EIO, EUCLEAN or EBADMSG is read again block by block to
 * find exactly which ranges fail; each is reported with its byte offset and
 * the scan goes on.  (A later backend hook reads in physical order.)
 */
#ifndef FSCRUB_DATAVERIFY_H
#define FSCRUB_DATAVERIFY_H

#include "walk.h"

/* Its walk_tree() arg: a struct inoset for the multiply-linked files read. */
extern const struct walk_visitor dataverify_visitor;

#endif
