//! A real grading container for integration tests (Docker backend, labelled with a unique run).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rubrics::{GradeReport, GradingContext, GradingSpec, Judge, grade};
use sandbox::docker::DockerBackend;
use sandbox::{Backend, ExecRequest, Limits, NetworkPolicy, Owner, Role, Sandbox, SandboxSpec};

/// The image for `name` (`python` or `sci`): the recipe's tag when built, else the dev image
/// for `python`, else built now through `sandbox::images`.
pub async fn image(backend: &DockerBackend, name: &str) -> String {
    let tag = sandbox::images::resolve(name).await;
    if backend.image_exists(&tag).await.expect("docker answers") {
        return tag;
    }
    let dev = format!("research-bench/{name}:dev");
    if backend.image_exists(&dev).await.expect("docker answers") {
        return dev;
    }
    sandbox::images::ensure_named(backend, name, |_| {})
        .await
        .unwrap_or_else(|e| panic!("image {name} is missing and cannot be built: {e}"))
}

/// A grading container holding `workspace` at /workspace and `hidden` at /grader/hidden.
pub struct Grading {
    pub sandbox: Box<dyn Sandbox>,
    /// The snapshot was copied in with the workspace ([`rubrics::grade::StagedSnapshot`]).
    pub staged: bool,
    /// [`rubrics::GradingContext::task_inputs`] for the gradings.
    pub task_inputs: Option<String>,
}

fn write_tree(dir: &Path, files: &[(&str, &[u8])]) {
    for (rel, bytes) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, bytes).expect("write");
    }
}

impl Grading {
    pub async fn new(
        image_name: &str,
        workspace: &[(&str, &[u8])],
        hidden: &[(&str, &[u8])],
    ) -> Self {
        Self::with_cpus(1.0, image_name, workspace, hidden).await
    }

    /// [`Grading::new`] with the snapshot copied in with the workspace, as the green agent
    /// does (`GradingContext::snapshot_staged`), instead of taken by the grading.
    pub async fn staged(
        image_name: &str,
        workspace: &[(&str, &[u8])],
        hidden: &[(&str, &[u8])],
    ) -> Self {
        let mut g = Self::with_cpus(1.0, image_name, workspace, hidden).await;
        let ws = tempfile::tempdir().expect("tmp");
        write_tree(ws.path(), workspace);
        let snapshot = rubrics::grade::StagedSnapshot::of(&[ws.path()])
            .expect("regular files and folders can be staged");
        g.sandbox
            .copy_in_many(&snapshot.copy_ins("/grader/work"))
            .await
            .expect("copy the snapshot");
        g.staged = true;
        g
    }

    /// [`Grading::new`] with `cpus` CPUs.
    pub async fn with_cpus(
        cpus: f64,
        image_name: &str,
        workspace: &[(&str, &[u8])],
        hidden: &[(&str, &[u8])],
    ) -> Self {
        let backend = DockerBackend::connect().await.expect("docker is reachable");
        let image = image(&backend, image_name).await;
        let run_id = format!(
            "rubrics-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos()
        );
        let spec = SandboxSpec {
            image,
            owner: Owner {
                run_id,
                trial_id: None,
                role: Role::Grader,
            },
            env: BTreeMap::new(),
            workdir: "/workspace".into(),
            user: Some("root".into()),
            limits: Limits {
                cpus,
                memory_bytes: 1024 * 1024 * 1024,
                pids: 256,
            },
            mounts: vec![],
            network: NetworkPolicy::None,
            command: None,
        };
        let sandbox = backend
            .create(spec)
            .await
            .expect("grading container starts");
        let ws = tempfile::tempdir().expect("tmp");
        let hd = tempfile::tempdir().expect("tmp");
        write_tree(ws.path(), workspace);
        write_tree(hd.path(), hidden);
        sandbox
            .copy_in(ws.path(), "/workspace")
            .await
            .expect("copy workspace");
        sandbox
            .copy_in(hd.path(), "/grader/hidden")
            .await
            .expect("copy hidden");
        let mut req = ExecRequest::new(["mkdir", "-p", "/grader/work"]);
        req.user = Some("root".into());
        let out = sandbox.exec(req).await.expect("mkdir");
        assert!(out.success(), "{out:?}");
        Self {
            sandbox,
            staged: false,
            task_inputs: None,
        }
    }

    pub async fn sh(&self, script: &str) -> sandbox::ExecOutcome {
        let mut req = ExecRequest::new(["sh", "-c", script]);
        req.user = Some("root".into());
        req.timeout = Duration::from_secs(900);
        self.sandbox.exec(req).await.expect("exec")
    }

    pub async fn grade(
        &self,
        spec_toml: &str,
        judge: Option<&Judge>,
        timeout: Duration,
    ) -> GradeReport {
        self.grade_with_probes(spec_toml, judge, timeout, rubrics::ProbeCache::default())
            .await
    }

    /// [`Grading::grade`] with the trusted probes' answers shared through `probes`.
    pub async fn grade_with_probes(
        &self,
        spec_toml: &str,
        judge: Option<&Judge>,
        timeout: Duration,
        probes: rubrics::ProbeCache,
    ) -> GradeReport {
        let spec: GradingSpec = toml::from_str(spec_toml).expect("spec parses");
        let mut ctx = GradingContext::new(self.sandbox.as_ref(), timeout);
        ctx.judge = judge;
        ctx.probes = probes;
        ctx.snapshot_staged = self.staged;
        ctx.task_inputs = self.task_inputs.clone();
        // The machine is shared and the container has one CPU: give slow gold snippets room.
        ctx.case_timeout = Duration::from_secs(300);
        grade(&spec, &ctx).await
    }

    pub async fn remove(self) {
        self.sandbox.remove().await.expect("container removed");
    }
}
