//! What every backend writes on the objects it creates: the owner's labels (the reap policy
//! reads them back, `reap_policy`) and a recognisable unique name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::child::proc_stat_field;
use crate::{Owner, labels};

/// `(pid, start time)` of this process, recorded as the owner of every object we create.
pub(crate) fn owner_identity() -> (u32, u64) {
    let pid = std::process::id();
    (pid, proc_stat_field(pid, 22).unwrap_or(0))
}

/// The labels of an object owned by `owner` and this process.
pub(crate) fn object_labels(owner: &Owner) -> HashMap<String, String> {
    let (pid, start) = owner_identity();
    let mut l = HashMap::new();
    l.insert(labels::MANAGED.to_string(), "true".to_string());
    l.insert(labels::RUN.to_string(), owner.run_id.clone());
    if let Some(trial) = &owner.trial_id {
        l.insert(labels::TRIAL.to_string(), trial.clone());
    }
    l.insert(labels::ROLE.to_string(), owner.role.to_string());
    l.insert(labels::OWNER_PID.to_string(), pid.to_string());
    l.insert(labels::OWNER_START.to_string(), start.to_string());
    if let Some(lock) = crate::owner_lock::labelled() {
        l.insert(labels::OWNER_LOCK.to_string(), lock.display().to_string());
    }
    l
}

/// A Docker-safe, recognisable object name: `rb-<run>-<role>-<unique>`.
pub(crate) fn object_name(owner: &Owner) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let run: String = owner
        .run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "rb-{run}-{}-{:x}{:x}{n:x}",
        owner.role,
        std::process::id(),
        nanos
    )
}
