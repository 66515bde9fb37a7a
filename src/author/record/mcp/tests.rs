use super::*;

#[test]
fn arguments_in_asked_params_become_inputs() {
    let p = json!({"messages": [{"content": {"text": "hi there"}}], "maxTokens": 100, "x": "a"});
    let args = json!({"prompt": "hi there", "a1": "a", "a2": "a"});
    let t = with_inputs(&p, &args);
    assert_eq!(
        t["messages"][0]["content"]["text"],
        json!({"$input": "prompt"})
    );
    assert_eq!(t["x"], "a", "ambiguous: two arguments hold it");
    assert_eq!(t["maxTokens"], 100);
}

fn ex(at: u64, call: Call) -> Exchange {
    Exchange {
        integration: "t".into(),
        profile: crate::contract::ProfileKind::Mcp,
        matched_operation: None,
        at_ms: at,
        call,
    }
}

fn mcp(at: u64, method: &str, params: Value, result: Value) -> Exchange {
    ex(
        at,
        Call::Mcp(McpCall {
            method: method.into(),
            params,
            outcome: ToolOutcome::Result(result),
        }),
    )
}

fn asked(at: u64, why: &str, answer: Value, text: &str) -> Exchange {
    let params = json!({"message": why, "requestedSchema": {"type": "object"}});
    ex(
        at,
        Call::Tool(ToolCall {
            name: "confirm".into(),
            arguments: json!({"why": why}),
            outcome: ToolOutcome::Result(json!({"content": [{"type": "text", "text": text}]})),
            notifications: vec![
                json!({"method": "notifications/message", "params": {"level": "info", "data": "asking"}}),
                json!({"method": "notifications/progress", "params": {"progressToken": 7, "progress": 1, "total": 2}}),
                json!({"method": "notifications/resources/updated", "params": {"uri": "x://a"}}),
            ],
            asks: vec![super::super::Ask {
                method: "elicitation/create".into(),
                params,
                answer: Some(ToolOutcome::Result(answer)),
            }],
        }),
    )
}

