//! Generators for the PTX instruction families too wide to write by hand.
//!
//! `wgmma.mma_async` exists for every N in 8..=256 (step 8) × input types × accumulator type ×
//! operand source (SS: A and B from shared-memory descriptors, RS: A from registers), and each
//! form names every accumulator register (up to 128) as its own `asm!` operand — the only way
//! the accumulators stay in registers (REFERENCE §15.3). Writing that by hand is how other
//! libraries ended up with half a megabyte of unrolled assembly; here a table ([`WGMMA_TABLE`])
//! says which forms exist and [`wgmma_source`] renders them into
//! `gpu-kernels/dsl/src/ptx/generated/wgmma.rs`. A test fails when that file is stale;
//! `WARPFORGE_BLESS=1 cargo test -p warpforge-codegen` rewrites it.
//!
//! Coverage choice (the rendered file is about 220 KB, against ~700 KB for every N of every
//! row): every legal N for the f32-accumulating bf16 and f16 forms (the GEMM and attention
//! workhorses, where tile-shape tuning wants any N), and N ∈ {8} ∪ {16, 32, …, 256} for the
//! f16-accumulating, tf32 and fp8 forms.
//!
//! [`tcgen05`] renders Blackwell's `tcgen05.ld/st` family the same way.

pub mod tcgen05;

use std::fmt::Write;

/// A wgmma input element type (REFERENCE §8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputType {
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// TensorFloat-32 (f32 storage, 10-bit mantissa used).
    Tf32,
    /// FP8 with 4 exponent bits.
    E4m3,
    /// FP8 with 5 exponent bits.
    E5m2,
}

impl InputType {
    /// The PTX type suffix.
    pub const fn ptx(self) -> &'static str {
        match self {
            InputType::F16 => "f16",
            InputType::Bf16 => "bf16",
            InputType::Tf32 => "tf32",
            InputType::E4m3 => "e4m3",
            InputType::E5m2 => "e5m2",
        }
    }
    /// The marker type's name in the generated `dtype` module.
    pub const fn marker(self) -> &'static str {
        match self {
            InputType::F16 => "F16",
            InputType::Bf16 => "Bf16",
            InputType::Tf32 => "Tf32",
            InputType::E4m3 => "E4m3",
            InputType::E5m2 => "E5m2",
        }
    }
    /// K of one instruction: 32 bytes of K per row of the operand.
    pub const fn k(self) -> u32 {
        match self {
            InputType::F16 | InputType::Bf16 => 16,
            InputType::Tf32 => 8,
            InputType::E4m3 | InputType::E5m2 => 32,
        }
    }
    /// Only 16-bit operands may be MN-major (imm-trans-a/b operands exist only for them).
    pub const fn transposable(self) -> bool {
        matches!(self, InputType::F16 | InputType::Bf16)
    }
}

/// Accumulator (D) type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccType {
    /// One f32 per register: N/2 registers per thread.
    F32,
    /// Two f16 packed per register: N/4 registers per thread.
    F16,
}

impl AccType {
    /// The PTX type suffix.
    pub const fn ptx(self) -> &'static str {
        match self {
            AccType::F32 => "f32",
            AccType::F16 => "f16",
        }
    }
    /// Registers per thread for an m64nN tile.
    pub const fn regs(self, n: u32) -> u32 {
        match self {
            AccType::F32 => n / 2,
            AccType::F16 => n / 4,
        }
    }
    /// The name of the generated accumulator struct.
    pub fn struct_name(self, n: u32) -> String {
        match self {
            AccType::F32 => format!("Acc64x{n}F32"),
            AccType::F16 => format!("Acc64x{n}F16"),
        }
    }
}

/// Which N values a table row is rendered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NSet {
    /// 8, 16, …, 256: every N the ISA allows.
    All,
    /// 8, 16, 32, 48, …, 256: enough for real tiles at a third of the size.
    Sparse,
}

impl NSet {
    /// The N values, ascending.
    pub fn values(self) -> Vec<u32> {
        (1..=32).map(|i| i * 8).filter(|&n| self == NSet::All || n == 8 || n % 16 == 0).collect()
    }
}

/// One row of the table: an (A, B, D) type combination rendered in the SS and RS forms.
#[derive(Clone, Copy, Debug)]
pub struct WgmmaRow {
    /// A operand type.
    pub a: InputType,
    /// B operand type.
    pub b: InputType,
    /// Accumulator type.
    pub acc: AccType,
    /// N values rendered.
    pub n: NSet,
}

const fn row(a: InputType, b: InputType, acc: AccType, n: NSet) -> WgmmaRow {
    WgmmaRow { a, b, acc, n }
}

use AccType as D;
use InputType as T;

