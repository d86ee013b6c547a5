/*
 * registry: the list of backends, most specific first, generic last.
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
