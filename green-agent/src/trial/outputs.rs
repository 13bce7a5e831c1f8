//! The agent's outputs into the store: changed workspace files (a hosted agent's copied-out
//! workspace, compared with the pristine one) and A2A artifacts (answer, trajectory, usage, and
//! files, raw or by `url`), each stored content-addressed and staged for grading.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use sandbox::Sandbox;
use tracing::warn;

use super::env::{InfraError, RunEnv, io};
use super::media::media_type;
use crate::model::{ArtifactRef, Usage};
use crate::store::Store;
use white_agent_adapter::contract::{USAGE_ARTIFACT, UsageReport};

/// What was collected of the agent's work.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub(crate) artifacts: Vec<ArtifactRef>,
    /// Usage as the agent reported it (the proxy's count, when there is one, wins later).
    pub(crate) usage: ReportedUsage,
    /// What was skipped or taken in an unusual way, with the reason.
    pub(crate) flags: Vec<String>,
    /// Why collection was abandoned (its budget ran out): nothing of the agent's is graded, the
    /// trial scores 0.
    pub(crate) timed_out: Option<String>,
}

pub(crate) fn put_artifact(
    env: &RunEnv,
    artifacts: &mut Vec<ArtifactRef>,
    name: &str,
    bytes: &[u8],
    media_type: Option<&str>,
) -> Result<(), InfraError> {
    let sha = env.store.put_blob(bytes)?;
    artifacts.retain(|a| a.name != name);
    artifacts.push(ArtifactRef {
        name: name.into(),
        sha256: sha,
        size: bytes.len() as u64,
        media_type: media_type.map(Into::into),
    });
    Ok(())
}

/// Every file of the agent's final workspace that is new or differs from the pristine task
/// workspace: stored as `file:<path>` (returned) and staged in `outputs_dir` for grading.
/// Blocking (a walk of every file): run it off the runtime. `stop` ends it between two files
/// (the collection budget ran out): then it returns `None`, having written nothing more.
pub(crate) fn changed_files(
    store: &Store,
    pristine: &Path,
    raw: &Path,
    outputs_dir: &Path,
    stop: &AtomicBool,
) -> Result<Option<Vec<ArtifactRef>>, InfraError> {
    // Each path once (a walk): gathered here and put in one go by the caller, so 100k files
    // cost 100k steps, not a scan of the list per file.
    let mut changed: Vec<ArtifactRef> = Vec::new();
    for entry in walkdir::WalkDir::new(raw).sort_by_file_name() {
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let entry = entry.map_err(|e| InfraError::Io {
            what: "walking the agent workspace".into(),
            source: e.into(),
        })?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry.path().strip_prefix(raw).unwrap_or(entry.path());
        let bytes = std::fs::read(entry.path())
            .map_err(io(format!("reading {}", entry.path().display())))?;
        let original = std::fs::read(pristine.join(rel)).ok();
        if original.as_deref() == Some(&bytes[..]) {
            continue;
        }
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        changed.push(ArtifactRef {
            name: format!("file:{rel_s}"),
            sha256: store.put_blob(&bytes)?,
            size: bytes.len() as u64,
            media_type: Some(media_type(&rel_s)),
        });
        let dest = outputs_dir.join(rel);
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p).map_err(io("staging outputs"))?;
        }
        // A link to the copied-out file (nothing more is written per file); a copy where
        // the two folders cannot share it.
        if std::fs::hard_link(entry.path(), &dest).is_err() {
            std::fs::write(&dest, &bytes).map_err(io("staging outputs"))?;
        }
    }
    Ok(Some(changed))
}

/// Puts `changed` (from [`changed_files`]) among `artifacts`, replacing those of the same name.
pub(crate) fn add_changed(artifacts: &mut Vec<ArtifactRef>, changed: Vec<ArtifactRef>) {
    let names: std::collections::HashSet<&str> = changed.iter().map(|a| a.name.as_str()).collect();
    artifacts.retain(|a| !names.contains(a.name.as_str()));
    artifacts.extend(changed);
}

