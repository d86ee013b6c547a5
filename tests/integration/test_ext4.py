"""The ext4 backend (src/backends/ext4/): every kind of on-disk damage it
reads from the device is injected offline on an unmounted image (debugfs -w,
or bytes patched where debugfs, dumpe2fs or the superblock put them) and
must be reported with its own check id, the inode or block, and exit 4.
A clean image scrubs to 0, also while a writer/renamer churns it during
the scan.

Each fault test also runs ``e2fsck -fn`` on the damaged image and prints
its verdict (pytest -s shows it), so fscrub's findings can be set next to
the offline checker's."""

import os
import re
import struct
import sys
import time

import pytest

from conftest import need_fs, run_fscrub
import churn
import faults
import fsimage
from faults import debugfs, _ext4_sb, _patch, _pread
import test_churn

EXT4_MAGIC_OFF = 0x38


@pytest.fixture
def ext4img(image_factory):
    """A 300 MiB ext4 image (two block groups of 128 MiB, so group 1 has a
    backup superblock) with the fixture tree; returned unmounted."""
    img = image_factory("ext4", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.offline()
    return img


def victim(img, name, data=b"victim data\n", files=0):
    """Mount, create ``name/victim`` (plus *files* siblings), unmount;
    return (relative path, inode number)."""
    mnt = img.mount()
    d = faults._fresh_dir(mnt, name)
    rel = d + "/victim"
    with open(os.path.join(mnt, rel), "wb") as f:
        f.write(data)
    for i in range(files):
        with open(os.path.join(mnt, d, "sib%03d" % i), "wb") as f:
            f.write(b"s")
    ino = fsimage.inode_of(os.path.join(mnt, rel))
    dino = fsimage.inode_of(os.path.join(mnt, d))
    os.sync()
    img.offline()
    return rel, ino, dino


def inode_offset(img, ino):
    """Byte offset of inode *ino* in the image (debugfs imap)."""
    out = debugfs(img, "imap <%d>" % ino)
    m = re.search(r"located at block (\d+), offset (0x[0-9a-f]+)", out)
    assert m, out
    return int(m.group(1)) * _ext4_sb(img)["block_size"] + int(m.group(2), 16)


def e2fsck(img):
    """e2fsck -fn's verdict on the (unmounted) image, printed for the report."""
    p = fsimage.run(["e2fsck", "-fn", img.path], check=False)
    lines = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith("Pass ")
             and not l.startswith("e2fsck ")]
    print("e2fsck -fn exit %d:\n  %s" % (p.returncode, "\n  ".join(lines[:12])))
    return p


def scrub(img, *args):
    time.sleep(1.1)         # victims older than the 1 s "changed during the scan" window
    mnt = img.mount()
    r = run_fscrub("-v", *args, mnt)
    assert "with ext4 backend" in r.stdout, r
    for f in r.findings:
        if f.check.startswith("ext4.") and f.severity == "Error":
            print("fscrub: %s" % f)
    return mnt, r


def assert_ext4(r, check, inode=None, text=None, path=None):
    """An error of check (about inode, saying text, at the full path)."""
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == check]
    assert hits, "no %s error in\n%r" % (check, r)
    if inode is not None:
        assert any(f.inode == inode for f in hits), r
    if text is not None:
        assert any(text in f.message for f in hits), r
    if path is not None:
        assert any(f.path == path for f in hits), r
    return hits


# ---- clean -------------------------------------------------------------------

def test_clean_image(ext4img):
    mnt, r = scrub(ext4img)
    assert r.rc == 0 and r.errors == [], r
    assert all(w.check in ("name.control", "name.encoding") for w in r.warnings), r
    m = re.search(r"Phase 3: ext4: (\d+) inodes, (\d+) extent tree and block map blocks "
                  r"and (\d+) directory", r.stdout)
    assert m and int(m.group(1)) > 200 and int(m.group(3)) > 10, r
    assert "Phase 2: ext4: superblock" in r.stdout, r
    assert not r.of(check="ext4.unchecked"), r


def test_clean_without_metadata_csum(image_factory):
    """^metadata_csum (crc16 group descriptors, no block checksums): clean."""
    img = image_factory("ext4", size_mb=64, mkfs_args=("-O", "^metadata_csum"))
    img.mkfs()
    fsimage.make_tree(img.mount(), deep=False)
    img.offline()
    mnt, r = scrub(img)
    assert r.rc == 0 and r.errors == [], r


def write_linked(mnt, size=900000):
    """A file of *size* bytes with three names, in two directories."""
    os.mkdir(os.path.join(mnt, "d"))
    big = os.path.join(mnt, "d", "big")
    with open(big, "wb") as f:
        f.write(os.urandom(size))
    os.link(big, os.path.join(mnt, "big2"))
    os.link(big, os.path.join(mnt, "d", "big3"))
    os.sync()
    return big


@pytest.mark.alone
@pytest.mark.parametrize("fstype", ["ext2", "ext3"])
def test_hard_links_with_indirect_block_maps(image_factory, fstype):
    """issue 18 item 3: ext2/ext3 map files with indirect blocks, and a
    cold FIEMAP splits the map where an indirect block ends (file offset
    268 KiB with 1 KiB blocks) while a later one, cached, merges it.  The
    first scan after a mount (or drop_caches) mapped the file at each of
    its names and took the two maps for a cross-link of the file with
    itself: "mapped twice, at file offsets 274432 and 274432"."""
    img = image_factory(fstype, size_mb=64)
    img.mkfs()
    big = write_linked(img.mount())
    rel = os.path.relpath(big, img.mnt)
    # The premise: cold and cached maps of one file differ.
    img.remount()
    cold = fsimage.fiemap(os.path.join(img.mnt, rel), flags=0)
    warm = fsimage.fiemap(os.path.join(img.mnt, rel), flags=0)
    assert len(cold) > len(warm), (cold, warm)
    for args in (("-n",), ("-n", "-x")):
        img.remount()
        time.sleep(1.1)
        r = run_fscrub("-v", *args, img.mnt)
        assert r.rc == 0 and r.errors == [] and r.warnings == [], r
        assert not r.of(check="extent.crosslinked"), r
    # ... and after drop_caches, on a mount that has seen the file before.
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    r = run_fscrub("-n", "-v", img.mnt)
    assert r.rc == 0 and not r.of(check="extent.crosslinked"), r


