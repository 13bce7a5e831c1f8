//! `sandbox::distribute` against a real second Docker engine: a private `dockerd` started by
//! this test (its own data root, exec root, socket; no bridge, no iptables), standing in for a
//! Swarm node's engine. A small image made here goes over by save and load, keeps its id and
//! tag, and a second copy sends nothing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bollard::query_parameters::RemoveImageOptions;
use futures::StreamExt;
use sandbox::distribute::{Distributed, distribute};
use sandbox::{DockerBackend, SandboxError};

/// A private dockerd, stopped and its folder removed on drop.
struct SecondEngine {
    child: Child,
    dir: tempfile::TempDir,
}

impl SecondEngine {
    async fn start() -> (Self, DockerBackend) {
        let dir = tempfile::Builder::new()
            .prefix("rb-second-engine-")
            .tempdir_in("/var/tmp")
            .expect("tempdir");
        let p = |rel: &str| dir.path().join(rel);
        // An empty config file: the machine's /etc/docker/daemon.json sets a data root.
        std::fs::write(p("daemon.json"), "{}").expect("config");
        let log = std::fs::File::create(p("log")).expect("log");
        let child = Command::new("dockerd")
            .arg("--config-file")
            .arg(p("daemon.json"))
            .arg("--data-root")
            .arg(p("data"))
            .arg("--exec-root")
            .arg(p("exec"))
            .arg("--pidfile")
            .arg(p("pid"))
            .arg("--host")
            .arg(format!("unix://{}", p("sock").display()))
            .args(["--bridge", "none", "--iptables=false", "--ip-masq=false"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("dockerd (Debian's docker.io) must be installed");
        let engine = Self { child, dir };
        let url = format!("unix://{}", engine.dir.path().join("sock").display());
        let started = Instant::now();
        loop {
            if engine.dir.path().join("sock").exists()
                && let Ok(b) = DockerBackend::connect_to(&url).await
            {
                return (engine, b);
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the second dockerd did not start: {}",
                std::fs::read_to_string(engine.dir.path().join("log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SecondEngine {
    fn drop(&mut self) {
        let pid = self.child.id();
        let _ = Command::new("kill").arg(pid.to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let folder: PathBuf = second.path().to_path_buf();
    drop(there);
    drop(second);
    assert!(!folder.exists(), "the second engine's folder is removed");
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
