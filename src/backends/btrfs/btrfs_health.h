/*
 * btrfs_health: the btrfs backend's hooks for the subcommands
 * (backend.h): every device's error counters (BTRFS_IOC_GET_DEV_STATS),
 * read by fscrub health and polled by fscrub watch, where a counter that
 * rose is an event.
 */
#ifndef FSCRUB_BTRFS_HEALTH_H
#define FSCRUB_BTRFS_HEALTH_H

struct health;
struct watch_fs;
struct watch_source;

/* The health hook: each device's counters; any nonzero one is a problem. */
int btrfs_health(struct health *h);

/* The watch hooks: the counters read at start, then every --poll-interval seconds. */
int btrfs_watch_open(struct watch_fs *wf, int root, struct watch_source *src);
void btrfs_watch_poll(struct watch_fs *wf, struct watch_source *src);
void btrfs_watch_close(struct watch_source *src);

#endif
