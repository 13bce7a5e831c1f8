//! Re-aggregating a stored PaperBench judgment reproduces its stored root score.

use std::path::PathBuf;

use rubrics::paperbench::{CategoryFilter, Node, aggregate, aggregate_file, aggregate_with};

fn shared(rel: &str) -> PathBuf {
    bench_data::path(rel)
}

#[test]
fn shared_data_semantic_self_consistency_root_is_reproduced_from_leaves() {
    let tree = Node::load(&shared("paperbench/graded/semantic-self-consistency.json"))
        .expect("vendored graded tree loads");
    let stored = tree.score.expect("root has a stored score");
    let ours = aggregate(&tree);
    println!("stored root {stored}, re-aggregated {ours}");
    assert!((ours - stored).abs() < 1e-9, "{ours} vs {stored}");
    let from_file = aggregate_file(&shared("paperbench/graded/semantic-self-consistency.json"))
        .expect("file aggregates");
    assert_eq!(from_file, ours);
    assert!(aggregate_file(&shared("paperbench/graded/absent.json")).is_err());
    assert!(tree.leaves(&CategoryFilter::all()).len() > 50);

    // Every inner node's stored score is reproduced too, not only the root.
    fn check(n: &Node) {
        if !n.is_leaf() {
            let s = aggregate(n);
            let stored = n.score.expect("inner node has a stored score");
            assert!((s - stored).abs() < 1e-9, "node {}: {s} vs {stored}", n.id);
            n.sub_tasks.iter().for_each(check);
        }
    }
    check(&tree);

    let code = aggregate_with(&tree, &CategoryFilter::code_only(), &|n| n.score)
        .expect("all leaves scored")
        .expect("has code leaves");
    assert!((0.0..=1.0).contains(&code));
}

#[test]
fn shared_data_ungraded_rubrics_load() {
    for f in [
        "semantic-self-consistency.json",
        "stochastic-interpolants.json",
    ] {
        let t = Node::load(&shared(&format!("paperbench/rubrics/{f}"))).expect("rubric loads");
        assert!(!t.leaves(&CategoryFilter::code_only()).is_empty(), "{f}");
    }
}
