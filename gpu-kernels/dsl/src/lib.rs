//! warpforge's device DSL: what a `#![no_std]` kernel crate builds on.
//!
//! rustc's NVPTX backend compiles ordinary Rust to PTX but knows nothing of Hopper's async
//! machinery, and `asm!` on nvptx is easy to get subtly wrong (no predicate register class,
//! generic vs shared addresses, what is `pure`). This crate holds that knowledge once:
//!
//! * [`ptx`] (L0) — one `unsafe fn` per PTX instruction form, each documented with the exact
//!   PTX it emits and a `# Safety` list. It is the only module that contains `asm!`.
//! * L1 primitives built on it, safe where the type carries the invariant: [`thread`] (indices,
//!   warp/lane/warpgroup ids), [`shared`] (dynamic and static shared memory), [`sync`]
//!   (block and named barriers, fences), [`warp`] (shuffle, reductions and scans, vote, match,
//!   elect), [`block`] (block reductions), [`atomic`], [`time`], [`math`] (IEEE and approximate
//!   functions), [`num`] (bf16/f16/FP8 and their paired conversions), [`global`] (16-byte vector
//!   access with cache policies), [`regs`] (register arrays that stay in registers), [`mma`]
//!   (warp-level `mma.sync` on fragments each thread loads from global memory).
//! * Hopper async machinery, typed: [`mbarrier`] (`Mbarrier` + `Phase`), [`tile`] (`SmemTile`
//!   with its swizzle in the type, building its wgmma descriptor), [`pipeline`]
//!   (`Pipeline<STAGES>` whose expect-tx bytes come from the tile types), [`tma`], and the
//!   scopes [`cluster`] and [`warpgroup`] (wgmma, register reallocation).
//! * [`parts`] (L3) — what GEMM-like kernels are assembled from: the mainloop collective
//!   (TMA ring producer, wgmma consumer with its release protocol), tile schedulers, epilogues
//!   that see accumulator fragments with coordinates, the stream-K hand-over.
//! * [`logic`] — the pure index and scheduling code that the host tests on the CPU.
//!
//! A kernel is an `unsafe fn` under [`kernel`], which carries its launch attributes into the PTX.
//! The crate using it needs `#![no_std]` and `#![feature(abi_ptx)]` and is built with the
//! `warpforge-builder` crate from a build script.
#![no_std]
#![feature(asm_experimental_arch, core_float_math, link_llvm_intrinsics)]
// `link_llvm_intrinsics` is rustc-internal: the raw layer declares LLVM's convergent NVVM barrier
// intrinsics with it (`ptx::bar`), which `asm!` cannot express.
#![allow(internal_features)]

pub mod atomic;
pub mod blackwell;
pub mod block;
pub mod cluster;
pub mod global;
pub mod math;
pub mod mbarrier;
pub mod mma;
pub mod num;
pub mod parts;
pub mod pipeline;
pub mod ptx;
pub mod reduce;
pub mod regs;
pub mod shared;
pub mod sync;
pub mod thread;
pub mod tile;
pub mod time;
pub mod tma;
pub mod warp;
pub mod warpgroup;

pub use warpforge_abi as abi;
pub use warpforge_logic as logic;
pub use warpforge_macros::kernel;

/// A device panic cannot unwind or print: it aborts the grid with `trap`, which the host sees
/// as `CUDA_ERROR_ILLEGAL_INSTRUCTION` at the next synchronisation.
#[cfg(feature = "panic-handler")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    ptx::misc::trap()
}
