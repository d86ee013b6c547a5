"""btrfs_edit: a small offline btrfs tree editor for fault-injection tests.

It works on an UNMOUNTED single-device image file.  It reads the primary
superblock, maps logical addresses to image offsets through the superblock's
sys_chunk_array and then the chunk tree (SINGLE and DUP chunks: every stripe
of a chunk is a copy on the one device), descends a tree (the root tree, the
chunk tree, or any tree named by its ROOT_ITEM: extent tree, fs trees of
subvolumes, block group tree, ...) to the leaf holding a key, and edits a
leaf in place: overwrite an item's bytes or delete an item (item headers and
data shifted, nritems and, for slot 0, the parents' keys fixed) or add one
after a tree's last item.  Every edit
recomputes the tree block's checksum and writes the block to every copy.
Superblock fields are edited in every superblock copy inside the image, each
with its checksum recomputed.  The v1 free space cache (space_cache=v1) of a
block group is read and rewritten as its cache inode's data, each page's
crc32c (kept in the first page) recomputed.

Only crc32c checksums (the mkfs default) are supported; anything else raises.
Nothing here is a repair tool: edits do not COW, so the generation of the
edited block does not change and its parents stay valid.

On-disk layout used (all little endian; see the kernel's btrfs_tree.h):
  header 101 bytes: csum[32] fsid[16] bytenr u64 flags u64 chunk_uuid[16]
                    generation u64 owner u64 nritems u32 level u8
  leaf item 25 bytes: key(objectid u64, type u8, offset u64) offset u32 size u32
                      (offset relative to the end of the header)
  node pointer 33 bytes: key blockptr u64 generation u64
"""

import struct

from faults import crc32c

SUPER_OFFSETS = (64 << 10, 64 << 20, 256 << 30)
SUPER_SIZE = 4096
SUPER_MAGIC = b"_BHRfS_M"
HEADER_SIZE = 101
ITEM_SIZE = 25
KEY_PTR_SIZE = 33

ROOT_TREE = 1
EXTENT_TREE = 2
CHUNK_TREE = 3
DEV_TREE = 4
FS_TREE = 5
CSUM_TREE = 7
QUOTA_TREE = 8
FREE_SPACE_TREE = 10
BLOCK_GROUP_TREE = 11
EXTENT_CSUM_OBJECTID = 2 ** 64 - 10

INODE_ITEM = 1
INODE_REF = 12
DIR_ITEM = 84
DIR_INDEX = 96
EXTENT_DATA = 108
EXTENT_CSUM = 128
ROOT_ITEM = 132
ROOT_BACKREF = 144
ROOT_REF = 156
EXTENT_ITEM = 168
METADATA_ITEM = 169
EXTENT_DATA_REF = 178
SHARED_DATA_REF = 184
BLOCK_GROUP_ITEM = 192
DEV_EXTENT = 204
DEV_ITEM = 216
FREE_SPACE_INFO = 198
FREE_SPACE_EXTENT = 199
FREE_SPACE_BITMAP = 200
CHUNK_ITEM = 228
QGROUP_STATUS = 240
QGROUP_INFO = 242
QGROUP_RELATION = 246
FREE_SPACE_OBJECTID = 2 ** 64 - 11     # the v1 space cache's headers (root tree)
CACHE_PAGE = 4096                      # the v1 cache's page (the kernel's page size)

# Superblock fields: name -> (offset, struct format).
SUPER_FIELDS = {
    "bytenr": (0x30, "<Q"),
    "generation": (0x48, "<Q"),
    "root": (0x50, "<Q"),
    "chunk_root": (0x58, "<Q"),
    "total_bytes": (0x70, "<Q"),
    "bytes_used": (0x78, "<Q"),
    "num_devices": (0x88, "<Q"),
    "sectorsize": (0x90, "<I"),
    "nodesize": (0x94, "<I"),
    "sys_chunk_array_size": (0xA0, "<I"),
    "compat_ro_flags": (0xB4, "<Q"),
    "incompat_flags": (0xBC, "<Q"),
    "csum_type": (0xC4, "<H"),
    "root_level": (0xC6, "<B"),
    "chunk_root_level": (0xC7, "<B"),
    "devid": (0xC9, "<Q"),
    "dev_item.total_bytes": (0xD1, "<Q"),    # the superblock's copy of its DEV_ITEM
    "dev_item.bytes_used": (0xD9, "<Q"),
}
SYS_CHUNK_ARRAY = 0x32B