@pytest.mark.slow
def test_clean_under_churn(workdir, request):
    """A writer/renamer running through the whole scan (frozen mid-walk
    until 10 000 operations ran, as test_churn.py): no error, no warning,
    and the ext4 backend read the inode tables while the churn went on."""
    need_fs("ext4")
    img = fsimage.Image(workdir, "ext4", size_mb=1024)
    request.addfinalizer(lambda: img.cleanup(remove=True))
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    c = churn.Churn(mnt, workers=2, dirs=100, files=20)
    time.sleep(1.1)
    with c:
        time.sleep(0.3)
        ops, r = test_churn.frozen_scan(c, mnt, "-v")
    print("ext4 churn: %d operations during the scan; %s" % (
        ops, " ".join(l for l in r.stdout.splitlines() if l.startswith("Phase 6: ext4:") or
                      "inode-table reads" in l)))
    assert ops >= test_churn.MIN_OPS, ops
    assert "with ext4 backend" in r.stdout and "Phase 3: ext4:" in r.stdout, r
    assert r.rc == 0 and r.errors == [], "%d ops\n%r" % (ops, r)
    assert all(w.check in ("name.control", "name.encoding") for w in r.warnings), r
    assert "fscrub:" not in r.stderr, r


# ---- faults ------------------------------------------------------------------

def test_inode_checksum(ext4img):
    rel, ino, _ = victim(ext4img, "inode_csum")
    off = inode_offset(ext4img, ino) + 0x7C        # i_checksum_lo
    _patch(ext4img.path, off, bytes([_pread(ext4img.path, off, 1)[0] ^ 0x5A]))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    # Found by number in the inode tables; named by the walk that looks for its errors.
    assert_ext4(r, "ext4.inode_csum", ino, "inode checksum does not match",
                path=os.path.join(mnt, rel))
    assert "ext4: 1 of 1 inodes with errors named by a second walk" in r.stdout, r


def test_directory_block_checksum(ext4img):
    rel, ino, dino = victim(ext4img, "dir_csum", files=3)
    blk = faults._ext4_first_block(ext4img, dino)
    bs = _ext4_sb(ext4img)["block_size"]
    off = blk * bs + bs - 4                         # ext4_dir_entry_tail.det_checksum
    _patch(ext4img.path, off, bytes([_pread(ext4img.path, off, 1)[0] ^ 0x01]))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.dir_block", dino, "block %d" % blk,
                path=os.path.join(mnt, os.path.dirname(rel)))


def test_htree_block_checksum(ext4img):
    """An htree root's dx_tail checksum with one bit flipped: the root's
    checksum covers the index entries in use and the tail, not a leaf's
    12-byte tail (the root's last bytes can look like one), and fscrub
    computes it from the directory's generation itself."""
    rel, ino, dino = victim(ext4img, "htree_csum", files=400)
    bs = _ext4_sb(ext4img)["block_size"]
    blk = faults._ext4_first_block(ext4img, dino)
    limit, count = struct.unpack_from("<HH", _pread(ext4img.path, blk * bs + 32, 4))
    off = blk * bs + 32 + 8 * limit + 4             # dx_tail.dt_checksum
    _patch(ext4img.path, off, bytes([_pread(ext4img.path, off, 1)[0] ^ 0x01]))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.dir_block", dino,
                "directory block 0 (block %d): directory block checksum does not match" % blk,
                path=os.path.join(mnt, os.path.dirname(rel)))


DIRBATCH_RE = re.compile(r"Phase 3: ext4: directory blocks read (\d+) at a time: (\d+) reads "
                         r"in (\d+) batches")
DIRBLOCKS_RE = re.compile(r"Phase 3: ext4: \d+ inodes, \d+ extent tree and block map blocks "
                          r"and (\d+) directory "
                          r"blocks read from the disk")


def test_directory_blocks_read_in_batches(ext4img):
    """The scan reads directory blocks a batch at a time, many reads in
    flight and adjacent blocks in one read: a bad checksum in one
    directory's block and an htree directory of several blocks, and both
    the error (exit 4) and the clean directories come out as with
    FSCRUB_DEBUG_NO_DIRBATCH=1 (one read per block, as before) and as
    without the prefetch ahead of the walk (FSCRUB_DEBUG_NO_DIRRA=1)."""
    rel, ino, dino = victim(ext4img, "dir_csum_batch", files=3)
    victim(ext4img, "htree_batch", files=400)
    blk = faults._ext4_first_block(ext4img, dino)
    bs = _ext4_sb(ext4img)["block_size"]
    off = blk * bs + bs - 4                         # ext4_dir_entry_tail.det_checksum
    _patch(ext4img.path, off, bytes([_pread(ext4img.path, off, 1)[0] ^ 0x01]))
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.dir_block", dino, "block %d" % blk)
    m, n = DIRBATCH_RE.search(r.stdout), DIRBLOCKS_RE.search(r.stdout)
    assert m and n, r
    # Several blocks a read (the htree directory's are adjacent), and a batch at least.
    assert 0 < int(m.group(2)) < int(n.group(1)) and int(m.group(3)) >= 1, r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_DIRBATCH": "1"})
    assert old.rc == 4 and not DIRBATCH_RE.search(old.stdout), old
    assert DIRBLOCKS_RE.search(old.stdout).group(1) == n.group(1), old
    key = lambda rr: sorted((f.severity, f.check, f.path, f.inode) for f in rr.findings)
    assert key(old) == key(r), (old, r)
    # The first run prefetched the directories (the damaged one too): the same without.
    assert DIRRA_RE.search(r.stdout), r
    nora = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_DIRRA": "1"})
    assert nora.rc == 4 and not DIRRA_RE.search(nora.stdout) and key(nora) == key(r), (nora, r)


