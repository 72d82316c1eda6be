#!/usr/bin/env bash
# The big-snapshot measurement of issue 20, in one run: Python's pickle.load of the same file (the first thing
# PyTorch's _memory_viz.py does) beside gpumem's replay --check, analyze and report, for one or more builds,
# interleaved round by round so that every ratio it prints compares figures taken on the same clock.
#
#   scripts/big-snapshots.sh [--rounds N] [--dir DIR] [--steps N] [--1g] [LAUNCHER...]
#
# LAUNCHER: a checkout's ./gpumem (default: this checkout's), e.g. a worktree of the commit before a change.
# --dir: where the snapshots and reports go (default: target/big-snapshots); a snapshot already there is reused.
# --steps: demo steps of the main snapshot (default 2000: 276 MB, 1.48 M allocations; fewer for a quick look).
# --1g: also the 1 GB snapshot (demo --steps 7500), one round, and Chromium's --dump-dom of its report when a
#       Chromium is installed.
# Needs GNU time (/usr/bin/time, Debian package "time"); python3 is optional (its row is left out without it).
# Prints one line per run (command, build, round, wall s, peak RSS MiB, user CPU s, exit status) as it goes, then
# per command and build the range of walls, the largest RSS and the median wall over Python's median.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
rounds=3
dir="$root/target/big-snapshots"
steps=2000
big1g=0
launchers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --1g) big1g=1; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "big-snapshots: unknown option $1" >&2; exit 2 ;;
    *) launchers+=("$(readlink -f "$1")"); shift ;;
  esac
