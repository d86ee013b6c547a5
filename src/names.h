/*
 * names: what a directory entry's name may and may not contain, and how a
 * name is printed.
 *
 * Linux allows any byte but '/' and NUL in a name, so a report must never
 * print a name raw: a newline in a name would forge a report line, an escape
 * sequence would reach the operator's terminal.  names_escape() makes every
 * name printable and unambiguous; names_classify() says what is wrong or
 * suspicious about it; name_set finds a name that occurs twice in one
 * directory with memory of 8 bytes per entry (a hash, confirmed later by a
 * second read of the directory, so a hash collision is never reported).
 */
#ifndef FSCRUB_NAMES_H
#define FSCRUB_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

enum name_flags {
	NAME_EMPTY	= (1 << 0),	/* zero length: corruption */
	NAME_SLASH	= (1 << 1),	/* contains '/': corruption */
	NAME_BAD_UTF8	= (1 << 2),	/* not valid UTF-8: suspicious */
	NAME_CONTROL	= (1 << 3),	/* C0/C1 control or DEL: suspicious */
};

/* Return the enum name_flags that apply to the name (0: nothing to say). */
unsigned names_classify(const char *name, size_t len);

/*
 * Append the printable form of a name: printable ASCII and well-formed
 * UTF-8 are kept; backslash becomes "\\"; \n, \t, \r are written so; every
 * other control byte and every byte that is not part of a valid UTF-8
 * sequence becomes "\xHH" (C1 controls are escaped byte by byte).
 */
void names_escape(struct strbuf *out, const char *name, size_t len);

/* A set of 64-bit name hashes for duplicate detection within a directory. */
struct name_set {
	uint64_t *slots;
	size_t mask;		/* capacity - 1, capacity a power of two */
	size_t count;
};

void name_set_init(struct name_set *set);
void name_set_reset(struct name_set *set);
void name_set_release(struct name_set *set);
/* Insert a hash; return true if it was already present. */
bool name_set_insert(struct name_set *set, uint64_t hash);
uint64_t name_hash(const char *name, size_t len);

#endif
