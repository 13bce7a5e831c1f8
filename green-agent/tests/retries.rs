//! Infrastructure failures are retried (bounded, with backoff) and end as the `infra_error`
//! outcome; every network of every attempt is removed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use green_agent::agents::AgentSpec;
use green_agent::config::Settings;
use green_agent::proxy::Proxy;
use green_agent::store::{EventRow, Outcome, PlannedTrial, Store, TrialResult};
use green_agent::trial::{Observer, RunEnv, TrialInput, run_trial};
use sandbox::{Backend, NetworkHandle, Owner, Sandbox, SandboxError, SandboxSpec};

/// A backend whose sandboxes never start (as when the engine keeps refusing).
#[derive(Debug, Default)]
struct Refusing {
    creates: AtomicUsize,
    networks: AtomicUsize,
    removed_networks: AtomicUsize,
}

#[async_trait]
impl Backend for Refusing {
    fn name(&self) -> &'static str {
        "docker"
    }
    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        // agent sandboxes only (each attempt also creates its grading sandbox meanwhile)
        if spec.owner.role == sandbox::Role::Agent {
            self.creates.fetch_add(1, Ordering::SeqCst);
        }
        Err(SandboxError::InvalidSpec(
            "the engine is refusing containers".into(),
        ))
    }
    async fn create_network(
        &self,
        owner: &Owner,
        _port: Option<u16>,
    ) -> Result<NetworkHandle, SandboxError> {
        let n = self.networks.fetch_add(1, Ordering::SeqCst);
        Ok(NetworkHandle {
            id: format!("n{n}"),
            name: format!("{}-net{n}", owner.run_id),
            allowed_endpoint: None,
        })
    }
    async fn remove_network(&self, _network: &NetworkHandle) -> Result<(), SandboxError> {
        self.removed_networks.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn reap(&self, _run_id: Option<&str>) -> Result<usize, SandboxError> {
        Ok(0)
    }
    async fn image_exists(&self, _image: &str) -> Result<bool, SandboxError> {
        Ok(true)
    }
    async fn adopt(&self, _run_id: &str) -> Result<sandbox::Adoption, SandboxError> {
        // this engine never started a container, so nothing is left to adopt
        Ok(sandbox::Adoption::default())
    }
}

#[derive(Debug)]
struct Quiet;

impl Observer for Quiet {
    fn phase(&self, _trial: &PlannedTrial, _phase: &str) {}
    fn finished(&self, _trial: &PlannedTrial, _result: &TrialResult) {}
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// Runs one trial of `agent` on a backend that refuses every container.
async fn refused_trial(
    agent: AgentSpec,
    proxy: Option<Proxy>,
) -> (TrialResult, Vec<EventRow>, Arc<Refusing>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task_dir = tmp.path().join("t");
    write(
        &task_dir,
        "task.toml",
        "id = \"t\"\nkind = \"generic\"\ninstruction = \"instruction.md\"\n[grading]\n[[grading.graders]]\nname = \"tests\"\ndimension = \"code_correctness\"\ncheck = { kind = \"pytest\", hidden_tests = \"tests\" }\n",
    );
    write(&task_dir, "instruction.md", "Do it.\n");
    write(&task_dir, "workspace/README.md", "x\n");
    write(
        &task_dir,
        "hidden/tests/test_x.py",
        "def test_x():\n    pass\n",
    );
    let task = Arc::new(tasks::load_task(&task_dir).expect("task loads"));
    let store = Store::open(&tmp.path().join("run")).await.expect("store");
    let backend = Arc::new(Refusing::default());
    let settings = Settings {
        infra_retries: 2,
        ..Settings::default()
    };
    let env = RunEnv {
        backend: backend.clone(),
        store: store.clone(),
        run_id: "retry-run".into(),
        settings,
        adapter_bin: tmp.path().join("adapter"),
        proxy,
        judge: None,
        staged: BTreeMap::new(),
        observer: Arc::new(Quiet),
        leftovers: Arc::default(),
        teardown: Default::default(),
        probes: Default::default(),
    };
    let planned = PlannedTrial {
        id: green_agent::identity::trial_id(&task.content_hash(), "nop", 0),
        task_id: "t".into(),
        task_kind: "generic".into(),
        task_hash: task.content_hash(),
        agent: "nop".into(),
        repeat_index: 0,
    };
    store
        .create_run(
            "retry-run",
            &serde_json::json!({}),
            std::slice::from_ref(&planned),
        )
        .await
        .expect("run");
    let input = TrialInput {
        planned: planned.clone(),
        task,
        agent,
        image: "img".into(),
    };
    let result = run_trial(&env, &input).await;
    let events = store
        .events("retry-run", Some(&planned.id))
        .await
        .expect("events");
    (result, events, backend)
}

#[tokio::test]
async fn infrastructure_failures_are_retried_then_recorded() {
    let (result, events, backend) = refused_trial(AgentSpec::Nop, None).await;
    assert_eq!(result.outcome, Outcome::InfraError);
    assert_eq!(result.attempts, 3, "one try and two retries");
    assert_eq!(result.score, None, "no score for an infrastructure failure");
    assert!(
        result
            .error
            .as_deref()
            .is_some_and(|e| e.contains("refusing containers")),
        "{:?}",
        result.error
    );
    assert_eq!(backend.creates.load(Ordering::SeqCst), 3);
    assert_eq!(
        backend.networks.load(Ordering::SeqCst),
        backend.removed_networks.load(Ordering::SeqCst),
        "every attempt's network is removed"
    );
    assert_eq!(events.iter().filter(|e| e.kind == "infra_error").count(), 3);
}

/// Each attempt of a model agent registers with the proxy afresh: a retry is never refused
/// as "already registered".
#[tokio::test]
async fn a_retried_model_agent_registers_with_the_proxy_again() {
    let proxy = Proxy::start(0, None, None).await.expect("proxy");
    let agent = AgentSpec::parse("cmd:true").expect("agent");
    assert!(agent.uses_model());
    let (result, events, _) = refused_trial(agent, Some(proxy)).await;
    assert_eq!(result.attempts, 3);
    let errors: Vec<String> = events
        .iter()
        .filter(|e| e.kind == "infra_error")
        .map(|e| e.data["error"].to_string())
        .collect();
    assert_eq!(errors.len(), 3);
    assert!(
        errors.iter().all(|e| e.contains("refusing containers")),
        "{errors:?}"
    );
}