/// The A2A artifacts: answer, trajectory, usage; files too when `outputs_dir` is given (an
/// external agent, whose workspace we cannot copy out; or a hosted agent whose workspace was
/// over the output cap): raw parts as they are, `url` parts fetched from `source` (all of them
/// together with raw parts at most `max_output_bytes`, like a copied-out workspace, all url
/// downloads together within [`URL_FETCH_BUDGET`], no redirects; a file that does not fit
/// or cannot be fetched is left out, recorded in a `url_file_error` event and counted in the
/// returned number). Normally a hosted agent's file artifacts are ignored: its whole workspace
/// was copied out, so nothing is fetched twice.
pub(crate) async fn collect_a2a_artifacts(
    env: &RunEnv,
    trial_id: &str,
    source: Option<UrlSource<'_>>,
    task: &a2a_protocol::Task,
    outputs_dir: Option<&Path>,
    out: &mut Collected,
) -> Result<Vec<String>, InfraError> {
    let Collected {
        artifacts,
        usage,
        flags,
        ..
    } = out;
    let mut unnamed_texts: Vec<(String, String)> = Vec::new();
    let mut total = 0u64;
    let fetched_bytes = &mut total;
    // Every url download of the trial together ends by then (each also has a minimum rate).
    let url_deadline = std::time::Instant::now() + URL_FETCH_BUDGET;
    let mut failures = Vec::new();
    let not_fetched = &mut failures;
    for a in &task.artifacts {
        let name = a.name.clone().unwrap_or_default();
        match name.as_str() {
            "answer" => put_artifact(
                env,
                artifacts,
                "answer",
                a.text_content().as_bytes(),
                Some("text/plain"),
            )?,
            "trajectory" | USAGE_ARTIFACT => {
                if let Some(d) = a.parts.iter().find_map(|p| p.as_data()) {
                    put_artifact(
                        env,
                        artifacts,
                        &name,
                        d.to_string().as_bytes(),
                        Some("application/json"),
                    )?;
                    if name == USAGE_ARTIFACT {
                        match UsageReport::from_value(d)
                            .map_err(|e| e.to_string())
                            .and_then(|r| validated_usage(&r))
                        {
                            Ok(valid) => usage.usage = valid,
                            Err(e) => {
                                warn!(error = %e, "the agent's usage report is rejected");
                                usage.usage = Usage::default();
                                usage.rejected.get_or_insert(e);
                            }
                        }
                    }
                }
            }
            _ => {
                for p in &a.parts {
                    if p.filename.is_none()
                        && let Some(text) = p.as_text()
                    {
                        unnamed_texts.push((name.clone(), text.to_owned()));
                        continue;
                    }
                    let Some(dir) = outputs_dir else { continue };
                    let Some(fname) = p.filename.as_deref() else {
                        let kind = if p.as_data().is_some() {
                            "data"
                        } else {
                            "file"
                        };
                        flags.push(format!(
                            "skipped a {kind} part of artifact {name:?}: it has no file name"
                        ));
                        continue;
                    };
                    if p.as_raw().is_none() && p.as_url().is_none() {
                        flags.push(format!(
                            "skipped a part of artifact {name:?} named {fname:?}: only file (raw or url) parts are saved as files"
                        ));
                        continue;
                    }
                    let rel = Path::new(fname);
                    if let Some(why) = unusable_file_name(dir, fname) {
                        warn!(file = fname, reason = %why, "ignoring an artifact file");
                        flags.push(format!("skipped artifact file {fname:?}: {why}"));
                        continue;
                    }
                    let dest = dir.join(rel);
                    let fetched;
                    let bytes = match (p.as_raw(), p.as_url()) {
                        (Some(bytes), _) => {
                            // Inline parts count against the same cap as url parts.
                            let size = bytes.len() as u64;
                            if fetched_bytes.saturating_add(size) > env.settings.max_output_bytes {
                                let e = format!(
                                    "inline part of {size} bytes over the output cap of {} bytes",
                                    env.settings.max_output_bytes
                                );
                                warn!(file = fname, error = %e, "an artifact file was left out");
                                env.store
                                    .event(
                                        &env.run_id,
                                        Some(trial_id),
                                        "url_file_error",
                                        &serde_json::json!({ "file": fname, "error": e }),
                                    )
                                    .await?;
                                not_fetched.push(format!("{fname}: {e}"));
                                continue;
                            }
                            *fetched_bytes += size;
                            bytes
                        }
                        (None, Some(url)) => {
                            let budget =
                                env.settings.max_output_bytes.saturating_sub(*fetched_bytes);
                            let got = match source {
                                Some(UrlSource::Http { agent_url })
                                    if same_host(url, agent_url) =>
                                {
                                    crate::url_files::download_until(
                                        url,
                                        &dest,
                                        budget,
                                        url_deadline,
                                    )
                                    .await
                                    .map_err(|e| e.to_string())
                                }
                                Some(UrlSource::Http { .. }) => {
                                    Err(format!("{url} is not on the agent's host"))
                                }
                                Some(UrlSource::Sandbox(sb)) => {
                                    copy_out_file(sb, fname, &dest, budget).await
                                }
                                None => Err("no way to fetch it".to_owned()),
                            };
                            match got {
                                Ok(n) => *fetched_bytes += n,
                                Err(e) => {
                                    warn!(file = fname, error = %e, "an artifact file could not be fetched");
                                    env.store
                                        .event(
                                            &env.run_id,
                                            Some(trial_id),
                                            "url_file_error",
                                            &serde_json::json!({ "file": fname, "error": e }),
                                        )
                                        .await?;
                                    not_fetched.push(format!("{fname}: {e}"));
                                    continue;
                                }
                            }
                            fetched = std::fs::read(&dest).map_err(io("reading a fetched file"))?;
                            &fetched[..]
                        }
                        (None, None) => continue,
                    };
                    put_artifact(
                        env,
                        artifacts,
                        &format!("file:{fname}"),
                        bytes,
                        p.media_type.as_deref(),
                    )?;
                    if p.as_raw().is_some() {
                        if let Some(parent) = dest.parent() {
                            std::fs::create_dir_all(parent).map_err(io("staging outputs"))?;
                        }
                        std::fs::write(&dest, bytes).map_err(io("staging outputs"))?;
                    }
                }
            }
        }
    }
    unnamed_text_outputs(env, task, unnamed_texts, outputs_dir, artifacts, flags)?;
    Ok(failures)
}

