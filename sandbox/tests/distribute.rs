//! `sandbox::distribute` against a real second Docker engine: a private `dockerd` started by
//! this test (its own data root, exec root, socket and network namespace; no bridge, no
//! iptables), standing in for a Swarm node's engine. A small image made here goes over by save and load, keeps its id and
//! tag, and a second copy sends nothing.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::query_parameters::RemoveImageOptions;
use futures::StreamExt;
use sandbox::child::{ChildSpec, SupervisedChild};
use sandbox::distribute::{Distributed, distribute};
use sandbox::{DockerBackend, SandboxError};

/// A private dockerd; [`SecondEngine::stop`] ends it (SIGTERM), dropping it kills its tree.
struct SecondEngine {
    child: SupervisedChild,
    dir: tempfile::TempDir,
}

impl SecondEngine {
    async fn start() -> (Self, DockerBackend) {
        let dir = tempfile::Builder::new()
            .prefix("rb-second-engine-")
            .tempdir_in("/var/tmp")
            .expect("tempdir");
        let p = |rel: &str| dir.path().join(rel).display().to_string();
        // An empty config file: the machine's /etc/docker/daemon.json sets a data root.
        std::fs::write(p("daemon.json"), "{}").expect("config");
        // In a network namespace of its own: a dockerd with `--bridge none` deletes the host's
        // `docker0` link when it shares the host's namespace.
        let child = SupervisedChild::spawn(ChildSpec {
            program: "unshare".into(),
            args: vec![
                "--net".into(),
                "dockerd".into(),
                "--config-file".into(),
                p("daemon.json"),
                "--data-root".into(),
                p("data"),
                "--exec-root".into(),
                p("exec"),
                "--pidfile".into(),
                p("pid"),
                "--host".into(),
                format!("unix://{}", p("sock")),
                "--bridge".into(),
                "none".into(),
                "--iptables=false".into(),
                "--ip-masq=false".into(),
            ],
            env: BTreeMap::new(),
            clear_env: false,
            cwd: dir.path().to_path_buf(),
            limits: None,
        })
        .expect("dockerd (Debian's docker.io) must be installed");
        let mut engine = Self { child, dir };
        let url = format!("unix://{}", engine.dir.path().join("sock").display());
        let started = Instant::now();
        loop {
            if engine.dir.path().join("sock").exists()
                && let Ok(b) = DockerBackend::connect_to(&url).await
            {
                return (engine, b);
            }
            if let Some(exit) = engine.child.try_exit() {
                panic!(
                    "the second dockerd exited ({exit:?}): {}",
                    engine.child.stderr_tail()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the second dockerd did not start within 60 s: {}",
                engine.child.stderr_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM, then waits (up to 20 s) for it to exit; returns its folder (removed on return).
    async fn stop(mut self) -> PathBuf {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.pid()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            self.child.kill_tree();
        }
        self.dir.path().to_path_buf()
    }
}

impl Drop for SecondEngine {
    fn drop(&mut self) {
        self.child.kill_tree();
    }
}

/// A one-file image imported into `engine` as `reference`; returns its id.
async fn tiny_image(engine: &DockerBackend, reference: &str, text: &str) -> String {
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(text.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "hello.txt", text.as_bytes())
        .expect("tar");
    let bytes = tar.into_inner().expect("tar");
    let (repo, tag) = reference.rsplit_once(':').expect("repo:tag");
    let mut s = engine.client().create_image(
        Some(bollard::query_parameters::CreateImageOptions {
            from_src: Some("-".into()),
            repo: Some(repo.into()),
            tag: Some(tag.into()),
            ..Default::default()
        }),
        Some(bollard::body_full(bytes.into())),
        None,
    );
    while let Some(item) = s.next().await {
        item.expect("importing the test image");
    }
    engine
        .client()
        .inspect_image(reference)
        .await
        .expect("inspect")
        .id
        .expect("id")
}

#[tokio::test]
async fn an_image_goes_to_another_engine_with_its_id_and_tag_and_only_once() {
    let here = common::backend().await;
    let docker0_before = std::path::Path::new("/sys/class/net/docker0").exists();
    let (second, there) = SecondEngine::start().await;
    let reference = format!("research-bench/distribute-test:{}", std::process::id());
    let id = tiny_image(&here, &reference, "made on the first engine\n").await;

    let first = distribute(&here, &there, &reference)
        .await
        .expect("distributing");
    match &first {
        Distributed::Sent {
            image_id, bytes, ..
        } => {
            assert_eq!(image_id, &id);
            assert!(*bytes > 0, "a save stream was sent");
        }
        other => panic!("the second engine had no image yet: {other:?}"),
    }
    let remote = there
        .client()
        .inspect_image(&reference)
        .await
        .expect("the tag exists on the second engine");
    assert_eq!(remote.id.as_deref(), Some(id.as_str()), "same id there");

    // Again: nothing to send.
    let again = distribute(&here, &there, &reference).await.expect("again");
    assert_eq!(
        again,
        Distributed::Present {
            image_id: id.clone()
        }
    );

    // The tag removed there (the image kept under another tag): only the tag comes back.
    there
        .client()
        .tag_image(
            &id,
            Some(bollard::query_parameters::TagImageOptions {
                repo: Some("keep".into()),
                tag: Some("me".into()),
            }),
        )
        .await
        .expect("tag");
    there
        .client()
        .remove_image(&reference, None::<RemoveImageOptions>, None)
        .await
        .expect("untag");
    let retagged = distribute(&here, &there, &reference).await.expect("retag");
    assert_eq!(
        retagged,
        Distributed::Present {
            image_id: id.clone()
        }
    );
    assert!(there.client().inspect_image(&reference).await.is_ok());

    // An image this engine lacks is named as missing, not sent.
    let missing = distribute(&here, &there, "research-bench/no-such-image:0")
        .await
        .expect_err("missing");
    assert!(
        matches!(missing, SandboxError::ImageMissing(ref r) if r == "research-bench/no-such-image:0"),
        "{missing}"
    );

    let _ = here
        .client()
        .remove_image(
            &reference,
            Some(RemoveImageOptions {
                force: true,
                ..Default::default()
            }),
            None,
        )
        .await;
    drop(there);
    let folder = second.stop().await;
    assert!(!folder.exists(), "the second engine's folder is removed");
    assert_eq!(
        std::path::Path::new("/sys/class/net/docker0").exists(),
        docker0_before,
        "the host's docker0 bridge is untouched"
    );
}

#[tokio::test]
async fn an_engine_that_does_not_answer_is_named() {
    let err = DockerBackend::connect_to("unix:///var/tmp/rb-no-such-engine.sock")
        .await
        .expect_err("nothing listens there");
    let text = err.to_string();
    assert!(text.contains("rb-no-such-engine.sock"), "{text}");
    assert!(
        matches!(err, SandboxError::DaemonUnreachable { .. }),
        "{err:?}"
    );
}
