//! The session era of [`McpEndpoint`] (2025-03-26 to 2025-11-25): `initialize` and its
//! negotiation, `Mcp-Session-Id` and `MCP-Protocol-Version` on every later message, batches
//! where the version allows them, and `DELETE` ending a session (rules in the module doc of
//! [`super`]).

use super::*;

impl McpEndpoint {
    /// The `MCP-Protocol-Version` refusal of a GET or DELETE: 405 for a 2026-or-later version
    /// (no session there), 400 for an unsupported or unreadable one.
    fn session_method_refusal(headers: &HeaderMap) -> Option<McpResponse> {
        let p = profile();
        match one(headers, HEADER_PROTOCOL_VERSION) {
            One::Value(v) if p.is_modern_version(v) => Some(method_not_allowed("POST")),
            One::Value(v) if !p.is_session_version(v) => Some(refuse(
                400,
                TRANSPORT_ERROR,
                &unsupported_header_version(v),
                &Value::Null,
            )),
            One::Bad => Some(refuse(
                400,
                TRANSPORT_ERROR,
                "Bad Request: invalid MCP-Protocol-Version header",
                &Value::Null,
            )),
            _ => None,
        }
    }

    /// GET: the session's stream ([`listen`]): `Accept` must allow `text/event-stream`
    /// (406), and `Mcp-Session-Id` name a live session (400 / 404).
    pub(super) fn get(&self, headers: &HeaderMap) -> McpResponse {
        if let Some(r) = Self::session_method_refusal(headers) {
            return r;
        }
        if !accepts(headers).sse {
            return refuse(
                406,
                TRANSPORT_ERROR,
                "Not Acceptable: the GET stream is text/event-stream",
                &Value::Null,
            );
        }
        let (sid, version) = match self.session_of(headers, &Value::Null) {
            Ok(s) => s,
            Err(resp) => return resp,
        };
        let stream = self.streams.fetch_add(1, Ordering::Relaxed) + 1;
        let priming = self
            .session_framing(accepts(headers), sid.clone(), &version)
            .priming;
        self.listeners.open(&sid, stream, priming)
    }

    pub(super) fn delete(&self, headers: &HeaderMap) -> McpResponse {
        if let Some(r) = Self::session_method_refusal(headers) {
            return r;
        }
        match one(headers, HEADER_SESSION_ID) {
            One::Absent => refuse(
                400,
                TRANSPORT_ERROR,
                "Bad Request: Mcp-Session-Id header is required",
                &Value::Null,
            ),
            One::Bad => refuse(
                400,
                TRANSPORT_ERROR,
                "Bad Request: invalid Mcp-Session-Id header",
                &Value::Null,
            ),
            One::Value(id) => {
                if self.sessions.end(id) {
                    self.listeners.close(id);
                    self.extras.forget_session(id);
                    McpResponse {
                        status: 204,
                        headers: Vec::new(),
                        body: McpBody::Empty,
                    }
                } else {
                    refuse(404, SESSION_NOT_FOUND, "Session not found", &Value::Null)
                }
            }
        }
    }

    /// The live session a session-era message names, and the protocol version it speaks.
    pub(super) fn session_of(
        &self,
        headers: &HeaderMap,
        id: &Value,
    ) -> Result<(String, String), McpResponse> {
        let sid = match one(headers, HEADER_SESSION_ID) {
            One::Value(s) => s.to_string(),
            One::Absent => {
                return Err(refuse(
                    400,
                    TRANSPORT_ERROR,
                    "Bad Request: Mcp-Session-Id header is required",
                    id,
                ))
            }
            One::Bad => {
                return Err(refuse(
                    400,
                    TRANSPORT_ERROR,
                    "Bad Request: invalid Mcp-Session-Id header",
                    id,
                ))
            }
        };
        let Some(session) = self.sessions.get(&sid) else {
            return Err(refuse(404, SESSION_NOT_FOUND, "Session not found", id));
        };
        let version = match one(headers, HEADER_PROTOCOL_VERSION) {
            One::Absent => session.protocol_version,
            One::Value(v) if profile().is_session_version(v) => v.to_string(),
            One::Value(v) => {
                return Err(refuse(
                    400,
                    TRANSPORT_ERROR,
                    &unsupported_header_version(v),
                    id,
                ))
            }
            One::Bad => {
                return Err(refuse(
                    400,
                    TRANSPORT_ERROR,
                    "Bad Request: invalid MCP-Protocol-Version header",
                    id,
                ))
            }
        };
        Ok((sid, version))
    }

    pub(super) fn session_framing(&self, accepts: Accepts, sid: String, version: &str) -> Framing {
        Framing {
            accepts,
            session_id: Some(sid),
            priming: profile()
                .mcp
                .session_era
                .sse_priming
                .iter()
                .any(|v| v == version),
            event_ids: true,
        }
    }

