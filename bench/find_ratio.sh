#!/bin/bash
# find_ratio.sh: fscrub's wall time against find's on a kernel source tree,
# cold cache, on XFS and ext4.
#
# Acceptance target: fscrub's median wall time <= 2.0x find's median, on a
# ~90k-file tree, caches dropped before every run.
#
# For each filesystem: a sparse image under $BENCH_DIR, attached with
# `losetup --direct-io=on` (so the host page cache never holds the image
# and dropping caches really makes the next run cold), mkfs, mount,
# extract the Debian linux-source tarball into it, then REPS times,
# alternating:
#     sync; echo 3 > /proc/sys/vm/drop_caches; time find MNT -xdev -printf '%i %n\n'
#     sync; echo 3 > /proc/sys/vm/drop_caches; time fscrub MNT
# (plus `fscrub -j N MNT` for each N in $JOBS, and `env $ALT_ENV fscrub MNT`
# if ALT_ENV is set, in the same rotation).
# Then one warm run of each, for scale, and one cold `fscrub -v -T MNT`
# whose output (phase timings) is printed.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
# See bench/README.md for the knobs.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
REPS=${REPS:-5}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
FSTYPES=${FSTYPES:-"xfs ext4"}
IMG_SIZE=${IMG_SIZE:-4G}
KEEP=${KEEP:-0}
JOBS=${JOBS:-}
REMOUNT=${REMOUNT:-0}
VERBOSE_RUN=${VERBOSE_RUN:-1}
WARM=${WARM:-1}
TARGET=${TARGET:-2.0}
TARBALL=${TARBALL:-}
ALT_ENV=${ALT_ENV:-}

me=find_ratio.sh
BIN_NAME=bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
posint REPS
for k in KEEP REMOUNT VERBOSE_RUN WARM; do flag01 "$k"; done
read -ra JOBS_A <<<"$JOBS"
for j in "${JOBS_A[@]}"; do [[ $j =~ ^[1-9][0-9]*$ ]] || die "JOBS must list positive integers, not '$j'"; done
read -ra ALT_ENV_A <<<"$ALT_ENV"
for a in "${ALT_ENV_A[@]}"; do [[ $a =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "ALT_ENV must list VAR=VALUE words, not '$a'"; done
for fs in $FSTYPES; do
	case $fs in xfs|ext4) ;; *) die "FSTYPES: unknown filesystem '$fs' (xfs, ext4)";; esac
done
[ -x /usr/bin/time ] || need_pkg time
command -v xz >/dev/null || need_pkg xz-utils
for fs in $FSTYPES; do
	case $fs in
	xfs) command -v mkfs.xfs >/dev/null || need_pkg xfsprogs;;
	ext4) command -v mkfs.ext4 >/dev/null || need_pkg e2fsprogs;;
	esac
done

TARBALL=$(find_tarball)

# A private copy of the binary: a rebuild of build/fscrub during the run
# (another developer, ninja in a loop) cannot mix two binaries in one table.
mkdir -p "$BENCH_DIR/logs"
rm -f "$BENCH_DIR/logs/"*
private_fscrub

# ---------------------------------------------------------------- helpers

# Sets ELAPSED (seconds, microsecond resolution, from $EPOCHREALTIME),
# MAXRSS (KiB, GNU time's %M) and CPU (user + system seconds, %U + %S);
# the command's exit status is returned.
ELAPSED=0 MAXRSS=0 CPU=0
timed() {	# OUT -- CMD...: stdout of CMD to OUT, stderr appended too
	local out=$1 t0 t1 rc=0
	shift
	t0=$EPOCHREALTIME
	/usr/bin/time -f '%M %U %S' -o "$BENCH_DIR/logs/time" "$@" >"$out" 2>&1 || rc=$?
	t1=$EPOCHREALTIME
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
	read -r MAXRSS CPU < <(tail -n 1 "$BENCH_DIR/logs/time" |
		awk '{ printf "%d %.2f", $1, $2 + $3 }') || true
	[[ $MAXRSS =~ ^[0-9]+$ ]] || MAXRSS=0
	return "$rc"
}

minimum() { tr ' ' '\n' | grep . | sort -g | head -n 1 | awk '{ printf "%.3f", $1 }'; }

mkfs_cmd() {	# FS DEV
	case $1 in
	xfs) echo "mkfs.xfs -f -q -m rmapbt=1 $2";;
	# lazy_itable_init=0: inode tables zeroed by mkfs, not by the ext4lazyinit
	# kernel thread in the background of the timed runs (same on-disk format)
	ext4) echo "mkfs.ext4 -F -q -E lazy_itable_init=0 $2";;
	esac
}

fscrub_ok() {	# LOG RC LABEL: fail loudly on a nonzero exit
	if [ "$2" -ne 0 ]; then
		say "FAIL: $3 exited $2; its output:"
		cat "$1" >&2
		die "fscrub must exit 0 on a freshly extracted kernel tree"
	fi
}

