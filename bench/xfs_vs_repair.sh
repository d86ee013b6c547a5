#!/bin/bash
# xfs_vs_repair.sh: fscrub on the mounted image against `xfs_repair -n` on
# the unmounted one, for every fault the XFS integration tests inject.
#
# Each case starts from a copy of one clean image (the tests' xfs_image
# fixture: fsimage.make_tree, crc, reflink, rmapbt), is broken with the
# tests' own injectors (tests/integration/faults.py, test_xfs.py,
# test_xfs_xref.py -- damage only cross-referencing finds -- and
# test_xfs_vm.py), then
#   1. fscrub runs on the mounted image (host kernel), and
#   2. xfs_repair -n runs on the unmounted image file,
# and a Markdown table of exit codes and first findings goes to stdout.
# The quota case needs CONFIG_XFS_QUOTA, which the host kernel lacks: it is
# built and scrubbed in the VM (../shared/vm/vmrun), skipped without it.
# What it shares with ext4_vs_e2fsck.sh is in bench/lib.sh (vs_offline)
# and bench/vs_offline.py.
#
#   sudo bench/xfs_vs_repair.sh [WORKDIR]       (default: a fresh /tmp dir)
#
# Needs root (loop devices, mount), xfsprogs, Debian's python3 (pytest is
# imported by the test helpers) and a built fscrub ($FSCRUB, default
# build/fscrub).
set -eu
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=xfs_vs_repair.sh
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
vs_offline "${1:-$(mktemp -d /tmp/xfs_vs_repair.XXXXXX)}" <<'EOF'
import os
import re
import shlex
import subprocess
import sys
import time

import faults
import fsimage
import test_xfs
import test_xfs_vm
import test_xfs_xref
from vs_offline import fscrub_says, run_cases, short, table

work = sys.argv[1]

# xfs_repair -n's progress chatter; the first other line is what it says.
# On an image file it also warns that the host's geometry is unknown.
CHATTER = re.compile(r"^(Phase \d|\s+- |No modify flag set|Note - |\s*$|"
                     r"Cannot get host filesystem geometry|Repair may fail if|"
                     r"the image and the host filesystem)")


def repair_says(path):
    p = subprocess.run(["xfs_repair", "-n", path], capture_output=True, text=True)
    lines = [l.strip() for l in (p.stdout + p.stderr).splitlines() if not CHATTER.match(l)]
    return p.returncode, short(lines[0]) if lines else "(nothing)"


def base_image(rmapbt=True):
    img = fsimage.Image(work, "xfs", size_mb=300, name="base" if rmapbt else "normap")
    if rmapbt:
        img.mkfs()
    else:
        # fsimage's mkfs gives -m rmapbt=1, which cannot be overridden.
        with open(img.path, "wb") as fh:
            fh.truncate(300 << 20)
        fsimage.run(["mkfs.xfs", "-f", "-q", "-m", "crc=1,reflink=1,rmapbt=0", img.path],
                    env=dict(os.environ, **fsimage._XFS_SMALL_ENV))
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.offline()
    return img


def reflinked(img):
    test_xfs.make_reflinked(img.mount())
    img.offline()


def agf_freeblks(img):
    free = test_xfs.db_field(img, "freeblks", "agf 1")
    faults.xfs_db(img, "agf 1", "write freeblks %d" % (free + 1))


def inode_crc(img):
    mnt = img.mount()
    victim = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(mnt) for f in fs
                    if os.path.isfile(os.path.join(dp, f)))[0]
    ino = fsimage.inode_of(victim)
    img.offline()
    faults.xfs_db(img, "inode %d" % ino, "write -c v3.crc 0xdeadbeef")


def free_inode_crc(img):
    _, ino = test_xfs.free_inode(img)
    faults.xfs_db(img, "inode %d" % ino, "write -c v3.crc 0xdeadbeef")


def linked_on_unlinked_list(img):
    test_xfs_xref.linked_inode_on_unlinked_list(img, first_file(img))


def free_over_file_data(img):
    _, owned = test_xfs_xref.file_block_owner(img)
    test_xfs_xref.free_extent_over(img, owned)


