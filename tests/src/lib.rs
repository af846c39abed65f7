//! Cross-crate integration tests of hookline live in `tests/`: they use the library
//! crates together the way the binary and embedding services do.
