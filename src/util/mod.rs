//! Small helpers shared by modules that must not import each other: JSON depth bounds and
//! secret cutting ([`json`]), the one atomic file write ([`fs`]), the one secret scrubber
//! ([`scrub`]), the RFC 3339 clock format ([`time`]) and random ids and hex ([`ids`]).
//! Nothing here knows about calls, attempts or the wire.

pub mod fs;
pub mod ids;
pub mod json;
pub mod scrub;
pub mod time;
