#!/bin/bash
# btrfs_trees.sh: fscrub's online check of btrfs's logical trees (phase 3,
# src/backends/btrfs/btrfs_check.c) against `btrfs check --readonly` on the
# same image unmounted, the reference it stands in for.
#
# Data sets (DATASETS, any of):
#   s  FILES (50 000) files of 1 B .. 16 KiB (inline and regular extents) in
#      directories of 500, a snapshot of the whole top level and a reflinked
#      copy of one directory
#   b  the Debian kernel source tree (~80k files; bench/lib.sh's
#      find_tarball: $TARBALL, or linux-source, installed if need be), as
#      bench/data_verify.sh's set (b)
#   c  NR_TINY (1 000 000) files of 100-2000 bytes in TINY_DIRS (1000)
#      directories, written by bench/mkdata.c as data_verify.sh's set (c)
# For each: mkfs.btrfs defaults, fill, sync, umount + mount, then ROUNDS
# times, in the same run:
#   fscrub -n -v          the whole run; the tree check's own time is its
#                         "btrfs trees checked in" line (its first pass
#                         reads beside the walk: its own time, not the walk's)
#   fscrub -n -v without the tree check (FSCRUB_DEBUG_NO_BTRFS_TREES=1)
# then umount and ROUNDS times btrfs check --readonly on the image.  Caches
# are warm for all (the image was just written).  A Markdown table goes to
# stdout, the tree check's item counts to stderr.
#
#   sudo bench/btrfs_trees.sh                          # set s, FILES=50000
#   sudo DATASETS="b c" ROUNDS=1 bench/btrfs_trees.sh  # the issue's sets
#
# Needs root, btrfs-progs, GNU time (/usr/bin/time), cc and a built fscrub
# ($FSCRUB, default build/fscrub; a private copy is run).  Work files in
# BENCH_DIR (/var/tmp/fscrub-btrfs-trees); KEEP=1 leaves the images.
set -euo pipefail
export LC_ALL=C

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-btrfs-trees}
DATASETS=${DATASETS:-s}
FILES=${FILES:-50000}
ROUNDS=${ROUNDS:-2}
NR_TINY=${NR_TINY:-1000000}
TINY_DIRS=${TINY_DIRS:-1000}
TARBALL=${TARBALL:-}
KEEP=${KEEP:-0}

me=btrfs_trees.sh
BIN_NAME=bt-bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
for k in FILES ROUNDS NR_TINY TINY_DIRS; do posint "$k"; done
flag01 KEEP
for ds in $DATASETS; do
	case $ds in s|b|c) ;; *) die "DATASETS: unknown data set '$ds' (s, b, c)";; esac
done

[ -x /usr/bin/time ] || need_pkg time
command -v mkfs.btrfs >/dev/null || need_pkg btrfs-progs
command -v cc >/dev/null || need_pkg gcc
if [[ " $DATASETS " == *" b "* ]]; then
	command -v xz >/dev/null || need_pkg xz-utils
	TARBALL=$(find_tarball)
fi
cc -O2 -Wall -o "$BIN/mkdata" "$top/bench/mkdata.c" || die "cannot build bench/mkdata.c"
private_fscrub

image_size() {	# DS: image size in MiB (sparse)
	case $1 in
	# 16 KiB a file (8 KiB of data on average, its metadata twice: DUP)
	s) echo $(( FILES / 64 + 1024 ));;
	b) echo 4096;;
	# inline files: their data is metadata, twice (DUP), with the items
	c) echo $(( NR_TINY * 8192 / 1048576 + 1024 ));;
	esac
}
ds_desc() {
	case $1 in
	s) echo "$FILES files of 1 B-16 KiB, a snapshot, a reflinked directory";;
	b) echo "kernel tree $(basename "${TARBALL:-?}")";;
	c) echo "$NR_TINY tiny files (100-2000 B) in $TINY_DIRS dirs";;
	esac
}
populate() {	# DS MNT
	case $1 in
	s) python3 - "$2" "$FILES" <<'EOF'
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
	   btrfs subvolume snapshot "$2" "$2/snap" >/dev/null
	   cp -r --reflink=always "$2/d0000" "$2/d0000.reflink";;
	b) tar -xJf "$TARBALL" -C "$2";;
	c) mkdir "$2/tiny"
	   "$BIN/mkdata" tiny "$2/tiny" "$NR_TINY" "$TINY_DIRS";;
	esac
}

# One timed command: sets T_WALL (s), T_RSS (MiB) and T_OUT (its output).
timed() {
	T_OUT=$( { /usr/bin/time -f "TIME %e %M" "$@"; } 2>&1 ) || true
	read -r T_WALL T_RSS < <(sed -n 's/^TIME //p' <<<"$T_OUT")
	T_RSS=$(( T_RSS / 1024 ))
}
summary() { grep -E ' errors? and [0-9]+ warnings? found' <<<"$T_OUT" | sed 's/^.*: //'; }

echo "btrfs_trees.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
echo "$(btrfs --version | head -n 1); rounds: $ROUNDS; warm cache"
echo
echo "| data set | run | tree check s | whole run s | max RSS MiB | result |"
echo "|---|---|---|---|---|---|"
for ds in $DATASETS; do
	img=$BENCH_DIR/bt-$ds.img
	mnt=$BENCH_DIR/bt-mnt-$ds
	IMAGES+=("$img")
	MOUNTS+=("$mnt")
	mkdir -p "$mnt"
	rm -f "$img"
	truncate -s "$(image_size "$ds")M" "$img"
	mkfs.btrfs -q -f "$img" >/dev/null 2>&1
	mount -o loop "$img" "$mnt"
	say "$ds: writing $(ds_desc "$ds")"
	t0=$EPOCHREALTIME
	populate "$ds" "$mnt"
	sync
	say "$ds: written in $(secs_since "$t0") s; $(df -h --output=used "$mnt" | tail -n 1 | tr -d ' ') used"
	# a fresh mount, settled: its first commits (unused block groups
	# deleted) would otherwise run under the first scan
	umount "$mnt"
	mount -o loop "$img" "$mnt"
	btrfs filesystem sync "$mnt"
	sleep 5
	d=$(ds_desc "$ds")
	for r in $(seq "$ROUNDS"); do
		timed "$FSCRUB" -n -v "$mnt"
		tree=$(sed -n 's/^Phase 3: btrfs trees checked in \([0-9.]*\) s.*$/\1/p' <<<"$T_OUT")
		echo "| $d | fscrub -n (mounted) | $tree | $T_WALL | $T_RSS | $(summary) |"
		grep '^Phase 3: btrfs trees (first pass)' <<<"$T_OUT" | sed "s/^/$me: $ds: /" >&2
		timed env FSCRUB_DEBUG_NO_BTRFS_TREES=1 "$FSCRUB" -n -v "$mnt"
		echo "| $d | fscrub -n without the tree check | - | $T_WALL | $T_RSS | $(summary) |"
	done
	umount "$mnt"
	for r in $(seq "$ROUNDS"); do
		timed btrfs check --readonly "$img"
		res=$(grep -E 'no error found|error\(s\) found' <<<"$T_OUT" | head -n 1)
		echo "| $d | btrfs check --readonly (unmounted) | $T_WALL | $T_WALL | $T_RSS | $res |"
	done
	cleanup_fs "$img" "$mnt"
done
