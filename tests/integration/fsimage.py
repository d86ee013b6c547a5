"""Filesystem image fixtures for the fscrub integration tests.

Everything here shells out to the ordinary tools (mkfs.*, losetup, mount,
mksquashfs, mkfs.erofs) and must run as root.  Nothing imports pytest.

Main pieces:

* ``run(cmd, check=True)``    -- logged subprocess wrapper.
* ``Image``                   -- image file + loop device + mount point
                                 (xfs, ext4, btrfs).
* ``make_squashfs``, ``make_erofs``, ``make_tmpfs``, ``make_overlay``
                              -- read-only / virtual filesystems; each returns
                                 an object with ``.mnt`` and ``.cleanup()``.
* ``make_tree(root)``         -- builds a deterministic tree full of awkward
                                 objects and returns a dict describing them.
* ``inode_of``, ``getdents``  -- small inspection helpers (``getdents`` uses
                                 the raw getdents64 syscall so that '.' and
                                 '..' and their d_ino are visible).

Every object that owns kernel state (mounts, loop devices) has an idempotent
``cleanup()`` and is a context manager, so tests can use ``with`` or
``try/finally``.

Facts measured with these helpers on Linux 6.18 (Debian 12 userspace)
that a scrubber's tests must allow for:

* directory st_nlink: xfs, ext4, tmpfs, squashfs, erofs: 2 + subdirs;
  btrfs: always 1; overlay: 1 for a *merged* directory, the real layer's
  value (2 + subdirs) for a lower-only / upper-only directory.
* '..' in getdents64: on every one of these filesystems, for a directory
  below the mount root, '..' d_ino == lstat(dir/..).st_ino (except overlay,
  below).  At a mount root '..' is the root itself on xfs (128), ext4 (2),
  btrfs (256), tmpfs (1) and erofs, so it never matches stat(mnt/..)
  (which crosses the mount); squashfs reports inode_count + 1 for the
  root's '..', an inode that does not exist.
* ext4 (dir_index) returns entries in hash order even for one-block
  directories: '.' and '..' are not necessarily first.
* overlay, lower and upper on DIFFERENT filesystems, default xino=off:
  non-directories report the real layer's st_ino with a per-layer
  pseudo st_dev; directories report overlay-private inode numbers with
  the overlay st_dev.  getdents64 d_ino is the underlying layer's inode
  number, so d_ino != st_ino for every sub-directory entry (merged,
  lower-only and upper-only dirs alike), for '.' and '..', and for
  copied-up files in merged dirs (d_ino = upper inode, st_ino = lower
  origin).  Regular files that were never copied up do match.
  With xino=on (or both layers on one filesystem) d_ino == st_ino for
  every entry including '.' and '..'; xino=on puts the layer index in
  the top bit (lower inodes appear as 2**63 + ino) and st_dev is the
  overlay's for everything.
* btrfs subvolumes: root st_ino is always 256 with a new st_dev; the
  parent's dirent for a subvolume has d_ino = subvolume id (256, 257,
  ...), which differs from st_ino and may equal another sibling's d_ino.
* symlink target limits: XFS 1024 bytes (ENAMETOOLONG beyond), others
  4095.  XFS device numbers: minor < 2**18.
* mksquashfs 4.5.1 silently drops paths longer than PATH_MAX; mkfs.erofs
  1.5 fails on them (ENOMEM): the read-only images are built without
  the > 4096-byte chain.
* filefrag exits 0 and prints "0 extents found" when FIEMAP fails (it
  falls back to FIBMAP); use :func:`fiemap` to see the errno.
"""

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import shlex
import shutil
import socket
import stat
import struct
import subprocess
import tempfile
import time

log = logging.getLogger("fscrub.fsimage")

__all__ = [
    "run", "Image", "MountedFS", "OverlayFS", "make_tree", "make_squashfs",
    "make_erofs", "make_tmpfs", "make_overlay", "make_readonly_tree",
    "make_squashfs_tree", "make_erofs_tree", "stage_tree",
    "make_btrfs_subvolumes", "inode_of", "getdents", "fiemap",
    "fiemap_extents", "lgetxattr_all", "walk_nofollow", "DT_NAMES",
    "FSTYPES", "ALL_FSTYPES", "SYMLINK_MAX",
]

#: Block-device filesystems handled by :class:`Image`.
FSTYPES = ("xfs", "ext4", "btrfs")
#: Older ext formats :class:`Image` also makes, mounted by their own name
#: (indirect-block maps; not in FSTYPES, which tests parametrise over).
OLD_EXT = ("ext2", "ext3")
#: Everything the helpers in this module can produce.
ALL_FSTYPES = FSTYPES + ("tmpfs", "squashfs", "erofs", "overlay")

#: Longest symlink target each filesystem accepts (bytes, measured on
#: Linux 6.18): XFS caps symlinks at XFS_SYMLINK_MAXLEN = 1024; the others
#: take anything up to PATH_MAX - 1.
SYMLINK_MAX = {"xfs": 1024}


# ----------------------------------------------------------------------------
# subprocess helper
# ----------------------------------------------------------------------------

def run(cmd, check=True, input=None, capture=True, env=None, timeout=300):
    """Run *cmd* (list or string; strings go through the shell), log it and
    return the ``CompletedProcess`` (stdout/stderr as text).

    With ``check=True`` a non-zero exit raises ``RuntimeError`` whose message
    contains the command, exit code, stdout and stderr.
    """
    shell = isinstance(cmd, str)
    shown = cmd if shell else " ".join(shlex.quote(str(c)) for c in cmd)
    log.info("run: %s", shown)
    if not shell:
        cmd = [str(c) for c in cmd]
    if isinstance(input, str):
        input = input.encode()
    p = subprocess.run(cmd, shell=shell, input=input, env=env,
                       stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.PIPE if capture else None,
                       timeout=timeout)
    out = p.stdout.decode("utf-8", "replace") if p.stdout is not None else ""
    err = p.stderr.decode("utf-8", "replace") if p.stderr is not None else ""
    cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    if out.strip():
        log.debug("stdout: %s", out.rstrip())
    if err.strip():
        log.debug("stderr: %s", err.rstrip())
    if check and p.returncode != 0:
        raise RuntimeError("command failed (exit %d): %s\nstdout:\n%s\nstderr:\n%s"
                           % (p.returncode, shown, out, err))
    return cp


