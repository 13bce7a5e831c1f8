//! `green-agent serve`: the green agent as an A2A service.

use clap::Args;

use super::Context;
use crate::config::{Layer, ServeLayer, ServeSettings};

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub service: ServeLayer,
    #[command(flatten)]
    pub settings: Layer,
}

pub async fn command(args: ServeArgs, ctx: &Context) -> anyhow::Result<i32> {
    let service: ServeSettings = ctx.group(&args.service)?;
    let settings = ctx.settings(&args.settings)?;
    crate::serve::command(service, settings, ctx.env.clone()).await
}