/// Longest artifact file name taken (bytes), and longest name of one of its folders or files.
const MAX_FILE_NAME_BYTES: usize = 1024;
const MAX_COMPONENT_BYTES: usize = 255;

/// Why an agent's artifact file name cannot be staged under `dir`, if it cannot: empty, not a
/// plain relative path, too long or too deep, or colliding with what is staged already (a
/// folder of that name, or a file where one of its folders would go). Such a file is the
/// agent's mistake: skipped and flagged, never an infrastructure failure.
fn unusable_file_name(dir: &Path, fname: &str) -> Option<String> {
    let rel = Path::new(fname);
    if fname.is_empty() {
        return Some("the name is empty".into());
    }
    if fname.contains('\0') {
        return Some("the name holds a NUL byte".into());
    }
    // Split by hand: `Path::components` hides a trailing `/` or `.`, which the file system
    // does not.
    if fname
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Some(
            "the name leaves the workspace or is not a plain relative path (an empty, `.` or `..` part, or a leading or trailing `/`)"
                .into(),
        );
    }
    if fname.len() > MAX_FILE_NAME_BYTES {
        return Some(format!(
            "the name is longer than {MAX_FILE_NAME_BYTES} bytes"
        ));
    }
    let depth = rel.components().count();
    if depth > sandbox::MAX_TREE_DEPTH {
        return Some(format!(
            "the name is deeper than {} levels",
            sandbox::MAX_TREE_DEPTH
        ));
    }
    if rel
        .components()
        .any(|c| c.as_os_str().len() > MAX_COMPONENT_BYTES)
    {
        return Some(format!(
            "a part of the name is longer than {MAX_COMPONENT_BYTES} bytes"
        ));
    }
    let mut at = dir.to_path_buf();
    for (i, c) in rel.components().enumerate() {
        at.push(c);
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            return None;
        };
        let last = i + 1 == depth;
        if last && !meta.is_file() {
            return Some("a folder of that name is among the outputs already".into());
        }
        if !last && !meta.is_dir() {
            return Some(format!(
                "{} is a file among the outputs, not a folder",
                at.strip_prefix(dir).unwrap_or(&at).display()
            ));
        }
    }
    None
}

