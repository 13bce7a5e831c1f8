//! Numeric CSV comparison for paper reproductions.
//!
//! Rules:
//! - lines whose first non-blank character is `#` are comments; blank lines are skipped;
//! - the delimiter is sniffed from the header (`,`, tab, `;`);
//! - expected columns map to actual columns by header, case- and whitespace-insensitively;
//! - with an x column, each expected row is matched to the actual row with the same x, else the
//!   actual columns are linearly interpolated at that x (grids may differ); an x outside the
//!   actual range is a miss; without an x column, rows align by order;
//! - a value matches when `|actual - expected| <= atol + rtol * |expected|`, per-column
//!   tolerances overriding the defaults;
//! - NaN follows [`NanPolicy`]; an empty or non-numeric cell is NaN;
//! - partial credit: the score is the mean over expected (non-x) columns of each column's
//!   fraction of matching values, a missing column scoring 0; extra columns are reported;
//! - the report lists the worst misses (capped) with their size.
//!
//! Inputs are bounded by the caller (see [`MAX_CSV_BYTES`]); empty, binary or header-less
//! input is an [`CsvError`] naming the cause.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Largest CSV we read (bytes); callers copy at most this much out of a sandbox.
pub const MAX_CSV_BYTES: usize = 64 * 1024 * 1024;
/// Largest number of data rows we compare.
pub const MAX_ROWS: usize = 2_000_000;
/// Misses listed in a report (the count is always complete).
pub const MAX_LISTED_MISSES: usize = 50;

/// What to do with NaN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NanPolicy {
    /// NaN matches NaN and nothing else (default).
    #[default]
    MatchNan,
    /// Expected NaN cells are not compared (no credit, no miss).
    SkipExpectedNan,
    /// Any NaN is a miss.
    NanIsMiss,
}

/// Comparison settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvRules {
    pub x_column: Option<String>,
    pub rtol: f64,
    pub atol: f64,
    /// Column name → (rtol, atol), names matched like headers.
    pub column_tolerances: BTreeMap<String, (f64, f64)>,
    pub nan_policy: NanPolicy,
}

impl Default for CsvRules {
    fn default() -> Self {
        Self {
            x_column: None,
            rtol: 1e-5,
            atol: 1e-8,
            column_tolerances: BTreeMap::new(),
            nan_policy: NanPolicy::MatchNan,
        }
    }
}

/// Why a CSV could not be compared at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CsvError {
    #[error("the CSV is empty (no header line after comments)")]
    Empty,
    #[error("the file is binary or not UTF-8 (byte {0}); expected a text CSV")]
    Binary(usize),
    #[error("the CSV is larger than {max} bytes; write a smaller file")]
    TooLarge { max: usize },
    #[error("the CSV has more than {0} data rows")]
    TooManyRows(usize),
    #[error("CSV parse error: {0}")]
    Parse(String),
    #[error("x column {0:?} not found in the header {1:?}")]
    MissingX(String, Vec<String>),
    #[error("no expected column is present in the header {0:?}")]
    NoCommonColumn(Vec<String>),
}

/// One value that misses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Miss {
    pub column: String,
    /// Expected row index (0-based, data rows only).
    pub row: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    pub expected: f64,
    /// `None` when the x is not covered by the actual data or the row is missing.
    pub actual: Option<f64>,
    pub abs_err: Option<f64>,
    pub rel_err: Option<f64>,
}

/// Per-column outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnReport {
    pub name: String,
    pub present: bool,
    pub compared: usize,
    pub matched: usize,
    pub max_abs_err: Option<f64>,
    pub max_rel_err: Option<f64>,
    pub score: f64,
}

impl Miss {
    /// `y at x=2: got 1.1, expected 1.3 (abs err 2.000e-1, rel err 1.538e-1)`.
    pub fn describe(&self) -> String {
        let at = self
            .x
            .map_or_else(|| format!("row {}", self.row), |x| format!("x={x}"));
        match self.actual {
            Some(a) => format!(
                "{} at {at}: got {a}, expected {}{}",
                self.column,
                self.expected,
                errors(self.abs_err, self.rel_err, "")
            ),
            None => format!(
                "{} at {at}: no value (expected {})",
                self.column, self.expected
            ),
        }
    }
}

