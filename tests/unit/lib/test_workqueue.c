/* Unit tests for workqueue.c: all items run once, items may add items. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "lib/workqueue.h"

struct node {
	struct wq_item item;
	unsigned depth;
};

struct tree_arg {
	atomic_ulong visited;
	atomic_uint max_thread;
	unsigned fanout, max_depth;
};

/* Each item adds fanout children until max_depth: a full tree. */
static void visit(struct workqueue *wq, struct wq_item *item, unsigned thread, void *p)
{
	struct node *n = (struct node *)item;
	struct tree_arg *a = p;

	atomic_fetch_add(&a->visited, 1);
	if (thread > atomic_load(&a->max_thread))
		atomic_store(&a->max_thread, thread);
	if (n->depth < a->max_depth) {
		for (unsigned i = 0; i < a->fanout; i++) {
			struct node *c = malloc(sizeof(*c));
			c->depth = n->depth + 1;
			workqueue_add(wq, &c->item);
		}
	}
	free(n);
}

static void run_tree(unsigned threads, unsigned fanout, unsigned depth, unsigned long want)
{
	struct workqueue wq;
	struct tree_arg a = { .fanout = fanout, .max_depth = depth };
	struct node *root = malloc(sizeof(*root));

	atomic_init(&a.visited, 0);
	atomic_init(&a.max_thread, 0);
	root->depth = 0;
	assert_int_equal(workqueue_init(&wq, threads, visit, &a), 0);
	workqueue_add(&wq, &root->item);
	workqueue_wait(&wq);
	assert_int_equal(atomic_load(&a.visited), want);
	assert_int_equal(wq.done, want);
	assert_true(atomic_load(&a.max_thread) < threads);
	workqueue_destroy(&wq);
}

static void test_single_thread(void **state)
{
	(void)state;
	run_tree(1, 3, 6, 1093);	/* (3^7 - 1) / 2 */
}

static void test_many_threads(void **state)
{
	(void)state;
	run_tree(8, 4, 7, 21845);	/* (4^8 - 1) / 3 */
}

static void test_wait_on_empty(void **state)
{
	struct workqueue wq;
	struct tree_arg a = { 0 };

	(void)state;
	assert_int_equal(workqueue_init(&wq, 2, visit, &a), 0);
	workqueue_wait(&wq);		/* nothing queued: returns at once */
	assert_int_equal(wq.done, 0);
	workqueue_destroy(&wq);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_thread),
		cmocka_unit_test(test_many_threads),
		cmocka_unit_test(test_wait_on_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
