"""Offline fault injection for the fscrub integration tests.

Approach
--------
Every injector takes an :class:`fsimage.Image` whose image file exists
(mkfs'd, normally unmounted).  It

1. mounts the image, builds its own small victim under a fresh directory
   named after the fault (``<fault>``, ``<fault>.1``, ... so repeated calls
   on one image do not collide), records inode numbers, then unmounts AND
   detaches the loop device (so nothing stale stays in a page cache);
2. edits the image file offline with the filesystem's own debugger
   (``xfs_db -x`` for XFS, ``debugfs -w`` for ext4) or, where no debugger
   field exists (ext4 directory blocks, extent-tree blocks, XFS bmbt
   blocks), patches bytes at an offset the debugger computed;
3. returns a dict describing the victim: always ``fault``, ``fstype``,
   ``path`` (relative to the mount root: the object fscrub must report),
   ``inode``; plus fault-specific keys, and ``expect``: a dict of what
   the kernel (Linux 6.18) was observed to show when the image is
   mounted afterwards -- the docstrings give the full details.

The image is left unmounted and detached; call ``img.mount()`` to look
at it.  xfs_db recomputes inode CRCs on ``write`` and debugfs recomputes
inode checksums, so inode-field faults are "clean": only the semantic
inconsistency remains.  Byte patches invalidate block checksums; where a
clean variant is useful the checksum is recomputed here (ext4 directory
blocks, crc32c) or a separate ``mode`` selects "bad checksum only".

errno values: EUCLEAN (117, "Structure needs cleaning") is the kernel's
EFSCORRUPTED; EBADMSG (74) is EFSBADCRC; EIO is 5.

Summary of what the kernel shows afterwards (Linux 6.18; details in each
docstring):

  xfs_wrong_nlink / ext4_wrong_nlink  st_nlink 3, one name; no error.
  xfs_ftype_mismatch                  d_type DT_DIR, lstat S_IFREG; no error.
  ext4_symlink_size                   d_type DT_LNK; lstat/readlink/... EUCLEAN.
  xfs_dotdot / ext4_dotdot            getdents '..' d_ino wrong, stat('..')
                                      right; ext4 rename of it -> EUCLEAN.
  ext4_dotdot(fix_csum=False)         getdents EBADMSG (dir_index) or 0
                                      entries (^dir_index); lookups EBADMSG.
  ext4_read_error / xfs_read_error    stat/open fine; buffered read EIO;
                                      O_DIRECT read, FIEMAP, SEEK_DATA
                                      EUCLEAN (ext4 csum mode: EBADMSG).
  xfs_dirent_ino / ext4_dirent_ino    existing: d_ino == st_ino == other
                                      inode, nlink 1 (two names); free: XFS
                                      ENOENT silently, ext4 EUCLEAN.
"""

import os
import re
import struct

try:
    from .fsimage import run, inode_of, _write, _make_fragmented, fiemap, fiemap_extents
except ImportError:          # imported as a top-level module
    from fsimage import run, inode_of, _write, _make_fragmented, fiemap, fiemap_extents

EUCLEAN = 117
EBADMSG = 74
EIO = 5

__all__ = [
    "xfs_wrong_nlink", "ext4_wrong_nlink", "xfs_ftype_mismatch",
    "ext4_symlink_size", "xfs_dotdot", "ext4_dotdot", "ext4_read_error",
    "xfs_read_error", "xfs_dirent_ino", "ext4_dirent_ino",
    "xfs_field", "debugfs", "xfs_db", "crc32c", "ALL_FAULTS",
    "EUCLEAN", "EBADMSG", "EIO",
]


# ----------------------------------------------------------------------------
# generic helpers
# ----------------------------------------------------------------------------

def _need(img, fstype):
    if img.fstype != fstype:
        raise ValueError("this fault needs a %s image, got %r" % (fstype, img))
    if not os.path.exists(img.path):
        raise FileNotFoundError("image file %s does not exist (call mkfs())"
                                % img.path)


def _fresh_dir(mnt, base):
    """Create and return a new directory name under *mnt*: base, base.1..."""
    name, i = base, 0
    while os.path.lexists(os.path.join(mnt, name)):
        i += 1
        name = "%s.%d" % (base, i)
    os.mkdir(os.path.join(mnt, name))
    return name


class _Online:
    """``with _Online(img) as mnt:`` mount (if needed), yield the mount
    point, then sync + unmount + detach whatever happens."""

    def __init__(self, img):
        self.img = img

    def __enter__(self):
        return self.img.mount()

    def __exit__(self, *exc):
        try:
            os.sync()
        finally:
            self.img.offline()
        return False


_XFS_DB_ERR = re.compile(r"^(bad |unable to |no current|parsing error|invalid |"
                         r"Metadata (corruption|CRC error)|Usage)|out of range|"
                         r"not found|command .* not found")


def xfs_db(img, *cmds, write=True):
    """Run xfs_db on the image file with the given -c commands; returns
    stdout.  xfs_db exits 0 even when a command fails, so its output is
    checked for the usual error strings."""
    cmd = ["xfs_db"] + (["-x"] if write else ["-r"])
    for c in cmds:
        cmd += ["-c", c]
    cmd.append(img.path)
    p = run(cmd)
    text = p.stdout + p.stderr
    # xfs_db prints its errors on stdout, e.g. "bad inode number 9",
    # "unable to parse 'x'.", "index 9 for field list out of range 0-3",
    # "no current type", "field x not found", "parsing error".
    for line in text.splitlines():
        if _XFS_DB_ERR.search(line) and not line.lstrip().startswith("u3.sfdir3.list"):
            raise RuntimeError("xfs_db %r failed: %s\nfull output:\n%s"
                               % (cmds, line, text))
    return p.stdout


