#!/bin/bash
# public_images.sh: fscrub -n on the filesystem images of e2fsprogs' and
# btrfs-progs' own test suites, against their offline checkers.
#
# The images (e2fsprogs: tests/*/image.gz; btrfs-progs:
# tests/fsck-tests/*/*.img, .img.xz (btrfs-image dumps) and .raw.xz) come
# from Debian's source packages, fetched with apt-get source through a
# private deb-src list under $BENCH_DIR (the system's sources, lists and
# caches are not touched), or from a directory that holds the unpacked
# sources.  For each image:
#   1. the offline checker (e2fsck -fn, btrfs check --readonly) on the
#      unmounted image: the verdict before the mount;
#   2. the image mounted rw, else ro (ext4: ro,norecovery; btrfs: ro, then
#      ro,rescue=all), and fscrub -n -v on it;
#   3. the checker again once it is unmounted (the kernel heals some images
#      at mount: a journal replayed, an orphan list processed).
# A Markdown table goes to stdout: per image the mount mode, both verdicts,
# fscrub's exit code and the check ids of its errors; then, per kind of
# damage the checker still saw after the mount and fscrub did not (exit
# without bit 4), a count.  The kind is the checker's first complaint's
# place: e2fsck's pass, btrfs check's step.  Progress goes to stderr.
#
#   sudo bench/public_images.sh [SRCDIR] > table.md
#
# Knobs: BENCH_DIR (/tmp/public_images), SUITE (Debian suite, bookworm),
# ONLY (an extended regex the image's name must match), TIMEOUT (seconds
# per fscrub run, 300), FSCRUB (build/fscrub), KEEP (1: leave the images).
set -eu
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=public_images.sh
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"

BENCH_DIR=${BENCH_DIR:-/tmp/public_images}
SUITE=${SUITE:-bookworm}
ONLY=${ONLY:-.}
TIMEOUT=${TIMEOUT:-300}
KEEP=${KEEP:-0}
FSCRUB=${FSCRUB:-$top/build/fscrub}
BIN_NAME=bin
posint TIMEOUT
flag01 KEEP
SRC=${1:-}

bench_setup
private_fscrub
for t in e2fsck btrfs btrfs-image xz; do
	command -v "$t" >/dev/null || die "$t is needed (e2fsprogs, btrfs-progs, xz-utils)"
done

if [ -z "$SRC" ]; then
	SRC=$BENCH_DIR/src
	say "e2fsprogs' and btrfs-progs' test images ($SUITE) in $SRC"
	"$top/tools/fsck-test-images" "$SRC" "$SUITE" >/dev/null || die "no test images"
fi
[ -d "$SRC" ] || die "$SRC is not a directory"

