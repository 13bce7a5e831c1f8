# Transport 1, HTTP (the swarm backend): the token-checked server (files in and out, execs,
# the main command's exit, logs, stop) and the sandbox's main command it starts and watches.


class Limited:
    """Exactly `size` bytes of a stream, then EOF."""

    def __init__(self, raw, size):
        self.raw = raw
        self.left = size

    def read(self, n=-1):
        if self.left <= 0:
            return b""
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.raw.read(n)
        if not data:
            raise OSError("the request body ended early")
        self.left -= len(data)
        return data


class Chunked:
    """A chunked HTTP body; the terminating chunk only on close() after success."""

    def __init__(self, wfile):
        self.wfile = wfile
        self.buf = bytearray()

    def write(self, data):
        self.buf += data
        if len(self.buf) >= CHUNK:
            self.flush()
        return len(data)

    def flush(self):
        if self.buf:
            self.wfile.write(b"%x\r\n" % len(self.buf) + bytes(self.buf) + b"\r\n")
            self.buf = bytearray()

    def finish(self):
        self.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def verify_request(self, request, client_address):
        if State.peer is not None and client_address[0] != State.peer:
            return False
        return State.slots.acquire(blocking=False)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            State.slots.release()


class Handler(BaseHTTPRequestHandler):
    timeout = SOCKET_TIMEOUT
    protocol_version = "HTTP/1.1"
    server_version = "rb-runner"

    def log_message(self, *args):
        pass

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def fail(self, code, message):
        self.close_connection = True
        try:
            self.send_json(code, {"error": message})
        except OSError:
            pass

    def authorised(self):
        got = self.headers.get("Authorization", "")
        want = b"Bearer " + State.token
        if not hmac.compare_digest(got.encode("utf-8", "replace"), want):
            self.fail(403, "forbidden")
            return False
        return True

    def body_size(self, cap):
        if self.headers.get("Transfer-Encoding"):
            self.fail(411, "a Content-Length is required")
            return None
        try:
            size = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.fail(411, "a Content-Length is required")
            return None
        if size < 0 or size > cap:
            self.fail(413, "the body is over %d bytes" % cap)
            return None
        return size

    def read_json(self):
        size = self.body_size(MAX_JSON)
        if size is None:
            return None
        try:
            return json.loads(Limited(self.rfile, size).read())
        except (ValueError, OSError) as e:
            self.fail(400, "bad JSON body: %s" % e)
            return None

    def route(self):
        url = urllib.parse.urlsplit(self.path)
        return url.path, urllib.parse.parse_qs(url.query)

    def do_GET(self):
        if not self.authorised():
            return
        path, query = self.route()
        if path == "/health":
            uid, gid = file_owner(State.user)
            self.send_json(200, {"nnp": State.nnp, "uid": uid, "gid": gid})
        elif path == "/main":
            wait = min(float(query.get("wait", ["0"])[0] or 0), MAX_WAIT)
            with State.exited:
                State.exited.wait_for(lambda: State.main_exit is not None, timeout=wait)
                code = State.main_exit
            self.send_json(200, {"exit": code})
        elif path == "/logs":
            n = max(0, int(query.get("max", ["0"])[0] or 0))
            with State.logs_lock:
                data = bytes(State.logs[-n:]) if n else b""
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == "/files":
            self.send_files(query.get("path", [""])[0])
        else:
            self.fail(404, "no such endpoint")

    def send_files(self, path):
        if not path.startswith("/") or any(p == ".." for p in path.split("/")):
            self.fail(400, "the path must be absolute, without `..`")
            return
        if not os.path.lexists(path):
            self.fail(404, "no such file")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-tar")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        out = Chunked(self.wfile)
        try:
            archive(path, out)
            out.finish()
        except (OSError, tarfile.TarError):
            # No terminating chunk: the host sees a broken body, never a short tree.
            self.close_connection = True

    def do_PUT(self):
        if not self.authorised():
            return
        path, query = self.route()
        if path != "/files":
            self.fail(404, "no such endpoint")
            return
        try:
            uid, _, gid = query.get("parents", ["0:0"])[0].partition(":")
            parents = (int(uid), int(gid))
        except ValueError:
            self.fail(400, "parents must be uid:gid")
            return
        size = self.body_size(State.max_upload)
        if size is None:
            return
        body = Limited(self.rfile, size)
        try:
            extract(body, parents)
        except (OSError, ValueError, tarfile.TarError) as e:
            # Drain what is left so the host reads the answer (bounded by Content-Length).
            try:
                while body.read(CHUNK):
                    pass
            except OSError:
                pass
            code = 404 if isinstance(e, FileNotFoundError) else 400
            self.fail(code, "extracting failed: %s" % e)
            return
        self.send_json(200, {})

    def do_POST(self):
        if not self.authorised():
            return
        path, _ = self.route()
        req = self.read_json()
        if req is None:
            return
        if path == "/exec":
            try:
                result = run_exec(req)
            except (KeyError, ValueError, TypeError) as e:
                self.fail(400, "bad exec request: %s" % e)
                return
            self.send_json(200, result)
        elif path == "/stop":
            stop_main(float(req.get("grace_ms", 10000)) / 1000.0)
            self.send_json(200, {"exit": State.main_exit})
        elif path == "/start":
            self.send_json(200, {"started": start_main()})
        else:
            self.fail(404, "no such endpoint")


