//! `understudy check` (SPEC 3.4): every problem of an operation file, with file and JSON path.
