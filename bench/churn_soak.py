#!/usr/bin/python3
"""Soak: fscrub on a filesystem under constant churn (tests/integration/
churn.py: create, write, truncate, rename files and directories, link,
unlink, replace symlinks), REPS rounds per filesystem, each round one
metadata scan and one data scan (-x), at normal priority (with -b the
scan gets almost no CPU next to two busy workers on a small machine).  The acceptance figure is
the number of errors and warnings (beyond the fixture's odd names): it
must be 0.  Also printed: operations per scan, scan time, infos per scan.

    sudo bench/churn_soak.py                 # xfs ext4 btrfs tmpfs, 20 rounds
    sudo REPS=5 FSTYPES="xfs tmpfs" bench/churn_soak.py
    sudo REPS=3 FSTYPES="ext3" bench/churn_soak.py    # block-mapped files (ext2 too)

Environment: REPS (20), FSTYPES, FSCRUB (default: build/fscrub beside
this script), BENCH_DIR (/var/tmp/fscrub-soak).
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import churn    # noqa: E402
import fsimage  # noqa: E402

FSCRUB = os.environ.get("FSCRUB", os.path.join(TOP, "build", "fscrub"))
REPS = int(os.environ.get("REPS", "20"))
FSTYPES = os.environ.get("FSTYPES", "xfs ext4 btrfs tmpfs").split()
BENCH_DIR = os.environ.get("BENCH_DIR", "/var/tmp/fscrub-soak")
ODD_NAMES = ("[name.control]", "[name.encoding]")


def scan(mnt, c, *args):
    before, t0 = c.ops(), time.monotonic()
    p = subprocess.run([FSCRUB] + list(args) + [mnt], capture_output=True,
                       text=True, errors="replace")
    lines = p.stdout.splitlines()
    bad = [l for l in lines if l.startswith("Error:") or
           (l.startswith("Warning:") and not l.endswith(ODD_NAMES))]
    infos = sum(1 for l in lines if l.startswith("Info:"))
    return {"rc": p.returncode, "bad": bad, "stderr": p.stderr, "infos": infos,
            "ops": c.ops() - before, "seconds": time.monotonic() - t0}


def soak(fstype, workdir):
    if fstype == "tmpfs":
        fs = fsimage.make_tmpfs(workdir, populate=False, size_mb=1024)
        mnt = fs.mnt
    else:
        # ext2/ext3 (block-mapped files): 4 KiB blocks, as make_tree's
        # 3000-byte attribute needs (fsimage's default for them is 1 KiB).
        fs = fsimage.Image(workdir, fstype, size_mb=1024,
                           mkfs_args=("-b", "4096") if fstype in ("ext2", "ext3") else ())
        fs.mkfs()
        mnt = fs.mount()
    results = {"-v": [], "-v -x": []}
    try:
        fsimage.make_tree(mnt, deep=False)
        c = churn.Churn(mnt, workers=2, dirs=400, files=40)
        time.sleep(1.1)
        with c:
            time.sleep(0.3)
            for rep in range(REPS):
                for mode in results:
                    r = scan(mnt, c, *mode.split())
                    results[mode].append(r)
                    for l in r["bad"]:
                        print("  FALSE ALARM (%s, round %d): %s" % (mode, rep + 1, l))
                    if r["rc"] != 0:
                        print("  exit %d (%s, round %d): %s" % (r["rc"], mode, rep + 1,
                                                               r["stderr"].strip()))
        total_ops = c.ops()
    finally:
        fs.cleanup()
    return results, total_ops


def main():
    os.makedirs(BENCH_DIR, exist_ok=True)
    print("fscrub churn soak: %d rounds per filesystem, %s, kernel %s, %d CPUs"
          % (REPS, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.uname().release,
             os.cpu_count()))
    print("%-6s %-6s %6s %8s %9s %11s %11s %9s %8s" % (
        "fs", "mode", "scans", "errors", "nonzero", "ops min", "ops median",
        "s median", "infos"))
    failed = False
    for fstype in FSTYPES:
        workdir = tempfile.mkdtemp(prefix="soak-%s-" % fstype, dir=BENCH_DIR)
        results, total = soak(fstype, workdir)
        for mode, rs in results.items():
            bad = sum(len(r["bad"]) for r in rs)
            nonzero = sum(1 for r in rs if r["rc"] != 0)
            failed |= bool(bad or nonzero)
            print("%-6s %-6s %6d %8d %9d %11d %11d %9.2f %8d" % (
                fstype, mode, len(rs), bad, nonzero, min(r["ops"] for r in rs),
                statistics.median(r["ops"] for r in rs),
                statistics.median(r["seconds"] for r in rs),
                statistics.median(r["infos"] for r in rs)))
        print("%-6s total operations by the churn: %d" % (fstype, total))
        subprocess.run(["rm", "-rf", workdir])
    print("result: %s" % ("FALSE ALARMS" if failed else "0 errors, 0 warnings in every scan"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
