#!/bin/bash
# ext4_vs_e2fsck.sh: fscrub -n on the mounted image against `e2fsck -fn` on
# the unmounted one, fault by fault -- the ext4 twin of xfs_vs_repair.sh
# (what they share is in bench/lib.sh, vs_offline, and bench/vs_offline.py).
#
# Each case starts from a sparse copy of one clean image (the tests' ext4img
# fixture: 300 MiB, 4 KiB blocks, fsimage.make_tree), is broken offline
# with debugfs -w or the tests' own injectors (tests/integration/faults.py,
# test_ext4.py's helpers), then
#   1. fscrub -n runs on the mounted image, and
#   2. e2fsck -fn runs on the unmounted image file,
# and a Markdown table goes to stdout: fscrub's exit code, the check ids of
# its errors (else warnings) and its first finding; e2fsck's exit code and,
# for each pass that said something, its first message; and for a fault
# fscrub cannot see while mounted, why.  Progress goes to stderr.
#
#   sudo bench/ext4_vs_e2fsck.sh [WORKDIR] > table.md   (default: a fresh /tmp dir)
#
# Needs root (loop devices, mount), e2fsprogs, Debian's python3 (pytest is
# imported by the test helpers) and a built fscrub ($FSCRUB, default
# build/fscrub).
set -eu
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=ext4_vs_e2fsck.sh
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
vs_offline "${1:-$(mktemp -d /tmp/ext4_vs_e2fsck.XXXXXX)}" <<'EOF'
import os
import re
import struct
import subprocess
import sys

import faults
from faults import debugfs, _ext4_sb, _patch, _pread
import fsimage
from test_ext4 import inode_offset, victim
from test_ext4_xref import shared_xattr_block, sparse_file
import test_ext4_htree
from vs_offline import fscrub_checks, fscrub_says, run_cases, short, table

work = sys.argv[1]

# e2fsck -fn's banner, notes and summary; the rest is what it found.
CHATTER = re.compile(r"^(e2fsck \d|Running additional passes|.*: \d+/\d+ files \(|"
                     r".*WARNING: Filesystem still has errors|\s*$|\(There are \d+ inodes)")
# The question after a finding ("Fix? no"), on its line or the next.
QUESTION = re.compile(r"\s*[\w ]+\? (no|yes)$")


def e2fsck_says(path):
    """Exit code, and for each part of the check that said something
    (the superblock and journal before pass 1, then each pass), its first
    message."""
    p = subprocess.run(["e2fsck", "-fn", path], capture_output=True, text=True)
    where, said = "Before pass 1", {}
    for line in (p.stdout + p.stderr).splitlines():
        m = re.match(r"Pass (\w+):", line)
        if m:
            where = "Pass " + m.group(1)
        else:
            line = QUESTION.sub("", line)
            if not CHATTER.match(line) and where not in said:
                said[where] = line.strip()
    return p.returncode, "; ".join("%s: %s" % (k, short(v, 70)) for k, v in said.items()) \
        or "(clean)"


def both(r, prefer=None):
    return "%s | %s" % (fscrub_checks(r), fscrub_says(r, prefer))


def base_image():
    img = fsimage.Image(work, "ext4", size_mb=300, name="base")
    img.mkfs()
    fsimage.make_tree(img.mount(), deep=False)
    img.offline()
    return img


def sb_field(img, key):
    out = fsimage.run(["dumpe2fs", "-h", img.path]).stdout
    return re.search(r"^%s:\s*(.*)$" % re.escape(key), out, re.M).group(1).strip()


def itable(img, g):
    out = fsimage.run(["dumpe2fs", img.path]).stdout
    return int(re.search(r"^Group %d: .*?Inode table at (\d+)-" % g, out, re.S | re.M).group(1))


def journal_start(img):
    return int(debugfs(img, "bmap <8> 0").split()[-1])


def sif(img, ino, field, value):
    debugfs(img, "sif <%d> %s %s" % (ino, field, value), write=True)


def orphaned(img):
    rel, ino, _ = victim(img, "orphan", data=b"o" * 10000)
    debugfs(img, "unlink %s" % rel, write=True)


def inode_csum(img):
    rel, ino, _ = victim(img, "inode_csum")
    off = inode_offset(img, ino) + 0x7C        # i_checksum_lo
    _patch(img.path, off, bytes([_pread(img.path, off, 1)[0] ^ 0x5A]))


def dir_csum(img):
    rel, ino, dino = victim(img, "dir_csum", files=3)
    bs = _ext4_sb(img)["block_size"]
    off = faults._ext4_first_block(img, dino) * bs + bs - 4     # det_checksum
    _patch(img.path, off, bytes([_pread(img.path, off, 1)[0] ^ 0x01]))


def extent_outside(img):
    rel, ino, _ = victim(img, "outside", data=b"v" * 4096)
    sif(img, ino, "block[5]", int(sb_field(img, "Block count")) + 100)   # ee_start_lo


