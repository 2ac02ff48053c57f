//! L0: raw PTX, one `unsafe fn` per instruction form (the only module with `asm!`).
//!
//! Every function is `#[inline(always)]`, its doc line says the exact PTX it emits, and its
//! `# Safety` section lists what the caller must guarantee. Conventions (REFERENCE §15.2):
//! predicates never cross the `asm!` boundary (nvptx has no predicate register class), so they
//! are created and consumed inside `{ }` scopes; shared-memory operands are 32-bit
//! shared-window addresses; side-effect-free reads are `pure, nomem`.

pub mod atomic;
pub mod bar;
pub mod clc;
pub mod cluster;
pub mod cvt;
pub mod fence;
pub mod global;
pub mod math;
pub mod mbarrier;
pub mod misc;
pub mod mma;
pub mod smem;
pub mod sreg;
pub mod tcgen05;
pub mod tcgen05_copy;
#[rustfmt::skip]
#[path = "generated/tcgen05_ld_st.rs"]
pub mod tcgen05_ld_st;
pub mod tma;
pub mod warp;
pub mod warpgroup;
#[path = "generated/wgmma.rs"]
pub mod wgmma;
pub mod wgmma_forms;
