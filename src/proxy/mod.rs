//! Listener, routing and the call pipeline.
