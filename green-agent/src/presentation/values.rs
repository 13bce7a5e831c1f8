//! The one rule for rendering values in text a user reads (terminal tables, Markdown and HTML
//! reports, the viewer's pages): a missing value is a dash, never `None` or `Some(..)`; numbers
//! have a fixed number of places; an exit status is its number or its signal; a confidence
//! interval is shown only where it means something ([`MIN_CI_SAMPLES`]). Rust's `Debug`
//! formatting never reaches user text; [`debug_leaks`] finds it where it did.

use std::fmt::Display;

/// A missing value in text tables (terminal, Markdown).
pub const MISSING: &str = "–";

/// A missing value on HTML pages (the viewer, the HTML report).
pub const MISSING_HTML: &str = "—";

/// Fewest graded trials whose mean gets a 95% interval: below this a t-interval over a handful
/// of (often identical) scores is noise, and `± 0.000` would read as certainty.
pub const MIN_CI_SAMPLES: usize = 5;

/// `v` with `places` decimals, or [`MISSING`].
pub fn fixed(v: Option<f64>, places: usize) -> String {
    v.map_or_else(|| MISSING.to_owned(), |v| format!("{v:.places$}"))
}

/// `v` as it displays, or [`MISSING`].
pub fn or_missing<T: Display>(v: Option<T>) -> String {
    v.map_or_else(|| MISSING.to_owned(), |v| v.to_string())
}

/// The interval half-width worth showing beside a mean over `samples` graded trials: none
/// below [`MIN_CI_SAMPLES`] or when there is none.
pub fn shown_ci(ci: Option<f64>, samples: usize) -> Option<f64> {
    ci.filter(|_| samples >= MIN_CI_SAMPLES)
}

/// `mean ± ci` with `places` decimals, the interval only where [`shown_ci`] keeps it.
pub fn mean_ci(mean: Option<f64>, ci: Option<f64>, samples: usize, places: usize) -> String {
    match (mean, shown_ci(ci, samples)) {
        (Some(m), Some(c)) => format!("{m:.places$} ± {c:.places$}"),
        (Some(m), None) => format!("{m:.places$}"),
        _ => MISSING.into(),
    }
}

/// A process's exit: `exit 2`, `signal 9`, or `no exit status`.
pub fn exit(code: Option<i64>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        (None, None) => "no exit status".into(),
    }
}

/// US dollars with four decimals (`$0.0123`).
pub fn usd(v: Option<f64>) -> String {
    v.map_or_else(|| MISSING_HTML.to_owned(), |v| format!("${v:.4}"))
}

/// A share as a whole percentage (`50%`).
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| MISSING_HTML.to_owned(), |v| format!("{:.0}%", v * 100.0))
}

/// Milliseconds as ms, s or min.
pub fn duration_ms(v: Option<f64>) -> String {
    match v {
        Some(ms) if ms >= 60_000.0 => format!("{:.1} min", ms / 60_000.0),
        Some(ms) if ms >= 1000.0 => format!("{:.1} s", ms / 1000.0),
        Some(ms) => format!("{ms:.0} ms"),
        None => MISSING_HTML.to_owned(),
    }
}

/// A byte count as B, KiB or MiB.
pub fn bytes(v: f64) -> String {
    if v >= 1_048_576.0 {
        format!("{:.1} MiB", v / 1_048_576.0)
    } else if v >= 1024.0 {
        format!("{:.1} KiB", v / 1024.0)
    } else {
        format!("{v:.0} B")
    }
}

/// A measured number: up to ten decimals (trailing zeros cut), very small or big ones (and
/// zero) in scientific notation.
pub fn number(v: f64) -> String {
    if v.abs() >= 1e-4 && v.abs() < 1e9 {
        format!("{v:.10}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else {
        format!("{v:.4e}")
    }
}

/// Rust `Debug` output that leaked into user text: `Some(…)`, `None` as a value, a struct's
/// `Name { field: … }`. Returns the offending snippets (empty: clean). Used by the tests that
/// scan every page and report format.
pub fn debug_leaks(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    for pat in [
        "Some(",
        "Ok(",
        "Err(",
        "ChildExit {",
        " { code: ",
        "signal: None",
    ] {
        let mut from = 0;
        while let Some(i) = text[from..].find(pat) {
            let at = from + i;
            // a word of its own (not `HandleSome(`, not inside an identifier)
            let word_start = !pat.as_bytes()[0].is_ascii_alphanumeric()
                || at == 0
                || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if word_start {
                let end = (at + pat.len() + 24).min(text.len());
                let end = (end..=text.len())
                    .find(|&e| text.is_char_boundary(e))
                    .unwrap_or(text.len());
                found.push(text[at..end].to_owned());
            }
            from = at + pat.len();
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mean_over_a_handful_of_trials_has_no_interval() {
        assert_eq!(mean_ci(Some(0.0), Some(0.0), 3, 3), "0.000");
        assert_eq!(mean_ci(Some(0.5), Some(0.25), 8, 3), "0.500 ± 0.250");
        assert_eq!(mean_ci(Some(0.5), None, 8, 2), "0.50");
        assert_eq!(mean_ci(None, None, 0, 3), MISSING);
    }

    #[test]
    fn exits_and_missing_values_read_as_words() {
        assert_eq!(exit(Some(2), None), "exit 2");
        assert_eq!(exit(None, Some(9)), "signal 9");
        assert_eq!(exit(None, None), "no exit status");
        assert_eq!(fixed(None, 3), "–");
        assert_eq!(or_missing(Some(3)), "3");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.0), "0.0000e0");
        assert_eq!(number(1e-7), "1.0000e-7");
    }

    #[test]
    fn debug_formatting_is_found() {
        assert_eq!(debug_leaks("max abs err Some(0.0)"), ["Some(0.0)"]);
        assert_eq!(
            debug_leaks("exit=ChildExit { code: Some(0), signal: None }").len(),
            4
        );
        assert!(debug_leaks("max abs err 0 (exit 2); HandleSome(x)").is_empty());
    }
}
