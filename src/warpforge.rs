//! [`Warpforge`]: warpforge's kernels loaded on one device, and the per-device state the
//! entry points share (the stream-K workspace cache).
//!
//! The entry points live with their kernels: `gemm.rs` (`gemm`, `gemm_plan`), `swiglu.rs`
//! (`swiglu`, `swiglu_plan`), `kernels.rs` (`saxpy`, `silu_mul`, `vector_add_f32`, `sum_f32`,
//! `persistent_visit`). Each looks its kernel up through [`Warpforge::entry`], typed by the
//! entry's parameter list, so no launch names a kernel by a free string or pushes parameters
//! by position.

use warpforge_abi::Entry;
use warpforge_host::{Device, Module, ParamList, Result, TypedKernel};

use crate::ptx;

/// warpforge's kernels loaded on one device.
#[derive(Clone, Debug)]
pub struct Warpforge {
    module: Module,
    sm_count: u32,
    stream_k: crate::gemm::StreamKCache,
}

impl Warpforge {
    /// Loads the embedded PTX for `device`'s arch (a clear error on any other GPU).
    pub fn new(device: &Device) -> Result<Self> {
        let module = Module::load(device, &ptx::SET)?;
        Ok(Warpforge { module, sm_count: device.attributes().sm_count, stream_k: Default::default() })
    }

    /// The loaded module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The GEMM's per-stream stream-K buffers.
    pub(crate) fn stream_k_cache(&self) -> &crate::gemm::StreamKCache {
        &self.stream_k
    }

    /// Streaming multiprocessors of the device.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// The kernel `entry`, its PTX parameters checked against the entry's list.
    pub(crate) fn entry<L: ParamList>(&self, entry: Entry<L>) -> Result<TypedKernel<L>> {
        self.module.entry(entry)
    }
}
