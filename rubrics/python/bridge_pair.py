"""Starts a bridged test run (research-bench rubrics): the trusted test process and the agent's
worker, connected by two pipes. Runs as root, `python3 -I -S -B`, from the harness folder.

Usage: bridge_pair.py WORKSPACE RUN_DIR AGENT_UID DEADLINE_SECS REPORT CAP RUNLOG LOG MODE ARGS...

- The worker (`bridge_worker.py`) runs as AGENT_UID (gid the same, no supplementary groups),
  in the workspace, with this process's environment (the run's: forbidden-API settings, ...).
- The trusted process (`bridge_trusted.py MODE ARGS...`, `-I -S -B`) runs as a uid of its own, drawn at
  random from a range no other user of the machine has, in group TRUSTED_GID only, allowed
  one process (RLIMIT_NPROC 1: it cannot start another, so nothing it starts runs with its
  rights), in the workspace, with a small environment of its own (HOME and TMPDIR in RUN_DIR,
  one BLAS thread). RUN_DIR (the held-out copies, the report) becomes that uid's, mode 0700.
- Both write their standard output to standard error: this process's standard output carries
  only the report.
- At DEADLINE_SECS the worker's uid is killed; the trusted process then fails what is left and
  writes its report. It is killed 15 s later if it has not ended.
- Once the trusted process ended and every process of the worker's uid is killed: the report
  REPORT (a file the trusted process wrote; a link or anything but a regular file is no report)
  is printed on standard output as `R` and its first CAP + 1 bytes (nothing when there is no
  report), and when RUNLOG is not empty, its first MiB is appended to LOG and it is removed (the
  run's forbidden-API findings). So the caller needs no other exec.
Exit: the trusted process's exit code; 124 when the deadline was reached (stderr says so);
125 when the trusted process could not be started.
"""

import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
UID_LO, UID_HI = 1 << 24, (1 << 31) - 2
# The trusted process's one group: it reads what grading makes unreadable to the agent's uid
# (a task's forbidden modules, `checks::forbidden_api::FORBIDDEN_READERS_GID`).
TRUSTED_GID = 2998
SIGKILL = 9  # (the `signal` module would import `enum`)
KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "WORKSPACE", "RB_WORKSPACE", "RB_HIDDEN",
            "MPLBACKEND", "TZ")


def kill_uid(uid):
    """Kills every process of `uid` (kill -1 as that uid, which cannot reach anyone else)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, SIGKILL)
        except BaseException:  # noqa: BLE001
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def chown_tree(root, uid):
    for dirpath, dirnames, filenames in os.walk(root):
        os.lchown(dirpath, uid, uid)
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), uid, uid)
    os.chmod(root, 0o700)


def untranslated(env):
    """Whether messages are untranslated anyway: the locale that decides them (LANGUAGE,
    else the first of LC_ALL, LC_MESSAGES, LANG set) is C or POSIX, or none is set."""
    if env.get("LANGUAGE"):
        return False
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        val = env.get(var)
        if val:
            return val.split(".")[0] in ("C", "POSIX")
    return True


def random_uid():
    """A uid in [UID_LO, UID_HI] (os.urandom: no `random` module to import)."""
    return UID_LO + int.from_bytes(os.urandom(4), "big") % (UID_HI - UID_LO + 1)


def spawn(uid, argv, env, keep_fds, cwd, nproc=None, groups=()):
    """Forks, drops to `uid` and executes `argv`; returns (pid, None) or (None, why)."""
    r, w = os.pipe()  # closed by a successful exec: the child's failure travels on it
    pid = os.fork()
    if pid != 0:
        os.close(w)
        why = os.read(r, 4096)
        os.close(r)
        if why:
            os.waitpid(pid, 0)
            return None, why.decode("utf-8", "replace")
        return pid, None
    try:
        os.close(r)
        os.setsid()
        for fd in keep_fds:
            os.set_inheritable(fd, True)
        os.dup2(2, 1)  # our standard output carries only the report
        os.setgroups(list(groups))
        os.setresgid(uid, uid, uid)
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        os.setresuid(uid, uid, uid)
        os.chdir(cwd)
        os.execve(sys.executable, argv, env)
    except BaseException as e:  # noqa: BLE001
        try:
            os.write(w, ("cannot start %s: %s" % (os.path.basename(argv[3]), e)).encode())
        except OSError:
            pass
        os._exit(125)


def print_report(path, cap):
    """Prints `R` and the first cap + 1 bytes of the report, if it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        if not (os.fstat(fd).st_mode & 0o170000 == 0o100000):
            return
        out = sys.stdout.buffer
        out.write(b"R")
        left = cap + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            out.write(b)
            left -= len(b)
        out.flush()
    finally:
        os.close(fd)