DIRRA_RE = re.compile(r"Phase 3: ext4: (\d+) directory blocks of (\d+) directories prefetched "
                      r"for the walk: (\d+) reads in (\d+) batches")


def test_directory_blocks_prefetched_ahead_of_the_walk(image_factory, workdir):
    """issue 22: the walk's getdents read each cold directory's blocks
    synchronously, one directory after the other.  Phase 3 now asks for
    every directory's blocks, in disk order, before the walk gets to them:
    while the walk is held in its first directory (the root, by the
    FSCRUB_DEBUG_AFTER_BULK hook), every block of the other directories
    comes into the block device's page cache (mincore).  With
    FSCRUB_DEBUG_NO_DIRRA=1 they do not, and the findings are the same."""
    img = image_factory("ext4", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "top"), "wb") as f:   # bulk records in the root
        f.write(b"t")
    dirs = ["d%02d" % i for i in range(60)] + ["htree"]
    for d in dirs:
        os.mkdir(os.path.join(mnt, d))
        for i in range(400 if d == "htree" else 3):
            with open(os.path.join(mnt, d, "file-with-a-longish-name-%03d" % i), "wb") as f:
                f.write(b"x")
    os.sync()
    img.offline()
    blocks = [int(b) for d in dirs for b in debugfs(img, "blocks /%s" % d).split()]
    assert len(blocks) > len(dirs), blocks               # the htree one has several
    bs = _ext4_sb(img)["block_size"]
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pagecache.py")
    runs = {}
    for name, env, timeout in (("on", {}, 60), ("off", {"FSCRUB_DEBUG_NO_DIRRA": "1"}, 2)):
        time.sleep(1.1)
        mnt = img.remount()                                  # a cold page cache
        out = os.path.join(workdir, "cached-%s" % name)
        hook = " ".join([sys.executable, probe, img.dev, str(bs), str(timeout), out] +
                        [str(b) for b in blocks])
        r = run_fscrub("-v", "-n", mnt, env=dict(env, FSCRUB_DEBUG_AFTER_BULK=hook))
        with open(out) as f:
            n, total = map(int, f.read().split())
        runs[name] = (r, n, total)
    r, n, total = runs["on"]
    assert r.rc == 0 and r.errors == [], r
    m = DIRRA_RE.search(r.stdout)
    assert m and int(m.group(1)) >= len(blocks) and int(m.group(2)) >= len(dirs), r
    assert n == total == len(blocks), (n, total, r.stdout)
    old, n_off, _ = runs["off"]
    assert n_off < total, "cached without the prefetch too: the test shows nothing"
    assert not DIRRA_RE.search(old.stdout) and "FSCRUB_DEBUG_NO_DIRRA is set" in old.stdout, old
    key = lambda rr: sorted((f.severity, f.check, f.path, f.inode) for f in rr.findings)
    assert old.rc == r.rc and key(old) == key(r), (old, r)


DIRRA_WINDOW = 32 << 20         # ext4_dirra.c's DIRRA_WINDOW
DIRRA_WAITS_RE = re.compile(r"Phase 3: ext4: .* prefetched for the walk: .*; (\d+) waits for "
                            r"the walk")


def test_directory_prefetch_stays_a_window_ahead(image_factory, workdir):
    """The prefetch reads the inode tables to find the directories, and
    stays about 32 MiB ahead of the walk: with 64 MiB of inode tables to
    read (1 KiB inodes, no uninit_bg: every table is read whole) and the
    walk held in the root, the block device's page cache stops growing
    near 32 MiB, and the thread says it waited for the walk."""
    img = image_factory("ext4", size_mb=512, mkfs_args=(
        "-O", "^metadata_csum,^uninit_bg", "-I", "1024", "-N", "65536"))
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "top"), "wb") as f:   # bulk records in the root
        f.write(b"t")
    for i in range(8):
        os.mkdir(os.path.join(mnt, "d%d" % i))
    os.sync()
    img.offline()
    time.sleep(1.1)
    mnt = img.mount()
    out = os.path.join(workdir, "cached")
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pagecache.py")
    # Until the thread has read 24 MiB, then 2 s more for it to go on if it would.
    hook = " ".join([sys.executable, probe, "--bytes", img.dev, str(24 << 20), "60", "2", out])
    r = run_fscrub("-v", "-n", mnt, env={"FSCRUB_DEBUG_AFTER_BULK": hook})
    assert r.rc == 0 and r.errors == [], r
    with open(out) as f:
        held = int(f.read())
    print("cached while the walk was held: %.1f MiB; %s" % (
        held / 2**20, [l for l in r.stdout.splitlines() if "prefetched" in l]))
    m = DIRRA_WAITS_RE.search(r.stdout)
    assert m and int(m.group(1)) >= 1, r
    # The window, the 1 MiB read that crossed it, and the walk's own few reads.
    assert 24 << 20 <= held <= DIRRA_WINDOW + (4 << 20), held


def test_extent_block_corruption(ext4img):
    f = faults.ext4_read_error(ext4img, mode="csum", pieces=16)
    assert f["extents"] >= 5
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.extent_tree", f["inode"],
                "extent tree block %d: extent block checksum does not match" % f["leaf_block"],
                path=os.path.join(mnt, f["path"]))


def test_extent_block_zeroed(ext4img):
    f = faults.ext4_read_error(ext4img, mode="zero", pieces=16)
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.extent_tree", f["inode"], "bad extent header magic")


# ---- a tree that is a graph: entries that all point to the same node -------------

EXT_MAGIC = 0xF30A
EXT_ENTRIES_4K = (4096 - 12) // 12     # an extent node's room in a 4 KiB block


def free_blocks(img, n):
    """n free blocks of the (unmounted) image, marked in use (debugfs ffb, setb)."""
    out = debugfs(img, "ffb %d" % n)
    blocks = [int(b) for b in out.split(":")[1].split()]
    assert len(blocks) == n, out
    for b in blocks:
        debugfs(img, "setb %d" % b, write=True)
    return blocks


