//! `command`: any command line (after `--`), the instruction in `$AGENT_INSTRUCTION` and the
//! file `$AGENT_INSTRUCTION_FILE`, `$AGENT_WORKSPACE` naming the workspace; plain stdout.

use std::collections::BTreeMap;

use super::{ConfigFile, Driver, DriverError, DriverOptions, LaunchPlan, Plan, SpecForm};
use crate::parse::Dialect;

#[derive(Debug)]
pub struct Command;

impl Driver for Command {
    fn spec_form(&self) -> SpecForm {
        SpecForm::Command { prefix: "cmd" }
    }

    fn plan(
        &self,
        options: &DriverOptions,
        instruction: &str,
        _check_binaries: bool,
    ) -> Result<Plan, DriverError> {
        let (program, rest) = options.command.split_first().ok_or_else(|| DriverError::Missing {
            driver: "command",
            what: "a command line".to_owned(),
            fix: "pass it after `--`, e.g. `white-agent-adapter --driver command -- python agent.py`".to_owned(),
        })?;
        let instruction_file = options.state_dir.join("instruction.md");
        let mut env = BTreeMap::new();
        env.insert("AGENT_INSTRUCTION".to_owned(), instruction.to_owned());
        env.insert(
            "AGENT_INSTRUCTION_FILE".to_owned(),
            instruction_file.to_string_lossy().into_owned(),
        );
        env.insert(
            "AGENT_WORKSPACE".to_owned(),
            options.workspace.to_string_lossy().into_owned(),
        );
        Ok(Plan::Run(LaunchPlan {
            program: program.clone(),
            args: rest.to_vec(),
            env,
            cwd: options.workspace.clone(),
            dialect: Dialect::PLAIN,
            files: vec![ConfigFile {
                path: instruction_file,
                contents: instruction.to_owned(),
            }],
            dirs: Vec::new(),
            transcript: None,
        }))
    }
}
