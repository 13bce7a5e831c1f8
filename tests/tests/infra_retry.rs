//! An infrastructure failure (the engine refusing the agent's first container) is retried, and
//! the retry runs the trial to its real grade: attempts 2, one `infra_error` event, the oracle's
//! score, nothing left behind once the run's background teardown is done.
//!
//! A failure after the agent received its task (the first copy-out of its workspace fails) is
//! retried too, but the retry takes that agent over instead of starting another: one agent
//! container, one A2A task, the first attempt closed as `infra_error` "taken over by attempt 2".

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use e2e_tests::{binary, leftovers, write_task};
use green_agent::agents::AgentSpec;
use green_agent::config::Settings;
use green_agent::store::{Outcome, PlannedTrial, Store, TrialResult};
use green_agent::trial::{Observer, RunEnv, TrialInput, run_trial};
use sandbox::{
    Backend, CopiedOut, CopyIn, DockerBackend, EscapingLinks, ExecOutcome, ExecRequest,
    NetworkHandle, Owner, Role, Sandbox, SandboxError, SandboxSpec,
};

const TESTS: &str = r#"import os

W = os.environ.get("WORKSPACE", "/workspace")


def test_out():
    assert open(os.path.join(W, "out.txt")).read().strip() == "done"
"#;

/// The real engine, except that the first agent container is refused.
#[derive(Debug)]
struct FirstAgentRefused {
    inner: DockerBackend,
    agent_creates: AtomicUsize,
}

impl FirstAgentRefused {
    fn refuse(&self, spec: &SandboxSpec) -> Result<(), SandboxError> {
        if spec.owner.role == Role::Agent && self.agent_creates.fetch_add(1, Ordering::SeqCst) == 0
        {
            return Err(SandboxError::InvalidSpec(
                "the engine refused this container (forced by the test)".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Backend for FirstAgentRefused {
    fn name(&self) -> &'static str {
        "docker"
    }
    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        self.refuse(&spec)?;
        self.inner.create(spec).await
    }
    async fn create_with(
        &self,
        spec: SandboxSpec,
        files: &[CopyIn],
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        self.refuse(&spec)?;
        self.inner.create_with(spec, files).await
    }
    async fn create_network(
        &self,
        owner: &Owner,
        port: Option<u16>,
    ) -> Result<NetworkHandle, SandboxError> {
        self.inner.create_network(owner, port).await
    }
    async fn remove_network(&self, network: &NetworkHandle) -> Result<(), SandboxError> {
        self.inner.remove_network(network).await
    }
    async fn reaches_loopback(&self) -> bool {
        self.inner.reaches_loopback().await
    }
    async fn reap(&self, run_id: Option<&str>) -> Result<usize, SandboxError> {
        self.inner.reap(run_id).await
    }
    async fn image_exists(&self, image: &str) -> Result<bool, SandboxError> {
        self.inner.image_exists(image).await
    }
    async fn adopt(&self, run_id: &str) -> Result<sandbox::Adoption, SandboxError> {
        self.inner.adopt(run_id).await
    }
}

/// The real engine, except that the first copy-out of an agent's workspace fails (after the
/// agent ran: collection).
#[derive(Debug)]
struct FirstCollectionFails {
    inner: DockerBackend,
    agent_creates: Arc<AtomicUsize>,
    copy_outs: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct CollectionFailsOnce {
    inner: Box<dyn Sandbox>,
    copy_outs: Arc<AtomicUsize>,
}

#[async_trait]
impl Sandbox for CollectionFailsOnce {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn is_isolated(&self) -> bool {
        self.inner.is_isolated()
    }
    async fn copy_in(&self, host_dir: &std::path::Path, dir: &str) -> Result<(), SandboxError> {
        self.inner.copy_in(host_dir, dir).await
    }
    async fn copy_in_many(&self, items: &[CopyIn]) -> Result<(), SandboxError> {
        self.inner.copy_in_many(items).await
    }
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        self.inner.exec(request).await
    }
    async fn copy_out_with(
        &self,
        sandbox_path: &str,
        host_dest: &std::path::Path,
        max_bytes: u64,
        links: EscapingLinks,
    ) -> Result<CopiedOut, SandboxError> {
        if self.copy_outs.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(SandboxError::InvalidSpec(
                "the engine failed this copy-out (forced by the test)".into(),
            ));
        }
        self.inner
            .copy_out_with(sandbox_path, host_dest, max_bytes, links)
            .await
    }
    async fn logs(&self, max_bytes: usize) -> Result<String, SandboxError> {
        self.inner.logs(max_bytes).await
    }
    async fn host_endpoint(&self, port: u16) -> Result<std::net::SocketAddr, SandboxError> {
        self.inner.host_endpoint(port).await
    }
    async fn main_exit(&self) -> Result<Option<i64>, SandboxError> {
        self.inner.main_exit().await
    }
    async fn wait_exit(&self) -> Result<i64, SandboxError> {
        self.inner.wait_exit().await
    }
    async fn stop(&self, grace: std::time::Duration) -> Result<(), SandboxError> {
        self.inner.stop(grace).await
    }
    async fn freeze(&self, grace: std::time::Duration) -> Result<(), SandboxError> {
        self.inner.freeze(grace).await
    }
    async fn may_run(&self) -> Result<bool, SandboxError> {
        self.inner.may_run().await
    }
    async fn remove(&self) -> Result<(), SandboxError> {
        self.inner.remove().await
    }
}

#[async_trait]
impl Backend for FirstCollectionFails {
    fn name(&self) -> &'static str {
        "docker"
    }
    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        self.create_with(spec, &[]).await
    }
    async fn create_with(
        &self,
        spec: SandboxSpec,
        files: &[CopyIn],
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        let agent = spec.owner.role == Role::Agent;
        let sb = self.inner.create_with(spec, files).await?;
        if !agent {
            return Ok(sb);
        }
        self.agent_creates.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(CollectionFailsOnce {
            inner: sb,
            copy_outs: self.copy_outs.clone(),
        }))
    }
    async fn create_network(
        &self,
        owner: &Owner,
        port: Option<u16>,
    ) -> Result<NetworkHandle, SandboxError> {
        self.inner.create_network(owner, port).await
    }
    async fn remove_network(&self, network: &NetworkHandle) -> Result<(), SandboxError> {
        self.inner.remove_network(network).await
    }
    async fn reaches_loopback(&self) -> bool {
        self.inner.reaches_loopback().await
    }
    async fn reap(&self, run_id: Option<&str>) -> Result<usize, SandboxError> {
        self.inner.reap(run_id).await
    }
    async fn image_exists(&self, image: &str) -> Result<bool, SandboxError> {
        self.inner.image_exists(image).await
    }
    async fn adopt(&self, run_id: &str) -> Result<sandbox::Adoption, SandboxError> {
        self.inner.adopt(run_id).await
    }
}

