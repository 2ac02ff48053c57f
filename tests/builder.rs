//! The builder's output, as embedded in the crate: the expected entries for both archs, their
//! launch directives, and ptxas's verdict on every module.

use std::process::Command;

use warpforge::abi::entries;
use warpforge::host::ptx_info::entry_directives;
use warpforge::ptx::{self, Arch};

const ARCHS: [Arch; 2] = [Arch::Sm90a, Arch::Sm100a];

const FOUNDATION_ENTRIES: [&str; 6] = [
    entries::SAXPY_F32.name(),
    entries::SAXPY_BF16.name(),
    entries::SAXPY_F16.name(),
    entries::VECTOR_ADD_F32.name(),
    entries::BLOCK_SUM_F32.name(),
    entries::PERSISTENT_STATIC_VISIT.name(),
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
        let sum = find(entries::BLOCK_SUM_F32.name());
        assert_eq!(sum.reqntid, Some([256, 1, 1]), "#[kernel(threads = 256)] → .reqntid");
        assert_eq!(sum.param_count, 3);
        let visit = find(entries::PERSISTENT_STATIC_VISIT.name());
        assert_eq!((visit.reqntid, visit.minnctapersm), (Some([128, 1, 1]), Some(1)));
        assert_eq!(find(entries::SAXPY_F32.name()).maxntid, Some([1024, 1, 1]));
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

/// Every embedded module: its name, arch, PTX and the build's ptxas report.
fn embedded_modules() -> [(&'static str, Arch, &'static str, &'static str); 3] {
    [
        ("sm_90a", Arch::Sm90a, ptx::SM_90A, ptx::SM_90A_REPORT),
        ("sm_100a", Arch::Sm100a, ptx::SM_100A, ptx::SM_100A_REPORT),
        ("checks_sm_90a", Arch::Sm90a, ptx::CHECKS_SM_90A, ptx::CHECKS_SM_90A_REPORT),
    ]
}

/// ptxas accepted every embedded module with no spill. When this build assembled the modules
/// (CI requires it), the build's own report is the verdict: every entry of the PTX has its line
/// there, with zero spills. Otherwise (shipped PTX) ptxas runs here, when found.
#[test]
fn ptxas_assembles_every_embedded_module() {
    let require = std::env::var("WARPFORGE_REQUIRE_PTXAS").as_deref() == Ok("1");
    for (name, arch, text, report) in embedded_modules() {
        let entries = entry_directives(text);
        assert!(!entries.is_empty(), "{name}: no entries");
        if report.lines().any(|l| l.starts_with("ptxas: ") && !l.contains("not found")) {
            for entry in &entries {
                let line = report
                    .lines()
                    .find(|l| l.split_whitespace().next() == Some(entry.name.as_str()))
                    .unwrap_or_else(|| panic!("{name}: the build's ptxas report has no line for {}", entry.name));
                let words: Vec<&str> = line.split_whitespace().collect();
                let local = words.iter().position(|&w| w == "local").and_then(|i| words.get(i + 1));
                assert!(line.contains("spills 0/0 B") && local == Some(&"0"), "{name}: {line}");
                assert!(!line.contains("serialized"), "{name}: {line}");
            }
            continue;
        }
        assert!(!(require && ptx::ORIGIN == "built"), "{name}: built without ptxas although WARPFORGE_REQUIRE_PTXAS=1");
        let Some(ptxas) = warpforge_builder::ptxas::find() else {
            assert!(
                !require,
                "WARPFORGE_REQUIRE_PTXAS=1 but no ptxas found ({})",
                warpforge_builder::ptxas::SEARCH_ORDER
            );
            crate::common::skip(&format!(
                "ptxas check of {name}: no ptxas found ({})",
                warpforge_builder::ptxas::SEARCH_ORDER
            ));
            continue;
        };
        // The verdict is the pinned release's (it assembles the shipped cubin the library
        // loads): an older toolkit's ptxas allocates registers differently and may spill
        // where the pinned one does not.
        let pinned = pinned_ptxas_release();
        if let Some(found) = ptxas_release(&ptxas).filter(|&found| found < pinned) {
            let why = format!(
                "ptxas check of {name}: {} is release {}.{}, older than the pinned {}.{} that assembles the \
                 shipped cubin (set PTXAS to the pinned one)",
                ptxas.display(),
                found.0,
                found.1,
                pinned.0,
                pinned.1
            );
            assert!(!require, "WARPFORGE_REQUIRE_PTXAS=1: {why}");
            crate::common::skip(&why);
            continue;
        }
        let log = assemble(&ptxas, name, arch, text);
        let mut report = warpforge_builder::ptxas::parse_report(&log);
        report.attribute_calls(text);
        // The strictest verdict: no local memory (callees included), no spill, no serialised wgmma.
        let checks = warpforge_builder::Checks { deny_spills: true, allow_stack_frame: Vec::new() };
        if let Err(problems) = checks.verdict(&report) {
            panic!("{name}: ptxas's report refuses the embedded module:\n{problems}");
        }
        assert_eq!(report.kernels.len(), entries.len(), "{name}: ptxas reported a different entry count");
    }
}

/// The ptxas release (major, minor) CI pins (`.ci/run`'s `nvidia-cuda-nvcc==X.Y.Z`), embedded
/// at compile time so the check knows it where the source tree is absent.
fn pinned_ptxas_release() -> (u32, u32) {
    let run = include_str!("../.ci/run");
    let pin = run.split("nvidia-cuda-nvcc==").nth(1).expect(".ci/run pins nvidia-cuda-nvcc==X.Y.Z");
    parse_release(pin).expect(".ci/run's nvidia-cuda-nvcc pin reads X.Y")
}

/// `ptxas --version`'s release (major, minor), from its `release X.Y,` line.
fn ptxas_release(ptxas: &std::path::Path) -> Option<(u32, u32)> {
    let out = Command::new(ptxas).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_release(text.split("release ").nth(1)?)
}

/// The leading `X.Y` of `text` as numbers.
fn parse_release(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[test]
fn ptxas_releases_parse() {
    assert_eq!(parse_release("13.5.37\""), Some((13, 5)));
    assert_eq!(parse_release("13.0, V13.0.88"), Some((13, 0)));
    assert_eq!(parse_release("x"), None);
    assert!(pinned_ptxas_release() >= (12, 8), "the pin reads {:?}", pinned_ptxas_release());
}

/// Runs `ptxas -v` on `text` for `arch`; the log, after asserting it accepted the module.
fn assemble(ptxas: &std::path::Path, name: &str, arch: Arch, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("warpforge-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.ptx"));
    std::fs::write(&file, text).unwrap();
    let out = Command::new(ptxas)
        .arg(format!("-arch={}", arch.name()))
        .args(["-v", "-o", "/dev/null"])
        .arg(&file)
        .output()
        .expect("ptxas runs");
    std::fs::remove_file(&file).ok();
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "ptxas rejected the {name} module:\n{log}");
    log
}

/// The probes live in their own module: the library's module carries only its kernels.
#[test]
fn the_library_module_holds_no_probe_and_the_probe_module_only_probes() {
    let library: Vec<String> = entry_directives(ptx::SM_90A).into_iter().map(|e| e.name).collect();
    let probes: Vec<String> = entry_directives(ptx::CHECKS_SM_90A).into_iter().map(|e| e.name).collect();
    assert!(probes.len() >= 25, "the probe module has {} entries", probes.len());
    for probe in &probes {
        assert!(probe.ends_with("_sm90a"), "{probe}: probes are named *_sm90a");
        assert!(!library.contains(probe), "{probe} is also in the library module");
    }
    assert!(library.iter().all(|e| !e.ends_with("_sm90a")), "a probe in the library module: {library:?}");
}

#[test]
fn every_raw_ptx_wrapper_assembles_for_its_arch() {
    if let Err(e) = warpforge_builder::toolchain::Toolchain::locate() {
        // The GPU machine runs this binary without a Rust toolchain; CI and developers have one.
        crate::common::skip(&format!("no toolchain to build the coverage crate ({e})"));
        return;
    }
    let Some(root) = crate::common::source_tree() else { return };
    let require = std::env::var("WARPFORGE_REQUIRE_PTXAS").as_deref() == Ok("1");
    let policy =
        if require { warpforge_builder::PtxasPolicy::Require } else { warpforge_builder::PtxasPolicy::IfFound };
    let target = root.join("target/warpforge-coverage");
    let modules = warpforge_builder::Builder::new(root.join("gpu-kernels/coverage"))
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
            None => crate::common::skip(&format!("ptxas for {}: no ptxas found", module.arch)),
        }
    }
}

