//! warpforge: GPU kernels written in Rust, compiled to PTX, launched through a safe typed API.
//!
//! For a Rust service: add `warpforge`, build with stable Rust (no CUDA toolkit; the PTX ships
//! inside the crate), and at run time only the NVIDIA driver is needed.
//!
//! ```no_run
//! use warpforge::{Device, Warpforge};
//! # fn main() -> Result<(), warpforge::Error> {
//! let device = Device::new(0)?;                 // a clean error without driver or GPU
//! let wf = Warpforge::new(&device)?;            // loads the PTX for this GPU's arch
//! let stream = device.stream();
//! let x = stream.clone_htod(&[1.0f32, 2.0, 3.0])?;
//! let mut y = stream.clone_htod(&[10.0f32, 20.0, 30.0])?;
//! wf.saxpy(stream, 2.0, &x, &mut y)?;           // y = 2·x + y
//! # Ok(()) }
//! ```
//!
//! # The safe API's promise
//!
//! Any argument a caller can construct makes a safe call return `Ok` with a correct result or
//! a typed [`Error`] (usually [`Error::InvalidArgument`]) — never a panic, a hang, a GPU fault or
//! undefined behaviour. Sizes are validated with checked arithmetic before any launch
//! ([`GemmProblem::check`], [`SwigluProblem::check`]: pure, CPU-testable); the element traits
//! are sealed to the types the kernels are compiled for; streams and buffers of another CUDA
//! context are refused; and the buffers' stream-ordering guards (cudarc's read/write events)
//! are held until the kernel is enqueued, so other streams wait for it. The unsafe layer under
//! it, [`host`]'s `Kernel::launch`, states what it cannot check as its `# Safety` contract.
//!
//! For a kernel author: the same runtime ([`host`]) launches kernels from your own `no_std`
//! device crate, built by `warpforge-builder` from your build.rs (see `examples/custom-kernel`).

pub mod attention;
pub mod gemm;
pub mod gemm_fp8;
pub mod gemm_grouped;
pub mod kernels;
pub mod ptx;
pub mod quant;
mod sealed;
pub mod swiglu;
mod warpforge;

pub use attention::{
    AttentionElement, AttentionExtents, AttentionProblem, AttentionSpans, AttentionStrides, AttentionVarlenProblem,
    AttentionVarlenStrides, RowStrides, TensorStrides,
};
pub use gemm::{
    COperand, Clusters, Consumers, Cores, Epilogue, GemmExtents, GemmPath, GemmPlan, GemmProblem, KSplit, Layout,
    PlanSource, PlanTable, TileWidth,
};
pub use gemm_fp8::{Fp8GemmExtents, Fp8GemmProblem};
pub use gemm_grouped::{
    ContiguousRows, GroupedContiguousProblem, GroupedExtents, GroupedMaskedProblem, check_contiguous_indices,
};
pub use quant::{DequantOutput, Fp8Format, QuantExtents, QuantInput, QuantScheme, ScaleRounding};
pub use swiglu::{SwigluExtents, SwigluProblem, interleave_gate_up};
pub use warpforge::Warpforge;
pub use warpforge_abi as abi;
pub use warpforge_abi::Activation;
pub use warpforge_host as host;
pub use warpforge_host::{Device, DeviceAttributes, Error, GridPlan, Result};
pub use warpforge_logic as logic;