/// ` (abs err …, rel err …)` for the errors that are known, else nothing.
fn errors(abs: Option<f64>, rel: Option<f64>, prefix: &str) -> String {
    let parts: Vec<String> = [("abs", abs), ("rel", rel)]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{prefix}{k} err {v:.3e}")))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

impl ColumnReport {
    /// `8/10 values match (max abs err …, max rel err …)`, or `column missing`.
    pub fn summary(&self) -> String {
        if !self.present {
            return "column missing".into();
        }
        format!(
            "{}/{} values match{}",
            self.matched,
            self.compared,
            errors(self.max_abs_err, self.max_rel_err, "max ")
        )
    }
}

/// The outcome of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CsvReport {
    pub score: f64,
    pub columns: Vec<ColumnReport>,
    pub missing_columns: Vec<String>,
    pub extra_columns: Vec<String>,
    pub expected_rows: usize,
    pub actual_rows: usize,
    /// Expected rows interpolated from the actual grid.
    pub interpolated_rows: usize,
    pub total_misses: usize,
    /// The worst misses (by relative error), at most [`MAX_LISTED_MISSES`].
    pub misses: Vec<Miss>,
}

impl CsvReport {
    /// One line per listed miss, for humans.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.missing_columns.is_empty() {
            out.push(format!(
                "missing columns: {}",
                self.missing_columns.join(", ")
            ));
        }
        if !self.extra_columns.is_empty() {
            out.push(format!(
                "extra columns (ignored): {}",
                self.extra_columns.join(", ")
            ));
        }
        out.extend(self.misses.iter().map(Miss::describe));
        if self.total_misses > self.misses.len() {
            out.push(format!(
                "… {} more misses",
                self.total_misses - self.misses.len()
            ));
        }
        out
    }
}

/// A parsed numeric table.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub headers: Vec<String>,
    /// Column-major values.
    pub columns: Vec<Vec<f64>>,
}

impl Table {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }
}