def xfs_repair_n(img):
    """xfs_repair -n's findings on the unmounted image, stdout and stderr
    (it exits 1 when it finds anything)."""
    p = run(["xfs_repair", "-n", img.path], check=False)
    return p.stdout + p.stderr


def xfs_field(img, ino, field):
    """Value (string) of *field* of inode *ino*, e.g. 'core.nlinkv2'."""
    out = xfs_db(img, "inode %d" % ino, "print %s" % field, write=False)
    m = re.search(r"^%s = (.*)$" % re.escape(field), out, re.M)
    if not m:
        raise RuntimeError("xfs_db: no field %s in inode %d:\n%s" % (field, ino, out))
    return m.group(1).strip()


def _xfs_sfdir_index(img, dir_ino, name):
    """Index i of *name* in short-form directory *dir_ino*'s
    u3.sfdir3.list[i]."""
    out = xfs_db(img, "inode %d" % dir_ino, "print core.format u3", write=False)
    fmt = re.search(r"^core.format = (\d+)", out, re.M)
    if not fmt or fmt.group(1) != "1":
        raise RuntimeError("directory %d is not short form (core.format=%s)"
                           % (dir_ino, fmt and fmt.group(1)))
    for m in re.finditer(r'^u3\.sfdir3\.list\[(\d+)\]\.name = "(.*)"$', out, re.M):
        if m.group(2) == name:
            return int(m.group(1))
    raise RuntimeError("%r not in short-form dir %d:\n%s" % (name, dir_ino, out))


def debugfs(img, request, write=False):
    """Run one debugfs request on the image file; returns stdout.  debugfs
    exits 0 on most errors, so stderr (minus the version banner) is
    checked."""
    p = run(["debugfs"] + (["-w"] if write else []) + ["-R", request, img.path])
    err = "\n".join(l for l in p.stderr.splitlines()
                    if l.strip() and not l.startswith("debugfs "))
    if err:
        raise RuntimeError("debugfs %r: %s" % (request, err))
    return p.stdout


def _ext4_sb(img):
    """A few superblock facts from dumpe2fs -h."""
    out = run(["dumpe2fs", "-h", img.path]).stdout
    get = lambda k: re.search(r"^%s:\s*(.*)$" % re.escape(k), out, re.M)
    feats = get("Filesystem features").group(1).split()
    sb = {"block_size": int(get("Block size").group(1)),
          "uuid": get("Filesystem UUID").group(1).strip(),
          "features": feats,
          "metadata_csum": "metadata_csum" in feats}
    seed = get("Checksum seed")
    sb["csum_seed"] = int(seed.group(1), 16) if seed else None
    return sb


def _patch(path, offset, data):
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def _pread(path, offset, length):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


# -- crc32c (Castagnoli), raw: no pre/post inversion, as ext4_chksum() --

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC32C = _crc32c_table()


def crc32c(crc, data):
    """Kernel-style crc32c(crc, data): no implicit inversion."""
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _ext4_fs_csum_seed(sb):
    """The metadata_csum seed: s_checksum_seed, else crc32c(~0, the fs UUID)."""
    if sb["csum_seed"] is not None:
        return sb["csum_seed"]
    return crc32c(0xFFFFFFFF, bytes.fromhex(sb["uuid"].replace("-", "")))


def _ext4_inode_csum_seed(img, sb, ino):
    """ei->i_csum_seed = crc32c(crc32c(fs_seed, le32 ino), le32 generation)."""
    fs_seed = _ext4_fs_csum_seed(sb)
    gen = int(re.search(r"Generation:\s*(\d+)",
                        debugfs(img, "stat <%d>" % ino)).group(1))
    return crc32c(crc32c(fs_seed, struct.pack("<I", ino)), struct.pack("<I", gen))


def _ext4_dirblock_fix_csum(img, sb, dir_ino, blk_off):
    """Recompute the ext4_dir_entry_tail checksum of a linear directory
    block at byte offset *blk_off*.  Returns (old, new) checksum."""
    bs = sb["block_size"]
    block = _pread(img.path, blk_off, bs)
    tail = block[bs - 12:]
    # tail: det_reserved_zero1 u32 = 0, rec_len u16 = 12, zero2 u8 = 0,
    # file_type u8 = 0xDE, checksum u32
    if struct.unpack("<IHBB", tail[:8]) != (0, 12, 0, 0xDE):
        raise RuntimeError("no dirent tail in block at %d (htree block?)" % blk_off)
    old = struct.unpack("<I", tail[8:])[0]
    new = crc32c(_ext4_inode_csum_seed(img, sb, dir_ino), block[:bs - 12])
    _patch(img.path, blk_off + bs - 4, struct.pack("<I", new))
    return old, new


def _ext4_first_block(img, ino):
    blocks = debugfs(img, "blocks <%d>" % ino).split()
    if not blocks:
        raise RuntimeError("inode %d has no blocks" % ino)
    return int(blocks[0])


def ext4_xattr_refcount(img, blk, count):
    """Set h_refcount of the attribute block *blk* to *count*, its
    checksum (metadata_csum: crc32c of the fs seed, the le64 block number
    and the block with h_checksum zero) recomputed; returns the old count."""
    sb = _ext4_sb(img)
    bs = sb["block_size"]
    block = bytearray(_pread(img.path, blk * bs, bs))
    magic, old = struct.unpack("<II", block[:8])
    if magic != 0xEA020000:
        raise RuntimeError("block %d is not an attribute block (magic %#x)" % (blk, magic))
    block[4:8] = struct.pack("<I", count)
    if sb["metadata_csum"]:
        block[16:20] = bytes(4)
        csum = crc32c(crc32c(_ext4_fs_csum_seed(sb), struct.pack("<Q", blk)), bytes(block))
        block[16:20] = struct.pack("<I", csum)
    _patch(img.path, blk * bs, bytes(block))
    return old


