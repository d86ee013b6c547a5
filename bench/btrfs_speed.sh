#!/bin/bash
# btrfs_speed.sh: fscrub on btrfs against find and the kernel's own scrub,
# cold cache (issue 36's btrfs targets).
#
# Targets, as ratios of medians measured in the same run:
#   -x     fscrub -n -x <= TARGET_X (1.25) x max(fscrub -n, btrfs scrub -B -r):
#          the kernel's scrub verifies every checksummed byte in phase 2,
#          so phase 5 must not read the data again
#   -n     find / fscrub -n >= TARGET_N (1.5): printed, judged only with
#          JUDGE_N=1 (phase 2 still runs the kernel's scrub over all data)
#
# One btrfs image of IMG_SIZE under $BENCH_DIR, attached with
# `losetup --direct-io=on` (dropping caches makes the next run cold),
# mkfs.btrfs, the Debian linux-source tree extracted into it, plus
# EXTRA_MIB of file data in EXTRA_FILES files (default 0), a NOCOW
# directory with NOCOW_MIB (8) in one file (what -x still reads), sync,
# umount + mount.  Then REPS rounds, each variant after
#     sync; echo 3 > /proc/sys/vm/drop_caches
#   find     find MNT -xdev -printf '%i %n\n'
#   scrub    btrfs scrub start -B -r MNT
#   n        fscrub -n MNT
#   nx       fscrub -n -x MNT
# (all with --no-state: the run history is not this benchmark's; state.sh
# measures it)
#   base     $BASELINE -n -x MNT, if BASELINE names another fscrub binary
#            (e.g. a build of the commit before): the same run's before
# and a last cold `fscrub -n -x -v -T MNT`, whose phase 5 lines are shown.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
REPS=${REPS:-3}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
IMG_SIZE=${IMG_SIZE:-8G}
EXTRA_MIB=${EXTRA_MIB:-0}
EXTRA_FILES=${EXTRA_FILES:-4}
NOCOW_MIB=${NOCOW_MIB:-8}
KEEP=${KEEP:-0}
TARGET_X=${TARGET_X:-1.25}
TARGET_N=${TARGET_N:-1.5}
JUDGE_N=${JUDGE_N:-0}
TARBALL=${TARBALL:-}
BASELINE=${BASELINE:-}

