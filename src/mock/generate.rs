//! Schema-derived draft mocks (`understudy generate`).
