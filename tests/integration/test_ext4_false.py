"""ext4 filesystems that e2fsck -fn passes must scrub clean (issue 34, seen
first on e2fsprogs' own f_* regression images):

* with the ea_inode feature, an attribute value too large for the inode
  and its attribute block lives in an inode of its own (an EA inode), and
  ext4 charges its blocks to the i_blocks of every inode that refers to it
  (ext4_xattr_inode_alloc_quota(), e2fsck pass 1's ea_ibody_quota and
  ea_block_quota): ext4.inode_blocks counts them, from the inode's body and
  from its attribute block, and a value shared by two files is charged to
  both;
* with the shared_blocks feature (read-only, deduplicated offline) files
  may share blocks that FIEMAP does not flag: extent.crosslinked is not
  looked for, and -v says so once.

Each image is built here with mkfs.ext4, setfattr-like os.setxattr calls
and debugfs -w, shown clean (or damaged) by e2fsck -fn, then scrubbed just
mounted, mounted again past the journal's commit interval, and read-only."""

import errno
import gzip
import os
import re
import time

import pytest

from conftest import fsck_test_images, run_fscrub
from faults import debugfs
import fsimage
from test_ext4 import e2fsck

# The three ways a detection test mounts its image (scrub_in()).
MODES = ["fresh", "settled", "ro"]
# commit=1 (seconds) and a wait past it: the journal has written back.
COMMIT_S = 1
SETTLE_S = 2.5


def scrub_in(img, mode, *args):
    """Mount img as mode says and run fscrub -n -v on it: fresh, just
    mounted; settled, mounted, remounted and left past the journal's commit
    interval; ro, read-only.  ro_settled: read-only, remounted, waited."""
    time.sleep(1.1)     # files older than the 1 s "changed during the scan" window
    if mode == "fresh":
        mnt = img.mount()
    elif mode == "settled":
        img.mount("commit=%d" % COMMIT_S)
        mnt = img.remount("commit=%d" % COMMIT_S)
        time.sleep(SETTLE_S)
    elif mode == "ro_settled":
        img.mount("ro")
        mnt = img.remount("ro")
        time.sleep(SETTLE_S)
    else:
        mnt = img.mount("ro")
    r = run_fscrub("-n", "-v", *args, mnt)
    assert "with ext4 backend" in r.stdout, r
    return mnt, r


# ---- EA inodes' blocks in their owners' i_blocks --------------------------------

# 10 000 bytes: three 4 KiB blocks charged to each inode that refers to it.
BIG = 10000
BIG_BLOCKS = 3


@pytest.fixture
def ea_img(image_factory):
    """An ea_inode filesystem: ea/ibody keeps one EA-inode value's entry in
    its inode's body; ea/block has six, most of their entries in its
    attribute block; ea/twin1 and ea/twin2 refer to one value (one EA
    inode, counted twice).  Returned unmounted, with {name: (ino, sectors)}
    in img.files."""
    img = image_factory("ext4", size_mb=64, mkfs_args=("-O", "ea_inode"))
    img.mkfs()
    mnt = img.mount()
    d = os.path.join(mnt, "ea")
    os.mkdir(d)
    values = {"ibody": [b"i" * BIG], "block": [bytes([65 + i]) * BIG for i in range(6)],
              "twin1": [b"t" * BIG], "twin2": [b"t" * BIG]}
    for name, vals in values.items():
        path = os.path.join(d, name)
        with open(path, "wb") as fh:
            fh.write(b"data\n")
        for i, v in enumerate(vals):
            os.setxattr(path, "user.big%d" % i, v)
    os.sync()
    img.files = {}
    for name, vals in values.items():
        st = os.stat(os.path.join(d, name))
        img.files[name] = (st.st_ino, st.st_blocks)
    img.offline()
    assert debugfs(img, "stat /ea/block").count("File ACL: 0") == 0, "no attribute block"
    return img


def test_ea_inode_charges_are_counted(ea_img):
    """What ext4 charged: one data block, three blocks per value, and for
    ea/block its attribute block."""
    files = ea_img.files
    assert files["ibody"][1] == (1 + BIG_BLOCKS) * 8, files
    assert files["block"][1] == (1 + 1 + 6 * BIG_BLOCKS) * 8, files
    assert files["twin1"][1] == files["twin2"][1] == (1 + BIG_BLOCKS) * 8, files


