#!/bin/bash
# btrfs_trees.sh: fscrub's online check of btrfs's logical trees (phase 3,
# src/backends/btrfs_check.c) against `btrfs check --readonly` on the same
# image unmounted, the reference it stands in for.
#
# One image: FILES files of 1 B .. 16 KiB (inline and regular extents) in
# directories of 500, a snapshot of the whole top level and a reflinked copy
# of one directory.  fscrub -n -v runs ROUNDS times on the mounted image
# (the tree check's own time is its "btrfs trees checked in" line; the
# whole run, scrub and walk included, is timed too), then btrfs check
# --readonly ROUNDS times on the unmounted image.  Caches are warm for
# both (the image was just written).  A Markdown table goes to stdout.
#
#   sudo bench/btrfs_trees.sh                  # FILES=50000 ROUNDS=2
#   sudo FILES=250000 bench/btrfs_trees.sh
#
# Needs root, btrfs-progs, GNU time (/usr/bin/time) and a built fscrub
# ($FSCRUB, default build/fscrub).  Work files in BENCH_DIR
# (/var/tmp/fscrub-btrfs-trees), removed at the end.
set -eu
me=btrfs_trees.sh
top=$(cd "$(dirname "$0")/.." && pwd)
FSCRUB="${FSCRUB:-$top/build/fscrub}"
FILES="${FILES:-50000}"
ROUNDS="${ROUNDS:-2}"
BENCH_DIR="${BENCH_DIR:-/var/tmp/fscrub-btrfs-trees}"
[[ $FILES =~ ^[1-9][0-9]*$ ]] || { echo "$me: FILES must be a positive integer" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "$me: ROUNDS must be a positive integer" >&2; exit 1; }
[ -x "$FSCRUB" ] || { echo "$me: no fscrub at $FSCRUB" >&2; exit 1; }

img="$BENCH_DIR/btrfs.img"
mnt="$BENCH_DIR/mnt"
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	rm -rf "$BENCH_DIR"
}
trap cleanup EXIT
mkdir -p "$mnt"
# 16 KiB a file (8 KiB of data on average, its metadata twice: DUP), plus
# 1 GiB for the chunks mkfs and the snapshot start.
size_mb=$(( FILES / 64 + 1024 ))
truncate -s "${size_mb}M" "$img"
mkfs.btrfs -q -f "$img" >/dev/null 2>&1
mount -o loop "$img" "$mnt"
echo "$me: writing $FILES files" >&2
python3 - "$mnt" "$FILES" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
blk = os.urandom(16384)
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 500))
    if i % 500 == 0:
        os.mkdir(d)
    with open(os.path.join(d, "f%03d" % (i % 500)), "wb") as f:
        f.write(blk[:(i * 7919) % 16384 + 1])
EOF
btrfs subvolume snapshot "$mnt" "$mnt/snap" >/dev/null
cp -r --reflink=always "$mnt/d0000" "$mnt/d0000.reflink"
sync

echo "| run | tree check s | whole run s | max RSS MiB | findings |"
echo "|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
	out=$( { /usr/bin/time -f "TIME %e %M" "$FSCRUB" -n -v "$mnt"; } 2>&1 ) || true
	tree=$(sed -n 's/^Phase 3: btrfs trees checked in \([0-9.]*\) s$/\1/p' <<<"$out")
	read -r wall rss < <(sed -n 's/^TIME //p' <<<"$out")
	sum=$(grep -E ' errors? and [0-9]+ warnings? found' <<<"$out" | sed 's/^.*: //')
	echo "| fscrub -n (mounted) | $tree | $wall | $(( rss / 1024 )) | $sum |"
	grep '^Phase 3: btrfs trees (first pass)' <<<"$out" | sed "s/^/$me: /" >&2
done
umount "$mnt"
for r in $(seq "$ROUNDS"); do
	out=$( { /usr/bin/time -f "TIME %e %M" btrfs check --readonly "$img"; } 2>&1 ) || true
	read -r wall rss < <(sed -n 's/^TIME //p' <<<"$out")
	sum=$(grep -E 'no error found|error\(s\) found' <<<"$out" | head -1)
	echo "| btrfs check --readonly (unmounted) | $wall | $wall | $(( rss / 1024 )) | $sum |"
done
