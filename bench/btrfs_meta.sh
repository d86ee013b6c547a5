#!/bin/bash
# btrfs_meta.sh: fscrub -n on btrfs (no -x: the tree blocks only, no file
# data) against find, and its time with and without DATA_MIB more file
# data, cold cache (issue 36, item 1).
#
# Targets, as ratios of medians measured in the same run:
#   speed   find / fscrub -n >= TARGET_N (1.5) on the tree
#   data    fscrub -n on the tree plus DATA_MIB (4096) of file data
#           <= TARGET_DATA (1.10) x fscrub -n on the tree alone: the
#           metadata check does not read file data
#
# One btrfs image of IMG_SIZE (12G) under $BENCH_DIR, attached with
# `losetup --direct-io=on`, mkfs.btrfs (DUP metadata), the Debian
# linux-source tree extracted into it, sync, umount + mount.  REPS rounds
# of, each after `sync; echo 3 > /proc/sys/vm/drop_caches`:
#   find     find MNT -xdev -printf '%i %n\n'
#   n        fscrub --no-state -n MNT
#   base     $BASELINE --no-state -n MNT, if BASELINE names another fscrub
#            binary (the build before a change, in the same rounds)
# with the sectors the loop device read during each fscrub run (its sysfs
# stat).  Then DATA_MIB of random data in DATA_FILES (4) files is added,
# sync, umount + mount, and the same rounds again.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
REPS=${REPS:-3}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
IMG_SIZE=${IMG_SIZE:-12G}
DATA_MIB=${DATA_MIB:-4096}
DATA_FILES=${DATA_FILES:-4}
KEEP=${KEEP:-0}
TARGET_N=${TARGET_N:-1.5}
TARGET_DATA=${TARGET_DATA:-1.10}
TARBALL=${TARBALL:-}
BASELINE=${BASELINE:-}

me=btrfs_meta.sh
BIN_NAME=bin-btrfs-meta
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
posint REPS
posint DATA_FILES
posint DATA_MIB
flag01 KEEP
command -v mkfs.btrfs >/dev/null || need_pkg btrfs-progs
command -v xz >/dev/null || need_pkg xz-utils
TARBALL=$(find_tarball)
mkdir -p "$BENCH_DIR/logs"
if [ -n "$BASELINE" ]; then
	[ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable"
	cp -p "$BASELINE" "$BIN/fscrub-baseline"
	BASELINE_SRC=$BASELINE
	BASELINE=$BIN/fscrub-baseline
fi
private_fscrub

img=$BENCH_DIR/btrfs-meta.img
mnt=$BENCH_DIR/mnt-btrfs-meta
IMAGES+=("$img")
MOUNTS+=("$mnt")
mkdir -p "$mnt"
mountpoint -q "$mnt" && die "$mnt is already mounted (a previous run's? umount it first)"
rm -f "$img"
truncate -s "$IMG_SIZE" "$img"
dev=$(losetup -f --show --direct-io=on "$img")
mkfs.btrfs -q -f -m dup "$dev"
mount "$dev" "$mnt"
say "extracting $(basename "$TARBALL")"
tar -xJf "$TARBALL" -C "$mnt"
sync
umount "$mnt"
mount "$dev" "$mnt"

echo "btrfs_meta.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
[ -n "$BASELINE" ] && echo "baseline: $BASELINE_SRC (sha256 $(sha256sum "$BASELINE" | cut -c1-12))"
echo "tree: $TARBALL, $(find "$mnt" -xdev | wc -l) entries; then + $DATA_MIB MiB in $DATA_FILES files"
echo "reps: $REPS, cold cache (sync; drop_caches=3 before every run), loop --direct-io=on"
echo

sectors_read() { awk '{ print $3 }' "/sys/block/$(basename "$dev")/stat"; }
ELAPSED=0
READ=0
timed() {	# OUT CMD...: sets ELAPSED and READ (bytes the loop device read)
	local out=$1 t0 s0 rc=0
	shift
	s0=$(sectors_read)
	t0=$EPOCHREALTIME
	"$@" >"$out" 2>&1 || rc=$?
	ELAPSED=$(secs_since "$t0" 6)
	READ=$((($(sectors_read) - s0) * 512))
	return "$rc"
}
declare -A T=()
declare -A B=()
run_variant() {	# NAME SET
	local log=$BENCH_DIR/logs/meta-$1-$2.log rc=0
	drop_caches
	case $1 in
	find) timed "$log" find "$mnt" -xdev -printf '%i %n\n' || rc=$?;;
	n) timed "$log" "$FSCRUB" --no-state -n "$mnt" || rc=$?;;
	base) timed "$log" "$BASELINE" --no-state -n "$mnt" || rc=$?;;
	esac
	[ "$rc" -eq 0 ] || { cat "$log" >&2; die "$1 exited $rc"; }
	T[$1-$2]+=" $ELAPSED"
	B[$1-$2]+=" $READ"
}
rounds() {	# SET
	for ((r = 1; r <= REPS; r++)); do
		run_variant find "$1"
		run_variant n "$1"
		[ -n "$BASELINE" ] && run_variant base "$1"
		say "$1 round $r: find ${T[find-$1]##* } s, fscrub -n ${T[n-$1]##* } s" \
		    "(${B[n-$1]##* } bytes read)${BASELINE:+, baseline ${T[base-$1]##* } s}"
	done
}
rounds tree
say "adding $DATA_MIB MiB of file data"
for ((i = 0; i < DATA_FILES; i++)); do
	dd if=/dev/urandom of="$mnt/data$i" bs=1M count=$((DATA_MIB / DATA_FILES)) status=none
