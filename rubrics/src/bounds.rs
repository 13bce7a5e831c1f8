//! The allowed range of every number a task file gives (its environment and its grading), one
//! declaration each, and the message that names the range when a value falls outside it.

use std::fmt::Display;

/// A closed range `min..=max` of one kind of number, with what the number is.
#[derive(Debug, Clone, Copy)]
pub struct Bounds<T> {
    pub min: T,
    pub max: T,
    /// What the number measures (shown in the error), e.g. `seconds, up to 7 days`.
    pub what: &'static str,
}

impl<T: PartialOrd + Display + Copy> Bounds<T> {
    /// `None` when `value` lies in the range (a NaN never does); else the error's message,
    /// naming the range.
    pub fn outside(&self, value: T) -> Option<String> {
        let inside = self.min <= value && value <= self.max;
        (!inside).then(|| {
            format!(
                "{value} is out of range: allowed {}..={} ({})",
                self.min, self.max, self.what
            )
        })
    }
}

/// One week in seconds: the longest agent or grading budget a task may ask for.
const WEEK_SECS: u64 = 7 * 24 * 3600;

/// A wall-clock budget in a task file (`agent_timeout_secs`, `grading_timeout_secs`,
/// `grading.timeout_secs`, `case_timeout_secs`).
pub const TIMEOUT_SECS: Bounds<u64> = Bounds {
    min: 1,
    max: WEEK_SECS,
    what: "seconds, up to 7 days",
};
/// The CPUs a task's sandboxes get.
pub const CPUS: Bounds<f64> = Bounds {
    min: 0.01,
    max: 1024.0,
    what: "CPUs",
};
/// The memory a task's sandboxes get.
pub const MEMORY_MB: Bounds<u64> = Bounds {
    min: 64,
    max: 1024 * 1024,
    what: "MiB, up to 1 TiB",
};
/// A relative or absolute tolerance of a numeric comparison.
pub const TOLERANCE: Bounds<f64> = Bounds {
    min: 0.0,
    max: 1e9,
    what: "a tolerance",
};
/// A dimension's weight in the overall score (the weights sum to 1).
pub const DIMENSION_WEIGHT: Bounds<f64> = Bounds {
    min: 0.0,
    max: 1.0,
    what: "a dimension's weight; the weights sum to 1",
};
/// A grader's weight within its dimension (0 makes it a pure gate, e.g. `forbidden_api`).
pub const GRADER_WEIGHT: Bounds<f64> = Bounds {
    min: 0.0,
    max: 1e6,
    what: "a grader's weight in its dimension; 0 makes it a pure gate, e.g. `forbidden_api`",
};
/// The score every dimension must exceed for a trial to pass.
pub const PASS_THRESHOLD: Bounds<f64> = Bounds {
    min: 0.0,
    max: 1.0,
    what: "a score",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_inside_pass_and_outside_name_the_range() {
        assert_eq!(TIMEOUT_SECS.outside(1), None);
        assert_eq!(TIMEOUT_SECS.outside(WEEK_SECS), None);
        assert_eq!(
            TIMEOUT_SECS.outside(0).as_deref(),
            Some("0 is out of range: allowed 1..=604800 (seconds, up to 7 days)")
        );
        assert!(TIMEOUT_SECS.outside(WEEK_SECS + 1).is_some());
        assert_eq!(TOLERANCE.outside(0.0), None);
        for bad in [-1e-9, f64::NAN, f64::INFINITY, 2e9] {
            let msg = TOLERANCE.outside(bad).expect("outside");
            assert!(msg.contains("allowed 0..=1000000000"), "{msg}");
        }
        assert!(CPUS.outside(0.0).is_some() && CPUS.outside(0.5).is_none());
    }
}
