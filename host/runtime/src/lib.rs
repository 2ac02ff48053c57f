//! warpforge's host runtime: from a PTX module to a checked kernel launch, on cudarc.
//!
//! cudarc gives the driver API with dynamic loading (so everything builds without a CUDA
//! toolkit) and the buffer types Rust ML code already uses. This crate adds what kernels of
//! the Hopper/Blackwell kind need on top, in layers with one job each:
//!
//! * [`device`] — a [`Device`] with the attributes kernels are planned from (SM count, compute
//!   capability, shared memory opt-in, L2 size, cluster support), and a clean error when no
//!   driver or GPU is present.
//! * [`module`] — a [`Module`] loaded from the PTX built for the device's arch, and its
//!   [`Kernel`]s with their launch directives read from the PTX itself.
//! * [`launch`] — [`LaunchConfig`] and [`KernelArgs`]; [`Kernel::launch`] checks the kernel's
//!   launch contract (block shape, shared memory, cluster shape) before the one unsafe driver
//!   call, `cuLaunchKernelEx`, which covers plain and cluster launches alike.
//! * [`planner`] — persistent-grid sizing from SM count, occupancy and max active clusters.
//! * [`typed`] — launches of an entry typed by its parameter list (`warpforge_abi::Entry`),
//!   checked against the PTX's declared parameter sizes when the entry is looked up.
//! * [`tensor_map`] — TMA descriptors over `cuTensorMapEncodeTiled`, every driver rule checked
//!   before the call.
//!
//! Every fallible call returns [`Error`], whose messages say what to do.

pub mod device;
pub mod error;
pub mod launch;
pub mod module;
pub mod planner;
pub mod ptx_info;
pub mod tensor_map;
pub mod typed;

pub use cudarc;
pub use device::{Device, DeviceAttributes};
pub use error::{Error, Result};
pub use launch::{KernelArgs, KernelParam, LaunchConfig};
pub use module::{Kernel, Module, ModuleImage, PtxSet};
pub use planner::{GridPlan, plan_persistent_grid};
pub use tensor_map::{TensorMapBuilder, TensorMapError, TmaElement};
pub use typed::{Arg, BufferElement, LaunchArgs, Param, ParamList, TypedKernel};
/// The pure logic both halves compile: tile descriptions (`logic::tile_spec`), swizzles, schedules.
pub use warpforge_logic as logic;