done
sync
umount "$mnt"
mount "$dev" "$mnt"
rounds data
declare -A M=()
KEYS="find-tree n-tree find-data n-data"
[ -n "$BASELINE" ] && KEYS+=" base-tree base-data"
for k in $KEYS; do
	M[$k]=$(echo "${T[$k]}" | median 3)
	M[$k-bytes]=$(echo "${B[$k]}" | median 0)
done
printf '%-40s %10s %14s\n' "variant" "median s" "bytes read"
printf '%-40s %10s %14s\n' "find, tree" "${M[find-tree]}" "${M[find-tree-bytes]}" \
	"fscrub -n, tree" "${M[n-tree]}" "${M[n-tree-bytes]}" \
	"find, tree + $DATA_MIB MiB" "${M[find-data]}" "${M[find-data-bytes]}" \
	"fscrub -n, tree + $DATA_MIB MiB" "${M[n-data]}" "${M[n-data-bytes]}"
[ -n "$BASELINE" ] && printf '%-40s %10s %14s\n' "baseline -n, tree" "${M[base-tree]}" \
	"${M[base-tree-bytes]}" "baseline -n, tree + $DATA_MIB MiB" "${M[base-data]}" \
	"${M[base-data-bytes]}"
echo
drop_caches
"$FSCRUB" --no-state -n -v "$mnt" 2>&1 | grep -E '^Phase 2: [0-9]+ tree blocks' || true
echo
rn=$(awk -v a="${M[find-tree]}" -v b="${M[n-tree]}" 'BEGIN { printf "%.2f", a / b }')
rd=$(awk -v a="${M[n-data]}" -v b="${M[n-tree]}" 'BEGIN { printf "%.2f", a / b }')
fail=0
verdict() {	# OK TEXT
	if [ "$1" = 1 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fail=1; fi
}
verdict "$(awk -v r="$rn" -v t="$TARGET_N" 'BEGIN { print (r >= t) }')" \
	"find / fscrub -n = $rn on the tree (target >= $TARGET_N)"
verdict "$(awk -v r="$rd" -v t="$TARGET_DATA" 'BEGIN { print (r <= t) }')" \
	"fscrub -n with $DATA_MIB MiB more data = $rd x without (target <= $TARGET_DATA)"
[ -n "$BASELINE" ] && echo "INFO: find / baseline -n = $(awk -v a="${M[find-tree]}" \
	-v b="${M[base-tree]}" 'BEGIN { printf "%.2f", a / b }') on the tree"
exit "$fail"
