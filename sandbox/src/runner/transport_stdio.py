# Transport 2, stdio (the docker backend's exec channel of an idle root container): execs as
# JSON lines on stdin, answers as JSON lines on stdout.


def initial_environment():
    """The environment block this process was started with (before Python touched it)."""
    with open("/proc/self/environ", "rb") as f:
        raw = f.read()
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def serve_stdio(args):
    """--stdio: exec requests as JSON lines on stdin, answers as JSON lines on stdout."""
    State.home_set = "--home-set" in args
    State.base_env = initial_environment()
    State.nnp = no_new_privileges()
    # The channel gets its own descriptor; fd 1 points at stderr from here on, so nothing but
    # an answer can reach the host's stdout stream.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    lock = threading.Lock()

    def send(answer):
        line = json.dumps(answer, separators=(",", ":")).encode() + b"\n"
        with lock:
            channel.write(line)
            channel.flush()

    def answer(rid, req):
        try:
            send({"id": rid, "outcome": run_exec(req)})
        except Exception as e:  # a bad request or a failure of this process: said, not fatal
            send({"id": rid, "error": "%s: %s" % (type(e).__name__, e)})

    send({"ready": True, "nnp": State.nnp})
    source = sys.stdin.buffer
    while True:
        line = source.readline(MAX_JSON + 1)
        if not line:
            return 0
        if not line.endswith(b"\n"):
            # Over the bound: the rest of the line is skipped, the request answered as refused.
            while line and not line.endswith(b"\n"):
                line = source.readline(MAX_JSON + 1)
            send({"id": None, "error": "a request over %d bytes" % MAX_JSON})
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            send({"id": None, "error": "unreadable request: %s" % e})
            continue
        rid = req.get("id") if isinstance(req, dict) else None
        try:
            threading.Thread(target=answer, args=(rid, req), daemon=True).start()
        except RuntimeError as e:
            # No thread to be had (the pids limit, a fork bomb's doing): this request is
            # refused, the runner lives on for the next.
            send({"id": rid, "error": "cannot start the exec: %s" % e})