def freeb(img):
    rel, ino, _ = victim(img, "freeb", data=os.urandom(3 * 4096))
    debugfs(img, "freeb %d" % faults._ext4_first_block(img, ino), write=True)


def gd_free_count(img):
    out = debugfs(img, "show_super_stats")
    free0 = int(re.search(r"Group  0: block bitmap.*?\n\s+(\d+) free blocks", out, re.S).group(1))
    debugfs(img, "set_bg 0 free_blocks_count %d" % (free0 - 7), write=True)
    debugfs(img, "set_bg 0 checksum calc", write=True)


def backup_sb(img, what):
    out = fsimage.run(["dumpe2fs", img.path]).stdout
    off = int(re.search(r"Group 1: .*?\n\s+Backup superblock at (\d+)", out).group(1)) * \
        _ext4_sb(img)["block_size"]
    raw = bytearray(_pread(img.path, off, 1024))
    if what == "field":
        ipg = struct.unpack_from("<I", raw, 0x28)[0]        # s_inodes_per_group
        struct.pack_into("<I", raw, 0x28, ipg - 8)
        struct.pack_into("<I", raw, 0x3FC, faults.crc32c(0xFFFFFFFF, bytes(raw[:0x3FC])))
    else:
        raw[0x3FC] ^= 0x10
    _patch(img.path, off, bytes(raw))


def inode_core(img, is_dir, field, value):
    rel, ino, dino = victim(img, "core", data=b"s" * 100)
    sif(img, dino if is_dir else ino, field, value)


def journal_freeb(img):
    debugfs(img, "freeb %d 5" % (journal_start(img) + 2000), write=True)


def extent_over(img, where):
    rel, ino, _ = victim(img, "over", data=b"v" * 4096)
    target = journal_start(img) + 200 if where == "journal" else itable(img, 1) + 3
    sif(img, ino, "block[5]", target)


def shared_block(img):
    rel, a, _ = victim(img, "share_a", data=b"a" * 4096)
    rel, b, _ = victim(img, "share_b", data=b"b" * 4096)
    sif(img, b, "block[5]", faults._ext4_first_block(img, a))


def inode_marked_free(img):
    rel, ino, _ = victim(img, "freei")
    debugfs(img, "freei <%d>" % ino, write=True)


def deleted_marked_used(img):
    rel, ino, _ = victim(img, "seti")
    debugfs(img, "rm %s" % rel, write=True)
    debugfs(img, "seti <%d>" % ino, write=True)


def block_marked_used(img):
    """A free block marked in use, its group's free count made to agree
    (so that only the bitmap against its users is wrong)."""
    blk = int(debugfs(img, "ffb 1").split()[-1])
    debugfs(img, "setb %d" % blk, write=True)
    g = blk // int(sb_field(img, "Blocks per group"))
    out = debugfs(img, "show_super_stats")
    free = int(re.search(r"Group +%d: block bitmap.*?\n\s+(\d+) free blocks" % g, out,
                         re.S).group(1))
    debugfs(img, "set_bg %d free_blocks_count %d" % (g, free - 1), write=True)
    debugfs(img, "set_bg %d checksum calc" % g, write=True)


def orphan_head_free(img):
    rel, ino, _ = victim(img, "orphan_head")
    debugfs(img, "rm %s" % rel, write=True)
    debugfs(img, "ssv last_orphan %d" % ino, write=True)


def xattr_refcount_low(img):
    inos, blk = shared_xattr_block(img)
    faults.ext4_xattr_refcount(img, blk, 1)


def size_before_written(img):
    rel, ino, _ = victim(img, "size", data=b"v" * 3 * 4096)
    sif(img, ino, "size", 100)


def deep_tree(img, field):
    """A file of 1500 one-block extents, a hole after each (an extent tree
    of depth 2: more than the inode's 4 leaves), one inode field set."""
    mnt = img.mount()
    path = os.path.join(mnt, "deep")
    sparse_file(path, 1500)
    os.sync()
    st = os.stat(path)
    img.offline()
    sif(img, st.st_ino, field, st.st_blocks - 8 if field == "blocks" else 100)


def unattached_marked_free(img):
    rel, ino, _ = victim(img, "unattached")
    debugfs(img, "unlink %s" % rel, write=True)
    debugfs(img, "freei <%d>" % ino, write=True)


def journal_sb_csum(img):
    off = journal_start(img) * _ext4_sb(img)["block_size"] + 0xFC
    _patch(img.path, off, bytes([_pread(img.path, off, 1)[0] ^ 0xFF]))


def htree(img, fault):
    """A directory of test_ext4_htree's 600 long names (8-12 leaves), its
    index broken by one of that file's faults."""
    mnt = img.mount()
    d = faults._fresh_dir(mnt, "htree")
    for i in range(test_ext4_htree.NAMES):
        with open(os.path.join(mnt, d, test_ext4_htree.NAME % i), "wb") as f:
            f.write(b"x")
    dino = fsimage.inode_of(os.path.join(mnt, d))
    img.offline()
    ix = test_ext4_htree.Index(img, dino)
    fault(ix)
    if fault is not test_ext4_htree.name_outside:
        ix.write_root()


