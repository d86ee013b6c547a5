"""A clean filesystem holding the realistic fixture tree (fsimage.make_tree:
nested, sparse and fragmented files, 1000 hard links, long and short
symlinks, FIFOs, device nodes, a socket, xattrs on files and a symlink,
names with spaces, newlines and UTF-8, a path longer than 4096 bytes)
exits 0 with zero errors on every filesystem the generic backend serves.

The only warnings allowed are the ones the tree asks for: its names that
contain a newline (name.control) or are not UTF-8 (name.encoding) -- and
every one of those must be reported, escaped."""

import os
import re
import subprocess

import pytest

from conftest import escaped, need_fs, run_fscrub
import fsimage

BLOCK_FS = ("xfs", "ext4", "btrfs")


@pytest.fixture(params=BLOCK_FS + ("tmpfs", "squashfs", "erofs", "overlay"))
def clean_fs(request, workdir):
    """(fstype, mount point, tree description, path prefix of the tree)."""
    fstype = request.param
    need_fs(fstype)
    if fstype in BLOCK_FS:
        img = fsimage.Image(workdir, fstype, size_mb=300)
        request.addfinalizer(lambda: img.cleanup(remove=True))
        img.mkfs()
        mnt = img.mount()
        tree = fsimage.make_tree(mnt)
        if fstype in ("xfs", "btrfs"):
            # reflinked copies share blocks: never a finding
            subprocess.run(["cp", "--reflink=always", os.path.join(mnt, tree["fragmented"]),
                            os.path.join(mnt, "reflinked-copy")], check=True)
        if fstype == "btrfs":
            fsimage.make_btrfs_subvolumes(mnt)
        img.remount()           # cold caches: read what is on the disk
        return fstype, img.mnt, tree, ""
    if fstype == "tmpfs":
        fs = fsimage.make_tmpfs(workdir)
        request.addfinalizer(fs.cleanup)
        return fstype, fs.mnt, fs.tree, ""
    if fstype in ("squashfs", "erofs"):
        fs = fsimage.make_readonly_tree(workdir, fstype)
        request.addfinalizer(fs.cleanup)
        return fstype, fs.mnt, fs.tree, ""
    fs = fsimage.make_overlay(workdir)
    request.addfinalizer(fs.cleanup)
    return fstype, fs.mnt, fs.tree, "tree/"


def expected_name_warnings(mnt, tree, prefix):
    want = set()
    for rel in tree["newline_names"]:
        if "\n" in os.path.basename(rel):      # not the files inside such a dir
            want.add(("name.control", escaped(os.path.join(mnt, prefix + rel))))
    for rel in tree["nonutf8_names"]:
        want.add(("name.encoding",
                  escaped(os.path.join(mnt.encode(), prefix.encode() + rel))))
    return want


def assert_clean(r, mnt, tree, prefix):
    assert r.rc == 0, r
    assert r.errors == [], r
    assert r.summary is not None and r.summary[0] == mnt and r.summary[1] == 0, r
    assert "fscrub:" not in r.stderr, r      # no operational error
    got = {(w.check, w.path) for w in r.warnings}
    want = expected_name_warnings(mnt, tree, prefix)
    # every awkward name of the tree is reported (btrfs snapshots repeat some) ...
    assert want <= got, r
    # ... and nothing else is ever a warning
    for w in r.warnings:
        assert w.check in ("name.control", "name.encoding"), r


def test_clean_metadata_scan(clean_fs):
    fstype, mnt, tree, prefix = clean_fs
    r = run_fscrub("-v", mnt)
    assert_clean(r, mnt, tree, prefix)
    # The native backends are chosen by filesystem type, generic otherwise.
    native = {"xfs": "xfs", "btrfs": "btrfs", "ext4": "ext4"}
    assert "with %s backend" % native.get(fstype, "generic") in r.stdout
    # the walk really went everywhere, past PATH_MAX where the tree has the chain
    dirs = int(r.stdout.split("Phase 3: ")[2].split(" directories")[0])
    assert dirs >= 20 + (21 if tree.get("deep_dir") else 0), r
    if tree.get("deep_dir"):
        assert tree["deep_path_len"] > 4096


def test_clean_data_scan(clean_fs):
    fstype, mnt, tree, prefix = clean_fs
    r = run_fscrub("-x", "-v", mnt)
    assert_clean(r, mnt, tree, prefix)
    assert "Phase 5: Verify file data." in r.stdout
    read = r.data_bytes_read
    frag = os.path.getsize(os.path.join(mnt, prefix + tree["fragmented"]))
    if fstype == "btrfs":
        # the kernel's scrub of phase 2 verified the data; phase 5 reads
        # only files without data checksums or changed since the scrub
        # could see them (the tree's are recent)
        scrubbed = int(re.search(r"^Phase 2: devid .*: (\d+) data bytes", r.stdout,
                                 re.M).group(1))
        assert frag <= scrubbed and read < 64 << 20, r
        assert "left to read: " in r.stdout, r
        return
    # the tree's data really was read, and its 1000-link file only once
    assert frag <= read < 64 << 20, r


def test_clean_single_thread_low_fd_limit(clean_fs):
    """RLIMIT_NOFILE 32 with a 5000-byte-deep chain still completes clean."""
    fstype, mnt, tree, prefix = clean_fs
    r = run_fscrub("-j", "2", mnt, preexec_fn=lambda: __import__("resource").setrlimit(
        __import__("resource").RLIMIT_NOFILE, (32, 32)))
    assert_clean(r, mnt, tree, prefix)
