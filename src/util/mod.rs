//! Small helpers shared by modules that must not import each other: JSON depth bounds and
//! secret cutting ([`json`]), the one atomic file write ([`fs`]), the one secret scrubber ([`scrub`]) and the RFC 3339 clock format ([`time`]).
//! Nothing here knows about calls, attempts or the wire.

pub mod fs;
pub mod json;
pub mod scrub;
pub mod time;