/// Usage as the agent reported it, and why the report was rejected (then `usage` is zero).
#[derive(Debug, Default)]
pub(crate) struct ReportedUsage {
    pub(crate) usage: Usage,
    pub(crate) rejected: Option<String>,
}

/// Largest believable token count of one kind in one trial.
const MAX_REPORTED_TOKENS: u64 = 10_000_000_000;
/// Largest believable request count in one trial.
const MAX_REPORTED_REQUESTS: u64 = 10_000_000;
/// Largest believable cost of one trial (USD).
const MAX_REPORTED_COST_USD: f64 = 100_000.0;

/// Usage as an agent reported it, if believable: counts within bounds, cost finite, not
/// negative and within bounds; else why not (the trial then records no usage and a flag).
pub(crate) fn validated_usage(r: &UsageReport) -> Result<Usage, String> {
    for (what, n) in [
        ("input_tokens", r.input_tokens),
        ("output_tokens", r.output_tokens),
        ("cache_read_tokens", r.cache_read_tokens),
        ("cache_write_tokens", r.cache_write_tokens),
    ] {
        if n > MAX_REPORTED_TOKENS {
            return Err(format!("{what} = {n} is over {MAX_REPORTED_TOKENS}"));
        }
    }
    if r.requests > MAX_REPORTED_REQUESTS {
        return Err(format!(
            "requests = {} is over {MAX_REPORTED_REQUESTS}",
            r.requests
        ));
    }
    if let Some(cost) = r.cost_usd
        && !(cost.is_finite() && (0.0..=MAX_REPORTED_COST_USD).contains(&cost))
    {
        return Err(format!(
            "cost_usd = {cost} is not a number between 0 and {MAX_REPORTED_COST_USD}"
        ));
    }
    Ok(Usage::from(r))
}

/// Time allowed for all of a trial's url file downloads together.
const URL_FETCH_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// Text parts without a file name (outside the reserved artifacts): the first becomes the
/// answer when the agent sent none, the others `answer-N.txt` files; each is flagged.
fn unnamed_text_outputs(
    env: &RunEnv,
    task: &a2a_protocol::Task,
    texts: Vec<(String, String)>,
    outputs_dir: Option<&Path>,
    artifacts: &mut Vec<ArtifactRef>,
    flags: &mut Vec<String>,
) -> Result<(), InfraError> {
    let mut has_answer = task.artifact("answer").is_some();
    for (i, (artifact, text)) in texts.into_iter().enumerate() {
        if !has_answer {
            put_artifact(
                env,
                artifacts,
                "answer",
                text.as_bytes(),
                Some("text/plain"),
            )?;
            flags.push(format!(
                "text artifact {artifact:?} has no file name: taken as the answer"
            ));
            has_answer = true;
            continue;
        }
        let fname = format!("answer-{}.txt", i + 1);
        put_artifact(
            env,
            artifacts,
            &format!("file:{fname}"),
            text.as_bytes(),
            Some("text/plain"),
        )?;
        if let Some(dir) = outputs_dir {
            std::fs::write(dir.join(&fname), text.as_bytes()).map_err(io("staging outputs"))?;
        }
        flags.push(format!(
            "text artifact {artifact:?} has no file name: saved as {fname}"
        ));
    }
    Ok(())
}

