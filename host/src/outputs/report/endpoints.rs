//! What the report says was sent: the API of every request, as requests.jsonl records
//! it (`endpoint`), not the `--api` asked for (chat messages go to chat whatever it says).

use super::text_format::{row, section};
use crate::measuring::client::Api;
use crate::measuring::metrics::answer::EndpointCount;
use crate::measuring::metrics::PhaseSummary;

/// Requests per endpoint over `phases`, in path order.
pub fn endpoints_used<'a>(
    phases: impl IntoIterator<Item = &'a PhaseSummary>,
) -> Vec<EndpointCount> {
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    for p in phases {
        for e in &p.answer.endpoints {
            *counts.entry(e.endpoint.clone()).or_default() += e.requests;
        }
    }
    counts
        .into_iter()
        .map(|(endpoint, requests)| EndpointCount { endpoint, requests })
        .collect()
}

/// An endpoint's `--api` name (the path itself for one no API has).
fn api_name(endpoint: &str) -> &str {
    match Api::of_path(endpoint) {
        Some(api) => api.name(),
        None => endpoint,
    }
}

/// The header's API: the one every request went to, or each with its request count
/// (`chat (90), completions (10)`); `configured` when nothing was sent.
pub fn api_used(endpoints: &[EndpointCount], configured: &str) -> String {
    match endpoints {
        [] => configured.to_string(),
        [one] => api_name(&one.endpoint).to_string(),
        many => many
            .iter()
            .map(|e| format!("{} ({})", api_name(&e.endpoint), e.requests))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The extras' rows of requests per endpoint, when a phase sent to more than one.
pub fn endpoint_rows(out: &mut String, s: &PhaseSummary) {
    if s.answer.endpoints.len() < 2 {
        return;
    }
    section(out, "Requests by Endpoint");
    for e in &s.answer.endpoints {
        row(out, &format!("Requests to {}:", e.endpoint), e.requests);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(endpoint: &str, requests: u64) -> EndpointCount {
        EndpointCount {
            endpoint: endpoint.into(),
            requests,
        }
    }

    #[test]
    fn the_api_is_the_one_used_or_each_with_its_count() {
        assert_eq!(api_used(&[], "completions"), "completions");
        let chat = count(Api::Chat.path(), 5);
        assert_eq!(api_used(std::slice::from_ref(&chat), "completions"), "chat");
        let both = [chat, count(Api::Completions.path(), 2)];
        assert_eq!(api_used(&both, "completions"), "chat (5), completions (2)");
    }
}
