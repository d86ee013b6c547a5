/*
 * unicrash: normalisation forms, confusable skeletons and script mixing of
 * names, with ICU.  See unicrash.h for the keys and the two passes.
 */
#include "tree/unicrash.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/uspoof.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "lib/sorted.h"
#include "lib/strbuf.h"

/*
 * Names longer than this (in bytes) are not compared: NAME_MAX is 255 on
 * every Linux filesystem, and an attribute name is at most 255 bytes too.
 */
#define UNICRASH_MAX_NAME 1024
/* NFKC can expand a character up to 18 times (U+FDFA); beyond, no key. */
#define UNICRASH_MAX_UNITS (4 * UNICRASH_MAX_NAME)
/* The longest skeleton of one ASCII character the fast path keeps. */
#define ASCII_SKELETON_MAX 4

static struct {
	pthread_once_t once;
	int err;
	USpoofChecker *spoof;
	const UNormalizer2 *nfc, *nfkc, *nfd;
	/* The skeleton of each ASCII character, when it is ASCII itself. */
	char ascii_skel[128][ASCII_SKELETON_MAX + 1];
	bool ascii_slow[128];	/* its skeleton is not ASCII: ask ICU */
} uc = { .once = PTHREAD_ONCE_INIT };

static void fill_ascii_table(void)
{
	for (int c = 1; c < 128; c++) {
		char in = (char)c, out[32];
		UErrorCode st = U_ZERO_ERROR;
		int32_t n = uspoof_getSkeletonUTF8(uc.spoof, 0, &in, 1, out, sizeof(out), &st);
		bool ascii = U_SUCCESS(st) && n >= 0 && n <= ASCII_SKELETON_MAX;

		for (int32_t i = 0; ascii && i < n; i++)
			ascii = !(out[i] & 0x80);
		uc.ascii_slow[c] = !ascii;
		if (ascii)
			memcpy(uc.ascii_skel[c], out, (size_t)n);
	}
}

static void setup_once(void)
{
	UErrorCode st = U_ZERO_ERROR;

	uc.spoof = uspoof_open(&st);
	uspoof_setChecks(uc.spoof, USPOOF_RESTRICTION_LEVEL, &st);
	/* Latin with any one other script but Cyrillic, Greek, Cherokee (TS #39). */
	uspoof_setRestrictionLevel(uc.spoof, USPOOF_MODERATELY_RESTRICTIVE);
	uc.nfc = unorm2_getNFCInstance(&st);
	uc.nfkc = unorm2_getNFKCInstance(&st);
	uc.nfd = unorm2_getNFDInstance(&st);
	if (U_FAILURE(st)) {
		uc.err = -EIO;
		return;
	}
	fill_ascii_table();
}

int unicrash_setup(void)
{
	pthread_once(&uc.once, setup_once);
	return uc.err;
}

bool unicrash_mixed_script(const char *name, size_t len)
{
	size_t start = 0;

	if (len > UNICRASH_MAX_NAME)
		return false;
	/* Runs between ASCII punctuation and spaces; only runs with non-ASCII. */
	for (size_t i = 0; i <= len; i++) {
		unsigned char c = i < len ? (unsigned char)name[i] : ' ';
		bool sep = c < 0x80 && !(c >= '0' && c <= '9') && !(c >= 'A' && c <= 'Z') &&
			   !(c >= 'a' && c <= 'z');
		bool non_ascii = false;

		if (!sep)
			continue;
		for (size_t k = start; k < i; k++)
			non_ascii |= (unsigned char)name[k] >= 0x80;
		if (non_ascii) {
			UErrorCode st = U_ZERO_ERROR;
			int32_t r = uspoof_check2UTF8(uc.spoof, name + start, (int32_t)(i - start),
						      NULL, &st);

			if (U_SUCCESS(st) && (r & USPOOF_RESTRICTION_LEVEL))
				return true;
		}
		start = i + 1;
	}
	return false;
}

/* FNV-1a over code points, tagged by key, then splitmix64's finaliser. */
#define HASH_INIT 0xcbf29ce484222325ULL

static uint64_t hash_cp(uint64_t h, uint32_t cp)
{
	return (h ^ cp) * 0x100000001b3ULL;
}

static uint64_t hash_final(uint64_t h, enum unicrash_key key)
{
	h ^= ((uint64_t)key + 1) * 0x9e3779b97f4a7c15ULL;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return h ? h : 1;	/* 0 marks an empty slot of a name_set */
}

static uint64_t hash_u16(const UChar *s, int32_t n, enum unicrash_key key)
{
	uint64_t h = HASH_INIT;

	for (int32_t i = 0; i < n;) {
		UChar32 c;

		U16_NEXT(s, i, n, c);
		h = hash_cp(h, (uint32_t)c);
	}
	return hash_final(h, key);
}