/// Where `url` file parts are fetched from.
#[derive(Clone, Copy)]
pub(crate) enum UrlSource<'a> {
    /// An external agent: over HTTP, from its own host only.
    Http { agent_url: &'a str },
    /// A hosted agent's stopped container: the file at `/workspace/<filename>`.
    Sandbox(&'a dyn Sandbox),
}

/// Copies the file `/workspace/<name>` out of a sandbox to `dest` (at most `max_bytes`).
async fn copy_out_file(
    sb: &dyn Sandbox,
    name: &str,
    dest: &Path,
    max_bytes: u64,
) -> Result<u64, String> {
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("staging outputs: {e}"))?;
    }
    // A single file's archive entry is extracted to `dest` itself; only a regular file is
    // (a link, FIFO or device named like the file is dropped and reported as not fetched).
    let copied = sb
        .copy_out_with(
            &format!("/workspace/{name}"),
            dest,
            max_bytes,
            sandbox::EscapingLinks::RegularFilesOnly,
        )
        .await
        .map_err(|e| e.to_string())
        .and_then(|c| match c.dropped.first() {
            Some(what) => Err(format!("not a regular file: {what}")),
            None if !std::fs::symlink_metadata(dest).is_ok_and(|m| m.is_file()) => {
                Err("not a regular file".to_owned())
            }
            None => Ok(c.bytes),
        });
    if copied.is_err() {
        let _ = std::fs::remove_file(dest);
    }
    copied
}

/// The host of an absolute URL (without user info and port), lower-cased.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Whether `url` is on the same host as the agent's A2A URL (file URLs elsewhere are not
/// fetched: the green agent must not be steered to other services).
fn same_host(url: &str, agent_url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://"))
        && url_host(url).is_some_and(|h| Some(h) == url_host(agent_url))
}

/// A bounded, seeded fuzz of what an agent's A2A task can carry into collection: tasks as
/// the wire gives them (JSON decoded like the client does) with artifacts of any name (the
/// reserved ones, empty, `a` and `a/b`, `..`, long, deep), parts of every kind (text, raw,
/// url, data, none, unknown) and size (empty up to past the output cap), file names and data
/// nested deep. Each task either fails to decode (the exchange's own refusal, an agent
/// failure) or is collected without an error, within a time bound: no panic, no hang, no
/// `infra_error` from anything an agent sends.
#[cfg(test)]
mod fuzz {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use super::{Collected, collect_a2a_artifacts};
    use crate::model::{PlannedTrial, TrialResult};
    use crate::trial::env::{Observer, RunEnv};

    #[derive(Debug)]
    struct Quiet;
    impl Observer for Quiet {
        fn phase(&self, _: &PlannedTrial, _: &str) {}
        fn finished(&self, _: &PlannedTrial, _: &TrialResult) {}
    }

