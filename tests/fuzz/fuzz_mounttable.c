/*
 * libFuzzer target: the mount table handling (libmount parsing of a -m
 * file, lookup by target and device, submount listing) on arbitrary text.
 * The input is written to a memfd and read back through /proc/self/fd,
 * the way a -m FILE is read.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/mountpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ignore(const char *target, const char *fstype, void *arg)
{
	(void)target;
	(void)fstype;
	(void)arg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("mtab", MFD_CLOEXEC);
	char path[64];
	struct libmnt_table *tb;
	struct mount_info mi = { 0 };
	int err;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	tb = mount_table_load(path, &err);
	if (tb) {
		(void)mount_find_by_target(tb, "/", &mi);
		(void)mount_find_by_target(tb, "/mnt", &mi);
		(void)mount_find_by_devno(tb, makedev(7, 0), &mi, false);
		(void)mount_find_by_devno(tb, makedev(8, 1), &mi, false);
		for (int id = 0; id < 64; id++)
			mount_for_each_child(tb, id, ignore, NULL);
		mount_info_release(&mi);
		mount_table_free(tb);
	}
	close(fd);
	return 0;
}
