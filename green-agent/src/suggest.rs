//! "Did you mean …?": the known name closest to a mistyped one.

/// The candidate closest to `given` within a typo's distance (about one edit per three
/// characters), if any; ties go to the earlier candidate.
pub fn closest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (given.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != given)
        .map(|c| (strsim::osa_distance(given, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ` (did you mean `NAME`?)` for the closest candidate, else nothing.
pub fn did_you_mean<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(given, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_the_closest_name_and_a_stranger_none() {
        let agents = [
            "oracle",
            "nop",
            "claude-code",
            "codex",
            "opencode",
            "cmd",
            "a2a",
        ];
        assert_eq!(closest("orcale", agents), Some("oracle"));
        assert_eq!(closest("claude_code", agents), Some("claude-code"));
        assert_eq!(closest("noop", agents), Some("nop"));
        assert_eq!(closest("gpt", agents), None);
        assert_eq!(
            did_you_mean("prbnch", ["prbench", "scicode"]),
            " (did you mean `prbench`?)"
        );
        assert_eq!(did_you_mean("zzzzzz", ["prbench", "scicode"]), "");
    }
}