def ext_node(depth, entries, child):
    """An extent node of depth > 0 (or an empty leaf: entries 0) whose
    entries all point to block child, at file blocks 0, 1, 2..."""
    b = struct.pack("<HHHHI", EXT_MAGIC, entries, EXT_ENTRIES_4K, depth, 0)
    b += b"".join(struct.pack("<IIHH", i, child, 0, 0) for i in range(entries))
    return b.ljust(4096, b"\0")


def tree_graph(img):
    """A victim whose extent tree is five levels of a node each, every entry
    of a node pointing to the same node below, down to an empty leaf: a few
    blocks walked as a tree of their product.  Returns (relative path,
    inode, the node reached twice)."""
    rel, ino, _ = victim(img, "graph", data=b"g" * 4096)
    bs = _ext4_sb(img)["block_size"]
    assert bs == 4096
    nodes = free_blocks(img, 5)         # depth 4 .. the leaf at depth 0
    for depth, blk in zip(range(4, -1, -1), nodes):
        _patch(img.path, blk * bs, ext_node(depth, EXT_ENTRIES_4K if depth else 0,
                                            nodes[4 - depth + 1] if depth else 0))
    root = struct.pack("<HHHHI", EXT_MAGIC, 4, 4, 5, 0) + b"".join(
        struct.pack("<IIHH", i, nodes[0], 0, 0) for i in range(4))
    # i_block, at byte 40 of the inode (no inode checksum: ^metadata_csum)
    _patch(img.path, inode_offset(img, ino) + 40, root)
    return rel, ino, nodes[4]


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_extent_tree_reaching_a_node_twice(image_factory, how):
    """A node reached twice is an error at once, not a walk of the product
    of the fan-outs (4 x 340^4 extent nodes): old binaries walked for hours.
    (The same in a block map is fuzz_ext4's corpus/ext4/regress-blockmap-graph:
    here the kernel's own FIEMAP of such a file runs for as long.)"""
    img = image_factory("ext4", size_mb=64, mkfs_args=("-O", "^metadata_csum"))
    img.mkfs()
    rel, ino, twice = tree_graph(img)
    e2fsck(img)
    time.sleep(1.1)
    mnt = img.mount_as(how)
    start = time.monotonic()
    r = run_fscrub("-v", mnt, timeout=120)
    assert_ext4(r, "ext4.extent_tree", ino, "extent block %d is reached twice in the tree"
                % twice, path=os.path.join(mnt, rel))
    assert time.monotonic() - start < 60, r


def test_orphan_inode(ext4img):
    rel, ino, _ = victim(ext4img, "orphan", data=b"o" * 10000)
    debugfs(ext4img, "unlink %s" % rel, write=True)
    assert "Links: 1" in debugfs(ext4img, "stat <%d>" % ino)
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    hits = assert_ext4(r, "ext4.orphan", ino, "regular file of 10000 bytes, owner 0:0")
    assert len(hits) == 1, r


def test_block_bitmap_disagrees(ext4img):
    rel, ino, _ = victim(ext4img, "freeb", data=os.urandom(3 * 4096))
    blk = faults._ext4_first_block(ext4img, ino)
    debugfs(ext4img, "freeb %d" % blk, write=True)
    assert "not in use" in debugfs(ext4img, "testb %d" % blk)
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.block_in_use", ino, "(the first: block %d)" % blk)


def test_group_descriptor_free_count(ext4img):
    out = debugfs(ext4img, "show_super_stats")
    free0 = int(re.search(r"Group  0: block bitmap.*?\n\s+(\d+) free blocks", out, re.S).group(1))
    debugfs(ext4img, "set_bg 0 free_blocks_count %d" % (free0 - 7), write=True)
    debugfs(ext4img, "set_bg 0 checksum calc", write=True)
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.group_counts", None,
                "group 0: block bitmap (block %s): the group descriptor says %d free blocks, "
                "the bitmap has %d" % (re.search(r"Group  0: block bitmap at (\d+)", out).group(1),
                                       free0 - 7, free0))


def test_backup_superblock_disagrees(ext4img):
    sb = _ext4_sb(ext4img)
    bs = sb["block_size"]
    out = fsimage.run(["dumpe2fs", ext4img.path]).stdout
    m = re.search(r"Group 1: .*?\n\s+Backup superblock at (\d+)", out)
    assert m, out
    backup = int(m.group(1)) * bs
    raw = bytearray(_pread(ext4img.path, backup, 1024))
    assert struct.unpack_from("<H", raw, EXT4_MAGIC_OFF)[0] == 0xEF53
    ipg = struct.unpack_from("<I", raw, 0x28)[0]     # s_inodes_per_group
    struct.pack_into("<I", raw, 0x28, ipg - 8)
    # a consistent backup (its own checksum fixed): only the field disagrees
    struct.pack_into("<I", raw, 0x3FC, faults.crc32c(0xFFFFFFFF, bytes(raw[:0x3FC])))
    _patch(ext4img.path, backup, bytes(raw))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.sb_backup", None,
                "group 1 (block %s): s_inodes_per_group differs" % m.group(1))


def test_backup_superblock_checksum(ext4img):
    out = fsimage.run(["dumpe2fs", ext4img.path]).stdout
    blk = int(re.search(r"Group 1: .*?\n\s+Backup superblock at (\d+)", out).group(1))
    off = blk * _ext4_sb(ext4img)["block_size"] + 0x3FC
    _patch(ext4img.path, off, bytes([_pread(ext4img.path, off, 1)[0] ^ 0x10]))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.sb_backup", None, "group 1 (block %d): checksum does not match" % blk)