# "IMAGE FSTYPE" for every image of both suites.
list_images() {
	local f
	for f in "$SRC"/e2fsprogs-*/tests/*/image.gz; do
		[ -e "$f" ] && echo "$f ext4"
	done
	for f in "$SRC"/btrfs-progs-*/tests/fsck-tests/*/*.img "$SRC"/btrfs-progs-*/tests/fsck-tests/*/*.img.xz \
		 "$SRC"/btrfs-progs-*/tests/fsck-tests/*/*.raw.xz; do
		[ -e "$f" ] && echo "$f btrfs"
	done
}

# The image's name in the table: its test's directory, and the file if not image.gz.
image_name() {	# FILE
	local dir base
	dir=$(basename "$(dirname "$1")")
	base=$(basename "$1")
	[ "$base" = image.gz ] && echo "$dir" || echo "$dir/$base"
}

# The image as a raw file at $2; false if it cannot be made.
unpack() {	# FILE OUT
	case $1 in
	*.gz) gzip -dc "$1" >"$2" ;;
	*.raw.xz) xz -dc "$1" >"$2" ;;
	*.img.xz) xz -dc "$1" >"$2.dump" && btrfs-image -r "$2.dump" "$2" >/dev/null 2>&1
		  local rc=$?; rm -f "$2.dump"; return $rc ;;
	*.img) btrfs-image -r "$1" "$2" >/dev/null 2>&1 ;;
	esac
}

# The checker's verdict on the unmounted image into VERDICT: "clean",
# "errors" or "fails (N)"; its first complaint's place into KIND.
VERDICT='' KIND=''
check_offline() {	# FSTYPE IMG
	local out rc
	if [ "$1" = ext4 ]; then
		out=$(timeout 120 e2fsck -fn "$2" 2>&1) && rc=0 || rc=$?
		KIND=$(awk '/^Pass [0-9]/ { pass = $1 " " $2; sub(":", "", pass); next }
			    /^e2fsck [0-9]/ || /^$/ || /files \(/ || /^Fix\? no/ || /Clear\? no/ { next }
			    { print (pass ? pass : "superblock/journal"); exit }' <<<"$out")
	else
		out=$(timeout 120 btrfs check --readonly "$2" 2>&1) && rc=0 || rc=$?
		KIND=$(awk '/^\[[0-9]\/[0-9]\] checking/ { step = $3 ($4 == "" ? "" : " " $4); next }
			    /ERROR|error|wrong|mismatch|missing|corrupt/ { print (step ? step : "opening"); exit }' <<<"$out")
	fi
	case $rc in
	0) VERDICT=clean ;;
	1|4|12) VERDICT=errors ;;	# e2fsck 4 (12: and an operational error), btrfs 1
	*) VERDICT="fails ($rc)" ;;
	esac
}

# Mount DEV on MNT as rw, else read-only; the mode used, or false.
mount_some() {	# FSTYPE DEV MNT
	local opts
	if [ "$1" = ext4 ]; then
		for opts in rw,errors=continue ro,errors=continue ro,norecovery; do
			mount -t ext4 -o "$opts" "$2" "$3" 2>/dev/null && { echo "$opts"; return 0; }
		done
	else
		for opts in rw ro ro,rescue=all; do
			mount -t btrfs -o "$opts" "$2" "$3" 2>/dev/null &&
				{ echo "$opts"; return 0; }
		done
	fi
	return 1
}

declare -A MISSED=()
NR=0 NR_MOUNTED=0 NR_MISSED=0
machine_line | sed 's/^/    /'
echo
echo "| image | fs | mount | checker before | after | fscrub exit | fscrub errors (check ids) | seconds |"
echo "|---|---|---|---|---|---|---|---|"
img=$BENCH_DIR/img.raw mnt=$BENCH_DIR/mnt
IMAGES+=("$img") MOUNTS+=("$mnt")
# Each image's loop device leaves the kernel's btrfs device list as it is detached.
detach() {	# FSTYPE DEV
	[ "$1" = btrfs ] && btrfs device scan --forget "$2" 2>/dev/null
	losetup -d "$2"
}
while read -r file fstype; do
	name=$(image_name "$file")
	[[ $name =~ $ONLY ]] || continue
	NR=$((NR + 1))
	if ! unpack "$file" "$img"; then
		echo "| $name | $fstype | (cannot be unpacked) | | | | | |"
		cleanup_fs "$img" "$mnt"; continue
	fi
	check_offline "$fstype" "$img"
	before=$VERDICT
	dev=$(losetup -f --show "$img")
	mkdir -p "$mnt"
	if ! mode=$(mount_some "$fstype" "$dev" "$mnt"); then
		detach "$fstype" "$dev"
		echo "| $name | $fstype | does not mount | $before | | | | |"
		cleanup_fs "$img" "$mnt"; continue
	fi
	NR_MOUNTED=$((NR_MOUNTED + 1))
	say "$name: mounted $mode"
	t0=$EPOCHREALTIME
	out=$(timeout "$TIMEOUT" "$FSCRUB" -n -v --no-state "$mnt" 2>&1) && rc=0 || rc=$?
	secs=$(secs_since "$t0")
	ids=$(grep -o '^Error: .*\[[a-z0-9_.]*\]$' <<<"$out" | sed 's/.*\[\(.*\)\]$/\1/' |
	      sort | uniq -c | awk '{ printf "%s%s%s", (NR > 1 ? ", " : ""), $2, ($1 > 1 ? " x" $1 : "") }')
	umount "$mnt" || umount -l "$mnt"
	detach "$fstype" "$dev"
	check_offline "$fstype" "$img"
	after=$VERDICT
	echo "| $name | $fstype | $mode | $before | $after | $rc | ${ids:--} | $secs |"
	if [ "$after" = errors ] && [ $((rc & 4)) -eq 0 ]; then
		NR_MISSED=$((NR_MISSED + 1))
		MISSED["$fstype: ${KIND:-unknown}"]=$((${MISSED["$fstype: ${KIND:-unknown}"]:-0} + 1))
	fi
	cleanup_fs "$img" "$mnt"
done < <(list_images)

echo
echo "$NR images, $NR_MOUNTED mounted; $NR_MISSED that the checker still finds damaged after the mount and fscrub passes (no exit bit 4), by where the checker first complained:"
echo
echo "| missed kind | images |"
echo "|---|---|"
for k in "${!MISSED[@]}"; do
	echo "| $k | ${MISSED[$k]} |"
done | sort