# ----------------------------------------------------------------------------
# 1. XFS: wrong link count
# ----------------------------------------------------------------------------

def xfs_wrong_nlink(img, nlink=3):
    """Regular file with one name whose on-disk core.nlinkv2 becomes *nlink*.

    Victim: ``xfs_wrong_nlink/victim`` (14 bytes, 1 real link), edited with
    ``xfs_db -x -c 'inode N' -c 'write core.nlinkv2 3'`` (CRC recomputed).

    OBSERVED after mounting (Linux 6.18, xfsprogs 6.1):
      * lstat == stat: st_ino N, st_mode 0o100644, st_nlink 3, st_size 14,
        st_blocks 8.  No errno anywhere.
      * open + read: 14 bytes b"victim content"; FIEMAP: 1 extent.
      * getdents64 of the parent: '.', '..', 'victim' (d_ino N, DT_REG);
        os.scandir entry.inode() == N, is_file(follow_symlinks=False).
      * no kernel message.  The only symptom is names found (1) !=
        st_nlink (3).
      * unlink('victim') succeeds, the name is gone, and xfs_db then shows
        the inode still allocated with core.nlinkv2 = 2: an unreachable,
        leaked inode.

    Returns {'fault', 'fstype', 'path', 'inode', 'nlink_ondisk',
    'real_links': 1, 'expect': {...}}.
    """
    _need(img, "xfs")
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, "xfs_wrong_nlink")
        rel = d + "/victim"
        _write(os.path.join(mnt, rel), b"victim content")
        ino = inode_of(os.path.join(mnt, rel))
    xfs_db(img, "inode %d" % ino, "write core.nlinkv2 %d" % nlink)
    got = int(xfs_field(img, ino, "core.nlinkv2"))
    if got != nlink:
        raise RuntimeError("xfs_db did not set nlink (reads %d)" % got)
    return {"fault": "xfs_wrong_nlink", "fstype": "xfs", "path": rel,
            "inode": ino, "nlink_ondisk": nlink, "real_links": 1,
            "expect": {"st_nlink": nlink, "st_size": 14, "read": b"victim content",
                       "names_found": 1}}


# ----------------------------------------------------------------------------
# 2. ext4: wrong link count
# ----------------------------------------------------------------------------

def ext4_wrong_nlink(img, nlink=3):
    """Regular file with one name whose i_links_count becomes *nlink*
    (``debugfs -w -R 'set_inode_field <N> links_count 3'``; debugfs
    recomputes the inode checksum).

    OBSERVED after mounting (Linux 6.18, e2fsprogs 1.47, metadata_csum):
      * lstat == stat: st_mode 0o100644, st_nlink 3, st_size 14,
        st_blocks 8; read gives the 14 bytes; FIEMAP 1 extent.
      * getdents64 of the parent lists 'victim' once (d_ino N, DT_REG).
        NB: on ext4 (dir_index) even a one-block directory is returned in
        hash order -- '.' and '..' are NOT necessarily first.
      * no kernel message, superblock state stays "clean".
      * unlink succeeds; debugfs then shows the inode with Links: 2 (leak).

    Returns {'fault', 'fstype', 'path', 'inode', 'nlink_ondisk',
    'real_links': 1, 'expect': {...}}.
    """
    _need(img, "ext4")
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, "ext4_wrong_nlink")
        rel = d + "/victim"
        _write(os.path.join(mnt, rel), b"victim content")
        ino = inode_of(os.path.join(mnt, rel))
    debugfs(img, "set_inode_field <%d> links_count %d" % (ino, nlink), write=True)
    out = debugfs(img, "stat <%d>" % ino)
    if not re.search(r"Links:\s*%d\b" % nlink, out):
        raise RuntimeError("debugfs did not set links_count:\n%s" % out)
    return {"fault": "ext4_wrong_nlink", "fstype": "ext4", "path": rel,
            "inode": ino, "nlink_ondisk": nlink, "real_links": 1,
            "expect": {"st_nlink": nlink, "st_size": 14, "read": b"victim content",
                       "names_found": 1}}


# ----------------------------------------------------------------------------
# 3. XFS: directory entry file type disagrees with the inode
# ----------------------------------------------------------------------------

XFS_FT = {"unknown": 0, "reg": 1, "dir": 2, "chr": 3, "blk": 4, "fifo": 5,
          "sock": 6, "symlink": 7}


def xfs_ftype_mismatch(img, ftype="dir"):
    """In a short-form directory (3 entries) the dirent of a regular file
    gets filetype XFS_DIR3_FT_DIR (2) (``write u3.sfdir3.list[i].filetype
    2``; the field path for v5 short-form dirs is u3.sfdir3.list[i].*).

    Victim: ``xfs_ftype_mismatch/file`` (regular, 6 bytes; siblings
    ``other`` (file) and ``sub`` (dir)).

    OBSERVED after mounting (Linux 6.18):
      * getdents64 of the parent: 'file' with the correct d_ino but
        d_type DT_DIR (4).  os.scandir: entry.is_dir(follow_symlinks=
        False) -> True, entry.is_file(follow_symlinks=False) -> False,
        entry.inode() == st_ino; entry.stat(follow_symlinks=False)
        (an lstat) says S_IFREG.
      * lstat('file'): st_mode 0o100644, st_size 6, st_nlink 1, no error.
      * open(O_RDONLY) + read: b"a file".  open(O_DIRECTORY) and
        os.listdir('file'): ENOTDIR (20).
      * `ls -l` shows it as a regular file (it lstats); no kernel message
        (the short-form verifier only rejects ftype >= XFS_DIR3_FT_MAX).

    Returns {'fault', 'fstype', 'path', 'inode', 'dir_inode',
    'dirent_ftype': 'dir', 'real_ftype': 'reg', 'expect': {...}}.
    """
    _need(img, "xfs")
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, "xfs_ftype_mismatch")
        rel = d + "/file"
        _write(os.path.join(mnt, rel), b"a file")
        _write(os.path.join(mnt, d, "other"), b"other")
        os.mkdir(os.path.join(mnt, d, "sub"))
        ino = inode_of(os.path.join(mnt, rel))
        dino = inode_of(os.path.join(mnt, d))
    i = _xfs_sfdir_index(img, dino, "file")
    xfs_db(img, "inode %d" % dino, "write u3.sfdir3.list[%d].filetype %d"
           % (i, XFS_FT[ftype]))
    got = xfs_field(img, dino, "u3.sfdir3.list[%d].filetype" % i)
    if int(got) != XFS_FT[ftype]:
        raise RuntimeError("filetype not written (reads %s)" % got)
    return {"fault": "xfs_ftype_mismatch", "fstype": "xfs", "path": rel,
            "inode": ino, "dir_inode": dino, "dirent_ftype": ftype,
            "real_ftype": "reg",
            "expect": {"d_type": 4 if ftype == "dir" else None, "st_mode_fmt": 0o100000,
                       "read": b"a file"}}