# ---- helpers for faults the kernel would refuse or repair ------------------
#
# Some faults cannot be injected on an unmounted image and then mounted: the
# kernel refuses a primary superblock or (read-write) a group descriptor with
# a bad checksum, processes the orphan list at mount, and reads an inode's
# link count and extent root from the disk when it first loads the inode,
# so a fault there is what the kernel shows too.  Those tests either attach
# the image read-only (losetup -r; the kernel mounts a bad descriptor
# read-only and skips orphan cleanup on a read-only device), or patch the
# image *file* while it is mounted: the loop device reads its backing file,
# so fscrub's O_DIRECT reads of the device see the patched bytes, while the
# kernel keeps what it loaded before (an inode pinned by an open O_PATH
# descriptor, the superblock and descriptors in its buffers).  Nothing
# writes those blocks back during the scan: the filesystem is idle and
# clean, so syncfs has nothing to write.

def _dumpe2fs_h(img, key):
    m = re.search(r"^%s:\s*(\S+)" % re.escape(key),
                  fsimage.run(["dumpe2fs", "-h", img.path]).stdout, re.M)
    assert m, key
    return m.group(1)


def gd_offset(img, g):
    """Byte offset of group g's descriptor in the image, and its size."""
    out = fsimage.run(["dumpe2fs", img.path]).stdout
    gdt = int(re.search(r"Primary superblock at \d+, Group descriptors at (\d+)-", out).group(1))
    size = int(_dumpe2fs_h(img, "Group descriptor size"))
    return gdt * _ext4_sb(img)["block_size"] + g * size, size


def gd_with_csum(sb, g, desc):
    """desc (a group descriptor's bytes) with its metadata_csum bg_checksum
    set: crc32c(fs seed, le32 group, the descriptor with bg_checksum zeroed) & 0xFFFF."""
    desc = bytearray(desc)
    struct.pack_into("<H", desc, 0x1E, 0)
    seed = faults.crc32c(faults._ext4_fs_csum_seed(sb), struct.pack("<I", g))
    crc = faults.crc32c(seed, bytes(desc))
    struct.pack_into("<H", desc, 0x1E, crc & 0xFFFF)
    return bytes(desc)


def inode_with_csum(raw, seed):
    """raw (an on-disk inode) with i_checksum_lo/hi set: crc32c of the inode
    with both fields zeroed, from the inode's seed (fs seed, ino, generation)."""
    raw = bytearray(raw)
    has_hi = len(raw) > 128 and struct.unpack_from("<H", raw, 0x80)[0] >= 4
    struct.pack_into("<H", raw, 0x7C, 0)
    if has_hi:
        struct.pack_into("<H", raw, 0x82, 0)
    crc = faults.crc32c(seed, bytes(raw))
    struct.pack_into("<H", raw, 0x7C, crc & 0xFFFF)
    if has_hi:
        struct.pack_into("<H", raw, 0x82, crc >> 16)
    return bytes(raw)


def patch_inode_while_mounted(img, rel, ino, edit, cleanups):
    """Mount, load inode *ino* (``rel``) into the kernel and pin it there
    with an O_PATH descriptor (closed at teardown), then apply edit(bytearray)
    to its bytes in the image file and fix its checksum.  The kernel keeps
    the inode it loaded; the device now reads the edited one."""
    off = inode_offset(img, ino)
    isize = int(_dumpe2fs_h(img, "Inode size"))
    seed = faults._ext4_inode_csum_seed(img, _ext4_sb(img), ino)
    mnt = img.mount()
    fd = os.open(os.path.join(mnt, rel), os.O_PATH | os.O_NOFOLLOW)
    cleanups.append(lambda: os.close(fd))
    os.fstat(fd)
    raw = bytearray(_pread(img.path, off, isize))
    edit(raw)
    _patch(img.path, off, inode_with_csum(raw, seed))
    return mnt


# ---- faults the kernel refuses or repairs, and the kernel's view -------------

@pytest.mark.parametrize("fault", ["checksum", "free_inodes"])
def test_primary_superblock(ext4img, fault):
    """The primary superblock's checksum broken, or its free inode count
    made larger than the inode count (checksum recomputed: crc32c(~0) of
    the first 0x3FC bytes).  The kernel refuses to mount the first, and
    rewrites the second at mount (it stores its own free counts in the
    superblock), so the superblock is patched in the image file while it is
    mounted."""
    ext4img.mount()
    raw = bytearray(_pread(ext4img.path, 1024, 1024))
    if fault == "checksum":
        raw[0x3FC] ^= 0x10                                          # s_checksum
        why = "checksum does not match"
    else:
        struct.pack_into("<I", raw, 0x10, struct.unpack_from("<I", raw, 0)[0] + 1)
        struct.pack_into("<I", raw, 0x3FC, faults.crc32c(0xFFFFFFFF, bytes(raw[:0x3FC])))
        why = "more free inodes than inodes"
    _patch(ext4img.path, 1024, bytes(raw))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.superblock", None, "superblock: " + why)


def test_group_descriptor_checksum(ext4img):
    """A bad group descriptor checksum (debugfs set_bg) over sound fields
    and no UNINIT flag: e2fsck -fn exits 0 (it rewrites such a checksum on
    preen), so a warning (test_ext4_false.py has the error over UNINIT
    flags).  The kernel mounts such a filesystem only read-only
    (ext4_check_descriptors), so the image is attached read-only and
    mounted ro."""
    out = fsimage.run(["dumpe2fs", ext4img.path]).stdout
    csum = int(re.search(r"^Group 1: .*? csum (0x[0-9a-f]+)", out, re.M).group(1), 16)
    debugfs(ext4img, "set_bg 1 checksum 0x%x" % (csum ^ 0x5A5A), write=True)
    assert re.search(r"^Group 1: .*? csum 0x%04x \(EXPECTED 0x%04x\)" % (csum ^ 0x5A5A, csum),
                     fsimage.run(["dumpe2fs", ext4img.path], check=False).stdout, re.M)
    assert "UNINIT" not in re.search(r"^Group 1: .*$", fsimage.run(
        ["dumpe2fs", ext4img.path], check=False).stdout, re.M).group(0)
    assert e2fsck(ext4img).returncode == 0
    ext4img.attach(read_only=True)
    ext4img.mount("ro")
    mnt, r = scrub(ext4img)
    gdblk = gd_offset(ext4img, 1)[0] // _ext4_sb(ext4img)["block_size"]
    assert r.rc == 0 and not r.errors, r
    assert any(f.message.startswith("group descriptor 1 (in block %d): checksum does not "
                                    "match (its fields are sound" % gdblk)
               for f in r.of("Warning", "ext4.group_desc")), r