def start_main():
    """Starts the main command once (later calls do nothing); False when it had been stopped
    before it started."""
    with State.start_lock:
        if State.started:
            return State.main is not None or State.main_exit == 127
        State.started = True
        if State.main_exit is not None:
            return False
        try:
            proc = spawn(State.command, {}, os.getcwd(), State.user)
        except (OSError, ValueError) as e:
            # Like a command that failed at once: its exit is 127, the reason in its logs.
            message = ("rb-runner: cannot start %r: %s\n" % (State.command[0], e)).encode()
            keep_log(2)(message)
            with State.exited:
                State.main_exit = 127
                State.exited.notify_all()
            return True
        State.main = proc
        threading.Thread(target=watch_main, args=(proc,), daemon=True).start()
        return True


def stop_main(grace):
    with State.start_lock:
        if not State.started:
            # Stopped before it started: it never will.
            State.started = True
            with State.exited:
                State.main_exit = 143
                State.exited.notify_all()
            return
    proc = State.main
    if proc is None or State.main_exit is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
    except OSError:
        pass
    with State.exited:
        if State.exited.wait_for(lambda: State.main_exit is not None, timeout=grace):
            return
    kill_tree(proc)
    with State.exited:
        State.exited.wait_for(lambda: State.main_exit is not None, timeout=10)


def keep_log(fd):
    def sink(chunk):
        try:
            os.write(fd, chunk)
        except OSError:
            pass
        with State.logs_lock:
            State.logs += chunk
            excess = len(State.logs) - LOG_KEEP
            if excess > 0:
                del State.logs[:excess]

    return sink


def watch_main(proc):
    pumps = [
        threading.Thread(target=pump, args=(proc.stdout, keep_log(1)), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, keep_log(2)), daemon=True),
    ]
    for p in pumps:
        p.start()
    code = exit_code(proc.wait())
    for p in pumps:
        p.join(1)
    with State.exited:
        State.main_exit = code
        State.exited.notify_all()


def serve_http(args):
    """HTTP mode (the swarm backend): the arguments after the program name."""
    port, command = None, []
    token_file = None
    workdir = None
    hold = False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            command = args[i + 1 :]
            break
        if a == "--home-set":
            State.home_set = True
            i += 1
            continue
        if a == "--hold":
            hold = True
            i += 1
            continue
        value = args[i + 1]
        if a == "--port":
            port = int(value)
        elif a == "--token-file":
            token_file = value
        elif a == "--user":
            State.user = value
        elif a == "--peer":
            State.peer = value
        elif a == "--workdir":
            workdir = value
        elif a == "--max-upload":
            State.max_upload = int(value)
        i += 2
    with open(token_file, "rb") as f:
        State.token = f.read().strip()
    if len(State.token) < 32 or not command:
        print("rb-runner: no token or no command", file=sys.stderr)
        return 2
    State.nnp = no_new_privileges()
    if workdir:
        # As the engine does for a container's working directory: missing components are
        # created owned by the (sandbox) user, 0755.
        try:
            uid, gid = file_owner(State.user)
            missing, d = [], workdir
            while d not in ("/", "") and not os.path.lexists(d):
                missing.append(d)
                d = os.path.dirname(d)
            for d in reversed(missing):
                os.mkdir(d, 0o755)
                os.chown(d, uid, gid)
                os.chmod(d, 0o755)
            os.chdir(workdir)
        except (OSError, ValueError) as e:
            print("rb-runner: working directory %r: %s" % (workdir, e), file=sys.stderr)
            return 126
    server = Server(("0.0.0.0", port), Handler)
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    State.command = command
    if not hold:
        start_main()

    def on_term(signum, frame):
        # The engine stops the container: stop the command, then leave with its code.
        def go():
            stop_main(8)
            server.shutdown()

        threading.Thread(target=go, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server.serve_forever(poll_interval=0.5)
    return State.main_exit if State.main_exit is not None else 143
