//! The two waits of a trial in the run's dispatcher ([`crate::run`]): first a **place ahead**
//! ([`Slots::ahead`]: at most `--concurrency` trials hold one, taken in plan order, the trial's
//! memory admitted by [`Admission`]), in which its sandboxes are prepared before it may run
//! ([`crate::trial::ahead`]); then its **run slot** ([`Slots::run`]: at most `--concurrency`,
//! and the service's shared slots, taken in plan order), which frees its place ahead, so the
//! next trial is prepared while this one runs. The memory ticket is held from the place ahead
//! to the trial's end (prepared containers hold memory).

use std::sync::Arc;

use sandbox::Needs;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::admission::{Admission, InOrder, Ticket};

/// The dispatcher's gates, shared by every trial of a run.
#[derive(Debug, Clone)]
pub struct Slots {
    concurrency: usize,
    ahead_order: InOrder,
    ahead: Arc<Semaphore>,
    run_order: InOrder,
    running: Arc<Semaphore>,
    /// The service's pool shared with other runs, taken after the run's own slot.
    shared: Option<Arc<Semaphore>>,
    admission: Arc<Admission>,
}

/// A trial's place ahead (its memory admitted). Dropped without [`Slots::run`] (the trial gives
/// up: its image failed, its task was aborted), it gives its turn to run on, so the trials
/// behind it do not wait for it.
#[derive(Debug)]
pub struct Place {
    _permit: Option<OwnedSemaphorePermit>,
    ticket: Option<Ticket>,
    /// The run order and this trial's number, until its run turn was taken.
    owed: Option<(InOrder, usize)>,
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some((order, n)) = self.owed.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move { drop(order.turn(n).await) });
        }
    }
}

/// A trial's run slot; dropping it frees the slot (and its memory).
#[derive(Debug)]
pub struct RunSlot {
    _permit: Option<OwnedSemaphorePermit>,
    _shared: Option<OwnedSemaphorePermit>,
    _ticket: Option<Ticket>,
}

impl Slots {
    pub fn new(
        concurrency: usize,
        shared: Option<Arc<Semaphore>>,
        admission: Arc<Admission>,
    ) -> Self {
        let concurrency = concurrency.max(1);
        Self {
            concurrency,
            ahead_order: InOrder::default(),
            ahead: Arc::new(Semaphore::new(concurrency)),
            run_order: InOrder::default(),
            running: Arc::new(Semaphore::new(concurrency)),
            shared,
            admission,
        }
    }

    /// Waits for the `n`-th trial's (0-based, plan order) place ahead: its turn, one of the
    /// `concurrency` places, then its memory.
    pub async fn ahead(&self, n: usize, needs: Vec<Needs>) -> Place {
        let turn = self.ahead_order.turn(n).await;
        let permit = acquire(&self.ahead).await;
        let ticket = self.admission.admit(needs).await;
        drop(turn);
        Place {
            _permit: permit,
            ticket: Some(ticket),
            owed: Some((self.run_order.clone(), n)),
        }
    }

    /// Waits for the trial's run slot (its turn in plan order, a run slot, a shared slot); its
    /// place ahead is freed once it holds them.
    pub async fn run(&self, n: usize, mut place: Place) -> RunSlot {
        place.owed = None;
        let turn = self.run_order.turn(n).await;
        let permit = acquire(&self.running).await;
        let shared = match &self.shared {
            Some(s) => acquire(s).await,
            None => None,
        };
        drop(turn);
        let ticket = place.ticket.take();
        drop(place);
        RunSlot {
            _permit: permit,
            _shared: shared,
            _ticket: ticket,
        }
    }

    /// How many trials hold a place ahead now.
    pub fn prepared(&self) -> usize {
        self.concurrency - self.ahead.available_permits()
    }
}

