/*
 * Unit tests for btrfs_xattr_item_names: the names of one XATTR_ITEM.  An
 * item holds every attribute whose name hashes to its key, one struct
 * btrfs_dir_item + name + value after the other: all of them come out, in
 * order; an entry that runs past the item (or has no name) is -EUCLEAN,
 * never a read past the bytes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "backends/btrfs/btrfs_xattrs.h"
#include "lib/strbuf.h"

/* The on-disk struct btrfs_dir_item: 30 bytes, name_len at 27, data_len at 25. */
#define DI_SIZE 30

static size_t put_entry(unsigned char *p, const char *name, const char *value)
{
	size_t nl = strlen(name), dl = strlen(value);

	memset(p, 0, DI_SIZE);
	p[25] = (unsigned char)dl;
	p[26] = (unsigned char)(dl >> 8);
	p[27] = (unsigned char)nl;
	p[28] = (unsigned char)(nl >> 8);
	p[29] = 8;	/* BTRFS_FT_XATTR */
	memcpy(p + DI_SIZE, name, nl);
	memcpy(p + DI_SIZE + nl, value, dl);
	return DI_SIZE + nl + dl;
}

static void test_two_names_in_one_item(void **state)
{
	unsigned char item[256];
	struct strbuf sb = STRBUF_INIT;
	size_t len;

	(void)state;
	len = put_entry(item, "user.collide_01371838", "v1");
	len += put_entry(item + len, "user.collide_02000402", "");
	assert_int_equal(btrfs_xattr_item_names(item, len, &sb), 0);
	assert_int_equal(sb.len, sizeof("user.collide_01371838") * 2);
	assert_memory_equal(sb.buf, "user.collide_01371838\0user.collide_02000402\0", sb.len);
	strbuf_release(&sb);
}

static void test_bad_items(void **state)
{
	unsigned char item[256];
	struct strbuf sb = STRBUF_INIT;
	size_t len;

	(void)state;
	len = put_entry(item, "user.a", "value");
	/* cut inside the value, inside the header, of the second entry */
	assert_int_equal(btrfs_xattr_item_names(item, len - 1, &sb), -EUCLEAN);
	assert_int_equal(btrfs_xattr_item_names(item, DI_SIZE - 1, &sb), -EUCLEAN);
	len += put_entry(item + len, "user.b", "");
	assert_int_equal(btrfs_xattr_item_names(item, len + 3, &sb), -EUCLEAN);
	/* a name of no bytes */
	strbuf_reset(&sb);
	len = put_entry(item, "", "x");
	assert_int_equal(btrfs_xattr_item_names(item, len, &sb), -EUCLEAN);
	/* an empty item has no names */
	strbuf_reset(&sb);
	assert_int_equal(btrfs_xattr_item_names(item, 0, &sb), 0);
	assert_int_equal(sb.len, 0);
	strbuf_release(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_names_in_one_item),
		cmocka_unit_test(test_bad_items),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