/// Normalised header for matching: lower case, whitespace collapsed, quotes trimmed.
pub fn normalise_header(h: &str) -> String {
    h.trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Parses CSV bytes into a numeric table.
pub fn parse(bytes: &[u8]) -> Result<Table, CsvError> {
    if bytes.len() > MAX_CSV_BYTES {
        return Err(CsvError::TooLarge { max: MAX_CSV_BYTES });
    }
    if let Some(pos) = bytes.iter().position(|&b| b == 0) {
        return Err(CsvError::Binary(pos));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| CsvError::Binary(e.valid_up_to()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let header_line = lines.next().ok_or(CsvError::Empty)?;
    let delim = [b',', b'\t', b';']
        .into_iter()
        .max_by_key(|d| header_line.bytes().filter(|b| b == d).count())
        .filter(|d| header_line.as_bytes().contains(d))
        .unwrap_or(b',');
    let body: String = std::iter::once(header_line)
        .chain(lines)
        .flat_map(|l| [l, "\n"])
        .collect();
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delim)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(body.as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| CsvError::Parse(e.to_string()))?
        .iter()
        .map(str::to_owned)
        .collect();
    let mut columns = vec![Vec::new(); headers.len()];
    for (i, rec) in reader.records().enumerate() {
        if i >= MAX_ROWS {
            return Err(CsvError::TooManyRows(MAX_ROWS));
        }
        let rec = rec.map_err(|e| CsvError::Parse(e.to_string()))?;
        for (c, col) in columns.iter_mut().enumerate() {
            col.push(rec.get(c).map_or(f64::NAN, parse_number));
        }
    }
    Ok(Table { headers, columns })
}

fn parse_number(cell: &str) -> f64 {
    let c = cell.trim().trim_matches('"');
    match c.to_ascii_lowercase().as_str() {
        "" | "nan" | "na" | "null" | "none" => f64::NAN,
        "inf" | "+inf" | "infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => c.parse().unwrap_or(f64::NAN),
    }
}

/// Compares an agent's CSV with the expected one.
///
/// Errors in `expected` are ours (bad held-out data); errors in `actual` are the agent's.
pub fn compare(expected: &Table, actual: &Table, rules: &CsvRules) -> Result<CsvReport, CsvError> {
    let norm_act: Vec<String> = actual.headers.iter().map(|h| normalise_header(h)).collect();
    let find_act = |name: &str| {
        let n = normalise_header(name);
        norm_act.iter().position(|h| *h == n)
    };
    let x_idx = match &rules.x_column {
        Some(x) => {
            let n = normalise_header(x);
            let e = expected
                .headers
                .iter()
                .position(|h| normalise_header(h) == n)
                .ok_or_else(|| CsvError::MissingX(x.clone(), expected.headers.clone()))?;
            let a =
                find_act(x).ok_or_else(|| CsvError::MissingX(x.clone(), actual.headers.clone()))?;
            Some((e, a))
        }
        None => None,
    };
    let value_cols: Vec<usize> = (0..expected.headers.len())
        .filter(|c| x_idx.is_none_or(|(e, _)| e != *c))
        .collect();
    let mapping: Vec<(usize, Option<usize>)> = value_cols
        .iter()
        .map(|&c| (c, find_act(&expected.headers[c])))
        .collect();
    if mapping.iter().all(|(_, a)| a.is_none()) {
        return Err(CsvError::NoCommonColumn(actual.headers.clone()));
    }
    let exp_norm: Vec<String> = expected
        .headers
        .iter()
        .map(|h| normalise_header(h))
        .collect();
    let extra_columns: Vec<String> = actual
        .headers
        .iter()
        .zip(&norm_act)
        .filter(|(_, n)| !exp_norm.contains(n))
        .map(|(h, _)| h.clone())
        .collect();

    // Row alignment: for each expected row, how to read the actual value of a column.
    enum Src {
        Row(usize),
        Interp(usize, usize, f64),
        None,
    }
    let n_exp = expected.rows();
    let mut interpolated_rows = 0;
    let sources: Vec<Src> = match x_idx {
        None => (0..n_exp)
            .map(|r| {
                if r < actual.rows() {
                    Src::Row(r)
                } else {
                    Src::None
                }
            })
            .collect(),
        Some((ex, ax)) => {
            let mut order: Vec<usize> = (0..actual.rows())
                .filter(|&r| actual.columns[ax][r].is_finite())
                .collect();
            order.sort_by(|&a, &b| actual.columns[ax][a].total_cmp(&actual.columns[ax][b]));
            let xs: Vec<f64> = order.iter().map(|&r| actual.columns[ax][r]).collect();
            expected.columns[ex]
                .iter()
                .map(|&x| {
                    if !x.is_finite() || xs.is_empty() {
                        return Src::None;
                    }
                    let i = xs.partition_point(|&v| v < x);
                    let eps = 1e-9 * x.abs().max(1e-300);
                    if i < xs.len() && (xs[i] - x).abs() <= eps {
                        return Src::Row(order[i]);
                    }
                    if i > 0 && (xs[i - 1] - x).abs() <= eps {
                        return Src::Row(order[i - 1]);
                    }
                    if i == 0 || i == xs.len() {
                        return Src::None;
                    }
                    interpolated_rows += 1;
                    let t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
                    Src::Interp(order[i - 1], order[i], t)
                })
                .collect()
        }
    };

    let mut columns = Vec::new();
    let mut missing_columns = Vec::new();
    let mut misses: Vec<Miss> = Vec::new();
    for &(ec, ac) in &mapping {
        let name = expected.headers[ec].clone();
        let Some(ac) = ac else {
            missing_columns.push(name.clone());
            columns.push(ColumnReport {
                name,
                present: false,
                compared: 0,
                matched: 0,
                max_abs_err: None,
                max_rel_err: None,
                score: 0.0,
            });
            continue;
        };
        let (rtol, atol) = rules
            .column_tolerances
            .iter()
            .find(|(k, _)| normalise_header(k) == normalise_header(&name))
            .map(|(_, v)| *v)
            .unwrap_or((rules.rtol, rules.atol));
        let acol = &actual.columns[ac];
        let (mut compared, mut matched) = (0usize, 0usize);
        let (mut max_abs, mut max_rel): (Option<f64>, Option<f64>) = (None, None);
        for (row, src) in sources.iter().enumerate() {
            let e = expected.columns[ec][row];
            if e.is_nan() && rules.nan_policy == NanPolicy::SkipExpectedNan {
                continue;
            }
            compared += 1;
            let a = match *src {
                Src::Row(r) => Some(acol[r]),
                Src::Interp(r0, r1, t) => Some(acol[r0] + t * (acol[r1] - acol[r0])),
                Src::None => None,
            };
            let ok = match a {
                None => false,
                Some(a) if a.is_nan() || e.is_nan() => {
                    rules.nan_policy == NanPolicy::MatchNan && a.is_nan() && e.is_nan()
                }
                Some(a) if a.is_infinite() || e.is_infinite() => a == e,
                Some(a) => (a - e).abs() <= atol + rtol * e.abs(),
            };
            let abs_err = a.map(|a| (a - e).abs()).filter(|d| d.is_finite());
            let rel_err = abs_err.map(|d| {
                if e == 0.0 {
                    if d == 0.0 { 0.0 } else { f64::INFINITY }
                } else {
                    d / e.abs()
                }
            });
            if let Some(d) = abs_err {
                max_abs = Some(max_abs.map_or(d, |m: f64| m.max(d)));
            }
            if let Some(r) = rel_err {
                max_rel = Some(max_rel.map_or(r, |m: f64| m.max(r)));
            }
            if ok {
                matched += 1;
            } else {
                misses.push(Miss {
                    column: name.clone(),
                    row,
                    x: x_idx.map(|(ex, _)| expected.columns[ex][row]),
                    expected: e,
                    actual: a,
                    abs_err,
                    rel_err,
                });
            }
        }
        let score = if compared == 0 {
            1.0
        } else {
            matched as f64 / compared as f64
        };
        columns.push(ColumnReport {
            name,
            present: true,
            compared,
            matched,
            max_abs_err: max_abs,
            max_rel_err: max_rel,
            score,
        });
    }
    let score = if columns.is_empty() {
        0.0
    } else {
        columns.iter().map(|c| c.score).sum::<f64>() / columns.len() as f64
    };
    let total_misses = misses.len();
    misses.sort_by(|a, b| {
        let key = |m: &Miss| m.rel_err.unwrap_or(f64::INFINITY);
        key(b).total_cmp(&key(a))
    });
    misses.truncate(MAX_LISTED_MISSES);
    Ok(CsvReport {
        score,
        columns,
        missing_columns,
        extra_columns,
        expected_rows: n_exp,
        actual_rows: actual.rows(),
        interpolated_rows,
        total_misses,
        misses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(x: Option<&str>, rtol: f64, atol: f64) -> CsvRules {
        CsvRules {
            x_column: x.map(str::to_owned),
            rtol,
            atol,
            ..CsvRules::default()
        }
    }

    fn run(expected: &str, actual: &str, r: &CsvRules) -> Result<CsvReport, CsvError> {
        let e = parse(expected.as_bytes()).expect("expected parses");
        let a = parse(actual.as_bytes())?;
        compare(&e, &a, r)
    }

    /// (name, expected csv, actual csv, rules, expected score or error substring)
    #[test]
    fn csv_rules_table() {
        let exact = rules(None, 1e-6, 0.0);
        let on_t = rules(Some("t"), 1e-6, 1e-12);
        let mut per_col = rules(Some("t"), 1e-6, 0.0);
        per_col.column_tolerances.insert("Y".into(), (0.1, 0.0));
        let mut skip_nan = rules(None, 1e-6, 0.0);
        skip_nan.nan_policy = NanPolicy::SkipExpectedNan;
        let mut nan_miss = rules(None, 1e-6, 0.0);
        nan_miss.nan_policy = NanPolicy::NanIsMiss;
        type Case<'a> = (
            &'a str,
            &'a str,
            &'a str,
            &'a CsvRules,
            Result<f64, &'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "identical",
                "t,y\n0,1\n1,2\n",
                "t,y\n0,1\n1,2\n",
                &exact,
                Ok(1.0),
            ),
            (
                "comments and blank lines",
                "# fig 2\nt,y\n0,1\n\n1,2\n",
                "# produced by run.py\n  # more\nt,y\n0,1\n1,2\n",
                &exact,
                Ok(1.0),
            ),
            (
                "one value off",
                "t,y\n0,1\n1,2\n",
                "t,y\n0,1\n1,2.1\n",
                &exact,
                Ok(0.5 * (1.0 + 0.5)),
            ),
            (
                "within rtol",
                "t,y\n0,100\n",
                "t,y\n0,100.00005\n",
                &exact,
                Ok(1.0),
            ),
            (
                "atol near zero",
                "t,y\n0,0\n",
                "t,y\n0,1e-13\n",
                &on_t,
                Ok(1.0),
            ),
            (
                "header case and whitespace",
                "Time,Signal Strength\n0,1\n",
                " time ,  signal   strength\n0,1\n",
                &exact,
                Ok(1.0),
            ),
            (
                "column order differs",
                "t,a,b\n0,1,2\n",
                "b,t,a\n2,0,1\n",
                &exact,
                Ok(1.0),
            ),
            (
                "tab delimiter",
                "t,y\n0,1\n",
                "t\ty\n0\t1\n",
                &exact,
                Ok(1.0),
            ),
            (
                "semicolon delimiter",
                "t,y\n0,1\n",
                "t;y\n0;1\n",
                &exact,
                Ok(1.0),
            ),
            (
                "missing column partial credit",
                "t,a,b\n0,1,2\n",
                "t,a\n0,1\n",
                &exact,
                Ok(2.0 / 3.0),
            ),
            (
                "extra column ignored",
                "t,a\n0,1\n",
                "t,a,junk\n0,1,99\n",
                &exact,
                Ok(1.0),
            ),
            (
                "x-aligned shuffled rows",
                "t,y\n0,0\n1,10\n2,20\n",
                "t,y\n2,20\n0,0\n1,10\n",
                &on_t,
                Ok(1.0),
            ),
            (
                "shifted finer grid interpolates",
                "t,y\n0,0\n1,10\n2,20\n",
                "t,y\n0,0\n0.5,5\n1.5,15\n2,20\n",
                &on_t,
                Ok(1.0),
            ),
            (
                "shifted grid, wrong curve",
                "t,y\n0,0\n1,10\n2,20\n",
                "t,y\n0,0\n0.5,5\n1.5,16\n2,20\n",
                &on_t,
                Ok(2.0 / 3.0),
            ),
            (
                "x outside actual range misses",
                "t,y\n0,0\n1,10\n2,20\n",
                "t,y\n0,0\n1,10\n",
                &on_t,
                Ok(2.0 / 3.0),
            ),
            (
                "fewer rows without x",
                "y\n1\n2\n3\n4\n",
                "y\n1\n2\n",
                &exact,
                Ok(0.5),
            ),
            (
                "more rows without x",
                "y\n1\n2\n",
                "y\n1\n2\n3\n",
                &exact,
                Ok(1.0),
            ),
            (
                "per-column tolerance",
                "t,y,z\n0,1,1\n",
                "t,y,z\n0,1.05,1.05\n",
                &per_col,
                Ok(0.5),
            ),
            (
                "nan matches nan",
                "y\nnan\n1\n",
                "y\nNaN\n1\n",
                &exact,
                Ok(1.0),
            ),
            (
                "empty cell is nan",
                "y,z\n,1\n",
                "y,z\nnan,1\n",
                &exact,
                Ok(1.0),
            ),
            (
                "nan vs number misses",
                "y\n1\n",
                "y\nnan\n",
                &exact,
                Ok(0.0),
            ),
            (
                "number vs expected nan misses",
                "y\nnan\n",
                "y\n1\n",
                &exact,
                Ok(0.0),
            ),
            (
                "skip expected nan",
                "y\nnan\n1\n",
                "y\n5\n1\n",
                &skip_nan,
                Ok(1.0),
            ),
            (
                "nan is miss",
                "y\nnan\n1\n",
                "y\nnan\n1\n",
                &nan_miss,
                Ok(0.5),
            ),
            ("inf equal", "y\ninf\n", "y\ninf\n", &exact, Ok(1.0)),
            (
                "non-numeric cell misses",
                "y\n1\n",
                "y\nabc\n",
                &exact,
                Ok(0.0),
            ),
            (
                "no common column",
                "t,y\n0,1\n",
                "a,b\n0,1\n",
                &exact,
                Err("no expected column"),
            ),
            (
                "missing x column",
                "t,y\n0,1\n",
                "time,y\n0,1\n",
                &on_t,
                Err("x column"),
            ),
            ("empty", "t,y\n0,1\n", "", &exact, Err("empty")),
            (
                "only comments",
                "t,y\n0,1\n",
                "# nothing\n# here\n",
                &exact,
                Err("empty"),
            ),
            (
                "binary",
                "t,y\n0,1\n",
                "t,y\n\0\x01\x02",
                &exact,
                Err("binary"),
            ),
        ];
        for (name, e, a, r, want) in cases {
            let got = run(e, a, r);
            match (got, want) {
                (Ok(rep), Ok(s)) => assert!(
                    (rep.score - s).abs() < 1e-12,
                    "{name}: score {} want {s}; {:?}",
                    rep.score,
                    rep.describe()
                ),
                (Err(err), Err(sub)) => assert!(err.to_string().contains(sub), "{name}: {err}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn report_says_which_values_miss_and_by_how_much() {
        let rep = run(
            "t,y\n0,1\n1,2\n2,4\n",
            "t,y\n0,1\n1,2.5\n2,8\n",
            &rules(Some("t"), 1e-3, 0.0),
        )
        .expect("compares");
        assert_eq!(rep.total_misses, 2);
        assert_eq!(rep.misses[0].x, Some(2.0), "worst relative miss first");
        assert_eq!(rep.misses[0].actual, Some(8.0));
        assert_eq!(rep.misses[0].abs_err, Some(4.0));
        assert_eq!(rep.misses[0].rel_err, Some(1.0));
        let lines = rep.describe();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("y at x=1: got 2.5, expected 2")),
            "{lines:?}"
        );
        let col = &rep.columns[0];
        assert_eq!((col.compared, col.matched), (3, 1));
        assert_eq!(col.max_abs_err, Some(4.0));
    }

    #[test]
    fn interpolated_rows_are_counted_and_misses_are_capped() {
        let mut e = String::from("t,y\n");
        let mut a = String::from("t,y\n");
        for i in 0..200 {
            e.push_str(&format!("{},{}\n", i as f64 + 0.5, 1.0));
            a.push_str(&format!("{i},{}\n", 2.0));
        }
        a.push_str("200,2\n");
        let rep = run(&e, &a, &rules(Some("t"), 1e-6, 0.0)).expect("compares");
        assert_eq!(rep.interpolated_rows, 200);
        assert_eq!(rep.total_misses, 200);
        assert_eq!(rep.misses.len(), MAX_LISTED_MISSES);
        assert!(rep.describe().last().expect("lines").contains("150 more"));
    }

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let big = vec![b'1'; MAX_CSV_BYTES + 1];
        assert_eq!(parse(&big), Err(CsvError::TooLarge { max: MAX_CSV_BYTES }));
    }
}
