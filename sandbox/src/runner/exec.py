# Exec: one command as the sandbox user with a deadline and capped output; the answer both
# transports send (streams hex-encoded).


def oom_kills():
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == "oom_kill":
                        return int(parts[1])
        except (OSError, ValueError):
            continue
    return None


class Capped:
    def __init__(self, cap):
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    def push(self, chunk):
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.truncated = True
        if room > 0:
            self.data += chunk[:room]


def pump(pipe, sink):
    try:
        while True:
            chunk = pipe.read1(CHUNK) if hasattr(pipe, "read1") else pipe.read(CHUNK)
            if not chunk:
                break
            sink(chunk)
    except (OSError, ValueError):
        pass


def run_exec(req):
    argv = req["argv"]
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings")
    cap = int(req["output_cap"])
    timeout = float(req["timeout_ms"]) / 1000.0
    out, err = Capped(cap), Capped(cap)
    oom_before = oom_kills()
    started = time.monotonic()
    deadline = started + timeout
    try:
        proc = spawn(argv, req.get("env") or {}, req["workdir"], req["user"])
    except ValueError as e:
        return outcome(126, b"", str(e).encode(), False, False, False, started)
    except FileNotFoundError as e:
        code = 127 if e.filename in (argv[0], None) else 126
        msg = "exec failed: %s" % e
        return outcome(code, b"", msg.encode(), False, False, False, started)
    except (PermissionError, OSError) as e:
        return outcome(126, b"", ("exec failed: %s" % e).encode(), False, False, False, started)
    readers = [
        threading.Thread(target=pump, args=(proc.stdout, out.push), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, err.push), daemon=True),
    ]
    for r in readers:
        r.start()
    timed_out = False
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for r in readers:
            r.join(max(0.0, deadline - time.monotonic()))
        if any(r.is_alive() for r in readers):
            # A process left behind holds the output open past the deadline.
            timed_out = True
    except subprocess.TimeoutExpired:
        timed_out = True
    if timed_out:
        kill_tree(proc)
        for r in readers:
            r.join(DRAIN_AFTER_KILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    code = None if proc.returncode is None else exit_code(proc.returncode)
    after = oom_kills()
    oom = oom_before is not None and after is not None and after > oom_before
    return outcome(
        None if (timed_out or oom) else code,
        bytes(out.data),
        bytes(err.data),
        timed_out,
        oom,
        out.truncated or err.truncated,
        started,
    )


def outcome(code, out, err, timed_out, oom, truncated, started):
    return {
        "exit_code": code,
        "stdout": out.hex(),
        "stderr": err.hex(),
        "timed_out": timed_out,
        "oom_killed": oom,
        "truncated": truncated,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
