"""Root launcher of the testthat grader's two R processes (research-bench rubrics).

Run as root: python3 -I -B r_launch.py RB RUN_DIR TESTS CANARY WORKSPACE SECONDS

RUN_DIR (the run's folder: copies of the held-out tests under h/, our canary file) becomes the
referee's alone (mode 0700). Two FIFOs in RUN_DIR.io connect the processes of rb_bridge.R: the
worker (the agent's uid 1000, cwd the workspace, the environment this launcher got, stdio to
/dev/null) sources the agent's files and runs its functions; the referee (uid REFEREE, cwd
RUN_DIR, a minimal environment) runs the tests and writes RUN_DIR/testthat.tsv. After the
referee ends (or SECONDS pass) every process of both uids is killed, then the report is printed
on stdout (at most 16 MiB). Exit 0: a report; 3: none (the referee's stderr tail on stderr);
4: timed out.
"""

import os
import signal
import subprocess
import sys
import time

AGENT = 1000
REFEREE = 2999
REPORT_CAP = 16 * 1024 * 1024


def kill_uid(uid):
    """Kills every process of `uid` (a child that becomes `uid` and signals -1)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    rb, run_dir, tests, canary, ws, seconds = sys.argv[1:7]
    deadline = time.monotonic() + max(1.0, float(seconds))
    io = run_dir.rstrip("/") + ".io"
    os.makedirs(io, exist_ok=True)
    os.chown(io, 0, 0)
    os.chmod(io, 0o755)
    to_worker, from_worker = os.path.join(io, "a2w"), os.path.join(io, "w2a")
    for path, mode in ((to_worker, 0o640), (from_worker, 0o420)):
        if os.path.lexists(path):
            os.unlink(path)
        os.mkfifo(path)
        os.chown(path, REFEREE, AGENT)
        os.chmod(path, mode)
    for root, dirs, files in os.walk(run_dir):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), REFEREE, REFEREE)
    os.chown(run_dir, REFEREE, REFEREE)
    os.chmod(run_dir, 0o700)
    bridge = os.path.join(rb, "rb_bridge.R")
    worker_env = dict(os.environ)
    worker_env.setdefault("HOME", "/tmp")
    worker = subprocess.Popen(
        ["Rscript", "--vanilla", bridge, "worker", to_worker, from_worker],
        cwd=ws, env=worker_env, user=AGENT, group=AGENT, extra_groups=[],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    tmp = os.path.join(run_dir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.chown(tmp, REFEREE, REFEREE)
    referee_env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": run_dir,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "RB_WORKSPACE": ws,
        "WORKSPACE": os.environ.get("WORKSPACE", ws),
        "RB_HIDDEN": os.path.join(run_dir, "h"),
    }
    err_path = os.path.join(run_dir, "referee.err")
    with open(err_path, "wb") as err:
        referee = subprocess.Popen(
            ["Rscript", "--vanilla", bridge, "referee", to_worker, from_worker,
             tests, os.path.join(run_dir, "testthat.tsv"), canary, os.path.join(run_dir, "h")],
            cwd=run_dir, env=referee_env, user=REFEREE, group=REFEREE, extra_groups=[],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True)
        timed_out = False
        try:
            referee.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    for uid in (AGENT, REFEREE):
        kill_uid(uid)
    for p in (referee, worker):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    if timed_out:
        sys.stderr.write("the R test run timed out\n")
        sys.exit(4)
    report = os.path.join(run_dir, "testthat.tsv")
    if not os.path.isfile(report) or os.path.islink(report):
        with open(err_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4000))
            sys.stderr.write(f.read().decode("utf-8", "replace"))
        sys.exit(3)
    with open(report, "rb") as f:
        data = f.read(REPORT_CAP + 1)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
