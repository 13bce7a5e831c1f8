# The sandbox runner (python3 -I, stdlib only; written for research-bench). Two modes:
#
# HTTP (the swarm backend): runs as root in a swarm sandbox's container (the child of its
# init), starts the sandbox's own command as the sandbox user, and serves over HTTP what the
# host needs of the sandbox: files in (PUT /files, a tar), execs (POST /exec), files out
# (GET /files?path=, a tar), the main command's exit (GET /main), its output (GET /logs) and
# its stop (POST /stop). With --hold the main command waits for POST /start (the host copies
# the sandbox's files in first).
#   Arguments: --port N --token-file F --user SPEC [--workdir DIR] [--peer IP]
#              [--max-upload BYTES] [--home-set] [--hold] -- COMMAND...
#   Every request must carry "Authorization: Bearer <token>" (the token file is a root-only
#   Swarm secret); connections from any address but --peer (the relay) are closed unread.
#   Every read is bounded: header lines and count (http.server), bodies (Content-Length only,
#   capped), time (socket timeout), concurrent connections.
#
# --stdio [--home-set] (the docker backend's exec channel of an idle root container): execs
# only, one JSON request per line on stdin, one answer per line on stdout, each with the
# request's id; requests run concurrently. Only the host's attach reaches these pipes: the
# process is root's, so no other uid can open its /proc fds.
import ctypes
import grp
import hmac
import json
import os
import pwd
import signal
import socket
import socketserver
import stat
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

SOCKET_TIMEOUT = 30
MAX_JSON = 8 * 1024 * 1024
MAX_CONNECTIONS = 32
LOG_KEEP = 4 * 1024 * 1024
DRAIN_AFTER_KILL = 0.5
MAX_WAIT = 25
CHUNK = 65536
PR_SET_NO_NEW_PRIVS = 38


class State:
    token = b""
    peer = None
    max_upload = 0
    user = "1000:1000"
    home_set = False
    main = None
    main_exit = None
    command = None
    started = False
    start_lock = threading.Lock()
    exited = threading.Condition()
    logs = bytearray()
    logs_lock = threading.Lock()
    nnp = False
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    # The environment this process was started with (--stdio): Python's own changes to
    # os.environ (the C locale's coercion) are not the container's.
    base_env = None


def no_new_privileges():
    """Sets no_new_privs on this process (inherited by every child): no setuid program run by
    the main command or an exec can raise its privileges, whatever the engine applied."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    try:
        with open("/proc/self/status") as f:
            return any(line.split() == ["NoNewPrivs:", "1"] for line in f)
    except OSError:
        return False


def resolve_user(spec):
    """(uid, gid, groups, home) of a Docker user spec: uid, uid:gid, name, name:group."""
    name, _, group = spec.partition(":")
    entry = None
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, ValueError):
        if not name.isdigit():
            raise ValueError("user %r does not exist in the image" % name)
    uid = int(name) if name.isdigit() else entry.pw_uid
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise ValueError("group %r does not exist in the image" % group)
    else:
        gid = entry.pw_gid if entry else 0
    groups = [gid]
    if entry is not None:
        try:
            groups += [g.gr_gid for g in grp.getgrall() if entry.pw_name in g.gr_mem]
        except OSError:
            pass
    home = entry.pw_dir if entry and entry.pw_dir else "/"
    return uid, gid, sorted(set(groups)), home


def file_owner(spec):
    """(uid, gid) owning copied files for a user spec (Docker's archive semantics: a bare uid
    is also the gid)."""
    name, _, group = spec.partition(":")
    if name.isdigit():
        return int(name), int(group) if group.isdigit() else int(name)
    uid, gid, _, _ = resolve_user(spec)
    return uid, gid


def environment(extra, home):
    env = dict(State.base_env if State.base_env is not None else os.environ)
    if not State.home_set:
        env["HOME"] = home
    env.update(extra)
    return env


def spawn(argv, env, cwd, user, stdin=subprocess.DEVNULL):
    uid, gid, groups, home = resolve_user(user)
    return subprocess.Popen(
        argv,
        env=environment(env, home),
        cwd=cwd,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        user=uid,
        group=gid,
        extra_groups=groups,
        start_new_session=True,
        close_fds=True,
    )


def exit_code(returncode):
    return 128 - returncode if returncode < 0 else returncode


def descendants(pid):
    """Every process whose parent chain leads to pid."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def kill_tree(proc):
    """SIGKILL to the process, its group and every descendant."""
    pids = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    for pid in [proc.pid] + pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


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


def safe_name(name):
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ValueError("tar entry %r leaves the root" % name)
    return "/" + "/".join(parts)


def make_parents(path, owner):
    """Missing ancestors of path: owned by owner (uid, gid), 0755."""
    missing = []
    parent = os.path.dirname(path)
    while parent not in ("/", "") and not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(missing):
        os.mkdir(d, 0o755)
        os.chown(d, owner[0], owner[1])
        os.chmod(d, 0o755)


def clear(path, keep_dir):
    """Removes whatever is at path unless it is a directory kept for a directory entry."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        if keep_dir:
            return
        import shutil

        shutil.rmtree(path)
    else:
        os.unlink(path)


def extract(stream, parents):
    """A tar stream (from the host) at /, owners and modes as in the headers; missing
    ancestors owned by parents (uid, gid)."""
    with tarfile.open(fileobj=stream, mode="r|") as tf:
        for m in tf:
            path = safe_name(m.name)
            if path == "/":
                continue
            make_parents(path, parents)
            if m.isdir():
                clear(path, keep_dir=True)
                if not os.path.isdir(path):
                    os.mkdir(path, 0o700)
                os.chown(path, m.uid, m.gid, follow_symlinks=False)
                os.chmod(path, m.mode & 0o7777)
            elif m.isreg():
                clear(path, keep_dir=False)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as f:
                    src = tf.extractfile(m)
                    while True:
                        chunk = src.read(CHUNK)
                        if not chunk:
                            break
                        f.write(chunk)
                    os.fchown(f.fileno(), m.uid, m.gid)
                    os.fchmod(f.fileno(), m.mode & 0o7777)
                os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)
            elif m.issym():
                clear(path, keep_dir=False)
                os.symlink(m.linkname, path)
                os.chown(path, m.uid, m.gid, follow_symlinks=False)
            elif m.islnk():
                clear(path, keep_dir=False)
                os.link(safe_name(m.linkname), path, follow_symlinks=False)


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


def archive(path, out):
    """A tar of path (its own name first), links stored as links, never followed."""
    top = os.path.basename(path.rstrip("/")) or "root"
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tf:
        stack = [(path, top)]
        while stack:
            p, arc = stack.pop()
            try:
                st = os.lstat(p)
                info = tf.gettarinfo(p, arc)
            except FileNotFoundError:
                continue
            if info is None:  # a socket
                continue
            if info.isreg():
                try:
                    fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue
                with os.fdopen(fd, "rb") as f:
                    now = os.fstat(fd)
                    if not stat.S_ISREG(now.st_mode) or now.st_ino != st.st_ino:
                        continue
                    tf.addfile(info, f)
            else:
                tf.addfile(info)
            if info.isdir():
                try:
                    names = sorted(os.listdir(p), reverse=True)
                except OSError:
                    names = []
                for name in names:
                    stack.append((os.path.join(p, name), arc + "/" + name))


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


def main(args):
    if args[:1] == ["--stdio"]:
        return serve_stdio(args[1:])
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
