//! SciCode-style structure-aware `allclose` over decoded values.
//!
//! Values arrive in the JSON encoding shared with the tasks importer and the Python runner
//! (`{"$float": "nan"}`, `{"$complex": [re, im]}`, `{"$tuple": [...]}`,
//! `{"$ndarray": {"dtype", "shape", "data"}}`, `{"$dict": [[k, v], ...]}`, plain JSON otherwise).
//! Numbers compare with `|a - b| <= atol + rtol * |b|` (numpy's rule, `b` = expected); sequences
//! (lists, tuples, arrays) compare element-wise with equal shapes; dicts need equal key sets;
//! strings, bools and `None` compare exactly.

use serde_json::Value as Json;

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Float(f64),
    Complex(f64, f64),
    Str(String),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    Array {
        dtype: String,
        shape: Vec<usize>,
        data: Vec<Value>,
    },
}

/// Why an encoded value could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("bad encoded value at {path}: {reason}")]
pub struct DecodeError {
    pub path: String,
    pub reason: String,
}

fn derr(path: &str, reason: impl Into<String>) -> DecodeError {
    DecodeError {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Decodes the JSON encoding described in the module docs.
pub fn decode(json: &Json) -> Result<Value, DecodeError> {
    decode_at(json, "$", 0)
}

fn decode_at(json: &Json, path: &str, depth: usize) -> Result<Value, DecodeError> {
    if depth > 64 {
        return Err(derr(path, "nested deeper than 64 levels"));
    }
    Ok(match json {
        Json::Null => Value::None,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Float(
            n.as_f64()
                .ok_or_else(|| derr(path, "number out of range"))?,
        ),
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(items) => Value::List(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| decode_at(v, &format!("{path}[{i}]"), depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Json::Object(map) => {
            if map.len() == 1 {
                let (tag, inner) = map.iter().next().expect("one entry");
                match tag.as_str() {
                    "$float" => {
                        return match inner.as_str() {
                            Some("nan") => Ok(Value::Float(f64::NAN)),
                            Some("inf") => Ok(Value::Float(f64::INFINITY)),
                            Some("-inf") => Ok(Value::Float(f64::NEG_INFINITY)),
                            _ => Err(derr(path, "$float must be \"nan\", \"inf\" or \"-inf\"")),
                        };
                    }
                    "$complex" => {
                        let parts = inner
                            .as_array()
                            .filter(|a| a.len() == 2)
                            .ok_or_else(|| derr(path, "$complex must be [re, im]"))?;
                        let re = scalar(&decode_at(&parts[0], path, depth + 1)?)
                            .ok_or_else(|| derr(path, "$complex re is not a number"))?;
                        let im = scalar(&decode_at(&parts[1], path, depth + 1)?)
                            .ok_or_else(|| derr(path, "$complex im is not a number"))?;
                        return Ok(Value::Complex(re, im));
                    }
                    "$tuple" => {
                        let Value::List(items) = decode_at(inner, path, depth + 1)? else {
                            return Err(derr(path, "$tuple must hold a list"));
                        };
                        return Ok(Value::Tuple(items));
                    }
                    "$dict" => {
                        let pairs = inner
                            .as_array()
                            .ok_or_else(|| derr(path, "$dict must hold [[k, v], ...]"))?;
                        let mut out = Vec::with_capacity(pairs.len());
                        for (i, p) in pairs.iter().enumerate() {
                            let kv = p.as_array().filter(|a| a.len() == 2).ok_or_else(|| {
                                derr(path, format!("$dict entry {i} is not [k, v]"))
                            })?;
                            out.push((
                                decode_at(&kv[0], &format!("{path}.key{i}"), depth + 1)?,
                                decode_at(&kv[1], &format!("{path}.value{i}"), depth + 1)?,
                            ));
                        }
                        return Ok(Value::Dict(out));
                    }
                    "$ndarray" => return decode_array(inner, path, depth),
                    _ => {}
                }
            }
            Value::Dict(
                map.iter()
                    .map(|(k, v)| {
                        Ok((
                            Value::Str(k.clone()),
                            decode_at(v, &format!("{path}.{k}"), depth + 1)?,
                        ))
                    })
                    .collect::<Result<_, DecodeError>>()?,
            )
        }
    })
}

fn decode_array(inner: &Json, path: &str, depth: usize) -> Result<Value, DecodeError> {
    let dtype = inner
        .get("dtype")
        .and_then(Json::as_str)
        .ok_or_else(|| derr(path, "$ndarray needs a string dtype"))?
        .to_owned();
    let shape: Vec<usize> = inner
        .get("shape")
        .and_then(Json::as_array)
        .ok_or_else(|| derr(path, "$ndarray needs a shape list"))?
        .iter()
        .map(|d| d.as_u64().map(|d| d as usize))
        .collect::<Option<_>>()
        .ok_or_else(|| derr(path, "$ndarray shape must hold non-negative integers"))?;
    let data = inner
        .get("data")
        .and_then(Json::as_array)
        .ok_or_else(|| derr(path, "$ndarray needs a flat data list"))?;
    let expected: usize = shape.iter().product();
    if data.len() != expected {
        return Err(derr(
            path,
            format!(
                "$ndarray shape {shape:?} needs {expected} values, got {}",
                data.len()
            ),
        ));
    }
    let data = data
        .iter()
        .map(|v| decode_at(v, path, depth + 1))
        .collect::<Result<_, _>>()?;
    Ok(Value::Array { dtype, shape, data })
}

fn scalar(v: &Value) -> Option<f64> {
    match v {
        Value::Float(x) => Some(*x),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// Tolerances for [`allclose`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
    /// NaN equals NaN (numpy's `equal_nan`).
    pub equal_nan: bool,
}

impl Default for Tolerance {
    /// numpy's defaults: rtol 1e-5, atol 1e-8, NaN ≠ NaN.
    fn default() -> Self {
        Self {
            rtol: 1e-5,
            atol: 1e-8,
            equal_nan: false,
        }
    }
}

/// The first place where two values differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Path into the value, e.g. `$[2].energy`.
    pub path: String,
    pub reason: String,
}

/// `Ok(())` when `actual` is close to `expected` everywhere.
pub fn allclose(actual: &Value, expected: &Value, tol: Tolerance) -> Result<(), Mismatch> {
    cmp(actual, expected, tol, "$")
}

fn close_f(a: f64, b: f64, tol: Tolerance) -> bool {
    if a.is_nan() || b.is_nan() {
        return tol.equal_nan && a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= tol.atol + tol.rtol * b.abs()
}

fn mis(path: &str, reason: impl Into<String>) -> Mismatch {
    Mismatch {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Sequence view: (shape, flat elements) for lists, tuples and arrays of scalars; nested lists
/// of equal length flatten to a shape as numpy would.
fn as_sequence(v: &Value) -> Option<Vec<&Value>> {
    match v {
        Value::List(x) | Value::Tuple(x) => Some(x.iter().collect()),
        Value::Array { shape, data, .. } if shape.len() <= 1 => Some(data.iter().collect()),
        _ => None,
    }
}

fn cmp(a: &Value, b: &Value, tol: Tolerance, path: &str) -> Result<(), Mismatch> {
    if matches!(a, Value::Complex(..)) || matches!(b, Value::Complex(..)) {
        return cmp_complex(a, b, tol, path);
    }
    match (a, b) {
        (Value::None, Value::None) => Ok(()),
        (Value::Str(x), Value::Str(y)) => {
            if x == y {
                Ok(())
            } else {
                Err(mis(path, format!("string {x:?} != expected {y:?}")))
            }
        }
        (Value::Bool(x), Value::Bool(y)) => {
            if x == y {
                Ok(())
            } else {
                Err(mis(path, format!("{x} != expected {y}")))
            }
        }
        (x, y) if scalar(x).is_some() && scalar(y).is_some() => {
            let (x, y) = (scalar(x).unwrap_or(f64::NAN), scalar(y).unwrap_or(f64::NAN));
            if close_f(x, y, tol) {
                Ok(())
            } else {
                Err(mis(
                    path,
                    format!("{x} vs expected {y} (|diff| = {:e})", (x - y).abs()),
                ))
            }
        }
        (
            Value::Array {
                shape: sa,
                data: da,
                ..
            },
            Value::Array {
                shape: sb,
                data: db,
                ..
            },
        ) => {
            if sa != sb {
                return Err(mis(path, format!("shape {sa:?} vs expected {sb:?}")));
            }
            for (i, (x, y)) in da.iter().zip(db).enumerate() {
                cmp(x, y, tol, &format!("{path}[flat {i}]"))?;
            }
            Ok(())
        }
        (Value::Array { shape, data, .. }, other) | (other, Value::Array { shape, data, .. })
            if shape.len() > 1 =>
        {
            // Compare a nested list against a multi-dimensional array by flattening the list.
            let mut flat = Vec::new();
            let mut oshape = Vec::new();
            if !flatten(other, &mut flat, &mut oshape, 0) || &oshape != shape {
                return Err(mis(
                    path,
                    format!("shape mismatch with array of shape {shape:?}"),
                ));
            }
            let array_is_actual = matches!(a, Value::Array { .. });
            for (i, (x, y)) in data.iter().zip(flat).enumerate() {
                let p = format!("{path}[flat {i}]");
                if array_is_actual {
                    cmp(x, y, tol, &p)?;
                } else {
                    cmp(y, x, tol, &p)?;
                }
            }
            Ok(())
        }
        (Value::Dict(x), Value::Dict(y)) => {
            if x.len() != y.len() {
                return Err(mis(
                    path,
                    format!("{} keys vs expected {}", x.len(), y.len()),
                ));
            }
            for (k, vy) in y {
                let vx = x
                    .iter()
                    .find(|(kx, _)| {
                        allclose(
                            kx,
                            k,
                            Tolerance {
                                rtol: 0.0,
                                atol: 0.0,
                                equal_nan: true,
                            },
                        )
                        .is_ok()
                    })
                    .map(|(_, v)| v)
                    .ok_or_else(|| mis(path, format!("missing key {}", key_label(k))))?;
                cmp(vx, vy, tol, &format!("{path}.{}", key_label(k)))?;
            }
            Ok(())
        }
        (x, y) => match (as_sequence(x), as_sequence(y)) {
            (Some(sx), Some(sy)) => {
                if sx.len() != sy.len() {
                    return Err(mis(
                        path,
                        format!("length {} vs expected {}", sx.len(), sy.len()),
                    ));
                }
                for (i, (x, y)) in sx.into_iter().zip(sy).enumerate() {
                    cmp(x, y, tol, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ => Err(mis(path, format!("{} vs expected {}", kind(x), kind(y)))),
        },
    }
}

fn cmp_complex(a: &Value, b: &Value, tol: Tolerance, path: &str) -> Result<(), Mismatch> {
    let (Some((xr, xi)), Some((yr, yi))) = (complex_of(a), complex_of(b)) else {
        return Err(mis(path, format!("{} vs expected {}", kind(a), kind(b))));
    };
    let finite = [xr, xi, yr, yi].iter().all(|v| v.is_finite());
    let ok = if finite {
        // numpy: |a - b| <= atol + rtol * |b| with complex magnitudes.
        (xr - yr).hypot(xi - yi) <= tol.atol + tol.rtol * yr.hypot(yi)
    } else {
        close_f(xr, yr, tol) && close_f(xi, yi, tol)
    };
    if ok {
        Ok(())
    } else {
        Err(mis(path, format!("{xr}{xi:+}j vs expected {yr}{yi:+}j")))
    }
}

fn complex_of(v: &Value) -> Option<(f64, f64)> {
    match v {
        Value::Complex(r, i) => Some((*r, *i)),
        other => scalar(other).map(|r| (r, 0.0)),
    }
}

fn flatten<'a>(
    v: &'a Value,
    out: &mut Vec<&'a Value>,
    shape: &mut Vec<usize>,
    depth: usize,
) -> bool {
    match v {
        Value::List(items) | Value::Tuple(items) => {
            if shape.len() == depth {
                shape.push(items.len());
            } else if shape.get(depth) != Some(&items.len()) {
                return false;
            }
            items.iter().all(|i| flatten(i, out, shape, depth + 1))
        }
        Value::Array { shape: s, data, .. } if s.len() <= 1 => {
            let n = data.len();
            if shape.len() == depth {
                shape.push(n);
            } else if shape.get(depth) != Some(&n) {
                return false;
            }
            out.extend(data.iter());
            true
        }
        other => {
            if shape.len() > depth {
                return false;
            }
            out.push(other);
            true
        }
    }
}

/// A dict key as Python would show it (a string bare).
fn key_label(k: &Value) -> String {
    match k {
        Value::Str(s) => s.clone(),
        other => python_repr(other),
    }
}

/// A value as Python's `repr` would show it (arrays as their dtype and shape), for messages.
fn python_repr(v: &Value) -> String {
    let items = |xs: &[Value]| xs.iter().map(python_repr).collect::<Vec<_>>().join(", ");
    match v {
        Value::None => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Float(x) => x.to_string(),
        Value::Complex(re, im) => format!("({re}{im:+}j)"),
        Value::Str(s) => format!("'{s}'"),
        Value::List(xs) => format!("[{}]", items(xs)),
        Value::Tuple(xs) if xs.len() == 1 => format!("({},)", items(xs)),
        Value::Tuple(xs) => format!("({})", items(xs)),
        Value::Dict(kv) => format!(
            "{{{}}}",
            kv.iter()
                .map(|(k, v)| format!("{}: {}", python_repr(k), python_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Array { dtype, shape, .. } => format!(
            "array(dtype={dtype}, shape=({}))",
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::None => "None",
        Value::Bool(_) => "bool",
        Value::Float(_) => "number",
        Value::Complex(..) => "complex",
        Value::Str(_) => "string",
        Value::List(_) => "list",
        Value::Tuple(_) => "tuple",
        Value::Dict(_) => "dict",
        Value::Array { .. } => "ndarray",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(j: Json) -> Value {
        decode(&j).expect("decodes")
    }

    #[test]
    fn decoding_table() {
        let cases: Vec<(Json, Value)> = vec![
            (json!(null), Value::None),
            (json!(true), Value::Bool(true)),
            (json!(1.5), Value::Float(1.5)),
            (json!("a"), Value::Str("a".into())),
            (json!({"$float": "inf"}), Value::Float(f64::INFINITY)),
            (json!({"$float": "-inf"}), Value::Float(f64::NEG_INFINITY)),
            (json!({"$complex": [1, -2]}), Value::Complex(1.0, -2.0)),
            (
                json!({"$tuple": [1, "x"]}),
                Value::Tuple(vec![Value::Float(1.0), Value::Str("x".into())]),
            ),
            (
                json!({"$dict": [[1, 2]]}),
                Value::Dict(vec![(Value::Float(1.0), Value::Float(2.0))]),
            ),
            (
                json!({"k": [1]}),
                Value::Dict(vec![(
                    Value::Str("k".into()),
                    Value::List(vec![Value::Float(1.0)]),
                )]),
            ),
            (
                json!({"$ndarray": {"dtype": "complex128", "shape": [1], "data": [{"$complex": [0, 1]}]}}),
                Value::Array {
                    dtype: "complex128".into(),
                    shape: vec![1],
                    data: vec![Value::Complex(0.0, 1.0)],
                },
            ),
        ];
        for (j, want) in cases {
            assert_eq!(d(j.clone()), want, "{j}");
        }
        assert!(matches!(d(json!({"$float": "nan"})), Value::Float(x) if x.is_nan()));
    }

    #[test]
    fn decoding_rejects_bad_encodings() {
        for bad in [
            json!({"$float": "big"}),
            json!({"$complex": [1]}),
            json!({"$tuple": 3}),
            json!({"$dict": [[1]]}),
            json!({"$ndarray": {"dtype": "float64", "shape": [2, 2], "data": [1, 2, 3]}}),
            json!({"$ndarray": {"shape": [1], "data": [1]}}),
        ] {
            assert!(decode(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allclose_table() {
        let t = Tolerance::default();
        let arr = |shape: Vec<usize>, data: Vec<f64>| Value::Array {
            dtype: "float64".into(),
            shape,
            data: data.into_iter().map(Value::Float).collect(),
        };
        // (actual, expected, tolerance, should match)
        let cases: Vec<(Value, Value, Tolerance, bool)> = vec![
            (Value::Float(1.0), Value::Float(1.0 + 1e-7), t, true),
            (Value::Float(1.0), Value::Float(1.001), t, false),
            (
                Value::Float(1.0),
                Value::Float(1.001),
                Tolerance { rtol: 1e-2, ..t },
                true,
            ),
            (Value::Float(0.0), Value::Float(1e-9), t, true),
            (Value::Float(0.0), Value::Float(1e-6), t, false),
            (
                Value::Float(0.0),
                Value::Float(1e-6),
                Tolerance { atol: 1e-5, ..t },
                true,
            ),
            (Value::Float(f64::NAN), Value::Float(f64::NAN), t, false),
            (
                Value::Float(f64::NAN),
                Value::Float(f64::NAN),
                Tolerance {
                    equal_nan: true,
                    ..t
                },
                true,
            ),
            (
                Value::Float(f64::INFINITY),
                Value::Float(f64::INFINITY),
                t,
                true,
            ),
            (
                Value::Float(f64::INFINITY),
                Value::Float(f64::NEG_INFINITY),
                t,
                false,
            ),
            (Value::Bool(true), Value::Float(1.0), t, true),
            (Value::Bool(true), Value::Bool(false), t, false),
            (
                Value::Complex(1.0, 1.0),
                Value::Complex(1.0, 1.0 + 1e-9),
                t,
                true,
            ),
            (
                Value::Complex(1.0, 1.0),
                Value::Complex(1.0, -1.0),
                t,
                false,
            ),
            (Value::Float(2.0), Value::Complex(2.0, 0.0), t, true),
            (Value::Str("a".into()), Value::Str("a".into()), t, true),
            (Value::Str("a".into()), Value::Float(1.0), t, false),
            (arr(vec![2], vec![1.0, 2.0]), d(json!([1.0, 2.0])), t, true),
            (arr(vec![2], vec![1.0, 2.0]), d(json!([1.0, 2.5])), t, false),
            (
                arr(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]),
                d(json!([[1, 2], [3, 4]])),
                t,
                true,
            ),
            (
                d(json!([[1, 2], [3, 4]])),
                arr(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]),
                t,
                true,
            ),
            (
                arr(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]),
                arr(vec![4], vec![1.0, 2.0, 3.0, 4.0]),
                t,
                false,
            ),
            (
                arr(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]),
                d(json!([[1, 2, 3, 4]])),
                t,
                false,
            ),
            (
                d(json!([1, [2, 3]])),
                d(json!({"$tuple": [1, [2, 3]]})),
                t,
                true,
            ),
            (d(json!([1, 2])), d(json!([1, 2, 3])), t, false),
            (
                d(json!({"a": 1, "b": [1, 2]})),
                d(json!({"b": [1, 2], "a": 1.0000001})),
                t,
                true,
            ),
            (d(json!({"a": 1})), d(json!({"b": 1})), t, false),
            (d(json!({"a": 1})), d(json!({"a": 1, "b": 2})), t, false),
            (
                d(json!({"$dict": [[1, "x"]]})),
                d(json!({"$dict": [[1, "x"]]})),
                t,
                true,
            ),
            (Value::None, Value::None, t, true),
            (Value::None, Value::Float(0.0), t, false),
        ];
        for (i, (a, b, tol, want)) in cases.iter().enumerate() {
            let got = allclose(a, b, *tol);
            assert_eq!(got.is_ok(), *want, "case {i}: {a:?} vs {b:?}: {got:?}");
        }
    }

    #[test]
    fn mismatch_names_the_path() {
        let a = d(json!({"x": [1, 2, {"y": 3}]}));
        let b = d(json!({"x": [1, 2, {"y": 4}]}));
        let m = allclose(&a, &b, Tolerance::default()).expect_err("differs");
        assert_eq!(m.path, "$.x[2].y");
    }
}