@pytest.mark.parametrize("kind", ["block", "inode"])
def test_bitmap_checksum(ext4img, kind):
    """The checksum group 0's descriptor keeps of its block (inode) bitmap,
    bg_{block,inode}_bitmap_csum_lo, no longer matches the bitmap: the
    field patched (debugfs cannot set it), the descriptor's own checksum
    recomputed (debugfs -w refuses to open a filesystem whose bitmap fails
    its checksum, so ``set_bg 0 checksum calc`` cannot be used)."""
    off, size = gd_offset(ext4img, 0)
    desc = bytearray(_pread(ext4img.path, off, size))
    desc[0x18 if kind == "block" else 0x1A] ^= 0x01
    _patch(ext4img.path, off, gd_with_csum(_ext4_sb(ext4img), 0, desc))
    # debugfs now refuses the bitmap; dumpe2fs shows the descriptor is good
    p = fsimage.run(["debugfs", "-R", "stats", ext4img.path], check=False)
    assert "%s bitmap checksum does not match" % kind.capitalize() in p.stderr, p.stderr
    out = fsimage.run(["dumpe2fs", ext4img.path], check=False).stdout
    assert re.search(r"^Group 0: .* csum 0x[0-9a-f]+ \[", out, re.M), out
    blk = int(re.search(r"Group 0: .*?\n.*?%s bitmap at (\d+)" % kind.capitalize(), out,
                        re.S).group(1))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    hits = assert_ext4(r, "ext4.%s_bitmap" % kind, None,
                       "group 0: %s bitmap (block %d): checksum does not match" % (kind, blk))
    assert len(hits) == 1, r
    assert not r.of("Error", "ext4.group_counts"), r     # a bad bitmap is not counted


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_revision_too_high(ext4img, how):
    """A superblock revision level no ext4 defines (debugfs ssv rev_level 2:
    the kernel mounts it, read-only however asked; libext2fs will not open
    it): an ext4.superblock error and exit 4, not an operational error
    (exit 8 on tests/fuzz/images' mutant 2026120702/ext4/183)."""
    debugfs(ext4img, "ssv rev_level 2", write=True)
    time.sleep(1.1)
    mnt = ext4img.mount_as(how)
    r = run_fscrub("-v", mnt)
    hits = assert_ext4(r, "ext4.superblock", None,
                       "superblock: libext2fs cannot use it: Filesystem revision too high")
    assert len(hits) == 1 and hits[0].path == mnt, r


@pytest.mark.parametrize("nxt", ["free", "past_end", "sb_free", "loop", "loop2"])
def test_orphan_list(ext4img, nxt):
    """The orphan list (superblock s_last_orphan, then each inode's i_dtime)
    runs from a file to an inode that is free, or past the last inode, or
    starts at a free inode, or runs from a file back to itself, or through
    a second file back to the first (debugfs ssv last_orphan, sif dtime):
    a loop is found where it closes, not after as many steps as there are
    inodes.  The kernel would process and clear the list at mount, but
    skips orphan cleanup on a read-only device: the image is attached
    read-only."""
    rel, ino, _ = victim(ext4img, "orphan_list", files=1)
    sib_rel = "/" + os.path.dirname(rel) + "/sib000"
    sib = int(re.search(r"Inode: (\d+)", debugfs(ext4img, "stat %s" % sib_rel)).group(1))
    free = int(re.search(r"Free inode found: (\d+)", debugfs(ext4img, "ffi")).group(1))
    past = int(_dumpe2fs_h(ext4img, "Inode count")) + 1
    first, nxt_ino, holder, text = {
        "free": (ino, free, ino, "orphan list entry after this inode names inode %d, "
                 "which is not in use" % free),
        "past_end": (ino, past, ino, "orphan list entry after this inode names inode %d, "
                     "which is past the last inode" % past),
        "sb_free": (free, None, None, "orphan list in the superblock starts at inode %d, "
                    "which is not in use" % free),
        "loop": (ino, ino, ino, "the orphan list loops: it runs from inode %d, the "
                 "superblock's, back to inode %d" % (ino, ino)),
        "loop2": (ino, sib, sib, "the orphan list loops: it runs from inode %d, the "
                  "superblock's, back to inode %d" % (ino, ino)),
    }[nxt]
    debugfs(ext4img, "ssv last_orphan %d" % first, write=True)
    if nxt_ino is not None:
        debugfs(ext4img, "sif <%d> dtime @%d" % (ino, nxt_ino), write=True)
    if nxt == "loop2":
        debugfs(ext4img, "sif <%d> dtime @%d" % (sib, ino), write=True)
    assert int(_dumpe2fs_h(ext4img, "First orphan inode")) == first
    e2fsck(ext4img)
    ext4img.attach(read_only=True)
    ext4img.mount("ro")
    mnt, r = scrub(ext4img)
    hits = assert_ext4(r, "ext4.orphan_list", holder, text)
    assert len(hits) == 1, r

def test_link_count_differs_from_kernel(ext4img, cleanups):
    """ext4.nlink sets the on-disk i_links_count against what the kernel
    shows.  Set offline (debugfs sif links_count), the kernel would load
    the wrong count and show it too (that is nlink.count's case, found by
    the walk); so the count is changed in the image file under the mounted
    filesystem, the kernel still holding the inode it loaded (1 link)."""
    rel, ino, _ = victim(ext4img, "nlink_disk")
    patch_inode_while_mounted(ext4img, rel, ino,
                              lambda raw: struct.pack_into("<H", raw, 0x1A, 3), cleanups)
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert os.stat(os.path.join(mnt, rel)).st_nlink == 1
    hits = assert_ext4(r, "ext4.nlink", ino, "link count on the disk is 3, the kernel shows 1")
    assert len(hits) == 1 and not r.of("Error", "nlink.count"), r


