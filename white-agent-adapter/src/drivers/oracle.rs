//! `oracle`: runs the task's reference solution, `bash ORACLE_DIR/solve.sh`, in the workspace
//! (the only agent that sees it).

use std::collections::BTreeMap;

use super::{Driver, DriverError, DriverOptions, LaunchPlan, Plan, SpecForm};
use crate::parse::Dialect;

#[derive(Debug)]
pub struct Oracle;

impl Driver for Oracle {
    fn spec_form(&self) -> SpecForm {
        SpecForm::Bare
    }

    fn plan(
        &self,
        options: &DriverOptions,
        _instruction: &str,
        check_binaries: bool,
    ) -> Result<Plan, DriverError> {
        let script = options.oracle_dir.join("solve.sh");
        if check_binaries && !script.is_file() {
            return Err(DriverError::Missing {
                driver: "oracle",
                what: format!("the reference solution {}", script.display()),
                fix: "mount the task's solution at --oracle-dir (only for the oracle agent)"
                    .to_owned(),
            });
        }
        let mut env = BTreeMap::new();
        env.insert(
            "ORACLE_DIR".to_owned(),
            options.oracle_dir.to_string_lossy().into_owned(),
        );
        env.insert(
            "AGENT_WORKSPACE".to_owned(),
            options.workspace.to_string_lossy().into_owned(),
        );
        Ok(Plan::Run(LaunchPlan {
            program: "bash".to_owned(),
            args: vec![script.to_string_lossy().into_owned()],
            env,
            cwd: options.workspace.clone(),
            dialect: Dialect::PLAIN,
            files: Vec::new(),
            dirs: Vec::new(),
            transcript: None,
        }))
    }
}