# ---------------------------------------------------------------- header
NCPU=$(nproc)
echo "find_ratio.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "kernel $(uname -r), $NCPU CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM"
echo "fscrub: $FSCRUB_SRC ($("$FSCRUB" -V 2>&1 | head -n 1); sha256 $(sha256sum "$FSCRUB" | cut -c1-12); built $(date -u -r "$FSCRUB" '+%Y-%m-%d %H:%M:%S UTC'))"
echo "tree: $TARBALL"
echo "reps: $REPS, cold cache (sync; drop_caches=3$([ "$REMOUNT" = 1 ] && echo "; umount+mount") before every run), loop --direct-io=on, image $IMG_SIZE sparse"
if [ ${#JOBS_A[@]} -gt 0 ]; then
	echo "extra fscrub variants: $(for j in "${JOBS_A[@]}"; do printf -- '-j %s  ' "$j"; done)"
fi
[ -n "$ALT_ENV" ] && echo "extra fscrub variant: env $ALT_ENV fscrub"
echo

VERDICTS=()
FAILED_TARGET=0

# ---------------------------------------------------------------- per fs
bench_fs() {	# FS
	local fs=$1 img=$BENCH_DIR/$1.img mnt=$BENCH_DIR/mnt-$1 dev stamp want files
	local mkfs r v j log rc
	IMAGES+=("$img")
	MOUNTS+=("$mnt")
	mkdir -p "$mnt"
	mountpoint -q "$mnt" && die "$mnt is already mounted (a previous run's? umount it first)"
	[ -n "$(losetup -n -O NAME -j "$img" 2>/dev/null || true)" ] &&
		die "$img is already attached to a loop device (a previous run's? losetup -d it first)"

	want="$TARBALL $(mkfs_cmd "$fs" DEV) $IMG_SIZE"
	stamp=$img.ready
	if [ "$KEEP" = 1 ] && [ -f "$img" ] && [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "$want" ]; then
		say "$fs: reusing $img (KEEP=1, same tarball and mkfs)"
		dev=$(losetup -f --show --direct-io=on "$img")
		mount "$dev" "$mnt"
		files=$(sed -n 2p "$stamp")
	else
		rm -f "$img" "$stamp"
		truncate -s "$IMG_SIZE" "$img"
		dev=$(losetup -f --show --direct-io=on "$img")
		mkfs=$(mkfs_cmd "$fs" "$dev")
		say "$fs: $mkfs"
		$mkfs
		mount "$dev" "$mnt"
		say "$fs: extracting $(basename "$TARBALL") into $mnt"
		t0=$EPOCHREALTIME
		tar -xJf "$TARBALL" -C "$mnt"
		say "$fs: extracted in $(secs_since "$t0") s"
		files=$(find "$mnt" -xdev | wc -l)
		sync
		# Unmount and mount again: everything written back and the journal
		# or log checkpointed, so no metadata of the extraction stays
		# pinned in memory where drop_caches cannot drop it.
		umount "$mnt"
		mount "$dev" "$mnt"
		printf '%s\n%s\n' "$want" "$files" >"$stamp"
	fi
	if [ "$(cat "/sys/block/${dev#/dev/}/loop/dio" 2>/dev/null || echo 0)" != 1 ]; then
		say "WARNING: $dev is not using direct I/O: the host page cache may serve the image (runs not fully cold)"
	fi
	say "$fs: $files entries (find $mnt -xdev | wc -l), $(df -h --output=used "$mnt" | tail -n 1 | tr -d ' ') used, on $dev"

	# variants: 0 = find, 1 = fscrub, 2.. = fscrub -j N, then env $ALT_ENV fscrub
	local -a label times rss reads cpus
	label=("find -printf '%i %n\\n'" "fscrub")
	for j in "${JOBS_A[@]}"; do
		label+=("fscrub -j $j")
	done
	[ -n "$ALT_ENV" ] && label+=("$ALT_ENV fscrub")
	local nvar=${#label[@]}
	for ((v = 0; v < nvar; v++)); do times[v]=""; rss[v]=0; reads[v]=""; cpus[v]=""; done

	local blk=${dev#/dev/}
	cold() {
		if [ "$REMOUNT" = 1 ]; then
			umount "$mnt"
			mount "$dev" "$mnt"
		fi
		drop_caches
	}
	# run_variant V: one timed run; sets ELAPSED, MAXRSS and READ_MIB (what
	# the loop device read during the run: ~0 means the run was not cold)
	READ_MIB=0
	run_variant() {
		local v=$1 log=$BENCH_DIR/logs/$fs.$1.log rc=0 s0 s1 j
		s0=$(awk '{ print $3 }' "/sys/block/$blk/stat")
		case $v in
		0) timed /dev/null find "$mnt" -xdev -printf '%i %n\n' || rc=$?
		   [ "$rc" -eq 0 ] || die "find exited $rc on $mnt";;
		1) timed "$log" "$FSCRUB" "$mnt" || rc=$?
		   fscrub_ok "$log" "$rc" "fscrub $mnt";;
		*) if [ "$v" -ge $((2 + ${#JOBS_A[@]})) ]; then
			timed "$log" env "${ALT_ENV_A[@]}" "$FSCRUB" "$mnt" || rc=$?
			fscrub_ok "$log" "$rc" "env $ALT_ENV fscrub $mnt"
		   else
			j=${JOBS_A[v - 2]}
			timed "$log" "$FSCRUB" -j "$j" "$mnt" || rc=$?
			fscrub_ok "$log" "$rc" "fscrub -j $j $mnt"
		   fi;;
		esac
		s1=$(awk '{ print $3 }' "/sys/block/$blk/stat")
		READ_MIB=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.1f", (b - a) / 2048 }')
		if [ "$v" -ge 1 ] && grep -qE '^(Error|Warning)' "$log"; then
			say "$fs: ${label[v]} printed findings on a fresh kernel tree (false alarms?):"
			grep -E '^(Error|Warning)' "$log" | head -n 20 >&2
		fi
	}
	for ((r = 1; r <= REPS; r++)); do
		for ((v = 0; v < nvar; v++)); do
			cold
			run_variant "$v"
			times[v]="${times[v]} $ELAPSED"
			reads[v]="${reads[v]} $READ_MIB"
			cpus[v]="${cpus[v]} $CPU"
			[ "$MAXRSS" -gt "${rss[v]}" ] && rss[v]=$MAXRSS
			printf '%s: rep %d/%d  %-22s %8.3f s  %5.2f s CPU  %5.1f MiB RSS  %5.1f MiB read\n' "$fs" "$r" "$REPS" \
				"${label[v]}" "$ELAPSED" "$CPU" "$(awk -v k="$MAXRSS" 'BEGIN { print k / 1024 }')" "$READ_MIB" >&2
		done
	done
	# For scale: the same two commands with warm caches (find once first).
	local wfind wfscrub
	if [ "$WARM" = 1 ]; then
		find "$mnt" -xdev >/dev/null
		run_variant 0; wfind=$ELAPSED
		run_variant 1; wfscrub=$ELAPSED
	fi

	local fmed med mn ratio verdict
	fmed=$(echo "${times[0]}" | median 3)
	{
		echo "== $fs ($files entries, $REPS cold runs each) =="
		printf '%-22s %9s %9s %8s %8s %10s %12s\n' "command" "median s" "min s" "ratio" "CPU s" "peak RSS" "read/run"
		for ((v = 0; v < nvar; v++)); do
			med=$(echo "${times[v]}" | median 3)
			mn=$(echo "${times[v]}" | minimum)
			ratio=$(awk -v a="$med" -v b="$fmed" 'BEGIN { printf "%.2fx", a / b }')
			printf '%-22s %9s %9s %8s %8.2f %6.1f MiB %8.1f MiB\n' "${label[v]}" "$med" "$mn" "$ratio" \
				"$(echo "${cpus[v]}" | median 3)" "$(awk -v k="${rss[v]}" 'BEGIN { print k / 1024 }')" \
				"$(echo "${reads[v]}" | median 3)"
		done
		echo "runs (s): find:${times[0]}"
		for ((v = 1; v < nvar; v++)); do echo "          ${label[v]}:${times[v]}"; done
		if [ "$WARM" = 1 ]; then
			printf 'warm (no drop_caches, 1 run): find %.3f s, fscrub %.3f s\n' "$wfind" "$wfscrub"
		fi
	} | tee "$BENCH_DIR/logs/$fs.table"
	med=$(echo "${times[1]}" | median 3)
	ratio=$(awk -v a="$med" -v b="$fmed" 'BEGIN { printf "%.2f", a / b }')
	if awk -v r="$ratio" -v t="$TARGET" 'BEGIN { exit !(r <= t) }'; then
		verdict="target <= ${TARGET}x: met"
	else
		verdict="target <= ${TARGET}x: NOT met"
		FAILED_TARGET=1
	fi
	echo "$fs: fscrub/find = ${ratio}x (median ${med} s / ${fmed} s), $verdict"
	echo
	VERDICTS+=("$fs: fscrub/find = ${ratio}x  $verdict")

	if [ "$VERBOSE_RUN" = 1 ]; then
		cold
		log=$BENCH_DIR/logs/$fs.vT.log
		rc=0
		timed "$log" "$FSCRUB" -v -T "$mnt" || rc=$?
		echo "-- $fs: fscrub -v -T $mnt (cold, untimed by the table; exit $rc, wall $(printf '%.3f' "$ELAPSED") s) --"
		sed "s|$BENCH_DIR|\$BENCH_DIR|g" "$log"
		echo
		fscrub_ok "$log" "$rc" "fscrub -v -T $mnt"
		if grep -q '^Error' "$log"; then
			say "$fs: fscrub -v -T printed Error lines on a fresh kernel tree (false alarms):"
			grep '^Error' "$log" >&2
		fi
	fi

	cleanup_fs "$img" "$mnt"
	unset 'IMAGES[-1]' 'MOUNTS[-1]'
}

for fs in $FSTYPES; do
	bench_fs "$fs"
done

echo "== verdict =="
for v in "${VERDICTS[@]}"; do echo "$v"; done
echo "logs: $BENCH_DIR/logs"
[ "$FAILED_TARGET" = 0 ] || exit 2
exit 0
