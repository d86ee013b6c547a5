"""btrfs trees a rescue= mount leaves unloaded, read from the devices
(btrfs_devtree.c; issue 34, items 5 and 6).

With rescue=all the kernel leaves unloaded a tree its tree checker refused
a block of (ignorebadroots) and the csum tree (ignoredatacsums); fscrub
reads them from the devices instead and feeds their items to the same
checks.  btrfs-progs' images whose damage is in such a tree (conftest's
fsck_test_images(): from Debian's source package, or BTRFS_PROGS_TESTS)
must be found with the check id of `btrfs check`'s complaint; a clean one
must stay clean.  Faults made offline with btrfs_edit.py: in the csum tree
(which fresh, settled and `ro` mounts load and rescue=all does not: both
paths must find the same), in an extent tree leaf (which the kernel refuses, so only the
rescue mount reads it), and a csum tree block bad in every copy.
"""

import pytest

import btrfs_edit as be
from test_btrfs_kinds import public_image, scan
from test_btrfs_trees import btrfs_check, populated_image

DEVREAD = "read from the devices instead"


@pytest.mark.parametrize("rel,check,text", [
    ("044-invalid-extent-item-generation/bad_extent_item_gen_for_data.img.xz",
     "btrfs.extent_item", "extent item at logical 13631488 (4096 bytes): generation 16384, "
     "past the superblock's"),
    ("044-invalid-extent-item-generation/bad_extent_item_gen_for_tree_block.img.xz",
     "btrfs.extent_item", "extent item at logical 30420992 (4096 bytes): generation 8388614"),
    ("027-bad-extent-inline-ref-type/bad-extent-inline-ref-type.raw.xz",
     "btrfs.extent_item", "extent item at logical 29360128 (16384 bytes): its inline back "
     "reference at byte 24 is of unknown type"),
    ("050-invalid-block-group-used/default.img.xz", "btrfs.bg_used",
     "block group at logical 13631488 (8388608 bytes): used 2614707976514744663, its extent "
     "items add up to 0"),
    ("053-bad-metadata-level/default.img.xz", "btrfs.extent_item",
     "tree block at logical 30457856: its METADATA_ITEM gives level 256"),
    ("045-overlap-csum-item/overlap_csum_item.img.xz", "btrfs.csum",
     "checksum item at logical 84934656 (524288 bytes) begins before the one before it ends "
     "(at 84938752)"),
])
def test_public_image_unloaded_tree(image_factory, rel, check, text):
    """The damage `btrfs check` names, in a tree rescue=all left unloaded
    (the extent tree: 044 x2, 027, 050, 053; the csum tree: 045)."""
    img = public_image(image_factory, rel)
    rc, out = btrfs_check(img.path)
    assert rc != 0, out
    _, r = scan(img, "rescue")
    assert r.rc == 4 and "fscrub:" not in r.stderr, r
    assert [f for f in r.of("Error", check) if text in f.message], r
    assert [f for f in r.of("Info", "btrfs.tree") if DEVREAD in f.message], r


@pytest.mark.parametrize("how", ["fresh", "settled", "ro"])
def test_public_image_leaf_crossing_stripes(image_factory, how):
    """018 (made by an old btrfs-convert): a tree block across a 64 KiB
    stripe boundary ("bad metadata crossing stripe boundary"), and data
    extents in a metadata block group ("type mismatch with chunk"), found
    through the kernel's tree search on every kind of mount."""
    img = public_image(image_factory, "018-leaf-crossing-stripes/default_case.raw.xz")
    rc, out = btrfs_check(img.path)
    assert rc != 0 and "crossing stripe boundary" in out, out
    _, r = scan(img, how)
    assert r.rc == 4 and "fscrub:" not in r.stderr, r
    msgs = [f.message for f in r.of("Error", "btrfs.extent_item")]
    assert "tree block at logical 11456512 (16384 bytes) crosses a 64 KiB stripe boundary " \
        "(btrfs check: \"bad metadata crossing stripe boundary\"; the kernel never allocates " \
        "one so)" in msgs, r
    mismatched = [m for m in msgs if "type mismatch with chunk" in m]
    assert "extent item at logical 11124736 (4096 bytes): data in a block group that holds " \
        "metadata only (btrfs check: \"type mismatch with chunk\")" in mismatched, r
    # btrfs check lists 36; the one at its block group's very start sorts
    # before the group's item and is not judged (btrfs_check.c).
    assert len(mismatched) == out.count("type mismatch with chunk") - 1, (out, r)


