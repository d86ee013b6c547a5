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

#include "lib/strbuf.h"

enum name_flags {
	NAME_EMPTY	= (1 << 0),	/* zero length: corruption */
	NAME_SLASH	= (1 << 1),	/* contains '/': corruption */
	NAME_BAD_UTF8	= (1 << 2),	/* not valid UTF-8: suspicious */
	NAME_CONTROL	= (1 << 3),	/* C0/C1 control or DEL: suspicious */
	NAME_BIDI	= (1 << 4),	/* bidi embedding, override or isolate */
	NAME_INVISIBLE	= (1 << 5),	/* a character that renders as nothing */
	NAME_OPTION	= (1 << 6),	/* begins with '-': read as an option */
	NAME_NON_ASCII	= (1 << 7),	/* has a byte >= 0x80 (information) */
};

/*
 * Return the enum name_flags that apply to the name (0: nothing to say).
 *
 * NAME_BIDI: U+202A..U+202E (embeddings, overrides) and U+2066..U+2069
 * (isolates), which make "gnp<U+202E>.exe" display as "gnp.exe" reversed.
 * NAME_INVISIBLE: zero-width and other default-invisible characters
 * (U+200B, U+2060..U+2064, U+FEFF, soft hyphen, LRM/RLM/ALM, Hangul
 * fillers, ...).  The joiners U+200C/U+200D, the variation selectors and
 * the tag characters are part of emoji sequences and of Indic and Persian
 * spelling: they count only where no such sequence can be meant, next to
 * ASCII or at either end of the name.
 */
unsigned names_classify(const char *name, size_t len);

/*
 * Is the code point one names_escape() escapes even in valid UTF-8?  The
 * controls, and every bidi or invisible character of names_classify(): a
 * report must show what a terminal would hide or reorder.
 */
bool names_cp_needs_escape(uint32_t cp);

/*
 * Append the printable form of a name: printable ASCII and well-formed
 * UTF-8 are kept; backslash becomes "\\"; \n, \t, \r are written so; every
 * other control byte and every byte that is not part of a valid UTF-8
 * sequence becomes "\xHH" (C1 controls, bidi controls and invisible
 * characters -- names_cp_needs_escape() -- are escaped byte by byte).
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
/* Is the hash in the set? */
bool name_set_contains(const struct name_set *set, uint64_t hash);
uint64_t name_hash(const char *name, size_t len);

#endif
