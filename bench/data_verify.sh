#!/bin/bash
# data_verify.sh: fscrub -x's data bandwidth against the device's limit,
# cold cache, on XFS and ext4.
#
# Acceptance target: fscrub -x reads file data at >= 0.9x the bandwidth of a
# raw O_DIRECT read of exactly the device ranges that hold file data on
# data set (a), and >= 0.7x on (b) and (c).  Data sets:
#   a  BIG_FILES x BIG_SIZE files (4 x 1 GiB) plus a fragmented file
#      (FRAG_SIZE, written 4 KiB at a time interleaved with a second file
#      of the same size, so each has ~FRAG_SIZE/4 KiB extents)
#   b  the Debian kernel source tree (~80k files, ~1.2 GiB)
#   c  NR_TINY (1 000 000) files of 100-2000 bytes in TINY_DIRS directories
#   d  (a) and (c) on one filesystem, smaller: D_BIG_FILES x BIG_SIZE files
#      and D_NR_TINY tiny files in D_TINY_DIRS directories (issue 22's
#      whole-run target: -x overlaps its reads with the metadata scan)
#
# For each filesystem and data set: an image under $BENCH_DIR, attached with
# `losetup --direct-io=on`, mkfs, mount, fill, sync, umount + mount.  Then
# bench/extents (nftw + FIEMAP, independent of fscrub) lists the 4 KiB
# aligned device ranges of all written file data, overlaps and exact
# neighbours merged, nothing else.  Then REPS rounds of, each after
#     sync; echo 3 > /proc/sys/vm/drop_caches
#   raw     bench/rawread DEV RANGES: O_DIRECT preads of <= RAW_CHUNK (4 MiB),
#           RAW_THREADS (4) in flight, exactly the listed ranges
#           (RAW_THREADS=u4: 4 in flight through io_uring)
#   fscrub  fscrub -n -x -v -T MNT
#   meta    fscrub -n -v -T MNT (META=1): the metadata scan alone; the
#           whole-run target is run <= TARGET_RUN x max(meta, raw)
#   tar     tar -C MNT -cf - . | cat >/dev/null
#   find    find MNT -xdev -printf '%i %n\n' >/dev/null (FIND=1): the cold
#           walk that stats every inode, which fscrub's whole run cannot
#           beat; raw/find is the best whole-run ratio any checker that
#           stats every file could reach (if its walk and its read
#           overlapped entirely)
# Bandwidth = bytes of file data (the list's total, which must equal
# fscrub's "bytes of file data") / median seconds; for fscrub both over its
# phase 5 wall time and over its whole run.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
# See bench/README.md for the knobs.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
REPS=${REPS:-3}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
FSTYPES=${FSTYPES:-"xfs ext4"}
DATASETS=${DATASETS:-"a b c"}
KEEP=${KEEP:-0}
BIG_FILES=${BIG_FILES:-4}
BIG_SIZE=${BIG_SIZE:-1G}
FRAG_SIZE=${FRAG_SIZE:-64M}
NR_TINY=${NR_TINY:-1000000}
TINY_DIRS=${TINY_DIRS:-1000}
RAW_THREADS=${RAW_THREADS:-4}
RAW_CHUNK=${RAW_CHUNK:-4M}
TAR=${TAR:-1}
FIND=${FIND:-1}
TARBALL=${TARBALL:-}
FSCRUB_ARGS=${FSCRUB_ARGS:-}
TARGET_a=${TARGET_a:-0.9}
TARGET_b=${TARGET_b:-0.7}
TARGET_c=${TARGET_c:-0.7}
TARGET_d=${TARGET_d:-0.7}
TARGET_RUN=${TARGET_RUN:-1.25}
META=${META:-1}
D_BIG_FILES=${D_BIG_FILES:-2}
D_NR_TINY=${D_NR_TINY:-200000}
D_TINY_DIRS=${D_TINY_DIRS:-200}