def test_extent_map_differs_from_fiemap(ext4img, cleanups):
    """ext4.extent_map sets the extent tree on the disk against FIEMAP.  An
    extent changed offline is what the kernel loads and FIEMAP shows; so the
    victim's only extent (3 blocks, in the inode) is shortened to 2 in the
    image file under the mounted filesystem, the kernel still holding the
    extent root it loaded."""
    rel, ino, _ = victim(ext4img, "extent_map", data=os.urandom(3 * 4096))
    assert len(debugfs(ext4img, "blocks <%d>" % ino).split()) == 3

    def shorten(raw):
        eh = 0x28                                     # i_block: ext3_extent_header
        assert struct.unpack_from("<HHHH", raw, eh) == (0xF30A, 1, 4, 0)
        assert struct.unpack_from("<H", raw, eh + 12 + 4)[0] == 3   # ee_len
        struct.pack_into("<H", raw, eh + 12 + 4, 2)

    patch_inode_while_mounted(ext4img, rel, ino, shorten, cleanups)
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    assert_ext4(r, "ext4.extent_map", ino,
                "the extent tree on the disk (1 extents) maps other blocks than FIEMAP shows")
    assert not r.of("Error", "ext4.extent_tree") and not r.of("Error", "ext4.block_in_use"), r


def test_htree_root_limit(ext4img):
    """An htree root whose dx_countlimit limit is one less than the block
    holds, its dx_tail checksum recomputed at the place the new limit puts
    it (crc32c from the directory's seed over the header and the count
    entries, then the dx_tail with dt_checksum zeroed): the block passes
    its checksum, the index
    does not.  The kernel finds the limit wrong too and falls back to
    reading and searching the directory linearly, so the walk still sees
    every name."""
    rel, ino, dino = victim(ext4img, "htree", files=400)
    assert "Flags: 0x81000" in debugfs(ext4img, "stat <%d>" % dino)   # EXTENTS|INDEX
    sb = _ext4_sb(ext4img)
    bs = sb["block_size"]
    blk = faults._ext4_first_block(ext4img, dino)
    block = bytearray(_pread(ext4img.path, blk * bs, bs))
    assert struct.unpack_from("<IBBBB", block, 24)[2] == 8          # dx_root_info.info_length
    limit, count = struct.unpack_from("<HH", block, 32)
    assert limit == (bs - 32 - 8) // 8 and 1 < count < limit, (limit, count)
    limit -= 1
    struct.pack_into("<H", block, 32, limit)
    tail = 32 + 8 * limit
    struct.pack_into("<II", block, tail, 0, 0)                      # dt_reserved, dt_checksum
    crc = faults.crc32c(faults._ext4_inode_csum_seed(ext4img, sb, dino), bytes(block[:32 + 8 * count]))
    struct.pack_into("<I", block, tail + 4, faults.crc32c(crc, bytes(block[tail:tail + 8])))
    _patch(ext4img.path, blk * bs, bytes(block))
    e2fsck(ext4img)
    mnt, r = scrub(ext4img)
    hits = assert_ext4(r, "ext4.htree", dino,
                       "directory block 0 (block %d): htree root has count %d and limit %d "
                       "(expected limit %d)" % (blk, count, limit, limit + 1))
    assert len(hits) == 1 and not r.of("Error", "ext4.dir_block"), r
    assert not [f for f in r.errors if not f.check.startswith("ext4.")], r   # the walk saw it all


def test_statfs_info(ext4img):
    """ext4.statfs (an info) sets the free counts the group descriptors on
    the disk add up to against statfs.  A count changed offline is what the
    kernel adds up at mount, and statfs shows it too; so group 0's free
    inode count is lowered by 5 in the image file under the mounted
    filesystem (descriptor checksum recomputed): the info shows the disk 5
    below statfs, and the descriptor disagrees with its bitmap
    (ext4.group_counts, the error)."""
    mnt = ext4img.mount()
    sv = os.statvfs(mnt)
    off, size = gd_offset(ext4img, 0)
    desc = bytearray(_pread(ext4img.path, off, size))
    free0 = struct.unpack_from("<H", desc, 0x0E)[0]                 # bg_free_inodes_count_lo
    struct.pack_into("<H", desc, 0x0E, free0 - 5)
    _patch(ext4img.path, off, gd_with_csum(_ext4_sb(ext4img), 0, desc))
    out = fsimage.run(["dumpe2fs", ext4img.path]).stdout
    fb = sum(int(n) for n in re.findall(r"^\s+(\d+) free blocks, ", out, re.M))
    fi = sum(int(n) for n in re.findall(r" (\d+) free inodes, ", out))
    assert fi == sv.f_ffree - 5 and fb == sv.f_bfree, (fb, fi, sv)
    ibm = re.search(r"Group 0: .*?\n.*?Inode bitmap at (\d+)", out, re.S).group(1)
    mnt, r = scrub(ext4img)
    info = r.of("Info", "ext4.statfs")
    assert len(info) == 1 and info[0].message == (
        "group descriptors on the disk: %d free blocks, %d free inodes; statfs: %d free blocks, "
        "%d free inodes" % (fb, fi, sv.f_bfree, sv.f_ffree)), r
    assert_ext4(r, "ext4.group_counts", None,
                "group 0: inode bitmap (block %s): the group descriptor says %d free inodes, "
                "the bitmap has %d" % (ibm, free0 - 5, free0))



