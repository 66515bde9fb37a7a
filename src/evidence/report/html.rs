//! The HTML report of one attempt (docs/src/getting-started/first-test.md): one self-contained page — inline CSS and a few
//! lines of inline script, no network, works from `file://`.
//!
//! Layout: a header (attempt, test run, pins, the verdict with its reasons, how the command
//! of `understudy test` ended), the contract results with each check's evidence, and the
//! timeline of tool calls and agent-side events in sequence order.
//!
//! The timeline is rendered here, server side, as static rows (`div.row`, CSS grid): the
//! script only filters and expands, so a 10 000-event attempt loads like any static page.
//! Each row is `content-visibility: auto` (off-screen rows are not laid out) and each
//! expandable JSON is capped at [`JSON_CAP`] bytes (the full value stays in
//! `evidence.json`). Markers the tests and users rely on:
//!
//! | element | marks |
//! |---|---|
//! | `#verdict` (`.pass` / `.fail`) | `Verdict: PASS` / `Verdict: FAIL`, reasons in `#verdict-reasons li` |
//! | `#timeline .row[data-seq]` | one per tool call (`.call`) or agent-side event (`.agent-event`) |
//! | `.row.side-effect` + `.label` | `blocked write`, `simulated write`, `forwarded write`, `tagged write` |
//! | `.row.harness-error` | red, with the error code |
//! | `#contracts .check.status-failed` / `.status-inconclusive` | a check that did not pass, with its evidence |

use serde_json::Value;

use super::{contract_results, reasons, str_at, timeline, Row};

/// The most bytes of pretty JSON shown per value in a row.
pub const JSON_CAP: usize = 2048;

