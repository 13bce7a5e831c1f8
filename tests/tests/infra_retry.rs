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

/// Which infrastructure failure [`Faulty`] forces, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The first agent container is refused (before any agent runs).
    RefuseFirstAgent,
    /// The first copy-out of an agent's workspace fails (after the agent ran: collection).
    FailFirstCollection,
}

/// The real engine, but for one forced failure.
#[derive(Debug)]
struct Faulty {
    inner: DockerBackend,
    fault: Fault,
    agent_creates: AtomicUsize,
    copy_outs: Arc<AtomicUsize>,
}

impl Faulty {
    fn new(inner: DockerBackend, fault: Fault) -> Self {
        Faulty {
            inner,
            fault,
            agent_creates: AtomicUsize::new(0),
            copy_outs: Arc::default(),
        }
    }
}

#[derive(Debug)]
struct CollectionFailsOnce {
    inner: Box<dyn Sandbox>,
    copy_outs: Arc<AtomicUsize>,
}

#[async_trait]
impl Backend for Faulty {
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
        if spec.owner.role != Role::Agent {
            return self.inner.create_with(spec, files).await;
        }
        let first = self.agent_creates.fetch_add(1, Ordering::SeqCst) == 0;
        if first && self.fault == Fault::RefuseFirstAgent {
            return Err(SandboxError::InvalidSpec(
                "the engine refused this container (forced by the test)".into(),
            ));
        }
        let sb = self.inner.create_with(spec, files).await?;
        Ok(match self.fault {
            Fault::RefuseFirstAgent => sb,
            Fault::FailFirstCollection => Box::new(CollectionFailsOnce {
                inner: sb,
                copy_outs: self.copy_outs.clone(),
            }),
        })
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

#[derive(Debug)]
struct Quiet;

impl Observer for Quiet {
    fn phase(&self, _trial: &PlannedTrial, _phase: &str) {}
    fn finished(&self, _trial: &PlannedTrial, _result: &TrialResult) {}
}

/// One trial of a one-task run (`oracle` on a task writing `done`, tested by [`TESTS`]) on
/// the real engine but for `fault`, with two infrastructure retries allowed.
async fn one_trial(
    name: &str,
    fault: Fault,
) -> (Arc<Faulty>, RunEnv, TrialInput, tempfile::TempDir) {
    let docker = DockerBackend::connect().await.expect("the Docker Engine");
    let recipe = sandbox::images::recipe("python").expect("python recipe");
    let image = sandbox::images::ensure(&docker, &recipe, |_| {})
        .await
        .expect("the python image");
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        name,
        "Write `done` to out.txt.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    let task = Arc::new(tasks::load_task(&dir).expect("task loads"));
    let store = Store::open(&tasks.path().join("results"))
        .await
        .expect("store");
    let run_id = format!("{name}-{}", std::process::id());
    let backend = Arc::new(Faulty::new(docker, fault));
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
        task_id: name.into(),
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
        planned,
        task,
        agent: AgentSpec::Oracle,
        image,
    };
    (backend, env, input, tasks)
}

#[tokio::test]
async fn a_refused_container_is_retried_and_the_retry_is_graded() {
    let (backend, env, input, _tasks) = one_trial("infra-retry", Fault::RefuseFirstAgent).await;
    let (store, run_id, planned) = (env.store.clone(), env.run_id.clone(), input.planned.clone());
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
    let (backend, env, input, _tasks) =
        one_trial("infra-takeover", Fault::FailFirstCollection).await;
    let (store, run_id, planned) = (env.store.clone(), env.run_id.clone(), input.planned.clone());
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
