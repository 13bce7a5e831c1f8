//! A bounded, seeded fuzz of the adapter's A2A input: messages as the wire gives them (JSON
//! decoded as the server does) with parts of every kind (text, raw, url, data, none, unknown),
//! sizes from empty to a few MiB, file names that are empty, absolute, `..`, `a` and `a/b`,
//! long or deep, and data nested deep. Each message is refused at decoding, refused by
//! `read_message` with a typed error, or its files are written, or refused by name, without a
//! panic, within a time bound, and nothing is ever written outside the workspace.

use std::path::Path;
use std::time::{Duration, Instant};

use a2a_protocol::{Message, Part};
use serde_json::{Value, json};
use white_agent_adapter::instruction::{read_message, write_files};

/// xorshift64: the same cases on every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(json!("leaf"), |v, i| {
        if i % 2 == 0 {
            json!([v])
        } else {
            json!({ "constraints": v })
        }
    })
}

fn part(g: &mut Gen, names: &[&str]) -> Value {
    let size = [0, 1, 1000, 3 << 20][g.below(4)];
    let mut p = match g.below(8) {
        0 | 1 => json!({ "text": "do it ".repeat(size.min(1 << 16) / 6 + 1) }),
        2 => serde_json::to_value(Part::raw(vec![b'r'; size], None, None)).expect("raw part"),
        3 => {
            json!({ "url": g.pick(&["http://127.0.0.1:9/f", "file:///etc/passwd", "", "https://x/y"]) })
        }
        4 => {
            json!({ "data": { "task_id": "t", "expected_outputs": ["a", 1, null, nested(3)], "constraints": nested(g.below(100)) } })
        }
        5 => json!({ "data": nested(g.below(120)) }),
        6 => json!({}),
        _ => json!({ "kind": g.pick(&["file", "image", "text"]), "text": "x" }),
    };
    if g.below(3) > 0 {
        p["filename"] = json!(g.pick(names));
    }
    p
}

/// Every path under `root`, to compare before and after.
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn fuzzed_messages_are_read_or_refused_and_files_stay_in_the_workspace() {
    let long = "L".repeat(300);
    let deep = vec!["d"; 200].join("/");
    let names: Vec<&str> = vec![
        "a",
        "a/b",
        "",
        "/etc/x",
        "..",
        "../out",
        "./a",
        "a/../../b",
        "x\u{0}y",
        "é/ü.txt",
        &long,
        &deep,
        "a/",
        ".",
    ];
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let budget = Instant::now() + Duration::from_secs(30);
    let (mut refused_decode, mut refused_read, mut written, mut refused_write) = (0, 0, 0, 0);
    for round in 0..600 {
        if Instant::now() > budget {
            break;
        }
        let parts: Vec<Value> = (0..g.below(6)).map(|_| part(&mut g, &names)).collect();
        let wire = json!({
            "messageId": format!("m{round}"),
            "role": g.pick(&["ROLE_USER", "ROLE_USER", "ROLE_AGENT", "nobody"]),
            "parts": parts,
        });
        let Ok(message) = serde_json::from_value::<Message>(wire) else {
            refused_decode += 1;
            continue;
        };
        let Ok(input) = read_message(&message) else {
            refused_read += 1;
            continue;
        };
        let scratch = tempfile::tempdir().expect("tempdir");
        let root = scratch.path().join("workspace");
        std::fs::create_dir_all(&root).expect("workspace");
        let started = Instant::now();
        match write_files(&root, &input) {
            Ok(()) => written += 1,
            Err(_) => refused_write += 1,
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "round {round}: writing took {:?}",
            started.elapsed()
        );
        // Nothing beside the workspace.
        let outside: Vec<String> = tree(scratch.path())
            .into_iter()
            .filter(|p| !p.starts_with(&root.display().to_string()))
            .collect();
        assert!(
            outside.is_empty(),
            "round {round}: written outside: {outside:?}"
        );
    }
    eprintln!(
        "decode refused {refused_decode}, read refused {refused_read}, written {written}, write refused {refused_write}"
    );
    assert!(
        written > 20 && refused_read > 20 && refused_write > 5,
        "the generator reaches every outcome"
    );
}
