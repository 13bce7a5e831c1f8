//! The safety rules of SciCode's perturbed inputs (`scicode_perturb.perturb_value` and
//! `perturbed_case`, behind `tasks import scicode --perturbed-inputs`), checked in the python
//! image: what never moves (ints, bools, grids, masks, zeros), what is kept (type, shape, dtype,
//! realness, symmetry, definiteness, norms), outputs of the step never overwritten, seeding, and
//! ill-conditioned targets left out.

mod common;

use std::path::PathBuf;

use common::Grading;

#[tokio::test]
async fn perturbations_stay_inside_the_functions_domain() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let rules = std::fs::read(manifest.join("tests/scicode/perturb_rules.py")).expect("rules");
    // The runner's modules, as grading ships them, beside the rules.
    let mut hidden: Vec<(&str, &[u8])> = rubrics::grade::SCICODE_FILES
        .iter()
        .map(|(name, text)| (*name, text.as_bytes()))
        .collect();
    hidden.push(("perturb_rules.py", &rules));
    let g = Grading::new("python", &[], &hidden).await;
    let out = g
        .sh("python3 /grader/hidden/perturb_rules.py /grader/hidden")
        .await;
    g.remove().await;
    assert!(
        out.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