/* The keys of an ASCII name without ICU; false if a character needs ICU. */
static bool ascii_keys(const char *name, size_t len, bool casefold,
		       uint64_t keys[UNICRASH_NR_KEYS])
{
	uint64_t nfkc = HASH_INIT, skel = HASH_INIT, fold = HASH_INIT;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (uc.ascii_slow[c])
			return false;
		nfkc = hash_cp(nfkc, c);
		for (const char *p = uc.ascii_skel[c]; *p; p++)
			skel = hash_cp(skel, (unsigned char)*p);
		if (casefold)
			fold = hash_cp(fold, (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c);
	}
	keys[UNICRASH_KEY_NFKC] = hash_final(nfkc, UNICRASH_KEY_NFKC);
	keys[UNICRASH_KEY_SKELETON] = hash_final(skel, UNICRASH_KEY_SKELETON);
	keys[UNICRASH_KEY_FOLD] = casefold ? hash_final(fold, UNICRASH_KEY_FOLD) : 0;
	return true;
}

/* A name as UTF-16, and one form of it; lengths in code units. */
struct uform {
	UChar in[UNICRASH_MAX_NAME];
	int32_t in_len;
	UChar out[UNICRASH_MAX_UNITS];
	int32_t out_len;
};

static int to_utf16(struct uform *f, const char *name, size_t len)
{
	UErrorCode st = U_ZERO_ERROR;

	if (len > UNICRASH_MAX_NAME)
		return -ENAMETOOLONG;
	u_strFromUTF8(f->in, UNICRASH_MAX_NAME, &f->in_len, name, (int32_t)len, &st);
	return U_SUCCESS(st) ? 0 : -EIO;
}

/* f->out = the key's form of f->in. */
static int form_of(struct uform *f, enum unicrash_key key)
{
	UErrorCode st = U_ZERO_ERROR;
	UChar folded[UNICRASH_MAX_UNITS];
	int32_t n;

	switch (key) {
	case UNICRASH_KEY_NFKC:
		f->out_len = unorm2_normalize(uc.nfkc, f->in, f->in_len, f->out,
					      UNICRASH_MAX_UNITS, &st);
		break;
	case UNICRASH_KEY_SKELETON:
		f->out_len = uspoof_getSkeleton(uc.spoof, 0, f->in, f->in_len, f->out,
						UNICRASH_MAX_UNITS, &st);
		break;
	default:
		/* As the kernel's utf8_casefold(): full case folding, then NFD. */
		n = u_strFoldCase(folded, UNICRASH_MAX_UNITS, f->in, f->in_len,
				  U_FOLD_CASE_DEFAULT, &st);
		if (U_SUCCESS(st))
			f->out_len = unorm2_normalize(uc.nfd, folded, n, f->out,
						      UNICRASH_MAX_UNITS, &st);
		break;
	}
	/* A string that is not terminated still has its length. */
	return U_SUCCESS(st) || st == U_STRING_NOT_TERMINATED_WARNING ? 0 : -EIO;
}

int unicrash_keys(const char *name, size_t len, unsigned flags, bool casefold,
		  uint64_t keys[UNICRASH_NR_KEYS])
{
	struct uform *f;
	int ret;

	if (!(flags & (NAME_NON_ASCII | NAME_BAD_UTF8)) && ascii_keys(name, len, casefold, keys))
		return 0;
	f = xmalloc(sizeof(*f));
	ret = to_utf16(f, name, len);
	for (int k = 0; ret == 0 && k < UNICRASH_NR_KEYS; k++) {
		keys[k] = 0;
		if (k == UNICRASH_KEY_FOLD && !casefold)
			continue;
		ret = form_of(f, (enum unicrash_key)k);
		if (ret == 0)
			keys[k] = hash_u16(f->out, f->out_len, (enum unicrash_key)k);
	}
	free(f);
	return ret;
}

/* Are a's and b's forms by this normaliser (or key, nf NULL) equal? */
static bool same_form(struct uform *fa, struct uform *fb, const UNormalizer2 *nf,
		      enum unicrash_key key)
{
	UErrorCode st = U_ZERO_ERROR;

	if (nf) {
		fa->out_len = unorm2_normalize(nf, fa->in, fa->in_len, fa->out,
					       UNICRASH_MAX_UNITS, &st);
		fb->out_len = unorm2_normalize(nf, fb->in, fb->in_len, fb->out,
					       UNICRASH_MAX_UNITS, &st);
		if (U_FAILURE(st) && st != U_STRING_NOT_TERMINATED_WARNING)
			return false;
	} else if (form_of(fa, key) < 0 || form_of(fb, key) < 0) {
		return false;
	}
	return fa->out_len == fb->out_len &&
	       !memcmp(fa->out, fb->out, (size_t)fa->out_len * sizeof(UChar));
}

