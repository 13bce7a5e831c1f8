# The runner's processes: its state, the sandbox user, and spawning and killing process trees
# (both transports and the exec job use them). The constants above this file come from
# `sandbox/src/runner/mod.rs` (one source for the runner and the host).

PR_SET_NO_NEW_PRIVS = 38


class State:
    token = b""
    peer = None
    max_upload = 0
    user = DEFAULT_USER
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