/// Every typed entry of `abi::entries` matches its kernel in the sm_90a module: the PTX declares
/// as many parameters as the entry's list, each of the size the host will pass (what
/// `Module::entry` checks at load time, here for all of them without a GPU).
#[test]
fn every_typed_entry_matches_its_ptx_parameters() {
    use warpforge::host::ParamList;
    let declared = entry_directives(ptx::SM_90A);
    fn check<L: ParamList>(declared: &[warpforge::host::ptx_info::EntryDirectives], entry: warpforge::abi::Entry<L>) {
        let found = declared.iter().find(|e| e.name == entry.name());
        let found = found.unwrap_or_else(|| panic!("{} is not in the sm_90a module", entry.name()));
        assert_eq!(found.param_sizes, L::sizes(), "{}: PTX parameter sizes vs the host's list", entry.name());
    }
    let d = declared.as_slice();
    check(d, entries::SAXPY_F32);
    check(d, entries::SAXPY_BF16);
    check(d, entries::SAXPY_F16);
    check(d, entries::SILU_MUL_BF16);
    check(d, entries::SILU_MUL_F16);
    check(d, entries::VECTOR_ADD_F32);
    check(d, entries::BLOCK_SUM_F32);
    check(d, entries::PERSISTENT_STATIC_VISIT);
    check(d, entries::PACK_B16);
    for gemm in [
        entries::GEMM_BF16_BF16,
        entries::GEMM_BF16_F16,
        entries::GEMM_BF16_F32,
        entries::GEMM_F16_BF16,
        entries::GEMM_F16_F16,
        entries::GEMM_F16_F32,
        entries::GEMM_BF16_BF16_PINGPONG,
        entries::GEMM_F16_F16_PINGPONG,
        entries::GEMM_BF16_BF16_NARROW,
        entries::GEMM_F16_F16_NARROW,
        entries::GEMM_BF16_BF16_CLUSTER,
        entries::GEMM_F16_F16_CLUSTER,
        entries::GEMM_SWIGLU_BF16,
        entries::GEMM_SWIGLU_F16,
        entries::GEMM_SWIGLU_BF16_PINGPONG,
        entries::GEMM_SWIGLU_F16_PINGPONG,
        entries::GEMM_SWIGLU_BF16_NARROW,
        entries::GEMM_SWIGLU_F16_NARROW,
    ] {
        check(d, gemm);
    }
    for skinny in [
        entries::GEMM_SKINNY_BF16_BF16,
        entries::GEMM_SKINNY_BF16_F16,
        entries::GEMM_SKINNY_BF16_F32,
        entries::GEMM_SKINNY_F16_BF16,
        entries::GEMM_SKINNY_F16_F16,
        entries::GEMM_SKINNY_F16_F32,
    ] {
        check(d, skinny);
    }
    for mma in [
        entries::GEMM_DECODE_BF16_BF16,
        entries::GEMM_DECODE_BF16_F16,
        entries::GEMM_DECODE_BF16_F32,
        entries::GEMM_DECODE_F16_BF16,
        entries::GEMM_DECODE_F16_F16,
        entries::GEMM_DECODE_F16_F32,
        entries::GEMM_GATHER_BF16_BF16,
        entries::GEMM_GATHER_BF16_F16,
        entries::GEMM_GATHER_BF16_F32,
        entries::GEMM_GATHER_F16_BF16,
        entries::GEMM_GATHER_F16_F16,
        entries::GEMM_GATHER_F16_F32,
    ] {
        check(d, mma);
    }
    check(d, entries::QUANT_GROUP_E4M3_BF16);
    check(d, entries::QUANT_GROUP_E4M3_F16);
    check(d, entries::QUANT_BLOCK_E4M3_BF16);
    check(d, entries::QUANT_BLOCK_E4M3_F16);
    check(d, entries::AMAX_BF16);
    check(d, entries::AMAX_F16);
    check(d, entries::QUANT_TENSOR_E4M3_BF16);
    check(d, entries::QUANT_TENSOR_E4M3_F16);
    check(d, entries::QUANT_TENSOR_E5M2_BF16);
    check(d, entries::QUANT_TENSOR_E5M2_F16);
    check(d, entries::QUANT_TENSOR_STATIC_E4M3_BF16);
    check(d, entries::QUANT_TENSOR_STATIC_E4M3_F16);
    check(d, entries::QUANT_TENSOR_STATIC_E5M2_BF16);
    check(d, entries::QUANT_TENSOR_STATIC_E5M2_F16);
    check(d, entries::MXFP8_ENCODE_BF16);
    check(d, entries::MXFP8_ENCODE_F16);
    check(d, entries::MXFP8_DECODE_BF16);
    check(d, entries::MXFP8_DECODE_F32);
    check(d, entries::NVFP4_ENCODE_BF16);
    check(d, entries::NVFP4_ENCODE_F16);
    check(d, entries::NVFP4_ENCODE_STATIC_BF16);
    check(d, entries::NVFP4_ENCODE_STATIC_F16);
    check(d, entries::NVFP4_DECODE_BF16);
    check(d, entries::NVFP4_DECODE_F32);
    check(d, entries::GEMM_FP8_BLOCKSCALED_BF16);
    check(d, entries::GEMM_FP8_BLOCKSCALED_BF16_CLUSTER);
    check(d, entries::GEMM_FP8_BLOCKSCALED_BF16_WIDE);
    check(d, entries::GEMM_GROUPED_CONTIGUOUS_BF16);
    check(d, entries::GEMM_GROUPED_MASKED_BF16);
    check(d, entries::GEMM_GROUPED_MASKED_BALANCED_BF16);
    check(d, entries::GEMM_FP8_GROUPED_CONTIGUOUS_BF16);
    check(d, entries::GEMM_FP8_GROUPED_MASKED_BF16);
    check(d, entries::GEMM_FP8_GROUPED_MASKED_BF16_WIDE);
    check(d, entries::GEMM_SWIGLU_E4M3_BF16);
    check(d, entries::GEMM_SWIGLU_UE8M0_BF16);
    for attention in [
        entries::ATTENTION_BF16_D64,
        entries::ATTENTION_BF16_D64_K176,
        entries::ATTENTION_BF16_D128,
        entries::ATTENTION_BF16_D128_K176,
        entries::ATTENTION_BF16_D256,
        entries::ATTENTION_BF16_D128_CAUSAL,
        entries::ATTENTION_BF16_D128_CAUSAL_SHORT,
        entries::ATTENTION_F16_D64,
        entries::ATTENTION_F16_D64_K176,
        entries::ATTENTION_F16_D128,
        entries::ATTENTION_F16_D128_K176,
        entries::ATTENTION_F16_D256,
        entries::ATTENTION_F16_D128_CAUSAL,
        entries::ATTENTION_F16_D128_CAUSAL_SHORT,
    ] {
        check(d, attention);
    }
    for decode in [
        entries::ATTENTION_DECODE_BF16_D64,
        entries::ATTENTION_DECODE_BF16_D128,
        entries::ATTENTION_DECODE_F16_D64,
        entries::ATTENTION_DECODE_F16_D128,
    ] {
        check(d, decode);
    }
    for combine in [
        entries::ATTENTION_COMBINE_BF16_D64,
        entries::ATTENTION_COMBINE_BF16_D128,
        entries::ATTENTION_COMBINE_F16_D64,
        entries::ATTENTION_COMBINE_F16_D128,
    ] {
        check(d, combine);
    }
    assert_eq!(
        declared.len(),
        102,
        "a new kernel in the library module needs a typed entry in abi::entries (and a line here)"
    );
}
