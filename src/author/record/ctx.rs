//! What every step of drafting shares, below all of them: the drafting context ([`Ctx`]: the
//! integration, its profile, the scrub rule, what an MCP server listed), one recorded call
//! reduced to a [`Sample`], and the limits and message form of the drafts.

use std::sync::Arc;

use serde_json::Value;

use super::{Call, Exchange, McpCall, ToolOutcome};
use crate::config::Scrub;
use crate::contract::ProfileKind;
use crate::profile::Profile;

/// Arrays in recorded answers are cut to this many elements.
pub const MAX_ARRAY_ITEMS: usize = 50;

pub(super) fn problem_text(path: &str, message: &str) -> String {
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
}

pub(super) fn salesforce_profile(profile: ProfileKind) -> Option<Arc<Profile>> {
    (profile == ProfileKind::Salesforce)
        .then(|| Profile::builtin("salesforce"))
        .flatten()
}

pub(super) struct Ctx<'a> {
    pub(super) integration: &'a str,
    pub(super) profile: ProfileKind,
    pub(super) scrub: &'a Scrub,
    pub(super) sf: Option<Arc<Profile>>,
    /// What an MCP server listed while recording (tools, resources, templates, prompts).
    pub(super) listing: Listing,
}

/// One recorded call reduced to what a mock needs.
pub(super) struct Sample {
    pub(super) input: Value,
    pub(super) answer: Value,
    /// Outcome class key.
    pub(super) class: String,
    /// The variant name its class would get.
    pub(super) class_name: String,
    /// MCP: the log and progress notifications sent before the answer, in mock form.
    pub(super) notifications: Option<Vec<Value>>,
    /// MCP: the `ask_client` of the call (the server asked the client something; the answer
    /// is the input's `$response`).
    pub(super) ask: Option<Value>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(integration: &'a str, profile: ProfileKind, scrub: &'a Scrub) -> Ctx<'a> {
        Ctx {
            integration,
            profile,
            scrub,
            sf: salesforce_profile(profile),
            listing: Listing::default(),
        }
    }

    pub(super) fn note(&self, notes: &mut Vec<String>, op: &str, msg: impl AsRef<str>) {
        notes.push(format!("{}/{op}: {}", self.integration, msg.as_ref()));
    }
}

/// What the server listed while recording, every page, first listing first.
#[derive(Debug, Clone, Default)]
pub(super) struct Listing {
    pub(super) tools: Vec<Value>,
    pub(super) resources: Vec<Value>,
    pub(super) templates: Vec<Value>,
    pub(super) prompts: Vec<Value>,
}

impl Listing {
    /// The union of every listing among `mcp` (each item once, by its name or URI).
    pub(super) fn of(mcp: &[Exchange]) -> Listing {
        let mut l = Listing::default();
        for ex in mcp {
            let Call::Mcp(McpCall {
                method,
                outcome: ToolOutcome::Result(r),
                ..
            }) = &ex.call
            else {
                continue;
            };
            let (into, member, key) = match method.as_str() {
                "tools/list" => (&mut l.tools, "tools", "name"),
                "resources/list" => (&mut l.resources, "resources", "uri"),
                "resources/templates/list" => {
                    (&mut l.templates, "resourceTemplates", "uriTemplate")
                }
                "prompts/list" => (&mut l.prompts, "prompts", "name"),
                _ => continue,
            };
            for item in r
                .get(member)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let k = item.get(key);
                if k.is_some() && !into.iter().any(|x| x.get(key) == k) {
                    into.push(item.clone());
                }
            }
        }
        l
    }

    /// The listed tool named `name`.
    pub(super) fn tool(&self, name: &str) -> Option<&Value> {
        self.tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
    }
}
