//! Tasks delivered in turns (`tasks::turns`): what the drive phase keeps of each turn, how it
//! reads the agent's kept file between turns, and how collection puts each turn's copy among
//! the graded outputs (`tasks::turns::snapshot_path`), replacing anything the agent wrote there.

use std::path::Path;

use a2a_protocol::{PartContent, Task};
use tasks::turns::{SNAPSHOT_DIR, snapshot_path};

use super::env::{InfraError, RunEnv, io};
use super::media::media_type;
use super::side::AgentSide;
use crate::model::{ArtifactRef, Outcome};
use white_agent_adapter::contract::paths::WORKSPACE;

/// Largest kept file read between turns (a bigger one counts as missing).
const MAX_KEPT_BYTES: u64 = 8 * 1024 * 1024;

/// One turn as it ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TurnRecord {
    /// The stage the turn delivered.
    pub(crate) stage: String,
    pub(crate) outcome: Option<Outcome>,
    /// The kept file at the end of the turn (`None`: there was none, or it was unreadable).
    pub(crate) kept: Option<String>,
}

/// The kept file before the first turn: the task's own workspace copy.
pub(crate) fn initial(workspace: &Path, kept_file: &str) -> Option<String> {
    std::fs::read_to_string(workspace.join(kept_file)).ok()
}

/// The kept file as the turn that ended with `task` left it: a hosted agent's from its sandbox
/// (only a regular file, never followed through a link), an external agent's from the task's
/// artifacts (a part named after it, inline).
pub(crate) async fn read_kept(
    side: &AgentSide,
    task: Option<&Task>,
    kept_file: &str,
) -> Option<String> {
    match side.sandbox() {
        Some(sb) => {
            let dir = tempfile::tempdir().ok()?;
            let dest = dir.path().join("kept");
            sb.copy_out_with(
                &format!("{WORKSPACE}/{kept_file}"),
                &dest,
                MAX_KEPT_BYTES,
                sandbox::EscapingLinks::RegularFilesOnly,
            )
            .await
            .ok()?;
            let name = Path::new(kept_file).file_name()?;
            let file = if dest.is_dir() { dest.join(name) } else { dest };
            let bytes = std::fs::read(file).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => task?
            .artifacts
            .iter()
            .flat_map(|a| &a.parts)
            .filter(|p| p.filename.as_deref() == Some(kept_file))
            .find_map(|p| match &p.content {
                PartContent::Raw(bytes) => String::from_utf8(bytes.clone()).ok(),
                PartContent::Text(text) => Some(text.clone()),
                _ => None,
            }),
    }
}

/// Puts each turn's kept file among the outputs at its snapshot path (and as a `file:`
/// artifact, so a resumed run restages it), after dropping whatever the agent itself left
/// under the snapshot folder: graders read only the platform's copies.
pub(crate) fn stage_snapshots(
    env: &RunEnv,
    turns: &[TurnRecord],
    kept_file: &str,
    outputs_dir: &Path,
    artifacts: &mut Vec<ArtifactRef>,
) -> Result<(), InfraError> {
    let reserved = outputs_dir.join(SNAPSHOT_DIR);
    if reserved.symlink_metadata().is_ok() {
        if reserved.is_dir() {
            std::fs::remove_dir_all(&reserved)
        } else {
            std::fs::remove_file(&reserved)
        }
        .map_err(io("dropping the agent's files under the turns' folder"))?;
    }
    let prefix = format!("file:{SNAPSHOT_DIR}/");
    artifacts.retain(|a| !a.name.starts_with(&prefix) && a.name != format!("file:{SNAPSHOT_DIR}"));
    for turn in turns {
        let Some(text) = &turn.kept else { continue };
        let rel = snapshot_path(&turn.stage, kept_file);
        let dest = outputs_dir.join(&rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io("staging a turn's kept file"))?;
        }
        std::fs::write(&dest, text).map_err(io("staging a turn's kept file"))?;
        artifacts.push(ArtifactRef {
            name: format!("file:{rel}"),
            sha256: env.store.put_blob(text.as_bytes())?,
            size: text.len() as u64,
            media_type: Some(media_type(&rel)),
        });
    }
    Ok(())
}
