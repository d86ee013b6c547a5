/*
 * kmsg: the block layer's error lines in the kernel log; see kmsg.h.
 */
#include "cmd/kmsg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernel's own records: facility 0 (LOG_KERN); PRI is facility * 8 + level. */
#define KMSG_FACILITY(pri) ((pri) >> 3)

/* A decimal (base 10) or hexadecimal (base 16) number at *p, moved past it. */
static bool number(const char **p, int base, uint64_t *out)
{
	char *end;

	if (**p < '0' || **p > (base == 16 ? 'f' : '9'))
		return false;
	errno = 0;
	*out = strtoull(*p, &end, base);
	if (errno || end == *p)
		return false;
	*p = end;
	return true;
}

/* The device name at *p up to one of stop (or the end), moved past it. */
static bool devname(const char **p, const char *stop, char *out)
{
	size_t n = strcspn(*p, stop);

	if (!n || n >= KMSG_NAME_MAX)
		return false;
	memcpy(out, *p, n);
	out[n] = 0;
	*p += n;
	return true;
}

/* Does s start with prefix?  Then *p is moved past it. */
static bool skip(const char **p, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(*p, prefix, n))
		return false;
	*p += n;
	return true;
}

/* "<status> error, dev NAME, sector N op 0xX:(READ) ...": READ and WRITE only. */
static bool request_error(const char *msg, struct kmsg_error *e)
{
	const char *p = strstr(msg, " error, dev ");
	const char *op;

	if (!p || p == msg)
		return false;
	p += strlen(" error, dev ");
	if (!devname(&p, ", ", e->dev) || !skip(&p, ", sector ") ||
	    !number(&p, 10, &e->first) || !skip(&p, " op 0x") || !(op = strstr(p, ":(")))
		return false;
	op += 2;
	if (strncmp(op, "READ)", 5) && strncmp(op, "WRITE)", 6))
		return false;
	e->unit = KMSG_SECTOR;
	e->format = "request";
	return true;
}

/* "Buffer I/O error on dev NAME, logical block N, ...". */
static bool buffer_error(const char *msg, struct kmsg_error *e)
{
	const char *p = msg;

	if (!skip(&p, "Buffer I/O error on dev ") || !devname(&p, ", ", e->dev) ||
	    !skip(&p, ", logical block ") || !number(&p, 10, &e->first))
		return false;
	e->unit = KMSG_BLOCK;
	e->format = "buffer";
	return true;
}

/*
 * "md/raid1:MD: MEMBER: unrecoverable I/O read error for block N" and
 * "md/raid1:MD: redirecting sector N to other mirror: MEMBER": a sector of MD.
 */
static bool md_error(const char *msg, struct kmsg_error *e)
{
	const char *p = msg, *q;

	if (!skip(&p, "md/raid1:") || !devname(&p, ": ", e->dev) || !skip(&p, ": "))
		return false;
	if ((q = strstr(p, ": unrecoverable I/O read error for block ")))
		q += strlen(": unrecoverable I/O read error for block ");
	else if ((q = p, skip(&q, "redirecting sector ")))
		;
	else
		return false;
	if (!number(&q, 10, &e->first))
		return false;
	e->unit = KMSG_SECTOR;
	e->format = "md raid1";
	return true;
}

/* "device-mapper: integrity: NAME: Checksum failed at sector 0xN". */
static bool integrity_error(const char *msg, struct kmsg_error *e)
{
	const char *p = msg;

	if (!skip(&p, "device-mapper: integrity: ") || !devname(&p, ": ", e->dev) ||
	    !skip(&p, ": Checksum failed at sector 0x") || !number(&p, 16, &e->first))
		return false;
	e->unit = KMSG_INTEGRITY_SECTOR;
	e->format = "dm-integrity";
	return true;
}

int kmsg_parse(const char *rec, size_t len, struct kmsg_error *out)
{
	const char *semi = memchr(rec, ';', len), *nl;
	char msg[1024];		/* the kernel's records are at most 1024 bytes (PRINTKRB_RECORD_MAX) */
	struct kmsg_error e = { 0 };
	unsigned long long pri, seq;
	int used = 0;

	if (!semi || sscanf(rec, "%llu,%llu,%*u,%*[^;];%n", &pri, &seq, &used) < 2 ||
	    rec + used != semi + 1)
		return -EINVAL;
	out->seq = seq;
	if (KMSG_FACILITY(pri) != 0)
		return 0;
	nl = memchr(semi + 1, '\n', len - (size_t)(semi + 1 - rec));
	len = (size_t)((nl ? nl : rec + len) - (semi + 1));
	if (len >= sizeof(msg))
		len = sizeof(msg) - 1;
	memcpy(msg, semi + 1, len);
	msg[len] = 0;
	if (!request_error(msg, &e) && !buffer_error(msg, &e) && !md_error(msg, &e) &&
	    !integrity_error(msg, &e))
		return 0;
	e.seq = seq;
	*out = e;
	return 1;
}

uint64_t kmsg_seq_read(struct kmsg_seq *s, uint64_t seq)
{
	uint64_t missed = s->started && seq > s->next ? seq - s->next : 0;

	s->next = seq + 1;
	s->started = true;
	return missed;
}

bool kmsg_recent_seen(struct kmsg_recent *r, const char *dev, uint64_t off, uint64_t len,
		      double now)
{
	unsigned oldest = r->next;

	for (unsigned i = 0; i < KMSG_RECENT; i++) {
		if (r->v[i].when <= 0 || now - r->v[i].when >= KMSG_QUIET_S ||
		    strcmp(r->v[i].dev, dev) || off >= r->v[i].off + r->v[i].len ||
		    r->v[i].off >= off + len)
			continue;
		r->v[i].folded++;
		return true;
	}
	snprintf(r->v[oldest].dev, sizeof(r->v[oldest].dev), "%s", dev);
	r->v[oldest].off = off;
	r->v[oldest].len = len;
	r->v[oldest].when = now;
	r->v[oldest].folded = 0;
	r->next = (r->next + 1) % KMSG_RECENT;
	return false;
}