me=data_verify.sh
BIN_NAME=dv-bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
for k in REPS NR_TINY TINY_DIRS BIG_FILES D_BIG_FILES D_NR_TINY D_TINY_DIRS; do posint "$k"; done
for k in KEEP TAR FIND META; do flag01 "$k"; done
[[ $RAW_THREADS =~ ^u?[1-9][0-9]*$ ]] || die "RAW_THREADS must be N (threads) or uN (io_uring depth), not '$RAW_THREADS'"
for ds in $DATASETS; do
	case $ds in a|b|c|d) ;; *) die "DATASETS: unknown data set '$ds' (a, b, c, d)";; esac
	k=REPS_$ds
	if [ -n "${!k:-}" ]; then posint "$k"; fi
done
for fs in $FSTYPES; do
	case $fs in xfs|ext4) ;; *) die "FSTYPES: unknown filesystem '$fs' (xfs, ext4)";; esac
done
BIG_BYTES=$(numfmt --from=iec "$BIG_SIZE") || die "BIG_SIZE: not a size: $BIG_SIZE"
FRAG_BYTES=$(numfmt --from=iec "$FRAG_SIZE") || die "FRAG_SIZE: not a size: $FRAG_SIZE"
RAW_CHUNK_BYTES=$(numfmt --from=iec "$RAW_CHUNK") || die "RAW_CHUNK: not a size: $RAW_CHUNK"

# ---------------------------------------------------------------- tools
[ -x /usr/bin/time ] || need_pkg time
command -v cc >/dev/null || need_pkg gcc
for fs in $FSTYPES; do
	case $fs in
	xfs) command -v mkfs.xfs >/dev/null || need_pkg xfsprogs;;
	ext4) command -v mkfs.ext4 >/dev/null || need_pkg e2fsprogs;;
	esac
done

if [[ " $DATASETS " == *" b "* ]]; then
	command -v xz >/dev/null || need_pkg xz-utils
	TARBALL=$(find_tarball)
fi

# The helpers, and a private copy of fscrub.
LOGS=$BENCH_DIR/dv-logs
mkdir -p "$LOGS"
rm -f "$LOGS/"*
# with liburing if it is there (RAW_THREADS=uN then reads through io_uring)
cc -O2 -Wall -pthread -DHAVE_URING -o "$BIN/rawread" "$top/bench/rawread.c" -luring 2>/dev/null ||
	cc -O2 -Wall -pthread -o "$BIN/rawread" "$top/bench/rawread.c" || die "cannot build bench/rawread.c"
cc -O2 -Wall -o "$BIN/extents" "$top/bench/extents.c" || die "cannot build bench/extents.c"
cc -O2 -Wall -o "$BIN/mkdata" "$top/bench/mkdata.c" || die "cannot build bench/mkdata.c"
private_fscrub

