//! `nop`: completes at once with no outputs (the floor).

use super::{Driver, DriverError, DriverOptions, Plan, SpecForm};

#[derive(Debug)]
pub struct Nop;

impl Driver for Nop {
    fn spec_form(&self) -> SpecForm {
        SpecForm::Bare
    }

    fn plan(
        &self,
        _options: &DriverOptions,
        _instruction: &str,
        _check_binaries: bool,
    ) -> Result<Plan, DriverError> {
        Ok(Plan::Nothing)
    }
}
