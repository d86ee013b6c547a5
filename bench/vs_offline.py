"""vs_offline: what bench/xfs_vs_repair.sh and bench/ext4_vs_e2fsck.sh share
(bench/lib.sh's vs_offline runs their Python with this module and the
integration tests' helpers importable, from tests/integration).

Each case is a name, an injector that breaks a fresh sparse copy of one
clean image offline, and a note (why fscrub cannot see the fault while the
filesystem is mounted, or empty).  run_cases() asks the offline checker
about each broken copy, then mounts it and runs fscrub on it; table()
prints the rows side by side as Markdown."""

import os
import sys
import time

from conftest import run_fscrub


def short(text, width=90):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def cell(text):
    return str(text).replace("|", "\\|")


def fscrub_says(r, prefer=None):
    """The first error (else warning) other than the tree's odd names; the
    first of check prefer if there is one."""
    for f in r.findings:
        if f.severity == "Error" and f.check == prefer:
            return "%s [%s]" % (short(f.message), f.check)
    for sev in ("Error", "Warning"):
        for f in r.findings:
            if f.severity == sev and not f.check.startswith("name."):
                return "%s [%s]" % (short(f.message), f.check)
    return "(none)"


def fscrub_checks(r, prefer=None):
    """The distinct check ids of fscrub's errors (else warnings), in order
    (prefer: as fscrub_says, unused: every id is listed)."""
    for sev in ("Error", "Warning"):
        ids = []
        for f in r.findings:
            if f.severity == sev and not f.check.startswith("name.") and f.check not in ids:
                ids.append(f.check)
        if ids:
            return ", ".join(ids)
    return "-"


def run_cases(base, cases, work, offline_says, fscrub_args=(), describe=None):
    """For each (name, inject, note) of cases: a copy of the unmounted image
    base, broken by inject(img), judged by offline_says(path) -> (exit,
    text), then scrubbed mounted (fscrub_args): the offline checker sees
    the image as injected, before a mount can repair it.  Returns rows of
    (name, fscrub exit, fscrub's verdict, offline exit, offline text, note);
    describe(r, prefer) gives fscrub's verdict (default: fscrub_says).
    An injector may set img.victim (a path held open while fscrub runs, so
    that the kernel keeps its inode) and img.prefer (the check id whose
    finding describes the fault best)."""
    describe = describe or fscrub_says
    rows = []
    for i, (name, inject, note) in enumerate(cases):
        img = base.copy(os.path.join(work, "case%d.img" % i))
        img.victim = img.prefer = None
        try:
            try:
                inject(img)
            except Exception as e:      # no victim of that kind in this image
                rows.append((name, "-", "not injected: %s" % short(str(e)), "-", "-", note))
                continue
            img.offline()
            # First: a mount may repair what it finds (the orphan list).
            offline = offline_says(img.path)
            time.sleep(1.1)     # victims younger than 1 s count as changed
            fd = None
            try:
                mnt = img.mount()
                if img.victim:
                    fd = os.open(img.victim, os.O_RDONLY)
                r = run_fscrub(*fscrub_args, mnt)
                said = (r.rc, describe(r, img.prefer))
            except RuntimeError:        # the kernel refuses the damage
                said = ("-", "(the kernel does not mount it)")
            finally:
                if fd is not None:
                    os.close(fd)
            img.offline()
            rows.append((name,) + said + offline + (note,))
        finally:
            img.cleanup(remove=True)
        print("done: %s" % name, file=sys.stderr)
    return rows


def table(headers, rows):
    print("| %s |" % " | ".join(headers))
    print("|%s" % ("---|" * len(headers)))
    for row in rows:
        print("| %s |" % " | ".join(cell(c) for c in row))
