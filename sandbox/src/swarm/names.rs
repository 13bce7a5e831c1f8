//! Names of Swarm objects (services, networks, configs, secrets): Swarm takes at most a DNS
//! label, so a long name keeps its unique tail and loses part of its run id.

/// Swarm's longest object name (a DNS label).
const MAX_SERVICE_NAME: usize = 63;

/// `name` within [`MAX_SERVICE_NAME`]: the run part is cut, the unique tail kept.
pub(super) fn service_name(name: String) -> String {
    if name.len() <= MAX_SERVICE_NAME {
        return name;
    }
    // Object names are ASCII; the tail (role, pid, time, counter) makes them unique.
    let tail = &name[name.len() - 32..];
    format!("{}{tail}", &name[..MAX_SERVICE_NAME - 32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_fit_a_dns_label_and_keep_their_unique_tail() {
        let short = "rb-run-agent-1a2b3c".to_string();
        assert_eq!(service_name(short.clone()), short);
        let long = format!("rb-{}-grader-7d85c1bc31b7deadbeef", "r".repeat(40));
        let cut = service_name(long.clone());
        assert_eq!(cut.len(), MAX_SERVICE_NAME);
        assert!(cut.starts_with("rb-rrr"), "{cut}");
        assert!(cut.ends_with("-grader-7d85c1bc31b7deadbeef"), "{cut}");
    }
}