def test_group_descriptor_inode_table_outside(image_factory):
    """Group 1's descriptor puts its inode table past the end of the
    filesystem (bg_inode_table_lo patched, descriptor checksum recomputed,
    in the image file under the mounted filesystem: the kernel refuses to
    mount such a descriptor even read-only).  It is an ext4.group_desc
    error; group 1's inodes cannot be read (an ext4.unchecked info), and
    the inode scan goes on with group 2, where a broken inode checksum is
    still found.  Small groups (32 inodes) so that the files span all
    three; no libext2fs error is shown as "Unknown code"."""
    img = image_factory("ext4", size_mb=300, mkfs_args=("-N", "96"))
    img.mkfs()
    assert int(_dumpe2fs_h(img, "Inodes per group")) == 32
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(70):
        with open(os.path.join(mnt, "d", "f%02d" % i), "wb") as f:
            f.write(b"x")
    inos = sorted(fsimage.inode_of(os.path.join(mnt, "d", n)) for n in os.listdir(os.path.join(mnt, "d")))
    ino = inos[-1]
    assert ino > 64, inos                                           # in group 2
    img.offline()
    off = inode_offset(img, ino) + 0x7C                             # i_checksum_lo
    _patch(img.path, off, bytes([_pread(img.path, off, 1)[0] ^ 0x5A]))
    mnt = img.mount()
    off, size = gd_offset(img, 1)
    desc = bytearray(_pread(img.path, off, size))
    struct.pack_into("<I", desc, 0x08, 900000)                      # bg_inode_table_lo
    _patch(img.path, off, gd_with_csum(_ext4_sb(img), 1, desc))
    mnt, r = scrub(img)
    assert "Unknown code" not in r.stdout + r.stderr, r
    assert_ext4(r, "ext4.group_desc", None, "group descriptor 1 (in block 1): a bitmap or "
                "the inode table is outside the filesystem")
    assert_ext4(r, "ext4.inode_csum", ino, "inode checksum does not match")
    assert any("group 1" in f.message for f in r.of("Info", "ext4.unchecked")), r


# ---- bigalloc ----------------------------------------------------------------

def _bigalloc_scrub(img, *args):
    """Mount with a 1 s journal commit, wait past it, scrub.  Right after a
    mount the superblock is in a recent journal transaction and a suspect
    about it is cleared as an info: only a scan after the commit shows
    what the superblock check says of the disk's copy."""
    mnt = img.mount("commit=1")
    time.sleep(2.5)
    r = run_fscrub("-v", *args, mnt)
    assert "with ext4 backend" in r.stdout, r
    return mnt, r


@pytest.mark.parametrize("block,cluster", [pytest.param(4096, 16384, marks=pytest.mark.slow),
                                           pytest.param(1024, 16384, marks=pytest.mark.slow),
                                           (4096, 65536)])
def test_bigalloc_clean(image_factory, block, cluster):
    """bigalloc: the bitmaps map clusters, the limit of 8 bits per bitmap
    byte is on clusters per group, and blocks per group is that times the
    cluster ratio (131072 blocks of 1 KiB in a group of 16 KiB clusters,
    sixteen times 8 * 1024).  A clean image with the fixture tree (files,
    directories, 1000 hard links, a fragmented file, a sparse file) and a
    file written after a remount scrubs to 0 with -n and -n -x after the
    journal committed; a link count broken with debugfs is still found."""
    # every small file takes a cluster: 64 KiB clusters need more room
    # 1 KiB blocks: the fixture's 3000-byte xattr needs ea_inode
    features = "bigalloc" + (",ea_inode" if block == 1024 else "")
    img = image_factory("ext4", size_mb=256 if cluster <= 16384 else 1024, mkfs_args=(
        "-b", str(block), "-O", features, "-C", str(cluster)))
    img.mkfs()
    assert "bigalloc" in fsimage.run(["dumpe2fs", "-h", img.path]).stdout
    assert int(_dumpe2fs_h(img, "Blocks per group")) > 8 * block
    mnt = img.mount()
    tree = fsimage.make_tree(mnt, deep=False)
    img.offline()
    mnt = img.mount()
    with open(os.path.join(mnt, "after_remount"), "wb") as f:
        f.write(os.urandom(3 * cluster + 100))
    img.offline()
    for args in (("-n",), ("-n", "-x")):
        mnt, r = _bigalloc_scrub(img, *args)
        assert r.rc == 0 and r.errors == [], r
        assert all(w.check in ("name.control", "name.encoding") for w in r.warnings), r
        assert "Phase 3: ext4:" in r.stdout and not r.of(check="ext4.unchecked"), r
        assert os.path.getsize(os.path.join(mnt, tree["fragmented"])) > 0
        img.offline()
    fault = faults.ext4_wrong_nlink(img)
    mnt, r = _bigalloc_scrub(img, "-n")
    assert r.rc == 4, r
    assert [f.check for f in r.errors] == ["nlink.count"], r
    assert r.errors[0].inode == fault["inode"], r


def test_bigalloc_faults(image_factory):
    """On bigalloc the bitmaps and free counts are per cluster: a cluster
    of a file freed in the bitmap (debugfs freeb) is ext4.block_in_use
    naming the file's first block in it, and a descriptor's free count off
    by 7 is ext4.group_counts in clusters."""
    img = image_factory("ext4", size_mb=256, mkfs_args=("-O", "bigalloc", "-C", "16384"))
    img.mkfs()
    rel, ino, _ = victim(img, "freeb", data=os.urandom(3 * 16384))
    blk = faults._ext4_first_block(img, ino)
    debugfs(img, "freeb %d" % blk, write=True)      # the whole cluster
    assert "not in use" in debugfs(img, "testb %d" % blk)
    out = debugfs(img, "show_super_stats")
    m = re.search(r"Group  0: block bitmap at (\d+).*?\n\s+(\d+) free clusters", out, re.S)
    assert m, out
    debugfs(img, "set_bg 0 free_blocks_count %d" % (int(m.group(2)) - 7), write=True)
    debugfs(img, "set_bg 0 checksum calc", write=True)
    e2fsck(img)
    mnt, r = _bigalloc_scrub(img, "-n")
    # the freed cluster's 4 blocks of 4 KiB
    assert_ext4(r, "ext4.block_in_use", ino, "4 blocks used by this regular file are marked "
                "free in the block bitmap (the first: block %d)" % blk)
    assert_ext4(r, "ext4.group_counts", None,
                "group 0: block bitmap (block %s): the group descriptor says %d free clusters, "
                "the bitmap has " % (m.group(1), int(m.group(2)) - 7))
    assert not r.of("Error", "ext4.superblock") and not r.of("Error", "ext4.group_desc"), r
