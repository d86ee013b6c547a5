#!/bin/bash
# names.sh: the cost of the look-alike name checks (name_check.c, issue 25).
#
# Acceptance target: on the kernel-tree set, `fscrub -n MNT` with the name
# checks is at most 5 % slower (median wall time) than with
# FSCRUB_DEBUG_NO_NAME_CHECKS=1, both in the same run.
#
# The Debian linux-source tarball (bench/lib.sh find_tarball) is extracted
# once onto a tmpfs (FSTYPE=tmpfs, the default: no I/O, so the figure is
# the checks' CPU cost at its most visible) or onto an ext4 image
# (FSTYPE=ext4, warm cache).  Then one warm-up run of each, and ROUNDS
# rounds that run the two alternately (which one goes first alternates
# too); wall time from $EPOCHREALTIME, user+system CPU from /usr/bin/time.
# Prints both medians, their ratio, the names checked (-v) and the warnings
# the checks give on the tree (each a false alarm unless the tree asks).
#
# INSTR=1 (the default when valgrind is installed) also counts the user
# space instructions of one run of each under callgrind: a figure the load
# of a shared machine does not move (system time is not in it).
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
#   sudo bench/names.sh
#   sudo ROUNDS=9 FSTYPE=ext4 bench/names.sh
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
ROUNDS=${ROUNDS:-7}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
FSTYPE=${FSTYPE:-tmpfs}
KEEP=${KEEP:-0}
TARGET=${TARGET:-1.05}
TARBALL=${TARBALL:-}
INSTR=${INSTR:-$(command -v valgrind >/dev/null && echo 1 || echo 0)}

me=names.sh
BIN_NAME=bin-names
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
posint ROUNDS
flag01 KEEP
flag01 INSTR
case $FSTYPE in tmpfs|ext4) ;; *) die "FSTYPE must be tmpfs or ext4, not '$FSTYPE'" ;; esac

bench_setup
private_fscrub
tarball=$(find_tarball)
img=$BENCH_DIR/names-$FSTYPE.img
mnt=$BENCH_DIR/names-$FSTYPE.mnt
mkdir -p "$mnt"
IMAGES+=("$img")
MOUNTS+=("$mnt")
if [ "$FSTYPE" = tmpfs ]; then
	# the 6.1 tree is ~1.3 GB extracted
	mount -t tmpfs -o size=3g fscrub-bench-names "$mnt"
else
	truncate -s 4G "$img"
	mkfs.ext4 -q -F -E lazy_itable_init=0 "$img"
	mount -o loop "$img" "$mnt"
fi
say "extracting $tarball onto $FSTYPE"
tar -xJf "$tarball" -C "$mnt"
sync
entries=$(find "$mnt" -xdev | wc -l)

machine_line
echo "tree: $tarball, $entries entries, on $FSTYPE (warm); rounds: $ROUNDS"

declare -a wall_on wall_off cpu_on cpu_off
run_one() {	# on|off: one timed fscrub -n, appended to the arrays
	local t0 out rc cpu
	t0=$EPOCHREALTIME
	if [ "$1" = on ]; then
		out=$(/usr/bin/time -f '%U %S' -o "$BENCH_DIR/names.time" "$FSCRUB" -n "$mnt") && rc=0 || rc=$?
	else
		out=$(FSCRUB_DEBUG_NO_NAME_CHECKS=1 /usr/bin/time -f '%U %S' -o "$BENCH_DIR/names.time" \
		      "$FSCRUB" -n "$mnt") && rc=0 || rc=$?
	fi
	local wall
	wall=$(secs_since "$t0" 3)
	[ "$rc" = 0 ] || { echo "$out"; die "fscrub -n ($1) exited $rc"; }
	cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$BENCH_DIR/names.time")
	if [ "$1" = on ]; then wall_on+=("$wall"); cpu_on+=("$cpu"); else wall_off+=("$wall"); cpu_off+=("$cpu"); fi
}

# Warm-up (and what the checks say about the tree).
"$FSCRUB" -n -v "$mnt" >"$BENCH_DIR/names.out" 2>&1 || true
FSCRUB_DEBUG_NO_NAME_CHECKS=1 "$FSCRUB" -n "$mnt" >/dev/null 2>&1 || true
grep -o 'names checked for look-alikes' "$BENCH_DIR/names.out" >/dev/null &&
	echo "$(grep -o '[0-9]* names checked for look-alikes' "$BENCH_DIR/names.out")"
echo "name findings on the tree (with the checks):"
grep -E '^(Error|Warning): .*\[name\.' "$BENCH_DIR/names.out" | sed 's/^/  /' || echo "  none"

for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then run_one off; run_one on; else run_one on; run_one off; fi
	say "round $r: off ${wall_off[-1]} s, on ${wall_on[-1]} s"
done

m_off=$(echo "${wall_off[*]}" | median 3); m_on=$(echo "${wall_on[*]}" | median 3)
c_off=$(echo "${cpu_off[*]}" | median 2); c_on=$(echo "${cpu_on[*]}" | median 2)
printf '%-28s %9s %9s  %s\n' "fscrub -n" "median s" "CPU s" "runs (s)"
printf '%-28s %9s %9s  %s\n' "FSCRUB_DEBUG_NO_NAME_CHECKS" "$m_off" "$c_off" "${wall_off[*]}"
printf '%-28s %9s %9s  %s\n' "with the name checks" "$m_on" "$c_on" "${wall_on[*]}"
rw=$(awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "%.3f", a / b }')
rc=$(awk -v a="$c_on" -v b="$c_off" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')
echo "ratio with/without: wall $rw, CPU $rc"
if [ "$INSTR" = 1 ]; then
	instr() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
		  awk '/Collected/ { print $4 }'; }
	i_off=$(FSCRUB_DEBUG_NO_NAME_CHECKS=1 instr "$FSCRUB" -n "$mnt")
	i_on=$(instr "$FSCRUB" -n "$mnt")
	echo "user-space instructions (callgrind, one run): without $i_off, with $i_on," \
	     "ratio $(awk -v a="$i_on" -v b="$i_off" 'BEGIN { printf "%.3f", a / b }')," \
	     "$(awk -v a="$i_on" -v b="$i_off" -v n="$entries" 'BEGIN { printf "%.0f", (a - b) / n }') a name"
fi
if awk -v r="$rw" -v t="$TARGET" 'BEGIN { exit !(r <= t) }'; then
	echo "target <= ${TARGET}x: met"
else
	echo "target <= ${TARGET}x: NOT met"
	exit 2
fi
