//! The values a `c_test` driver built with our `rb_check.h` prints, and their comparison.
//!
//! The expected build (the driver alone, no agent code) prints one line per check:
//! `@rb E <index> <kind> <name hex> <n> <rtol> <atol> <value>…`; the actual build (the driver's
//! object linked with the agent's sources, run in the agent's process) prints
//! `@rb A <index> <kind> <name hex> <n> <value>…`, the expected value never compiled in. This
//! module, in the trusted process, compares them: strictly (an array of another length fails,
//! NaN only matches NaN), each check named with why it failed. Kinds: `f` one double, `i` one
//! integer, `F` a double array.

use crate::report::TestResult;
use crate::status::Status;

/// Largest number of values one check line may carry (both sides).
const MAX_VALUES: usize = 1 << 20;

/// One checked value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    F(f64),
    I(i64),
    Fs(Vec<f64>),
}

/// One check of the expected build.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expected {
    pub name: String,
    pub rtol: f64,
    pub atol: f64,
    pub value: Value,
}

/// One check line of the actual build.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Actual {
    pub index: usize,
    pub name: String,
    pub value: Value,
}

/// A float as C's `%.17g` prints it (`nan`, `-nan`, `inf`, `-inf` included).
fn float(tok: &str) -> Option<f64> {
    match tok {
        "nan" | "-nan" | "NAN" | "-NAN" => Some(f64::NAN),
        "inf" | "INF" => Some(f64::INFINITY),
        "-inf" | "-INF" => Some(f64::NEG_INFINITY),
        t if t
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
        {
            t.parse().ok()
        }
        _ => None,
    }
}

fn name_of(hex_name: &str) -> Option<String> {
    if hex_name == "-" {
        return Some(String::new());
    }
    let bytes = hex::decode(hex_name).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A check line's index, kind, name and value tokens (with the tolerances first on the
/// expected side).
type Fields = (usize, char, String, Vec<String>);

/// The [`Fields`] of a line `@rb <side> …`, `None` for another line, `Some(Err)` for a
/// malformed one.
fn fields(line: &str, side: &str) -> Option<Result<Fields, String>> {
    let rest = line
        .strip_prefix("@rb ")?
        .strip_prefix(side)?
        .strip_prefix(' ')?;
    let mut it = rest.split(' ');
    let parsed = (|| {
        let index: usize = it.next()?.parse().ok()?;
        let kind = match it.next()? {
            "f" => 'f',
            "i" => 'i',
            "F" => 'F',
            _ => return None,
        };
        let name = name_of(it.next()?)?;
        let n: usize = it.next()?.parse().ok()?;
        if n > MAX_VALUES || (kind != 'F' && n != 1) {
            return None;
        }
        Some((
            index,
            kind,
            name,
            it.map(str::to_owned).collect::<Vec<_>>(),
            n,
        ))
    })();
    Some(match parsed {
        Some((index, kind, name, vals, n)) => {
            let want = n + if side == "E" { 2 } else { 0 };
            if vals.len() == want {
                Ok((index, kind, name, vals))
            } else {
                Err(format!(
                    "a check line carries {} fields, not {want}",
                    vals.len()
                ))
            }
        }
        None => Err("a malformed check line".to_owned()),
    })
}

fn value(kind: char, toks: &[String]) -> Option<Value> {
    match kind {
        'f' => float(&toks[0]).map(Value::F),
        'i' => toks[0].parse().ok().map(Value::I),
        _ => toks
            .iter()
            .map(|t| float(t))
            .collect::<Option<Vec<_>>>()
            .map(Value::Fs),
    }
}

/// The expected build's checks, in order. `Err`: the output is unusable (a task defect).
pub(crate) fn parse_expected(stdout: &str) -> Result<Vec<Expected>, String> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        let Some(f) = fields(line.trim_end(), "E") else {
            continue;
        };
        let (index, kind, name, toks) = f?;
        if index != out.len() {
            return Err(format!(
                "check {name:?} has index {index}, not {}: are the checks in more than one translation unit?",
                out.len()
            ));
        }
        let (rtol, atol) = match (float(&toks[0]), float(&toks[1])) {
            (Some(r), Some(a)) if r >= 0.0 && a >= 0.0 => (r, a),
            _ => {
                return Err(format!(
                    "check {name:?} has a negative or unreadable tolerance"
                ));
            }
        };
        let value = value(kind, &toks[2..])
            .ok_or_else(|| format!("check {name:?} has an unreadable expected value"))?;
        out.push(Expected {
            name,
            rtol,
            atol,
            value,
        });
    }
    if out.is_empty() {
        return Err("the driver's expected side ran no check".into());
    }
    Ok(out)
}

