//! The PTX shipped for stable-Rust users must be exactly what the sources build to.

use std::path::Path;

use warpforge::ptx::{self, Arch};

#[test]
fn shipped_ptx_matches_a_fresh_build() {
    if ptx::ORIGIN != "built" {
        eprintln!("SKIPPED: this build embedded the shipped PTX (not on the pinned nightly), nothing to compare");
        return;
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("gpu-kernels/generated");
    for arch in [Arch::Sm90a, Arch::Sm100a] {
        let file = shipped.join(format!("{}.ptx", arch.name()));
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            committed == ptx::module(arch),
            "{} differs from a fresh build of gpu-kernels/: run `WARPFORGE_BLESS=1 cargo build` and commit it",
            file.display()
        );
    }
}
