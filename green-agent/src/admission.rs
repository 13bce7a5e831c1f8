//! Admission of trials to what the backend's nodes can hold ([`sandbox::Backend::capacity`]).
//!
//! A trial holds its agent sandbox and, created while the agent runs, its grading sandbox: on
//! a backend that reserves memory (Swarm), a trial is admitted only when both fit, beside the
//! trials of this run already admitted, into the memory the usable nodes have free of other
//! runs' and other services' reservations (`sandbox::Room`). `--concurrency` bounds the run
//! separately (the smaller wins). Trials are admitted in order (one waits at the head; a
//! large one is not overtaken forever by small ones). The capacity is read again at most every
//! [`REFRESH`] when a trial is admitted or waits (nodes that joined, left or were drained,
//! reservations that went away). On a backend that does not reserve memory (docker) nothing
//! but `--concurrency` bounds the run.
//!
//! The effective concurrency (how many of the run's largest trials fit, at most
//! `--concurrency`) and why is logged and told to the observer when it changes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandbox::{Backend, Bytes, Capacity, Needs};
use tracing::{info, warn};

/// How often the capacity is read again while trials are admitted or wait.
pub const REFRESH: Duration = Duration::from_secs(5);

/// Receives the lines about the effective concurrency.
pub type Note = Arc<dyn Fn(&str) + Send + Sync>;

/// The run's admission gate.
pub struct Admission {
    backend: Arc<dyn Backend>,
    run_id: String,
    concurrency: usize,
    /// How often the capacity is read again ([`REFRESH`]).
    refresh: Duration,
    /// The sandboxes of the run's largest trial (for the effective concurrency).
    largest: Vec<Needs>,
    state: Mutex<State>,
    /// Held by the trial at the head of the queue.
    turn: tokio::sync::Mutex<()>,
    released: tokio::sync::Notify,
    note: Note,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("run_id", &self.run_id)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct State {
    capacity: Capacity,
    read_at: Instant,
    admitted: BTreeMap<u64, Vec<Needs>>,
    next: u64,
    /// The last line told, so that only changes are.
    said: String,
}

/// An admitted trial's place; dropping it frees the place.
#[derive(Debug)]
pub struct Ticket {
    gate: Arc<Admission>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.gate.lock().admitted.remove(&self.id);
        self.gate.released.notify_one();
    }
}

impl Admission {
    /// A gate for `run_id` over `backend`, starting from `capacity` (read at planning);
    /// `trials` are the sandboxes of each planned trial.
    pub fn new(
        backend: Arc<dyn Backend>,
        run_id: &str,
        concurrency: usize,
        capacity: Capacity,
        trials: &[Vec<Needs>],
        note: Note,
    ) -> Arc<Self> {
        Self::with_refresh(
            backend,
            run_id,
            concurrency,
            capacity,
            trials,
            note,
            REFRESH,
        )
    }

