/*
 * workqueue: a fixed pool of threads draining one shared LIFO stack.
 *
 * Items are intrusive (embed a struct wq_item) so queueing never allocates.
 * LIFO order makes the tree walk depth-first: the frontier stays small and
 * the directory just read is still in the descriptor cache when its
 * children are processed.  Work items may queue more work; workqueue_wait()
 * returns when the stack is empty and no worker is busy.  Signals are
 * blocked in the workers so that they are delivered to the main thread.
 */
#ifndef FSCRUB_WORKQUEUE_H
#define FSCRUB_WORKQUEUE_H

#include <pthread.h>
#include <stdbool.h>

struct wq_item {
	struct wq_item *next;
};

struct workqueue;
/* Called in a worker; thread is 0..nr_threads-1. */
typedef void (*wq_fn)(struct workqueue *wq, struct wq_item *item,
		      unsigned thread, void *arg);

struct workqueue {
	pthread_mutex_t lock;
	pthread_cond_t more;		/* items were added, or shutdown */
	pthread_cond_t idle;		/* stack empty and nobody busy */
	struct wq_item *stack;
	unsigned long queued;		/* items on the stack */
	unsigned busy;			/* workers running an item */
	bool shutdown;
	unsigned nr_threads;
	pthread_t *threads;
	wq_fn fn;
	void *arg;
	unsigned long long done;	/* items completed, for -T */
};

/* Returns 0 or a negative errno (threads could not be created). */
int workqueue_init(struct workqueue *wq, unsigned nr_threads, wq_fn fn, void *arg);
void workqueue_add(struct workqueue *wq, struct wq_item *item);
void workqueue_wait(struct workqueue *wq);
/* Stop the workers (after workqueue_wait) and free the pool. */
void workqueue_destroy(struct workqueue *wq);

#endif
