//! Sandboxes and networks of one attempt, removed on every path out of it; [`Teardown`] runs
//! the removals of finished attempts in the background (a run waits for them before it ends).

use std::sync::{Arc, Mutex};

use sandbox::{Backend, NetworkHandle, Sandbox};
use tracing::warn;

/// What one attempt created; [`Resources::release`] removes it (the reaper is the backstop).
#[derive(Debug, Default)]
pub(crate) struct Resources {
    sandboxes: Vec<Arc<dyn Sandbox>>,
    networks: Vec<NetworkHandle>,
    /// The hosted agent's sandbox (also in `sandboxes`), for [`Resources::take_agent`].
    agent: Option<Arc<dyn Sandbox>>,
}

impl Resources {
    /// Keeps a shared sandbox for removal and hands it back.
    pub(crate) fn keep_shared(&mut self, sb: Arc<dyn Sandbox>) -> Arc<dyn Sandbox> {
        self.sandboxes.push(sb.clone());
        sb
    }

    /// Keeps the agent's sandbox for removal (unless [`Resources::take_agent`] takes it back).
    pub(crate) fn keep_agent(&mut self, sb: Arc<dyn Sandbox>) -> Arc<dyn Sandbox> {
        self.agent = Some(sb.clone());
        self.keep_shared(sb)
    }

    /// Takes the agent's sandbox (if it is still kept) and its network out of what is
    /// removed: a retry takes the agent over instead of starting another one.
    pub(crate) fn take_agent(&mut self) -> Option<(Arc<dyn Sandbox>, Option<NetworkHandle>)> {
        let agent = self.agent.take()?;
        let before = self.sandboxes.len();
        self.sandboxes.retain(|s| !Arc::ptr_eq(s, &agent));
        if self.sandboxes.len() == before {
            return None;
        }
        // The only network an attempt creates is its agent's.
        Some((agent, self.networks.pop()))
    }

    /// Keeps everything `other` kept (its agent as the agent).
    pub(crate) fn absorb(&mut self, mut other: Resources) {
        self.sandboxes.append(&mut other.sandboxes);
        self.networks.append(&mut other.networks);
        if other.agent.is_some() {
            self.agent = other.agent;
        }
    }

    /// Keeps a network for removal.
    pub(crate) fn keep_network(&mut self, network: NetworkHandle) {
        self.networks.push(network);
    }

    /// Removes every sandbox, then every network kept so far.
    pub(crate) async fn release(&mut self, backend: &dyn Backend) {
        self.release_sandboxes().await;
        for n in self.networks.drain(..) {
            if let Err(e) = backend.remove_network(&n).await {
                warn!(error = %e, network = %n.name, "could not remove network (the reaper will)");
            }
        }
    }

    /// Removes every sandbox kept so far, concurrently (networks stay kept).
    pub(crate) async fn release_sandboxes(&mut self) {
        let removals = self.sandboxes.drain(..).map(|s| async move {
            if let Err(e) = s.remove().await {
                warn!(error = %e, sandbox = s.id(), "could not remove sandbox (the reaper will)");
            }
        });
        futures::future::join_all(removals).await;
    }

    /// Removes every sandbox kept so far that may still run a process; those confirmed stopped
    /// or frozen
    /// stay kept (no process of theirs runs; their removal, with the attempt's other objects,
    /// need not delay what comes next).
    pub(crate) async fn release_running_sandboxes(&mut self) {
        let checks = self.sandboxes.drain(..).map(|s| async move {
            // Ended or frozen: nothing of it runs again; removed after the record.
            let stopped = matches!(s.may_run().await, Ok(false));
            if !stopped && let Err(e) = s.remove().await {
                warn!(error = %e, sandbox = s.id(), "could not remove sandbox (the reaper will)");
            }
            stopped.then_some(s)
        });
        self.sandboxes = futures::future::join_all(checks)
            .await
            .into_iter()
            .flatten()
            .collect();
    }

    /// Hands the removal of everything kept so far to `teardown` (it runs in the background).
    pub(crate) fn release_later(&mut self, backend: Arc<dyn Backend>, teardown: &Teardown) {
        let mut mine = std::mem::take(self);
        teardown.spawn(async move { mine.release(backend.as_ref()).await });
    }
}

/// Removals of finished attempts running in the background, so that a trial's record (and the
/// next trial) does not wait for Docker to remove its containers and network. Every object
/// still carries the reaper's labels; a run calls [`Teardown::wait`] before it ends.
#[derive(Debug, Clone, Default)]
pub struct Teardown {
    pending: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Teardown {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<tokio::task::JoinHandle<()>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn spawn(&self, removal: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut pending = self.lock();
        pending.retain(|h| !h.is_finished());
        pending.push(tokio::spawn(removal));
    }

    /// Waits for every removal handed over so far (and those handed over meanwhile).
    pub async fn wait(&self) {
        loop {
            let batch: Vec<_> = std::mem::take(&mut *self.lock());
            if batch.is_empty() {
                return;
            }
            for h in batch {
                if let Err(e) = h.await {
                    warn!(error = %e, "a background removal failed (the reaper will clean up)");
                }
            }
        }
    }
}