# Item layouts the tests edit: name -> (offset in the item, struct format).
FIELDS = {
    # btrfs_extent_item
    "extent.refs": (0, "<Q"),
    "extent.generation": (8, "<Q"),
    "extent.flags": (16, "<Q"),
    # btrfs_inode_item
    "inode.generation": (0, "<Q"),
    "inode.size": (16, "<Q"),
    "inode.nbytes": (24, "<Q"),
    "inode.nlink": (40, "<I"),
    "inode.mode": (52, "<I"),
    "inode.flags": (64, "<Q"),
    # btrfs_block_group_item
    "bg.used": (0, "<Q"),
    "bg.flags": (16, "<Q"),
    # btrfs_file_extent_item
    "fe.generation": (0, "<Q"),
    "fe.ram_bytes": (8, "<Q"),
    "fe.compression": (16, "<B"),
    "fe.type": (20, "<B"),
    "fe.disk_bytenr": (21, "<Q"),
    "fe.disk_num_bytes": (29, "<Q"),
    "fe.offset": (37, "<Q"),
    "fe.num_bytes": (45, "<Q"),
    # btrfs_dev_extent (device tree) and btrfs_dev_item (chunk tree)
    "dev_extent.chunk_offset": (16, "<Q"),
    "dev_extent.length": (24, "<Q"),
    "dev_item.total_bytes": (8, "<Q"),
    "dev_item.bytes_used": (16, "<Q"),
    # btrfs_free_space_info
    "fsi.extent_count": (0, "<I"),
    "fsi.flags": (4, "<I"),
    # btrfs_qgroup_info_item
    "qgroup.rfer": (8, "<Q"),
    "qgroup.excl": (24, "<Q"),
    # btrfs_qgroup_status_item
    "qstatus.flags": (16, "<Q"),
    # btrfs_root_item
    "root.bytenr": (176, "<Q"),
    "root.level": (238, "<B"),
}


def btrfs_csum(data):
    """The crc32c tree/super checksum: ~crc32c(~0, data), little endian."""
    return struct.pack("<I", crc32c(0xFFFFFFFF, data) ^ 0xFFFFFFFF)


def key_of(objectid, type_, offset):
    return (objectid, type_, offset)


class Item:
    """One leaf item: where it is and what it holds (a snapshot of the bytes)."""

    def __init__(self, leaf, slot, key, offset, size, data, path):
        self.leaf = leaf          # logical address of the leaf
        self.slot = slot
        self.key = key
        self.offset = offset      # of the data, from the end of the header
        self.size = size
        self.data = data
        self.path = path          # [(node logical, slot)] from the root down

    def get(self, field):
        off, fmt = FIELDS[field]
        return struct.unpack_from(fmt, self.data, off)[0]

    def __repr__(self):
        return "Item(%r leaf=%d slot=%d size=%d)" % (self.key, self.leaf, self.slot, self.size)