def free_over_file_data_normap(img):
    _, owned = test_xfs_xref.file_block_owner_bmap(img)
    test_xfs_xref.free_extent_over(img, owned)


def first_file(img):
    mnt = img.mount()
    victim = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(mnt) for f in fs
                    if os.path.isfile(os.path.join(dp, f)))[0]
    img.offline()
    return victim


def unlinked_nlink0(img):
    """A linked file on its unlinked bucket with its link count made 0 too;
    the bench holds it open during the scan (uncached, the kernel frees it)."""
    victim = first_file(img)
    ino = test_xfs_xref.linked_inode_on_unlinked_list(img, victim)[0]
    faults.xfs_db(img, "inode %d" % ino, "write core.nlinkv2 0")
    img.victim = victim
    img.prefer = "xfs.unlinked"     # inode.nlink_zero comes first


def free_over_btree_block(img, cnt=True):
    test_xfs_xref.free_extent_over(img, test_xfs_xref.btree_block_owner(img, True), cnt)


def nblocks_too_many(img, fmt):
    """A non-empty file whose data fork is in format fmt (2: extents, 3:
    btree) says it has two blocks more."""
    mnt = img.mount()
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(mnt) for f in fs
                   if os.path.isfile(os.path.join(dp, f)) and
                   os.path.getsize(os.path.join(dp, f)) > 0)
    inos = [fsimage.inode_of(f) for f in files]
    img.offline()
    ino = [i for i in inos if faults.xfs_field(img, i, "core.format").startswith(str(fmt))][0]
    n = int(faults.xfs_field(img, ino, "core.nblocks"))
    faults.xfs_db(img, "inode %d" % ino, "write core.nblocks %d" % (n + 2))


def four_ways(img):
    test_xfs_xref.reflinked_four_ways(img.mount())
    img.offline()


def self_reflinked(img):
    """A file reflinked to itself at two offsets: its first 256 KiB have
    three references, two of them its own."""
    path = os.path.join(img.mount(), "self")
    with open(path, "wb") as fh:
        fh.write(os.urandom(1 << 20))
    fsimage.run(["xfs_io", "-c", "reflink %s 0 2m 256k" % path,
                 "-c", "reflink %s 0 3m 256k" % path, path])
    img.offline()


def refcount(img, fault):
    """multi's refcountbt record (4 references) counts 5, ends a block
    early or runs a block on."""
    four_ways(img)
    ag, i, (start, length, _, _) = test_xfs_xref.shared_record(img, 4)
    cmd = {"count": "write recs[%d].refcount 5" % i,
           "short": "write recs[%d].blockcount %d" % (i, length - 1),
           "long": "write recs[%d].blockcount %d" % (i, length + 1)}[fault]
    faults.xfs_db(img, "agf %d" % ag, "addr refcntroot", cmd)


