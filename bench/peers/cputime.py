"""Runs one process (onnxpipe at PP_LOG=info) with its stderr copied to LOG, and at each
"step N:" line it logs, adds "cputime step N: S" with the CPU seconds the process (all
its threads) has used so far, read from /proc. On a shared machine CPU time is what other
load distorts least; the per-step deltas are what bench/peers/onnxpipe_line.py reports
beside the wall clock, as the peers report theirs (time.process_time).

usage: cputime.py LOG CMD... (CMD must exec the measured program itself, e.g. taskset)"""
import os
import re
import subprocess
import sys

log, cmd = sys.argv[1], sys.argv[2:]
tick = os.sysconf("SC_CLK_TCK")
step = re.compile(rb"step (\d+): [0-9.]+ s, compute")
p = subprocess.Popen(cmd, stderr=subprocess.PIPE)


def cpu_s(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick   # utime, stime


with open(log, "wb") as out:
    for line in p.stderr:
        out.write(line)
        m = step.search(line)
        if m:
            try:
                out.write(b"cputime step %s: %.4f\n" % (m.group(1), cpu_s(p.pid)))
            except OSError:
                pass
sys.exit(p.wait())
