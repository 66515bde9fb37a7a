//! The /_understudy/api routes.
