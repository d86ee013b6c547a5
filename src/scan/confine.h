/*
 * confine: what a scan may still do once its filesystem is open.
 *
 * fscrub runs as root and parses metadata it reads from devices that
 * someone else may have made.  Once phase 1 has opened the mount, the
 * devices and the run history, a bug in a parser must not be able to do
 * what a root shell could: confine_scan() gives up every capability but
 * the few the scan's reads and ioctls need, forbids writing anywhere but
 * the places the run writes its results (Landlock), and refuses the system
 * calls a scan never makes (seccomp): executing programs, mounting,
 * tracing, loading modules, changing identities.  man/fscrub.8 (PRIVILEGES)
 * lists what is left and why.
 */
#ifndef FSCRUB_CONFINE_H
#define FSCRUB_CONFINE_H

struct scrub_ctx;

/*
 * Confine the rest of the run.  Each layer the kernel lacks is skipped
 * and said (-v); a layer the kernel has but refuses is an operational
 * error (the run goes on, unconfined by that layer).  Nothing is confined
 * when a FSCRUB_DEBUG_AFTER_* test hook is set: those run a command, as
 * root, in the middle of the scan.
 */
void confine_scan(struct scrub_ctx *ctx);

#endif
