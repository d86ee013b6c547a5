/*
 * jsonfmt: shared JSON value formats (see jsonfmt.h).
 */
#include "lib/jsonfmt.h"

#include <stdio.h>
#include <string.h>

#include "lib/names.h"
#include "lib/strbuf.h"

json_object *json_escaped_string(const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	json_object *o;

	if (!s)
		return NULL;
	names_escape(&sb, s, strlen(s));
	o = json_object_new_string(sb.buf);
	strbuf_release(&sb);
	return o;
}

void iso8601_utc(time_t t, char *buf, size_t size)
{
	struct tm tm;

	/* A time gmtime() cannot break down (far out of range) is printed as a number. */
	if (!gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "%lld", (long long)t);
}