# ---------------------------------------------------------------- helpers
image_size() {	# DS: image size in MiB
	case $1 in
	a) echo $(( (BIG_FILES * BIG_BYTES + 2 * FRAG_BYTES) * 5 / 4 / 1048576 + 1024 ));;
	b) echo 4096;;
	# one 4 KiB block per file, inodes (512 B on XFS, 256 B on ext4), directories
	c) echo $(( NR_TINY * 6144 / 1048576 + 1024 ));;
	d) echo $(( D_BIG_FILES * BIG_BYTES * 5 / 4 / 1048576 + D_NR_TINY * 6144 / 1048576 + 1024 ));;
	esac
}
mkfs_cmd() {	# FS DS DEV
	case $1 in
	xfs) echo "mkfs.xfs -f -q -m rmapbt=1 $3";;
	# lazy_itable_init=0: inode tables zeroed by mkfs, not by ext4lazyinit
	# during the timed runs; (c) needs more inodes than the default ratio
	ext4) if [ "$2" = c ] || [ "$2" = d ]; then
		local n=$NR_TINY
		[ "$2" = c ] || n=$D_NR_TINY
		echo "mkfs.ext4 -F -q -E lazy_itable_init=0 -N $((n + 65536)) $3"
	      else
		echo "mkfs.ext4 -F -q -E lazy_itable_init=0 $3"
	      fi;;
	esac
}
ds_desc() {
	case $1 in
	a) echo "$BIG_FILES x $BIG_SIZE + fragmented $FRAG_SIZE (+ its $FRAG_SIZE twin)";;
	b) echo "kernel tree $(basename "${TARBALL:-?}")";;
	c) echo "$NR_TINY tiny files (100-2000 B) in $TINY_DIRS dirs";;
	d) echo "$D_BIG_FILES x $BIG_SIZE + $D_NR_TINY tiny files in $D_TINY_DIRS dirs";;
	esac
}
populate() {	# DS MNT
	local i
	case $1 in
	# the fragmented pair first: on ext4, once a big file has been written
	# the allocator no longer alternates their blocks
	a) "$BIN/mkdata" frag "$2/frag" "$2/frag.twin" "$FRAG_BYTES"
	   for ((i = 0; i < BIG_FILES; i++)); do
		"$BIN/mkdata" big "$2/big$i" "$BIG_BYTES"
	   done;;
	b) tar -xJf "$TARBALL" -C "$2";;
	c) mkdir "$2/tiny"
	   "$BIN/mkdata" tiny "$2/tiny" "$NR_TINY" "$TINY_DIRS";;
	d) mkdir "$2/tiny"
	   "$BIN/mkdata" tiny "$2/tiny" "$D_NR_TINY" "$D_TINY_DIRS"
	   for ((i = 0; i < D_BIG_FILES; i++)); do
		"$BIN/mkdata" big "$2/big$i" "$BIG_BYTES"
	   done;;
	esac
}