/// Every generated (A, B, D) combination. The ISA's rules (REFERENCE §8.1): bf16 and tf32
/// accumulate in f32 only; f16 and fp8 in f32 or f16; the two fp8 operands may differ.
pub const WGMMA_TABLE: &[WgmmaRow] = &[
    row(T::Bf16, T::Bf16, D::F32, NSet::All),
    row(T::F16, T::F16, D::F32, NSet::All),
    row(T::F16, T::F16, D::F16, NSet::Sparse),
    row(T::Tf32, T::Tf32, D::F32, NSet::Sparse),
    row(T::E4m3, T::E4m3, D::F32, NSet::Sparse),
    row(T::E4m3, T::E5m2, D::F32, NSet::Sparse),
    row(T::E5m2, T::E4m3, D::F32, NSet::Sparse),
    row(T::E5m2, T::E5m2, D::F32, NSet::Sparse),
    row(T::E4m3, T::E4m3, D::F16, NSet::Sparse),
    row(T::E4m3, T::E5m2, D::F16, NSet::Sparse),
    row(T::E5m2, T::E4m3, D::F16, NSet::Sparse),
    row(T::E5m2, T::E5m2, D::F16, NSet::Sparse),
];

/// Whether the ISA defines this combination at all (used by the tests to check the table).
pub fn is_legal(r: &WgmmaRow) -> bool {
    let same_k = r.a.k() == r.b.k();
    let pair_ok = match (r.a, r.b) {
        (T::E4m3 | T::E5m2, T::E4m3 | T::E5m2) => true,
        (a, b) => a == b,
    };
    let acc_ok = match r.acc {
        D::F32 => true,
        D::F16 => matches!(r.a, T::F16 | T::E4m3 | T::E5m2),
    };
    same_k && pair_ok && acc_ok
}

/// The generated function's name, e.g. `mma_m64n64k16_f32_bf16_bf16_ss`.
pub fn function_name(r: &WgmmaRow, n: u32, register_a: bool) -> String {
    format!(
        "mma_m64n{n}k{}_{}_{}_{}_{}",
        r.a.k(),
        r.acc.ptx(),
        r.a.ptx(),
        r.b.ptx(),
        if register_a { "rs" } else { "ss" }
    )
}

/// The head of the rendered file: its docs and imports. The shared types, traits and the
/// per-form macro live in the hand-written `ptx/wgmma_forms.rs`.
const PRELUDE: &str = r#"//! `wgmma.mma_async` for every row of warpforge-codegen's `WGMMA_TABLE` (REFERENCE §8.1–§8.2).
//!
//! Per accumulator shape there is one struct (`Acc64x{N}F32`: N/2 scalar f32 fields;
//! `Acc64x{N}F16`: N/4 packed f16x2 fields) whose fields are passed one by one as
//! `inout(reg32)` operands, so the accumulators never touch local memory (REFERENCE §15.3).
//! Per form there is one `unsafe fn mma_m64n{N}k{K}_{acc}_{a}_{b}_{ss|rs}` plus an impl of
//! [`WgmmaSs`] / [`WgmmaRs`] for the accumulator, which the typed layer dispatches on.
//! `scale_d` is a runtime `bool` turned into a predicate inside the asm; the immediate
//! operands (`SCALE_A`/`SCALE_B` ∈ {1, −1}, `TRANS_A`/`TRANS_B` ∈ {0 = K-major, 1 = MN-major})
//! are const generics checked at compile time. Coverage: see the generator's crate doc.
#![cfg_attr(rustfmt, rustfmt::skip)]

use core::arch::asm;

pub use super::wgmma_forms::{Accumulator, RegA, WgmmaRs, WgmmaSs, dtype};
use super::wgmma_forms::{imm_ok, wgmma_forms};
"#;

/// Renders the accumulator struct, its [`Accumulator`]-trait impl and its operand macro.
fn render_accumulator(out: &mut String, acc: AccType, n: u32) {
    let name = acc.struct_name(n);
    let regs = acc.regs(n);
    let (elem, zero, what) = match acc {
        AccType::F32 => ("f32", "0.0", "f32"),
        AccType::F16 => ("u32", "0", "packed f16x2 (low half = even column)"),
    };
    let fields = vec![elem; regs as usize].join(", ");
    let zeros = vec![zero; regs as usize].join(", ");
    let _ =
        writeln!(out, "\n/// m64n{n} accumulator, {regs} registers of {what} per thread (REFERENCE §8.5 maps them).");
    let _ =
        writeln!(out, "#[derive(Clone, Copy)]\npub struct {name}({});", fields.replace(elem, &format!("pub {elem}")));
    let _ = writeln!(out, "\nimpl Accumulator for {name} {{");
    let _ = writeln!(out, "    const N: u32 = {n};\n    const REGS: usize = {regs};\n    type Elem = {elem};");
    let _ = writeln!(out, "    const ZERO: Self = {name}({zeros});");
    let _ = writeln!(out, "    #[inline(always)]\n    fn for_each(&self, mut f: impl FnMut(usize, {elem})) {{");
    let calls: Vec<String> = (0..regs).map(|i| format!("f({i}, self.{i});")).collect();
    for line in calls.chunks(8) {
        let _ = writeln!(out, "        {}", line.join(" "));
    }
    let _ = writeln!(out, "    }}");
    let _ = writeln!(
        out,
        "    #[inline(always)]\n    fn for_each_mut(&mut self, mut f: impl FnMut(usize, &mut {elem})) {{"
    );
    let calls: Vec<String> = (0..regs).map(|i| format!("f({i}, &mut self.{i});")).collect();
    for line in calls.chunks(8) {
        let _ = writeln!(out, "        {}", line.join(" "));
    }
    let _ = writeln!(out, "    }}\n}}");

    let placeholders = vec!["{}"; regs as usize].join(", ");
    let operands: String = (0..regs).map(|i| format!(" inout(reg32) $d.{i},")).collect();
    let _ = writeln!(out, "\nmacro_rules! {} {{", regs_macro(acc, n));
    let _ = writeln!(out, "    ($d:ident, $shape:literal, $tail:literal; $($ops:tt)*) => {{");
    let _ = writeln!(
        out,
        "        asm!(concat!(\"{{{{ .reg .pred %p; setp.ne.b32 %p, {{sd}}, 0; wgmma.mma_async.sync.aligned.m64n{n}\", $shape, \" {{{{{}}}}}, \", $tail, \"; }}}}\"),",
        placeholders
    );
    let _ = writeln!(out, "            {} $($ops)*, options(nostack))", operands.trim_start());
    let _ = writeln!(out, "    }};\n}}");
}

