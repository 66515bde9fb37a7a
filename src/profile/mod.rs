//! Wire dialects.
