/*
 * registry: the list of backends, most specific first, generic last.  The
 * scan picks one by what the filesystem is (match()); fscrub health and
 * fscrub watch by the mount table's type, and a type whose backend has no
 * hook for them is one they do not support.
 */
#include "backends/backend.h"

#include <stddef.h>
#include "scan/context.h"
#include <string.h>

static const struct scrub_ops *const backends[] = {
	&xfs_ops,
	&btrfs_ops,
	&ext4_ops,
	&generic_ops,
};

#define NR_BACKENDS (sizeof(backends) / sizeof(backends[0]))

const struct scrub_ops *backend_find(const char *name)
{
	for (size_t i = 0; i < NR_BACKENDS; i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

const struct scrub_ops *backend_select(const struct scrub_ctx *ctx)
{
	return ctx->opt.backend ? backend_find(ctx->opt.backend) : backend_native(ctx);
}

const struct scrub_ops *backend_native(const struct scrub_ctx *ctx)
{
	for (size_t i = 0; i < NR_BACKENDS; i++)
		if (!backends[i]->match || backends[i]->match(ctx))
			return backends[i];
	return &generic_ops;
}

const char *backend_names(void)
{
	static char names[256];

	if (!names[0]) {
		for (size_t i = 0; i < NR_BACKENDS; i++) {
			if (i)
				strncat(names, ", ", sizeof(names) - strlen(names) - 1);
			strncat(names, backends[i]->name, sizeof(names) - strlen(names) - 1);
		}
	}
	return names;
}

const struct scrub_ops *backend_of_fstype(const char *fstype)
{
	for (size_t i = 0; i < NR_BACKENDS; i++)
		if (backends[i]->match && !strcmp(backends[i]->name, fstype))
			return backends[i];
	return NULL;
}

bool backend_has_health(const char *fstype)
{
	const struct scrub_ops *b = backend_of_fstype(fstype);

	return b && b->health;
}

bool backend_has_watch(const char *fstype)
{
	const struct scrub_ops *b = backend_of_fstype(fstype);

	return b && b->watch_open;
}