    /// xorshift64: the same cases on every run.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len())]
        }
    }

    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!("leaf"), |v, i| {
            if i % 2 == 0 {
                json!([v])
            } else {
                json!({ "k": v })
            }
        })
    }

    fn part(g: &mut Gen, names: &[&str], cap: usize) -> Value {
        let size = [0, 1, 100, cap / 2, cap + 1][g.below(5)];
        let mut p = match g.below(7) {
            0 => json!({ "text": "x".repeat(size.min(4096)) }),
            1 => serde_json::to_value(a2a_protocol::Part::raw(vec![b'r'; size], None, None))
                .expect("a raw part serialises"),
            2 => {
                json!({ "url": g.pick(&["http://127.0.0.1:9/f", "file:///etc/passwd", "", "ftp://x/y"]) })
            }
            3 => json!({ "data": nested(g.below(120)) }),
            4 => json!({ "data": { "prompt_tokens": g.next() as i64, "cost_usd": -1.5 } }),
            5 => json!({}),
            _ => json!({ "kind": g.pick(&["file", "image", "text"]), "bytes": "AAAA" }),
        };
        if g.below(3) > 0 {
            p["filename"] = json!(g.pick(names));
        }
        if g.below(4) == 0 {
            p["mediaType"] = json!(g.pick(&["text/plain", "", "application/x-evil\u{0}"]));
        }
        p
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn fuzzed_a2a_artifacts_are_collected_or_refused_never_an_infra_error() {
        let Ok(docker) = sandbox::docker::DockerBackend::connect().await else {
            panic!("this test needs the Docker Engine (the run's backend)");
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::store::Store::open(dir.path()).await.expect("store");
        store
            .create_run("fuzz", &json!({}), &[])
            .await
            .expect("run");
        let mut settings = crate::config::Settings::resolve(
            None,
            &Default::default(),
            &crate::config::Layer::default(),
        )
        .expect("settings");
        let cap = 64 * 1024;
        settings.max_output_bytes = cap as u64;
        let env = RunEnv {
            backend: Arc::new(docker),
            store,
            run_id: "fuzz".into(),
            settings,
            adapter_bin: "/nonexistent".into(),
            proxy: None,
            judge: None,
            staged: Default::default(),
            observer: Arc::new(Quiet),
            leftovers: Default::default(),
            teardown: Default::default(),
            probes: Default::default(),
        };
        let long = "L".repeat(300);
        let deep = vec!["d"; sandbox::MAX_TREE_DEPTH + 2].join("/");
        let names: Vec<&str> = vec![
            "answer",
            "trajectory",
            white_agent_adapter::contract::USAGE_ARTIFACT,
            "",
            "a",
            "a/b",
            "a/",
            "/a",
            "..",
            "../x",
            "./a",
            "x\u{0}y",
            "é/ü",
            &long,
            &deep,
            "b/../../c",
        ];
        let mut g = Gen(0x2545_f491_4f6c_dd1d);
        let budget = Instant::now() + Duration::from_secs(30);
        let (mut decoded, mut refused) = (0, 0);
        for round in 0..400 {
            if Instant::now() > budget {
                break;
            }
            let artifacts: Vec<Value> = (0..g.below(6))
                .map(|_| {
                    let mut a = json!({
                        "artifactId": format!("a{}", g.next()),
                        "parts": (0..g.below(5)).map(|_| part(&mut g, &names, cap)).collect::<Vec<_>>(),
                    });
                    if g.below(5) > 0 {
                        a["name"] = json!(g.pick(&names));
                    }
                    a
                })
                .collect();
            let wire = json!({
                "id": "t", "contextId": "c",
                "status": { "state": "TASK_STATE_COMPLETED" },
                "artifacts": artifacts,
            });
            let Ok(task) = serde_json::from_value::<a2a_protocol::Task>(wire.clone()) else {
                refused += 1;
                continue;
            };
            decoded += 1;
            let outputs = tempfile::tempdir().expect("tempdir");
            let mut out = Collected::default();
            let got = tokio::time::timeout(
                Duration::from_secs(10),
                collect_a2a_artifacts(&env, "t", None, &task, Some(outputs.path()), &mut out),
            )
            .await
            .unwrap_or_else(|_| panic!("round {round}: collection hung on {wire}"));
            if let Err(e) = got {
                panic!("round {round}: an infrastructure error from the agent's task: {e}\n{wire}");
            }
        }
        eprintln!("{decoded} tasks collected, {refused} refused at decoding");
        assert!(
            decoded > 50,
            "the generator makes decodable tasks: {decoded}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{same_host, unusable_file_name, url_host, validated_usage};

    /// Stages `names` in order the way artifact files are (parents created, then the file);
    /// the ones refused and why.
    fn stage(names: &[&str]) -> Vec<(String, String)> {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut refused = Vec::new();
        for name in names {
            if let Some(why) = unusable_file_name(dir.path(), name) {
                refused.push(((*name).to_owned(), why));
                continue;
            }
            let dest = dir.path().join(name);
            if let Some(p) = dest.parent() {
                std::fs::create_dir_all(p).expect("a staged name never fails to stage");
            }
            std::fs::write(&dest, "x").expect("a staged name never fails to stage");
        }
        refused
    }

    /// Fuzz (bounded, seeded): sequences of artifact file names built from pieces agents
    /// could send (empty, dots, NUL, long and deep names, names that are both a file and a
    /// folder): every name is either refused with a reason or staged without an error, so no
    /// name can make collection fail as an infrastructure error.
    #[test]
    fn fuzzed_artifact_file_names_stage_or_are_refused() {
        let long = "L".repeat(300);
        let deep = vec!["d"; sandbox::MAX_TREE_DEPTH + 3].join("/");
        let pieces: [&str; 12] = [
            "a", "b", "", ".", "..", "/", "x\0", "é", " ", &long, &deep, "a/b",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _round in 0..200 {
            let dir = tempfile::tempdir().expect("tempdir");
            for _ in 0..30 {
                let parts = 1 + next() % 4;
                let name: String = (0..parts)
                    .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                    .collect::<Vec<_>>()
                    .join(if next() % 3 == 0 { "" } else { "/" });
                if unusable_file_name(dir.path(), &name).is_some() {
                    continue;
                }
                let dest = dir.path().join(&name);
                if let Some(p) = dest.parent() {
                    std::fs::create_dir_all(p)
                        .unwrap_or_else(|e| panic!("{name:?} was taken but cannot be staged: {e}"));
                }
                std::fs::write(&dest, "x")
                    .unwrap_or_else(|e| panic!("{name:?} was taken but cannot be staged: {e}"));
            }
        }
    }

    #[test]
    fn malformed_artifact_file_names_are_refused_before_staging() {
        let deep = vec!["d"; sandbox::MAX_TREE_DEPTH + 1].join("/");
        let long = "n".repeat(300);
        let refused = stage(&[
            "a",
            "a/b",
            "c/d",
            "c",
            "",
            "x\0y",
            "/etc/passwd",
            "../up",
            &deep,
            &long,
            "ok/fine.txt",
            "a",
        ]);
        let names: Vec<&str> = refused.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["a/b", "c", "", "x\0y", "/etc/passwd", "../up", &deep, &long],
            "{refused:?}"
        );
        assert!(
            refused[0].1.contains("is a file among the outputs"),
            "{refused:?}"
        );
        assert!(
            refused[1].1.contains("a folder of that name"),
            "{refused:?}"
        );
        assert!(refused[2].1.contains("empty"), "{refused:?}");
        assert!(refused[4].1.contains("leaves the workspace"), "{refused:?}");
        assert!(refused[6].1.contains("deeper than"), "{refused:?}");
        assert!(refused[7].1.contains("longer than 255"), "{refused:?}");
    }
    use white_agent_adapter::contract::UsageReport;

    #[test]
    fn self_reported_usage_is_validated() {
        let ok = serde_json::json!({"input_tokens": 10, "output_tokens": 5, "requests": 2, "cost_usd": 0.01});
        let u = validated_usage(&UsageReport::from_value(&ok).expect("parses")).expect("valid");
        assert_eq!((u.input_tokens, u.output_tokens, u.requests), (10, 5, 2));
        for (bad, why) in [
            (serde_json::json!({"cost_usd": -5.0}), "cost_usd"),
            (serde_json::json!({"cost_usd": 1e300}), "cost_usd"),
            (
                serde_json::json!({"input_tokens": 99_000_000_000u64}),
                "input_tokens",
            ),
            (serde_json::json!({"requests": u64::MAX}), "requests"),
        ] {
            let report = UsageReport::from_value(&bad).expect("parses");
            let err = validated_usage(&report).expect_err("rejected");
            assert!(err.contains(why), "{bad}: {err}");
        }
        let mut nan = UsageReport::from_value(&serde_json::json!({})).expect("parses");
        nan.cost_usd = Some(f64::NAN);
        assert!(validated_usage(&nan).is_err());
        nan.cost_usd = Some(f64::INFINITY);
        assert!(validated_usage(&nan).is_err());
        // Negative counts do not even parse (u64).
        assert!(UsageReport::from_value(&serde_json::json!({"input_tokens": -1})).is_err());
    }

    #[test]
    fn file_urls_are_fetched_only_from_the_agent_host() {
        let agent = "http://10.0.0.5:8700/";
        assert!(same_host("http://10.0.0.5:8700/files/t/a.bin", agent));
        assert!(same_host("https://10.0.0.5:9000/x", agent));
        assert!(!same_host("http://127.0.0.1:8700/files/t/a.bin", agent));
        assert!(!same_host("http://10.0.0.5@evil.example/x", agent));
        assert!(!same_host("file:///etc/passwd", agent));
        assert_eq!(url_host("http://[::1]:80/x").as_deref(), Some("::1"));
    }
}