enum unicrash_kind unicrash_compare(const char *a, size_t alen, const char *b, size_t blen,
				    bool casefold)
{
	enum unicrash_kind kind = UNICRASH_NONE;
	struct uform *fa, *fb;

	if (alen == blen && !memcmp(a, b, alen))
		return UNICRASH_NONE;
	fa = xmalloc(sizeof(*fa));
	fb = xmalloc(sizeof(*fb));
	if (to_utf16(fa, a, alen) < 0 || to_utf16(fb, b, blen) < 0)
		goto out;
	if (casefold && same_form(fa, fb, NULL, UNICRASH_KEY_FOLD))
		kind = UNICRASH_CASEFOLD;
	else if (same_form(fa, fb, uc.nfc, UNICRASH_NR_KEYS))
		kind = UNICRASH_NFC;
	else if (same_form(fa, fb, uc.nfkc, UNICRASH_NR_KEYS))
		kind = UNICRASH_NFKC;
	else if (same_form(fa, fb, NULL, UNICRASH_KEY_SKELETON))
		kind = UNICRASH_CONFUSABLE;
out:
	free(fa);
	free(fb);
	return kind;
}

void unicrash_set_init(struct unicrash_set *us)
{
	name_set_init(&us->keys);
	name_set_init(&us->collided);
	us->nr_collided = 0;
	us->casefold = false;
}

void unicrash_set_reset(struct unicrash_set *us, bool casefold)
{
	name_set_reset(&us->keys);
	if (us->nr_collided)
		name_set_reset(&us->collided);
	us->nr_collided = 0;
	us->casefold = casefold;
}

void unicrash_set_release(struct unicrash_set *us)
{
	name_set_release(&us->keys);
	name_set_release(&us->collided);
}

bool unicrash_set_add(struct unicrash_set *us, const uint64_t keys[UNICRASH_NR_KEYS])
{
	bool hit = false;

	for (int k = 0; k < UNICRASH_NR_KEYS; k++) {
		if (!keys[k] || !name_set_insert(&us->keys, keys[k]))
			continue;
		hit = true;
		if (!name_set_insert(&us->collided, keys[k]))
			us->nr_collided++;
	}
	return hit;
}

static void add_member(struct unicrash_members *m, uint64_t hash, enum unicrash_key key,
		       const char *name, size_t len, uint64_t ino)
{
	if (m->nr >= UNICRASH_MAX_MEMBERS) {
		m->overflow = true;
		return;
	}
	if (m->nr == m->alloc) {
		m->alloc = m->alloc ? m->alloc * 2 : 16;
		m->v = xrealloc(m->v, m->alloc * sizeof(*m->v));
	}
	m->v[m->nr] = (struct unicrash_member){
		.hash = hash, .key = key, .name = xstrndup(name, len), .len = len,
		.ino = ino, .seq = m->nr,
	};
	m->nr++;
}

void unicrash_gather(struct unicrash_members *m, const struct unicrash_set *us,
		     const char *name, size_t len, const uint64_t keys[UNICRASH_NR_KEYS],
		     uint64_t ino)
{
	for (int k = 0; k < UNICRASH_NR_KEYS; k++) {
		if (!keys[k])
			continue;
		if (us && !name_set_contains(&us->collided, keys[k]))
			continue;
		add_member(m, keys[k], (enum unicrash_key)k, name, len, ino);
	}
}

static int member_cmp(const void *pa, const void *pb)
{
	const struct unicrash_member *a = pa, *b = pb;

	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The key whose group reports this kind. */
static enum unicrash_key key_of(enum unicrash_kind kind)
{
	switch (kind) {
	case UNICRASH_CASEFOLD: return UNICRASH_KEY_FOLD;
	case UNICRASH_CONFUSABLE: return UNICRASH_KEY_SKELETON;
	default: return UNICRASH_KEY_NFKC;
	}
}

void unicrash_report(struct unicrash_members *m, bool casefold, unicrash_fn fn, void *arg)
{
	sort_items(m->v, m->nr, sizeof(*m->v), member_cmp);
	for (size_t first = 0, i = 1; i < m->nr; i++) {
		const struct unicrash_member *a = &m->v[first], *b = &m->v[i];
		enum unicrash_kind kind;

		if (b->hash != a->hash || b->key != a->key) {
			first = i;
			continue;
		}
		kind = unicrash_compare(a->name, a->len, b->name, b->len, casefold);
		if (kind != UNICRASH_NONE && key_of(kind) == a->key)
			fn(arg, kind, a, b);
	}
}

void unicrash_members_clear(struct unicrash_members *m)
{
	for (size_t i = 0; i < m->nr; i++)
		free(m->v[i].name);
	m->nr = 0;
	m->overflow = false;
}

void unicrash_members_release(struct unicrash_members *m)
{
	unicrash_members_clear(m);
	free(m->v);
	m->v = NULL;
	m->alloc = 0;
}
