//! `green-agent view`: the read-only web viewer over the results directory.

use clap::Args;

use super::Context;
use crate::config::{ViewLayer, ViewSettings};

#[derive(Debug, Args)]
pub struct ViewArgs {
    /// Runs to show: ids under the results directory or run folders (default: every run).
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
    #[command(flatten)]
    pub settings: ViewLayer,
}

pub async fn command(args: ViewArgs, ctx: &Context) -> anyhow::Result<i32> {
    let (results, database) = ctx.locations()?;
    let settings: ViewSettings = ctx.group(&args.settings)?;
    crate::view::command(&args.runs, &settings, results, database).await
}
