#!/bin/bash
# mem.sh: fscrub's peak RSS per inode in use (issue 22, item 5: at most 32
# bytes per inode on many small files), with -n and with -n -x, on XFS
# (with the rmapbt) and ext4.
#
# For each filesystem two images with the same mkfs: the set, $NR_FILES
# files of 100-2000 bytes (bench/mkdata.c tiny) in $NR_DIRS directories;
# and the baseline, $NR_BASE such files made and all but 10 removed, so
# that ext4's inode tables in use (its inode scan reads them through a
# buffer of up to 8 MiB) are as large as the set's up to that buffer.  Both
# get one file of $BIG_MB MiB, more than the -x reader's buffers (4 x 8
# MiB): those fixed costs are in both.  Each fscrub run's peak RSS comes
# from GNU time (wait4's ru_maxrss; the lowest of $REPS runs); per inode =
# (peak on the set - peak on the baseline) / (inodes in use, difference).
#
# Knobs (environment): BENCH_DIR (/var/tmp/fscrub-bench-mem), NR_FILES
# (200000), NR_DIRS (200), NR_BASE (the smaller of NR_FILES and 200000),
# FSTYPES ("xfs ext4"), IMG_SIZE (8G), BIG_MB (64), REPS (2), KEEP (0; 1
# keeps the images for the next run), FSCRUB, BASE_FSCRUB (set: also that
# binary, e.g. a build of main, "before").
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench-mem}
NR_FILES=${NR_FILES:-200000}
NR_DIRS=${NR_DIRS:-200}
NR_BASE=${NR_BASE:-$((NR_FILES < 200000 ? NR_FILES : 200000))}
FSTYPES=${FSTYPES:-"xfs ext4"}
IMG_SIZE=${IMG_SIZE:-8G}
BIG_MB=${BIG_MB:-64}
REPS=${REPS:-2}
KEEP=${KEEP:-0}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
BASE_FSCRUB=${BASE_FSCRUB:-}

me=mem.sh
BIN_NAME=bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
posint NR_FILES; posint NR_DIRS; posint NR_BASE; posint BIG_MB; posint REPS
flag01 KEEP
[ "$NR_BASE" -gt 10 ] || die "NR_BASE must be more than 10"
[ -x /usr/bin/time ] || need_pkg time
private_fscrub
if [ -n "$BASE_FSCRUB" ]; then
	cp -p "$BASE_FSCRUB" "$BIN/fscrub.base" || die "cannot copy $BASE_FSCRUB"
fi
cc -O2 -Wall -o "$BIN/mkdata" "$top/bench/mkdata.c" || die "cannot build bench/mkdata.c"

mkfs_cmd() {	# FS DEV: bulk.sh's (ext4: inodes for the set)
	case $1 in
	xfs) echo "mkfs.xfs -f -q -m rmapbt=1 $2";;
	ext4) echo "mkfs.ext4 -F -q -E lazy_itable_init=0 -N $((NR_FILES + NR_FILES / 4 + 1000)) $2";;
	esac
}

# An image with N files made and all but KEEPN removed, and the big file;
# mounted at MNT (reused with KEEP=1 when made the same way).
make_image() {	# FS IMG MNT N KEEPN
	local fs=$1 img=$2 mnt=$3 n=$4 keep=$5 dev want
	IMAGES+=("$img"); MOUNTS+=("$mnt")
	mkdir -p "$mnt"
	want="$n $keep $NR_DIRS $BIG_MB $(mkfs_cmd "$fs" DEV) $IMG_SIZE"
	if [ "$KEEP" = 1 ] && [ -f "$img.ready" ] && [ "$(cat "$img.ready")" = "$want" ]; then
		dev=$(losetup -f --show "$img")
		mount "$dev" "$mnt"
		return
	fi
	rm -f "$img" "$img.ready"
	truncate -s "$IMG_SIZE" "$img"
	dev=$(losetup -f --show "$img")
	$(mkfs_cmd "$fs" "$dev")
	mount "$dev" "$mnt"
	mkdir "$mnt/tiny"
	say "$fs: writing $n files"
	"$BIN/mkdata" tiny "$mnt/tiny" "$n" "$NR_DIRS"
	sync
	if [ "$keep" -lt "$n" ]; then
		say "$fs: removing all but $keep of them"
		find "$mnt/tiny" -type f | tail -n +$((keep + 1)) | xargs -r rm -f
	fi
	dd if=/dev/urandom of="$mnt/big" bs=1M count="$BIG_MB" status=none
	sync
	umount "$mnt"
	mount "$dev" "$mnt"
	echo "$want" >"$img.ready"
}

# The lowest peak RSS (KiB) of REPS runs of BINARY ARGS... on MNT.
peak() {	# BINARY MNT ARGS...
	local bin=$1 mnt=$2 r k best=
	shift 2
	for ((r = 0; r < REPS; r++)); do
		/usr/bin/time -f %M -o "$BENCH_DIR/time" "$bin" --no-state -n "$@" "$mnt" \
			>"$BENCH_DIR/run.log" 2>&1 || { cat "$BENCH_DIR/run.log" >&2; die "$bin $* $mnt failed"; }
		k=$(tail -n 1 "$BENCH_DIR/time")
		[ -z "$best" ] || [ "$k" -lt "$best" ] && best=$k
	done
	echo "$best"
}

inodes() { df --output=iused "$1" | tail -n 1 | tr -d ' '; }

echo "mem.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
echo "set: $NR_FILES files of 100-2000 bytes in $NR_DIRS directories; baseline: $NR_BASE made, 10 left; one $BIG_MB MiB file in both; lowest of $REPS runs"
echo
printf '%-6s %-12s %-8s %12s %12s %10s\n' fs binary args "base KiB" "set KiB" "B/inode"
for fs in $FSTYPES; do
	base_img=$BENCH_DIR/$fs-base.img set_img=$BENCH_DIR/$fs-set.img
	make_image "$fs" "$base_img" "$BENCH_DIR/mnt-$fs-base" "$NR_BASE" 10
	make_image "$fs" "$set_img" "$BENCH_DIR/mnt-$fs-set" "$NR_FILES" "$NR_FILES"
	d=$(($(inodes "$BENCH_DIR/mnt-$fs-set") - $(inodes "$BENCH_DIR/mnt-$fs-base")))
	bins=("$BIN/fscrub")
	[ -n "$BASE_FSCRUB" ] && bins+=("$BIN/fscrub.base")
	for bin in "${bins[@]}"; do
		for args in "" "-x"; do
			# shellcheck disable=SC2086  # args: zero or one word
			a=$(peak "$bin" "$BENCH_DIR/mnt-$fs-base" $args)
			# shellcheck disable=SC2086
			b=$(peak "$bin" "$BENCH_DIR/mnt-$fs-set" $args)
			printf '%-6s %-12s %-8s %12d %12d %10.1f\n' "$fs" "$(basename "$bin")" \
				"-n $args" "$a" "$b" "$(awk -v a="$a" -v b="$b" -v d="$d" \
				'BEGIN { print (b - a) * 1024 / d }')"
		done
	done
	cleanup_fs "$set_img" "$BENCH_DIR/mnt-$fs-set"
	cleanup_fs "$base_img" "$BENCH_DIR/mnt-$fs-base"
	unset 'IMAGES[-1]' 'MOUNTS[-1]' 'IMAGES[-1]' 'MOUNTS[-1]'
done
