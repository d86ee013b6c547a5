/*
 * backend_core: the core's side of the backend interface: the backend
 * types made from the walk's, for the code that calls a backend's
 * per-directory and per-entry hooks (inode_check.c).  The services the
 * backends call are declared in backends/backend.h.
 */
#ifndef FSCRUB_BACKEND_CORE_H
#define FSCRUB_BACKEND_CORE_H

#include "backends/backend.h"

struct walk_thread;
struct walk_dir;
struct walk_entry;

/* What a backend sees of the directory t is reading. */
struct backend_dir backend_dir_of(const struct walk_thread *t, const struct walk_dir *d);
/* ... and of one of its entries (fd: an open regular file, or -1). */
struct backend_entry backend_entry_of(const struct walk_entry *e, int fd);

#endif