/// A permit of `sem` (never closed: `None` only if it were).
async fn acquire(sem: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    sem.clone().acquire_owned().await.ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::time::Duration;

    use sandbox::Capacity;

    use super::*;
    use crate::admission::tests::Nodes;

    fn unbounded() -> Capacity {
        Capacity {
            nodes: vec![],
            reserves_memory: false,
        }
    }

    fn slots(concurrency: usize) -> Slots {
        let admission = Admission::new(
            // reserves no memory (like docker): only `--concurrency` bounds
            Arc::new(Nodes(Mutex::new(unbounded()))),
            "run",
            concurrency,
            unbounded(),
            &[],
            Arc::new(|_: &str| {}),
        );
        Slots::new(concurrency, None, admission)
    }

    const PENDING: Duration = Duration::from_millis(100);

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn never_more_than_concurrency_prepared_ahead_or_running() {
        let slots = slots(2);
        let started = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicUsize::new(0));
        let most_running = Arc::new(AtomicUsize::new(0));
        let most_prepared = Arc::new(AtomicUsize::new(0));
        // prepared ahead while the run's slots were all taken: the overlap this is for
        let overlapped = Arc::new(AtomicUsize::new(0));
        let mut set = tokio::task::JoinSet::new();
        // Spawned last first: only the turns put them in order.
        for i in (0..10).rev() {
            let slots = slots.clone();
            let (started, running) = (started.clone(), running.clone());
            let (most_running, most_prepared, overlapped) = (
                most_running.clone(),
                most_prepared.clone(),
                overlapped.clone(),
            );
            set.spawn(async move {
                let place = slots.ahead(i, Vec::new()).await;
                most_prepared.fetch_max(slots.prepared(), SeqCst);
                if running.load(SeqCst) == 2 {
                    overlapped.fetch_add(1, SeqCst);
                }
                // preparing, shorter than a run
                tokio::time::sleep(Duration::from_millis(5)).await;
                let slot = slots.run(i, place).await;
                started.lock().expect("lock").push(i);
                let now = running.fetch_add(1, SeqCst) + 1;
                most_running.fetch_max(now, SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                running.fetch_sub(1, SeqCst);
                drop(slot);
            });
        }
        while set.join_next().await.is_some() {}
        // (the order of the turns is `InOrder`'s, tested with it: recorded after the turn
        // was given on, two neighbours may appear swapped here)
        let mut started = started.lock().expect("lock").clone();
        started.sort_unstable();
        assert_eq!(started, (0..10).collect::<Vec<_>>(), "every trial ran");
        assert!(most_running.load(SeqCst) <= 2, "run slots bounded");
        assert!(
            most_prepared.load(SeqCst) <= 2,
            "places ahead bounded: {}",
            most_prepared.load(SeqCst)
        );
        assert!(
            overlapped.load(SeqCst) > 0,
            "trials were prepared while the slots were all taken"
        );
        assert_eq!(slots.prepared(), 0, "every place was freed");
    }

    #[tokio::test]
    async fn at_concurrency_one_the_next_trial_is_prepared_while_one_runs() {
        let slots = slots(1);
        let first = slots.ahead(0, Vec::new()).await;
        let running = slots.run(0, first).await;
        // the second is prepared while the first runs ...
        let second = tokio::time::timeout(PENDING, slots.ahead(1, Vec::new()))
            .await
            .expect("prepared ahead while the first runs");
        assert_eq!(slots.prepared(), 1);
        // ... the third is not (one place ahead) ...
        let third = tokio::spawn({
            let slots = slots.clone();
            async move { slots.ahead(2, Vec::new()).await }
        });
        // ... and the second does not run before the first frees its slot.
        let second_runs = tokio::spawn({
            let slots = slots.clone();
            async move { slots.run(1, second).await }
        });
        tokio::time::sleep(PENDING).await;
        assert!(
            !third.is_finished(),
            "a second place ahead at concurrency 1"
        );
        assert!(!second_runs.is_finished(), "two run slots at concurrency 1");
        drop(running);
        let _slot = tokio::time::timeout(Duration::from_secs(5), second_runs)
            .await
            .expect("the second takes the freed slot")
            .expect("joined");
        let third = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .expect("the third is prepared once the second runs")
            .expect("joined");
        assert_eq!(slots.prepared(), 1);
        drop(third);
    }

    #[tokio::test]
    async fn a_trial_that_gives_up_its_place_lets_the_next_run() {
        let slots = slots(1);
        // the first trial's image failed: it drops its place and never asks to run
        let first = slots.ahead(0, Vec::new()).await;
        drop(first);
        let second = slots.ahead(1, Vec::new()).await;
        let _slot = tokio::time::timeout(Duration::from_secs(5), slots.run(1, second))
            .await
            .expect("the trial behind one that gave up runs");
        assert_eq!(slots.prepared(), 0);
    }
}
