//! An assessment request as AgentBeats sends it: one message whose data part (or text part)
//! is `{"participants": {"<role>": "<A2A URL or hosted agent>"}, "config": {...}}`, checked
//! strictly against what the operator configured ([`Catalog`], [`Policy`]) before anything
//! runs. Every error names what is wrong and what the service expects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use a2a_protocol::{ClientConfig, Message, PartContent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agents::AgentSpec;

/// One configured task suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub path: PathBuf,
    pub tasks: Vec<TaskEntry>,
}

/// One task of a suite, as requests may name it.
#[derive(Debug, Clone)]
pub struct TaskEntry {
    pub id: String,
    pub kind: String,
    pub folder: PathBuf,
}

/// The task suites the operator configured (`--tasks [NAME=]PATH`), by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub suites: BTreeMap<String, Suite>,
}

impl Catalog {
    /// Loads every suite strictly (a broken task stops the service from starting). A suite is
    /// `NAME=PATH` or `PATH` (named after its folder).
    pub fn load(specs: &[String]) -> Result<Self, String> {
        let mut suites = BTreeMap::new();
        for spec in specs {
            let (name, path) = match spec.split_once('=') {
                Some((n, p)) => (n.trim().to_owned(), PathBuf::from(p.trim())),
                None => {
                    let path = PathBuf::from(spec);
                    let name = std::fs::canonicalize(&path)
                        .unwrap_or_else(|_| path.clone())
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    (name, path)
                }
            };
            if !valid_name(&name) {
                return Err(format!(
                    "suite `{spec}`: the name `{name}` is not usable in requests (letters, digits, `-`, `_`, `.`; not starting with `.`); write NAME=PATH"
                ));
            }
            let path = std::fs::canonicalize(&path)
                .map_err(|e| format!("suite `{spec}`: {}: {e}", path.display()))?;
            let loaded = tasks::load_suite(std::slice::from_ref(&path))
                .map_err(|e| format!("suite `{name}` ({}): {e}", path.display()))?;
            let tasks = loaded
                .iter()
                .map(|t| TaskEntry {
                    id: t.id().to_owned(),
                    kind: t.kind().as_str().to_owned(),
                    folder: t
                        .task_toml()
                        .parent()
                        .map_or_else(|| path.clone(), std::path::Path::to_path_buf),
                })
                .collect();
            if suites
                .insert(name.clone(), Suite { name, path, tasks })
                .is_some()
            {
                return Err(format!(
                    "two suites are named the same in `{spec}`; give one a name with NAME=PATH"
                ));
            }
        }
        Ok(Self { suites })
    }

    fn task(&self, id: &str) -> Option<&TaskEntry> {
        self.suites
            .values()
            .flat_map(|s| s.tasks.iter())
            .find(|t| t.id == id)
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.suites.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none configured".into()
        } else {
            names.join(", ")
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Longest wall-clock budget a request may give an agent run: 7 days.
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

/// What the operator allows requests to ask for.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Hosted agent kinds a participant may name (`oracle`, `nop`, `claude-code`, `codex`,
    /// `opencode`, `cmd`).
    pub hosted: BTreeSet<String>,
    /// URL prefixes external participants must start with (empty: any URL).
    pub allowed_urls: Vec<String>,
    pub max_repeats: u32,
    /// Largest per-request concurrency (the operator's `concurrency` setting).
    pub max_concurrency: usize,
    pub max_trials: usize,
    /// How long a participant's card may take to be served.
    pub card_timeout: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            hosted: ["oracle", "nop"].iter().map(|s| (*s).to_owned()).collect(),
            allowed_urls: Vec::new(),
            max_repeats: 100,
            max_concurrency: 2,
            max_trials: 10_000,
            card_timeout: Duration::from_secs(10),
        }
    }
}

