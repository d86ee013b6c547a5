/*
 * jsonfmt: the few ways fscrub writes values into JSON, shared by the
 * report (json_report.c), the run history (history.c) and the
 * subcommands (status, health): strings from the system made printable
 * as the text reports print them, and times as ISO 8601 UTC.
 */
#ifndef FSCRUB_JSONFMT_H
#define FSCRUB_JSONFMT_H

#include <json-c/json.h>
#include <stddef.h>
#include <time.h>

/*
 * A string from the system (a path, a device name, a label) escaped by
 * names_escape(), so valid UTF-8 whatever its bytes; NULL for NULL (which
 * json-c writes as null).
 */
json_object *json_escaped_string(const char *s);

/* t (seconds since the epoch) as "YYYY-MM-DDTHH:MM:SSZ" into buf (>= 21 bytes). */
void iso8601_utc(time_t t, char *buf, size_t size);

#endif
