#!/usr/bin/env python3
"""Kill trials: how long the surviving workers take to leave after a worker's SIGKILL.

Runs `./muster example softmax --workers N --epochs E` (N worker JVMs, each with its own
TF_CONFIG), waits until the chief has logged its first epoch plus --delay seconds, sends SIGKILL
to the worker JVM whose TF_CONFIG index is --victim, and measures, for every other worker JVM,
the time from the kill until its process is gone (polled every 5 ms). Prints one JSON line per
trial and a summary line (min, median, max over every survivor of every trial).

  python3 bench/kill-trials.py --trials 10 --workers 3 --victim 1
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def workers_of(launcher_pid):
    """The launcher's child JVMs, by TF_CONFIG task index."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != launcher_pid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            config = json.loads(env[b"TF_CONFIG"])
            found[int(config["task"]["index"])] = int(pid)
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def trial(args):
    launcher = subprocess.Popen([os.path.join(ROOT, "muster"), "example", "softmax", "--workers", str(args.workers),
                                 "--epochs", str(args.epochs)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
    started = threading.Event()
    lines = []

    def read():
        for line in launcher.stdout:
            lines.append(line)
            if "epoch 1:" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not started.wait(120):
            raise RuntimeError("training did not start within 120 s:\n" + "".join(lines[-20:]))
        time.sleep(args.delay)
        workers = workers_of(launcher.pid)
        if len(workers) != args.workers:
            raise RuntimeError(f"found worker JVMs {workers}, expected {args.workers}")
        os.kill(workers[args.victim], signal.SIGKILL)
        killed = time.monotonic()
        survivors = {i: p for i, p in workers.items() if i != args.victim}
        gone = {}
        while len(gone) < len(survivors) and time.monotonic() - killed < 120:
            for i, p in survivors.items():
                if i not in gone and not alive(p):
                    gone[i] = time.monotonic() - killed
            time.sleep(0.005)
        launcher.wait(60)
        reader.join(5)
        if args.log:
            with open(args.log, "a") as f:
                f.write(f"---- trial, SIGKILL at monotonic {killed:.3f}\n" + "".join(lines))
        return {"victim": args.victim, "survivor_exit_s": {str(i): round(t, 3) for i, t in sorted(gone.items())},
                "still_running": sorted(set(survivors) - set(gone)), "launcher_exit": launcher.returncode}
    finally:
        if launcher.poll() is None:
            launcher.kill()
        reader.join(5)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--victim", type=int, default=1)
    p.add_argument("--epochs", type=int, default=400)
    p.add_argument("--delay", type=float, default=3.0, help="seconds after the first epoch before the kill")
    p.add_argument("--log", help="append each trial's output (the workers' logs) to this file")
    args = p.parse_args()
    times = []
    for n in range(args.trials):
        result = trial(args)
        result["trial"] = n + 1
        print(json.dumps(result), flush=True)
        times.extend(result["survivor_exit_s"].values())
    if times:
        print(json.dumps({"survivors": len(times), "min_s": min(times), "median_s": round(statistics.median(times), 3),
                          "max_s": max(times)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
