"""ext4 htree indexes judged by the backend (src/backends/ext4/ext4_htree.c
and the index blocks' own checks in ext4_inodes.c): one fault of each kind
is injected offline into the index of a directory of 600 long names (8-12
leaves under the root), its checksum recomputed (metadata_csum) so
that only the index is wrong, checked against ``e2fsck -fn``, and the image
scrubbed on a fresh mount, a settled one (remounted, past the journal
commit) and a ``ro,noload`` one: an error of the right check id at the
directory's path and inode, exit 4.  Issue 34: the bulk path (no name
looked up) and the per-name path (FSCRUB_DEBUG_NO_BULK=1) find the same."""

import os
import re
import struct
import time

import pytest

from conftest import run_fscrub
import faults
import fsimage
from faults import debugfs, _ext4_sb, _patch, _pread

NAMES = 600
# 40-byte names: 48-byte entries, about 85 to a 4 KiB leaf (half to three
# quarters full after splits), so 600 make 8-12 leaves under the root.
NAME = "a-name-long-enough-to-fill-leaves-%06d"
DIR = "big"
ROOT_ENTRIES = 32               # dx_root: "." (12), ".." (12), dx_root_info (8)
MOUNTS = ["fresh", "settled", "ro_noload"]


def make_image(image_factory, csum=True):
    img = image_factory("ext4", size_mb=64,
                        mkfs_args=() if csum else ("-O", "^metadata_csum"))
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, DIR))
    for i in range(NAMES):
        with open(os.path.join(mnt, DIR, NAME % i), "wb") as f:
            f.write(b"x")
    dino = fsimage.inode_of(os.path.join(mnt, DIR))
    os.sync()
    img.offline()
    assert "Flags: 0x81000" in debugfs(img, "stat <%d>" % dino)     # EXTENTS|INDEX
    return img, dino


def bmap(img, ino, lblk):
    """Where block lblk of inode ino is (debugfs blocks also lists extent
    tree blocks once the tree is deeper than the inode)."""
    return int(debugfs(img, "bmap <%d> %d" % (ino, lblk)).split()[0])


class Index:
    """The directory's blocks and its root's index entries, read from the image."""

    def __init__(self, img, dino):
        self.img, self.dino = img, dino
        self.sb = _ext4_sb(img)
        self.bs = self.sb["block_size"]
        self.root_blk = bmap(img, dino, 0)
        self.root = bytearray(_pread(img.path, self.root_blk * self.bs, self.bs))
        assert self.root[24 + 6] == 0                               # indirect_levels
        self.limit, self.count = struct.unpack_from("<HH", self.root, ROOT_ENTRIES)
        assert self.count >= 5, self.count
        self.ent = [struct.unpack_from("<II", self.root, ROOT_ENTRIES + 8 * i)
                    for i in range(self.count)]                     # (hash, block)

    def write_root(self):
        """The root back, its dx_tail checksum recomputed (metadata_csum):
        crc32c from the directory's seed over the header and the entries in
        use, then the tail with its checksum zero."""
        if self.sb["metadata_csum"]:
            tail = ROOT_ENTRIES + 8 * self.limit
            struct.pack_into("<II", self.root, tail, 0, 0)
            seed = faults._ext4_inode_csum_seed(self.img, self.sb, self.dino)
            crc = faults.crc32c(seed, bytes(self.root[:ROOT_ENTRIES + 8 * self.count]))
            struct.pack_into("<I", self.root, tail + 4,
                             faults.crc32c(crc, bytes(self.root[tail:tail + 8])))
        _patch(self.img.path, self.root_blk * self.bs, bytes(self.root))

    def set_hash(self, i, h):
        struct.pack_into("<I", self.root, ROOT_ENTRIES + 8 * i, h)

    def set_block(self, i, b):
        struct.pack_into("<I", self.root, ROOT_ENTRIES + 8 * i + 4, b)

    def hash_of(self, name):
        out = fsimage.run(["dumpe2fs", "-h", self.img.path]).stdout
        seed = re.search(r"Directory Hash Seed:\s*(\S+)", out).group(1)
        out = debugfs(self.img, "dx_hash -h half_md4 -s %s %s" % (seed, name))
        return int(re.search(r"is (0x[0-9a-f]+)", out).group(1), 16)


# Each fault: what it does to the index, the check id, what the message says, e2fsck's words.

def moved_boundary_down(ix):
    """Entry 2's hash lowered to just above entry 1's: leaf 1 keeps names
    above where entry 2 now starts."""
    ix.set_hash(2, (ix.ent[1][0] & ~1) + 2)
    return "ext4.htree_hash", "directory block %d " % ix.ent[1][1], "bad max hash"


def moved_boundary_up(ix):
    """Entry 2's hash raised to just below entry 3's: leaf 2 keeps names
    below where its entry now starts."""
    ix.set_hash(2, (ix.ent[3][0] & ~1) - 2)
    return "ext4.htree_hash", "directory block %d " % ix.ent[2][1], "bad min hash"


def wrong_limit(ix):
    ix.limit -= 1
    struct.pack_into("<H", ix.root, ROOT_ENTRIES, ix.limit)
    return "ext4.htree", "htree root has count %d and limit %d" % (ix.count, ix.limit), \
        "invalid limit"


