#!/usr/bin/env python3
"""Where a cross-process hand-off's dead time goes (benches/README.md, "Where a hand-off's
dead time goes").

Reads the sections a contended scenario recorded (REDLOCK_BENCH_RECORDS, one JSON line per
section, wall-clock nanoseconds) and a scheduler trace of the same run (`perf record -e
sched:sched_switch -e sched:sched_wakeup -a -k CLOCK_MONOTONIC`, printed by `perf script -F
comm,pid,tid,cpu,time,event,trace --ns`). For every hand-off from one process to another
that the next holder took without an attempt (by grants), the window from the holder
leaving its section to the next one entering it: how the two CPUs spent it (the nodes, the
releasing process, the next holder's process, idle), and when the first node ran, when the
third node (a quorum) finished, and when the head held.

usage: handoff_gap.py RECORDS PERF_SCRIPT SUBJECT OFFSET_NS
  OFFSET_NS: CLOCK_REALTIME minus CLOCK_MONOTONIC in ns, read just before the run, e.g.
  python3 -c "import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME) -
  time.clock_gettime_ns(time.CLOCK_MONOTONIC))"
"""
import bisect
import collections
import json
import re
import sys


def load_records(path, subject, offset):
    recs = []
    for line in open(path):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("subject") != subject:
            continue
        r = row["record"]
        recs.append(dict(pid=row["pid"], attempts=r.get("attempts"),
                         **{k: r[k] - offset for k in ("acquired", "entered", "left", "released")}))
    recs.sort(key=lambda r: (r["entered"], r["left"]))
    return recs


LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):\s+(.*)$")
SWITCH = re.compile(r"prev_comm=(.*?) prev_pid=(\d+) .*==> next_comm=(.*?) next_pid=(\d+)")


def load_runs(path):
    """Each thread's runs on a CPU, (start, end, tid, comm), and each thread's process."""
    tid_pid, running, runs = {}, {}, []
    first = last = None
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        _, pid, tid, cpu, s, frac, event, rest = m.groups()
        t = int(s) * 10**9 + int(frac.ljust(9, "0")[:9])
        first = t if first is None else first
        last = t
        tid_pid[int(tid)] = int(pid)
        if event != "sched:sched_switch":
            continue
        sw = SWITCH.search(rest)
        if not sw:
            continue
        if cpu in running:
            since, prev_tid, prev_comm = running[cpu]
            runs.append((since, t, prev_tid, prev_comm))
        running[cpu] = (t, int(sw.group(4)), sw.group(3))
    runs.sort()
    return runs, tid_pid, (first, last)


def main():
    records, trace, subject, offset = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    recs = load_records(records, subject, offset)
    runs, tid_pid, (first, last) = load_runs(trace)
    starts = [r[0] for r in runs]
    clients = {r["pid"] for r in recs}
    node_runs = [r for r in runs if "redis" in r[3] or "valkey" in r[3]]
    node_starts = [r[0] for r in node_runs]

    def kind(tid, comm, holder, head):
        if tid == 0 or comm.startswith("swapper"):
            return "idle"
        if "redis" in comm or "valkey" in comm:
            return "nodes"
        pid = tid_pid.get(tid, tid)
        return {holder: "releasing process", head: "next holder's process"}.get(
            pid, "other clients" if pid in clients else "else")

    spent, gaps, marks = collections.Counter(), [], collections.defaultdict(list)
    for a, b in zip(recs, recs[1:]):
        lo, hi = a["left"], b["entered"]
        if a["pid"] == b["pid"] or b["attempts"] != 0 or not first <= lo < hi <= last:
            continue
        gaps.append(hi - lo)
        j = bisect.bisect_left(starts, lo - 50_000_000)
        while j < len(runs) and runs[j][0] < hi:
            s0, e0, tid, comm = runs[j]
            overlap = min(e0, hi) - max(s0, lo)
            if overlap > 0:
                spent[kind(tid, comm, a["pid"], b["pid"])] += overlap
            j += 1
        # The first node to run after the holder left, and the end of the first run of each
        # of the first three nodes to run: the third is a quorum's release done.
        j, done = bisect.bisect_left(node_starts, lo), {}
        first_run = None
        while j < len(node_runs) and node_runs[j][0] < hi and len(done) < 3:
            s0, e0, tid, _ = node_runs[j]
            first_run = s0 if first_run is None else first_run
            done.setdefault(tid_pid.get(tid, tid), e0)
            j += 1
        if len(done) == 3:
            third = sorted(done.values())[2]
            marks["first node runs"].append(first_run - lo)
            marks["third node done"].append(third - lo)
            marks["held (the head's lock call returned)"].append(b["acquired"] - lo)

    n = len(gaps)
    if not n:
        sys.exit("no cross-process hand-off by grants inside the trace")
    p50 = lambda v: sorted(v)[len(v) // 2] / 1000
    print(f"{subject}: {n} hand-offs between processes by grants; dead time p50 "
          f"{p50(gaps):.0f} us, mean {sum(gaps) / n / 1000:.0f} us")
    print("CPU time within the dead time (2 CPUs), mean per hand-off:")
    for what, ns in spent.most_common():
        print(f"  {what:24s} {ns / n / 1000:6.0f} us")
    print("from the holder leaving its section, p50:")
    for what, v in marks.items():
        print(f"  {what:40s} {p50(v):6.0f} us")


if __name__ == "__main__":
    main()
