//! The builder's output, as embedded in the crate: the expected entries for both archs, their
//! launch directives, and ptxas's verdict on every module.

use std::path::PathBuf;
use std::process::Command;

use warpforge::abi::entries;
use warpforge::host::ptx_info::entry_directives;
use warpforge::ptx::{self, Arch};

const ARCHS: [Arch; 2] = [Arch::Sm90a, Arch::Sm100a];

const FOUNDATION_ENTRIES: [&str; 6] = [
    entries::SAXPY_F32,
    entries::SAXPY_BF16,
    entries::SAXPY_F16,
    entries::VECTOR_ADD_F32,
    entries::BLOCK_SUM_F32,
    entries::PERSISTENT_STATIC_VISIT,
];

#[test]
fn both_modules_target_their_arch_and_hold_the_foundation_kernels() {
    for arch in ARCHS {
        let text = ptx::module(arch);
        assert!(text.contains(&format!(".target {}", arch.name())), "{} module has the wrong .target", arch.name());
        let names: Vec<String> = entry_directives(text).into_iter().map(|e| e.name).collect();
        for want in FOUNDATION_ENTRIES {
            assert!(names.iter().any(|n| n == want), "{} module lacks `{want}` (has {names:?})", arch.name());
        }
    }
}

#[test]
fn kernel_attributes_reach_the_ptx() {
    for arch in ARCHS {
        let entries = entry_directives(ptx::module(arch));
        let find = |name: &str| entries.iter().find(|e| e.name == name).unwrap().clone();
        let sum = find(entries::BLOCK_SUM_F32);
        assert_eq!(sum.reqntid, Some([256, 1, 1]), "#[kernel(threads = 256)] → .reqntid");
        assert_eq!(sum.param_count, 3);
        let visit = find(entries::PERSISTENT_STATIC_VISIT);
        assert_eq!((visit.reqntid, visit.minnctapersm), (Some([128, 1, 1]), Some(1)));
        assert_eq!(find(entries::SAXPY_F32).maxntid, Some([1024, 1, 1]));
    }
}

#[test]
fn internal_helpers_do_not_leak_into_the_modules() {
    for arch in ARCHS {
        let text = ptx::module(arch);
        assert!(!text.contains("__warpforge_kernel_attrs_"), "attribute statics must be dropped by the link step");
        assert!(!text.contains(".visible .func"), "only kernels are exported");
    }
}

fn find_ptxas() -> Option<PathBuf> {
    warpforge_builder::ptxas::find()
}

#[test]
fn ptxas_assembles_every_embedded_module() {
    let Some(ptxas) = find_ptxas() else {
        assert!(
            std::env::var("WARPFORGE_REQUIRE_PTXAS").as_deref() != Ok("1"),
            "WARPFORGE_REQUIRE_PTXAS=1 but no ptxas found ({})",
            warpforge_builder::ptxas::SEARCH_ORDER
        );
        eprintln!("SKIPPED ptxas check: no ptxas found ({})", warpforge_builder::ptxas::SEARCH_ORDER);
        return;
    };
    let dir = std::env::temp_dir().join(format!("warpforge-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for arch in ARCHS {
        let file = dir.join(format!("{}.ptx", arch.name()));
        std::fs::write(&file, ptx::module(arch)).unwrap();
        let out = Command::new(&ptxas)
            .arg(format!("-arch={}", arch.name()))
            .args(["-v", "-o", "/dev/null"])
            .arg(&file)
            .output()
            .expect("ptxas runs");
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "ptxas rejected the {} module:\n{log}", arch.name());
        let mut report = warpforge_builder::ptxas::parse_report(&log);
        report.attribute_calls(ptx::module(arch));
        // The strictest verdict: no local memory (callees included), no spill, no serialised wgmma.
        let checks = warpforge_builder::Checks { deny_spills: true, allow_stack_frame: Vec::new() };
        if let Err(problems) = checks.verdict(&report) {
            panic!("{}: ptxas's report refuses the embedded module:\n{problems}", arch.name());
        }
        assert!(!report.kernels.is_empty());
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn every_raw_ptx_wrapper_assembles_for_its_arch() {
    if let Err(e) = warpforge_builder::toolchain::Toolchain::locate() {
        // The GPU machine runs this binary without a Rust toolchain; CI and developers have one.
        eprintln!("SKIPPED: no toolchain to build the coverage crate ({e})");
        return;
    }
    let require = std::env::var("WARPFORGE_REQUIRE_PTXAS").as_deref() == Ok("1");
    let policy =
        if require { warpforge_builder::PtxasPolicy::Require } else { warpforge_builder::PtxasPolicy::IfFound };
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/warpforge-coverage");
    let modules =
        warpforge_builder::Builder::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("gpu-kernels/coverage"))
            .arch(warpforge_builder::Arch::Sm90a)
            .target_dir(target)
            .ptxas(policy)
            .deny_spills(true)
            .rerun_if_changed(false)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
    for module in modules {
        assert!(!module.entries.is_empty(), "{}: no coverage kernel", module.arch);
        match module.ptxas {
            Some(report) => {
                // The builder already refused local memory, spills and serialised wgmma.
                eprintln!("{}: {} coverage kernels assembled", module.arch, report.kernels.len());
            }
            None => eprintln!("SKIPPED ptxas for {}: no ptxas found", module.arch),
        }
    }
}
