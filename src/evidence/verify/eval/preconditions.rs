//! `preconditions.*`: what must (or must not) have happened before the first effective call of the tool.

use super::*;

impl<'a> Cx<'a> {
    pub(super) fn preconditions(
        &self,
        pre: &crate::evidence::verify::model::Preconditions,
        out: &mut Vec<CheckResult>,
    ) {
        let first = self.effective_of(self.tool).first().copied();
        for t in &pre.required_before {
            let id = format!("preconditions.required_before[{t}]");
            let Some(first) = first else {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            };
            let before = self
                .effective_of(t)
                .into_iter()
                .find(|c| c.sequence < first.sequence);
            out.push(match before {
                Some(b) => check(
                    id,
                    Passed,
                    format!(
                        "{} precedes the first effective call at sequence {}",
                        b.label(),
                        first.sequence
                    ),
                ),
                None => {
                    let seen = self.calls_of(t);
                    let note = if seen.is_empty() {
                        format!("{t} was never called")
                    } else {
                        format!("calls of {t}: {}", labels(&seen))
                    };
                    check(
                        id,
                        Failed,
                        format!(
                            "{} at sequence {} came before any effective {t} ({note})",
                            self.tool, first.sequence
                        ),
                    )
                }
            });
        }
        for t in &pre.forbidden_before {
            let id = format!("preconditions.forbidden_before[{t}]");
            let Some(first) = first else {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            };
            let before: Vec<&Call> = self
                .effective_of(t)
                .into_iter()
                .filter(|c| c.sequence < first.sequence)
                .collect();
            out.push(if before.is_empty() {
                check(
                    id,
                    Passed,
                    format!(
                        "no effective {t} before the first effective call at sequence {}",
                        first.sequence
                    ),
                )
            } else {
                check(
                    id,
                    Failed,
                    format!(
                        "{t} at {} came before the first effective {} at sequence {}",
                        labels(&before),
                        self.tool,
                        first.sequence
                    ),
                )
            });
        }
        for name in &pre.events_before {
            let id = format!("preconditions.events_before[{name}]");
            let Some(first) = first else {
                out.push(check(id, Inconclusive, self.no_effective_reason()));
                continue;
            };
            let named = self.events_named(name);
            out.push(match named.iter().find(|e| e.sequence < first.sequence) {
                Some(e) => check(
                    id,
                    Passed,
                    format!(
                        "event {name} at sequence {} precedes the first effective call at sequence {}",
                        e.sequence, first.sequence
                    ),
                ),
                None if named.is_empty() => check(
                    id,
                    Inconclusive,
                    format!("no event {name} was recorded"),
                ),
                None => check(
                    id,
                    Failed,
                    format!(
                        "event {name} came only at sequence {}, after the first effective call of {} at sequence {}",
                        seqs(named.iter().map(|e| e.sequence)),
                        self.tool,
                        first.sequence
                    ),
                ),
            });
        }
    }
}