# ----------------------------------------------------------------------------
# 4. ext4: fast symlink whose i_size exceeds its target length
# ----------------------------------------------------------------------------

def ext4_symlink_size(img, size=40):
    """Fast symlink ``ext4_symlink_size/link -> 'short-target'`` (12
    bytes, stored in i_block) gets i_size = *size*
    (``set_inode_field <N> size 40``).

    OBSERVED after mounting (Linux 6.18), identical for size=40 and
    size=100:
      * getdents64 of the parent lists 'link' with d_ino N and d_type
        DT_LNK (10).  os.scandir: entry.is_symlink() -> True,
        entry.inode() -> N (from d_ino), entry.stat(follow_symlinks=
        False) -> OSError EUCLEAN.
      * lstat, stat, os.readlink, open(O_PATH|O_NOFOLLOW), open(O_RDONLY),
        listxattr(follow_symlinks=False), FIEMAP: all EUCLEAN (117).
        The inode is rejected by ext4_iget() on every lookup (nothing is
        cached), each time logging "EXT4-fs error (device loopN):
        ext4_lookup:1787: inode #N: comm python3: invalid fast symlink
        length 40".
      * unlink and rename of the name: EUCLEAN too (they need the inode).
        `ls -l` prints "l????????? ? ? ? ? ? link" plus "cannot access
        ...: Structure needs cleaning".
      * the fs stays mounted rw (errors=continue); dumpe2fs afterwards:
        state "clean with errors", FS Error count > 0, First error
        function ext4_lookup, err EFSCORRUPTED.

    Returns {'fault', 'fstype', 'path', 'inode', 'target',
    'size_ondisk', 'expect': {'lstat_errno': 117, ...}}.
    """
    _need(img, "ext4")
    target = "short-target"
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, "ext4_symlink_size")
        rel = d + "/link"
        os.symlink(target, os.path.join(mnt, rel))
        _write(os.path.join(mnt, d, "neighbour"), b"neighbour\n")
        ino = inode_of(os.path.join(mnt, rel))
    out = debugfs(img, "stat <%d>" % ino)
    if "Fast link dest" not in out:
        raise RuntimeError("symlink %d is not a fast symlink:\n%s" % (ino, out))
    debugfs(img, "set_inode_field <%d> size %d" % (ino, size), write=True)
    return {"fault": "ext4_symlink_size", "fstype": "ext4", "path": rel,
            "inode": ino, "target": target, "size_ondisk": size,
            "expect": {"lstat_errno": EUCLEAN, "readlink_errno": EUCLEAN,
                       "d_type": 10}}


# ----------------------------------------------------------------------------
# 5. XFS: '..' of a short-form directory points to the wrong directory
# ----------------------------------------------------------------------------

def _dotdot_victim(img, fault, to):
    """Build the victims of the *_dotdot faults: <fault>/child (a short
    directory with f1, f2) beside <fault>/other (a directory) and
    <fault>/file.  Returns (rel, ino, parent, wrong): the child's path, its
    inode, its real parent's inode and the inode of <fault>/<to>."""
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, fault)
        rel = d + "/child"
        os.mkdir(os.path.join(mnt, rel))
        _write(os.path.join(mnt, rel, "f1"), b"1\n")
        _write(os.path.join(mnt, rel, "f2"), b"2\n")
        os.mkdir(os.path.join(mnt, d, "other"))
        _write(os.path.join(mnt, d, "file"), b"not a dir\n")
        ino = inode_of(os.path.join(mnt, rel))
        parent = inode_of(os.path.join(mnt, d))
        wrong = inode_of(os.path.join(mnt, d, to))
    return rel, ino, parent, wrong


