//! What in a ptxas report fails the build.
//!
//! - **Local memory** (a non-zero stack frame in an entry or in a function it calls, or a stack
//!   ptxas cannot bound) fails by default: per-thread data that fell out of registers costs a
//!   round trip through L1/L2 on every access, and in a wgmma kernel it usually means an
//!   accumulator array. An entry opts out with `Builder::allow_stack_frame` or
//!   `WARPFORGE_ALLOW_STACK_FRAME` (a comma-separated list of entry or function names; `*` for all).
//! - **Spills** (entry or callee) fail with `WARPFORGE_DENY_SPILLS=1` / `Builder::deny_spills`,
//!   even in an allow-listed entry. Without it a spill still fails through its stack frame unless
//!   the entry is allow-listed.
//! - **wgmma serialisation** (ptxas's `C75xx Potential Performance Loss: wgmma.mma_async
//!   instructions are serialized …`) is always reported and fails with spills denied: like a
//!   spill it is a performance verdict on code that is correct, and the strict mode is where
//!   warpforge's CI and an author who wants the guarantee opt into performance failures.

use super::report::{KernelReport, PtxasReport};

/// The checks a module's ptxas report must pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checks {
    /// Fail on any spill and on wgmma serialisation.
    pub deny_spills: bool,
    /// Entries (or called functions) allowed a stack frame; `*` allows every one.
    pub allow_stack_frame: Vec<String>,
}

/// Why an entry's data usually ends up in local memory, and what to do, for the error message.
const STACK_CAUSES: &str = "usually a Rust array indexed by a runtime value or walked by a loop \
     LLVM did not fully unroll, an array or struct passed by reference to a function that was not \
     inlined, or register spills; keep per-thread values in scalars or tuple structs and unroll \
     loops over them with constant bounds";

impl Checks {
    fn allows_stack(&self, name: &str) -> bool {
        self.allow_stack_frame.iter().any(|a| a == "*" || a == name)
    }

    /// Every problem in `report`, one per line; `Ok` when there is none.
    pub fn verdict(&self, report: &PtxasReport) -> Result<(), String> {
        let mut problems = Vec::new();
        for k in &report.kernels {
            if !self.allows_stack(&k.name) && uses_local_memory(k) {
                problems.push(format!(
                    "entry `{0}` uses {1} of local memory per thread ({2}): {STACK_CAUSES}; or allow it with \
                     Builder::allow_stack_frame(\"{0}\") / WARPFORGE_ALLOW_STACK_FRAME={0}",
                    k.name,
                    k.local_bytes()
                        .map_or("an unbounded amount (recursion or an indirect call)".into(), |b| format!("{b} B")),
                    frames(k),
                ));
            }
            let (stores, loads) = k.total_spills();
            if self.deny_spills && stores + loads > 0 {
                problems.push(format!(
                    "entry `{}` spills registers ({stores} B stores, {loads} B loads; {}) (spills are denied: WARPFORGE_DENY_SPILLS=1 or Builder::deny_spills)",
                    k.name,
                    frames(k)
                ));
            }
            if self.deny_spills && !k.wgmma_serialized.is_empty() {
                problems.push(format!(
                    "entry `{}`: ptxas serialized its wgmma ({}) (spills are denied: WARPFORGE_DENY_SPILLS=1 or Builder::deny_spills)",
                    k.name,
                    k.wgmma_serialized.join("; ")
                ));
            }
        }
        for f in report.unattributed() {
            if f.stack_frame > 0 && !self.allows_stack(&f.name)
                || self.deny_spills && f.spill_stores + f.spill_loads > 0
            {
                problems.push(format!(
                    "function `{0}` (called by no entry the PTX names: an indirect call?) has a {1} B stack frame \
                     and spills {2}/{3} B: {STACK_CAUSES}; or allow it with WARPFORGE_ALLOW_STACK_FRAME={0}",
                    f.name, f.stack_frame, f.spill_stores, f.spill_loads
                ));
            }
        }
        let entries = |f: &str| report.kernels.iter().any(|k| k.name == f || k.callees.iter().any(|c| c.name == f));
        for (function, note) in report.wgmma_serialized.iter().filter(|(f, _)| !entries(f)) {
            if self.deny_spills {
                problems.push(format!("function `{function}`: ptxas serialized its wgmma ({note})"));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
    }
}

fn uses_local_memory(k: &KernelReport) -> bool {
    k.local_bytes() != Some(0) || k.callees.iter().any(|c| c.stack_frame > 0)
}

/// `own stack frame 0 B, callee f 400 B (spills 144/144 B)`.
fn frames(k: &KernelReport) -> String {
    let mut s = format!("own stack frame {} B, spills {}/{} B", k.stack_frame, k.spill_stores, k.spill_loads);
    for c in k.callees.iter().filter(|c| c.stack_frame + c.spill_stores + c.spill_loads > 0) {
        s.push_str(&format!(
            "; callee `{}` stack frame {} B, spills {}/{} B",
            c.name, c.stack_frame, c.spill_stores, c.spill_loads
        ));
    }
    s
}
