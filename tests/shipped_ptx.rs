//! The PTX shipped for stable-Rust users must be exactly what the sources build to. The checks
//! that read `gpu-kernels/generated/` report themselves skipped without the source tree.

use warpforge::ptx::{self, Arch};

#[test]
fn shipped_ptx_matches_a_fresh_build() {
    if ptx::ORIGIN != "built" {
        crate::common::skip("this build embedded the shipped PTX (not on the pinned nightly), nothing to compare");
        return;
    }
    let Some(root) = crate::common::source_tree() else { return };
    let shipped = root.join("gpu-kernels/generated");
    let modules = [
        (Arch::Sm90a.name().to_string(), ptx::module(Arch::Sm90a)),
        (Arch::Sm100a.name().to_string(), ptx::module(Arch::Sm100a)),
        ("checks_sm_90a".to_string(), ptx::CHECKS_SM_90A),
    ];
    for (name, built) in modules {
        let file = shipped.join(format!("{name}.ptx"));
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            committed == built,
            "{} differs from a fresh build of gpu-kernels/: run `WARPFORGE_BLESS=1 cargo build` and commit it",
            file.display()
        );
    }
}

#[test]
fn embedded_cubin_is_the_shipped_one_and_matches_the_ptx() {
    let Some(root) = crate::common::source_tree() else { return };
    let shipped = root.join("gpu-kernels/generated");
    let cubin = std::fs::read(shipped.join("sm_90a.cubin")).expect("gpu-kernels/generated/sm_90a.cubin is shipped");
    // The shipped cubin is what this build embeds: either ptxas just assembled the same bytes
    // from the same PTX (assembly is deterministic), or the build took the shipped file because
    // its recorded PTX hash matched. An empty embed means the shipped cubin is stale.
    assert!(
        !ptx::SM_90A_CUBIN.is_empty(),
        "no sm_90a cubin embedded: the shipped one does not match the PTX; run `WARPFORGE_BLESS=1 cargo build` with ptxas"
    );
    assert!(
        ptx::SM_90A_CUBIN == cubin.as_slice(),
        "the embedded sm_90a cubin differs from gpu-kernels/generated/sm_90a.cubin: re-bless with ptxas"
    );
    // ELF, 64-bit, with NVIDIA's CUDA machine number (190).
    assert_eq!(&cubin[..5], b"\x7fELF\x02");
    assert_eq!(u16::from_le_bytes([cubin[18], cubin[19]]), 190);
}

/// Each sm_90a GEMM entry issues its warpgroup-collective `.aligned` wgmma instructions from
/// one place each. LLVM does not know these are convergent and may copy one into both arms of a
/// branch on the leader thread; a warp split over two copies of an aligned instruction hangs on
/// the GPU (the first ping-pong kernel did, at `wgmma.wait_group 0`). This catches such a copy
/// at build time.
#[test]
fn gemm_entries_issue_each_aligned_wgmma_instruction_once() {
    let mut checked = 0;
    // The decode and gather GEMMs (CUDA cores, warp-level mma.sync) issue no wgmma.
    let wgmma_free = ["gemm_skinny_", "gemm_decode_", "gemm_gather_"];
    for (name, body) in
        entries(Arch::Sm90a, "_sm90").filter(|(name, _)| !wgmma_free.iter().any(|p| name.starts_with(p)))
    {
        // The promoting main loop (`Consumer::promoting_mainloop`) issues from three places by
        // construction: the peeled first K block and the two steps of the loop unrolled over its
        // two scratch tiles (one `wait_group 1` each); it waits for the last group at each of
        // its three exits (one K block, an odd or an even last step), and `Consumer::drain`
        // waits once more.
        let promoting = name.starts_with("gemm_fp8_");
        let issues = if promoting { 3 } else { 1 };
        for (instruction, expected) in [
            ("wgmma.fence.sync.aligned;", issues),
            ("wgmma.commit_group.sync.aligned;", issues),
            ("wgmma.wait_group.sync.aligned 1;", if promoting { 2 } else { 1 }),
            ("wgmma.wait_group.sync.aligned 0;", if promoting { 4 } else { 1 }),
        ] {
            let copies = body.matches(instruction).count();
            assert_eq!(copies, expected, "{name}: `{instruction}` appears {copies} times (expected {expected})");
        }
        checked += 1;
    }
    assert_eq!(
        checked, 29,
        "expected the six cooperative, two ping-pong, two narrow and two cluster GEMM entries, the six SwiGLU \
         ones, the two quantised-SwiGLU ones, the three block-scaled FP8 ones (alone, in clusters and on wide \
         tiles) and the six grouped ones (bf16 and FP8, contiguous and masked, bf16 masked balanced, FP8 masked \
         on wide tiles)"
    );
}

