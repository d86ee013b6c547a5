/*
 * strbuf: a growable, always NUL-terminated byte string.
 *
 * fscrub never formats paths into fixed PATH_MAX buffers: a tree can be
 * deeper than any such limit, and truncating a path in a report would name
 * the wrong file.  Invariant: after strbuf_init(), sb->buf is never NULL and
 * sb->buf[sb->len] == '\0'.  Allocation failure aborts the program (there is
 * no sensible way to keep scrubbing without memory for a message).
 */
#ifndef FSCRUB_STRBUF_H
#define FSCRUB_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

struct strbuf {
	char *buf;
	size_t len;
	size_t alloc;
};

#define STRBUF_INIT { .buf = strbuf_empty, .len = 0, .alloc = 0 }
extern char strbuf_empty[];

void strbuf_init(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
/* Hand the buffer to the caller (who frees it) and reset sb. */
char *strbuf_detach(struct strbuf *sb);

/* Allocation helpers that abort on failure, used everywhere in fscrub. */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

#endif
