//! `green-agent images`: builds the platform images, or copies them to other engines.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Build the platform images (offline, cached by recipe hash).
    Build {
        /// `python` or `sci` (default: both).
        #[arg(value_name = "IMAGE")]
        which: Vec<String>,
    },
    /// Copy platform images to other Docker engines (Swarm nodes) without a registry: saved
    /// here, loaded there, same id and tag; an engine that has the image gets nothing.
    Distribute {
        /// A node's engine (`tcp://HOST:2375` or `unix:///PATH`); repeat for each node.
        #[arg(long = "to", required = true, value_name = "ENGINE")]
        to: Vec<String>,
        /// `python`, `sci` or any image reference of this engine (default: `python` and `sci`).
        #[arg(value_name = "IMAGE")]
        which: Vec<String>,
    },
}

pub async fn command(command: ImagesCommand) -> anyhow::Result<i32> {
    match command {
        ImagesCommand::Build { which } => crate::images::build(&which).await?,
        ImagesCommand::Distribute { to, which } => crate::images::distribute(&to, &which).await?,
    }
    Ok(0)
}
