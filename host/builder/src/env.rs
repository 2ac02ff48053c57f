//! The one way the builder (and the build scripts that use it) read the environment.
//!
//! A build script is re-run only when cargo knows what it depends on, so every variable read
//! here is followed by its `cargo:rerun-if-env-changed` line; reading through these functions is
//! what keeps a new variable from being forgotten. Inside a build script (cargo sets `OUT_DIR`)
//! the line is printed at the moment of reading, so only the variables a build actually
//! consulted become dependencies (the ptxas search stops at the first hit, and so do its reads).
//!
//! Variables cargo sets for every build-script run (`OUT_DIR`, `CARGO_MANIFEST_DIR`, `CARGO`,
//! `RUSTC`) are read with `std::env` directly: they are inputs cargo already tracks.

use std::ffi::OsString;

/// Reads `name` and, inside a build script, declares it a dependency.
pub fn var_os(name: &str) -> Option<OsString> {
    if std::env::var_os("OUT_DIR").is_some() {
        println!("cargo:rerun-if-env-changed={name}");
    }
    std::env::var_os(name)
}

/// [`var_os`] as UTF-8 (`None` when unset or not Unicode).
pub fn var(name: &str) -> Option<String> {
    var_os(name).and_then(|v| v.into_string().ok())
}

/// True when `name` is `1` (the builder's flag convention: `WARPFORGE_DENY_SPILLS=1`).
pub fn flag(name: &str) -> bool {
    var(name).is_some_and(|v| v == "1")
}