MOUNT_CHECKED = "cannot exist while mounted: the kernel refuses it at mount"
CASES = [
    ("clean image", lambda img: None, ""),
    ("orphaned inode (debugfs unlink)", orphaned, ""),
    ("dirent to a free inode", lambda img: faults.ext4_dirent_ino(img, target="free"), ""),
    ("dirent to another file's inode", lambda img: faults.ext4_dirent_ino(img), ""),
    ("link count 3, one name", faults.ext4_wrong_nlink, ""),
    ("'..' names another directory", faults.ext4_dotdot, ""),
    ("fast symlink i_size 40", faults.ext4_symlink_size, ""),
    ("inode checksum", inode_csum, ""),
    ("directory block checksum", dir_csum, ""),
    ("extent block checksum", lambda img: faults.ext4_read_error(img, mode="csum"), ""),
    ("extent block zeroed", lambda img: faults.ext4_read_error(img, mode="zero"), ""),
    ("extent outside the filesystem", extent_outside, ""),
    ("file block marked free (freeb)", freeb, ""),
    ("group 0 free blocks count 7 short", gd_free_count, ""),
    ("backup superblock: s_inodes_per_group", lambda img: backup_sb(img, "field"), ""),
    ("backup superblock checksum", lambda img: backup_sb(img, "csum"), ""),
    ("linked inode with dtime", lambda img: inode_core(img, False, "dtime", 1700000000), ""),
    ("INDEX_FL on a regular file", lambda img: inode_core(img, False, "flags", "0x81000"), ""),
    ("directory i_size 5000", lambda img: inode_core(img, True, "size", 5000), ""),
    ("i_blocks 24 (8 mapped)", lambda img: inode_core(img, False, "blocks", 24), ""),
    ("regular file i_size 100, 3 blocks written", size_before_written, ""),
    ("i_blocks a block short, extent tree of depth 2", lambda img: deep_tree(img, "blocks"),
     ""),
    ("regular file i_size 100, extent tree of depth 2", lambda img: deep_tree(img, "size"), ""),
    ("shared attribute block counts 1 of its 3 users", xattr_refcount_low, ""),
    ("5 journal blocks marked free (freeb)", journal_freeb, ""),
    ("file extent over a journal block", lambda img: extent_over(img, "journal"), ""),
    ("file extent over group 1's inode table", lambda img: extent_over(img, "itable"), ""),
    ("two files share a block", shared_block, ""),
    ("inode in use marked free (freei)", inode_marked_free, ""),
    ("deleted inode marked in use (seti)", deleted_marked_used, ""),
    ("unattached inode marked free (unlink, freei)", unattached_marked_free, ""),
    ("free block marked in use (setb)", block_marked_used,
     "cannot be judged while mounted: mballoc marks its preallocations in use on the disk "
     "before any inode maps them; ext4.block_bitmap info counts such blocks"),
    ("superblock free blocks count wrong", lambda img: debugfs(
        img, "ssv free_blocks_count 1000", write=True),
     "no fault to either (e2fsck exits 0): the superblock's totals are lazy, the kernel "
     "counts from the group descriptors; ext4.statfs info"),
    ("orphan list starts at a deleted inode", orphan_head_free,
     "neither sees it: e2fsck -n does not follow the orphan list, a writable mount "
     "processes and empties it (damage since the mount: ext4.orphan_list)"),
    ("htree hash boundary moved down (bad max hash)",
     lambda img: htree(img, test_ext4_htree.moved_boundary_down), ""),
    ("htree leaf pointed to twice, another by nothing",
     lambda img: htree(img, test_ext4_htree.leaf_twice), ""),
    ("htree leaf name changed outside its range",
     lambda img: htree(img, test_ext4_htree.name_outside), ""),
    ("journal superblock checksum", journal_sb_csum, MOUNT_CHECKED),
    ("journal inode mapped over an inode table",
     lambda img: sif(img, 8, "block[5]", itable(img, 0) + 10), MOUNT_CHECKED),
]

base = base_image()
rows = run_cases(base, CASES, work, e2fsck_says, fscrub_args=("-n",), describe=both)
base.cleanup(remove=True)
print("Linux %s, %s" % (os.uname().release, subprocess.run(
    ["e2fsck", "-V"], capture_output=True, text=True).stderr.splitlines()[0]), file=sys.stderr)
table(["case", "fscrub -n exit", "fscrub check ids", "fscrub first finding", "e2fsck -fn exit",
       "e2fsck -fn: first message of each pass", "why fscrub cannot see it mounted"],
      [(name, rc, *(said.split(" | ", 1) + ["-"])[:2], erc, esaid, note)
       for name, rc, said, erc, esaid, note in rows])
EOF