@pytest.mark.parametrize("mode", MODES)
def test_ea_inode_values_clean(ea_img, mode):
    """Before: "i_blocks is 32, the extent tree maps 8" for each of them."""
    assert e2fsck(ea_img).returncode == 0
    mnt, r = scrub_in(ea_img, mode)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert not r.of(check="ext4.inode_blocks"), r


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,extra", [("ibody", 0), ("block", 1)])
def test_ea_inode_values_i_blocks_wrong(ea_img, mode, name, extra):
    """i_blocks without the values' charge is still an error, and says
    what the EA inodes add."""
    ino, sectors = ea_img.files[name]
    cut = (1 + extra) * 8
    debugfs(ea_img, "sif /ea/%s blocks %d" % (name, cut), write=True)
    p = e2fsck(ea_img)
    assert "i_blocks is %d, should be %d" % (cut, sectors) in p.stdout, p.stdout
    mnt, r = scrub_in(ea_img, mode)
    assert r.rc == 4, r
    says = "i_blocks is %d, the extent tree%s maps %d (with %d blocks charged for " \
           "attribute values in EA inodes)" % (cut, " and the attribute block" if extra else "",
                                               sectors, sectors // 8 - 1 - extra)
    assert [(f.check, f.inode, f.path, f.message) for f in r.errors] == [
        ("ext4.inode_blocks", ino, os.path.join(mnt, "ea", name), says)], r


# ---- shared_blocks ---------------------------------------------------------------

def share_blocks(img, feature):
    """Files a and b of two blocks each; b's extent pointed at a's blocks,
    its own freed, the counts made right by e2fsck -fy (which, with the
    shared_blocks feature, takes the blocks for shared).  feature False:
    the same image without the feature."""
    mnt = img.mount()
    for name in ("a", "b"):
        with open(os.path.join(mnt, name), "wb") as fh:
            fh.write(name.encode() * 8000)
    ino_a = fsimage.inode_of(os.path.join(mnt, "a"))
    img.offline()
    a0, b0 = (int(debugfs(img, "bmap /%s 0" % n)) for n in ("a", "b"))
    assert "(0-1):%d-%d" % (a0, a0 + 1) in debugfs(img, "stat /a"), "a is not one extent"
    debugfs(img, "feature shared_blocks", write=True)
    # i_block[5]: the low 32 bits of the first extent's start (after the
    # 12-byte header and the extent's logical block and length).
    debugfs(img, "sif /b block[5] %d" % a0, write=True)
    debugfs(img, "freeb %d 2" % b0, write=True)
    fsimage.run(["e2fsck", "-fy", img.path], check=False)
    if not feature:
        debugfs(img, "feature -shared_blocks", write=True)
    return ino_a


@pytest.fixture
def sb_img(image_factory):
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    return img


@pytest.mark.parametrize("mode", ["ro", "ro_settled"])
def test_shared_blocks_clean(sb_img, mode):
    """The kernel mounts shared_blocks read-only only (an ro_compat feature
    it does not know), so both runs are read-only: just mounted, and
    remounted past the commit interval.  Before: extent.crosslinked."""
    share_blocks(sb_img, True)
    p = e2fsck(sb_img)
    assert p.returncode == 0, p.stdout
    with pytest.raises(RuntimeError, match="unsupported optional features"):
        sb_img.mount()
    sb_img.offline()
    mnt, r = scrub_in(sb_img, mode)
    assert r.rc == 0 and r.errors == [], r
    assert not r.of(check="extent.crosslinked") and not r.of(check="ext4.crosslink"), r
    said = re.findall(r"shared_blocks feature lets files share blocks", r.stdout)
    assert len(said) == 1, r


@pytest.mark.parametrize("mode", MODES)
def test_shared_without_the_feature(sb_img, mode):
    """The same blocks shared without the feature: e2fsck's multiply-claimed
    blocks, fscrub's extent.crosslinked naming both files."""
    ino_a = share_blocks(sb_img, False)
    p = e2fsck(sb_img)
    assert "Multiply-claimed block(s) in inode %d" % ino_a in p.stdout, p.stdout
    mnt, r = scrub_in(sb_img, mode)
    assert r.rc == 4, r
    hits = r.of("Error", "extent.crosslinked")
    assert hits and hits[0].path == os.path.join(mnt, "a") and hits[0].inode == ino_a, r
    assert os.path.join(mnt, "b") in hits[0].message, r
    assert "shared_blocks" not in r.stdout, r


# ---- thousands of suspects --------------------------------------------------------

# Files whose names are removed offline: each an ext4.orphan suspect.  Sixteen
# 256-byte inodes share a 4 KiB inode-table block, so they lie in a few
# hundred blocks; a wait of 250 ms per batch of 64 suspects made 3000 cost
# 12 s of sleep (f_h_reindex's 30 361: 124 s).
ORPHANS = 3000


@pytest.fixture
def orphan_img(image_factory, workdir):
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "many"))
    for i in range(ORPHANS):
        open(os.path.join(mnt, "many", "f%05d" % i), "wb").close()
    inos = sorted(fsimage.inode_of(os.path.join(mnt, "many", "f%05d" % i))
                  for i in range(ORPHANS))
    img.offline()
    script = os.path.join(workdir, "unlink.debugfs")
    with open(script, "w") as fh:
        fh.writelines("unlink /many/f%05d\n" % i for i in range(ORPHANS))
    fsimage.run(["debugfs", "-w", "-f", script, img.path])
    img.inos = inos
    return img


