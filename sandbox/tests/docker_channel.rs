//! The exec channel of idle root containers (the runner as the main process, reached through
//! the attach) against the real Docker Engine: the same exec semantics as Docker's exec API,
//! the fallback to it, and what an agent's uid in the container can do to the runner.

// Tests of the crate that owns process spawning and Docker (clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::time::{Duration, Instant};

use common::{backend, exec_checks, python_image, run_id, spec, text};
use sandbox::{Backend, ExecRequest, Limits, Sandbox, SandboxSpec};

fn exec(argv: &[&str]) -> ExecRequest {
    let mut r = ExecRequest::new(argv.iter().copied());
    r.timeout = Duration::from_secs(60);
    r
}

fn as_user(argv: &[&str], user: &str) -> ExecRequest {
    let mut r = exec(argv);
    r.user = Some(user.to_owned());
    r
}

fn root_spec(image: &str, run: &str) -> SandboxSpec {
    let mut s = spec(image, run);
    s.user = Some("root".into());
    s
}

/// The command line of the process that started the exec (its parent; `outside` when it is
/// not in the container, as with Docker's exec).
async fn parent_of_exec(sb: &dyn Sandbox) -> String {
    let out = sb
        .exec(exec(&[
            "/usr/bin/python3",
            "-c",
            "import os\np = os.getppid()\ntry:\n    print(open('/proc/%d/cmdline' % p, 'rb').read().split(b'\\0')[-3:])\nexcept OSError:\n    print('outside', p)",
        ]))
        .await
        .expect("exec");
    assert!(out.success(), "{out:?}");
    text(&out.stdout)
}

/// Pid of the runner (`python3 -I -B -c … --stdio`) in the container, as root sees it.
async fn runner_pid(sb: &dyn Sandbox) -> Option<u32> {
    let out = sb
        .exec(exec(&[
            "/usr/bin/python3",
            "-c",
            "import os\nfor p in os.listdir('/proc'):\n    try:\n        a = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')\n    except OSError:\n        continue\n    if a[:2] == [b'python3', b'-I'] and b'--stdio' in a[-3:]:\n        print(p)",
        ]))
        .await
        .expect("exec");
    assert!(out.success(), "{out:?}");
    text(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .min()
}

#[tokio::test]
async fn an_idle_root_container_runs_execs_through_its_runner_with_docker_exec_semantics() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("channel-semantics");
    let mut rs = root_spec(&image, &run);
    rs.env.insert("FOO".into(), "bar baz".into());
    let mut us = spec(&image, &run);
    us.env.insert("FOO".into(), "bar baz".into());
    let (root, plain) = tokio::join!(backend.create(rs), backend.create(us));
    let (root, plain) = (root.expect("create root"), plain.expect("create plain"));

    // Through the runner: the exec's parent is the runner, not Docker's exec (outside).
    let parent = parent_of_exec(root.as_ref()).await;
    assert!(parent.contains("--stdio"), "{parent}");
    // A non-root idle container keeps Docker's exec.
    let parent = parent_of_exec(plain.as_ref()).await;
    assert!(parent.starts_with("outside"), "{parent}");

    // The environment, user, groups, HOME and working directory are Docker's exec's: the same
    // request gives the same answer in both containers (HOSTNAME aside).
    for (user, workdir) in [
        ("1000:1000", None),
        ("2000:2000", Some("/tmp")),
        ("root", None),
    ] {
        let mut req = as_user(
            &[
                "sh",
                "-c",
                "env | grep -v '^HOSTNAME=' | sort; id; pwd; umask",
            ],
            user,
        );
        req.env.insert("EXTRA".into(), "1".into());
        req.workdir = workdir.map(str::to_owned);
        if user == "root" {
            // The plain container's default user is 1000; name root on both.
            req.user = Some("0:0".into());
        }
        let a = root.exec(req.clone()).await.expect("runner exec");
        let b = plain.exec(req).await.expect("docker exec");
        assert!(a.success() && b.success(), "{a:?} {b:?}");
        assert_eq!(text(&a.stdout), text(&b.stdout), "as {user}");
    }

    // Exit codes, stderr, a missing program and a missing working directory.
    let out = root
        .exec(exec(&["sh", "-c", "echo out; echo err >&2; exit 7"]))
        .await
        .expect("exec");
    assert_eq!(
        (out.exit_code, text(&out.stdout), text(&out.stderr)),
        (Some(7), "out\n".into(), "err\n".into())
    );
    let out = root
        .exec(exec(&["no-such-program-here"]))
        .await
        .expect("exec");
    assert_eq!(out.exit_code, Some(127), "{out:?}");
    let mut req = exec(&["true"]);
    req.workdir = Some("/no/such/dir".into());
    let out = root.exec(req).await.expect("exec");
    assert!(!out.success(), "{out:?}");

    exec_checks::output_caps_truncate(root.as_ref(), Some("1000:1000")).await;

    // Binary output survives the channel byte for byte.
    let out = root
        .exec(exec(&[
            "python3",
            "-c",
            "import sys; sys.stdout.buffer.write(bytes(range(256)) * 3)",
        ]))
        .await
        .expect("exec");
    assert_eq!(
        out.stdout,
        (0..=255u8).cycle().take(768).collect::<Vec<_>>()
    );

    // Concurrent execs each get their own answer.
    let runs = (0..8).map(|i| {
        let root = &root;
        async move {
            let mut req = exec(&["sh", "-c", "sleep 0.$1; echo $1", "sh", &i.to_string()]);
            req.timeout = Duration::from_secs(30);
            (i, root.exec(req).await.expect("exec"))
        }
    });
    let began = Instant::now();
    for (i, out) in futures::future::join_all(runs).await {
        assert_eq!(text(&out.stdout), format!("{i}\n"));
    }
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "the execs ran one after another: {:?}",
        began.elapsed()
    );
    root.remove().await.expect("remove");
    plain.remove().await.expect("remove");
}