fn regs_macro(acc: AccType, n: u32) -> String {
    format!("regs_{}_n{n}", acc.ptx())
}

/// Renders `gpu-kernels/dsl/src/ptx/generated/wgmma.rs`.
pub fn wgmma_source() -> String {
    let mut out = String::from("// @generated by warpforge-codegen (gpu-kernels/codegen) — do not edit\n");
    out.push_str(PRELUDE);
    for acc in [AccType::F32, AccType::F16] {
        let mut ns: Vec<u32> = WGMMA_TABLE.iter().filter(|r| r.acc == acc).flat_map(|r| r.n.values()).collect();
        ns.sort_unstable();
        ns.dedup();
        for n in ns {
            render_accumulator(&mut out, acc, n);
        }
    }
    out.push('\n');
    for r in WGMMA_TABLE {
        let form = if r.a.transposable() { "trans" } else { "k_major" };
        let shape = format!("k{}.{}.{}.{}", r.a.k(), r.acc.ptx(), r.a.ptx(), r.b.ptx());
        for n in r.n.values() {
            let _ = writeln!(
                out,
                "wgmma_forms!({}, {}, {}, {}, {n}, \"{shape}\", {}, {}, {form});",
                function_name(r, n, false),
                function_name(r, n, true),
                r.acc.struct_name(n),
                regs_macro(r.acc, n),
                r.a.marker(),
                r.b.marker(),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn generated_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsl/src/ptx/generated/wgmma.rs")
    }

    #[test]
    fn committed_wgmma_file_is_fresh() {
        let want = wgmma_source();
        let path = generated_path();
        if std::env::var("WARPFORGE_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &want).expect("write generated wgmma.rs");
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(have == want, "{} is stale: run `WARPFORGE_BLESS=1 cargo test -p warpforge-codegen`", path.display());
    }

    #[test]
    fn every_row_is_an_isa_form() {
        for r in WGMMA_TABLE {
            assert!(is_legal(r), "{r:?} is not a wgmma form");
        }
        assert!(!is_legal(&row(T::Bf16, T::Bf16, D::F16, NSet::All)), "bf16 accumulates in f32 only");
        assert!(!is_legal(&row(T::Tf32, T::Tf32, D::F16, NSet::All)), "tf32 accumulates in f32 only");
        assert!(!is_legal(&row(T::Bf16, T::F16, D::F32, NSet::All)), "16-bit operands must match");
    }

    #[test]
    fn n_sets_follow_the_isa_step() {
        let all = NSet::All.values();
        assert_eq!(all.len(), 32);
        assert_eq!((all[0], all[31]), (8, 256));
        let sparse = NSet::Sparse.values();
        assert_eq!(sparse.len(), 17);
        assert!(sparse.iter().all(|n| all.contains(n)));
        assert_eq!(AccType::F32.regs(256), 128, "the ISA maximum: 128 accumulator registers");
        assert_eq!(AccType::F16.regs(8), 2);
    }

    #[test]
    fn rendered_operand_lists_match_register_counts() {
        let src = wgmma_source();
        for (acc, n) in [(AccType::F32, 8), (AccType::F32, 256), (AccType::F16, 64)] {
            let start = src.find(&format!("macro_rules! {} {{", regs_macro(acc, n))).expect("macro rendered");
            let body = &src[start..start + src[start..].find("\n}\n").expect("macro ends")];
            assert_eq!(body.matches("inout(reg32)").count() as u32, acc.regs(n), "{acc:?} n{n}");
            assert_eq!(body.matches("{}").count() as u32, acc.regs(n), "{acc:?} n{n} placeholders");
        }
        assert!(src.contains("wgmma_forms!(mma_m64n200k16_f32_bf16_bf16_ss, mma_m64n200k16_f32_bf16_bf16_rs"));
        assert!(src.contains("\"k32.f16.e4m3.e5m2\""));
        assert!(!src.contains("f16_bf16_bf16"), "bf16 never accumulates in f16");
        assert!(src.starts_with("// @generated by warpforge-codegen (gpu-kernels/codegen) — do not edit\n"));
    }
}