const CSS: &str = r#"
:root{--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--muted:#57606a;--line:#d0d7de;--bg2:#f6f8fa}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328}
header,section{padding:12px 20px}header{border-bottom:1px solid var(--line);background:var(--bg2)}
h1{font-size:20px;margin:0 0 6px}h2{font-size:16px;margin:8px 0}h3{font-size:14px;margin:6px 0}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
pre{margin:4px 0;padding:6px;background:var(--bg2);border:1px solid var(--line);overflow:auto;max-height:320px;white-space:pre-wrap;word-break:break-all}
.verdict{display:inline-block;font-weight:700;font-size:16px;padding:2px 10px;border-radius:4px;color:#fff}
.verdict.pass{background:var(--ok)}.verdict.fail{background:var(--bad)}
#verdict-reasons{color:var(--bad);margin:6px 0}
dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:8px 0}dl.meta dt{color:var(--muted)}dl.meta dd{margin:0}
table{border-collapse:collapse}td,th{border:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
.contract{border:1px solid var(--line);border-radius:6px;padding:6px 10px;margin:8px 0}
.contract.status-passed h3 .st{color:var(--ok)}.contract h3 .st{color:var(--bad)}
.check.status-passed td.st{color:var(--ok)}.check.status-failed td.st{color:var(--bad);font-weight:700}
.check.status-inconclusive td.st{color:var(--warn);font-weight:700}
.filters{margin:6px 0;display:flex;gap:12px;align-items:center}
#timeline .row{display:grid;grid-template-columns:4em 9em minmax(14em,2fr) minmax(8em,1fr) 11em 4em 6em minmax(10em,3fr);
 border-bottom:1px solid var(--line);content-visibility:auto;contain-intrinsic-size:auto 30px}
#timeline .row>div{padding:3px 6px;overflow:hidden;text-overflow:ellipsis}
#timeline .head{font-weight:700;background:var(--bg2);position:sticky;top:0;z-index:1;content-visibility:visible}
#timeline .num{text-align:right}
.badge{display:inline-block;padding:0 6px;border-radius:10px;background:#eaeef2;font-size:12px}
.status-ok .badge,.status-replayed .badge{background:#dafbe1}
.row.input-error{background:#fff8c5}.row.harness-error{background:#ffebe9}.row.harness-error .badge,.row.harness-error .code{background:var(--bad);color:#fff}
.row.side-effect{background:#ddf4ff;border-left:4px solid #0969da}
.row.side-effect .label{font-weight:700;color:#0969da;margin-left:4px}
.row.side-effect.forwarded .label{color:var(--bad)}
.row.agent-event{background:#fbefff}.row.agent-event .badge{background:#8250df;color:#fff}
.hidden{display:none!important}
summary{cursor:pointer;color:#0969da}
"#;

const SCRIPT: &str = r#"
(function(){
 var rows=null;function all(){return rows||(rows=Array.prototype.slice.call(document.querySelectorAll('#timeline .row[data-seq]')));}
 var q=document.getElementById('filter'),p=document.getElementById('problems');
 function apply(){var t=(q.value||'').toLowerCase(),only=p.checked,n=0;all().forEach(function(r){
  var show=(!only||r.classList.contains('problem'))&&(!t||r.textContent.toLowerCase().indexOf(t)>=0);
  r.classList.toggle('hidden',!show);if(show)n++;});document.getElementById('shown').textContent=n;}
 if(q){q.addEventListener('input',apply);p.addEventListener('change',apply);}
 function openAll(v){document.querySelectorAll('#timeline details').forEach(function(d){d.open=v;});}
 var e=document.getElementById('expand'),c=document.getElementById('collapse');
 if(e){e.addEventListener('click',function(){openAll(true)});c.addEventListener('click',function(){openAll(false)});}
 window.addEventListener('load',function(){document.body.setAttribute('data-load-ms',String(Math.round(performance.now())));});
})();
"#;

/// The page.
pub fn render(env: &Value) -> String {
    let id = str_at(env, "attempt_id");
    let judged = crate::evidence::Verdict::from_envelope(env);
    let pass = judged.as_ref().is_ok_and(|v| v.passed());
    let verdict = if judged.is_ok() {
        str_at(env, "verdict")
    } else {
        ""
    };
    let rows = timeline(env);
    let mut h = String::with_capacity(4096 + rows.len() * 700);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    h.push_str(&format!(
        "<title>understudy · {} · {}</title><style>{CSS}</style></head><body>\n",
        esc(id),
        if pass { "PASS" } else { "FAIL" }
    ));

    // Header
    h.push_str("<header>\n");
    h.push_str(&format!(
        "<h1>understudy attempt <code>{}</code></h1>\n",
        esc(id)
    ));
    h.push_str(&format!(
        "<p id=\"verdict\" class=\"verdict {}\">Verdict: {}</p>\n",
        if pass { "pass" } else { "fail" },
        if pass {
            "PASS"
        } else if verdict.is_empty() {
            "UNKNOWN"
        } else {
            "FAIL"
        }
    ));
    let rs = reasons(env);
    if !rs.is_empty() {
        h.push_str("<ul id=\"verdict-reasons\">");
        for r in &rs {
            h.push_str(&format!(
                "<li data-code=\"{}\"><code>{}</code> {}</li>",
                esc(&r.code),
                esc(&r.code),
                esc(&r.message)
            ));
        }
        h.push_str("</ul>\n");
    }
    let calls = env
        .get("tool_events")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let events = env
        .get("events")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let count = |k: &str| env.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    h.push_str("<dl class=\"meta\">");
    let mut meta = |k: &str, v: String| h.push_str(&format!("<dt>{k}</dt><dd>{v}</dd>"));
    meta(
        "test run",
        env.get("test_run_id")
            .and_then(Value::as_str)
            .map_or_else(|| "—".to_string(), |s| format!("<code>{}</code>", esc(s))),
    );
    meta("started", esc(str_at(env, "started_at")));
    meta(
        "ended",
        env.get("ended_at")
            .and_then(Value::as_str)
            .map_or_else(|| "still running".to_string(), esc),
    );
    meta(
        "counts",
        format!(
            "<span id=\"count-calls\">{calls}</span> tool calls, <span id=\"count-events\">{events}</span> agent events, {} input errors, {} harness errors, {} blocked/simulated side effects",
            count("tool_input_errors"),
            count("harness_errors"),
            count("blocked_side_effects")
        ),
    );
    // A page of a longer timeline says which part it shows: the verdict above is over all
    // of it, the entries below are not.
    if let Some(page) = env.get("page").filter(|p| !p.is_null()) {
        let after = page.get("after").and_then(Value::as_u64).unwrap_or(0);
        let last = env
            .get("last_sequence")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let shown = match page.get("next_after").and_then(Value::as_u64) {
            Some(n) => format!("entries #{} to #{n} of {last}: the rest is not in this report (the verdict is over all {last})", after + 1),
            None if after == 0 => format!("all {last} entries"),
            None => format!("entries after #{after} of {last}"),
        };
        meta("shown", format!("<span id=\"page\">{shown}</span>"));
    }
    if let Some(run) = env.get("test_run") {
        let cmd = run
            .get("command")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        meta("command", format!("<code>{}</code>", esc(&cmd)));
        let code = run.get("exit_code").and_then(Value::as_i64);
        let reason = str_at(run, "reason");
        meta(
            "command result",
            format!(
                "<span id=\"command-result\">{}</span>",
                esc(&if reason.is_empty() {
                    format!("exit code {}", code.map_or("?".into(), |c| c.to_string()))
                } else {
                    reason.to_string()
                })
            ),
        );
    }
    h.push_str("</dl>\n");
    if let Some(pins) = env.get("pins").and_then(Value::as_object) {
        h.push_str(&format!(
            "<details id=\"pins\"><summary>Pins ({})</summary><table><tr><th>operation</th><th>revision</th><th>contract hash</th></tr>",
            pins.len()
        ));
        for (op, pin) in pins {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                esc(op),
                pin.get("revision")
                    .map(Value::to_string)
                    .unwrap_or_default(),
                esc(str_at(pin, "contract_hash"))
            ));
        }
        h.push_str("</table></details>\n");
    }
    h.push_str("</header>\n");

    // Contracts
    let contracts = contract_results(env);
    h.push_str("<section id=\"contracts\"><h2>Contract results</h2>\n");
    if contracts.is_empty() {
        h.push_str("<p class=\"none\">No contracts were pinned for this attempt.</p>\n");
    }
    for c in contracts {
        let st = str_at(c, "status");
        h.push_str(&format!(
            "<div class=\"contract status-{}\" data-contract=\"{}\"><h3><code>{}</code> — <span class=\"st\">{}</span> <small>({}, policy {}, {})</small></h3>",
            class(st),
            esc(str_at(c, "contract_id")),
            esc(str_at(c, "contract_id")),
            esc(st),
            esc(str_at(c, "risk")),
            esc(str_at(c, "policy_version")),
            esc(str_at(c, "contract_hash"))
        ));
        h.push_str(
            "<table class=\"checks\"><tr><th>status</th><th>check</th><th>evidence</th></tr>",
        );
        for ch in c
            .get("checks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let cs = str_at(ch, "status");
            h.push_str(&format!(
                "<tr class=\"check status-{}\" data-check=\"{}\"><td class=\"st\">{}</td><td><code>{}</code></td><td>{}</td></tr>",
                class(cs),
                esc(str_at(ch, "id")),
                esc(cs),
                esc(str_at(ch, "id")),
                esc(str_at(ch, "evidence"))
            ));
        }
        h.push_str("</table></div>\n");
    }
    h.push_str("</section>\n");

    // Timeline
    h.push_str(&format!(
        "<section id=\"timeline-section\"><h2>Timeline ({} rows: {calls} tool calls, {events} agent events)</h2>\n",
        rows.len()
    ));
    h.push_str("<div class=\"filters\"><label>filter <input id=\"filter\" type=\"search\" placeholder=\"operation, status, text…\"></label><label><input id=\"problems\" type=\"checkbox\"> only problems</label><button id=\"expand\" type=\"button\">expand all</button><button id=\"collapse\" type=\"button\">collapse all</button><span><span id=\"shown\">");
    h.push_str(&rows.len().to_string());
    h.push_str("</span> shown</span></div>\n<div id=\"timeline\">\n<div class=\"row head\"><div class=\"num\">seq</div><div>time</div><div>operation / event</div><div>variant / rule</div><div>result</div><div class=\"num\">http</div><div class=\"num\">latency</div><div>details</div></div>\n");
    for r in &rows {
        match r {
            Row::Call(e) => call_row(&mut h, e),
            Row::Event(e) => event_row(&mut h, e),
        }
    }
    h.push_str("</div></section>\n");
    h.push_str(&format!("<script>{SCRIPT}</script>\n</body></html>\n"));
    h
}

fn call_row(h: &mut String, e: &Value) {
    let status = str_at(e, "result_status");
    let is_write = e.get("is_write").and_then(Value::as_bool).unwrap_or(false);
    let source = str_at(e, "source");
    let mut classes = vec!["row", "call"];
    let st_class = format!("status-{}", class(status));
    classes.push(&st_class);
    let label = match status {
        "blocked" => Some(if is_write { "blocked write" } else { "blocked" }),
        "simulated" => Some(if is_write {
            "simulated write"
        } else {
            "simulated"
        }),
        "forwarded" if is_write => Some("forwarded write"),
        _ if source == "tool_test" && is_write => Some("tagged write"),
        _ => None,
    };
    if label.is_some() {
        classes.push("side-effect");
        classes.push(match status {
            "blocked" => "blocked",
            "simulated" => "simulated",
            "forwarded" => "forwarded",
            _ => "tagged",
        });
    }
    // An error, or a status this report does not know.
    let problem = !matches!(
        status,
        "ok" | "blocked" | "simulated" | "forwarded" | "replayed"
    );
    match status {
        "harness_error" => classes.push("harness-error"),
        "input_error" => classes.push("input-error"),
        _ => {}
    }
    if problem || label.is_some() {
        classes.push("problem");
    }
    if is_write {
        classes.push("write");
    }
    let seq = e.get("sequence").map(Value::to_string).unwrap_or_default();
    let op = format!(
        "{}/{}",
        str_at(e, "integration"),
        e.get("operation_id")
            .and_then(Value::as_str)
            .unwrap_or("(unmatched)")
    );
    let mut vr = e
        .get("variant")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(rule) = e.get("rule").filter(|r| !r.is_null()) {
        vr = format!("{vr} · rule {rule}");
    }
    let code = e
        .get("error")
        .and_then(|er| er.get("code"))
        .and_then(Value::as_str);
    h.push_str(&format!(
        "<div class=\"{}\" data-seq=\"{}\" data-kind=\"call\"><div class=\"num\">{}</div>",
        classes.join(" "),
        esc(&seq),
        esc(&seq)
    ));
    time_cell(h, e);
    h.push_str(&format!(
        "<div title=\"{}\">{}{}</div><div>{}</div><div><span class=\"badge\">{}</span>",
        esc(&op),
        esc(&op),
        if source == "upstream" {
            " <small>(upstream)</small>"
        } else {
            ""
        },
        esc(&vr),
        esc(if status.is_empty() { "?" } else { status })
    ));
    if let Some(l) = label {
        h.push_str(&format!("<span class=\"label\">{l}</span>"));
    }
    if let Some(c) = code.filter(|_| status == "harness_error") {
        h.push_str(&format!(" <code class=\"code\">{}</code>", esc(c)));
    }
    let lat = e
        .get("latency_ms")
        .and_then(Value::as_f64)
        .map_or(String::new(), |l| format!("{l:.1} ms"));
    h.push_str(&format!(
        "</div><div class=\"num\">{}</div><div class=\"num\">{lat}</div><div><details><summary>arguments &amp; result</summary>",
        e.get("http_status").map(Value::to_string).unwrap_or_default()
    ));
    json_block(h, "arguments", e.get("arguments"));
    json_block(h, "result", e.get("result"));
    if let Some(er) = e.get("error").filter(|v| !v.is_null()) {
        json_block(h, "error", Some(er));
    }
    if let Some(t) = e.get("trace_id").and_then(Value::as_str) {
        h.push_str(&format!("<div>trace <code>{}</code></div>", esc(t)));
    }
    h.push_str("</details></div></div>\n");
}

fn event_row(h: &mut String, e: &Value) {
    let seq = e.get("sequence").map(Value::to_string).unwrap_or_default();
    let name = str_at(e, "name");
    h.push_str(&format!(
        "<div class=\"row agent-event\" data-seq=\"{}\" data-kind=\"event\"><div class=\"num\">{}</div>",
        esc(&seq),
        esc(&seq)
    ));
    time_cell(h, e);
    h.push_str(&format!(
        "<div title=\"{}\">event: {}</div><div>{}</div><div><span class=\"badge\">event</span></div><div class=\"num\"></div><div class=\"num\"></div><div>",
        esc(name),
        esc(name),
        esc(str_at(e, "kind"))
    ));
    let text = str_at(e, "text");
    let data = e.get("data").filter(|d| !d.is_null());
    if !text.is_empty() || data.is_some() {
        h.push_str("<details><summary>");
        if text.is_empty() {
            h.push_str("data");
        } else {
            h.push_str(&esc(&cap_chars(text, 80)));
        }
        h.push_str("</summary>");
        if !text.is_empty() {
            h.push_str(&format!("<pre>{}</pre>", esc(&cap_chars(text, JSON_CAP))));
        }
        json_block(h, "data", data);
        h.push_str("</details>");
    }
    h.push_str("</div></div>\n");
}

fn time_cell(h: &mut String, e: &Value) {
    let ts = e
        .get("timestamp")
        .or_else(|| e.get("received_at"))
        .and_then(Value::as_str)
        .unwrap_or("");
    // `2026-01-01T10:05:00.123Z` → `10:05:00.123`
    let short = ts
        .split_once('T')
        .map(|(_, t)| t.trim_end_matches('Z'))
        .unwrap_or(ts);
    h.push_str(&format!(
        "<div title=\"{}\">{}</div>",
        esc(ts),
        esc(&cap_chars(short, 15))
    ));
}

fn json_block(h: &mut String, label: &str, v: Option<&Value>) {
    let Some(v) = v else { return };
    let s = serde_json::to_string_pretty(v).unwrap_or_default();
    let shown = if s.len() > JSON_CAP {
        let mut end = JSON_CAP;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!(
            "{}\n… truncated: {} of {} bytes shown (the full value is in the JSON evidence)",
            &s[..end],
            end,
            s.len()
        )
    } else {
        s
    };
    h.push_str(&format!(
        "<div>{label}</div><pre class=\"{label}\">{}</pre>",
        esc(&shown)
    ));
}

fn cap_chars(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// A status as a CSS class fragment: `[a-z0-9_-]`, anything else as `-`.
fn class(s: &str) -> String {
    if s.is_empty() {
        return "unknown".into();
    }
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// HTML text and attribute escaping.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(seq: u64, status: &str, write: bool) -> Value {
        json!({"sequence": seq, "integration": "crm", "operation_id": "book", "variant": "ok",
               "rule": null, "is_write": write, "arguments": {"a": "<script>x</script>"},
               "result": {"status": 200}, "result_status": status, "http_status": 200,
               "latency_ms": 0.4, "source": "mock", "timestamp": "2026-01-01T10:05:00.123Z"})
    }

    #[test]
    fn rows_are_marked_and_escaped() {
        let env = json!({"attempt_id": "a1", "verdict": "fail",
            "verdict_reasons": ["harness error at sequence 3: no_mock: boom"],
            "tool_events": [call(1, "ok", false), call(2, "blocked", true),
                            {"sequence": 3, "integration": "crm", "operation_id": null, "result_status": "harness_error",
                             "error": {"code": "no_mock"}, "is_write": false}],
            "events": [{"sequence": 4, "name": "told_caller_booked", "kind": "agent_message", "text": "done"}]});
        let h = render(&env);
        assert_eq!(h.matches(" data-seq=").count(), 4);
        assert!(h.contains("Verdict: FAIL"));
        assert!(h.contains("<span class=\"label\">blocked write</span>"));
        assert!(
            h.contains("row call status-harness_error harness-error problem"),
            "{h}"
        );
        assert!(h.contains("event: told_caller_booked"));
        assert!(!h.contains("<script>x"), "arguments are escaped");
        assert!(
            !h.contains("http://") && !h.contains("https://"),
            "no network references"
        );
    }

    #[test]
    fn reasons_are_listed_when_there_are_some_and_a_page_says_what_it_shows() {
        let fail = json!({"attempt_id": "a", "verdict": "fail",
            "verdict_reasons": [{"code": "harness_error", "message": "harness error at sequence 3", "sequence": 3}]});
        let h = render(&fail);
        assert!(
            h.contains("<ul id=\"verdict-reasons\"><li data-code=\"harness_error\">"),
            "{h}"
        );
        assert!(!h.contains("id=\"page\""), "no page, no page line");
        let pass = json!({"attempt_id": "a", "verdict": "pass", "verdict_reasons": [], "last_sequence": 40});
        assert!(!render(&pass).contains("<ul id=\"verdict-reasons\">"));
        let page = |p: Value| {
            let mut e = pass.clone();
            e["page"] = p;
            render(&e)
        };
        let first = page(json!({"after": 0, "next_after": 10}));
        assert!(
            first.contains(
                "<span id=\"page\">entries #1 to #10 of 40: the rest is not in this report"
            ),
            "{first}"
        );
        assert!(page(json!({"after": 0, "next_after": null}))
            .contains("<span id=\"page\">all 40 entries</span>"));
        assert!(page(json!({"after": 30, "next_after": null}))
            .contains("<span id=\"page\">entries after #30 of 40</span>"));
        assert!(!page(Value::Null).contains("id=\"page\""));
    }

    #[test]
    fn json_is_capped_per_value() {
        let big = "x".repeat(10 * JSON_CAP);
        let mut e = call(1, "ok", false);
        e["result"] = json!({"blob": big});
        let h = render(&json!({"attempt_id": "a", "verdict": "pass", "tool_events": [e]}));
        assert!(h.len() < 4 * JSON_CAP + 12_000, "{}", h.len());
        assert!(h.contains("truncated"));
    }
    fn call_html(e: &Value) -> String {
        let mut h = String::new();
        call_row(&mut h, e);
        h
    }

    /// The row's `class` attribute and its side-effect label, if any.
    fn marks(h: &str) -> (String, Option<String>) {
        let class = h
            .split("class=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let label = h
            .split_once("<span class=\"label\">")
            .map(|(_, r)| r.split('<').next().unwrap().to_string());
        (class.to_string(), label)
    }

    #[test]
    fn a_call_rows_classes_and_label_follow_its_status_write_and_source() {
        for (status, write, source, class, label) in [
            ("ok", false, "mock", "row call status-ok", None),
            ("ok", true, "mock", "row call status-ok write", None),
            ("ok", false, "tool_test", "row call status-ok", None),
            (
                "ok",
                true,
                "tool_test",
                "row call status-ok side-effect tagged problem write",
                Some("tagged write"),
            ),
            ("replayed", false, "mock", "row call status-replayed", None),
            (
                "blocked",
                false,
                "mock",
                "row call status-blocked side-effect blocked problem",
                Some("blocked"),
            ),
            (
                "blocked",
                true,
                "mock",
                "row call status-blocked side-effect blocked problem write",
                Some("blocked write"),
            ),
            (
                "simulated",
                false,
                "mock",
                "row call status-simulated side-effect simulated problem",
                Some("simulated"),
            ),
            (
                "simulated",
                true,
                "mock",
                "row call status-simulated side-effect simulated problem write",
                Some("simulated write"),
            ),
            (
                "forwarded",
                false,
                "upstream",
                "row call status-forwarded",
                None,
            ),
            (
                "forwarded",
                true,
                "upstream",
                "row call status-forwarded side-effect forwarded problem write",
                Some("forwarded write"),
            ),
            (
                "harness_error",
                false,
                "mock",
                "row call status-harness_error harness-error problem",
                None,
            ),
            (
                "input_error",
                true,
                "mock",
                "row call status-input_error input-error problem write",
                None,
            ),
            ("Odd!", false, "mock", "row call status-odd- problem", None),
        ] {
            let mut e = call(1, status, write);
            e["source"] = json!(source);
            let (c, l) = marks(&call_html(&e));
            assert_eq!(
                (c.as_str(), l.as_deref()),
                (class, label),
                "{status} write={write} {source}"
            );
        }
        assert!(call_html(&json!({"source": "upstream"})).contains(" <small>(upstream)</small>"));
        assert!(!call_html(&call(1, "ok", false)).contains("(upstream)"));
    }

    #[test]
    fn a_call_row_shows_its_rule_error_code_and_trace_only_when_it_has_them() {
        let plain = call_html(&call(1, "ok", false));
        assert!(plain.contains("<div>ok</div>"), "{plain}");
        assert!(!plain.contains("<div>error</div>") && !plain.contains("trace <code>"));
        let mut e = call(1, "harness_error", false);
        e["rule"] = json!(2);
        e["error"] = json!({"code": "no_mock"});
        e["trace_id"] = json!("abc");
        let h = call_html(&e);
        assert!(h.contains("<div>ok · rule 2</div>"), "{h}");
        assert!(h.contains(" <code class=\"code\">no_mock</code>"), "{h}");
        assert!(h.contains("<div>error</div><pre class=\"error\">"), "{h}");
        assert!(h.contains("<div>trace <code>abc</code></div>"), "{h}");
        // The code is shown for a harness error only; the error block whatever the status.
        e["result_status"] = json!("input_error");
        let h = call_html(&e);
        assert!(!h.contains("class=\"code\""), "{h}");
        assert!(h.contains("<pre class=\"error\">"), "{h}");
    }

    #[test]
    fn an_event_row_shows_its_time_text_and_data_when_it_has_them() {
        let row = |e: Value| {
            let mut h = String::new();
            event_row(&mut h, &e);
            h
        };
        let bare = row(json!({"sequence": 2, "name": "n", "kind": "checkpoint",
            "timestamp": "2026-01-01T10:05:00.123456Z"}));
        assert!(
            bare.contains("<div title=\"2026-01-01T10:05:00.123456Z\">10:05:00.123456</div>"),
            "{bare}"
        );
        assert!(!bare.contains("<details>"), "{bare}");
        let text = "t".repeat(100);
        let h = row(json!({"sequence": 2, "name": "n", "text": text}));
        assert!(
            h.contains(&format!("<summary>{}…</summary>", "t".repeat(80))),
            "{h}"
        );
        assert!(h.contains(&format!("<pre>{text}</pre>")), "{h}");
        assert!(!h.contains("<div>data</div>"), "{h}");
        let h = row(json!({"sequence": 2, "name": "n", "data": {"k": 1}}));
        assert!(
            h.contains("<details><summary>data</summary><div>data</div><pre class=\"data\">"),
            "{h}"
        );
        assert!(!h.contains("<pre>"), "{h}");
        let h = row(json!({"sequence": 2, "name": "n", "text": "hi", "data": {"k": 1}}));
        assert!(
            h.contains("<summary>hi</summary><pre>hi</pre><div>data</div>"),
            "{h}"
        );
    }

    #[test]
    fn a_json_block_is_cut_past_the_cap_on_a_character_boundary() {
        let block = |v: Value| {
            let mut h = String::new();
            json_block(&mut h, "result", Some(&v));
            h
        };
        // A string's pretty JSON is its quoted text: JSON_CAP bytes exactly are shown whole.
        let exact = "x".repeat(JSON_CAP - 2);
        assert!(!block(json!(exact)).contains("truncated"));
        let over = "x".repeat(JSON_CAP - 1);
        assert!(block(json!(over))
            .contains(&format!("truncated: {JSON_CAP} of {} bytes", JSON_CAP + 1)));
        // A 3-byte character across the cap: the cut steps back to its start.
        let wide = format!("{}€€", "x".repeat(JSON_CAP - 3));
        let h = block(json!(wide));
        assert!(
            h.contains(&format!(
                "truncated: {} of {} bytes",
                JSON_CAP - 2,
                JSON_CAP + 5
            )),
            "{h}"
        );
        assert!(
            h.contains(&format!("&quot;{}\n…", "x".repeat(JSON_CAP - 3))),
            "{h}"
        );
    }
}
