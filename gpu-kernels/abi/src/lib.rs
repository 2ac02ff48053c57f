//! The data that crosses the launch boundary, defined once for both sides.
//!
//! Kernel parameters are passed by the driver as raw bytes in declaration order; a struct
//! defined twice (once for the kernel, once for the host) drifts. Every type here is
//! `#[repr(C)]`, `Copy`, and compiled into both the PTX and the host crate, and the host's
//! launchers name each kernel's parameter list once (see `warpforge::kernels`).
#![no_std]

/// The 128-byte opaque image that `cuTensorMapEncodeTiled` writes.
///
/// Kernels take it as `#[grid_constant] map: &TensorMap` (the builder turns that parameter into
/// a by-value, 64-byte-aligned `.param` the TMA unit can read), and the host passes the
/// 128 bytes by value.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMap {
    /// Driver-defined contents; never interpreted by warpforge.
    pub opaque: [u64; 16],
}

impl TensorMap {
    /// An all-zero image (not a valid map; for initialisation before encoding).
    pub const ZEROED: TensorMap = TensorMap { opaque: [0; 16] };
}

/// What the persistent-scheduler test kernel records per tile.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TileVisit {
    /// How many times the tile was processed (must end at exactly 1).
    pub count: u32,
    /// Block index of the last worker that processed it.
    pub worker: u32,
    /// Iteration of that worker's loop in which it did.
    pub iteration: u32,
    /// SM that worker ran on (diagnostics).
    pub sm: u32,
}

/// Names of the kernels in warpforge's own PTX modules, shared by the kernel crate (through
/// its `#[kernel]` function names) and the host launchers.
pub mod entries {
    /// `y = a·x + y`, f32.
    pub const SAXPY_F32: &str = "saxpy_f32";
    /// `y = a·x + y`, bf16 storage, f32 arithmetic.
    pub const SAXPY_BF16: &str = "saxpy_bf16";
    /// `y = a·x + y`, f16 storage, f32 arithmetic.
    pub const SAXPY_F16: &str = "saxpy_f16";
    /// `out = a + b`, f32.
    pub const VECTOR_ADD_F32: &str = "vector_add_f32";
    /// Per-block sums of an f32 vector (warp shuffles + shared memory).
    pub const BLOCK_SUM_F32: &str = "block_sum_f32";
    /// Persistent loop over a tile grid with the static scheduler, recording each visit.
    pub const PERSISTENT_STATIC_VISIT: &str = "persistent_static_visit";
}