def append_log(runlog, log):
    """Appends the first MiB of the run's forbidden-API log to the grading's, then removes it."""
    try:
        fd = os.open(runlog, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        if os.fstat(fd).st_mode & 0o170000 == 0o100000:
            data, left = [], 1 << 20
            while left > 0:
                b = os.read(fd, left)
                if not b:
                    break
                data.append(b)
                left -= len(b)
            with open(log, "ab") as f:
                f.write(b"".join(data))
    except OSError as e:
        sys.stderr.write("bridge_pair: cannot append the run's forbidden-API log: %s\n" % e)
    finally:
        os.close(fd)
    try:
        os.unlink(runlog)
    except OSError:
        pass


def main():
    ws, run_dir, agent_uid, deadline = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    report, cap, runlog, log = sys.argv[5], int(sys.argv[6]), sys.argv[7], sys.argv[8]
    mode, args = sys.argv[9], sys.argv[10:]
    started = time.monotonic()
    t_in, w_out = os.pipe()    # trusted reads, worker writes
    w_in, t_out = os.pipe()    # worker reads, trusted writes

    worker_env = dict(os.environ)
    worker_env["RB_BRIDGE_FDS"] = "%d,%d" % (w_in, w_out)
    worker, why = spawn(agent_uid, [sys.executable, "-I", "-B",
                                    os.path.join(HERE, "bridge_worker.py"), ws],
                        worker_env, [w_in, w_out], ws)
    if worker is None:
        sys.stderr.write("bridge_pair: %s\n" % why)
        sys.exit(125)

    trusted = None
    for _attempt in range(3):
        uid = random_uid()
        chown_tree(run_dir, uid)
        tmp = os.path.join(run_dir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        os.chown(tmp, uid, uid)
        env = {k: v for k, v in os.environ.items() if k in KEEP_ENV or k.startswith("LC_")}
        env.update({"HOME": run_dir, "TMPDIR": tmp, "OPENBLAS_NUM_THREADS": "1",
                    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                    "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                    "RB_BRIDGE_FDS": "%d,%d" % (t_in, t_out),
                    "RB_TRUSTED_ROOTS": run_dir, "RB_WORKSPACE": ws})
        env.setdefault("WORKSPACE", ws)
        env.setdefault("MPLBACKEND", "Agg")
        if untranslated(env):
            # gettext then looks for no catalog (argparse asks ~100 times as pytest starts).
            env["LANGUAGE"] = "C"
        trusted, why = spawn(uid, [sys.executable, "-I", "-S", "-B",
                                   os.path.join(HERE, "bridge_trusted.py"), mode] + args,
                             env, [t_in, t_out], ws, nproc=1, groups=[TRUSTED_GID])
        # A uid already running a process (another grading on this machine drew the same
        # one) cannot start under RLIMIT_NPROC 1: draw again.
        if trusted is not None:
            break
        sys.stderr.write("bridge_pair: %s\n" % why)
    for fd in (t_in, w_out, w_in, t_out):
        os.close(fd)
    if trusted is None:
        kill_uid(agent_uid)
        os.waitpid(worker, 0)
        sys.exit(125)

    hit = False
    status = None
    while status is None:
        pid, st = os.waitpid(trusted, os.WNOHANG)
        if pid == trusted:
            status = st
            break
        if not hit and time.monotonic() - started > deadline:
            hit = True
            sys.stderr.write("bridge_pair: the grading deadline (%.0f s) was reached; the "
                             "agent's code was stopped\n" % deadline)
            kill_uid(agent_uid)
        elif hit and time.monotonic() - started > deadline + 15:
            os.kill(trusted, SIGKILL)
        # Reap the worker (and nothing else) as it ends.
        try:
            os.waitpid(worker, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.01)
    kill_uid(agent_uid)
    try:
        os.waitpid(worker, 0)
    except ChildProcessError:
        pass
    print_report(report, cap)
    if runlog:
        append_log(runlog, log)
    if hit:
        sys.exit(124)
    if os.WIFEXITED(status):
        sys.exit(os.WEXITSTATUS(status))
    sys.exit(128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