CASES = [
    ("clean image", lambda img: None),
    ("orphaned inode", lambda img: faults.xfs_dirent_ino(img, target="existing")),
    ("dangling dirent", lambda img: faults.xfs_dirent_ino(img, target="free")),
    ("cross-linked extent (bmx startblock)", test_xfs.xfs_crosslink),
    ("wrong nlink", faults.xfs_wrong_nlink),
    ("dirent ftype", faults.xfs_ftype_mismatch),
    ("bad CRC in AG 1 bnobt root", lambda img: faults.xfs_db(
        img, "agf 1", "addr bnoroot", "write -c crc 0xdeadbeef")),
    ("bad CRC in AG 2 superblock", lambda img: faults.xfs_db(
        img, "sb 2", "write -c crc 0xdeadbeef")),
    ("AGF 1 freeblks one too many", agf_freeblks),
    ("bad CRC of an allocated inode", inode_crc),
    ("bad CRC of a free inode in a chunk", free_inode_crc),
    ("inode in use, free in inobt+finobt (counts fixed)",
     test_xfs_xref.inode_in_use_made_free),
    ("linked inode on an AGI unlinked list", linked_on_unlinked_list),
    ("free extent over a file's block (bnobt+cntbt+AGF)", free_over_file_data),
    ("free extent over a btree/AGFL block (bnobt+cntbt+AGF)", free_over_btree_block),
    ("free extent over a btree/AGFL block (bnobt only)",
     lambda img: free_over_btree_block(img, cnt=False)),
    ("di_nblocks two too many (extents format)", lambda img: nblocks_too_many(img, 2)),
    ("di_nblocks two too many (btree format)",
     lambda img: nblocks_too_many(img, 3)),
    ("secondary sb 3 ro-compat features 0", lambda img: faults.xfs_db(
        img, "sb 3", "write features_ro_compat 0")),
    ("linked inode on an unlinked list, nlink made 0 (held open)", unlinked_nlink0),
    ("no rmapbt: free extent over a file's block (bnobt+cntbt+AGF)",
     free_over_file_data_normap, False),
    ("refcountbt record of 4 says 5", lambda img: refcount(img, "count")),
    ("refcountbt record a block short (shared block without a record)",
     lambda img: refcount(img, "short")),
    ("refcountbt record a block long (over an unshared block)",
     lambda img: refcount(img, "long")),
    ("CoW staging in the rmapbt only (bnobt+cntbt+AGF+sb fixed)",
     test_xfs_xref.cow_staging_in_rmapbt_only),
    ("reflinked files (must be clean)", reflinked),
    ("a file reflinked four ways (must be clean)", four_ways),
    ("no rmapbt: refcountbt record of 4 says 5", lambda img: refcount(img, "count"), False),
    ("no rmapbt: refcountbt record a block short (shared block without a record)",
     lambda img: refcount(img, "short"), False),
    ("no rmapbt: refcountbt record a block long (over an unshared block)",
     lambda img: refcount(img, "long"), False),
    ("no rmapbt: reflinked files (must be clean)", reflinked, False),
    ("no rmapbt: a file reflinked four ways (must be clean)", four_ways, False),
    ("no rmapbt: a file reflinked to itself twice (must be clean)", self_reflinked, False),
]

bases = {}


def base_for(rmapbt):
    if rmapbt not in bases:
        bases[rmapbt] = base_image(rmapbt)
    return bases[rmapbt]


# A case is (name, inject) or (name, inject, rmapbt): its base image.
rows = []
for name, inject, *flavour in CASES:
    base = base_for(flavour[0] if flavour else True)
    rows += [row[:5] for row in run_cases(base, [(name, inject, "")], work, repair_says)]

# Quota: user 1000's dquot charged 25 blocks more, in the VM.
why = test_xfs_vm.vm_missing()
if why:
    rows.append(("quota counter (dquot bcount)", "-", "skipped: " + why, "-", "-"))
else:
    img = fsimage.Image(work, "xfs", size_mb=300, name="quota")
    img.mkfs()
    made, = test_xfs_vm.in_vm(work, img.path, [
        ("sh", test_xfs_vm.QUOTA_MOUNT + " && bash -c " + shlex.quote(test_xfs_vm.QUOTA_TREE))])
    assert made.rc == 0, made.stdout
    out = faults.xfs_db(img, "dquot -u 1000", "print diskdq.bcount", write=False)
    bcount = int(re.search(r"diskdq\.bcount = (\d+)", out).group(1))
    faults.xfs_db(img, "dquot -u 1000", "write diskdq.bcount %d" % (bcount + 25))
    time.sleep(1.1)
    _, r = test_xfs_vm.in_vm(work, img.path, [("sh", test_xfs_vm.QUOTA_MOUNT),
                                              ("fscrub", "-n")])
    q = [f for f in r.errors if f.check == "xfs.quota"]
    said = "%s [xfs.quota]" % short(q[0].message, 200) if q else fscrub_says(r)
    rows.append(("quota counter (dquot bcount, in the VM, -n)", r.rc, said)
                + repair_says(img.path))
    img.cleanup(remove=True)
    print("done: quota", file=sys.stderr)
for b in bases.values():
    if b is not None:
        b.cleanup(remove=True)

table(["case", "fscrub exit", "fscrub finding", "xfs_repair -n exit", "xfs_repair -n says"],
      rows)
EOF