/// The sm_100a GEMMs (the shared tcgen05 skeleton) make no cluster-scope release on their
/// per-tile path: such a release assembles to `MEMBAR.ALL.GPU`, a GPU-wide fence per tile. The
/// CLC readers hand response slots back with a CTA-scope release; only the once-per-CTA cluster
/// barriers and the barrier-init fence may release at cluster scope.
#[test]
fn sm100_gemms_release_at_cta_scope_per_tile() {
    let mut checked = 0;
    for (name, body) in entries(Arch::Sm100a, "_sm100") {
        for cluster_release in ["mbarrier.arrive.release.cluster", "fence.acq_rel.cluster", "fence.sc.cluster"] {
            assert!(!body.contains(cluster_release), "{name}: `{cluster_release}` on the per-tile path");
        }
        checked += 1;
    }
    assert_eq!(checked, 2, "expected the bf16 and the MXFP8 tcgen05 GEMMs");
}

/// NVFP4's e2m1 elements convert in hardware on sm_100a (eight per word: four conversions of
/// each direction per encode or decode step) and in software on sm_90a, which has no such
/// conversion: a build that fell back to the software encoder on Blackwell, or named the form
/// for Hopper, fails here.
#[test]
fn nvfp4_entries_convert_e2m1_in_hardware_only_on_sm100a() {
    let forms = ["cvt.rn.satfinite.e2m1x2.f32", "cvt.rn.f16x2.e2m1x2"];
    for (arch, hardware) in [(Arch::Sm100a, true), (Arch::Sm90a, false)] {
        let mut checked = 0;
        for entry in ptx::module(arch).split(".visible .entry ").skip(1) {
            let name = entry.split('(').next().unwrap_or_default();
            if !name.starts_with("nvfp4_") {
                continue;
            }
            let body = &entry[..entry.find("\n}\n").unwrap_or(entry.len())];
            let form = if name.starts_with("nvfp4_encode") { forms[0] } else { forms[1] };
            let copies = body.matches(form).count();
            if hardware {
                assert!(copies >= 4 && copies % 4 == 0, "{name} ({arch:?}): `{form}` {copies} times");
            } else {
                assert!(forms.iter().all(|f| !body.contains(f)), "{name} ({arch:?}) names an e2m1 conversion");
            }
            checked += 1;
        }
        assert_eq!(checked, 6, "{arch:?}: expected nvfp4_{{encode,encode_static,decode}}_{{two types}}");
    }
}

/// The `gemm_*<suffix>` entries of `arch`'s embedded module: (name, body up to its closing brace).
fn entries(arch: Arch, suffix: &'static str) -> impl Iterator<Item = (&'static str, &'static str)> {
    ptx::module(arch).split(".visible .entry ").skip(1).filter_map(move |entry| {
        let name = entry.split('(').next().unwrap_or_default();
        let body = &entry[..entry.find("\n}\n").unwrap_or(entry.len())];
        (name.starts_with("gemm_") && name.ends_with(suffix)).then_some((name, body))
    })
}
