#!/bin/bash
# locate.sh: fscrub locate against the offline tools, on the million-file
# data set: how long 1000 random sectors take, and whether the answers agree.
#
# For each filesystem: an image under $BENCH_DIR, mkfs, NR_TINY (1 000 000)
# files of 100-2000 bytes in TINY_DIRS (1000) directories (bench/mkdata
# tiny, as state.sh), sync, umount + mount.  NR_SECTORS (1000) sectors
# are drawn at random (SEED) over the filesystem's blocks, half of them
# among the blocks of files (so that most answers are files, not free
# space).  Then, each cold (sync; drop_caches):
#   fscrub    fscrub locate --json --from LIST DEV
#   ext4      debugfs -R "icheck B..." then -R "ncheck INO..." (the inodes
#             icheck found), as the smartmontools Bad block HOWTO does
#   xfs       xfs_io -c "fsmap -d S S" per sector, one xfs_io
# and the answers compared sector by sector: the owning inode (a file, or
# the metadata of one inode, such as an extent tree block) or none (free
# space, filesystem metadata; icheck's reserved inodes, the journal and
# the resize inode, count as filesystem metadata, as GETFSMAP calls them).  Every disagreement is printed; the script
# fails on any.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
FSTYPES=${FSTYPES:-"ext4 xfs"}
KEEP=${KEEP:-0}
NR_TINY=${NR_TINY:-1000000}
TINY_DIRS=${TINY_DIRS:-1000}
NR_SECTORS=${NR_SECTORS:-1000}
SEED=${SEED:-1}

me=locate.sh
BIN_NAME=lo-bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
for k in NR_TINY TINY_DIRS NR_SECTORS; do posint "$k"; done
for fs in $FSTYPES; do
	case $fs in xfs|ext4) ;; *) die "FSTYPES: unknown filesystem '$fs' (xfs, ext4)";; esac
done
command -v cc >/dev/null || need_pkg gcc
cc -O2 -Wall -o "$BIN/mkdata" "$top/bench/mkdata.c" || die "cannot build bench/mkdata.c"
private_fscrub
LOGS=$BENCH_DIR/lo-logs
mkdir -p "$LOGS"
rm -f "$LOGS/"*

echo "locate.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
echo "data: $NR_TINY tiny files (100-2000 B) in $TINY_DIRS dirs; $NR_SECTORS random sectors (seed $SEED), half in files; cold cache"
echo