@pytest.mark.parametrize("mode", MODES)
def test_thousands_of_suspects_one_wait(orphan_img, mode):
    """Every unlinked inode is an ext4.orphan error, and confirming them
    takes one batch (one wait), not one per 64 suspects."""
    p = e2fsck(orphan_img)
    assert "Unattached zero-length inode %d" % orphan_img.inos[0] in p.stdout, p.stdout
    start = time.monotonic()
    mnt, r = scrub_in(orphan_img, mode)
    took = time.monotonic() - start
    assert r.rc == 4, r
    orphans = r.of("Error", "ext4.orphan")
    assert sorted(f.inode for f in orphans) == orphan_img.inos, r
    assert [f for f in r.errors if f.check != "ext4.orphan"] == [], r
    assert took < 10, took      # the scan itself takes about a second
    batches = re.findall(r"^ext4: (\d+) suspects confirmed together", r.stdout, re.M)
    assert batches == [str(ORPHANS)], batches


# ---- inodes the kernel refuses as damaged ----------------------------------------

@pytest.fixture
def refused_img(image_factory):
    """a/b/up: a second name of directory a below a itself (the kernel's
    lookup refuses it with ELOOP while a is cached); enc: a file with the
    encrypt flag and no encryption context (its open fails with ENODATA).
    Returned unmounted with {name: ino} in img.inos."""
    img = image_factory("ext4", size_mb=64, mkfs_args=("-O", "encrypt"))
    img.mkfs()
    mnt = img.mount()
    os.makedirs(os.path.join(mnt, "a", "b"))
    for name in ("enc", "plain"):
        with open(os.path.join(mnt, name), "wb") as fh:
            fh.write(b"x\n")
    img.inos = {n: fsimage.inode_of(os.path.join(mnt, n)) for n in ("a", "enc")}
    img.offline()
    return img


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", ["dir_linked_below_itself", "no_encryption_context"])
def test_refused_inode_is_a_finding(refused_img, mode, fault):
    """Before: "fscrub: ...: cannot stat: Too many levels of symbolic
    links" / "cannot open: No data available" and exit 8."""
    if fault == "dir_linked_below_itself":
        debugfs(refused_img, "ln /a /a/b/up", write=True)
        rel, ino, says, e2says = ("a/b/up", refused_img.inos["a"],
                                  "cannot read the inode: Too many levels of symbolic links",
                                  "is a link to directory /a")
    else:
        debugfs(refused_img, "sif /enc flags 0x80800", write=True)   # EXTENTS | ENCRYPT
        rel, ino, says, e2says = ("enc", refused_img.inos["enc"],
                                  "cannot open the file: No data available",
                                  "has encrypt flag but no encryption extended attribute")
    p = e2fsck(refused_img)
    assert e2says in p.stdout, p.stdout
    mnt, r = scrub_in(refused_img, mode)
    assert r.rc == 4, r
    assert "fscrub:" not in r.stderr, r
    assert [(f.check, f.path, f.inode, f.message) for f in r.errors] == [
        ("inode.unreadable", os.path.join(mnt, rel), ino, says)], r


