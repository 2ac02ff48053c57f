//! Generator of the `tcgen05.ld` / `tcgen05.st` family (TMEM ↔ registers, sm_100a).
//!
//! Each shape (`32x32b`, `16x64b`, `16x128b`, `16x256b`) exists with repeat counts `.x1 … .x128`,
//! and each form names every destination register as its own `asm!` operand: a register array
//! would go to local memory (REFERENCE §15.3), so the registers are tuple structs of scalar `u32`
//! fields (`Regs1` … `Regs128`). [`TCGEN05_LD_ST_TABLE`] says which forms exist — capped so the
//! widest form stays at 128 registers per thread, the ISA's own limit (`16x256b` stops at `.x32`,
//! `16x128b` at `.x64`; REFERENCE §10.7) — and [`tcgen05_ld_st_source`] renders them into
//! `gpu-kernels/dsl/src/ptx/generated/tcgen05_ld_st.rs`: per form a load, a load fused with
//! `tcgen05.wait::ld` (registers valid when the asm block ends, so no use can be scheduled before
//! the wait), a store, and a `TmemCopy` trait impl on a shape marker type so the typed
//! layer can be generic over shapes.

use std::fmt::Write;

/// A `tcgen05.ld/st` shape: lanes × bits per lane of one repetition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmemShape {
    /// 32 lanes × 32 bits: thread t ↔ lane t, one column per repetition.
    S32x32b,
    /// 16 lanes × 64 bits.
    S16x64b,
    /// 16 lanes × 128 bits.
    S16x128b,
    /// 16 lanes × 256 bits (the mma m16n8 C-fragment layout).
    S16x256b,
}

impl TmemShape {
    /// Every shape, in the order they are rendered.
    pub const ALL: [TmemShape; 4] = [TmemShape::S32x32b, TmemShape::S16x64b, TmemShape::S16x128b, TmemShape::S16x256b];

    /// The PTX shape qualifier.
    pub const fn ptx(self) -> &'static str {
        match self {
            TmemShape::S32x32b => "32x32b",
            TmemShape::S16x64b => "16x64b",
            TmemShape::S16x128b => "16x128b",
            TmemShape::S16x256b => "16x256b",
        }
    }

    /// TMEM lanes one warp covers.
    pub const fn lanes(self) -> u32 {
        match self {
            TmemShape::S32x32b => 32,
            _ => 16,
        }
    }

    /// 32-bit TMEM columns one repetition covers.
    pub const fn columns_per_rep(self) -> u32 {
        match self {
            TmemShape::S32x32b => 1,
            TmemShape::S16x64b => 2,
            TmemShape::S16x128b => 4,
            TmemShape::S16x256b => 8,
        }
    }

    /// Registers per thread of one repetition.
    pub const fn regs_per_rep(self) -> u32 {
        match self {
            TmemShape::S32x32b | TmemShape::S16x64b => 1,
            TmemShape::S16x128b => 2,
            TmemShape::S16x256b => 4,
        }
    }

    /// Name of the marker type in the generated file.
    pub const fn marker(self) -> &'static str {
        match self {
            TmemShape::S32x32b => "Tmem32x32b",
            TmemShape::S16x64b => "Tmem16x64b",
            TmemShape::S16x128b => "Tmem16x128b",
            TmemShape::S16x256b => "Tmem16x256b",
        }
    }
}

/// The most registers one form may name (the ISA's limit and our register budget).
pub const MAX_REGS: u32 = 128;

/// Repeat counts the ISA defines.
pub const REPEATS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// One generated form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LdStForm {
    pub shape: TmemShape,
    pub repeat: u32,
}

impl LdStForm {
    /// Registers per thread.
    pub const fn regs(self) -> u32 {
        self.shape.regs_per_rep() * self.repeat
    }

    /// 32-bit columns covered.
    pub const fn columns(self) -> u32 {
        self.shape.columns_per_rep() * self.repeat
    }

    /// `32x32b_x8` — the suffix of the function names.
    pub fn suffix(self) -> String {
        format!("{}_x{}", self.shape.ptx(), self.repeat)
    }
}

/// Every (shape, repeat) with at most [`MAX_REGS`] registers.
pub const TCGEN05_LD_ST_TABLE: [LdStForm; 29] = table();

const fn table() -> [LdStForm; 29] {
    let mut out = [LdStForm { shape: TmemShape::S32x32b, repeat: 1 }; 29];
    let mut n = 0;
    let mut s = 0;
    while s < TmemShape::ALL.len() {
        let mut r = 0;
        while r < REPEATS.len() {
            let form = LdStForm { shape: TmemShape::ALL[s], repeat: REPEATS[r] };
            if form.regs() <= MAX_REGS {
                out[n] = form;
                n += 1;
            }
            r += 1;
        }
        s += 1;
    }
    assert!(n == 29, "table size changed: update TCGEN05_LD_ST_TABLE's length");
    out
}

