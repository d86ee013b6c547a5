/*
 * status: `fscrub status [OPTIONS] [MOUNTPOINT...]`, what the run history
 * (state.h) says about each filesystem -- the last run, the findings still
 * open, when data was last verified, what is overdue -- without checking
 * anything.  usage() mirrors fscrub(8), "STATUS".
 */
#ifndef FSCRUB_STATUS_H
#define FSCRUB_STATUS_H

/* argv[0] is "status".  Returns the exit code: 0, 4 (open errors), 8, 16. */
int status_main(int argc, char **argv);

#endif