# ---------------------------------------------------------------- header
echo "data_verify.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
[ -z "$FSCRUB_ARGS" ] || echo "fscrub options added: $FSCRUB_ARGS"
echo "reps: $REPS$(for ds in $DATASETS; do k=REPS_$ds; [ -n "${!k:-}" ] && printf ' (%s: %s)' "$ds" "${!k}"; done); cold cache (sync; drop_caches=3 before every run), loop --direct-io=on"
echo "raw: O_DIRECT reads of <= $RAW_CHUNK, $([[ $RAW_THREADS == u* ]] && echo "${RAW_THREADS#u} in flight (io_uring)" || echo "$RAW_THREADS in flight (pread threads)"); fscrub -n -x -v -T; tar -C MNT -cf - . | cat >/dev/null"
echo

TABLE=$LOGS/table
: >"$TABLE"
VERDICTS=()
FAILED_TARGET=0

# ---------------------------------------------------------------- per fs, data set
bench_one() {	# FS DS
	local fs=$1 ds=$2 img=$BENCH_DIR/dv-$1-$2.img mnt=$BENCH_DIR/dv-mnt-$1-$2
	local dev mkfs want stamp size t0 reps k r rc log blk s0 s1
	IMAGES+=("$img")
	MOUNTS+=("$mnt")
	mkdir -p "$mnt"
	mountpoint -q "$mnt" && die "$mnt is already mounted (a previous run's? umount it first)"
	[ -n "$(losetup -n -O NAME -j "$img" 2>/dev/null || true)" ] &&
		die "$img is already attached to a loop device (a previous run's? losetup -d it first)"
	size=$(image_size "$ds")
	want="$ds $(ds_desc "$ds") $(mkfs_cmd "$fs" "$ds" DEV) ${size}M"
	stamp=$img.ready
	if [ "$KEEP" = 1 ] && [ -f "$img" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		say "$fs/$ds: reusing $img (KEEP=1, same data set and mkfs)"
		dev=$(losetup -f --show --direct-io=on "$img")
		mount "$dev" "$mnt"
	else
		rm -f "$img" "$stamp"
		truncate -s "${size}M" "$img"
		dev=$(losetup -f --show --direct-io=on "$img")
		mkfs=$(mkfs_cmd "$fs" "$ds" "$dev")
		say "$fs/$ds: $mkfs (${size} MiB image)"
		$mkfs
		mount "$dev" "$mnt"
		say "$fs/$ds: writing $(ds_desc "$ds")"
		t0=$EPOCHREALTIME
		populate "$ds" "$mnt"
		sync
		say "$fs/$ds: written and synced in $(secs_since "$t0") s"
		# umount + mount: everything written back, log/journal checkpointed
		umount "$mnt"
		mount "$dev" "$mnt"
		echo "$want" >"$stamp"
	fi
	blk=${dev#/dev/}
	local dio
	dio=$(cat "/sys/block/$blk/loop/dio" 2>/dev/null || echo 0)
	[ "$dio" = 1 ] || say "WARNING: $dev is not using direct I/O: the host page cache may serve the image (runs not fully cold)"

	# The baseline's range list, before (and outside) the timed part.
	local ranges=$LOGS/$fs-$ds.ranges summary data nfiles nfrag
	t0=$EPOCHREALTIME
	"$BIN/extents" "$mnt" >"$ranges" 2>"$LOGS/$fs-$ds.extents.err" ||
		{ cat "$LOGS/$fs-$ds.extents.err" >&2; die "$fs/$ds: bench/extents failed"; }
	summary=$(tail -n 1 "$LOGS/$fs-$ds.extents.err")
	data=$(awk '{ print $6 }' <<<"$summary")
	nfiles=$(awk '{ print $2 }' <<<"$summary")
	say "$fs/$ds: extents in $(secs_since "$t0") s: $summary"
	if [ "$ds" = a ]; then
		nfrag=$(filefrag "$mnt/frag" | awk '{ print $2 }')
		say "$fs/$ds: filefrag: frag has $nfrag extents"
	fi

	k=REPS_$ds
	reps=${!k:-$REPS}
	local raw_t="" p5_t="" all_t="" tar_t="" find_t="" meta_t="" rss=0 ext=0 fdata="" engine="" rawb
	local raw_r="" fs_r="" tar_r="" p5 line
	readmib() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) / 2048 }'; }
	sectors() { awk '{ print $3 }' "/sys/block/$blk/stat"; }
	for ((r = 1; r <= reps; r++)); do
		# raw
		drop_caches
		s0=$(sectors)
		line=$("$BIN/rawread" "$dev" "$ranges" "$RAW_THREADS" "$RAW_CHUNK_BYTES") || die "$fs/$ds: rawread failed"
		s1=$(sectors)
		read -r rawb t0 <<<"$line"
		[ "$rawb" = "$data" ] || die "$fs/$ds: rawread read $rawb bytes, the list has $data"
		raw_t+=" $t0"; raw_r+=" $(readmib "$s0" "$s1")"
		say "$fs/$ds: rep $r/$reps  raw     $(printf '%8.3f' "$t0") s  $(mbps "$data" "$t0") MB/s  $(readmib "$s0" "$s1") MiB read"

		# fscrub
		drop_caches
		log=$LOGS/$fs-$ds.fscrub.$r.log
		rc=0
		s0=$(sectors)
		t0=$EPOCHREALTIME
		/usr/bin/time -f '%M' -o "$LOGS/time" "$FSCRUB" -n -x -v -T $FSCRUB_ARGS "$mnt" >"$log" 2>&1 || rc=$?
		t1=$(secs_since "$t0" 6)
		s1=$(sectors)
		if [ "$rc" -ne 0 ]; then
			say "FAIL: fscrub -n -x -v -T $mnt exited $rc; its output:"
			cat "$log" >&2
			die "fscrub must exit 0 on freshly written data"
		fi
		grep -E '^(Error|Warning)' "$log" >&2 && say "$fs/$ds: fscrub printed findings on fresh data (false alarms?)"
		p5=$(sed -n 's/^Phase 5: wall \([0-9.]*\)s.*/\1/p' "$log")
		line=$(grep 'bytes of file data' "$log" || true)
		[ -n "$p5" ] && [ -n "$line" ] || { cat "$log" >&2; die "$fs/$ds: no phase 5 device read in fscrub's output"; }
		fdata=$(sed -n 's/.*, \([0-9]*\) bytes of file data.*/\1/p' <<<"$line")
		engine=$(sed -n 's/.* in flight (\([^)]*\)).*/\1/p' <<<"$line")
		grep -q 'files whose extents are not all known\|reading file by file' "$log" &&
			say "$fs/$ds: WARNING: fscrub read some files file by file: $(grep 'file by file' "$log")"
		[ "$fdata" = "$data" ] || say "$fs/$ds: WARNING: fscrub's file data ($fdata bytes) != the baseline's list ($data bytes)"
		ext=$(sed -n 's/^Phase 3: .* \([0-9]*\) extents,.*/\1/p' "$log")
		k=$(cat "$LOGS/time" | tail -n 1)
		[[ $k =~ ^[0-9]+$ ]] && [ "$k" -gt "$rss" ] && rss=$k
		p5_t+=" $p5"; all_t+=" $t1"; fs_r+=" $(readmib "$s0" "$s1")"
		say "$fs/$ds: rep $r/$reps  fscrub  $(printf '%8.3f' "$t1") s  (phase 5 $p5 s, $(mbps "$data" "$p5") MB/s; whole run $(mbps "$data" "$t1") MB/s)  $(readmib "$s0" "$s1") MiB read, RSS $k KiB"

		# the metadata scan alone: the whole run's other bound
		if [ "$META" = 1 ]; then
			drop_caches
			rc=0
			t0=$EPOCHREALTIME
			"$FSCRUB" -n -v -T $FSCRUB_ARGS "$mnt" >"$LOGS/$fs-$ds.meta.$r.log" 2>&1 || rc=$?
			t1=$(secs_since "$t0" 6)
			[ "$rc" -eq 0 ] || { cat "$LOGS/$fs-$ds.meta.$r.log" >&2; die "$fs/$ds: fscrub -n exited $rc"; }
			meta_t+=" $t1"
			say "$fs/$ds: rep $r/$reps  meta    $(printf '%8.3f' "$t1") s"
		fi

		# tar
		if [ "$TAR" = 1 ]; then
			drop_caches
			s0=$(sectors)
			t0=$EPOCHREALTIME
			tar -C "$mnt" -cf - . | cat >/dev/null || die "$fs/$ds: tar failed"
			t1=$(secs_since "$t0" 6)
			s1=$(sectors)
			tar_t+=" $t1"; tar_r+=" $(readmib "$s0" "$s1")"
			say "$fs/$ds: rep $r/$reps  tar     $(printf '%8.3f' "$t1") s  $(mbps "$data" "$t1") MB/s  $(readmib "$s0" "$s1") MiB read"
		fi

		# find: the floor of any whole run that stats every inode
		if [ "$FIND" = 1 ]; then
			drop_caches
			t0=$EPOCHREALTIME
			find "$mnt" -xdev -printf '%i %n\n' >/dev/null || die "$fs/$ds: find failed"
			t1=$(secs_since "$t0" 6)
			find_t+=" $t1"
			say "$fs/$ds: rep $r/$reps  find    $(printf '%8.3f' "$t1") s"
		fi
	done

	local mraw mp5 mall mtar mfind rfind r5 rall rtar target v5 vall perm
	mraw=$(echo "$raw_t" | median); mp5=$(echo "$p5_t" | median); mall=$(echo "$all_t" | median)
	if [ "$TAR" = 1 ]; then mtar=$(echo "$tar_t" | median); rtar=$(ratio "$mraw" "$mtar"); else mtar=0; rtar=-; fi
	if [ "$FIND" = 1 ]; then mfind=$(echo "$find_t" | median 3); rfind=$(ratio "$mraw" "$mfind"); else mfind=-; rfind=-; fi
	r5=$(ratio "$mraw" "$mp5"); rall=$(ratio "$mraw" "$mall")
	perm=$(awk -v k="$rss" -v e="$ext" 'BEGIN { if (e > 0) printf "%.0f", k / e * 1e6; else print "-" }')
	k=TARGET_$ds; target=${!k}
	v5=$(awk -v r="$r5" -v t="$target" 'BEGIN { print (r >= t) ? "met" : "NOT met" }')
	vall=$(awk -v r="$rall" -v t="$target" 'BEGIN { print (r >= t) ? "met" : "NOT met" }')
	[ "$v5" = met ] && [ "$vall" = met ] || FAILED_TARGET=1
	local mmeta=- bound=- rbound=- vbound=""
	if [ "$META" = 1 ]; then
		mmeta=$(echo "$meta_t" | median 3)
		bound=$(awk -v a="$mmeta" -v b="$mraw" 'BEGIN { printf "%.3f", (a > b ? a : b) }')
		rbound=$(awk -v r="$mall" -v b="$bound" 'BEGIN { printf "%.2f", r / b }')
		vbound=$(awk -v r="$rbound" -v t="$TARGET_RUN" 'BEGIN { print (r <= t) ? "met" : "NOT met" }')
		[ "$vbound" = met ] || FAILED_TARGET=1
		vbound="; whole run / max(meta $mmeta s, raw $(printf '%.3f' "$mraw") s) = $rbound, target <= $TARGET_RUN: $vbound"
	fi
	printf '%-5s %-3s %8s %14s %9s %9s %9s %7s %7s %9s %7s %8s %8s %9s %9s %10s\n' "$fs" "$ds" "$nfiles" "$data" \
		"$(mbps "$data" "$mraw")" "$(mbps "$data" "$mp5")" "$(mbps "$data" "$mall")" "$r5" "$rall" \
		"$([ "$TAR" = 1 ] && mbps "$data" "$mtar" || echo -)" "$rtar" "$mfind" "$rfind" \
		"$((rss / 1024))" "$ext" "$perm" >>"$TABLE"
	VERDICTS+=("$fs/$ds: fscrub/raw $r5 (phase 5), $rall (whole run); target >= $target: phase 5 $v5, whole run $vall$([ "$FIND" = 1 ] && echo "; a cold find alone takes $mfind s (raw/find $rfind)" || true)$vbound")
	{
		echo "== $fs/$ds: $(ds_desc "$ds"), $nfiles files, $data bytes of file data, $reps cold runs each =="
		echo "raw (s):$raw_t    MiB read:$raw_r"
		echo "fscrub (s):$all_t    phase 5 (s):$p5_t    MiB read:$fs_r    engine: $engine"
		[ "$TAR" = 1 ] && echo "tar (s):$tar_t    MiB read:$tar_r"
		[ "$FIND" = 1 ] && echo "find (s):$find_t"
		[ "$META" = 1 ] && echo "meta, fscrub -n (s):$meta_t"
		echo "-- fscrub -v -T, rep $reps --"
		grep -E '^Phase [35]:' "$LOGS/$fs-$ds.fscrub.$reps.log" | sed "s|$BENCH_DIR|\$BENCH_DIR|g"
		echo
	} | tee "$LOGS/$fs-$ds.detail"

	cleanup_fs "$img" "$mnt"
	unset 'IMAGES[-1]' 'MOUNTS[-1]'
}

for ds in $DATASETS; do
	for fs in $FSTYPES; do
		bench_one "$fs" "$ds"
	done
done

echo "== medians (MB/s = bytes of file data / median seconds / 1e6) =="
printf '%-5s %-3s %8s %14s %9s %9s %9s %7s %7s %9s %7s %8s %8s %9s %9s %10s\n' fs set files "data bytes" \
	"raw MB/s" "p5 MB/s" "run MB/s" "p5/raw" "run/raw" "tar MB/s" "tar/raw" "find s" "raw/find" "RSS MiB" extents "KiB/1M ext"
cat "$TABLE"
echo
echo "== verdict =="
for v in "${VERDICTS[@]}"; do echo "$v"; done
echo "logs: $LOGS"
[ "$FAILED_TARGET" = 0 ] || exit 2
exit 0
