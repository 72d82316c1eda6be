# Runs PyTorch's _memory_viz.py command line several times in one Python process (starting Python once per
# subcommand costs seconds; the snapshots are loaded by the client itself each time, exactly as its CLI does).
#
# usage: run_client.py CLIENT JOBS_FILE
# JOBS_FILE: one job per line, tab-separated: SUBCOMMAND  INPUT  OUTPUT
#   stats / trace: OUTPUT receives what the subcommand prints;
#   segments / memory / trace_plot / segment_plot: OUTPUT is the subcommand's -o file.
# For each job one line "STATUS<TAB>SUBCOMMAND<TAB>INPUT" is printed, STATUS "ok" or the error's last line.
import contextlib
import io
import runpy
import sys
import traceback

client, jobs_file = sys.argv[1], sys.argv[2]
with open(jobs_file) as f:
    jobs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
for sub, path, out in jobs:
    printed = io.StringIO()
    if sub in ("stats", "trace"):
        sys.argv = [client, sub, path]
    else:
        sys.argv = [client, sub, path, "-o", out]
    status = "ok"
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(client, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            status = "exit " + str(e.code)
    except Exception:
        status = traceback.format_exc().strip().splitlines()[-1]
    if sub in ("stats", "trace"):
        with open(out, "w") as f:
            f.write(printed.getvalue())
    print(status + "\t" + sub + "\t" + path, flush=True)