def xfs_dotdot(img, to="other"):
    """Short-form directory ``xfs_dotdot/child`` (2 entries) gets
    u3.sfdir3.hdr.parent.i4 = inode of ``xfs_dotdot/other`` (a sibling
    directory; or of a regular file with to="file").

    OBSERVED after mounting (Linux 6.18):
      * raw getdents64 of child (fsimage.getdents, a C program, and
        `strace -v -e getdents64` all agree): '.' d_ino == child's
        st_ino, '..' d_ino == the *other* directory's inode, f1/f2 normal.
        os.scandir hides '.' and '..'.
      * `ls -ia` / `ls -fi` (coreutils 9.1) print the REAL parent for '..'
        because ls statx()es every entry -- ls cannot show the bad value.
      * stat('child/..'), `stat child/..`, os.stat('..', dir_fd=child):
        the real parent (the VFS resolves '..' via the dcache and never
        asks XFS).
      * lstat(child): S_IFDIR 0o40755, st_nlink 2, st_size 26 (short
        form); its entries look up fine; no errno, no kernel message.
      * rename(child, <elsewhere>) succeeds and XFS rewrites '..', which
        silently repairs the fault.

    Returns {'fault', 'fstype', 'path' (the child dir), 'inode',
    'dotdot_ondisk', 'real_parent', 'expect': {...}}.
    """
    _need(img, "xfs")
    rel, ino, parent, wrong = _dotdot_victim(img, "xfs_dotdot", to)
    fmt = xfs_field(img, ino, "core.format")
    if not fmt.startswith("1"):
        raise RuntimeError("child dir not short form: core.format = %s" % fmt)
    cur = int(xfs_field(img, ino, "u3.sfdir3.hdr.parent.i4"))
    if cur != parent:
        raise RuntimeError("unexpected parent %d (want %d)" % (cur, parent))
    xfs_db(img, "inode %d" % ino, "write u3.sfdir3.hdr.parent.i4 %d" % wrong)
    return {"fault": "xfs_dotdot", "fstype": "xfs", "path": rel, "inode": ino,
            "dotdot_ondisk": wrong, "real_parent": parent,
            "expect": {"getdents_dotdot": wrong, "stat_dotdot": parent}}


# ----------------------------------------------------------------------------
# 6. ext4: '..' entry points to the wrong directory
# ----------------------------------------------------------------------------

def ext4_dotdot(img, to="other", fix_csum=True):
    """Directory ``ext4_dotdot/child`` (linear, one block) gets its '..'
    dirent inode (bytes 12..15 of the first directory block, after the
    12-byte '.' entry) patched to the inode of ``ext4_dotdot/other``.
    debugfs has no dirent editor, so the bytes are written directly at
    block*block_size + 12 (block from ``debugfs -R 'blocks <N>'``).

    With metadata_csum (mke2fs default) and ``fix_csum=True`` the
    directory block's tail checksum (crc32c over the block, seeded with
    the fs UUID, inode number and generation) is recomputed, giving a
    clean semantic fault.  With ``fix_csum=False`` only the bytes change.

    OBSERVED after mounting (Linux 6.18):
      fix_csum=True on metadata_csum, and likewise on a -O ^metadata_csum
      fs (csum='none'):
        * raw getdents64: '..' d_ino == other's inode; '.', f1, f2
          normal (order is hash order, '..' not necessarily 2nd).
        * stat('child/..') and openat(child, '..'): the real parent.
        * lstat(child): S_IFDIR 0o40755, nlink 2, size 4096; lookups of
          f1/f2 work; no errno, no kernel message, fs state "clean".
        * rename(child, <other dir>): EUCLEAN (117) -- ext4_rename()
          checks that '..' names the old parent (unlike XFS).
      fix_csum=False on metadata_csum (csum='stale'):
        * default features (dir_index): getdents64 on child fails with
          EBADMSG (74) (os.listdir, ls: "reading directory ...: Bad
          message"); kernel "EXT4-fs error (device loopN):
          htree_dirblock_to_tree:1051: inode #N: comm ...: Directory block
          failed checksum".
        * with -O ^dir_index: getdents64 returns 0 entries -- not even '.'
          and '..' -- with NO errno (ext4_readdir skips the block); kernel
          "ext4_readdir:222: inode #N: comm ...: path ...: directory fails
          checksum at offset 0".
        * either way: lstat('child/f1') -> EBADMSG ("__ext4_find_entry:
          1624 ... checksumming directory block 0"); rename(child) ->
          EBADMSG; lstat(child) itself works; stat('child/..') -> real
          parent; fs state becomes "clean with errors" (EFSBADCRC).

    Returns {'fault', 'fstype', 'path' (child dir), 'inode',
    'dotdot_ondisk', 'real_parent', 'block', 'csum': 'fixed'|'stale'|
    'none', 'expect': {...}}.
    """
    _need(img, "ext4")
    rel, ino, parent, wrong = _dotdot_victim(img, "ext4_dotdot", to)
    sb = _ext4_sb(img)
    blk = _ext4_first_block(img, ino)
    off = blk * sb["block_size"]
    head = _pread(img.path, off, 24)
    dot_ino, dot_rec, dot_nl, _ = struct.unpack("<IHBB", head[:8])
    dd_ino, dd_rec, dd_nl, _ = struct.unpack("<IHBB", head[12:20])
    if (dot_ino, dot_rec, dot_nl, head[8:9]) != (ino, 12, 1, b".") or \
       (dd_ino, dd_nl, head[20:22]) != (parent, 2, b".."):
        raise RuntimeError("block %d of inode %d does not start with '.', '..' "
                           "(got %r)" % (blk, ino, head))
    _patch(img.path, off + 12, struct.pack("<I", wrong))
    csum = "none"
    if sb["metadata_csum"]:
        if fix_csum:
            _ext4_dirblock_fix_csum(img, sb, ino, off)
            csum = "fixed"
        else:
            csum = "stale"
    if csum == "stale":
        dir_index = "dir_index" in sb["features"]
        exp = {"getdents_errno": EBADMSG if dir_index else None,
               "getdents_entries": None if dir_index else 0,
               "lookup_errno": EBADMSG, "stat_dotdot": parent}
    else:
        exp = {"getdents_dotdot": wrong, "stat_dotdot": parent,
               "rename_errno": EUCLEAN}
    return {"fault": "ext4_dotdot", "fstype": "ext4", "path": rel, "inode": ino,
            "dotdot_ondisk": wrong, "real_parent": parent, "block": blk,
            "csum": csum, "expect": exp}


# ----------------------------------------------------------------------------
# 7a. ext4: unreadable file (extent tree block destroyed)
# ----------------------------------------------------------------------------