/// Register counts that need a `RegsN` struct.
fn reg_counts() -> Vec<u32> {
    let mut v: Vec<u32> = TCGEN05_LD_ST_TABLE.iter().map(|f| f.regs()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// `{{{0}, {1}, …}}` for operands `first .. first + n` (braces escaped for `asm!`).
fn operand_list(first: u32, n: u32) -> String {
    let inner: Vec<String> = (first..first + n).map(|i| format!("{{{i}}}")).collect();
    format!("{{{{{}}}}}", inner.join(", "))
}

/// `{r0, …, rN-1}` as the doc shows it.
fn doc_list(n: u32) -> String {
    if n <= 2 { (0..n).map(|i| format!("r{i}")).collect::<Vec<_>>().join(", ") } else { format!("r0, …, r{}", n - 1) }
}

fn render_regs(out: &mut String, n: u32) {
    let fields = vec!["pub u32"; n as usize].join(", ");
    writeln!(out, "/// {n} registers of one `tcgen05.ld/st` form, field i = register i (scalars, so they stay in")
        .unwrap();
    writeln!(out, "/// registers).").unwrap();
    writeln!(out, "#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]").unwrap();
    writeln!(out, "pub struct Regs{n}({fields});\n").unwrap();
    writeln!(out, "impl Regs{n} {{").unwrap();
    writeln!(out, "    /// Calls `f(i, register i)` for every register, in order (constant field accesses, so the")
        .unwrap();
    writeln!(out, "    /// values never go through local memory).").unwrap();
    writeln!(out, "    #[inline(always)]").unwrap();
    writeln!(out, "    pub fn for_each(self, mut f: impl FnMut(u32, u32)) {{").unwrap();
    for i in 0..n {
        writeln!(out, "        f({i}, self.{i});").unwrap();
    }
    writeln!(out, "    }}\n}}\n").unwrap();
}

fn render_form(out: &mut String, f: LdStForm) {
    let n = f.regs();
    let shape = f.shape.ptx();
    let rep = f.repeat;
    let sfx = f.suffix();
    let ld = format!("tcgen05.ld.sync.aligned.{shape}.x{rep}.b32");
    let st = format!("tcgen05.st.sync.aligned.{shape}.x{rep}.b32");
    let outs: String = (0..n).map(|i| format!("out(reg32) r.{i}, ")).collect();
    let ins: String = (0..n).map(|i| format!("in(reg32) v.{i}, ")).collect();

    writeln!(
        out,
        "/// TMEM → registers, {} lanes × {} columns; registers valid only after",
        f.shape.lanes(),
        f.columns()
    )
    .unwrap();
    writeln!(out, "/// [`super::tcgen05::wait_ld`].\n///").unwrap();
    writeln!(out, "/// Emits `{ld} {{{}}}, [taddr];`.\n///", doc_list(n)).unwrap();
    writeln!(out, "/// # Safety\n/// See [`TmemCopy::load`].").unwrap();
    writeln!(out, "#[inline(always)]\npub unsafe fn ld_{sfx}(taddr: u32) -> Regs{n} {{").unwrap();
    writeln!(out, "    let mut r = Regs{n}::default();").unwrap();
    writeln!(out, "    // SAFETY: the caller upholds the warp, lane-quarter and allocation rules.").unwrap();
    writeln!(out, "    unsafe {{").unwrap();
    writeln!(out, "        asm!(\"{ld} {}, [{{{n}}}];\",", operand_list(0, n)).unwrap();
    writeln!(out, "             {outs}in(reg32) taddr, options(nostack))").unwrap();
    writeln!(out, "    }};\n    r\n}}\n").unwrap();

    writeln!(out, "/// TMEM → registers and wait: the registers are valid when this returns.\n///").unwrap();
    writeln!(out, "/// Emits `{ld} {{{}}}, [taddr]; tcgen05.wait::ld.sync.aligned;`.\n///", doc_list(n)).unwrap();
    writeln!(out, "/// # Safety\n/// See [`TmemCopy::load`].").unwrap();
    writeln!(out, "#[inline(always)]\npub unsafe fn ld_wait_{sfx}(taddr: u32) -> Regs{n} {{").unwrap();
    writeln!(out, "    let mut r = Regs{n}::default();").unwrap();
    writeln!(out, "    // SAFETY: the caller upholds the warp, lane-quarter and allocation rules.").unwrap();
    writeln!(out, "    unsafe {{").unwrap();
    writeln!(out, "        asm!(\"{ld} {}, [{{{n}}}]; tcgen05.wait::ld.sync.aligned;\",", operand_list(0, n)).unwrap();
    writeln!(out, "             {outs}in(reg32) taddr, options(nostack))").unwrap();
    writeln!(out, "    }};\n    r\n}}\n").unwrap();

    writeln!(out, "/// Registers → TMEM, {} lanes × {} columns; complete after", f.shape.lanes(), f.columns()).unwrap();
    writeln!(out, "/// [`super::tcgen05::wait_st`].\n///").unwrap();
    writeln!(out, "/// Emits `{st} [taddr], {{{}}};`.\n///", doc_list(n)).unwrap();
    writeln!(out, "/// # Safety\n/// See [`TmemCopy::store`].").unwrap();
    writeln!(out, "#[inline(always)]\npub unsafe fn st_{sfx}(taddr: u32, v: Regs{n}) {{").unwrap();
    writeln!(out, "    // SAFETY: the caller upholds the warp, lane-quarter and allocation rules.").unwrap();
    writeln!(out, "    unsafe {{").unwrap();
    writeln!(out, "        asm!(\"{st} [{{0}}], {};\",", operand_list(1, n)).unwrap();
    writeln!(out, "             in(reg32) taddr, {ins}options(nostack))").unwrap();
    writeln!(out, "    }}\n}}\n").unwrap();

    writeln!(out, "impl TmemCopy for {}<{rep}> {{", f.shape.marker()).unwrap();
    writeln!(out, "    type Regs = Regs{n};").unwrap();
    writeln!(out, "    const LANES: u32 = {};", f.shape.lanes()).unwrap();
    writeln!(out, "    const COLUMNS: u32 = {};", f.columns()).unwrap();
    writeln!(out, "    #[inline(always)]").unwrap();
    writeln!(out, "    unsafe fn load(taddr: u32) -> Regs{n} {{").unwrap();
    writeln!(out, "        // SAFETY: forwarded contract.\n        unsafe {{ ld_{sfx}(taddr) }}\n    }}").unwrap();
    writeln!(out, "    #[inline(always)]").unwrap();
    writeln!(out, "    unsafe fn load_wait(taddr: u32) -> Regs{n} {{").unwrap();
    writeln!(out, "        // SAFETY: forwarded contract.\n        unsafe {{ ld_wait_{sfx}(taddr) }}\n    }}").unwrap();
    writeln!(out, "    #[inline(always)]").unwrap();
    writeln!(out, "    unsafe fn store(taddr: u32, v: Regs{n}) {{").unwrap();
    writeln!(out, "        // SAFETY: forwarded contract.\n        unsafe {{ st_{sfx}(taddr, v) }}\n    }}").unwrap();
    writeln!(out, "}}\n").unwrap();
}

const HEADER: &str = r#"//! Generated by warpforge-codegen (`tcgen05::tcgen05_ld_st_source`) — do not edit; run
//! `WARPFORGE_BLESS=1 cargo test -p warpforge-codegen` after changing the generator.
//!
//! `tcgen05.ld` / `tcgen05.st` (sm_100a) for shapes 32x32b, 16x64b, 16x128b, 16x256b and every
//! repeat count up to 128 registers per thread. Per form: `ld_*` (registers valid after
//! `tcgen05.wait::ld`), `ld_wait_*` (load and wait in one asm block), `st_*` (complete after
//! `tcgen05.wait::st`), and a [`TmemCopy`] impl on the shape's marker type.

use core::arch::asm;

pub use super::tcgen05_copy::{Tmem16x64b, Tmem16x128b, Tmem16x256b, Tmem32x32b, TmemCopy};

"#;

/// The whole generated file.
pub fn tcgen05_ld_st_source() -> String {
    let mut out = String::from(HEADER);
    for n in reg_counts() {
        render_regs(&mut out, n);
    }
    for form in TCGEN05_LD_ST_TABLE {
        render_form(&mut out, form);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn table_respects_the_isa_limits() {
        assert!(TCGEN05_LD_ST_TABLE.iter().all(|f| f.regs() <= MAX_REGS));
        let max_repeat = |s: TmemShape| TCGEN05_LD_ST_TABLE.iter().filter(|f| f.shape == s).map(|f| f.repeat).max();
        assert_eq!(max_repeat(TmemShape::S32x32b), Some(128));
        assert_eq!(max_repeat(TmemShape::S16x64b), Some(128));
        assert_eq!(max_repeat(TmemShape::S16x128b), Some(64));
        assert_eq!(max_repeat(TmemShape::S16x256b), Some(32));
        assert_eq!(reg_counts(), vec![1, 2, 4, 8, 16, 32, 64, 128]);
    }

    #[test]
    fn rendered_forms_name_every_register() {
        let src = tcgen05_ld_st_source();
        assert!(src.contains("tcgen05.ld.sync.aligned.16x256b.x32.b32 {{{0}, {1}, {2},"));
        assert!(src.contains("{127}}}, [{128}]; tcgen05.wait::ld.sync.aligned;"));
        assert!(src.contains("tcgen05.st.sync.aligned.32x32b.x1.b32 [{0}], {{{1}}};"));
        assert!(!src.contains("16x256b.x64") && !src.contains("16x128b.x128"));
        assert_eq!(src.matches("pub unsafe fn ").count(), 3 * TCGEN05_LD_ST_TABLE.len());
    }

    /// The committed file equals the generator output; `WARPFORGE_BLESS=1` rewrites it.
    #[test]
    fn generated_file_is_fresh() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsl/src/ptx/generated/tcgen05_ld_st.rs");
        let fresh = tcgen05_ld_st_source();
        if std::env::var("WARPFORGE_BLESS").is_ok_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &fresh).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == fresh,
            "{} is stale: run WARPFORGE_BLESS=1 cargo test -p warpforge-codegen",
            path.display()
        );
    }
}
