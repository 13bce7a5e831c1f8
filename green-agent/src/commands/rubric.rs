//! `green-agent rubric`: PaperBench rubric trees.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum RubricCommand {
    /// Print the root score of a graded PaperBench rubric tree (recomputed from its leaves).
    Aggregate {
        /// The graded rubric tree (JSON, PaperBench's layout).
        #[arg(value_name = "GRADED_JSON")]
        graded: PathBuf,
        /// Print JSON: the root and every node's score at full precision.
        #[arg(long)]
        json: bool,
    },
}

pub fn command(command: RubricCommand) -> anyhow::Result<i32> {
    let RubricCommand::Aggregate { graded, json } = command;
    let tree = rubrics::paperbench::Node::load(&graded)
        .with_context(|| format!("reading {}", graded.display()))?;
    if json {
        let out = serde_json::json!({
            "root": rubrics::paperbench::aggregate(&tree),
            "tree": node_scores(&tree),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{:.6}", rubrics::paperbench::aggregate(&tree));
    }
    Ok(0)
}

/// A graded rubric tree's nodes with their re-aggregated scores (full precision), for
/// `rubric aggregate --json`.
fn node_scores(node: &rubrics::paperbench::Node) -> serde_json::Value {
    serde_json::json!({
        "id": node.id,
        "weight": node.weight,
        "score": rubrics::paperbench::aggregate(node),
        "sub_tasks": node.sub_tasks.iter().map(node_scores).collect::<Vec<_>>(),
    })
}
