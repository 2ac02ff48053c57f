//! A CUDA device and the attributes kernels are planned from.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaStream};

use crate::error::{DriverContext, Error, Result};

/// What warpforge reads from a device before planning or launching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAttributes {
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Largest dynamic shared memory a block may opt into, bytes.
    pub max_shared_per_block_optin: u32,
    /// Shared memory per SM, bytes.
    pub max_shared_per_sm: u32,
    /// L2 cache size, bytes.
    pub l2_bytes: u32,
    /// Whether cluster launches are supported.
    pub cluster_launch: bool,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// Global memory, bytes.
    pub total_memory: usize,
}

/// A GPU with its context and a default stream.
#[derive(Clone, Debug)]
pub struct Device {
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    attributes: DeviceAttributes,
}

impl Device {
    /// Opens device `ordinal`. Fails cleanly (no panic) without a driver or device.
    pub fn new(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        let count = CudaContext::device_count().during("cuDeviceGetCount")? as usize;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let context = CudaContext::new(ordinal).during("cuDevicePrimaryCtxRetain")?;
        let stream = context.default_stream();
        let attributes = read_attributes(&context)?;
        Ok(Device { context, stream, attributes })
    }

    /// Wraps a context the caller already has (e.g. one shared with candle or cubecl).
    pub fn from_context(context: Arc<CudaContext>) -> Result<Self> {
        let stream = context.default_stream();
        let attributes = read_attributes(&context)?;
        Ok(Device { context, stream, attributes })
    }

    /// The attributes read at open time.
    pub fn attributes(&self) -> &DeviceAttributes {
        &self.attributes
    }

    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The default stream of the context.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

/// True when libcuda can be loaded (cudarc would panic on first use otherwise).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library; no driver call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

fn read_attributes(context: &Arc<CudaContext>) -> Result<DeviceAttributes> {
    let get = |a: Attr| -> Result<u32> { Ok(context.attribute(a).during("cuDeviceGetAttribute")?.max(0) as u32) };
    Ok(DeviceAttributes {
        name: context.name().during("cuDeviceGetName")?,
        compute_capability: (
            get(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            get(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: get(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_shared_per_block_optin: get(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        max_shared_per_sm: get(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        l2_bytes: get(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        cluster_launch: get(Attr::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0,
        max_threads_per_sm: get(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        max_threads_per_block: get(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_blocks_per_sm: get(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        total_memory: context.total_mem().during("cuDeviceTotalMem")?,
    })
}