def mount(fstype, dev, mnt, opts=()):
    """mount -t FSTYPE [-o OPTS] DEV MNT.  A failure names the kernel's
    reason: mount(8) says only "wrong fs type, bad option, bad superblock",
    the kernel log says which (the run's last lines about DEV go into the
    error)."""
    cmd = ["mount", "-t", fstype] + (["-o", ",".join(opts)] if opts else []) + [dev, mnt]
    try:
        run(cmd)
    except RuntimeError as e:
        name = os.path.basename(dev)
        log_lines = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
        said = [l for l in log_lines.splitlines() if "(%s)" % name in l or name + ":" in l]
        raise RuntimeError("%s\nthe kernel's last lines about %s:\n%s"
                           % (e, name, "\n".join(said[-8:]) or "(none)")) from None


def _is_mountpoint(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            # mountinfo octal-escapes space, tab, newline and backslash
            mp = (mp.replace("\\040", " ").replace("\\011", "\t")
                    .replace("\\012", "\n").replace("\\134", "\\"))
            if mp == path:
                return True
    return False


def _umount(mnt, tries=10):
    """Unmount *mnt*, retrying briefly on EBUSY; lazy-unmount as last resort."""
    for i in range(tries):
        p = run(["umount", mnt], check=False)
        if p.returncode == 0 or not _is_mountpoint(mnt):
            return
        time.sleep(0.2 * (i + 1))
    run(["umount", "-l", mnt])


def _losetup_detach(dev, tries=10):
    for i in range(tries):
        p = run(["losetup", "-d", dev], check=False)
        if p.returncode == 0:
            return
        time.sleep(0.2 * (i + 1))
    run(["losetup", "-d", dev])


def _loop_attach(path, direct_io=False, read_only=False, extra=()):
    """``losetup -f --show [EXTRA] PATH`` on a free loop device: its name."""
    cmd = ["losetup", "-f", "--show"] + list(extra)
    if direct_io:
        cmd.append("--direct-io=on")
    if read_only:
        cmd.append("-r")
    cmd.append(path)
    return run(cmd).stdout.strip()


class Mounts:
    """The one helper for the loop devices and mounts a test makes beyond
    its Image objects: each is undone by a step appended to *undo*, a list
    of callables run last first at the end (conftest.py's ``cleanups``,
    through its ``mounts`` fixture): a mount is unmounted (retried, then
    lazily: _umount), a loop device detached (retried: _losetup_detach)."""

    def __init__(self, undo):
        self.undo = undo
        self.pending = {}       # ("loop", dev) or ("mount", mnt): its step in undo

    def _later(self, key, fn):
        self.pending[key] = fn
        self.undo.append(fn)

    def _now(self, key):
        fn = self.pending.pop(key)
        self.undo.remove(fn)
        fn()

    def loop(self, path, *extra):
        """``losetup -f --show [EXTRA] PATH``: the loop device."""
        dev = _loop_attach(path, extra=extra)
        self._later(("loop", dev), lambda: _losetup_detach(dev))
        return dev

    def mount(self, src, mnt, *opts):
        """``mount [OPTS] SRC MNT``, MNT made if need be: MNT."""
        os.makedirs(mnt, exist_ok=True)
        run(["mount"] + list(opts) + [src, mnt])
        self._later(("mount", mnt), lambda: _umount(mnt))
        return mnt

    def umount(self, mnt):
        """Unmount MNT (of mount()) now, not at the end."""
        self._now(("mount", mnt))

    def detach(self, dev):
        """Detach DEV (of loop()) now, not at the end: a loop device's name
        is reused at once, and must not be detached twice."""
        self._now(("loop", dev))


# ----------------------------------------------------------------------------
# Image: xfs / ext4 / btrfs on a loop device
# ----------------------------------------------------------------------------

_DEFAULT_MKFS = {
    # v5 (crc) XFS with reflink and the reverse-mapping btree, as xfs_scrub
    # and fscrub need for the richest cross-checks.
    "xfs": ["mkfs.xfs", "-f", "-q", "-m", "crc=1,reflink=1,rmapbt=1"],
    # -b 4096: mke2fs.conf would pick 1 KiB blocks for these small images
    "ext4": ["mkfs.ext4", "-F", "-q", "-b", "4096"],
    "btrfs": ["mkfs.btrfs", "-f", "-q"],
    # 1 KiB blocks, as mke2fs.conf picks for small images: an indirect block
    # holds 256 pointers, so a file of a few hundred KiB crosses both the
    # single- and the double-indirect boundary.
    "ext2": ["mkfs.ext2", "-F", "-q", "-b", "1024"],
    "ext3": ["mkfs.ext3", "-F", "-q", "-b", "1024"],
}

# mkfs.xfs >= 5.19 refuses new filesystems smaller than 300 MiB unless one
# of these fstests variables is set; the test images are deliberately small.
_XFS_SMALL_ENV = {"TEST_DIR": "/tmp", "TEST_DEV": "fscrub", "QA_CHECK_FS": "1"}


class Image:
    """A filesystem image file, optionally attached to a loop device and
    mounted.

    ``Image(workdir, fstype, size_mb=256, mkfs_args=())`` -- the file is
    ``workdir/<name>.img`` and the mount point ``workdir/<name>.mnt`` (name
    defaults to the fstype).  ``mkfs_args`` are appended to the default
    mkfs command line (for XFS the default already has ``-m crc=1,
    reflink=1,rmapbt=1``; later options override earlier ones).

    ext4 is always mounted with ``errors=continue`` so that injected
    corruption neither remounts it read-only nor panics.
    """

    def __init__(self, workdir, fstype, size_mb=256, mkfs_args=(),
                 name=None, path=None):
        if fstype not in FSTYPES + OLD_EXT:
            raise ValueError("unsupported fstype %r (want one of %s)"
                             % (fstype, ", ".join(FSTYPES + OLD_EXT)))
        self.workdir = os.path.abspath(workdir)
        self.fstype = fstype
        self.size_mb = size_mb
        self.mkfs_args = tuple(mkfs_args)
        if path is None:
            path = os.path.join(self.workdir, (name or fstype) + ".img")
        self.path = os.path.abspath(path)
        base = os.path.splitext(self.path)[0]
        self.mnt = base + ".mnt"
        self.dev = None
        self.mounted = False
        self.mount_options = ""
        os.makedirs(self.workdir, exist_ok=True)

    def __repr__(self):
        return "Image(%s, %s, dev=%s, mounted=%s)" % (
            self.fstype, self.path, self.dev, self.mounted)

    # -- context manager --
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    # -- lifecycle --
    def mkfs(self):
        """Create (or overwrite) the image file and make the filesystem."""
        if self.mounted or self.dev:
            raise RuntimeError("mkfs on an attached image %r" % self)
        with open(self.path, "wb") as f:
            f.truncate(self.size_mb * 1024 * 1024)
        cmd = list(_DEFAULT_MKFS[self.fstype]) + list(self.mkfs_args) + [self.path]
        env = None
        if self.fstype == "xfs":
            env = dict(os.environ)
            env.update(_XFS_SMALL_ENV)
        run(cmd, env=env)
        return self

    def attach(self, direct_io=False, read_only=False):
        """Attach the image to a free loop device (``losetup -f --show``)."""
        if self.dev is None:
            self.dev = _loop_attach(self.path, direct_io=direct_io,
                                    read_only=read_only)
        return self.dev

    def mount(self, options=""):
        """Mount the image (attaching it first if needed) on ``self.mnt``."""
        if self.mounted:
            return self.mnt
        self.attach()
        os.makedirs(self.mnt, exist_ok=True)
        opts = [o for o in options.split(",") if o]
        if self.fstype == "ext4" and not any(o.startswith("errors=") for o in opts):
            opts.append("errors=continue")
        mount(self.fstype, self.dev, self.mnt, opts)
        self.mounted = True
        self.mount_options = ",".join(opts)
        return self.mnt

    def umount(self):
        if self.mounted:
            _umount(self.mnt)
            self.mounted = False

    def detach(self):
        if self.dev is not None:
            _losetup_detach(self.dev)
            self.dev = None

    def offline(self):
        """Unmount and detach: leaves only the image file, so offline tools
        (xfs_db, debugfs, dd) can edit it and a later mount reads it
        fresh rather than through a stale loop-device page cache."""
        self.umount()
        self.detach()

    def remount(self, options=""):
        """Full offline/online cycle (drops every kernel cache)."""
        self.offline()
        return self.mount(options)

    # How a detection test mounts an image it broke offline: as it comes
    # (fresh), mounted past the log's write-back period then remounted
    # (settled), or read-only (ro: nothing in flux).
    MOUNT_KINDS = ("fresh", "settled", "ro")
    SETTLE_S = 2.5      # past the XFS log worker's period under fast_xfs_log_worker (1 s)

    def mount_as(self, how):
        """Mount as MOUNT_KINDS names; returns the mount point."""
        if how == "ro":
            return self.mount("ro")
        mnt = self.mount()
        if how == "settled":
            time.sleep(self.SETTLE_S)
            mnt = self.remount()
        return mnt

    def cleanup(self, remove=False):
        """Idempotent: unmount if mounted, detach if attached, and optionally
        delete the image file and the (empty) mount point."""
        try:
            self.umount()
        finally:
            self.detach()
        if remove:
            if os.path.exists(self.path):
                os.unlink(self.path)
            if os.path.isdir(self.mnt):
                try:
                    os.rmdir(self.mnt)
                except OSError:
                    pass

    def copy(self, newpath):
        """Return a new (unattached) Image on a sparse copy of the file.  A
        mounted source is synced first; prefer copying unmounted images."""
        if self.mounted:
            os.sync()
        run(["cp", "--sparse=always", self.path, newpath])
        img = Image(os.path.dirname(os.path.abspath(newpath)), self.fstype,
                    self.size_mb, self.mkfs_args, path=newpath)
        return img


# ----------------------------------------------------------------------------
# read-only and virtual filesystems
# ----------------------------------------------------------------------------

class MountedFS:
    """A mounted squashfs / erofs / tmpfs.  ``.mnt``, ``.fstype``,
    ``.image`` (image file or None), ``.dev`` (loop device or None),
    ``.tree`` (make_tree() result if the helper populated it)."""

    def __init__(self, fstype, mnt, image=None, dev=None, tree=None):
        self.fstype = fstype
        self.mnt = mnt
        self.image = image
        self.dev = dev
        self.tree = tree
        self.mounted = True

    def __repr__(self):
        return "MountedFS(%s, %s)" % (self.fstype, self.mnt)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    def umount(self):
        if self.mounted:
            _umount(self.mnt)
            self.mounted = False

    def cleanup(self, remove=False):
        try:
            self.umount()
        finally:
            if self.dev is not None:
                _losetup_detach(self.dev)
                self.dev = None
        if remove and self.image and os.path.exists(self.image):
            os.unlink(self.image)


def _mount_ro_image(fstype, image, mnt, tree=None):
    os.makedirs(mnt, exist_ok=True)
    dev = _loop_attach(image, read_only=True)
    try:
        mount(fstype, dev, mnt, ["ro"])
    except Exception:
        _losetup_detach(dev)
        raise
    return MountedFS(fstype, mnt, image=image, dev=dev, tree=tree)


@contextlib.contextmanager
def scratch_image(prefix, fstype, **image_kw):
    """An Image in a scratch directory of its own, both removed afterwards
    (a module's base image, built once and copied by its tests)."""
    d = tempfile.mkdtemp(prefix=prefix)
    img = Image(d, fstype, **image_kw)
    try:
        yield img
    finally:
        img.cleanup(remove=True)
        shutil.rmtree(d, ignore_errors=True)


def stage_tree(workdir, name="stage", size_mb=96, **tree_kw):
    """Build make_tree() in a fresh tmpfs at ``workdir/<name>``; returns the
    MountedFS (its ``.tree`` holds the description).  Use it as the source
    for make_squashfs / make_erofs, then clean it up."""
    t = make_tmpfs(workdir, name=name, size_mb=size_mb, populate=False)
    try:
        t.tree = make_tree(t.mnt, **tree_kw)
    except Exception:
        t.cleanup()
        raise
    return t


def make_squashfs(workdir, src, name="squashfs", tree=None, extra_args=()):
    """mksquashfs *src* (xattrs, hard links, device nodes, sockets and
    FIFOs are kept) into ``workdir/<name>.img`` and mount it read-only.

    mksquashfs 4.5.1 walks the source by full path: below PATH_MAX it
    prints "Cannot stat dir/file ..., ignoring" and silently (exit 0)
    drops everything deeper, so the 20 x 250-byte chain of make_tree()
    arrives truncated.  :func:`make_squashfs_tree` therefore builds with
    ``deep=False``."""
    image = os.path.join(workdir, name + ".img")
    if os.path.exists(image):
        os.unlink(image)
    run(["mksquashfs", src, image, "-noappend", "-quiet", "-no-progress",
         "-xattrs"] + list(extra_args))
    return _mount_ro_image("squashfs", image, os.path.join(workdir, name + ".mnt"),
                           tree=tree)


def make_erofs(workdir, src, name="erofs", tree=None, extra_args=()):
    """mkfs.erofs *src* (uncompressed unless *extra_args* say, e.g.
    ``["-zlz4hc"]``; xattrs kept) into ``workdir/<name>.img`` and mount it
    read-only.

    Compressed erofs (Linux 6.18) reports each compressed extent through
    FIEMAP with its uncompressed length and no FIEMAP flag (not ENCODED);
    statx sets STATX_ATTR_COMPRESSED on such files.

    erofs-utils 1.5 cannot handle a source containing a path longer than
    PATH_MAX: it fails with "failed to build shared xattrs: [Error 12]
    Cannot allocate memory" (exit 1).  Build the source with
    ``make_tree(..., deep=False)`` (what :func:`make_erofs_tree` does)."""
    image = os.path.join(workdir, name + ".img")
    if os.path.exists(image):
        os.unlink(image)
    run(["mkfs.erofs", "--quiet"] + list(extra_args) + [image, src])
    return _mount_ro_image("erofs", image, os.path.join(workdir, name + ".mnt"),
                           tree=tree)


def make_readonly_tree(workdir, fstype, name=None, **tree_kw):
    """Convenience: stage make_tree() on a tmpfs, build a squashfs or erofs
    image from it, mount it, drop the staging tmpfs; the returned
    MountedFS has ``.tree``."""
    # neither mksquashfs nor mkfs.erofs can walk paths > PATH_MAX
    tree_kw.setdefault("deep", False)
    stage = stage_tree(workdir, name=(name or fstype) + "-stage", **tree_kw)
    try:
        if fstype == "squashfs":
            return make_squashfs(workdir, stage.mnt, name=name or fstype,
                                 tree=stage.tree)
        if fstype == "erofs":
            return make_erofs(workdir, stage.mnt, name=name or fstype,
                              tree=stage.tree)
        raise ValueError(fstype)
    finally:
        stage.cleanup()
        try:
            os.rmdir(stage.mnt)
        except OSError:
            pass


def make_erofs_tree(workdir, name="erofs", **tree_kw):
    return make_readonly_tree(workdir, "erofs", name=name, **tree_kw)


def make_squashfs_tree(workdir, name="squashfs", **tree_kw):
    return make_readonly_tree(workdir, "squashfs", name=name, **tree_kw)


def make_tmpfs(workdir, name="tmpfs", size_mb=96, populate=True, options=""):
    """Mount a tmpfs on ``workdir/<name>``; with ``populate=True`` run
    make_tree() on it (result in ``.tree``).  tmpfs keeps user.* xattrs
    (kernel >= 6.6) and trusted.* xattrs."""
    mnt = os.path.join(workdir, name)
    os.makedirs(mnt, exist_ok=True)
    opts = "size=%dm" % size_mb + ("," + options if options else "")
    run(["mount", "-t", "tmpfs", "-o", opts, "fscrub-" + name, mnt])
    fs = MountedFS("tmpfs", mnt)
    if populate:
        try:
            fs.tree = make_tree(mnt)
        except Exception:
            fs.cleanup()
            raise
    return fs


class OverlayFS:
    """An overlay mount.  Attributes: ``.mnt`` (merged), ``.lower``,
    ``.upper``, ``.work``, ``.tree`` (make_tree() of the lower layer),
    ``.layout`` (dict of notable merged-view paths, see make_overlay)."""

    fstype = "overlay"

    def __init__(self, mnt, lower, upper, work, owned, tree, layout):
        self.mnt = mnt
        self.lower = lower
        self.upper = upper
        self.work = work
        self._owned = owned      # objects with .cleanup(), cleaned in reverse
        self.tree = tree
        self.layout = layout
        self.mounted = True

    def __repr__(self):
        return "OverlayFS(%s lower=%s upper=%s)" % (self.mnt, self.lower, self.upper)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    def umount(self):
        if self.mounted:
            _umount(self.mnt)
            self.mounted = False

    def cleanup(self, remove=False):
        """Unmount the overlay, then the layer filesystems it created
        (with remove=True also delete their image files)."""
        try:
            self.umount()
        finally:
            while self._owned:
                self._owned.pop().cleanup(remove=remove)


def make_overlay(workdir, name="overlay", lower_fstype="ext4", upper_fstype="tmpfs",
                 options="", tree=True):
    """Build an overlay whose lower layer lives on one filesystem and
    upper+work on another (by default lower on an ext4 loop image, upper
    and work on a tmpfs) so that st_dev/st_ino translation is exercised.

    The lower layer gets make_tree() under ``lower/tree`` (if *tree*) plus
    a small fixed layout; then, through the merged mount, files are created
    in merged and new directories, lower files are modified (copy-up),
    chmod'ed (metadata copy-up), deleted (whiteouts) and a lower directory
    is removed and recreated (opaque directory).

    ``lower_fstype`` may be "ext4", "xfs", "btrfs" or "tmpfs";
    ``upper_fstype`` "tmpfs" or one of the Image types.  Use the same
    string for both to put both layers on one filesystem.

    ``.layout`` keys (paths relative to the merged root):
      merged_dirs, lower_only_dirs, upper_only_dirs, opaque_dirs,
      lower_only_files, upper_only_files, copied_up, metacopy_candidates,
      whiteouts (names that are gone from the merged view).
    """
    owned = []
    base = os.path.join(workdir, name)
    os.makedirs(base, exist_ok=True)

    def layer_fs(fstype, tag):
        if fstype == "tmpfs":
            fs = make_tmpfs(base, name=tag, size_mb=96, populate=False)
            owned.append(fs)
            return fs.mnt
        img = Image(base, fstype, size_mb=300 if fstype == "xfs" else 160, name=tag)
        owned.append(img)
        img.mkfs()
        img.mount()
        return img.mnt

    try:
        lower_root = layer_fs(lower_fstype, "lowerfs")
        if upper_fstype == lower_fstype:
            upper_root = lower_root
        else:
            upper_root = layer_fs(upper_fstype, "upperfs")
        lower = os.path.join(lower_root, "lower")
        upper = os.path.join(upper_root, "upper")
        work = os.path.join(upper_root, "work")
        for d in (lower, upper, work):
            os.makedirs(d, exist_ok=True)

        # -- lower layer --
        tree_desc = make_tree(os.path.join(lower, "tree")) if tree else None
        for d in ("merged", "merged/sub", "loweronly", "loweronly/sub", "opaque"):
            os.makedirs(os.path.join(lower, d), exist_ok=True)
        for f, data in (("merged/lowerfile", b"lower\n"),
                        ("merged/modify", b"original lower content\n"),
                        ("merged/chmod", b"chmod me\n"),
                        ("merged/delete", b"to be whited out\n"),
                        ("merged/sub/deep", b"deep lower file\n"),
                        ("loweronly/file", b"only in lower\n"),
                        ("loweronly/sub/file", b"only in lower, nested\n"),
                        ("opaque/old", b"hidden by opaque dir\n")):
            _write(os.path.join(lower, f), data)
        os.link(os.path.join(lower, "merged/lowerfile"),
                os.path.join(lower, "merged/lowerfile.link"))

        mnt = os.path.join(base, "merged")
        os.makedirs(mnt, exist_ok=True)
        opts = "lowerdir=%s,upperdir=%s,workdir=%s" % (lower, upper, work)
        if options:
            opts += "," + options
        run(["mount", "-t", "overlay", "-o", opts, "fscrub-" + name, mnt])

        class _M:
            def __init__(self, m):
                self.m = m

            def cleanup(self, remove=False):
                if _is_mountpoint(self.m):
                    _umount(self.m)
        owned.append(_M(mnt))

        # -- changes through the merged view --
        m = lambda p: os.path.join(mnt, p)
        _write(m("merged/newfile"), b"created in merged dir\n")
        os.makedirs(m("merged/newdir/nested"))
        _write(m("merged/newdir/nested/f"), b"new nested\n")
        os.makedirs(m("upperonly/sub"))
        _write(m("upperonly/file"), b"only in upper\n")
        _write(m("upperonly/sub/file"), b"only in upper, nested\n")
        with open(m("merged/modify"), "ab") as f:     # data copy-up
            f.write(b"appended through overlay\n")
        os.chmod(m("merged/chmod"), 0o600)            # metadata copy-up
        os.unlink(m("merged/delete"))                 # whiteout
        os.unlink(m("opaque/old"))
        os.rmdir(m("opaque"))                         # whiteout dir
        os.mkdir(m("opaque"))                         # ... recreated: opaque
        _write(m("opaque/new"), b"in opaque dir\n")
        os.sync()

        layout = {
            # directories present in both layers (readdir merges them)
            "merged_dirs": ["", "merged"],
            # directories only in the lower layer (never touched)
            "lower_only_dirs": ["loweronly", "loweronly/sub", "merged/sub"]
                               + (["tree", "tree/" + tree_desc["dirs"]["nested"],
                                   "tree/many"] if tree else []),
            # directories created through the overlay (upper layer only)
            "upper_only_dirs": ["upperonly", "upperonly/sub", "merged/newdir",
                                "merged/newdir/nested"],
            # removed and recreated: upper dir with trusted.overlay.opaque=y
            "opaque_dirs": ["opaque"],
            "lower_only_files": ["merged/lowerfile", "merged/lowerfile.link",
                                 "merged/sub/deep", "loweronly/file",
                                 "loweronly/sub/file"],
            "upper_only_files": ["merged/newfile", "upperonly/file",
                                 "upperonly/sub/file", "opaque/new",
                                 "merged/newdir/nested/f"],
            # data copy-up (appended) and metadata copy-up (chmod)
            "copied_up": ["merged/modify", "merged/chmod"],
            # gone from the merged view; upper holds 0:0 char-dev whiteouts
            # (or the whole dir was replaced by an opaque one)
            "whiteouts": ["merged/delete", "opaque/old"],
        }
        return OverlayFS(mnt, lower, upper, work, owned, tree_desc, layout)
    except Exception:
        while owned:
            try:
                owned.pop().cleanup(remove=True)
            except Exception:
                log.exception("cleanup after failed make_overlay")
        raise


# ----------------------------------------------------------------------------
# the test tree
# ----------------------------------------------------------------------------

def _write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _pattern(tag, size):
    """Deterministic, non-compressible-ish data of *size* bytes."""
    seed = (tag * 64).encode()[:64]
    out = bytearray()
    i = 0
    while len(out) < size:
        out += seed + i.to_bytes(8, "little")
        i += 1
    return bytes(out[:size])


def _make_fragmented(path_a, path_b, pieces, piece=4096):
    """Interleave allocations of two files so that neither is contiguous.

    Each round preallocates one piece of A then one of B (fallocate), then
    writes the data and fsyncs.  Returns the list of extents of A as the
    kernel reports them (FIEMAP) -- caller decides if it is good enough.
    """
    fa = os.open(path_a, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fb = os.open(path_b, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(pieces):
            off = i * piece
            for fd, tag in ((fa, "A"), (fb, "B")):
                try:
                    os.posix_fallocate(fd, off, piece)
                except OSError as e:
                    if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                        raise
                os.pwrite(fd, _pattern("%s%d" % (tag, i), piece), off)
                os.fsync(fd)
    finally:
        os.close(fa)
        os.close(fb)


_FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 1
FIEMAP_EXTENT_LAST = 1


def fiemap(path, flags=FIEMAP_FLAG_SYNC, max_extents=4096):
    """FS_IOC_FIEMAP on *path*: list of dicts (logical, physical, length,
    flags), all in bytes.  Raises OSError with the ioctl's errno -- unlike
    filefrag, which silently falls back to FIBMAP (and then prints "0
    extents found") when FIEMAP fails."""
    import fcntl
    hdr = struct.Struct("=QQIIII")          # start, length, flags, mapped, count, reserved
    ext = struct.Struct("=QQQQQIIII")       # logical, physical, length, r64[2], flags, r32[3]
    buf = bytearray(hdr.size + ext.size * max_extents)
    hdr.pack_into(buf, 0, 0, 0xFFFFFFFFFFFFFFFF, flags, 0, max_extents, 0)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, _FS_IOC_FIEMAP, buf, True)
    finally:
        os.close(fd)
    mapped = hdr.unpack_from(buf, 0)[3]
    out = []
    for i in range(mapped):
        lg, ph, ln, _, _, fl, _, _, _ = ext.unpack_from(buf, hdr.size + i * ext.size)
        out.append({"logical": lg, "physical": ph, "length": ln, "flags": fl})
    return out


def fiemap_extents(path):
    """Number of extents FIEMAP reports for *path*, or None if FIEMAP is
    not supported there (tmpfs, squashfs: EOPNOTSUPP)."""
    try:
        return len(fiemap(path))
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL):
            return None
        raise


def make_tree(root, deep=True, many=200, links=1000, frag_pieces=40,
              long_symlink=None, mtime=1700000000):
    """Build a deterministic, awkward tree under *root* (created if needed)
    and return a dict describing it.  All paths in the dict are relative to
    *root* and are ``str`` except where noted (non-UTF-8 names are bytes).

    Works on xfs, ext4, btrfs, tmpfs and overlay; for squashfs/erofs build
    it in a staging dir (see :func:`stage_tree`).  Total data ~ 1.5 MiB
    (the sparse file's apparent size is 16 MiB).

    Keys:
      dirs:           {'nested': 'dirs/a/b/c/d', 'many': 'many', 'small':
                       'small', 'empty': 'empty_dir', 'links': [...]}
      many_entries:   number of entries in 'many'
      small_dir:      'small' -- directory with 3 entries (XFS short form)
      small_dir_entries: names in it
      sparse:         'data/sparse' (16 MiB apparent, 4 x 4 KiB data)
      sparse_data:    list of (offset, length) of the written pieces
      sparse_size:    apparent size
      fragmented:     'data/frag_a' (interleaved with 'data/frag_b')
      fragmented_other: 'data/frag_b'
      fragmented_extents: FIEMAP extent count of frag_a (None on tmpfs)
      regular:        'data/hello.txt' (content b'hello, fscrub\\n')
      regular_content
      empty_file:     'empty_file'
      empty_dir:      'empty_dir'
      hardlink_target: 'links/target'
      hardlinks:      list of every path of that inode (len == nlink)
      hardlink_count: 1000
      symlink_short:  'symlinks/short' -> 'hello-target' (<60 bytes)
      symlink_short_target
      symlink_long:   list of long symlink paths (targets ~300 and ~4000
                      bytes; on XFS the second one is 1000 bytes because
                      XFS_SYMLINK_MAXLEN is 1024)
      symlink_targets: {path: target}
      symlink_dangling: 'symlinks/dangling'
      fifos, chardevs, blockdevs, sockets: lists of paths
      devnums:        {path: (major, minor)}
      xattrs:         {path: {name: value(bytes)}} incl. directories and
                      a trusted.* xattr on a symlink
      space_names, newline_names, utf8_names: lists of paths
      nonutf8_names:  list of *bytes* paths (name b'bad-\\xff\\xfe')
      deep_dir:       path of the deepest directory (len > 4096) or None
      deep_file:      file inside deep_dir or None
      deep_path_len:  len(deep_dir.encode())
      mtime:          atime/mtime given to every object (None: left alone)
      notes:          list of strings about what had to be adapted

    Content, names, sizes, modes, xattrs and (with *mtime*) timestamps are
    deterministic; inode numbers and ctimes are not.
    """
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    d = {"notes": []}
    j = lambda *p: os.path.join(root, *p)

    # -- directories --
    nested = "dirs/a/b/c/d"
    os.makedirs(j(nested))
    for i, lvl in enumerate(["dirs", "dirs/a", "dirs/a/b", "dirs/a/b/c", nested]):
        _write(j(lvl, "file%d" % i), b"level %d\n" % i)
    os.makedirs(j("many"))
    for i in range(many):
        # long-ish names: ~200 entries span several directory blocks, so
        # XFS uses leaf/node form and ext4 an htree index.
        n = "entry-%04d-%s" % (i, "x" * 40)
        if i % 10 == 0:
            os.mkdir(j("many", n))
        else:
            _write(j("many", n), b"%d\n" % i)
    os.makedirs(j("small"))
    small_entries = ["one", "two", "sub"]
    _write(j("small", "one"), b"one\n")
    _write(j("small", "two"), b"two\n")
    os.mkdir(j("small", "sub"))
    os.makedirs(j("empty_dir"))
    _write(j("empty_file"), b"")

    d["dirs"] = {"nested": nested, "many": "many", "small": "small",
                 "empty": "empty_dir"}
    d["many_entries"] = many
    d["small_dir"] = "small"
    d["small_dir_entries"] = small_entries
    d["empty_file"] = "empty_file"
    d["empty_dir"] = "empty_dir"

    # -- data files --
    os.makedirs(j("data"))
    _write(j("data", "hello.txt"), b"hello, fscrub\n")
    d["regular"] = "data/hello.txt"
    d["regular_content"] = b"hello, fscrub\n"

    sparse_size = 16 * 1024 * 1024
    pieces = [(0, 4096), (1024 * 1024, 4096), (5 * 1024 * 1024 + 4096, 4096),
              (sparse_size - 4096, 4096)]
    fd = os.open(j("data", "sparse"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, sparse_size)
        for off, ln in pieces:
            os.pwrite(fd, _pattern("sparse%d" % off, ln), off)
    finally:
        os.close(fd)
    d["sparse"] = "data/sparse"
    d["sparse_data"] = pieces
    d["sparse_size"] = sparse_size

    _make_fragmented(j("data", "frag_a"), j("data", "frag_b"), frag_pieces)
    d["fragmented"] = "data/frag_a"
    d["fragmented_other"] = "data/frag_b"
    d["fragmented_extents"] = fiemap_extents(j("data", "frag_a"))

    # -- hard links --
    link_dirs = ["links/a", "links/b", "links/c"]
    for ld in link_dirs:
        os.makedirs(j(ld))
    _write(j("links", "target"), b"one inode, many names\n")
    hl = ["links/target"]
    for i in range(links - 1):
        p = "%s/l%04d" % (link_dirs[i % 3], i)
        os.link(j("links", "target"), j(p))
        hl.append(p)
    d["hardlink_target"] = "links/target"
    d["hardlinks"] = hl
    d["hardlink_count"] = links
    d["dirs"]["links"] = link_dirs

    # -- symlinks --
    os.makedirs(j("symlinks"))
    fstype = _fstype_of(root)
    short_t = "hello-target"
    os.symlink(short_t, j("symlinks", "short"))
    t300 = ("../" + "long-target-component/" * 14)[:300]
    if long_symlink is None:
        long_symlink = min(4000, SYMLINK_MAX.get(fstype, 4095) - 24)
    t4000 = ("very-long/" * 400)[:long_symlink]
    if long_symlink < 4000:
        d["notes"].append("%s: long symlink target shortened to %d bytes"
                          % (fstype, long_symlink))
    os.symlink(t300, j("symlinks", "long300"))
    try:
        os.symlink(t4000, j("symlinks", "long4000"))
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise
        t4000 = t4000[:1000]
        os.symlink(t4000, j("symlinks", "long4000"))
        d["notes"].append("%s: 4000-byte symlink -> ENAMETOOLONG, used 1000"
                          % fstype)
    os.symlink("does/not/exist", j("symlinks", "dangling"))
    os.symlink("../data/hello.txt", j("symlinks", "to_file"))
    os.symlink("../dirs", j("symlinks", "to_dir"))
    d["symlink_short"] = "symlinks/short"
    d["symlink_short_target"] = short_t
    d["symlink_long"] = ["symlinks/long300", "symlinks/long4000"]
    d["symlink_dangling"] = "symlinks/dangling"
    d["symlink_targets"] = {"symlinks/short": short_t, "symlinks/long300": t300,
                            "symlinks/long4000": t4000,
                            "symlinks/dangling": "does/not/exist",
                            "symlinks/to_file": "../data/hello.txt",
                            "symlinks/to_dir": "../dirs"}

    # -- special files --
    os.makedirs(j("special"))
    fifos = ["special/fifo", "special/fifo2"]
    for f in fifos:
        os.mkfifo(j(f), 0o644)
    devnums = {"special/chardev": (1, 3), "special/blockdev": (7, 200),
               "special/bigdev": (259, 70000)}  # minor > 16 bits (XFS max: 18)
    os.mknod(j("special/chardev"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
    os.mknod(j("special/blockdev"), stat.S_IFBLK | 0o600, os.makedev(7, 200))
    os.mknod(j("special/bigdev"), stat.S_IFCHR | 0o600, os.makedev(259, 70000))
    sockets = ["special/socket"]
    dfd = os.open(j("special"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # sun_path is limited to 108 bytes: go through the fd's magic link
            s.bind("/proc/self/fd/%d/socket" % dfd)
        finally:
            s.close()
    finally:
        os.close(dfd)
    d["fifos"] = fifos
    d["chardevs"] = ["special/chardev", "special/bigdev"]
    d["blockdevs"] = ["special/blockdev"]
    d["sockets"] = sockets
    d["devnums"] = devnums

    # -- xattrs --
    xattrs = {
        "data/hello.txt": {"user.comment": b"greeting",
                           "user.empty": b"",
                           "user.binary": bytes(range(256))},
        "dirs": {"user.dir": b"directory xattr"},
        "many": {"user.big": _pattern("bigxattr", 3000)},
        "empty_file": {"trusted.fscrub": b"trusted on a regular file"},
        "symlinks/short": {"trusted.link": b"xattr on a symlink"},
    }
    for p, attrs in xattrs.items():
        for k, v in attrs.items():
            os.setxattr(j(p), k, v, follow_symlinks=False)
    d["xattrs"] = xattrs

    # -- awkward names --
    os.makedirs(j("names"))
    space = ["names/name with spaces", "names/ leading space", "names/trailing space "]
    newline = ["names/new\nline", "names/trailing-newline\n", "names/dir\nwith newline"]
    utf8 = ["names/café", "names/日本語", "names/emoji-\U0001F600"]
    for p in space + utf8 + newline[:2]:
        _write(j(p), p.encode() + b"\n")
    os.mkdir(j(newline[2]))
    _write(j(newline[2], "inside"), b"inside a dir with a newline\n")
    newline.append(newline[2] + "/inside")
    nonutf8 = [b"names/bad-\xff\xfe"]
    for p in nonutf8:
        _write(os.path.join(root.encode(), p), b"latin1\n")
    d["space_names"] = space
    d["newline_names"] = newline
    d["utf8_names"] = utf8
    d["nonutf8_names"] = nonutf8

    # -- path longer than PATH_MAX --
    d["deep_dir"] = d["deep_file"] = None
    d["deep_path_len"] = 0
    if deep:
        comps = ["%02d" % i + "d" * 248 for i in range(20)]   # 250-byte names
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.mkdir("deep", dir_fd=fd)
            nfd = os.open("deep", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            for c in comps:
                os.mkdir(c, dir_fd=fd)
                nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            ffd = os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(ffd, b"at the bottom\n")
            os.close(ffd)
        finally:
            os.close(fd)
        d["deep_dir"] = "deep/" + "/".join(comps)
        d["deep_file"] = d["deep_dir"] + "/bottom"
        d["deep_path_len"] = len(d["deep_dir"].encode())

    d["mtime"] = mtime
    if mtime is not None:
        _set_times(root, mtime)
    os.sync()
    return d


def _set_times(root, t):
    """utime every object under *root* (symlinks themselves, not their
    targets), descending with dir fds so that deep paths work."""
    def rec(fd):
        for name in os.listdir(fd):
            st = os.lstat(name, dir_fd=fd)
            if stat.S_ISDIR(st.st_mode):
                cfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                              dir_fd=fd)
                try:
                    rec(cfd)
                finally:
                    os.close(cfd)
            os.utime(name, (t, t), dir_fd=fd, follow_symlinks=False)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        rec(fd)
    finally:
        os.close(fd)
    os.utime(root, (t, t))


def _fstype_of(path):
    """Filesystem type of the mount containing *path* (from mountinfo)."""
    st_dev = os.stat(path).st_dev
    best = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            major, minor = map(int, parts[2].split(":"))
            sep = parts.index("-")
            if os.makedev(major, minor) == st_dev:
                best = parts[sep + 1]
    return best or "unknown"


def make_btrfs_subvolumes(root):
    """On a mounted btrfs, create ``root/subvols/sv`` (a subvolume with a
    file and a directory) and ``root/subvols/snap`` (a snapshot of it) and
    return their relative paths and ids.

    Observed on 6.18: every subvolume root has st_ino 256 and its own
    st_dev; the parent's getdents d_ino for a subvolume entry is the
    *subvolume id* (256, 257, ...), so it differs from lstat st_ino (256)
    for all but the first subvolume and can equal the d_ino of an ordinary
    sibling directory.  Inside a subvolume, '..' of its root gives the
    parent directory's inode number in the *parent* subvolume."""
    base = os.path.join(root, "subvols")
    os.makedirs(base, exist_ok=True)
    sv = os.path.join(base, "sv")
    run(["btrfs", "subvolume", "create", sv])
    os.mkdir(os.path.join(sv, "dir"))
    _write(os.path.join(sv, "file"), b"in a subvolume\n")
    snap = os.path.join(base, "snap")
    run(["btrfs", "subvolume", "snapshot", sv, snap])
    ids = {}
    for p in (sv, snap):
        out = run(["btrfs", "subvolume", "show", p]).stdout
        for line in out.splitlines():
            if line.strip().startswith("Subvolume ID:"):
                ids[os.path.relpath(p, root)] = int(line.split(":")[1])
    return {"subvolumes": [os.path.relpath(sv, root)],
            "snapshots": [os.path.relpath(snap, root)], "ids": ids}


# ----------------------------------------------------------------------------
# inspection helpers
# ----------------------------------------------------------------------------

def inode_of(path):
    """st_ino of *path* without following a final symlink."""
    return os.lstat(path).st_ino


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_SYS_getdents64 = {"x86_64": 217, "aarch64": 61, "riscv64": 61,
                   "ppc64le": 202, "s390x": 322, "i686": 220}.get(os.uname().machine, 217)

DT_NAMES = {0: "UNKNOWN", 1: "FIFO", 2: "CHR", 4: "DIR", 6: "BLK", 8: "REG",
            10: "LNK", 12: "SOCK", 14: "WHT"}


def getdents(path, dir_fd=None):
    """Raw getdents64 on directory *path*: list of (name: bytes, d_ino: int,
    d_type: int) including '.' and '..', in the order the kernel returns
    them.  Raises OSError with the kernel's errno (e.g. EUCLEAN=117,
    EBADMSG=74, EIO=5) if the syscall fails part-way; the entries read so
    far are attached as ``err.partial``."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dir_fd)
    out = []
    try:
        buf = ctypes.create_string_buffer(65536)
        while True:
            n = _libc.syscall(_SYS_getdents64, fd, buf, len(buf))
            if n < 0:
                e = ctypes.get_errno()
                err = OSError(e, os.strerror(e), path)
                err.partial = out
                raise err
            if n == 0:
                break
            raw = buf.raw[:n]
            pos = 0
            while pos < n:
                d_ino = int.from_bytes(raw[pos:pos + 8], "little")
                reclen = int.from_bytes(raw[pos + 16:pos + 18], "little")
                d_type = raw[pos + 18]
                name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0]
                out.append((name, d_ino, d_type))
                pos += reclen
    finally:
        os.close(fd)
    return out


def lgetxattr_all(path):
    """{name: value} of every xattr of *path* (not following symlinks)."""
    return {k: os.getxattr(path, k, follow_symlinks=False)
            for k in os.listxattr(path, follow_symlinks=False)}


def walk_nofollow(root):
    """Yield (relpath, lstat) for every object under *root* (root itself
    is b''), depth first, names sorted.  Works below PATH_MAX-exceeding
    depths by descending with dir fds (at most one fd per level is open).
    Relative paths are ``bytes`` so that non-UTF-8 names round-trip."""
    root_b = os.fsencode(root)
    yield b"", os.lstat(root_b)

    def rec(fd, rel):
        for name in sorted(os.listdir(fd)):
            name_b = os.fsencode(name)
            st = os.lstat(name_b, dir_fd=fd)
            sub = rel + b"/" + name_b if rel else name_b
            yield sub, st
            if stat.S_ISDIR(st.st_mode):
                cfd = os.open(name_b, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                              dir_fd=fd)
                try:
                    yield from rec(cfd, sub)
                finally:
                    os.close(cfd)

    fd = os.open(root_b, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield from rec(fd, b"")
    finally:
        os.close(fd)