def ext4_read_error(img, mode="zero", pieces=16):
    """Regular file ``ext4_read_error/victim`` (pieces x 4 KiB, allocation
    interleaved with a sibling so it has *pieces* extents -> extent tree
    depth 1, its leaf in a separate block, shown by debugfs 'stat' as
    "(ETB0):B") whose leaf block is damaged on the image:

      mode="zero": the 4 KiB leaf is overwritten with zeros (bad magic).
      mode="csum": one bit of the leaf's ext4_extent_tail checksum
                   (last 4 bytes of the block) is flipped; metadata_csum only.

    OBSERVED after mounting (Linux 6.18), pieces=16 (debugfs: 16
    extents, one ETB0 leaf):
      * lstat == stat: S_IFREG 0o100644, nlink 1, st_size 65536,
        st_blocks 136 (16 data blocks + the leaf).  open(O_RDONLY) works.
      * buffered read()/pread(): EIO (5) -- not EUCLEAN -- at offset 0,
        8192 and the last block alike (all extents live in the one leaf);
        pread at/after EOF returns b''.  `cat`: "Input/output error".
      * O_DIRECT pread at 0, FIEMAP ioctl and lseek(SEEK_DATA): the real
        error: EUCLEAN (117) for mode="zero", EBADMSG (74) for
        mode="csum" (also EUCLEAN for mode="zero" on ^metadata_csum).
      * `filefrag -v` is misleading: exit 0 and "0 extents found" (it
        falls back to FIBMAP when FIEMAP fails) -- use fsimage.fiemap().
      * kernel, every access: "EXT4-fs error (device loopN):
        ext4_find_extent:944: inode #N: comm ...: pblk B bad header/extent:
        invalid magic - magic 0, entries 0, max 0(0), depth 0(0)" (zero) or
        "... extent tree corrupted - magic f30a, entries 16, max 340(340),
        depth 0(0)" (csum).
      * the sibling ``other`` reads fine; the fs stays mounted rw
        (errors=continue), state "clean with errors".

    Returns {'fault', 'fstype', 'path', 'inode', 'mode', 'extents',
    'leaf_block', 'leaf_offset' (byte offset in the image), 'size',
    'expect': {'read_errno': 5 (buffered), 'fail_offset': 0,
    'direct_read_errno', 'fiemap_errno', 'seek_data_errno': 117 or 74}}.
    """
    _need(img, "ext4")
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, "ext4_read_error")
        rel = d + "/victim"
        _make_fragmented(os.path.join(mnt, rel), os.path.join(mnt, d, "other"),
                         pieces)
        ino = inode_of(os.path.join(mnt, rel))
        nextents = fiemap_extents(os.path.join(mnt, rel))
    out = debugfs(img, "stat <%d>" % ino)
    m = re.search(r"\(ETB0\):\s*(\d+)", out)
    if not m:
        raise RuntimeError("inode %d has no separate extent block (only %s "
                           "extents?):\n%s" % (ino, nextents, out))
    leaf = int(m.group(1))
    sb = _ext4_sb(img)
    off = leaf * sb["block_size"]
    if _pread(img.path, off, 2) != b"\x0a\xf3":
        raise RuntimeError("block %d has no extent header magic" % leaf)
    if mode == "zero":
        _patch(img.path, off, b"\0" * sb["block_size"])
        err = EUCLEAN
    elif mode == "csum":
        if not sb["metadata_csum"]:
            raise ValueError("mode='csum' needs metadata_csum")
        last = _pread(img.path, off + sb["block_size"] - 4, 1)
        _patch(img.path, off + sb["block_size"] - 4, bytes([last[0] ^ 0x01]))
        err = EBADMSG
    else:
        raise ValueError("mode must be 'zero' or 'csum'")
    return {"fault": "ext4_read_error", "fstype": "ext4", "path": rel,
            "inode": ino, "mode": mode, "extents": nextents, "leaf_block": leaf,
            "leaf_offset": off, "size": pieces * 4096,
            "expect": {"read_errno": EIO, "fail_offset": 0, "direct_read_errno": err,
                       "fiemap_errno": err, "seek_data_errno": err}}


# ----------------------------------------------------------------------------
# 7b. XFS: unreadable file (bmap btree block destroyed)
# ----------------------------------------------------------------------------