    pub(super) async fn session_post<B: McpBackend + ?Sized>(
        &self,
        msg: Message,
        headers: &HeaderMap,
        accepts: Accepts,
        backend: &B,
        early: Option<ask::Early>,
    ) -> McpResponse {
        if let Message::Request { id, method, params } = &msg {
            if method == "initialize" {
                return self.initialize(id, params.as_ref(), accepts, backend);
            }
        }
        let (sid, version) = match self.session_of(headers, &msg.id()) {
            Ok(s) => s,
            Err(resp) => return resp,
        };
        match msg {
            Message::Notification { method, .. } => {
                if method == "notifications/initialized" {
                    self.sessions.mark_initialized(&sid);
                }
                accepted(Some(&sid))
            }
            Message::Response(reply) => {
                // The answer to a server-to-client request (`ask`); anything else is only
                // acknowledged.
                self.pending.resolve(&sid, &reply);
                accepted(Some(&sid))
            }
            Message::Request { id, method, params } => {
                let framing = self.session_framing(accepts, sid.clone(), &version);
                let capabilities = self
                    .sessions
                    .get(&sid)
                    .map(|s| s.client_capabilities)
                    .unwrap_or_else(|| json!({}));
                let asker =
                    ask::StreamAsker::new(self, sid.clone(), framing.clone(), capabilities, early);
                let answer = self
                    .dispatch(
                        Req::session(&sid, &id, &method, params.as_ref()),
                        backend,
                        &asker,
                    )
                    .await;
                if asker.is_open() {
                    // The head went out early: the rest of the answer goes on its stream.
                    let Answer {
                        message, before, ..
                    } = answer;
                    asker.finish(before.into_iter().chain(std::iter::once(message)));
                    return accepted(None);
                }
                self.reply(vec![answer], framing, false)
            }
        }
    }

    pub(super) fn initialize<B: McpBackend + ?Sized>(
        &self,
        id: &Value,
        params: Option<&Map<String, Value>>,
        accepts: Accepts,
        backend: &B,
    ) -> McpResponse {
        let p = profile();
        let no_session = Framing {
            accepts,
            session_id: None,
            priming: false,
            event_ids: true,
        };
        let Some(requested) = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
        else {
            let a = Answer::err(
                id,
                INVALID_PARAMS,
                "Invalid params: initialize needs params.protocolVersion (a string)",
                None,
                200,
            );
            return self.reply(vec![a], no_session, false);
        };
        let negotiated = if p.is_session_version(requested) {
            requested
        } else {
            p.latest_session_version()
        };
        let sid = match self.sessions.create(negotiated) {
            Ok(s) => s,
            Err(e) => {
                let a = Answer::err(
                    id,
                    INTERNAL_ERROR,
                    &format!("Internal error: no randomness for a session id: {e}"),
                    None,
                    500,
                );
                return self.reply(vec![a], no_session, false);
            }
        };
        let result = json!({
            "protocolVersion": negotiated,
            "capabilities": super::catalog::capabilities(&p.mcp.capabilities, backend, false),
            "serverInfo": {"name": backend.server_name(), "version": env!("CARGO_PKG_VERSION")},
        });
        let capabilities = params
            .and_then(|p| p.get("capabilities"))
            .filter(|c| c.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        self.sessions.set_client_capabilities(&sid, capabilities);
        let framing = self.session_framing(accepts, sid, negotiated);
        self.reply(vec![Answer::ok(id, result)], framing, false)
    }

    pub(super) async fn batch<B: McpBackend + ?Sized>(
        &self,
        items: &[Value],
        headers: &HeaderMap,
        accepts: Accepts,
        backend: &B,
    ) -> McpResponse {
        let p = profile();
        if items.is_empty() {
            return refuse(
                400,
                INVALID_REQUEST,
                "Invalid Request: empty batch",
                &Value::Null,
            );
        }
        if let One::Value(v) = one(headers, HEADER_PROTOCOL_VERSION) {
            if p.is_modern_version(v) {
                return refuse(
                    400,
                    INVALID_REQUEST,
                    &format!(
                        "Invalid Request: JSON-RPC batches are not supported in protocol version {v}"
                    ),
                    &Value::Null,
                );
            }
        }
        let (sid, version) = match self.session_of(headers, &Value::Null) {
            Ok(s) => s,
            Err(resp) => return resp,
        };
        if !p.mcp.session_era.batching.contains(&version) {
            return refuse(
                400,
                INVALID_REQUEST,
                &format!(
                    "Invalid Request: JSON-RPC batches are not supported in protocol version {version} (only in {})",
                    p.mcp.session_era.batching.join(", ")
                ),
                &Value::Null,
            );
        }
        let mut answers = Vec::new();
        for item in items {
            match classify(item) {
                Err(inv) => answers.push(Answer::err(
                    &inv.id,
                    INVALID_REQUEST,
                    &inv.message,
                    None,
                    200,
                )),
                Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                    answers.push(Answer::err(
                        &id,
                        INVALID_REQUEST,
                        "Invalid Request: initialize must not be part of a JSON-RPC batch",
                        None,
                        200,
                    ))
                }
                Ok(Message::Request { id, method, params }) => answers.push(
                    self.dispatch(
                        Req::session(&sid, &id, &method, params.as_ref()),
                        backend,
                        &ask::NoAsker("a request in a JSON-RPC batch cannot be streamed"),
                    )
                    .await,
                ),
                Ok(Message::Notification { method, .. }) => {
                    if method == "notifications/initialized" {
                        self.sessions.mark_initialized(&sid);
                    }
                }
                Ok(Message::Response(reply)) => {
                    self.pending.resolve(&sid, &reply);
                }
            }
        }
        if answers.is_empty() {
            return accepted(Some(&sid));
        }
        let framing = self.session_framing(accepts, sid, &version);
        self.reply(answers, framing, true)
    }
}
