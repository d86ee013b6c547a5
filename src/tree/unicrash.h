/*
 * unicrash: names a person cannot tell apart, by ICU's normalisation
 * (unorm2) and confusable skeletons (uspoof, Unicode TS #39), after
 * xfs_scrub's module of the same name.
 *
 * Two names in one set (a directory, one inode's attribute names) crash
 * when one of three keys is equal:
 *   NFKC      equal NFC forms (the same text, composed and decomposed:
 *             "résumé" twice), else equal NFKC forms (compatibility
 *             look-alikes: "ﬁle" and "file", fullwidth letters);
 *   skeleton  equal confusable skeletons (Latin "paypal" and "pаypаl"
 *             with Cyrillic а, "rn" and "m");
 *   fold      equal case-folded NFD forms: the one name a casefolded
 *             directory (ext4, f2fs, tmpfs +F) takes them for.
 * Keys are kept as 64-bit hashes only (8 bytes a key, three keys a name);
 * a hash seen twice is a "collision", and the names behind it are found by
 * a second pass (unicrash_gather) and compared as strings
 * (unicrash_compare), so a hash collision is never reported.
 *
 * Pure ASCII names (almost every name) take a path that calls no ICU: their
 * NFKC form is themselves, their fold is tolower, and their skeleton is a
 * concatenation from a table ICU filled once.
 *
 * Layering: a utility; calls ICU and names.h, never the report.
 * Threading: unicrash_setup() once, before any other call (pthread_once
 * inside); then every function is thread-safe on its own struct (ICU's
 * checker is only read after setup: uspoof.h's "Thread Safety").
 */
#ifndef FSCRUB_UNICRASH_H
#define FSCRUB_UNICRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/names.h"

/* What two different names are to each other, strongest first. */
enum unicrash_kind {
	UNICRASH_NONE,
	UNICRASH_CASEFOLD,	/* equal case-folded (only asked in a casefolded set) */
	UNICRASH_NFC,		/* equal NFC */
	UNICRASH_NFKC,		/* equal NFKC, not NFC */
	UNICRASH_CONFUSABLE,	/* equal skeleton, not NFKC */
};

/* The keys of a name; a kind is reported in the group of its key. */
enum unicrash_key {
	UNICRASH_KEY_NFKC,	/* UNICRASH_NFC, UNICRASH_NFKC */
	UNICRASH_KEY_SKELETON,	/* UNICRASH_CONFUSABLE */
	UNICRASH_KEY_FOLD,	/* UNICRASH_CASEFOLD */
	UNICRASH_NR_KEYS,
};

/* Load ICU's data once per process; 0 or -EIO (then nothing here may be used). */
int unicrash_setup(void);

/*
 * Does the valid UTF-8 name mix scripts beyond ICU's moderately restrictive
 * level (Latin with Cyrillic, Greek or Cherokee, or three scripts)?  Each
 * run between ASCII punctuation and spaces is judged alone, so "отчёт.pdf"
 * (a Cyrillic word, a Latin extension) is not mixed and "pаypаl" is.
 */
bool unicrash_mixed_script(const char *name, size_t len);

/*
 * The key hashes of a valid UTF-8 name (flags: its names_classify()); the
 * fold key only if casefold, else keys[UNICRASH_KEY_FOLD] is 0.  Hashes
 * are tagged by key, never 0.  Returns 0 or -EIO (ICU failed: no keys).
 */
int unicrash_keys(const char *name, size_t len, unsigned flags, bool casefold,
		  uint64_t keys[UNICRASH_NR_KEYS]);

/* What the two valid UTF-8 names are to each other (UNICRASH_NONE if equal bytes). */
enum unicrash_kind unicrash_compare(const char *a, size_t alen, const char *b, size_t blen,
				    bool casefold);

/* The per-set state: every key hash seen, and those seen twice. */
struct unicrash_set {
	struct name_set keys;
	struct name_set collided;
	size_t nr_collided;
	bool casefold;		/* the set's fold keys are compared */
};

void unicrash_set_init(struct unicrash_set *us);
void unicrash_set_reset(struct unicrash_set *us, bool casefold);
void unicrash_set_release(struct unicrash_set *us);
/* Add a name's keys; true if one of them was seen before in this set. */
bool unicrash_set_add(struct unicrash_set *us, const uint64_t keys[UNICRASH_NR_KEYS]);

/* A name whose key collided, kept by the second pass. */
struct unicrash_member {
	uint64_t hash;
	enum unicrash_key key;
	char *name;		/* owned */
	size_t len;
	uint64_t ino;		/* the caller's, for the report */
	size_t seq;		/* order gathered */
};

/* At most this many names are kept: a directory of look-alikes stays bounded. */
#define UNICRASH_MAX_MEMBERS 4096

struct unicrash_members {
	struct unicrash_member *v;
	size_t nr, alloc;
	bool overflow;		/* more than UNICRASH_MAX_MEMBERS */
};

/*
 * Second pass: keep the name under each of its keys that collided in us
 * (us NULL: under every key, for a set small enough to keep whole).
 */
void unicrash_gather(struct unicrash_members *m, const struct unicrash_set *us,
		     const char *name, size_t len, const uint64_t keys[UNICRASH_NR_KEYS],
		     uint64_t ino);

/*
 * Call fn once for every name that crashes with the first name of its
 * group (a and b differ as bytes; a was gathered first), with the kind
 * reported in that group.  Sorts m.
 */
typedef void (*unicrash_fn)(void *arg, enum unicrash_kind kind,
			    const struct unicrash_member *a, const struct unicrash_member *b);
void unicrash_report(struct unicrash_members *m, bool casefold, unicrash_fn fn, void *arg);
/* Forget the names (clear), or everything (release). */
void unicrash_members_clear(struct unicrash_members *m);
void unicrash_members_release(struct unicrash_members *m);

#endif