def xfs_read_error(img, mode="zero", pieces=40):
    """Regular file ``xfs_read_error/victim`` with *pieces* (default 40)
    extents: more than fit in the inode's data fork (21 for 512-byte
    inodes), so core.format == 3 (btree); the root in the inode
    (u3.bmbt) points to one leaf block (u3.bmbt.ptrs[1], an fsblock
    number, converted with ``xfs_db 'convert fsblock B daddr'``).  Then:

      mode="zero": the leaf block is overwritten with zeros.
      mode="csum": one bit of the leaf's bb_crc (byte 56 of the long-form
                   v5 btree block header) is flipped.

    OBSERVED after mounting (Linux 6.18), pieces=40 (40 extents,
    bmbt level 1, one leaf), identical for both modes:
      * lstat == stat: S_IFREG 0o100644, nlink 1, st_size 163840,
        st_blocks 328.  open(O_RDONLY) works.
      * buffered read()/pread(): EIO (5) at offset 0, 8192 and the last
        block; at/after EOF b''.  `cat`: "Input/output error".
      * O_DIRECT pread, FIEMAP ioctl, lseek(SEEK_DATA): EUCLEAN (117) in
        both modes (the verifier's EFSBADCRC is turned into
        EFSCORRUPTED).  `filefrag -v`: exit 0, "0 extents found".
      * kernel: "XFS (loopN): Metadata CRC error detected at
        xfs_bmbt_read_verify+0x12/0xd0, xfs_bmbt block 0x170", "Unmount
        and run xfs_repair", a 128-byte hex dump, and "metadata I/O error
        in "xfs_btree_read_buf_block+0x9c/0x130" at daddr 0x170 len 8
        error 74" (zeroing also breaks the CRC, which is checked first).
      * the fs is NOT shut down: the sibling ``other`` reads fine and new
        files can still be created and removed.

    Returns {'fault', 'fstype', 'path', 'inode', 'mode', 'extents',
    'bmbt_block' (fsblock), 'bmbt_offset' (byte offset in image),
    'size', 'expect': {'read_errno': 5 (buffered), 'fail_offset': 0,
    'direct_read_errno', 'fiemap_errno', 'seek_data_errno': 117}}.
    """
    _need(img, "xfs")
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, "xfs_read_error")
        rel = d + "/victim"
        _make_fragmented(os.path.join(mnt, rel), os.path.join(mnt, d, "other"),
                         pieces)
        ino = inode_of(os.path.join(mnt, rel))
        nextents = fiemap_extents(os.path.join(mnt, rel))
    fmt = xfs_field(img, ino, "core.format")
    if not fmt.startswith("3"):
        raise RuntimeError("inode %d data fork is not btree (core.format = %s, "
                           "%s extents)" % (ino, fmt, nextents))
    level = int(xfs_field(img, ino, "u3.bmbt.level"))
    if level != 1:
        raise RuntimeError("bmbt level %d, want 1" % level)
    nrecs = int(xfs_field(img, ino, "u3.bmbt.numrecs"))
    if nrecs != 1:
        raise RuntimeError("bmbt root has %d pointers, want 1" % nrecs)
    fsb = int(xfs_field(img, ino, "u3.bmbt.ptrs[1]"))      # 1-based
    out = xfs_db(img, "convert fsblock %d daddr" % fsb, write=False)
    daddr = int(re.search(r"\((\d+)\)", out).group(1))
    bsize = int(re.search(r"= (\d+)", xfs_db(img, "sb 0", "print blocksize",
                                              write=False)).group(1))
    off = daddr * 512
    if _pread(img.path, off, 4) != b"BMA3":
        raise RuntimeError("fsblock %d (daddr %d) is not a BMA3 block" % (fsb, daddr))
    if mode == "zero":
        _patch(img.path, off, b"\0" * bsize)
    elif mode == "csum":
        b = _pread(img.path, off + 56, 1)
        _patch(img.path, off + 56, bytes([b[0] ^ 0x01]))
    else:
        raise ValueError("mode must be 'zero' or 'csum'")
    return {"fault": "xfs_read_error", "fstype": "xfs", "path": rel,
            "inode": ino, "mode": mode, "extents": nextents, "bmbt_block": fsb,
            "bmbt_offset": off, "size": pieces * 4096,
            "expect": {"read_errno": EIO, "fail_offset": 0,
                       "direct_read_errno": EUCLEAN, "fiemap_errno": EUCLEAN,
                       "seek_data_errno": EUCLEAN}}


# ----------------------------------------------------------------------------
# 8. directory entry pointing at the wrong inode
# ----------------------------------------------------------------------------

def _dirent_ino_victim(img, fault, target):
    """Build the victims of the *_dirent_ino faults: directory <fault> with
    'victim' and 'b', and <fault>.t/target.  Returns (rel, tgt, new, ino,
    dino): the victim's path, the target's path, the inode number the
    dirent is to name (the target's, or a freed one), the victim's inode
    and its directory's inode."""
    if target not in ("existing", "free"):
        raise ValueError("target must be 'existing' or 'free'")
    with _Online(img) as mnt:
        d = _fresh_dir(mnt, fault)
        rel = d + "/victim"
        _write(os.path.join(mnt, rel), b"victim\n")
        _write(os.path.join(mnt, d, "b"), b"b\n")
        td = _fresh_dir(mnt, d + ".t")
        tgt = td + "/target"
        _write(os.path.join(mnt, tgt), b"target\n")
        if target == "free":
            _write(os.path.join(mnt, td, "gone"), b"")
            new = inode_of(os.path.join(mnt, td, "gone"))
            os.unlink(os.path.join(mnt, td, "gone"))
        else:
            new = inode_of(os.path.join(mnt, tgt))
        ino = inode_of(os.path.join(mnt, rel))
        dino = inode_of(os.path.join(mnt, d))
    return rel, tgt, new, ino, dino


def xfs_dirent_ino(img, target="existing"):
    """Short-form directory ``xfs_dirent_ino`` holds 'victim' and 'b'; the
    dirent 'victim' gets u3.sfdir3.list[i].inumber.i4 =

      target="existing": the inode of ``xfs_dirent_ino.t/target`` (a
                         regular file with 1 link in another directory);
      target="free":     an unallocated inode number (a file created and
                         deleted before unmount).  Inject this one LAST
                         on an image: any later file creation (including
                         another injector) may reuse the free inode and
                         silently turn the fault into target="existing".

    OBSERVED after mounting (Linux 6.18):
      existing:
        * getdents64: 'victim' d_ino == target's inode T, DT_REG.
        * lstat('victim'): st_ino T (so d_ino == st_ino), st_nlink 1
          although two names now reach T, size 7; read -> b"target\\n".
          No errno, no kernel message.  The old victim inode
          ('orphan_inode') stays allocated (nlink 1) with no name.
        * open(O_CREAT|O_EXCL) -> EEXIST.  unlink('victim') succeeds and
          drops T to st_nlink 0 while 'target' still names it and still
          reads b"target\\n" (until the inode is evicted); after umount
          xfs_repair -n reports 'entry "target" ... references free inode'.
      free:
        * getdents64: 'victim' with d_ino == the free inode F, DT_REG;
          os.scandir entry.inode() == F.
        * lstat/stat/readlink/open/listxattr: ENOENT (2) -- XFS treats
          the lookup of a free inode as "no such file"; NO kernel message.
        * open(O_CREAT|O_EXCL, 'victim') then SUCCEEDS: the directory now
          holds two 'victim' entries (F and the new inode G).  unlink
          ('victim') then removes the first (bogus, F) entry but drops G's
          link count, leaving 'victim' -> G with G free (lstat ENOENT).
          Never "try to create" over this fault.

    Returns {'fault', 'fstype', 'path', 'inode' (the inode the dirent now
    names), 'orphan_inode' (victim's real inode), 'target' (path of the
    other name for target='existing'), 'expect': {...}}.
    """
    _need(img, "xfs")
    rel, tgt, new, ino, dino = _dirent_ino_victim(img, "xfs_dirent_ino", target)
    i = _xfs_sfdir_index(img, dino, "victim")
    xfs_db(img, "inode %d" % dino, "write u3.sfdir3.list[%d].inumber.i4 %d" % (i, new))
    exp = ({"d_ino": new, "st_ino": new, "st_nlink": 1, "read": b"target\n"}
           if target == "existing" else {"d_ino": new, "lstat_errno": 2})
    return {"fault": "xfs_dirent_ino", "fstype": "xfs", "path": rel, "inode": new,
            "orphan_inode": ino, "dir_inode": dino,
            "target": tgt if target == "existing" else None,
            "expect": exp}


