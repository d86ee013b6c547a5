/*
 * libFuzzer target: names_escape() and names_classify() on arbitrary bytes.
 * Invariants: the escaped form is valid UTF-8 without control characters
 * (so a hostile name can never forge a report line or reach a terminal
 * raw), and it is never shorter than the input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct strbuf sb = STRBUF_INIT;
	struct name_set set;

	(void)names_classify((const char *)data, size);
	names_escape(&sb, (const char *)data, size);
	if (sb.len < size)
		abort();
	if (names_classify(sb.buf, sb.len) & (NAME_BAD_UTF8 | NAME_CONTROL))
		abort();
	name_set_init(&set);
	if (name_set_insert(&set, name_hash((const char *)data, size)) ||
	    !name_set_insert(&set, name_hash((const char *)data, size)))
		abort();
	name_set_release(&set);
	strbuf_release(&sb);
	return 0;
}
