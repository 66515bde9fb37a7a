//! The stateless era of [`McpEndpoint`] (2026-07-28): the `_meta` protocol version and
//! client capabilities every request carries, and the mirrored headers (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) checked against the body (rules in the module doc
//! of [`super`]).

use super::*;

impl McpEndpoint {
    pub(super) async fn stateless<B: McpBackend + ?Sized>(
        &self,
        msg: Message,
        headers: &HeaderMap,
        accepts: Accepts,
        backend: &B,
    ) -> McpResponse {
        let p = profile();
        let (id, method, params) = match msg {
            Message::Notification { .. } => return accepted(None),
            Message::Response(_) => {
                return refuse(
                    400,
                    INVALID_REQUEST,
                    "Invalid Request: clients must not POST JSON-RPC responses in protocol version 2026-07-28",
                    &Value::Null,
                )
            }
            Message::Request { id, method, params } => (id, method, params),
        };
        let framing = Framing {
            accepts,
            session_id: None,
            priming: false,
            event_ids: false,
        };
        let fail = |code: i64, message: &str, data: Option<Value>| {
            self.reply(
                vec![Answer::err(&id, code, message, data, 400)],
                framing.clone(),
                false,
            )
        };
        let meta = meta(params.as_ref());
        let Some(version) = meta
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str)
        else {
            return fail(
                INVALID_PARAMS,
                &format!(
                    "Invalid params: params._meta must carry \"{META_PROTOCOL_VERSION}\" (a string) and \"{META_CLIENT_CAPABILITIES}\" (an object)"
                ),
                None,
            );
        };
        match one(headers, HEADER_PROTOCOL_VERSION) {
            One::Absent => {
                return fail(
                    HEADER_MISMATCH,
                    "Header mismatch: the MCP-Protocol-Version header is required",
                    None,
                )
            }
            One::Bad => {
                return fail(
                    HEADER_MISMATCH,
                    "Header mismatch: MCP-Protocol-Version must appear once, as visible ASCII",
                    None,
                )
            }
            One::Value(v) if v != version => {
                return fail(
                    HEADER_MISMATCH,
                    &format!(
                        "Header mismatch: MCP-Protocol-Version header value '{v}' does not match body value '{version}'"
                    ),
                    None,
                )
            }
            One::Value(_) => {}
        }
        if !p.is_stateless_version(version) {
            return fail(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                Some(json!({"supported": p.all_versions(), "requested": version})),
            );
        }
        if !meta
            .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
            .is_some_and(Value::is_object)
        {
            return fail(
                INVALID_PARAMS,
                &format!("Invalid params: params._meta must carry \"{META_CLIENT_CAPABILITIES}\" (an object)"),
                None,
            );
        }
        if let Err(problem) = check_mirrored(headers, &method, params.as_ref(), backend) {
            return fail(
                HEADER_MISMATCH,
                &format!("Header mismatch: {problem}"),
                None,
            );
        }
        let capabilities = meta
            .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let asker = if mrtr::SUPPORTED.contains(&method.as_str()) {
            match mrtr::MrtrAsker::new(
                self.state_key,
                self.ask_timeout,
                &method,
                params.as_ref(),
                capabilities,
            ) {
                Ok(a) => Some(a),
                Err(message) => {
                    let a = Answer::err(&id, INVALID_PARAMS, &message, None, 200);
                    return self.reply(vec![a], framing, false);
                }
            }
        } else {
            None
        };
        let no_asker = ask::NoAsker(
            "input_required is only answered to tools/call, prompts/get and resources/read",
        );
        let asker: &dyn ask::Asker = match &asker {
            Some(a) => a,
            None => &no_asker,
        };
        let mut answer = self
            .dispatch(
                Req {
                    era: Era::Stateless,
                    session: None,
                    id: &id,
                    method: &method,
                    params: params.as_ref(),
                },
                backend,
                asker,
            )
            .await;
        if let Some(cap) = asker.missing_capability() {
            answer = Answer::err(
                &id,
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                &format!("Missing required client capability: {cap} (declare it in _meta \"{META_CLIENT_CAPABILITIES}\")"),
                Some(json!({"requiredCapabilities": {cap: {}}})),
                400,
            );
        }
        self.reply(vec![answer], framing, false)
    }
}

/// Check the mirrored 2026-07-28 headers against the body: `Mcp-Method`, `Mcp-Name`, and the
/// `Mcp-Param-*` of a listed tool's `x-mcp-header` annotations.
pub(super) fn check_mirrored<B: McpBackend + ?Sized>(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Map<String, Value>>,
    backend: &B,
) -> Result<(), String> {
    match one(headers, HEADER_METHOD) {
        One::Absent => return Err("the Mcp-Method header is required".into()),
        One::Bad => return Err("Mcp-Method must appear once, as visible ASCII".into()),
        One::Value(v) if v != method => {
            return Err(format!(
                "Mcp-Method header value '{v}' does not match body value '{method}'"
            ))
        }
        One::Value(_) => {}
    }
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(expected) = key
        .and_then(|k| params.and_then(|p| p.get(k)))
        .and_then(Value::as_str)
    {
        match one(headers, HEADER_NAME) {
            One::Absent => return Err(format!("the Mcp-Name header is required for {method}")),
            One::Bad => return Err("Mcp-Name must appear once, as visible ASCII".into()),
            One::Value(raw) => match http::decode_header_value(raw) {
                None => return Err("the Mcp-Name header is not valid Base64".into()),
                Some(d) if d != expected => {
                    return Err(format!(
                        "Mcp-Name header value '{d}' does not match body value '{expected}'"
                    ))
                }
                Some(_) => {}
            },
        }
    }
    if method != "tools/call" {
        return Ok(());
    }
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        return Ok(());
    };
    let Some(tool) = backend.tools().into_iter().find(|t| t.name == name) else {
        return Ok(());
    };
    let no_args = json!({});
    let args = params.and_then(|p| p.get("arguments")).unwrap_or(&no_args);
    for (path, suffix) in tools::param_headers(&tool.input_schema) {
        let header = format!("Mcp-Param-{suffix}");
        if HeaderName::from_bytes(header.as_bytes()).is_err() {
            continue; // an invalid annotation: conforming clients drop such a tool
        }
        let shown = path.join(".");
        let body = value_at(args, &path).and_then(tools::primitive_text);
        match (one(headers, &header), body) {
            (One::Absent, None) => {}
            (One::Bad, _) => return Err(format!("{header} must appear once, as visible ASCII")),
            (One::Value(_), None) => {
                return Err(format!(
                    "unexpected {header} header for absent or null argument `{shown}`"
                ))
            }
            (One::Absent, Some(_)) => {
                return Err(format!(
                    "the {header} header is required for argument `{shown}`"
                ))
            }
            (One::Value(raw), Some(expected)) => {
                let Some(decoded) = http::decode_header_value(raw) else {
                    return Err(format!("the {header} header is not valid Base64"));
                };
                let numeric_equal = value_at(args, &path)
                    .and_then(Value::as_f64)
                    .zip(decoded.trim().parse::<f64>().ok())
                    .is_some_and(|(a, b)| a == b);
                if decoded != expected && !numeric_equal {
                    return Err(format!(
                        "{header} header value '{decoded}' does not match body value '{expected}'"
                    ));
                }
            }
        }
    }
    Ok(())
}
