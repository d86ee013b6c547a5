/*
 * workqueue: see workqueue.h.
 */
#include "lib/workqueue.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/strbuf.h"
#include "lib/thread.h"

struct worker_start {
	struct workqueue *wq;
	unsigned index;
};

static void *worker_main(void *p)
{
	struct worker_start *start = p;
	struct workqueue *wq = start->wq;
	unsigned index = start->index;

	free(start);
	pthread_mutex_lock(&wq->lock);
	for (;;) {
		while (!wq->stack && !wq->shutdown)
			pthread_cond_wait(&wq->more, &wq->lock);
		if (!wq->stack)
			break;
		struct wq_item *item = wq->stack;

		wq->stack = item->next;
		wq->queued--;
		wq->busy++;
		pthread_mutex_unlock(&wq->lock);

		wq->fn(wq, item, index, wq->arg);

		pthread_mutex_lock(&wq->lock);
		wq->busy--;
		wq->done++;
		if (!wq->stack && wq->busy == 0)
			pthread_cond_broadcast(&wq->idle);
	}
	pthread_mutex_unlock(&wq->lock);
	return NULL;
}

int workqueue_init(struct workqueue *wq, unsigned nr_threads, wq_fn fn, void *arg)
{
	int ret = 0;

	pthread_mutex_init(&wq->lock, NULL);
	pthread_cond_init(&wq->more, NULL);
	pthread_cond_init(&wq->idle, NULL);
	wq->stack = NULL;
	wq->queued = 0;
	wq->busy = 0;
	wq->shutdown = false;
	wq->fn = fn;
	wq->arg = arg;
	wq->done = 0;
	wq->threads = xcalloc(nr_threads, sizeof(*wq->threads));
	wq->nr_threads = 0;

	for (unsigned i = 0; i < nr_threads; i++) {
		struct worker_start *start = xmalloc(sizeof(*start));

		start->wq = wq;
		start->index = i;
		int err = thread_start(&wq->threads[i], worker_main, start);
		if (err) {
			free(start);
			ret = -err;
			break;
		}
		wq->nr_threads++;
	}
	if (ret && wq->nr_threads == 0) {
		free(wq->threads);
		wq->threads = NULL;
		return ret;
	}
	/* Fewer threads than asked still make progress. */
	return 0;
}

void workqueue_add(struct workqueue *wq, struct wq_item *item)
{
	pthread_mutex_lock(&wq->lock);
	item->next = wq->stack;
	wq->stack = item;
	wq->queued++;
	pthread_cond_signal(&wq->more);
	pthread_mutex_unlock(&wq->lock);
}

void workqueue_wait(struct workqueue *wq)
{
	pthread_mutex_lock(&wq->lock);
	while (wq->stack || wq->busy)
		pthread_cond_wait(&wq->idle, &wq->lock);
	pthread_mutex_unlock(&wq->lock);
}

void workqueue_destroy(struct workqueue *wq)
{
	pthread_mutex_lock(&wq->lock);
	wq->shutdown = true;
	pthread_cond_broadcast(&wq->more);
	pthread_mutex_unlock(&wq->lock);
	for (unsigned i = 0; i < wq->nr_threads; i++)
		pthread_join(wq->threads[i], NULL);
	free(wq->threads);
	wq->threads = NULL;
	pthread_cond_destroy(&wq->more);
	pthread_cond_destroy(&wq->idle);
	pthread_mutex_destroy(&wq->lock);
}
