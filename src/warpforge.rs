//! [`Warpforge`]: warpforge's kernels loaded on one device, and the per-device state the
//! entry points share (the stream-K workspace and attention counter caches).
//!
//! The entry points live with their kernels: `gemm.rs` (`gemm`, `gemm_plan`), `swiglu.rs`
//! (`swiglu`, `swiglu_plan`), `kernels.rs` (`saxpy`, `silu_mul`, `vector_add_f32`, `sum_f32`,
//! `persistent_visit`). Each looks its kernel up through [`Warpforge::entry`], typed by the
//! entry's parameter list, so no launch names a kernel by a free string or pushes parameters
//! by position.

use std::sync::Arc;

use warpforge_abi::Entry;
use warpforge_host::{Device, Module, ParamList, Result, TypedKernel};

use crate::gemm::tuned::{PlanTable, shipped_table};
use crate::ptx;

/// warpforge's kernels loaded on one device.
#[derive(Clone, Debug)]
pub struct Warpforge {
    module: Module,
    sm_count: u32,
    stream_k: crate::gemm::StreamKCache,
    attention_counters: crate::attention::TileCounterCache,
    l2_bytes: u32,
    device_name: String,
    plan_table: Option<Arc<PlanTable>>,
    programmatic_launch: bool,
}

impl Warpforge {
    /// Loads the embedded PTX for `device`'s arch (a clear error on any other GPU).
    pub fn new(device: &Device) -> Result<Self> {
        let module = Module::load(device, &ptx::SET)?;
        let attributes = device.attributes();
        let plan_table = shipped_table(&attributes.name, attributes.sm_count).map(Arc::new);
        Ok(Warpforge {
            module,
            sm_count: attributes.sm_count,
            stream_k: Default::default(),
            attention_counters: Default::default(),
            l2_bytes: attributes.l2_bytes,
            device_name: attributes.name.clone(),
            plan_table,
            programmatic_launch: false,
        })
    }

    /// The GEMM plan table in use: the shipped table measured on this device's model (by name
    /// and SM count), one set with [`Warpforge::set_plan_table`], or none (the cost model
    /// plans every call).
    pub fn plan_table(&self) -> Option<&PlanTable> {
        self.plan_table.as_deref()
    }

    /// Replaces the GEMM plan table: a table tuned on this GPU (`examples/tune.rs` writes one;
    /// [`PlanTable::parse`] checks it), or `None` for the cost model alone. A table measured on
    /// another device model is refused.
    pub fn set_plan_table(&mut self, table: Option<PlanTable>) -> Result<()> {
        if let Some(t) = &table {
            let name = &self.device_name;
            if t.sms != self.sm_count || t.device != *name {
                return Err(warpforge_host::Error::InvalidArgument(format!(
                    "plan table measured on {} ({} SMs), this device is {name} ({} SMs)",
                    t.device, t.sms, self.sm_count
                )));
            }
        }
        self.plan_table = table.map(Arc::new);
        Ok(())
    }

    /// Whether the kernels that wait for their predecessor (the FP8 GEMM) are launched as
    /// programmatic dependent launches (off unless set).
    pub fn programmatic_launch(&self) -> bool {
        self.programmatic_launch
    }

    /// Launches the kernels that wait for their predecessor (the FP8 GEMM) as programmatic
    /// dependent launches: each may start on the SMs the stream's previous kernel frees, its
    /// prologue (barrier set-up, tensor-map prefetch, register split) under that kernel's tail,
    /// and waits for the previous kernel's completion before its first global access. Results
    /// are the same either way; what changes is the gap between back-to-back kernels.
    pub fn set_programmatic_launch(&mut self, on: bool) {
        self.programmatic_launch = on;
    }

    /// The loaded module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The GEMM's per-stream stream-K buffers.
    pub(crate) fn stream_k_cache(&self) -> &crate::gemm::StreamKCache {
        &self.stream_k
    }

    /// The persistent attention grid's per-stream claim counters.
    pub(crate) fn attention_counters(&self) -> &crate::attention::TileCounterCache {
        &self.attention_counters
    }

    /// L2 cache of the device, bytes.
    pub(crate) fn l2_bytes(&self) -> u64 {
        self.l2_bytes as u64
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