#[test]
fn an_mcp_recording_drafts_resources_prompts_completions_notifications_and_asks() {
    let strict = json!({"type": "object", "properties": {"why": {"type": "string"}},
                            "required": ["why"], "additionalProperties": false});
    let list = vec![
        mcp(
            1,
            "tools/list",
            json!({}),
            json!({"tools": [
                {"name": "confirm", "description": "Ask first", "inputSchema": strict},
                {"name": "never_called", "description": "d", "inputSchema": {"type": "object"}}]}),
        ),
        mcp(
            2,
            "resources/templates/list",
            json!({}),
            json!({"resourceTemplates": [
                {"name": "doc", "uriTemplate": "x://docs/{id}", "mimeType": "text/plain"}]}),
        ),
        mcp(
            3,
            "resources/read",
            json!({"uri": "x://docs/7"}),
            json!({"contents": [{"uri": "x://docs/7", "text": "seven"}]}),
        ),
        mcp(
            4,
            "prompts/list",
            json!({}),
            json!({"prompts": [
                {"name": "greet", "description": "Hi", "arguments": [{"name": "who", "required": true}]}]}),
        ),
        mcp(
            5,
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "Ada"}}),
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Hi Ada"}}]}),
        ),
        mcp(
            6,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"},
                "argument": {"name": "who", "value": "A"}}),
            json!({"completion": {"values": ["Ada", "Alan"]}}),
        ),
        asked(
            7,
            "Sure?",
            json!({"action": "accept", "content": {"ok": true}}),
            "accepted",
        ),
        asked(8, "Sure?", json!({"action": "decline"}), "declined"),
    ];
    let set = super::super::drafts(
        &list,
        &[],
        crate::contract::ProfileKind::Mcp,
        &Default::default(),
    );
    for f in &set.files {
        assert!(
            f.problems.is_empty(),
            "{}: {:?}",
            f.operation_id,
            f.problems
        );
    }
    let file = |id: &str| {
        set.files
            .iter()
            .find(|f| f.operation_id == id)
            .unwrap_or_else(|| panic!("{id}: {:?}", set.notes))
    };
    let confirm = file("confirm");
    assert_eq!(*confirm.op.input_schema, strict, "the listed contract");
    let v = &confirm.op.mock.as_ref().unwrap()["variants"]["ok"];
    assert_eq!(
        v["ask_client"]["params"]["message"],
        json!({"$input": "why"})
    );
    assert_eq!(
        v["notifications"],
        json!([{"log": {"level": "info", "data": "asking"}},
            {"progress": {"progress": 1, "total": 2}}])
    );
    assert_eq!(v["result"]["content"][0]["text"], "accepted");
    let rule = &v["rules"][0];
    assert_eq!(rule["when"][0]["source"], "response");
    assert_eq!(rule["when"][0]["path"], "action");
    assert_eq!(rule["when"][0]["value"], "decline");
    assert_eq!(rule["result"]["content"][0]["text"], "declined");
    assert!(
        set.notes
            .iter()
            .any(|n| n.contains("notifications/resources/updated")),
        "{:?}",
        set.notes
    );
    assert!(file("never_called").op.mock.is_none());

    let doc = file("doc");
    let (kind, written) = doc.extra.as_ref().expect("a resource file");
    assert_eq!(*kind, ExtraKind::Resource);
    assert_eq!(doc.rel_path(), Path::new("resources/doc.json"));
    assert_eq!(written["uri_template"], "x://docs/{id}");
    assert_eq!(written["mock"]["examples"][0]["input"], json!({"id": "7"}));
    assert_eq!(
        written["mock"]["variants"]["ok"]["result"][0]["text"],
        "seven"
    );
    let greet = file("greet");
    let (kind, written) = greet.extra.as_ref().expect("a prompt file");
    assert_eq!(*kind, ExtraKind::Prompt);
    assert_eq!(written["completions"], json!({"who": ["Ada", "Alan"]}));
    assert_eq!(
        written["arguments"],
        json!([{"name": "who", "required": true}])
    );
    assert_eq!(
        written["mock"]["examples"][0]["input"],
        json!({"who": "Ada"})
    );
}

#[test]
fn calls_that_cannot_replay_are_noted_and_left_out() {
    let mut no_answer = asked(1, "Sure?", json!({}), "x");
    if let Call::Tool(t) = &mut no_answer.call {
        t.asks[0].answer = None;
    }
    let mut twice = asked(2, "Again?", json!({"action": "accept"}), "y");
    if let Call::Tool(t) = &mut twice.call {
        t.asks.push(t.asks[0].clone());
    }
    let mrtr = ex(
        3,
        Call::Tool(ToolCall {
            name: "later".into(),
            arguments: json!({}),
            outcome: ToolOutcome::Result(
                json!({"resultType": "input_required", "inputRequests": {}}),
            ),
            notifications: vec![],
            asks: vec![],
        }),
    );
    let set = super::super::drafts(
        &[no_answer, twice, mrtr],
        &[],
        crate::contract::ProfileKind::Mcp,
        &Default::default(),
    );
    assert!(
        set.files.is_empty(),
        "{:?}",
        set.files
            .iter()
            .map(|f| &f.operation_id)
            .collect::<Vec<_>>()
    );
    for what in [
        "got no answer",
        "asked the client 2 times",
        "input_required",
    ] {
        assert!(
            set.notes.iter().any(|n| n.contains(what)),
            "{what}: {:?}",
            set.notes
        );
    }
}

#[test]
fn a_secret_in_the_clients_answer_never_reaches_a_draft() {
    let answer = json!({"action": "accept", "content": {"password": "hunter2-very-secret"}});
    let call = asked(1, "Log in?", answer, "ok");
    let set = super::super::drafts(
        &[call],
        &[],
        crate::contract::ProfileKind::Mcp,
        &Default::default(),
    );
    let text: String = set.files.iter().map(DraftFile::to_json_pretty).collect();
    assert!(text.contains("ask_client"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn slugs() {
    assert_eq!(slug("test://Static Text/a"), "test-static-text-a");
    assert_eq!(slug("://"), "resource");
}