#[derive(Debug)]
struct Quiet;

impl Observer for Quiet {
    fn phase(&self, _trial: &PlannedTrial, _phase: &str) {}
    fn finished(&self, _trial: &PlannedTrial, _result: &TrialResult) {}
}

#[tokio::test]
async fn a_refused_container_is_retried_and_the_retry_is_graded() {
    let docker = DockerBackend::connect().await.expect("the Docker Engine");
    let recipe = sandbox::images::recipe("python").expect("python recipe");
    let image = sandbox::images::ensure(&docker, &recipe, |_| {})
        .await
        .expect("the python image");
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "retried",
        "Write `done` to out.txt.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    let task = Arc::new(tasks::load_task(&dir).expect("task loads"));
    let results = tempfile::tempdir().expect("tempdir");
    let store = Store::open(results.path()).await.expect("store");
    let run_id = format!("infra-retry-{}", std::process::id());
    let backend = Arc::new(FirstAgentRefused {
        inner: docker,
        agent_creates: AtomicUsize::new(0),
    });
    let env = RunEnv {
        backend: backend.clone(),
        store: store.clone(),
        run_id: run_id.clone(),
        settings: Settings {
            infra_retries: 2,
            ..Settings::default()
        },
        adapter_bin: binary("white-agent-adapter"),
        proxy: None,
        judge: None,
        staged: BTreeMap::new(),
        observer: Arc::new(Quiet),
        teardown: Default::default(),
        probes: Default::default(),
        leftovers: Arc::default(),
    };
    let planned = PlannedTrial {
        id: green_agent::identity::trial_id(&task.content_hash(), "oracle", 0),
        task_id: "retried".into(),
        task_kind: "generic".into(),
        task_hash: task.content_hash(),
        agent: "oracle".into(),
        repeat_index: 0,
    };
    store
        .create_run(
            &run_id,
            &serde_json::json!({}),
            std::slice::from_ref(&planned),
        )
        .await
        .expect("run");
    let input = TrialInput {
        planned: planned.clone(),
        task,
        agent: AgentSpec::Oracle,
        image,
    };
    let result = run_trial(&env, &input).await;
    env.teardown.wait().await;
    assert_eq!(result.attempts, 2, "{result:?}");
    assert_eq!(result.outcome, Outcome::Completed, "{result:?}");
    assert_eq!(result.score, Some(1.0), "the retry was graded: {result:?}");
    assert_eq!(backend.agent_creates.load(Ordering::SeqCst), 2);
    let events = store
        .events(&run_id, Some(&planned.id))
        .await
        .expect("events");
    let infra: Vec<_> = events.iter().filter(|e| e.kind == "infra_error").collect();
    assert_eq!(infra.len(), 1, "{events:?}");
    assert!(
        infra[0].data["error"]
            .as_str()
            .is_some_and(|e| e.contains("forced by the test")),
        "{infra:?}"
    );
    assert_eq!(
        leftovers(&run_id).await,
        0,
        "every container and network removed"
    );
}