# The sectors: half uniform over the filesystem, half the first sector of random files' blocks.
pick_sectors() {	# MNT DEV FS OUT
	python3 - "$@" "$NR_SECTORS" "$SEED" <<'EOF'
import os, random, struct, fcntl, sys
mnt, dev, fs, out, n, seed = sys.argv[1:5] + [int(a) for a in sys.argv[5:]]
rnd = random.Random(seed)
size = os.statvfs(mnt).f_blocks * os.statvfs(mnt).f_frsize
files = []
for d in sorted(os.listdir(mnt + "/tiny"))[:50]:
    files += [os.path.join(mnt, "tiny", d, f) for f in sorted(os.listdir(os.path.join(mnt, "tiny", d)))]
sectors = sorted({rnd.randrange(size // 512) for _ in range(n - n // 2)})
hdr = struct.Struct("=QQIIII"); ext = struct.Struct("=QQQQQIIII")
while len(sectors) < n:
    buf = bytearray(hdr.size + ext.size)
    hdr.pack_into(buf, 0, 0, 1 << 62, 0, 0, 1, 0)
    fd = os.open(rnd.choice(files), os.O_RDONLY)
    fcntl.ioctl(fd, 0xC020660B, buf, True)
    os.close(fd)
    if hdr.unpack_from(buf)[3] and ext.unpack_from(buf, hdr.size)[1] // 512 not in sectors:
        sectors.append(ext.unpack_from(buf, hdr.size)[1] // 512)
open(out, "w").write("".join("%d\n" % s for s in sectors))
EOF
}

# fscrub's answers: "SECTOR INODE" lines (0: no inode).
fscrub_answers() {	# JSON
	python3 - "$1" <<'EOF'
import json, sys
# ext4's reserved inodes (1-10 but the root: the journal...) are filesystem metadata.
for r in json.load(open(sys.argv[1]))["ranges"]:
    inos = sorted({o.get("inode", 0) for o in r["owners"] if o["kind"] in ("file", "metadata")
                   and not (o.get("inode", 0) < 11 and o.get("inode") != 2)})
    print(r["range"], inos[0] if inos else 0)
EOF
}

# debugfs icheck's answers as the same lines (block size BS).
icheck_answers() {	# LOG BS LIST
	python3 - "$@" <<'EOF'
import re, sys
log, bs, lst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
found = {}
for m in re.finditer(r"^(\d+)\s+(\d+|<block not found>)", open(log).read(), re.M):
    found[int(m.group(1))] = 0 if m.group(2).startswith("<") else int(m.group(2))
# Inodes 1-10 but the root are ext4's own (the journal, the resize inode whose
# blocks are the reserved descriptors): filesystem metadata, no file's.
for s in open(lst).read().split():
    ino = found.get(int(s) * 512 // bs, "?")
    print(s, 0 if ino != "?" and ino < 11 and ino != 2 else ino)
EOF
}

# xfs_io fsmap's answers (inode owners; special owners and free space: 0).
fsmap_answers() {	# LOG LIST
	python3 - "$@" <<'EOF'
import re, sys
log, lst = sys.argv[1], sys.argv[2]
recs = []
for m in re.finditer(r"^\s*\d+: [^\[]*\[(\d+)\.\.(\d+)\]: (?:inode (\d+))?", open(log).read(),
                     re.M):
    recs.append((int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)))
for s in map(int, open(lst).read().split()):
    hit = [o for a, b, o in recs if a <= s <= b]
    print(s, max(hit) if hit else "?")
EOF
}

compare() {	# OURS THEIRS FS
	local bad
	bad=$(join <(sort "$1") <(sort "$2") | awk '$2 != $3')
	if [ -n "$bad" ]; then
		echo "$3: sectors where fscrub (left) and the offline tool (right) disagree:"
		echo "$bad" | head -20
		FAILED=1
	fi
	AGREE=$(join <(sort "$1") <(sort "$2") | awk '$2 == $3' | wc -l)
}

FAILED=0
bench_fs() {	# FS
	local fs=$1 img=$BENCH_DIR/lo-$1.img mnt=$BENCH_DIR/lo-mnt-$1 dev t0 ours theirs bs
	local list=$LOGS/$fs.sectors
	IMAGES+=("$img")
	MOUNTS+=("$mnt")
	tiny_fs "$fs" "$img" "$mnt"
	dev=$DEV
	pick_sectors "$mnt" "$dev" "$fs" "$list"
	drop_caches
	t0=$EPOCHREALTIME
	"$FSCRUB" locate --json --from "$list" "$dev" >"$LOGS/$fs.fscrub.json" || [ $? -eq 4 ]
	ours=$(secs_since "$t0" 2)
	fscrub_answers "$LOGS/$fs.fscrub.json" >"$LOGS/$fs.fscrub.ans"
	drop_caches
	t0=$EPOCHREALTIME
	if [ "$fs" = ext4 ]; then
		bs=$(dumpe2fs -h "$dev" 2>/dev/null | awk '/^Block size:/ { print $3 }')
		debugfs -R "icheck $(awk -v bs="$bs" '{ printf "%d ", $1 * 512 / bs }' "$list")" \
			"$dev" >"$LOGS/$fs.icheck.log" 2>/dev/null
		icheck_answers "$LOGS/$fs.icheck.log" "$bs" "$list" >"$LOGS/$fs.theirs.ans"
		debugfs -R "ncheck $(awk '$2 > 0 { print $2 }' "$LOGS/$fs.theirs.ans" | sort -u | tr '\n' ' ')" \
			"$dev" >"$LOGS/$fs.ncheck.log" 2>/dev/null
	else
		local args=() s
		while read -r s; do args+=(-c "fsmap -d $s $s"); done <"$list"
		xfs_io "${args[@]}" "$mnt" >"$LOGS/$fs.fsmap.log"
		fsmap_answers "$LOGS/$fs.fsmap.log" "$list" >"$LOGS/$fs.theirs.ans"
	fi
	theirs=$(secs_since "$t0" 2)
	compare "$LOGS/$fs.fscrub.ans" "$LOGS/$fs.theirs.ans" "$fs"
	printf '%-5s  fscrub locate %7s s   %-22s %7s s   agree %d/%d\n' "$fs" "$ours" \
		"$([ "$fs" = ext4 ] && echo "debugfs icheck+ncheck" || echo "xfs_io fsmap -d")" \
		"$theirs" "$AGREE" "$NR_SECTORS"
	cleanup_fs "$img" "$mnt"
	unset 'IMAGES[-1]' 'MOUNTS[-1]'
}

for fs in $FSTYPES; do
	bench_fs "$fs"
done
[ "$FAILED" = 0 ] || die "fscrub locate and the offline tools disagree (above; logs in $LOGS)"