def public_image(image_factory, name):
    """e2fsprogs' test image name (conftest.fsck_test_images()), unpacked
    into an Image."""
    src = os.path.join(fsck_test_images("e2fsprogs"), name, "image.gz")
    assert os.path.exists(src), src
    img = image_factory("ext4", size_mb=1)
    with gzip.open(src, "rb") as gz, open(img.path, "wb") as fh:
        fh.write(gz.read())
    return img


def test_f_bad_encryption(image_factory):
    """EINVAL (a corrupt context), ENODATA (none) from the open, EPERM (a
    policy not the directory's) from the stat: one inode.unreadable each,
    no operational error."""
    mnt, r = scrub_in(public_image(image_factory, "f_bad_encryption"), "fresh")
    assert r.rc == 4 and "fscrub:" not in r.stderr, r
    said = {f.message.split(": ")[-1] for f in r.of("Error", "inode.unreadable")}
    assert said == {"Invalid argument", "No data available", "Operation not permitted"}, r
    assert len(r.of("Error", "inode.unreadable")) == 12, r
    # The unreadable inodes have names: no ext4.orphan; the subdirectories
    # among them count in their directory's link count: no dir.nlink.
    assert not r.of(check="ext4.orphan") and not r.of(check="dir.nlink"), r


# ---- what e2fsck rewrites without calling the filesystem damaged ---------------

# 8192 blocks of 4 KiB a group: a 64 MiB image has groups 0 to 1 and a backup.
SMALL_GROUPS = ("-g", "8192")

def _dumpe2fs(img):
    return fsimage.run(["dumpe2fs", img.path], check=False).stdout


def _e2fsck_clean(img):
    """e2fsck -fn exits 0 (what it printed is in the test's output)."""
    p = e2fsck(img)
    assert p.returncode == 0, p.stdout


def _break_gd_checksum(img, g):
    """Group g's descriptor checksum changed (debugfs set_bg); its flags."""
    m = re.search(r"^Group %d: .*? csum (0x[0-9a-f]+)(.*)$" % g, _dumpe2fs(img), re.M)
    csum = int(m.group(1), 16)
    debugfs(img, "set_bg %d checksum 0x%x" % (g, csum ^ 0x5A5A), write=True)
    assert "csum 0x%04x (EXPECTED 0x%04x)" % (csum ^ 0x5A5A, csum) in _dumpe2fs(img)
    return m.group(2)


@pytest.mark.parametrize("mode", ["ro", "ro_settled"])
def test_group_desc_checksum_alone_is_a_warning(image_factory, mode):
    """f_bad_gdt_csum, f_uninit_enable: group 0's descriptor checksum wrong,
    its fields sound, no UNINIT flag.  e2fsck latches the problem, rewrites
    the checksum on preen and its -n run exits 0; the kernel mounts it
    read-only only.  A warning naming the group, exit 0 (before: an
    ext4.group_desc error)."""
    img = image_factory("ext4", size_mb=64, mkfs_args=SMALL_GROUPS)
    img.mkfs()
    assert "UNINIT" not in _break_gd_checksum(img, 0)
    _e2fsck_clean(img)
    img.attach(read_only=True)
    mnt, r = scrub_in(img, mode)
    assert r.rc == 0 and r.errors == [], r
    hits = r.of("Warning", "ext4.group_desc")
    assert len(hits) == 1 and re.match(r"group descriptor 0 \(in block \d+\): checksum does "
                                       r"not match \(its fields are sound", hits[0].message), r


@pytest.mark.parametrize("mode", ["ro", "ro_settled"])
def test_group_desc_checksum_over_uninit_is_an_error(image_factory, mode):
    """Group 1 has INODE_UNINIT, which only its checksum vouches for: with
    the checksum wrong its never-written bitmap is what counts, and e2fsck
    exits 4.  An ext4.group_desc error."""
    img = image_factory("ext4", size_mb=64, mkfs_args=SMALL_GROUPS)
    img.mkfs()
    assert "INODE_UNINIT" in _break_gd_checksum(img, 1)
    assert e2fsck(img).returncode == 4
    img.attach(read_only=True)
    mnt, r = scrub_in(img, mode)
    assert r.rc == 4, r
    assert any(re.match(r"group descriptor 1 \(in block \d+\): checksum does not match$",
                        f.message) for f in r.of("Error", "ext4.group_desc")), r