#[tokio::test]
async fn a_failure_after_the_agent_got_its_task_takes_that_agent_over() {
    let docker = DockerBackend::connect().await.expect("the Docker Engine");
    let recipe = sandbox::images::recipe("python").expect("python recipe");
    let image = sandbox::images::ensure(&docker, &recipe, |_| {})
        .await
        .expect("the python image");
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "taken-over",
        "Write `done` to out.txt.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    let task = Arc::new(tasks::load_task(&dir).expect("task loads"));
    let results = tempfile::tempdir().expect("tempdir");
    let store = Store::open(results.path()).await.expect("store");
    let run_id = format!("infra-takeover-{}", std::process::id());
    let backend = Arc::new(FirstCollectionFails {
        inner: docker,
        agent_creates: Arc::default(),
        copy_outs: Arc::default(),
    });
    let env = RunEnv {
        backend: backend.clone(),
        store: store.clone(),
        run_id: run_id.clone(),
        settings: Settings {
            infra_retries: 2,
            ..Settings::default()
        },
        adapter_bin: binary("white-agent-adapter"),
        proxy: None,
        judge: None,
        staged: BTreeMap::new(),
        observer: Arc::new(Quiet),
        teardown: Default::default(),
        probes: Default::default(),
        leftovers: Arc::default(),
    };
    let planned = PlannedTrial {
        id: green_agent::identity::trial_id(&task.content_hash(), "oracle", 0),
        task_id: "taken-over".into(),
        task_kind: "generic".into(),
        task_hash: task.content_hash(),
        agent: "oracle".into(),
        repeat_index: 0,
    };
    store
        .create_run(
            &run_id,
            &serde_json::json!({}),
            std::slice::from_ref(&planned),
        )
        .await
        .expect("run");
    let input = TrialInput {
        planned: planned.clone(),
        task,
        agent: AgentSpec::Oracle,
        image,
    };
    let result = run_trial(&env, &input).await;
    env.teardown.wait().await;
    assert_eq!(result.outcome, Outcome::Completed, "{result:?}");
    assert_eq!(
        result.score,
        Some(1.0),
        "the agent's outputs graded: {result:?}"
    );
    assert_eq!(result.attempts, 2, "{result:?}");
    assert_eq!(
        backend.agent_creates.load(Ordering::SeqCst),
        1,
        "one agent container over both attempts"
    );
    assert_eq!(
        backend.copy_outs.load(Ordering::SeqCst),
        2,
        "collected again"
    );
    assert!(
        result
            .flags
            .iter()
            .any(|f| f.contains("after an infrastructure failure") && f.contains("not run again")),
        "{:?}",
        result.flags
    );
    let attempts = store
        .attempts(&run_id, &planned.id)
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    assert_eq!(attempts[0].kind, "fresh");
    assert_eq!(attempts[0].ended.as_deref(), Some("infra_error"));
    assert!(
        attempts[0].detail.as_deref().is_some_and(
            |d| d.contains("forced by the test") && d.contains("taken over by attempt 2")
        ),
        "{:?}",
        attempts[0].detail
    );
    assert_eq!(attempts[1].kind, "reattached");
    assert_eq!(attempts[1].ended.as_deref(), Some("finished"));
    let tasks: std::collections::BTreeSet<_> = attempts
        .iter()
        .filter_map(|a| a.a2a_task_id.as_deref())
        .collect();
    assert_eq!(tasks.len(), 1, "one A2A task: {attempts:#?}");
    assert_eq!(
        leftovers(&run_id).await,
        0,
        "every container and network removed"
    );
}