/// The actual build's check lines. `Err`: lines no honest run of our header prints (malformed,
/// an index twice or out of range): the agent's process wrote to the values channel.
pub(crate) fn parse_actual(stdout: &str, expected: usize) -> Result<Vec<Actual>, String> {
    let mut out: Vec<Actual> = Vec::new();
    for line in stdout.lines() {
        let Some(f) = fields(line.trim_end(), "A") else {
            continue;
        };
        let (index, kind, name, toks) = f?;
        if index >= expected {
            return Err(format!(
                "a value for check {index}, but the driver has {expected}"
            ));
        }
        if out.iter().any(|a| a.index == index) {
            return Err(format!("check {index} was reported twice"));
        }
        let value = value(kind, &toks).ok_or("an unreadable value")?;
        out.push(Actual { index, name, value });
    }
    Ok(out)
}

fn near(got: f64, want: f64, rtol: f64, atol: f64) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else if want.is_infinite() {
        got == want
    } else {
        got.is_finite() && (got - want).abs() <= atol + rtol * want.abs()
    }
}

/// A double for messages: plain (`0.5`, `-5`, `8.833333333333332`) in the usual range,
/// scientific (`1e-300`) outside it, exact either way (shortest round-trip digits).
fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e15).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::F(x) => num(*x),
        Value::I(i) => i.to_string(),
        Value::Fs(xs) => format!("an array of {} double(s)", xs.len()),
    }
}

/// Why `got` fails against `want` (`None`: it passes).
fn mismatch(want: &Expected, got: &Value) -> Option<String> {
    let tol = format!("rtol {:e}, atol {:e}", want.rtol, want.atol);
    match (&want.value, got) {
        (Value::F(w), Value::F(g)) => (!near(*g, *w, want.rtol, want.atol))
            .then(|| format!("got {}, want {} ({tol})", num(*g), num(*w))),
        (Value::I(w), Value::I(g)) => (w != g).then(|| format!("got {g}, want {w}")),
        (Value::Fs(w), Value::Fs(g)) => {
            if w.len() != g.len() {
                return Some(format!(
                    "got {} value(s), want {} (the lengths must be equal)",
                    g.len(),
                    w.len()
                ));
            }
            let bad: Vec<usize> = (0..w.len())
                .filter(|&i| !near(g[i], w[i], want.rtol, want.atol))
                .collect();
            bad.first().map(|&i| {
                format!(
                    "{} of {} element(s) differ; first at [{i}]: got {}, want {} ({tol})",
                    bad.len(),
                    w.len(),
                    num(g[i]),
                    num(w[i])
                )
            })
        }
        (w, g) => Some(format!(
            "got {}, want {}: another kind of value",
            show(g),
            show(w)
        )),
    }
}

