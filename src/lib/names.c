/*
 * names: name classification, escaping and the per-directory duplicate set.
 * See names.h for the rules.
 */
#include "lib/names.h"

#include <stdlib.h>
#include <string.h>

/*
 * Length of the well-formed UTF-8 sequence at s (at most len bytes), or 0 if
 * the bytes there are not one: overlong forms, surrogates and code points
 * above U+10FFFF are rejected as RFC 3629 requires.  *cp gets the code point.
 */
static size_t utf8_sequence(const unsigned char *s, size_t len, uint32_t *cp)
{
	size_t n;
	uint32_t c, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	} else if ((s[0] & 0xe0) == 0xc0) {
		n = 2, c = s[0] & 0x1f, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3, c = s[0] & 0x0f, min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4, c = s[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

static bool is_control(uint32_t cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

static bool is_bidi_control(uint32_t cp)
{
	return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/*
 * Characters that render as nothing in any context (Unicode's
 * Default_Ignorable_Code_Point, less the joiners below): zero width space,
 * soft hyphen, combining grapheme joiner, the bidi marks LRM, RLM and ALM,
 * Hangul and Khmer fillers, the Mongolian vowel separator, word joiner and
 * invisible operators, deprecated format characters, BOM, interlinear
 * annotation and musical formatting characters.
 */
static bool is_invisible(uint32_t cp)
{
	return cp == 0x00ad || cp == 0x034f || cp == 0x061c || cp == 0x115f ||
	       cp == 0x1160 || cp == 0x17b4 || cp == 0x17b5 || cp == 0x180e ||
	       cp == 0x200b || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x206a && cp <= 0x206f) ||
	       cp == 0x3164 || cp == 0xfeff || cp == 0xffa0 ||
	       (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0x1d173 && cp <= 0x1d17a) ||
	       cp == 0xe0000 || cp == 0xe0001 || (cp >= 0xe0080 && cp <= 0xe00ff) ||
	       (cp >= 0xe01f0 && cp <= 0xe0fff);
}

/* ZWNJ and ZWJ: spelling in Indic scripts and Persian, glue in emoji. */
static bool is_zw_joiner(uint32_t cp)
{
	return cp == 0x200c || cp == 0x200d;
}

/* Variation selectors and tag characters: they modify what precedes them. */
static bool is_modifier(uint32_t cp)
{
	return (cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0100 && cp <= 0xe01ef) ||
	       (cp >= 0xe0020 && cp <= 0xe007f);
}

bool names_cp_needs_escape(uint32_t cp)
{
	return is_control(cp) || is_bidi_control(cp) || is_invisible(cp) ||
	       is_zw_joiner(cp) || is_modifier(cp);
}

/* Can the character join or modify a neighbour?  Not ASCII, not invisible. */
static bool is_joinable(uint32_t cp)
{
	return cp >= 0x80 && !is_bidi_control(cp) && !is_invisible(cp) && !is_zw_joiner(cp);
}

/* The code point at s[i] if it is well-formed UTF-8, else 0 (none). */
static uint32_t cp_at(const unsigned char *s, size_t len, size_t i)
{
	uint32_t cp = 0;

	if (i >= len || !utf8_sequence(s + i, len - i, &cp))
		return 0;
	return cp;
}

/* The flags one well-formed code point adds, given its neighbours (0: none). */
static unsigned classify_cp(uint32_t prev, uint32_t cp, uint32_t next)
{
	if (is_control(cp))
		return NAME_CONTROL | (cp >= 0x80 ? NAME_NON_ASCII : 0);
	if (cp < 0x80)
		return 0;
	if (is_bidi_control(cp))
		return NAME_BIDI | NAME_NON_ASCII;
	if (is_invisible(cp))
		return NAME_INVISIBLE | NAME_NON_ASCII;
	if (is_zw_joiner(cp) && !(is_joinable(prev) && is_joinable(next)))
		return NAME_INVISIBLE | NAME_NON_ASCII;
	/* U+20E3 after a variation selector: a keycap emoji ("1<FE0F><20E3>"). */
	if (is_modifier(cp) && !is_joinable(prev) && next != 0x20e3)
		return NAME_INVISIBLE | NAME_NON_ASCII;
	return NAME_NON_ASCII;
}

unsigned names_classify(const char *name, size_t len)
{
	const unsigned char *s = (const unsigned char *)name;
	unsigned flags = 0;
	uint32_t prev = 0;

	if (len == 0)
		return NAME_EMPTY;
	if (memchr(name, '/', len))
		flags |= NAME_SLASH;
	if (name[0] == '-')
		flags |= NAME_OPTION;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n;

		/* ASCII, almost every byte of almost every name: no decoding. */
		if (s[i] < 0x80) {
			if (s[i] < 0x20 || s[i] == 0x7f)
				flags |= NAME_CONTROL;
			prev = s[i++];
			continue;
		}
		n = utf8_sequence(s + i, len - i, &cp);
		if (n == 0) {
			flags |= NAME_BAD_UTF8 | NAME_NON_ASCII;
			if (s[i] < 0x20 || s[i] == 0x7f)
				flags |= NAME_CONTROL;
			prev = 0;
			i++;
			continue;
		}
		flags |= classify_cp(prev, cp, cp >= 0x80 ? cp_at(s, len, i + n) : 0);
		/* A modifier after a modifier (an emoji tag sequence) is joinable. */
		if (!is_modifier(cp) || !is_joinable(prev))
			prev = cp;
		i += n;
	}
	return flags;
}

static void escape_byte(struct strbuf *out, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	char esc[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

	strbuf_add(out, esc, sizeof(esc));
}

void names_escape(struct strbuf *out, const char *name, size_t len)
{
	const unsigned char *s = (const unsigned char *)name;

	strbuf_grow(out, len);
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_sequence(s + i, len - i, &cp);

		if (n == 0 || names_cp_needs_escape(cp) || cp == '\\') {
			size_t bytes = n ? n : 1;

			for (size_t k = 0; k < bytes; k++) {
				unsigned char c = s[i + k];

				if (c == '\\')
					strbuf_addstr(out, "\\\\");
				else if (c == '\n')
					strbuf_addstr(out, "\\n");
				else if (c == '\t')
					strbuf_addstr(out, "\\t");
				else if (c == '\r')
					strbuf_addstr(out, "\\r");
				else
					escape_byte(out, c);
			}
			i += bytes;
			continue;
		}
		strbuf_add(out, s + i, n);
		i += n;
	}
}

/* FNV-1a, then a 64-bit finaliser (splitmix64) to spread the low bits. */
uint64_t name_hash(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return h ? h : 1;	/* 0 marks an empty slot */
}

/* 64 slots cover the common small directory without a reallocation. */
#define NAME_SET_MIN 64

void name_set_init(struct name_set *set)
{
	set->mask = NAME_SET_MIN - 1;
	set->slots = xcalloc(NAME_SET_MIN, sizeof(*set->slots));
	set->count = 0;
}

void name_set_release(struct name_set *set)
{
	free(set->slots);
	set->slots = NULL;
}

void name_set_reset(struct name_set *set)
{
	size_t cap = set->mask + 1;

	if (set->count == 0)
		return;		/* nothing to clear */
	/*
	 * After a big directory, do not keep clearing its table for each
	 * small one: a table an eighth full is made anew (256 slots: 2 KiB
	 * are cleared faster than allocated).
	 */
	if (cap > 256 && set->count < cap / 8) {
		name_set_release(set);
		name_set_init(set);
		return;
	}
	memset(set->slots, 0, cap * sizeof(*set->slots));
	set->count = 0;
}

static bool name_set_put(uint64_t *slots, size_t mask, uint64_t hash)
{
	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		if (slots[i] == hash)
			return true;
		if (slots[i] == 0) {
			slots[i] = hash;
			return false;
		}
	}
}

bool name_set_insert(struct name_set *set, uint64_t hash)
{
	/* Keep the load factor under 1/2 so probe chains stay short. */
	if ((set->count + 1) * 2 > set->mask + 1) {
		size_t cap = (set->mask + 1) * 2;
		uint64_t *slots = xcalloc(cap, sizeof(*slots));

		for (size_t i = 0; i <= set->mask; i++)
			if (set->slots[i])
				name_set_put(slots, cap - 1, set->slots[i]);
		free(set->slots);
		set->slots = slots;
		set->mask = cap - 1;
	}
	if (name_set_put(set->slots, set->mask, hash))
		return true;
	set->count++;
	return false;
}

bool name_set_contains(const struct name_set *set, uint64_t hash)
{
	for (size_t i = hash & set->mask;; i = (i + 1) & set->mask) {
		if (set->slots[i] == hash)
			return true;
		if (set->slots[i] == 0)
			return false;
	}
}