def count_over_limit(ix):
    """count > limit (without metadata_csum: no tail to place)."""
    struct.pack_into("<H", ix.root, ROOT_ENTRIES + 2, ix.limit + 1)
    return "ext4.htree", "htree root has count %d" % (ix.limit + 1), "invalid count"


def unsorted(ix):
    """Entries 2 and 3 swap their hashes (and keep their blocks)."""
    ix.set_hash(2, ix.ent[3][0])
    ix.set_hash(3, ix.ent[2][0])
    return "ext4.htree", "htree hashes are out of order at entry 3", "unordered hash table"


def leaf_twice(ix):
    """Entry 3 points to entry 2's leaf: that one is reached twice, entry
    3's own by nothing."""
    ix.set_block(3, ix.ent[2][1])
    return "ext4.htree", "directory block %d " % ix.ent[2][1], "referenced twice"


def too_deep(ix):
    """The root says one level of index nodes below it; its entries point
    to leaves."""
    ix.root[24 + 6] = 1                                             # indirect_levels
    return "ext4.htree", "directory block %d " % ix.ent[0][1], "has invalid depth (2)"


def name_outside(ix):
    """A name of leaf 1 changed (one character, the leaf's checksum
    recomputed) to one whose hash belongs to another leaf."""
    lo, hi = ix.ent[1][0] & ~1, ix.ent[2][0] & ~1
    blk = bmap(ix.img, ix.dino, ix.ent[1][1])
    leaf = bytearray(_pread(ix.img.path, blk * ix.bs, ix.bs))
    m = re.search(rb"a-name-long-enough-to-fill-leaves-\d{6}", bytes(leaf))
    old = m.group(0).decode()
    for c in "zyxwvutsrqponm":
        new = old[:-1] + c
        if not lo <= ix.hash_of(new) <= hi:
            break
    else:
        raise AssertionError("no name outside [%#x, %#x]" % (lo, hi))
    leaf[m.end() - 1] = ord(new[-1])
    _patch(ix.img.path, blk * ix.bs, bytes(leaf))
    if ix.sb["metadata_csum"]:
        faults._ext4_dirblock_fix_csum(ix.img, ix.sb, ix.dino, blk * ix.bs)
    return "ext4.htree_hash", "directory block %d " % ix.ent[1][1], "bad m"


FAULTS = [moved_boundary_down, moved_boundary_up, wrong_limit, count_over_limit, unsorted,
          leaf_twice, too_deep, name_outside]


def scrub_on(img, how, *args, env=None):
    if how == "fresh":
        mnt = img.mount()
    elif how == "settled":
        img.mount("commit=1")
        img.offline()
        mnt = img.mount("commit=1")
        time.sleep(2.5)             # past the 1 s journal commit
    else:
        mnt = img.mount("ro,noload")
    r = run_fscrub("-v", *args, mnt, env=env)
    assert "with ext4 backend" in r.stdout, r
    return mnt, r


def key(r):
    """The index's findings (the per-name path also finds the names a
    lookup misses: dirent.dangling, and their inodes as ext4.orphan)."""
    return sorted((f.severity, f.check, f.path, f.inode, f.message) for f in r.findings
                  if f.check in ("ext4.htree", "ext4.htree_hash"))


@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.__name__)
def test_htree_fault(image_factory, fault, how):
    img, dino = make_image(image_factory, csum=fault is not count_over_limit)
    ix = Index(img, dino)
    check, text, e2 = fault(ix)
    if fault is not name_outside:           # it patches a leaf, not the root
        ix.write_root()
    p = fsimage.run(["e2fsck", "-fn", img.path], check=False)
    assert p.returncode == 4 and e2 in p.stdout, p.stdout
    mnt, r = scrub_on(img, how)
    for f in r.errors:
        print("fscrub: %s" % f)
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == check and f.inode == dino and text in f.message]
    assert hits, r
    assert all(f.path == os.path.join(mnt, DIR) for f in hits), r
    # The per-name path finds the same in the index.
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert old.rc == 4 and key(old) == key(r), (old, r)


@pytest.mark.parametrize("how", MOUNTS)
def test_htree_clean(image_factory, how):
    """The same directory undamaged, and one with two index levels: clean."""
    img, dino = make_image(image_factory)
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "deep"))
    # 255-byte names, 15 to a 4 KiB leaf: 9000 overflow a root of 507 entries.
    for i in range(9000):
        os.close(os.open(os.path.join(mnt, "deep", ("%06d" % i) * 42 + "abc"),
                         os.O_CREAT | os.O_WRONLY))
    deep = fsimage.inode_of(os.path.join(mnt, "deep"))
    img.offline()
    root = bmap(img, deep, 0)
    bs = _ext4_sb(img)["block_size"]
    assert _pread(img.path, root * bs + 24 + 6, 1) == b"\x01"      # indirect_levels
    assert fsimage.run(["e2fsck", "-fn", img.path], check=False).returncode == 0
    mnt, r = scrub_on(img, how)
    assert r.rc == 0 and not r.of("Error") and not r.of(check="ext4.unchecked"), r