/// The keys a request's `config` may hold (for the card and error messages).
pub const CONFIG_KEYS: &[(&str, &str)] = &[
    (
        "tasks",
        "suite names or task ids (a string or a list); default: every configured suite",
    ),
    ("task", "one suite name or task id (instead of `tasks`)"),
    ("exclude", "task ids to leave out"),
    (
        "kind",
        "task kinds to keep (prbench, scicode, generic, ...)",
    ),
    ("repeats", "trials per task and participant (default 1)"),
    (
        "concurrency",
        "trials at once (at most the service's limit)",
    ),
    ("timeout_secs", "wall-clock budget of each agent run"),
    (
        "num_shards",
        "split the selected tasks into this many shards (with shard_index)",
    ),
    ("shard_index", "which shard this request runs (0-based)"),
    (
        "oracle",
        "true: also run the hosted oracle as role `oracle` (validation run)",
    ),
];

/// An example request (the card's skill example and the README's).
pub fn example(suite: &str) -> String {
    serde_json::json!({
        "participants": { "agent": "http://127.0.0.1:9009/" },
        "config": { "tasks": [suite], "repeats": 1 }
    })
    .to_string()
}

/// A request that cannot run: the task is rejected with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

fn bad(msg: impl Into<String>) -> RequestError {
    RequestError(msg.into())
}

/// A string or a list of strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s],
            Self::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    #[serde(default)]
    participants: BTreeMap<String, String>,
    #[serde(default)]
    config: RawConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    tasks: Option<OneOrMany>,
    task: Option<String>,
    exclude: Option<OneOrMany>,
    kind: Option<OneOrMany>,
    #[serde(default, deserialize_with = "whole_number")]
    repeats: Option<u32>,
    #[serde(default, deserialize_with = "whole_number")]
    concurrency: Option<usize>,
    #[serde(default, deserialize_with = "whole_number")]
    timeout_secs: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    num_shards: Option<u32>,
    #[serde(default, deserialize_with = "whole_number")]
    shard_index: Option<u32>,
    oracle: Option<bool>,
}

/// A count given as a JSON integer or as a whole-number float: A2A 1.0 SDKs carry a data part
/// as a protobuf `Struct`, whose numbers are all doubles (`1` arrives as `1.0`).
fn whole_number<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::de::Error;
    /// Above 2^53 a double no longer holds every whole number exactly.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=EXACT).contains(f))
            .map(|f| f as u64)
    });
    whole
        .and_then(|w| T::try_from(w).ok())
        .map(Some)
        .ok_or_else(|| D::Error::custom(format!("expected a whole number >= 0, got {n}")))
}

/// A validated request: what will run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// Role → canonical agent spec.
    pub participants: BTreeMap<String, String>,
    /// The selected task folders (after kinds, exclusions and sharding), sorted by task id.
    pub tasks: Vec<PathBuf>,
    pub task_ids: Vec<String>,
    pub repeats: u32,
    pub concurrency: Option<usize>,
    pub timeout_secs: Option<u64>,
}

impl Assessment {
    /// Trials this assessment plans.
    pub fn trials(&self) -> usize {
        self.task_ids.len() * self.participants.len() * self.repeats as usize
    }

    /// Agent spec → role.
    pub fn roles(&self) -> BTreeMap<String, String> {
        self.participants
            .iter()
            .map(|(role, spec)| (spec.clone(), role.clone()))
            .collect()
    }
}

const EXPECTED: &str = "expected a message with one data part (or a text part holding JSON) \
{\"participants\": {\"<role>\": \"<A2A URL or hosted agent>\"}, \"config\": {\"tasks\": [\"<suite>\"], ...}}; \
the agent card's skills list the suites and config keys";