def test_public_image_clean_rescue(image_factory):
    """046 (clean, an inode cache) on rescue=all: its unloaded trees read
    from the devices find nothing."""
    img = public_image(image_factory, "046-ino-cache-clean/ino-cache-enabled.raw.xz")
    _, r = scan(img, "rescue")
    assert r.rc == 0 and "fscrub:" not in r.stderr and not r.errors, r
    assert [f for f in r.of("Info", "btrfs.tree") if DEVREAD in f.message], r


def csum_items(ed):
    return [it for it in ed.items(be.CSUM_TREE) if it.key[1] == be.EXTENT_CSUM]


def findings(r, check):
    return sorted((f.path, f.inode, f.message) for f in r.of("Error", check))


@pytest.mark.parametrize("how", ["fresh", "settled", "ro"])
def test_csum_fault_both_paths(image_factory, how):
    """A csum item of "big" deleted: a fresh, settled or read-only mount
    reads the csum tree through the kernel's search, rescue=all from the
    devices; the same errors."""
    img = populated_image(image_factory)
    with be.BtrfsImage(img.path) as ed:
        items = csum_items(ed)
        assert len(items) >= 2, items
        ed.delete_item(items[0])
    rc, out = btrfs_check(img.path)
    assert rc != 0, out
    mnt, search = scan(img, how)
    assert search.rc == 4 and findings(search, "btrfs.csum"), search
    assert not [f for f in search.of("Info", "btrfs.tree") if DEVREAD in f.message], search
    _, rescue = scan(img, "rescue")
    assert rescue.rc == 4 and "fscrub:" not in rescue.stderr, rescue
    assert [f for f in rescue.of("Info", "btrfs.tree")
            if DEVREAD in f.message and "checksum tree" in f.message], rescue
    assert findings(rescue, "btrfs.csum") == findings(search, "btrfs.csum"), (search, rescue)


def extent_item_of(ed, bytenr):
    for it in ed.items(be.EXTENT_TREE, (bytenr, be.EXTENT_ITEM, 0),
                       (bytenr, be.EXTENT_ITEM, 2 ** 64 - 1)):
        return it
    raise KeyError(bytenr)


def test_extent_generation_fault(image_factory):
    """A data extent item's generation set past the superblock's (the
    leaf's checksum fixed): the kernel's tree checker refuses that leaf,
    so rescue=all leaves the extent tree unloaded and fscrub reads it from
    the devices.  Plain ro does not mount at all (the kernel reads that
    leaf at mount): the tree search never sees such an item, the csum
    fault above compares the two paths."""
    img = populated_image(image_factory)
    with be.BtrfsImage(img.path) as ed:
        big = [it for it in ed.items(be.FS_TREE) if it.key[1] == be.EXTENT_DATA
               and it.get("fe.disk_bytenr")][0]
        item = extent_item_of(ed, big.get("fe.disk_bytenr"))
        bad = ed.super("generation") + 1000
        ed.set_field(item, "extent.generation", bad)
        logical = item.key[0]
    rc, out = btrfs_check(img.path)
    assert "invalid generation for extent %d" % logical in out, out
    with pytest.raises(Exception, match="exit 32"):
        img.mount("ro")
    img.offline()
    _, r = scan(img, "rescue")
    assert r.rc == 4 and "fscrub:" not in r.stderr, r
    hits = [f for f in r.of("Error", "btrfs.extent_item")
            if "extent item at logical %d" % logical in f.message
            and "generation %d, past the superblock's" % bad in f.message]
    assert len(hits) == 1, r
    assert [f for f in r.of("Info", "btrfs.tree")
            if DEVREAD in f.message and "extent tree" in f.message], r


def test_bad_block_in_unloaded_tree(image_factory):
    """A csum tree leaf garbled in both DUP copies (its checksum left
    wrong): on rescue=all, read from the devices, the block is a btrfs.tree
    error naming it, read twice, and the rest of the tree is read."""
    img = populated_image(image_factory)
    with be.BtrfsImage(img.path) as ed:
        leaf = csum_items(ed)[0].leaf
        for off in ed.physical(leaf):
            ed._write(off + 200, b"\xa5" * 64)
        ed.f.flush()
    _, r = scan(img, "rescue")
    assert r.rc == 4 and "fscrub:" not in r.stderr, r
    hits = [f for f in r.of("Error", "btrfs.tree")
            if "tree block at logical %d (the checksum tree" % leaf in f.message
            and "bad checksum in every copy, read twice" in f.message]
    assert len(hits) == 1, r
    # the data whose checksums were in that leaf is not "without checksums"
    assert not r.of("Error", "btrfs.csum"), r