/// One test result per expected check: passing when the actual build printed a value for it,
/// under the same name, that compares equal within the check's tolerance. `ended` says how the
/// actual run ended (for checks it printed no value for).
pub(crate) fn compare(expected: &[Expected], actual: &[Actual], ended: &str) -> Vec<TestResult> {
    expected
        .iter()
        .enumerate()
        .map(|(i, want)| {
            let t = TestResult::new(want.name.clone(), Status::Pass);
            let why = match actual.iter().find(|a| a.index == i) {
                None => Some(format!(
                    "no value: the program ended before this check ({ended})"
                )),
                Some(a) if a.name != want.name => Some(format!(
                    "the check printed here is `{}`: the checks ran in another order",
                    a.name
                )),
                Some(a) => mismatch(want, &a.value),
            };
            match why {
                None => t,
                Some(m) => TestResult {
                    status: Status::Fail,
                    ..t
                }
                .with_message(m),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_plainly() {
        let cases = [
            (-5.0, "-5"),
            (0.5, "0.5"),
            (8.833333333333332, "8.833333333333332"),
            (1e-300, "1e-300"),
            (2.5e20, "2.5e20"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, want) in cases {
            assert_eq!(num(x), want);
        }
    }

    fn hexn(s: &str) -> String {
        hex::encode(s)
    }

    #[test]
    fn expected_and_actual_lines_parse() {
        let e = format!(
            "noise\n@rb E 0 f {} 1 1e-12 0 3\n@rb E 1 i {} 1 0 0 -7\n@rb E 2 F {} 2 0 1e-9 1.5 nan\n",
            hexn("node"),
            hexn("count"),
            hexn("arr")
        );
        let e = parse_expected(&e).expect("parses");
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].value, Value::F(3.0));
        assert_eq!((e[0].rtol, e[0].atol), (1e-12, 0.0));
        assert_eq!(e[1].value, Value::I(-7));
        assert!(matches!(&e[2].value, Value::Fs(v) if v.len() == 2 && v[1].is_nan()));
        let a = parse_actual(
            &format!("@rb A 1 i {} 1 -7\nprinted by the program\n", hexn("count")),
            3,
        )
        .expect("parses");
        assert_eq!(a.len(), 1);
        let r = compare(&e, &a, "exit 0");
        assert_eq!(
            r.iter().map(|t| t.status).collect::<Vec<_>>(),
            vec![Status::Fail, Status::Pass, Status::Fail]
        );
        assert!(r[0].message.as_deref().unwrap_or("").contains("no value"));
        assert_eq!(r[0].name, "node");
    }

    #[test]
    fn the_expected_side_must_be_usable() {
        assert!(parse_expected("Results: 3/3 passed\n").is_err());
        assert!(parse_expected(&format!("@rb E 1 f {} 1 0 0 1\n", hexn("a"))).is_err());
        assert!(parse_expected(&format!("@rb E 0 f {} 1 -1 0 1\n", hexn("a"))).is_err());
        assert!(parse_expected(&format!("@rb E 0 f {} 1 0 0\n", hexn("a"))).is_err());
    }

    #[test]
    fn forged_channels_are_refused() {
        let n = hexn("a");
        for bad in [
            format!("@rb A 0 f {n} 1 1\n@rb A 0 f {n} 1 1\n"),
            format!("@rb A 5 f {n} 1 1\n"),
            format!("@rb A 0 f {n} 1 0x1p3\n"),
            format!("@rb A 0 f {n} 2 1 2\n"),
            format!("@rb A 0 F {n} 3 1 2\n"),
            "@rb A 0 f zz 1 1\n".to_owned(),
        ] {
            assert!(parse_actual(&bad, 2).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn comparisons_are_strict() {
        let want = |value, rtol, atol| Expected {
            name: "c".into(),
            rtol,
            atol,
            value,
        };
        let cases: &[(Expected, Value, bool)] = &[
            (want(Value::F(1.0), 1e-9, 0.0), Value::F(1.0 + 1e-12), true),
            (want(Value::F(1.0), 1e-9, 0.0), Value::F(1.1), false),
            (want(Value::F(1.0), 1e-9, 0.0), Value::F(f64::NAN), false),
            (
                want(Value::F(1.0), 1e-9, 0.0),
                Value::F(f64::INFINITY),
                false,
            ),
            (want(Value::F(f64::NAN), 0.0, 0.0), Value::F(f64::NAN), true),
            (
                want(Value::F(f64::INFINITY), 0.0, 0.0),
                Value::F(f64::INFINITY),
                true,
            ),
            (want(Value::F(0.0), 0.0, 1e-6), Value::F(5e-7), true),
            (want(Value::I(3), 0.0, 0.0), Value::I(3), true),
            (want(Value::I(3), 0.0, 0.0), Value::F(3.0), false),
            (
                want(Value::Fs(vec![1.0, 2.0]), 0.0, 0.0),
                Value::Fs(vec![]),
                false,
            ),
            (
                want(Value::Fs(vec![1.0, 2.0]), 0.0, 0.0),
                Value::Fs(vec![1.0]),
                false,
            ),
            (
                want(Value::Fs(vec![1.0, 2.0]), 0.0, 0.0),
                Value::Fs(vec![1.0, 2.0]),
                true,
            ),
            (want(Value::Fs(vec![]), 0.0, 0.0), Value::Fs(vec![]), true),
            (want(Value::Fs(vec![1.0]), 0.0, 0.0), Value::F(1.0), false),
        ];
        for (w, g, ok) in cases {
            assert_eq!(mismatch(w, g).is_none(), *ok, "{w:?} vs {g:?}");
        }
    }

    #[test]
    fn a_check_printed_out_of_order_fails() {
        let e = parse_expected(&format!(
            "@rb E 0 f {} 1 0 0 1\n@rb E 1 f {} 1 0 0 2\n",
            hexn("a"),
            hexn("b")
        ))
        .expect("parses");
        let a = parse_actual(
            &format!("@rb A 0 f {} 1 1\n@rb A 1 f {} 1 2\n", hexn("b"), hexn("a")),
            2,
        )
        .expect("parses");
        let r = compare(&e, &a, "exit 0");
        assert!(r.iter().all(|t| t.status == Status::Fail), "{r:?}");
    }
}
