# Sourced by ./gpumem: the JVM's JIT tiers and heap bound, chosen from the command's arguments.
#
# JIT: a command runs for a second or a few, over which C2's compilations cost more CPU than its faster code
# saves (measured on 2 cores: compare 3 configs on lm2.7b 2.0 -> 1.25 s CPU, replay --check lm2.7b 1.43 -> 0.91,
# demo 3.6 -> 1.8, analyze gnn 2.2 -> 1.3), so the launcher stops at C1's optimised code. A long command keeps
# the full tiers, since C2's code runs it about twice as fast (replay --check of a 276 MB snapshot: 24.9 s with
# C1 only, 12.6 s with C2): a warm benchmark (plan --repeat), and any command given a file of 64 MiB or more
# (a snapshot that size takes tens of seconds to read, replay and analyse; the real traces, at most a few MB,
# stay on C1). The size test costs one find over the arguments that name regular files, only when there are
# such arguments (none for --help), and nothing else: the arguments' text is matched with shell built-ins.
# GPUMEM_JAVA_OPTS=-XX:TieredStopAtLevel=4 (or =1) forces either choice.
# Inlining, for the same large files: C2 does not inline the exact allocator's malloc and free into the replay
# loop (StreamRunner.play). Inlined, the loop is one compilation of 7 KB of bytecode that C2 compiled seven times
# in one analyze, again after each deoptimisation in allocator code (a max_split_size_mb run taking a branch the
# default configuration's runs never took); apart, a deoptimisation recompiles only the allocator method. analyze
# of a 276 MB snapshot on 2 cores: 7.24-7.77 s against 7.55-9.05 s, user CPU 12.0-13.4 s against 13.0-14.9 s (six
# alternated pairs); the mostly warm 1 GB analyze is unchanged (23.2 and 27.0 s against 23.3 and 27.3 s).
# LauncherSizingTest checks that the methods named exist.
# The same 64 MiB is where compare, analyze and report start AllocatorWarmUp beside the reading, so that C2's
# first compilation of the allocator has seen every configuration's branches (LauncherSizingTest ties the two).
# Heap, for the same large files: left alone, the serial collector grows its heap rather than collect the old
# generation (a 1 GB snapshot's replay --check ran in 2.2 GB of RSS over 1.3 GB of live data, report in 3 GB), and
# gives the young generation a third of it. So a large file gets a heap bounded by its size: 1.6 times the files'
# bytes plus 128 MiB (the live data of reading, rebuilding and replaying a snapshot peaks at about 1.36 times the
# file: 1,343 MiB for report of a 986 MiB one), at least 1 GiB and at most 4 GiB (a 16 GB laptop's default), with a
# fixed 128 MiB young generation so that the old one can hold the live data. RSS is the heap plus about 80 MiB
# (1.87 GB for that report, with 1,700 MiB of heap). GPUMEM_JAVA_OPTS=-Xmx... overrides it.
# Files are taken as the user named them: a symbolic link to a large snapshot counts as the snapshot (find -L).
#
# gpumem_size_opts ARGS...: sets the arrays jit_opts (the tiers) and heap_opts (the heap bound; empty for small
# inputs), and large_input (1 for a file of 64 MiB or more, else 0: the launcher then starts from its AOT cache),
# from the launcher's arguments; the arguments that name regular files (also as --option=FILE) count.
gpumem_size_opts() {
  local arg f total heap_mib
  local -a files=()
  jit_opts=(-XX:TieredStopAtLevel=1)
  heap_opts=()
  large_input=0
  for arg in "$@"; do
    case "$arg" in
      --repeat|--repeat=*) jit_opts=() ;;
      --*=*) arg=${arg#*=} ;;
    esac
    case "$arg" in -*) arg=./$arg ;; esac   # find would take it for an option
    if [ -f "$arg" ]; then files+=("$arg"); fi
  done
  if [ ${#files[@]} -gt 0 ] \
     && [ -n "$(find -L "${files[@]}" -prune -type f -size +67108863c -print -quit 2>/dev/null)" ]; then
    large_input=1
    jit_opts=(-XX:CompileCommand=quiet
      -XX:CompileCommand=dontinline,io.gpumem.alloc.CachingAllocator::malloc
      -XX:CompileCommand=dontinline,io.gpumem.alloc.CachingAllocator::free)
    total=0
    for f in "${files[@]}"; do total=$(( total + $(wc -c < "$f" 2>/dev/null || echo 0) )); done
    heap_mib=$(( total / 1048576 * 8 / 5 + 128 ))
    if [ "$heap_mib" -lt 1024 ]; then heap_mib=1024; fi
    if [ "$heap_mib" -gt 4096 ]; then heap_mib=4096; fi
    heap_opts=(-Xmx${heap_mib}m -Xmn128m)
  fi
}