@pytest.mark.parametrize("mode", MODES)
def test_backup_superblock_never_written_is_a_warning(image_factory, mode):
    """r_min_itable: group 1's backup superblock and descriptor blocks all
    zero, as e2image -r leaves them (the kernel writes s_overhead_clusters
    into it at mount).  e2fsck skips a backup without the magic and exits
    0: a warning, exit 0 (before: ext4.sb_backup error)."""
    img = image_factory("ext4", size_mb=64, mkfs_args=SMALL_GROUPS + ("-O", "^metadata_csum"))
    img.mkfs()
    blk = int(re.search(r"Group 1: .*?\n\s+Backup superblock at (\d+)", _dumpe2fs(img)).group(1))
    with open(img.path, "r+b") as f:
        f.seek(blk * 4096)
        f.write(bytes(2 * 4096))        # the superblock's and the descriptors' blocks
    _e2fsck_clean(img)
    mnt, r = scrub_in(img, mode)
    assert r.rc == 0 and r.errors == [], r
    hits = r.of("Warning", "ext4.sb_backup")
    assert [h.message for h in hits] == [
        "backup superblock in group 1 (block %d): never written (all zero: an image that kept "
        "the primary's metadata only, as e2image -r makes); there is no backup to recover "
        "from" % blk], r


@pytest.mark.parametrize("mode", MODES)
def test_backup_superblock_zero_but_one_field_is_an_error(image_factory, mode):
    """A zeroed backup with one field the kernel never writes there
    (s_inodes_count) is damage, not an unwritten backup."""
    img = image_factory("ext4", size_mb=64, mkfs_args=SMALL_GROUPS + ("-O", "^metadata_csum"))
    img.mkfs()
    blk = int(re.search(r"Group 1: .*?\n\s+Backup superblock at (\d+)", _dumpe2fs(img)).group(1))
    with open(img.path, "r+b") as f:
        f.seek(blk * 4096)
        f.write(b"\x01" + bytes(4095))   # s_inodes_count = 1, the rest zero
    mnt, r = scrub_in(img, mode)
    assert r.rc == 4, r
    assert any("backup superblock in group 1 (block %d): bad magic number" % blk in f.message
               for f in r.of("Error", "ext4.sb_backup")), r


def _verity_img(image_factory):
    """A verity filesystem whose file v has the verity flag set offline
    (debugfs), as fsverity enable would leave it on a kernel with fs-verity."""
    img = image_factory("ext4", size_mb=64, mkfs_args=("-O", "verity"))
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "v"), "wb") as f:
        f.write(b"v" * 8192)
    img.offline()
    flags = int(re.search(r"Flags: (0x[0-9a-f]+)", debugfs(img, "stat /v")).group(1), 16)
    debugfs(img, "set_inode_field /v flags 0x%x" % (flags | 0x100000), write=True)  # VERITY_FL
    return img


@pytest.mark.parametrize("mode", MODES)
def test_verity_file_unsupported_is_an_info(image_factory, mode):
    """f_verity: a kernel without fs-verity refuses to open a verity file
    (EOPNOTSUPP).  An info naming it, its on-disk checks made, exit 0
    (before: an operational error, exit 8)."""
    img = _verity_img(image_factory)
    mnt = img.mount()
    try:
        os.close(os.open(os.path.join(mnt, "v"), os.O_RDONLY))
        pytest.skip("this kernel has fs-verity: the file opens")
    except OSError as e:
        assert e.errno == errno.EOPNOTSUPP, e
    img.offline()
    mnt, r = scrub_in(img, mode)
    assert r.rc == 0 and "fscrub:" not in r.stderr, r
    hits = r.of("Info", "inode.verity_unsupported")
    assert [h.path for h in hits] == [os.path.join(mnt, "v")], r


def test_f_verity(image_factory):
    """e2fsprogs' f_verity image scrubs clean (before: exit 8)."""
    mnt, r = scrub_in(public_image(image_factory, "f_verity"), "fresh")
    assert r.rc == 0 and "fscrub:" not in r.stderr, r
