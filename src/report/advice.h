/*
 * advice: what a user should do about a finding, by its check id.
 *
 * Every check id of checks.h has one entry in advice.c's table: an action
 * (the class of what to do) and, where the class's sentence does not say
 * enough, a sentence of its own.  The actions are ordered by how much they
 * matter, so that the summary line can name the most serious one among a
 * run's findings:
 *
 *   none       an info, or something fscrub corrected: nothing to do
 *   rename     a name that deceives or is badly encoded: nothing is damaged
 *   recheck    a suspicion, not damage yet: look again (run fscrub, the device)
 *   restore    a file's data is lost or rotten: restore it from a backup
 *   offline    metadata damage: unmount and run the filesystem's offline
 *              checker (for the root filesystem: boot rescue media)
 *   device     a device failing or missing: replace or reattach it first
 *
 * An info is always "none", whatever its check.  A check id without an
 * entry (one added on another branch) gets its class's default by prefix
 * (name.* rename; data.*, ledger.*, manifest.* restore; the rest offline);
 * tests/integration/test_cli.py fails until it has an entry of its own.
 */
#ifndef FSCRUB_ADVICE_H
#define FSCRUB_ADVICE_H

#include <stdbool.h>

#include "report/report.h"

struct strbuf;

enum advice_action {
	ADVICE_NONE,
	ADVICE_RENAME,
	ADVICE_RECHECK,
	ADVICE_RESTORE,
	ADVICE_OFFLINE,
	ADVICE_DEVICE,
	ADVICE_ACTIONS,		/* how many */
};

/* Which filesystem the advice is about: its offline checker and how to reach it. */
struct advice_fs {
	const char *fstype;	/* the mount table's type; NULL: unknown */
	bool root;		/* mounted at /: cannot be unmounted while running */
};

/* The action for a finding of check with severity sev. */
enum advice_action advice_action(const char *check, enum severity sev);

/* The action's name in JSON: "none", "rename", "recheck", "restore", "offline", "device". */
const char *advice_action_name(enum advice_action a);

/* The one sentence of advice for a finding of check with severity sev, added to sb. */
void advice_text(struct strbuf *sb, const char *check, enum severity sev,
		 const struct advice_fs *fs);

/*
 * The summary's advice for the set of actions seen (a bit per action, as
 * 1u << ADVICE_*), added to sb: the most serious action's sentence, then
 * the other ones a user must take (restore and above) from the most serious
 * down, each starting "Then".  Nothing for none.
 */
void advice_summary(struct strbuf *sb, unsigned actions, const struct advice_fs *fs);

/* The most serious action among a set of them (1u << ADVICE_*); none if empty. */
enum advice_action advice_worst(unsigned actions);

#endif
