/*
 * outfile: the files fscrub writes its own results to (--json, --metrics),
 * without harming whatever the name given already is.
 *
 * What the name is decides how it is written:
 *   - "-", or a descriptor of fscrub's own named through /proc (/dev/stdout,
 *     /dev/stderr, /dev/fd/N, /proc/self/fd/N): written to that descriptor
 *     (a duplicate of it), whatever it is open on: a pipe, a socket, a
 *     terminal, a file;
 *   - a regular file, or a name that does not exist in a writable
 *     directory: written to NAME.tmp.PID beside it and renamed over it when
 *     complete, so a reader never sees half of it.  Symbolic links are
 *     followed: the file the last link points to is the one replaced (or
 *     created), and the links stay links;
 *   - a FIFO or a character device (/dev/null, a terminal): opened and
 *     written in place; nothing is created, renamed or truncated;
 *   - anything else (a directory, a block device, a socket, a name whose
 *     directory is missing or not writable, a loop of links, another
 *     process's descriptor in /proc that is not a FIFO or a character
 *     device, a link or a FIFO in a sticky world-writable directory such
 *     as /tmp that is neither the user's nor the directory owner's, as
 *     the kernel's fs.protected_symlinks and protected_fifos say) is
 *     refused.
 *
 * outfile_check() says at parse time whether a name can be written, so a
 * bad one is a usage error before the scan; outfile_open() decides again
 * when the file is opened (the name may have changed since).
 *
 * Layering: calls nothing of fscrub's but strbuf; never prints.
 */
#ifndef FSCRUB_OUTFILE_H
#define FSCRUB_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

struct strbuf;

enum outfile_kind {
	OUTFILE_REPLACE,	/* a regular file: a temporary file renamed over it */
	OUTFILE_DEVICE,		/* a FIFO or a character device: written in place */
	OUTFILE_FD,		/* one of fscrub's descriptors: written to a dup of it */
};

struct outfile {
	enum outfile_kind kind;
	int fd;			/* OUTFILE_FD: the descriptor named */
	char *final;		/* OUTFILE_REPLACE: the name renamed over, links followed */
	char *tmp;		/* OUTFILE_REPLACE: where it is written until closed */
	FILE *f;		/* open for writing, between open and close */
};

/*
 * Can name be written?  0, or a negative errno with the reason appended
 * to why (a sentence fragment such as "it is a directory", or strerror).
 */
int outfile_check(const char *name, struct strbuf *why);

/*
 * Where name would be written, links followed: for OUTFILE_REPLACE the
 * file renamed over (its directory is where the temporary file is made),
 * for OUTFILE_DEVICE the FIFO or device, in *target; OUTFILE_FD needs no
 * name.  The kind, or a negative errno (as outfile_check()).
 */
int outfile_target(const char *name, struct strbuf *target);

/*
 * Do a and b name the same output, which two writers would interleave
 * (the same descriptor, FIFO or file to replace)?  Two names of one
 * character device are not the same: /dev/null takes both.
 */
bool outfile_same(const char *a, const char *b);

/*
 * Open name for writing into o->f.  0, or a negative errno (o is then
 * untouched but for being zeroed).  Opening a FIFO blocks until it has a
 * reader, as a shell's redirection does.  Standard output and error are
 * flushed first, so what fscrub printed before stays before.
 */
int outfile_open(struct outfile *o, const char *name);

/* Is o written to fscrub's standard output? */
bool outfile_is_stdout(const struct outfile *o);

/*
 * Flush and close o.  err (a negative errno, or 0) is a write error the
 * caller met already.  With no error a replaced file is fsync()ed and
 * renamed into place; with one it is left as it was and the temporary
 * file removed.  Returns err, or the first error met here; o is released
 * either way.
 */
int outfile_close(struct outfile *o, int err);

#endif