me=btrfs_speed.sh
BIN_NAME=bin-btrfs-speed
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
posint REPS
posint EXTRA_FILES
for k in KEEP JUDGE_N; do flag01 "$k"; done
for k in EXTRA_MIB NOCOW_MIB; do [[ ${!k} =~ ^[0-9]+$ ]] || die "$k must be a number of MiB"; done
command -v mkfs.btrfs >/dev/null || need_pkg btrfs-progs
command -v xz >/dev/null || need_pkg xz-utils
[ -x /usr/bin/time ] || need_pkg time
TARBALL=$(find_tarball)
mkdir -p "$BENCH_DIR/logs"
if [ -n "$BASELINE" ]; then
	[ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable"
	cp -p "$BASELINE" "$BIN/fscrub-baseline"
	BASELINE=$BIN/fscrub-baseline
fi
private_fscrub

img=$BENCH_DIR/btrfs-speed.img
mnt=$BENCH_DIR/mnt-btrfs-speed
IMAGES+=("$img")
MOUNTS+=("$mnt")
mkdir -p "$mnt"
mountpoint -q "$mnt" && die "$mnt is already mounted (a previous run's? umount it first)"
rm -f "$img"
truncate -s "$IMG_SIZE" "$img"
dev=$(losetup -f --show --direct-io=on "$img")
mkfs.btrfs -q -f "$dev"
mount "$dev" "$mnt"
say "extracting $(basename "$TARBALL")"
tar -xJf "$TARBALL" -C "$mnt"
for ((i = 0; i < EXTRA_FILES && EXTRA_MIB > 0; i++)); do
	dd if=/dev/urandom of="$mnt/extra$i" bs=1M count=$((EXTRA_MIB / EXTRA_FILES)) status=none
done
mkdir "$mnt/nocow"
chattr +C "$mnt/nocow"
[ "$NOCOW_MIB" -gt 0 ] && dd if=/dev/urandom of="$mnt/nocow/f" bs=1M count="$NOCOW_MIB" status=none
sync
umount "$mnt"
mount "$dev" "$mnt"
files=$(find "$mnt" -xdev | wc -l)

echo "btrfs_speed.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
echo "tree: $TARBALL + ${EXTRA_MIB} MiB in $EXTRA_FILES files + ${NOCOW_MIB} MiB NOCOW; $files entries, $(df -h --output=used "$mnt" | tail -n 1 | tr -d ' ') used"
echo "reps: $REPS, cold cache (sync; drop_caches=3 before every run), loop --direct-io=on"
echo

ELAPSED=0
timed() {	# OUT CMD...: sets ELAPSED; stdout and stderr of CMD to OUT
	local out=$1 t0 rc=0
	shift
	t0=$EPOCHREALTIME
	"$@" >"$out" 2>&1 || rc=$?
	ELAPSED=$(secs_since "$t0" 6)
	return "$rc"
}
declare -A T=([find]="" [scrub]="" [n]="" [nx]="" [base]="")
VARIANTS="find scrub n nx"
[ -n "$BASELINE" ] && VARIANTS+=" base"
run_variant() {	# NAME
	local log=$BENCH_DIR/logs/$1.log rc=0
	drop_caches
	case $1 in
	find) timed "$log" find "$mnt" -xdev -printf '%i %n\n' || rc=$?;;
	scrub) timed "$log" btrfs scrub start -B -r "$mnt" || rc=$?;;
	n) timed "$log" "$FSCRUB" --no-state -n "$mnt" || rc=$?;;
	nx) timed "$log" "$FSCRUB" --no-state -n -x "$mnt" || rc=$?;;
	base) timed "$log" "$BASELINE" --no-state -n -x "$mnt" || rc=$?;;
	esac
	[ "$rc" -eq 0 ] || { cat "$log" >&2; die "$1 exited $rc"; }
	T[$1]+=" $ELAPSED"
}
for ((r = 1; r <= REPS; r++)); do
	for v in $VARIANTS; do
		run_variant "$v"
	done
	say "round $r: find ${T[find]##* } s, scrub ${T[scrub]##* } s, -n ${T[n]##* } s, -n -x ${T[nx]##* } s"
done
declare -A M
for v in $VARIANTS; do
	M[$v]=$(echo "${T[$v]}" | median 3)
done
base=$(awk -v a="${M[n]}" -v b="${M[scrub]}" 'BEGIN { print (a > b ? a : b) }')
rx=$(awk -v a="${M[nx]}" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
rn=$(awk -v a="${M[find]}" -v b="${M[n]}" 'BEGIN { printf "%.2f", a / b }')
printf '%-28s %10s\n' "variant" "median s"
printf '%-28s %10s\n' "find -printf '%i %n\\n'" "${M[find]}" "btrfs scrub start -B -r" \
	"${M[scrub]}" "fscrub -n" "${M[n]}" "fscrub -n -x" "${M[nx]}"
[ -n "$BASELINE" ] && printf '%-28s %10s\n' "baseline fscrub -n -x" "${M[base]}"
echo
drop_caches
"$FSCRUB" --no-state -n -x -v -T "$mnt" 2>&1 | grep -E '^Phase (2: devid|5: )' || true
echo
fail=0
verdict() {	# OK TEXT
	if [ "$1" = 1 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fail=1; fi
}
verdict "$(awk -v r="$rx" -v t="$TARGET_X" 'BEGIN { print (r <= t) }')" \
	"fscrub -n -x = ${rx} x max(fscrub -n, btrfs scrub) (target <= $TARGET_X)"
[ -n "$BASELINE" ] && echo "INFO: baseline fscrub -n -x = $(awk -v a="${M[base]}" -v b="$base" 'BEGIN { printf "%.2f", a / b }') x max(fscrub -n, btrfs scrub)"
ok_n=$(awk -v r="$rn" -v t="$TARGET_N" 'BEGIN { print (r >= t) }')
if [ "$JUDGE_N" = 1 ]; then
	verdict "$ok_n" "find / fscrub -n = ${rn} (target >= $TARGET_N)"
else
	echo "INFO: find / fscrub -n = ${rn} (target >= $TARGET_N, not judged: JUDGE_N=0)"
fi
exit "$fail"