/// The request's JSON: the first data part that is an object, else the first text part.
pub fn request_json(message: &Message) -> Result<Value, RequestError> {
    for part in &message.parts {
        if let PartContent::Data(v) = &part.content
            && v.is_object()
        {
            return Ok(v.clone());
        }
    }
    let text = message
        .parts
        .iter()
        .find_map(|p| p.as_text())
        .ok_or_else(|| bad(format!("the message has no data or text part; {EXPECTED}")))?;
    let value: Value = serde_json::from_str(text.trim())
        .map_err(|e| bad(format!("the text part is not JSON ({e}); {EXPECTED}")))?;
    if !value.is_object() {
        return Err(bad(format!("the request is not a JSON object; {EXPECTED}")));
    }
    Ok(value)
}

/// Checks a request against the catalog and the policy (no network: see [`check_reachable`]).
pub fn validate(
    value: &Value,
    catalog: &Catalog,
    policy: &Policy,
    env: &BTreeMap<String, String>,
) -> Result<Assessment, RequestError> {
    let raw: RawRequest = serde_json::from_value(value.clone()).map_err(|e| {
        bad(format!(
            "the request does not have the expected shape: {e}; {EXPECTED}; config keys: {}",
            CONFIG_KEYS
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let config = raw.config;
    let participants = participants(raw.participants, config.oracle == Some(true), policy, env)?;

    // tasks
    let names: Vec<String> = match (config.tasks, config.task) {
        (Some(_), Some(_)) => {
            return Err(bad("config has both `tasks` and `task`; give one of them"));
        }
        (Some(t), None) => t.into_vec(),
        (None, Some(t)) => vec![t],
        (None, None) => catalog.suites.keys().cloned().collect(),
    };
    if names.is_empty() {
        return Err(bad(format!(
            "config.tasks is empty; name suites ({}) or task ids",
            catalog.names()
        )));
    }
    let mut selected: BTreeMap<String, &TaskEntry> = BTreeMap::new();
    for name in &names {
        check_not_path(name, catalog)?;
        if let Some(suite) = catalog.suites.get(name) {
            for t in &suite.tasks {
                selected.entry(t.id.clone()).or_insert(t);
            }
        } else if let Some(t) = catalog.task(name) {
            selected.entry(t.id.clone()).or_insert(t);
        } else {
            return Err(bad(format!(
                "config.tasks: `{name}` is neither a suite of this service ({}) nor a task id in one",
                catalog.names()
            )));
        }
    }
    if let Some(kinds) = config.kind {
        let kinds = kinds.into_vec();
        let present: BTreeSet<&str> = selected.values().map(|t| t.kind.as_str()).collect();
        for k in &kinds {
            if !present.contains(k.as_str()) {
                return Err(bad(format!(
                    "config.kind: no selected task is of kind `{k}` (kinds present: {})",
                    present.iter().copied().collect::<Vec<_>>().join(", ")
                )));
            }
        }
        selected.retain(|_, t| kinds.contains(&t.kind));
    }
    if let Some(exclude) = config.exclude {
        for id in exclude.into_vec() {
            check_not_path(&id, catalog)?;
            if selected.remove(&id).is_none() {
                return Err(bad(format!(
                    "config.exclude: `{id}` is not among the selected tasks"
                )));
            }
        }
    }
    match (config.num_shards, config.shard_index) {
        (None, None) => {}
        (Some(n), Some(i)) => {
            if n == 0 || i >= n {
                return Err(bad(format!(
                    "config: shard_index {i} must be below num_shards {n} (and num_shards at least 1)"
                )));
            }
            // task i (in id order) belongs to shard i mod n
            let mut index = 0u32;
            selected.retain(|_, _| {
                let keep = index % n == i;
                index += 1;
                keep
            });
        }
        _ => {
            return Err(bad(
                "config: num_shards and shard_index go together; give both or neither",
            ));
        }
    }
    if selected.is_empty() {
        return Err(bad(
            "no task is left after kind, exclude and shard selection",
        ));
    }
    let repeats = config.repeats.unwrap_or(1);
    if repeats == 0 || repeats > policy.max_repeats {
        return Err(bad(format!(
            "config.repeats must be between 1 and {} (got {repeats})",
            policy.max_repeats
        )));
    }
    if let Some(c) = config.concurrency
        && (c == 0 || c > policy.max_concurrency)
    {
        return Err(bad(format!(
            "config.concurrency must be between 1 and {} on this service (got {c})",
            policy.max_concurrency
        )));
    }
    if let Some(t) = config.timeout_secs
        && !(1..=MAX_TIMEOUT_SECS).contains(&t)
    {
        return Err(bad(format!(
            "config.timeout_secs must be between 1 and {MAX_TIMEOUT_SECS} (7 days) (got {t})"
        )));
    }
    let assessment = Assessment {
        participants,
        tasks: selected.values().map(|t| t.folder.clone()).collect(),
        task_ids: selected.keys().cloned().collect(),
        repeats,
        concurrency: config.concurrency,
        timeout_secs: config.timeout_secs,
    };
    if assessment.trials() > policy.max_trials {
        return Err(bad(format!(
            "the request plans {} trials; this service runs at most {} per request (fewer tasks, participants or repeats, or shards)",
            assessment.trials(),
            policy.max_trials
        )));
    }
    Ok(assessment)
}

/// A suite or task name that looks like a host path is refused before any lookup.
fn check_not_path(name: &str, catalog: &Catalog) -> Result<(), RequestError> {
    if name.contains('/') || name.contains('\\') || name.starts_with('.') || name.starts_with('~') {
        return Err(bad(format!(
            "`{name}` looks like a path; requests name a configured suite ({}) or a task id, never a path on this host",
            catalog.names()
        )));
    }
    Ok(())
}

fn participants(
    raw: BTreeMap<String, String>,
    oracle: bool,
    policy: &Policy,
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, RequestError> {
    let mut out = BTreeMap::new();
    let allowed = || {
        policy
            .hosted
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (role, value) in raw {
        if !valid_name(&role) {
            return Err(bad(format!(
                "participant role `{role}` is not a name (letters, digits, `-`, `_`, `.`, at most 64)"
            )));
        }
        let value = value.trim();
        let spec = if value.starts_with("http://") || value.starts_with("https://") {
            format!("a2a:{value}")
        } else {
            value.to_owned()
        };
        let agent = AgentSpec::parse(&spec).map_err(|e| {
            bad(format!(
                "participant `{role}`: {e}; give an A2A URL (http://HOST:PORT/) or a hosted agent allowed here ({})",
                allowed()
            ))
        })?;
        match &agent {
            AgentSpec::External { url } => {
                if !policy.allowed_urls.is_empty()
                    && !policy.allowed_urls.iter().any(|p| url_allowed(url, p))
                {
                    return Err(bad(format!(
                        "participant `{role}`: {url} is not allowed by this service (allowed URL prefixes: {})",
                        policy.allowed_urls.join(", ")
                    )));
                }
            }
            hosted => {
                let head = spec.split(':').next().unwrap_or_default();
                if !policy.hosted.contains(head) {
                    return Err(bad(format!(
                        "participant `{role}`: the hosted agent `{head}` is not allowed by this service (allowed: {}); give an A2A URL instead",
                        allowed()
                    )));
                }
                hosted.check_keys(env).map_err(|e| {
                    bad(format!(
                        "participant `{role}`: this service cannot run it: {e}"
                    ))
                })?;
            }
        }
        out.insert(role, agent.to_string());
    }
    if oracle {
        if !policy.hosted.contains("oracle") {
            return Err(bad(format!(
                "config.oracle: the hosted oracle is not allowed by this service (allowed: {})",
                allowed()
            )));
        }
        match out.get("oracle") {
            Some(spec) if spec != "oracle" => {
                return Err(bad(
                    "config.oracle adds the role `oracle`, but the participants already use that role for another agent",
                ));
            }
            _ => {
                out.insert("oracle".into(), "oracle".into());
            }
        }
    }
    if out.is_empty() {
        return Err(bad(format!(
            "no participants: give at least one role, e.g. {{\"participants\": {{\"agent\": \"http://HOST:PORT/\"}}}} (hosted agents allowed here: {})",
            allowed()
        )));
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (role, spec) in &out {
        if let Some(other) = seen.insert(spec.as_str(), role.as_str()) {
            return Err(bad(format!(
                "participants `{other}` and `{role}` are the same agent ({spec}); give each role its own agent"
            )));
        }
    }
    Ok(out)
}

/// Whether `url` is under the allowed `prefix`: a prefix ending in `/` is a plain prefix, any
/// other must be followed by `/`, `?` or nothing (so `http://host:1` does not allow
/// `http://host:10/`).
fn url_allowed(url: &str, prefix: &str) -> bool {
    match url.strip_prefix(prefix) {
        Some(rest) => {
            prefix.ends_with('/')
                || rest.is_empty()
                || rest.starts_with('/')
                || rest.starts_with('?')
        }
        None => false,
    }
}

/// Fetches every external participant's agent card; the first that cannot be fetched rejects
/// the request.
pub async fn check_reachable(assessment: &Assessment, policy: &Policy) -> Result<(), RequestError> {
    let config = ClientConfig {
        timeout: policy.card_timeout,
        connect_timeout: policy.card_timeout,
        retries: 1,
        ..ClientConfig::default()
    };
    for (role, spec) in &assessment.participants {
        let Some(url) = spec.strip_prefix("a2a:") else {
            continue;
        };
        let fetched = tokio::time::timeout(
            policy.card_timeout * 3,
            a2a_protocol::fetch_agent_card(url, &config),
        )
        .await;
        match fetched {
            Ok(Ok(card)) => {
                if card.negotiate().is_none() {
                    return Err(bad(format!(
                        "participant `{role}` ({url}): its agent card offers no JSON-RPC interface in A2A 1.0 or 0.3 (it offers: {})",
                        card.offered()
                    )));
                }
            }
            Ok(Err(e)) => {
                return Err(bad(format!(
                    "participant `{role}` is unreachable: its agent card at {url} could not be fetched: {e}"
                )));
            }
            Err(_) => {
                return Err(bad(format!(
                    "participant `{role}` is unreachable: its agent card at {url} was not served within {}s",
                    (policy.card_timeout * 3).as_secs()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let entry = |id: &str, kind: &str| TaskEntry {
            id: id.into(),
            kind: kind.into(),
            folder: PathBuf::from(format!("/suites/ex/{id}")),
        };
        let mut suites = BTreeMap::new();
        suites.insert(
            "examples".to_owned(),
            Suite {
                name: "examples".into(),
                path: "/suites/ex".into(),
                tasks: vec![
                    entry("a-generic", "generic"),
                    entry("b-scicode", "scicode"),
                    entry("c-generic", "generic"),
                    entry("d-prbench", "prbench"),
                ],
            },
        );
        Catalog { suites }
    }

    fn check(v: Value) -> Result<Assessment, RequestError> {
        validate(&v, &catalog(), &Policy::default(), &BTreeMap::new())
    }

    #[test]
    fn a_plain_request_selects_the_suite() {
        let a = check(serde_json::json!({
            "participants": {"agent": "http://127.0.0.1:9/"},
            "config": {"tasks": "examples", "repeats": 2, "oracle": true}
        }))
        .expect("valid");
        assert_eq!(a.task_ids.len(), 4);
        assert_eq!(a.participants["agent"], "a2a:http://127.0.0.1:9/");
        assert_eq!(a.participants["oracle"], "oracle");
        assert_eq!(a.trials(), 16);
    }

    #[test]
    fn whole_numbers_may_come_as_doubles() {
        // as A2A 1.0 SDKs send them: data parts are protobuf Structs, every number a double
        let a = check(serde_json::json!({
            "participants": {"agent": "nop"},
            "config": {"tasks": "examples", "repeats": 2.0, "timeout_secs": 60.0,
                       "num_shards": 2.0, "shard_index": 1.0, "concurrency": 1.0}
        }))
        .expect("valid");
        assert_eq!(a.repeats, 2);
        assert_eq!(a.timeout_secs, Some(60));
        assert_eq!(a.concurrency, Some(1));
        assert_eq!(a.task_ids.len(), 2);
    }

    #[test]
    fn shards_partition_the_tasks() {
        let mut all = Vec::new();
        for i in 0..3 {
            let a = check(serde_json::json!({
                "participants": {"agent": "nop"},
                "config": {"num_shards": 3, "shard_index": i}
            }))
            .expect("valid");
            all.extend(a.task_ids);
        }
        all.sort();
        assert_eq!(all, ["a-generic", "b-scicode", "c-generic", "d-prbench"]);
    }

    #[test]
    fn kind_and_exclude_filter() {
        let a = check(serde_json::json!({
            "participants": {"agent": "nop"},
            "config": {"kind": "generic", "exclude": ["a-generic"]}
        }))
        .expect("valid");
        assert_eq!(a.task_ids, ["c-generic"]);
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let cases = [
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"task": "examples", "colour": 1}}),
                "unknown field `colour`",
            ),
            (
                serde_json::json!({"participants": {}, "config": {}}),
                "no participants",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"tasks": "/etc"}}),
                "looks like a path",
            ),
            (
                serde_json::json!({"participants": {"agent": "claude-code:model=x"}}),
                "not allowed by this service",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"tasks": "nope"}}),
                "neither a suite",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"num_shards": 2}}),
                "go together",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"repeats": 0}}),
                "repeats must be",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"timeout_secs": 1e12}}),
                "timeout_secs must be between 1 and 604800 (7 days) (got 1000000000000)",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"timeout_secs": 0}}),
                "timeout_secs must be between 1 and 604800",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"timeout_secs": 1e300}}),
                "expected a whole number >= 0, got 1e+300",
            ),
            (
                serde_json::json!({"participants": {"a": "nop", "b": "nop"}}),
                "same agent",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"repeats": 1.5}}),
                "expected a whole number >= 0, got 1.5",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "config": {"repeats": -1}}),
                "expected a whole number >= 0, got -1",
            ),
            (
                serde_json::json!({"participants": {"agent": "nop"}, "extra": 1}),
                "unknown field `extra`",
            ),
        ];
        for (req, want) in cases {
            let err = check(req.clone()).expect_err("rejected");
            assert!(err.0.contains(want), "{req}: {err}");
        }
    }

    #[test]
    fn participant_urls_follow_the_allow_list() {
        assert!(url_allowed("http://a:1/", "http://a:1"));
        assert!(url_allowed("http://a:1", "http://a:1"));
        assert!(!url_allowed("http://a:10/", "http://a:1"));
        assert!(url_allowed("http://a:1/x/y", "http://a:1/x/"));
        assert!(!url_allowed("http://b:1/", "http://a:1/"));
        let policy = Policy {
            allowed_urls: vec!["http://10.1.2.3:9000".into()],
            ..Policy::default()
        };
        let err = validate(
            &serde_json::json!({"participants": {"agent": "http://10.1.2.30:9000/"}}),
            &catalog(),
            &policy,
            &BTreeMap::new(),
        )
        .expect_err("not allowed");
        assert!(
            err.0.contains("allowed URL prefixes: http://10.1.2.3:9000"),
            "{err}"
        );
    }

    #[test]
    fn text_or_data_parts_carry_the_request() {
        let v = serde_json::json!({"participants": {"agent": "nop"}});
        let text = Message::user_text(v.to_string());
        assert_eq!(request_json(&text).expect("json"), v);
        let data = Message::user(vec![a2a_protocol::Part::data(v.clone())]);
        assert_eq!(request_json(&data).expect("json"), v);
        let err = request_json(&Message::user_text("assess please")).expect_err("not json");
        assert!(err.0.contains("not JSON"), "{err}");
    }
}