class BtrfsImage:
    """An unmounted btrfs image file open for reading and editing."""

    def __init__(self, path):
        self.path = path
        self.f = open(path, "r+b")
        self.f.seek(0, 2)
        self.image_size = self.f.tell()
        self.sb = self._read(SUPER_OFFSETS[0], SUPER_SIZE)
        if self.sb[0x40:0x48] != SUPER_MAGIC:
            raise ValueError("%s: no btrfs superblock" % path)
        if self.super("csum_type") != 0:
            raise ValueError("%s: only crc32c checksums are supported" % path)
        if self.sb[:4] != btrfs_csum(self.sb[0x20:]):
            raise ValueError("%s: bad superblock checksum" % path)
        self.nodesize = self.super("nodesize")
        self.devid = self.super("devid")
        self.chunks = []          # [(logical, length, [physical, ...])]
        self._load_sys_chunks()
        self._load_chunk_tree()

    def close(self):
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- raw I/O --

    def _read(self, off, n):
        self.f.seek(off)
        b = self.f.read(n)
        if len(b) != n:
            raise ValueError("short read at %d" % off)
        return b

    def _write(self, off, b):
        self.f.seek(off)
        self.f.write(b)

    # -- superblock --

    def super(self, name):
        off, fmt = SUPER_FIELDS[name]
        return struct.unpack_from(fmt, self.sb, off)[0]

    def set_super(self, name, value):
        """Set a superblock field in every superblock copy inside the image."""
        off, fmt = SUPER_FIELDS[name]
        for sboff in SUPER_OFFSETS:
            if sboff + SUPER_SIZE > self.image_size:
                continue
            sb = bytearray(self._read(sboff, SUPER_SIZE))
            if sb[0x40:0x48] != SUPER_MAGIC:
                continue
            struct.pack_into(fmt, sb, off, value)
            sb[:4] = btrfs_csum(bytes(sb[0x20:]))
            self._write(sboff, bytes(sb))
            if sboff == SUPER_OFFSETS[0]:
                self.sb = bytes(sb)
        self.f.flush()

    # -- chunk mapping --

    def _add_chunk(self, logical, item):
        length, = struct.unpack_from("<Q", item, 0)
        ctype, = struct.unpack_from("<Q", item, 24)
        num_stripes, = struct.unpack_from("<H", item, 44)
        phys = []
        for i in range(num_stripes):
            devid, off = struct.unpack_from("<QQ", item, 48 + 32 * i)
            if devid != self.devid:
                raise ValueError("chunk %d has a stripe on devid %d: only one device"
                                 " is supported" % (logical, devid))
            phys.append(off)
        # RAID0/10/5/6 stripe the chunk; only SINGLE and DUP (whole copies).
        striped = ctype & ((1 << 3) | (1 << 6) | (1 << 7) | (1 << 8))
        if striped:
            raise ValueError("chunk %d: striped profile 0x%x not supported" % (logical, ctype))
        if logical not in [c[0] for c in self.chunks]:
            self.chunks.append((logical, length, phys))

    def _load_sys_chunks(self):
        arr = self.sb[SYS_CHUNK_ARRAY:SYS_CHUNK_ARRAY + self.super("sys_chunk_array_size")]
        pos = 0
        while pos < len(arr):
            objectid, type_, offset = struct.unpack_from("<QBQ", arr, pos)
            pos += 17
            num_stripes, = struct.unpack_from("<H", arr, pos + 44)
            size = 48 + 32 * num_stripes
            if type_ != CHUNK_ITEM:
                raise ValueError("unexpected key type %d in sys_chunk_array" % type_)
            self._add_chunk(offset, arr[pos:pos + size])
            pos += size

    def _load_chunk_tree(self):
        for it in self.items(CHUNK_TREE, (0, CHUNK_ITEM, 0), (2 ** 64 - 1, CHUNK_ITEM, 2 ** 64 - 1)):
            if it.key[1] == CHUNK_ITEM:
                self._add_chunk(it.key[2], it.data)

    def physical(self, logical):
        """Every image offset holding logical (one per copy)."""
        for start, length, phys in self.chunks:
            if start <= logical < start + length:
                return [p + logical - start for p in phys]
        raise ValueError("logical %d is in no chunk" % logical)

    # -- tree blocks --

    def read_block(self, logical):
        b = self._read(self.physical(logical)[0], self.nodesize)
        if b[:4] != btrfs_csum(b[32:]):
            raise ValueError("tree block %d: bad checksum" % logical)
        if struct.unpack_from("<Q", b, 48)[0] != logical:
            raise ValueError("tree block %d: bytenr mismatch" % logical)
        return b

    def write_block(self, logical, block):
        """Recompute the checksum and write block to every copy."""
        block = bytearray(block)
        block[:32] = b"\0" * 32
        block[:4] = btrfs_csum(bytes(block[32:]))
        for off in self.physical(logical):
            self._write(off, bytes(block))
        self.f.flush()

    @staticmethod
    def _header(block):
        nritems, level = struct.unpack_from("<IB", block, 96)
        return nritems, level

    def tree_root(self, tree_id):
        """(logical, level) of a tree's root block."""
        if tree_id == ROOT_TREE:
            return self.super("root"), self.super("root_level")
        if tree_id == CHUNK_TREE:
            return self.super("chunk_root"), self.super("chunk_root_level")
        for it in self.items(ROOT_TREE, (tree_id, ROOT_ITEM, 0), (tree_id, ROOT_ITEM, 2 ** 64 - 1)):
            return it.get("root.bytenr"), it.get("root.level")
        raise KeyError("no ROOT_ITEM for tree %d" % tree_id)

    def _leaf_items(self, logical, block, path):
        nritems, _ = self._header(block)
        for slot in range(nritems):
            p = HEADER_SIZE + slot * ITEM_SIZE
            key = struct.unpack_from("<QBQ", block, p)
            off, size = struct.unpack_from("<II", block, p + 17)
            data = block[HEADER_SIZE + off:HEADER_SIZE + off + size]
            yield Item(logical, slot, key, off, size, data, path)

    def _walk(self, logical, lo, hi, path):
        block = self.read_block(logical)
        nritems, level = self._header(block)
        if level == 0:
            for it in self._leaf_items(logical, block, path):
                if lo <= it.key <= hi:
                    yield it
            return
        ptrs = []
        for slot in range(nritems):
            p = HEADER_SIZE + slot * KEY_PTR_SIZE
            key = struct.unpack_from("<QBQ", block, p)
            child, = struct.unpack_from("<Q", block, p + 17)
            ptrs.append((key, child))
        for slot, (key, child) in enumerate(ptrs):
            nxt = ptrs[slot + 1][0] if slot + 1 < nritems else None
            if nxt is not None and nxt <= lo:
                continue          # everything below is < the next key <= lo
            if key > hi:
                break
            yield from self._walk(child, lo, hi, path + [(logical, slot)])

    def items(self, tree_id, lo=(0, 0, 0), hi=(2 ** 64 - 1, 255, 2 ** 64 - 1)):
        """Every item of a tree with lo <= key <= hi, in key order."""
        root, _ = self.tree_root(tree_id)
        yield from self._walk(root, lo, hi, [])

    def find(self, tree_id, key):
        """The item with exactly this key (KeyError if none)."""
        for it in self.items(tree_id, key, key):
            return it
        raise KeyError("tree %d has no key %r" % (tree_id, key))

    # -- edits --

    def write_item(self, item, data):
        """Replace an item's bytes (same size)."""
        if len(data) != item.size:
            raise ValueError("write_item: %d bytes for a %d-byte item" % (len(data), item.size))
        block = bytearray(self.read_block(item.leaf))
        start = HEADER_SIZE + item.offset
        block[start:start + item.size] = data
        self.write_block(item.leaf, block)
        item.data = bytes(data)

    def set_field(self, item, field, value):
        """Set one named field (FIELDS) of an item; returns the old value."""
        off, fmt = FIELDS[field]
        old = item.get(field)
        data = bytearray(item.data)
        struct.pack_into(fmt, data, off, value)
        self.write_item(item, bytes(data))
        return old

    def patch(self, item, off, fmt, value):
        """Set a struct-packed value at an offset inside an item."""
        data = bytearray(item.data)
        struct.pack_into(fmt, data, off, value)
        self.write_item(item, bytes(data))

    def set_key(self, item, key):
        """Change an item's key in place (the caller keeps the leaf sorted)."""
        block = bytearray(self.read_block(item.leaf))
        struct.pack_into("<QBQ", block, HEADER_SIZE + item.slot * ITEM_SIZE, *key)
        self.write_block(item.leaf, block)
        item.key = tuple(key)
        if item.slot == 0:
            self._fix_parent_keys(item.path, key)

    def delete_item(self, item):
        """Remove an item from its leaf (the leaf may not become empty)."""
        block = bytearray(self.read_block(item.leaf))
        nritems, level = self._header(block)
        if level != 0 or nritems < 2:
            raise ValueError("delete_item: leaf %d would become empty" % item.leaf)
        hdrs = [struct.unpack_from("<QBQII", block, HEADER_SIZE + s * ITEM_SIZE)
                for s in range(nritems)]
        # Data of later slots lies below this one's: move it up by item.size.
        low = min(h[3] for h in hdrs)
        data_lo, data_hi = HEADER_SIZE + low, HEADER_SIZE + item.offset
        block[data_lo + item.size:data_hi + item.size] = block[data_lo:data_hi]
        block[data_lo:data_lo + item.size] = b"\0" * item.size
        new = []
        for s, h in enumerate(hdrs):
            if s == item.slot:
                continue
            off = h[3] + item.size if h[3] < item.offset else h[3]
            new.append((h[0], h[1], h[2], off, h[4]))
        for s in range(nritems):
            p = HEADER_SIZE + s * ITEM_SIZE
            if s < len(new):
                struct.pack_into("<QBQII", block, p, *new[s])
            else:
                block[p:p + ITEM_SIZE] = b"\0" * ITEM_SIZE
        struct.pack_into("<I", block, 96, nritems - 1)
        self.write_block(item.leaf, block)
        if item.slot == 0:
            self._fix_parent_keys(item.path, new[0][:3])

    def append_item(self, tree_id, key, data):
        """Add an item after the last one of a tree, in its last leaf (whose
        free space must hold it): key must sort after every key of the tree.
        No parent key changes (a pointer's key is its leaf's first)."""
        last = list(self.items(tree_id))[-1]
        if key <= last.key:
            raise ValueError("append_item: %r does not sort after %r" % (key, last.key))
        block = bytearray(self.read_block(last.leaf))
        nritems, _ = self._header(block)
        low = min(struct.unpack_from("<I", block, HEADER_SIZE + s * ITEM_SIZE + 17)[0]
                  for s in range(nritems))
        off = low - len(data)
        if HEADER_SIZE + (nritems + 1) * ITEM_SIZE > HEADER_SIZE + off:
            raise ValueError("append_item: leaf %d is full" % last.leaf)
        block[HEADER_SIZE + off:HEADER_SIZE + low] = data
        struct.pack_into("<QBQII", block, HEADER_SIZE + nritems * ITEM_SIZE, *key, off, len(data))
        struct.pack_into("<I", block, 96, nritems + 1)
        self.write_block(last.leaf, block)

    def _fix_parent_keys(self, path, key):
        """A leaf's first key changed: so does its pointer's key up the path."""
        for logical, slot in reversed(path):
            block = bytearray(self.read_block(logical))
            struct.pack_into("<QBQ", block, HEADER_SIZE + slot * KEY_PTR_SIZE, *key)
            self.write_block(logical, block)
            if slot != 0:
                break

    # -- the v1 free space cache (a root-tree inode's data per block group) --

    def _cache_inode(self, bg):
        hdr = self.find(ROOT_TREE, (FREE_SPACE_OBJECTID, 0, bg))
        ino, = struct.unpack_from("<Q", hdr.data, 0)
        size = self.find(ROOT_TREE, (ino, INODE_ITEM, 0)).get("inode.size")
        return hdr, ino, size

    def space_caches(self):
        """{block group start: (generation, entries, bitmaps)} of the v1 caches."""
        out = {}
        for it in self.items(ROOT_TREE, (FREE_SPACE_OBJECTID, 0, 0),
                             (FREE_SPACE_OBJECTID, 0, 2 ** 64 - 1)):
            out[it.key[2]] = struct.unpack_from("<QQQ", it.data, 17)
        return out

    def _cache_extents(self, ino, size):
        """[(file offset, image offsets of its copies, length)] of a cache inode."""
        out = []
        for fe in self.items(ROOT_TREE, (ino, EXTENT_DATA, 0), (ino, EXTENT_DATA, 2 ** 64 - 1)):
            disk = fe.get("fe.disk_bytenr")
            if not disk:
                continue
            n = min(fe.get("fe.num_bytes"), size - fe.key[2])
            out.append((fe.key[2], self.physical(disk + fe.get("fe.offset")), n))
        return out

    def read_space_cache(self, bg):
        """The cache file of the block group at logical bg (bytes)."""
        _, ino, size = self._cache_inode(bg)
        data = bytearray(size)
        for off, phys, n in self._cache_extents(ino, size):
            data[off:off + n] = self._read(phys[0], n)
        return bytes(data)

    def write_space_cache(self, bg, data):
        """Write a cache file back, every page's crc32c recomputed."""
        _, ino, size = self._cache_inode(bg)
        if len(data) != size:
            raise ValueError("write_space_cache: %d bytes for a %d-byte cache" % (len(data), size))
        data = bytearray(data)
        pages = size // CACHE_PAGE
        for i in range(pages):
            start = i * CACHE_PAGE + (4 * pages if i == 0 else 0)
            data[4 * i:4 * i + 4] = btrfs_csum(bytes(data[start:(i + 1) * CACHE_PAGE]))
        for off, phys, n in self._cache_extents(ino, size):
            for p in phys:
                self._write(p, bytes(data[off:off + n]))
        self.f.flush()

    @staticmethod
    def cache_entries(data, entries):
        """[(byte offset in data, offset, bytes, type)] of a cache's entries."""
        pages = len(data) // CACHE_PAGE
        pos, out = 4 * pages + 8, []
        for _ in range(entries):
            if pos % CACHE_PAGE + 17 > CACHE_PAGE:
                pos = (pos // CACHE_PAGE + 1) * CACHE_PAGE
            out.append((pos,) + struct.unpack_from("<QQB", data, pos))
            pos += 17
        return out
