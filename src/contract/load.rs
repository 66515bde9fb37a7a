//! Loading a directory of operation files.