    fn with_refresh(
        backend: Arc<dyn Backend>,
        run_id: &str,
        concurrency: usize,
        capacity: Capacity,
        trials: &[Vec<Needs>],
        note: Note,
        refresh: Duration,
    ) -> Arc<Self> {
        let total = |t: &Vec<Needs>| t.iter().map(|n| n.memory_bytes).sum::<u64>();
        let largest = trials
            .iter()
            .max_by_key(|t| total(t))
            .cloned()
            .unwrap_or_default();
        let gate = Arc::new(Self {
            backend,
            run_id: run_id.to_owned(),
            concurrency,
            refresh,
            largest,
            state: Mutex::new(State {
                capacity,
                read_at: Instant::now(),
                admitted: BTreeMap::new(),
                next: 0,
                said: String::new(),
            }),
            turn: tokio::sync::Mutex::new(()),
            released: tokio::sync::Notify::new(),
            note,
        });
        gate.tell();
        gate
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the capacity bounds anything beyond `--concurrency`.
    fn bounds(capacity: &Capacity) -> bool {
        capacity.reserves_memory && capacity.is_known()
    }

    /// How many trials run at once now and why (one line).
    pub fn effective(&self) -> (usize, String) {
        let st = self.lock();
        let c = self.concurrency;
        if !Self::bounds(&st.capacity) {
            let why = if st.capacity.is_known() {
                format!(
                    "--concurrency {c}; the {} backend reserves no memory ({})",
                    self.backend.name(),
                    st.capacity.describe(&self.run_id)
                )
            } else {
                format!(
                    "--concurrency {c}; the {} backend reports no capacity",
                    self.backend.name()
                )
            };
            return (c, why);
        }
        let fit = st
            .capacity
            .room_for(&self.run_id)
            .how_many(&self.largest, c);
        let trial = self
            .largest
            .iter()
            .map(|n| Bytes(n.memory_bytes).to_string())
            .collect::<Vec<_>>()
            .join(" + ");
        let bound = if fit < c {
            format!("the cluster holds {fit} trial(s) of the largest kind")
        } else {
            format!("--concurrency {c} (the cluster holds at least that many)")
        };
        let what = if self.largest.len() > 1 {
            " (agent + grader)"
        } else {
            " (grader; the agent is external)"
        };
        let why = format!(
            "{bound}: a trial reserves {trial}{what} on the {} backend, {}",
            self.backend.name(),
            st.capacity.describe(&self.run_id)
        );
        (fit.min(c), why)
    }

    /// Logs and tells the effective concurrency when it changed.
    fn tell(&self) {
        let (n, why) = self.effective();
        let line = format!("concurrency {n}: {why}");
        {
            let mut st = self.lock();
            if st.said == line {
                return;
            }
            st.said = line.clone();
        }
        info!(concurrency = n, reason = %why, "effective concurrency");
        (self.note)(&line);
    }

    /// Reads the capacity again (a failed read keeps the last one).
    async fn refresh(&self) {
        let read = self.backend.capacity().await;
        {
            let mut st = self.lock();
            st.read_at = Instant::now();
            match read {
                Ok(c) => st.capacity = c,
                Err(e) => {
                    warn!(error = %e, "cannot read the backend's capacity; keeping the last reading")
                }
            }
        }
        self.tell();
    }

    /// Admits a trial with these sandboxes once they fit beside the admitted ones (in order of
    /// arrival); the ticket holds its place until dropped.
    pub async fn admit(self: &Arc<Self>, trial: Vec<Needs>) -> Ticket {
        let _turn = self.turn.lock().await;
        let mut waited = false;
        loop {
            let stale =
                self.lock().read_at.elapsed() >= if waited { Duration::ZERO } else { self.refresh };
            if stale && Self::bounds(&self.lock().capacity) {
                self.refresh().await;
            }
            if let Some(ticket) = self.try_admit(&trial) {
                return ticket;
            }
            if !waited {
                let st = self.lock();
                let needs: Vec<String> = trial.iter().map(ToString::to_string).collect();
                info!(
                    admitted = st.admitted.len(),
                    needs = %needs.join(" + "),
                    capacity = %st.capacity.describe(&self.run_id),
                    "a trial waits for room on the cluster"
                );
            }
            waited = true;
            tokio::select! {
                () = self.released.notified() => {}
                () = tokio::time::sleep(self.refresh) => {}
            }
        }
    }

    fn try_admit(self: &Arc<Self>, trial: &[Needs]) -> Option<Ticket> {
        let mut st = self.lock();
        if Self::bounds(&st.capacity) {
            let mut room = st.capacity.room_for(&self.run_id);
            // The admitted trials first; when they no longer fit (a node left), none is added.
            if !st.admitted.values().all(|t| room.place(t)) || !room.place(trial) {
                return None;
            }
        }
        let id = st.next;
        st.next += 1;
        st.admitted.insert(id, trial.to_vec());
        Some(Ticket {
            gate: self.clone(),
            id,
        })
    }
}

/// The order trials take their slots in: the plan order (a resume's left trials first). Each
/// trial waits for its turn ([`InOrder::turn`]) before it asks for any slot and gives the turn
/// on (drops its [`Turn`]) once it holds them all, so no trial behind it starts first, however
/// the runtime schedules their tasks.
#[derive(Debug, Clone)]
pub struct InOrder {
    next: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Default for InOrder {
    fn default() -> Self {
        Self {
            next: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }
}

/// A trial's turn to take its slots; the next one's begins when this is dropped (also when
/// the trial's task is aborted or panics).
#[derive(Debug)]
pub struct Turn {
    next: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.next.send_modify(|n| *n += 1);
    }
}

impl InOrder {
    /// Waits until every trial before the `n`-th (0-based) has given its turn on.
    pub async fn turn(&self, n: usize) -> Turn {
        let mut rx = self.next.subscribe();
        // The sender lives in `self`: waiting cannot fail.
        let _ = rx.wait_for(|next| *next >= n).await;
        Turn {
            next: self.next.clone(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sandbox::{
        Adoption, NetworkHandle, NodeCapacity, Owner, Sandbox, SandboxError, SandboxSpec,
    };

    const GIB: u64 = 1024 * 1024 * 1024;
    const REFRESH: Duration = Duration::from_millis(50);

    /// A backend whose capacity the test sets (also the slots' tests' backend).
    #[derive(Debug)]
    pub(crate) struct Nodes(pub(crate) Mutex<Capacity>);

    #[async_trait::async_trait]
    impl Backend for Nodes {
        fn name(&self) -> &'static str {
            "swarm"
        }
        async fn create(&self, _: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
            unreachable!()
        }
        async fn create_network(
            &self,
            _: &Owner,
            _: Option<u16>,
        ) -> Result<NetworkHandle, SandboxError> {
            unreachable!()
        }
        async fn remove_network(&self, _: &NetworkHandle) -> Result<(), SandboxError> {
            unreachable!()
        }
        async fn reap(&self, _: Option<&str>) -> Result<usize, SandboxError> {
            Ok(0)
        }
        async fn image_exists(&self, _: &str) -> Result<bool, SandboxError> {
            Ok(true)
        }
        async fn adopt(&self, _: &str) -> Result<Adoption, SandboxError> {
            Ok(Adoption::default())
        }
        async fn capacity(&self) -> Result<Capacity, SandboxError> {
            Ok(self.0.lock().unwrap().clone())
        }
    }

    fn two_gib_trial() -> Vec<Needs> {
        vec![
            Needs {
                cpus: 1.0,
                memory_bytes: 2 * GIB,
            };
            2
        ]
    }

    fn one_node(gib: u64, unusable: Option<&str>) -> Capacity {
        let mut n = NodeCapacity::new("n1", "box", 2.0, gib * GIB);
        n.unusable = unusable.map(String::from);
        Capacity {
            nodes: vec![n],
            reserves_memory: true,
        }
    }

    #[tokio::test]
    async fn trials_wait_for_memory_and_for_a_node_to_come_back() {
        let backend = Arc::new(Nodes(Mutex::new(one_node(8, None))));
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let said = lines.clone();
        let gate = Admission::with_refresh(
            backend.clone(),
            "run",
            4,
            one_node(8, None),
            &[two_gib_trial()],
            Arc::new(move |l: &str| said.lock().unwrap().push(l.to_owned())),
            REFRESH,
        );
        // 8 GiB hold two trials of 2 + 2 GiB: --concurrency 4 is not reached.
        assert_eq!(gate.effective().0, 2);
        assert!(
            lines.lock().unwrap()[0].starts_with("concurrency 2: the cluster holds 2 trial(s)"),
            "{lines:?}"
        );
        let a = gate.admit(two_gib_trial()).await;
        let _b = gate.admit(two_gib_trial()).await;
        let third = tokio::spawn({
            let gate = gate.clone();
            async move { gate.admit(two_gib_trial()).await }
        });
        tokio::time::sleep(REFRESH * 2).await;
        assert!(!third.is_finished(), "no room for a third");
        drop(a);
        let c = tokio::time::timeout(REFRESH * 4, third)
            .await
            .expect("admitted")
            .expect("task");
        // The node is drained: nothing more is admitted; active again, it is.
        // (A reading is used for up to REFRESH.)
        *backend.0.lock().unwrap() = one_node(8, Some("availability drain"));
        tokio::time::sleep(REFRESH * 2).await;
        drop(c);
        let fourth = tokio::spawn({
            let gate = gate.clone();
            async move { gate.admit(two_gib_trial()).await }
        });
        tokio::time::sleep(REFRESH * 3).await;
        assert!(!fourth.is_finished(), "no usable node");
        assert_eq!(gate.effective().0, 0);
        *backend.0.lock().unwrap() = one_node(8, None);
        tokio::time::timeout(REFRESH * 10, fourth)
            .await
            .expect("admitted")
            .expect("task");
        let lines = lines.lock().unwrap();
        assert!(
            lines.iter().any(|l| l.starts_with("concurrency 0:")
                && l.contains("box ignored: availability drain")),
            "{lines:?}"
        );
        assert!(
            lines.last().unwrap().starts_with("concurrency 2:"),
            "{lines:?}"
        );
    }

    #[tokio::test]
    async fn concurrency_wins_when_smaller_and_a_backend_without_reservations_is_not_bounded() {
        let big = one_node(512, None);
        let backend = Arc::new(Nodes(Mutex::new(big.clone())));
        let gate = Admission::new(
            backend,
            "run",
            3,
            big,
            &[two_gib_trial()],
            Arc::new(|_: &str| {}),
        );
        let (n, why) = gate.effective();
        assert_eq!(n, 3);
        assert!(
            why.starts_with("--concurrency 3 (the cluster holds at least that many)"),
            "{why}"
        );
        let docker = Capacity {
            reserves_memory: false,
            ..one_node(1, None)
        };
        let backend = Arc::new(Nodes(Mutex::new(docker.clone())));
        let gate = Admission::new(
            backend,
            "run",
            5,
            docker,
            &[two_gib_trial()],
            Arc::new(|_: &str| {}),
        );
        let mut tickets = Vec::new();
        for _ in 0..5 {
            tickets.push(gate.admit(two_gib_trial()).await);
        }
        assert_eq!(gate.effective().0, 5);
        assert!(gate.effective().1.contains("reserves no memory"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn trials_take_their_slots_in_plan_order_and_never_beyond_the_limit() {
        let order = InOrder::default();
        let slots = Arc::new(tokio::sync::Semaphore::new(2));
        let started = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut set = tokio::task::JoinSet::new();
        // Spawned last first: only the turns put them in order.
        for i in (0..12).rev() {
            let (order, slots, started) = (order.clone(), slots.clone(), started.clone());
            let (running, most) = (running.clone(), most.clone());
            set.spawn(async move {
                let turn = order.turn(i).await;
                let _slot = slots.acquire_owned().await.expect("slot");
                // recorded while the turn is held: the next trial cannot take a slot before
                started.lock().expect("lock").push(i);
                drop(turn);
                let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        // A trial aborted while it waits gives its turn on too.
        let blocked = order.clone();
        let aborted = tokio::spawn(async move {
            let _turn = blocked.turn(12).await;
            std::future::pending::<()>().await;
        });
        while set.join_next().await.is_some() {}
        assert_eq!(
            *started.lock().expect("lock"),
            (0..12).collect::<Vec<_>>(),
            "slots taken in plan order"
        );
        assert!(most.load(std::sync::atomic::Ordering::SeqCst) <= 2);
        aborted.abort();
        let _ = aborted.await;
        tokio::time::timeout(Duration::from_secs(5), order.turn(13))
            .await
            .expect("the aborted trial's turn passed on");
    }
}