def ext4_dirent_ino(img, target="existing"):
    """ext4 counterpart of xfs_dirent_ino: the dirent 'victim' in the
    one-block directory ``ext4_dirent_ino`` gets its inode field patched
    (found by scanning the block for the name) to

      target="existing": the inode of ``ext4_dirent_ino.t/target``;
      target="free":     an unallocated inode (created + deleted; ext4
                         reuses the lowest free inode, so inject it LAST);

    and the block checksum is recomputed (metadata_csum).

    OBSERVED after mounting (Linux 6.18):
      existing: as XFS -- getdents64 d_ino == lstat st_ino == target's
        inode, st_nlink 1, read b"target\\n", no kernel message, fs
        "clean"; O_CREAT|O_EXCL -> EEXIST; unlink succeeds and leaves
        'target' naming an inode with st_nlink 0 (e2fsck -fn afterwards:
        "Entry 'target' ... has deleted/unused inode", "Unattached inode").
      free: getdents64 lists 'victim' with d_ino F, DT_REG; lstat, stat,
        readlink, open, listxattr, FIEMAP, unlink and O_CREAT|O_EXCL all
        fail with EUCLEAN (117) (unlike XFS's ENOENT); kernel
        "EXT4-fs error (device loopN): ext4_lookup:1789: inode #D: comm
        ...: deleted inode referenced: F" on each lookup; fs "clean with
        errors".

    Returns {'fault', 'fstype', 'path', 'inode' (what the dirent now
    names), 'orphan_inode', 'dir_inode', 'target', 'expect': {...}}.
    """
    _need(img, "ext4")
    rel, tgt, new, ino, dino = _dirent_ino_victim(img, "ext4_dirent_ino", target)
    sb = _ext4_sb(img)
    blk = _ext4_first_block(img, dino)
    off = blk * sb["block_size"]
    block = _pread(img.path, off, sb["block_size"])
    pos = 0
    found = None
    while pos < sb["block_size"] - 8:
        e_ino, rec, nl, ft = struct.unpack("<IHBB", block[pos:pos + 8])
        if rec < 8:
            break
        if e_ino == ino and block[pos + 8:pos + 8 + nl] == b"victim":
            found = pos
            break
        pos += rec
    if found is None:
        raise RuntimeError("dirent 'victim' not found in block %d" % blk)
    _patch(img.path, off + found, struct.pack("<I", new))
    if sb["metadata_csum"]:
        _ext4_dirblock_fix_csum(img, sb, dino, off)
    exp = ({"d_ino": new, "st_ino": new, "st_nlink": 1, "read": b"target\n"}
           if target == "existing" else {"d_ino": new, "lstat_errno": EUCLEAN})
    return {"fault": "ext4_dirent_ino", "fstype": "ext4", "path": rel,
            "inode": new, "orphan_inode": ino, "dir_inode": dino,
            "target": tgt if target == "existing" else None, "expect": exp}


#: name -> (function, fstype)
ALL_FAULTS = {
    "xfs_wrong_nlink": (xfs_wrong_nlink, "xfs"),
    "ext4_wrong_nlink": (ext4_wrong_nlink, "ext4"),
    "xfs_ftype_mismatch": (xfs_ftype_mismatch, "xfs"),
    "ext4_symlink_size": (ext4_symlink_size, "ext4"),
    "xfs_dotdot": (xfs_dotdot, "xfs"),
    "ext4_dotdot": (ext4_dotdot, "ext4"),
    "ext4_read_error": (ext4_read_error, "ext4"),
    "xfs_read_error": (xfs_read_error, "xfs"),
    "xfs_dirent_ino": (xfs_dirent_ino, "xfs"),
    "ext4_dirent_ino": (ext4_dirent_ino, "ext4"),
}


def flip_file_byte(img, rel, offset):
    """XOR one byte of the mounted img's file *rel* at file *offset* with
    0x5A on the unmounted image, then mount it again (the data bit rot the
    ledger and -x find; twice restores the byte, as a backup would)."""
    path = os.path.join(img.mnt, rel)
    for x in fiemap(path):
        if x["logical"] <= offset < x["logical"] + x["length"]:
            phys = x["physical"] + offset - x["logical"]
            break
    else:
        raise AssertionError("offset %d of %s is not mapped" % (offset, rel))
    img.offline()
    with open(img.path, "r+b") as f:
        f.seek(phys)
        old = f.read(1)
        f.seek(phys)
        f.write(bytes([old[0] ^ 0x5A]))
    img.mount()
