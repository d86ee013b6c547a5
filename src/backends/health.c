/*
 * health: the record a backend's health hook fills; see health.h.
 */
#include "backends/health.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>

#include "lib/fsmounts.h"

void health_init(struct health *h, const struct fsmount *m)
{
	memset(h, 0, sizeof(*h));
	h->m = m;
	strbuf_init(&h->text);
	h->problems = json_object_new_array();
	h->detail = json_object_new_object();
}

void health_release(struct health *h)
{
	strbuf_release(&h->text);
	json_object_put(h->problems);
	json_object_put(h->detail);
}

static void add_line(struct health *h, const char *prefix, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_vaddf(&sb, fmt, ap);
	strbuf_addf(&h->text, "  %s%s\n", prefix, sb.buf);
	if (*prefix)
		json_object_array_add(h->problems, json_object_new_string(sb.buf));
	strbuf_release(&sb);
}

void health_problem(struct health *h, const char *fmt, ...)
{
	va_list ap;

	h->sick = true;
	va_start(ap, fmt);
	add_line(h, "problem: ", fmt, ap);
	va_end(ap);
}

void health_line(struct health *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_line(h, "", fmt, ap);
	va_end(ap);
}

int health_open_root(const struct health *h)
{
	int fd = open(h->m->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}