done
[ ${#launchers[@]} -gt 0 ] || launchers=("$root/gpumem")
for l in "${launchers[@]}"; do
  [ -x "$l" ] || { echo "big-snapshots: $l is not an executable gpumem launcher" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "big-snapshots: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
case "$rounds" in ''|*[!0-9]*|0) echo "big-snapshots: --rounds wants a positive integer" >&2; exit 2 ;; esac
mkdir -p "$dir"
results="$dir/runs.tsv"
: > "$results"

# A build's name in the table: its checkout's short commit, with "+" when the checkout has uncommitted changes to
# tracked files, else its folder.
name() {
  local d c; d=$(dirname "$1")
  if c=$(git -C "$d" rev-parse --short HEAD 2>/dev/null); then
    git -C "$d" diff --quiet HEAD 2>/dev/null || c="$c+"
    echo "$c"
  else
    basename "$d"
  fi
}
seen_names=" "
for l in "${launchers[@]}"; do
  n=$(name "$l")
  case "$seen_names" in *" $n "*) echo "big-snapshots: two builds are both named $n: the same checkout twice, or two checkouts of one commit" >&2; exit 2 ;; esac
  seen_names="$seen_names$n "
done

# run LABEL BUILD ROUND CMD...: one timed run, appended to the results.
run() {
  local label=$1 build=$2 round=$3; shift 3
  local err="$dir/time.err" status=0
  /usr/bin/time -v "$@" > "$dir/run.out" 2> "$err" || status=$?
  local wall rss user
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$err")
  rss=$(awk -F': ' '/Maximum resident set size/ { printf "%d", $2 / 1024 }' "$err")
  user=$(awk -F': ' '/User time/ { print $2 }' "$err")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$build" "$round" "$wall" "$rss" "$user" "$status" | tee -a "$results"
  if [ "$status" != 0 ]; then
    echo "big-snapshots: $label ($build) exited $status:" >&2
    tail -n 5 "$err" >&2
  fi
}

write_snapshot() { # FILE STEPS [JAVA_OPTS]
  [ -s "$1" ] && return
  echo "big-snapshots: writing $1 (demo --steps $2)..." >&2
  GPUMEM_JAVA_OPTS="${3:-}" "${launchers[0]}" demo --steps "$2" --capacity 80GiB --no-min-capacity --snapshot "$1" > /dev/null
}
# One untimed run per build first: a launcher rebuilds its jar when sources changed and trains its class-data
# archive on first use, neither of which belongs in the figures.
for l in "${launchers[@]}"; do "$l" --help > /dev/null; done
big="$dir/big-$steps.pickle"
write_snapshot "$big" "$steps"
# Likewise the AOT cache a launcher writes before its first command on a large file.
for l in "${launchers[@]}"; do "$l" replay --check "$big" > /dev/null 2>&1 || true; done
tiny="$root/../shared/traces/tiny-forward.pickle"
has_python=0
command -v python3 > /dev/null && has_python=1
echo -e "command\tbuild\tround\twall_s\trss_mib\tuser_s\texit" >&2

for round in $(seq "$rounds"); do
  for l in "${launchers[@]}"; do
    b=$(name "$l")
    for i in 1 2 3; do run --help "$b" "$round" "$l" --help; done
    if [ -f "$tiny" ]; then
      for i in 1 2 3; do run "replay --check tiny-forward" "$b" "$round" "$l" replay --check "$tiny"; done
    fi
  done
  if [ "$has_python" = 1 ]; then
    run "python pickle.load" - "$round" python3 -c 'import pickle, sys; pickle.load(open(sys.argv[1], "rb"))' "$big"
  fi
  for l in "${launchers[@]}"; do
    b=$(name "$l")
    run "replay --check" "$b" "$round" "$l" replay --check "$big"
    run analyze "$b" "$round" "$l" analyze "$big"
    run report "$b" "$round" "$l" report "$big" -o "$dir/report-$b.html"
  done
done

if [ "$big1g" = 1 ]; then
  g="$dir/big-7500.pickle"
  write_snapshot "$g" 7500 -Xmx4g
  for l in "${launchers[@]}"; do
    b=$(name "$l")
    run "replay --check 1 GB" "$b" 1 "$l" replay --check "$g"
    run "analyze 1 GB" "$b" 1 "$l" analyze "$g"
    run "report 1 GB" "$b" 1 "$l" report "$g" -o "$dir/report-1g-$b.html"
    chromium=$(command -v chromium || command -v chromium-browser || true)
    if [ -n "$chromium" ]; then
      run "chromium --dump-dom 1 GB report" "$b" 1 "$chromium" --headless --no-sandbox --disable-gpu \
        --dump-dom "file://$dir/report-1g-$b.html"
    fi
  done
fi

# Reports of the same file by different builds should be the same bytes.
first=""
for l in "${launchers[@]}"; do
  f="$dir/report-$(name "$l").html"
  if [ -z "$first" ]; then first=$f; elif cmp -s "$first" "$f"; then
    echo "big-snapshots: $(basename "$f") is byte-identical to $(basename "$first")"
  else
    echo "big-snapshots: $(basename "$f") differs from $(basename "$first")"
  fi
done

echo
awk -F'\t' '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    key = $1 "\t" $2
    if (!(key in walls)) order[++k] = key
    walls[key] = walls[key] " " $4
    if ($5 + 0 > rss[key]) rss[key] = $5 + 0
    if (!(key in lo) || $4 + 0 < lo[key]) lo[key] = $4 + 0
    if ($4 + 0 > hi[key]) hi[key] = $4 + 0
    if ($1 == "python pickle.load") py = py " " $4
  }
  END {
    pym = py == "" ? 0 : median(substr(py, 2))
    printf "%-34s %-10s %17s %9s %12s\n", "command", "build", "wall s (min-max)", "RSS MiB", "median/python"
    for (i = 1; i <= k; i++) {
      split(order[i], f, "\t")
      m = median(substr(walls[order[i]], 2))
      printf "%-34s %-10s %8.2f-%-8.2f %9d %12s\n", f[1], f[2], lo[order[i]], hi[order[i]], rss[order[i]],
        (pym > 0 && (f[1] == "replay --check" || f[1] == "analyze" || f[1] == "report")) ? sprintf("%.2fx", m / pym) : ""
    }
  }' "$results"
echo "big-snapshots: every run is in $results"