#[tokio::test]
async fn the_runner_kills_the_whole_tree_at_the_deadline_and_reports_oom() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("channel-deadline");
    let mut s = root_spec(&image, &run);
    s.limits = Limits {
        cpus: 1.0,
        memory_bytes: 128 * 1024 * 1024,
        pids: 64,
    };
    let sb = backend.create(s).await.expect("create");
    assert!(parent_of_exec(sb.as_ref()).await.contains("--stdio"));
    exec_checks::deadline_kills_the_tree(sb.as_ref(), Some("1000:1000")).await;
    // Agent code that exhausts the memory: an OOM outcome, and the channel lives on.
    exec_checks::oom_is_reported(sb.as_ref(), Some("1000:1000")).await;
    assert!(parent_of_exec(sb.as_ref()).await.contains("--stdio"));
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn agent_code_cannot_reach_kill_or_impersonate_the_runner() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("channel-adversary");
    let sb = backend
        .create(root_spec(&image, &run))
        .await
        .expect("create");
    let pid = runner_pid(sb.as_ref()).await.expect("the runner runs");
    // As the agent's uid: its pipes, memory and environment are out of reach, it cannot be
    // signalled or traced, and writing to our own stdout reaches only our own capture.
    let probe = format!(
        r#"
import os, signal, ctypes
pid = {pid}
for what in ('fd/0', 'fd/1', 'mem', 'environ'):
    try:
        with open('/proc/%d/%s' % (pid, what), 'r+b' if what.startswith('fd') else 'rb') as f:
            f.write(b'{{"id":1,"outcome":null}}\n') if what.startswith('fd') else f.read(1)
        print('reached', what)
    except OSError as e:
        print('denied', what, e.errno)
try:
    os.kill(pid, signal.SIGKILL)
    print('killed')
except OSError as e:
    print('denied kill', e.errno)
libc = ctypes.CDLL(None, use_errno=True)
print('ptrace', libc.ptrace(16, pid, 0, 0))
print('{{"id":1,"outcome":null}}')
"#
    );
    let out = sb
        .exec(as_user(&["python3", "-c", &probe], "1000:1000"))
        .await
        .expect("exec");
    let said = text(&out.stdout);
    assert!(!said.contains("reached"), "{said}");
    assert!(!said.contains("killed"), "{said}");
    assert!(said.contains("ptrace -1"), "{said}");
    assert!(
        said.contains("denied fd/0") && said.contains("denied fd/1"),
        "{said}"
    );
    // The forged answer line is that exec's output, nothing more; the runner still serves.
    assert!(said.contains(r#"{"id":1,"outcome":null}"#), "{said}");
    assert_eq!(runner_pid(sb.as_ref()).await, Some(pid));
    let ok = sb.exec(exec(&["echo", "still here"])).await.expect("exec");
    assert_eq!(text(&ok.stdout), "still here\n");
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn without_the_runner_execs_go_through_docker_exec() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("channel-fallback");

    // No python3 on the container's PATH: the shell says the runner is gone at the start.
    let mut s = root_spec(&image, &run);
    s.env.insert("PATH".into(), "/nowhere".into());
    let sb = backend.create(s).await.expect("create");
    assert_eq!(runner_pid(sb.as_ref()).await, None);
    let parent = parent_of_exec(sb.as_ref()).await;
    assert!(parent.starts_with("outside"), "{parent}");
    sb.remove().await.expect("remove");

    // The runner ends (killed by root in the container): the next execs still run, through
    // Docker's exec, and the container lives on.
    let sb = backend
        .create(root_spec(&image, &run))
        .await
        .expect("create");
    let pid = runner_pid(sb.as_ref()).await.expect("the runner runs");
    let killed = sb
        .exec(exec(&[
            "sh",
            "-c",
            "sleep 0.2; kill -9 $0",
            &pid.to_string(),
        ]))
        .await;
    // That exec's answer may be lost with the runner: an error then, never a hang.
    if let Ok(out) = &killed {
        assert!(out.success(), "{out:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = sb.exec(exec(&["echo", "after"])).await;
        match out {
            Ok(out) if text(&out.stdout) == "after\n" => {
                let parent = parent_of_exec(sb.as_ref()).await;
                assert!(parent.starts_with("outside"), "{parent}");
                break;
            }
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn a_request_too_big_for_the_channel_and_a_pids_exhaustion_neither_hang_nor_end_it() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("channel-bounds");
    let mut s = root_spec(&image, &run);
    s.limits.pids = 48;
    let sb = backend.create(s).await.expect("create");
    let pid = runner_pid(sb.as_ref()).await.expect("the runner runs");

    // ~1.4 MB of control characters in the environment: over 8 MiB as a JSON line (each is
    // `\u00XX`), so not for the channel; Docker's exec gets it (and refuses it in turn: its
    // own message to containerd is over 4 MiB). An answer, not a hang.
    let mut req = exec(&["sh", "-c", "echo ${#V0}"]);
    for i in 0..14 {
        req.env.insert(format!("V{i}"), "\u{1}".repeat(100_000));
    }
    let began = Instant::now();
    let out = sb.exec(req).await;
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}: {out:?}",
        began.elapsed()
    );
    if let Ok(out) = &out {
        assert!(
            text(&out.stdout).trim() == "100000" || out.exit_code == Some(126),
            "{out:?}"
        );
    }
    // Just under the channel's bound (~6 MB as JSON): the runner takes it.
    let mut req = exec(&["sh", "-c", "echo ${#V0} ${#V9}"]);
    for i in 0..10 {
        req.env.insert(format!("V{i}"), "\u{1}".repeat(100_000));
    }
    let out = sb.exec(req).await.expect("a request within the bound");
    assert_eq!(text(&out.stdout), "100000 100000\n", "{out:?}");

    // Agent code takes every pid for a few seconds; an exec asked meanwhile ends (refused or
    // run) instead of hanging, and the runner serves on once the pids are back.
    let bomb = "import os, time\nkids = []\ntry:\n    while True:\n        p = os.fork()\n        if p == 0:\n            time.sleep(4)\n            os._exit(0)\n        kids.append(p)\nexcept OSError:\n    pass\nprint(len(kids), flush=True)\nfor p in kids:\n    os.waitpid(p, 0)\n";
    let mut req = as_user(&["python3", "-c", bomb], "1000:1000");
    req.timeout = Duration::from_secs(20);
    let during = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let began = Instant::now();
        let mut probe = exec(&["true"]);
        probe.timeout = Duration::from_secs(10);
        let out = sb.exec(probe).await;
        (out, began.elapsed())
    };
    let (bombed, (meanwhile, took)) = tokio::join!(sb.exec(req), during);
    println!("during the exhaustion: {meanwhile:?} in {took:?}");
    let bombed = bombed.expect("the bomb's exec");
    assert!(
        text(&bombed.stdout).trim().parse::<u32>().is_ok(),
        "{bombed:?}"
    );
    assert!(
        took < Duration::from_secs(15),
        "an exec hung: {took:?} {meanwhile:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match sb.exec(exec(&["echo", "back"])).await {
            Ok(out) if text(&out.stdout) == "back\n" => break,
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        runner_pid(sb.as_ref()).await,
        Some(pid),
        "the runner lived on"
    );
    sb.remove().await.expect("remove");
}
