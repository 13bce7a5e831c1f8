//! The service's agent card: one skill per configured task suite, saying what a request must
//! hold (roles, config keys) and what comes back; the bearer scheme when a token is required.

use std::collections::{BTreeMap, BTreeSet};

use a2a_protocol::card::{HttpAuthSecurityScheme, StringList};
use a2a_protocol::{AgentCard, AgentSkill, SecurityRequirement, SecurityScheme};

use super::request::{CONFIG_KEYS, Catalog, Policy, example};

/// The name of the bearer scheme in `securitySchemes`.
pub const BEARER_SCHEME: &str = "bearer";

/// The card (interfaces at `/`, made absolute per request by the protocol crate).
pub fn card(catalog: &Catalog, policy: &Policy, secured: bool) -> AgentCard {
    let hosted: Vec<&str> = policy.hosted.iter().map(String::as_str).collect();
    let urls = if policy.allowed_urls.is_empty() {
        "any A2A URL".to_owned()
    } else {
        format!(
            "A2A URLs starting with {}",
            policy.allowed_urls.join(" or ")
        )
    };
    let participants = format!(
        "participants: one or more roles of your choice (e.g. `agent`; several for a comparison), each {urls} or a hosted agent allowed here ({})",
        if hosted.is_empty() {
            "none".to_owned()
        } else {
            hosted.join(", ")
        }
    );
    let keys = CONFIG_KEYS
        .iter()
        .map(|(k, what)| format!("`{k}`: {what}"))
        .collect::<Vec<_>>()
        .join("; ");
    let mut card = AgentCard::new(
        "research-bench green agent",
        format!(
            "Assesses coding agents on scientific research code. Send one message whose data part \
             (or text part) is JSON {{\"participants\": {{\"<role>\": \"<A2A URL or hosted agent>\"}}, \
             \"config\": {{...}}}}. {participants}. config keys (unknown keys are rejected): {keys}. \
             The task reports one status message and one `trial` artifact per finished trial, \
             then a `result` data part (score, max_score, pass_rate, per_task, per_agent), \
             eval_report.json per PRBench trial and the report files."
        ),
        env!("CARGO_PKG_VERSION"),
        "/",
    );
    card.capabilities.streaming = Some(true);
    card.default_input_modes = vec!["application/json".into(), "text/plain".into()];
    card.default_output_modes = vec![
        "application/json".into(),
        "text/markdown".into(),
        "text/html".into(),
        "text/csv".into(),
    ];
    for suite in catalog.suites.values() {
        let kinds: BTreeSet<&str> = suite.tasks.iter().map(|t| t.kind.as_str()).collect();
        let mut tags = vec!["assessment".to_owned(), suite.name.clone()];
        tags.extend(kinds.iter().map(|k| (*k).to_owned()));
        let mut skill = AgentSkill::new(
            format!("assess:{}", suite.name),
            format!("Assess agents on the `{}` suite", suite.name),
            format!(
                "{} task(s) (kinds: {}); name it in config.tasks as `{}` or by task id. {participants}.",
                suite.tasks.len(),
                kinds.iter().copied().collect::<Vec<_>>().join(", "),
                suite.name
            ),
            tags,
        );
        skill.examples = vec![example(&suite.name)];
        card = card.with_skill(skill);
    }
    if secured {
        card.security_schemes.insert(
            BEARER_SCHEME.into(),
            SecurityScheme::HttpAuthSecurityScheme(HttpAuthSecurityScheme {
                description: Some(
                    "the service's API token (RB_SERVE_TOKEN on the service's host)".into(),
                ),
                scheme: "bearer".into(),
                bearer_format: None,
            }),
        );
        card.security_requirements.push(SecurityRequirement {
            schemes: BTreeMap::from([(BEARER_SCHEME.to_owned(), StringList::default())]),
        });
    }
    card
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::serve::request::{Suite, TaskEntry};

    /// The card as a 1.0 and a 0.3 client read it (a wire format: snapshot).
    #[test]
    fn the_card_lists_a_skill_per_suite_and_the_bearer_scheme() {
        let suite = Suite {
            name: "examples".into(),
            path: PathBuf::from("/suites/examples"),
            tasks: vec![
                TaskEntry {
                    id: "a".into(),
                    kind: "generic".into(),
                    folder: PathBuf::from("/suites/examples/a"),
                },
                TaskEntry {
                    id: "b".into(),
                    kind: "prbench".into(),
                    folder: PathBuf::from("/suites/examples/b"),
                },
            ],
        };
        let catalog = Catalog {
            suites: BTreeMap::from([("examples".to_owned(), suite)]),
        };
        let card = card(&catalog, &Policy::default(), true);
        let mut json = a2a_protocol::card_json(&card, Some("127.0.0.1:8600"));
        json["version"] = "VERSION".into();
        insta::assert_json_snapshot!(json);
    }
}
