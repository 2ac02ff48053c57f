//! Checked kernel launches (plain and cluster) through `cuLaunchKernelEx`.
//!
//! A launch is the unsafe boundary of the whole stack: the driver copies raw parameter bytes
//! and the kernel dereferences whatever pointers it is given. Everything that can be checked
//! on the host is checked first — parameter count, block shape against `.reqntid`/`.maxntid`,
//! dynamic shared memory against the device's opt-in limit, cluster shape against
//! `.reqnctapercluster` and the grid — and refused with [`Error::LaunchContract`].

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::error::{DriverContext, Error, Result};
use crate::module::Kernel;

/// Dynamic shared memory a block may use without opting in.
pub const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;
/// Largest cluster the hardware guarantees (larger ones need the non-portable opt-in).
pub const MAX_PORTABLE_CLUSTER_SIZE: u32 = 8;

/// Grid, block, shared memory and cluster shape of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid dimension.
    pub grid: [u32; 3],
    /// Threads per block dimension.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem: u32,
    /// Cluster shape, if a cluster launch.
    pub cluster: Option<[u32; 3]>,
    /// A programmatic dependent launch: the grid may start while the stream's previous
    /// kernel still runs (once that kernel's blocks have all triggered or exited), and waits
    /// for its completion at `griddepcontrol.wait`. Refused for kernels whose body has no such
    /// wait ([`EntryDirectives::waits_for_prerequisite_grids`](crate::ptx_info::EntryDirectives)).
    pub programmatic: bool,
}

impl LaunchConfig {
    /// A 1-D launch of `grid` blocks of `block` threads, no shared memory, no cluster.
    pub const fn linear(grid: u32, block: u32) -> Self {
        LaunchConfig { grid: [grid, 1, 1], block: [block, 1, 1], dynamic_smem: 0, cluster: None, programmatic: false }
    }

    /// With `bytes` of dynamic shared memory.
    pub const fn with_dynamic_smem(mut self, bytes: u32) -> Self {
        self.dynamic_smem = bytes;
        self
    }

    /// As a cluster launch of shape `cluster`.
    pub const fn with_cluster(mut self, cluster: [u32; 3]) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// As a programmatic dependent launch when `programmatic` (see [`LaunchConfig::programmatic`]).
    pub const fn with_programmatic_dependency(mut self, programmatic: bool) -> Self {
        self.programmatic = programmatic;
        self
    }

    /// Threads per block.
    pub const fn threads_per_block(&self) -> u64 {
        self.block[0] as u64 * self.block[1] as u64 * self.block[2] as u64
    }
}

/// A 128-byte, 64-byte-aligned slot: room for any parameter, including a `CUtensorMap`.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct ParamSlot([u8; 128]);

/// Kernel parameters in declaration order, copied into stable storage for the driver, and the
/// stream-ordering guards of the buffers they address.
///
/// cudarc orders work on several streams with a read and a write event per buffer: taking a
/// buffer's address ([`DevicePtr::device_ptr`]) makes the stream wait for the buffer's earlier
/// writers, and dropping the returned [`SyncOnDrop`] guard records the event that later users
/// of the buffer on other streams wait for. The guard must therefore drop *after* the kernel is
/// enqueued, or the event marks only the work before it. `KernelArgs<'a>` keeps every guard of
/// [`push_buffer`](Self::push_buffer) / [`push_buffer_mut`](Self::push_buffer_mut) (and any
/// given to [`keep`](Self::keep)) until it is dropped; [`Kernel::launch`] consumes it and drops
/// it after the enqueue. The lifetime also keeps the buffers borrowed while the arguments exist:
///
/// ```compile_fail,E0597
/// # fn demo(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> Result<(), Box<dyn std::error::Error>> {
/// let mut args = warpforge_host::KernelArgs::new();
/// {
///     let x = stream.alloc_zeros::<f32>(16)?;
///     args.push_buffer(&x, stream); // x is dropped while `args` still holds its guard
/// }
/// args.push(16u64);
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct KernelArgs<'a> {
    slots: Vec<ParamSlot>,
    guards: Vec<SyncOnDrop<'a>>,
    /// The stream each buffer's address was taken on: a launch on another stream is refused.
    streams: Vec<usize>,
    /// The context of each buffer: a launch in another context is refused.
    contexts: Vec<usize>,
}

impl<'a> KernelArgs<'a> {
    /// No parameters yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a plain-data parameter (a scalar, a `#[repr(C)]` struct, a tensor map).
    pub fn push<T: KernelParam>(&mut self, value: T) -> &mut Self {
        let mut slot = ParamSlot([0; 128]);
        let size = std::mem::size_of::<T>();
        assert!(size <= 128, "a kernel parameter is at most 128 bytes");
        // SAFETY: `T: KernelParam` has no padding-dependent invariants; `size <= 128` bytes are copied
        // into the slot, which does not overlap `value`.
        unsafe { std::ptr::copy_nonoverlapping(&value as *const T as *const u8, slot.0.as_mut_ptr(), size) };
        self.slots.push(slot);
        self
    }

    /// Appends the device address of a buffer the kernel only reads, taken on `stream` (which
    /// must be the launch's stream). Its read guard is held until `self` drops.
    pub fn push_buffer<T>(&mut self, buffer: &'a impl DevicePtr<T>, stream: &'a CudaStream) -> &mut Self {
        self.note_buffer(buffer.stream(), stream);
        let (ptr, guard) = buffer.device_ptr(stream);
        self.guards.push(guard);
        self.push(ptr)
    }

    /// Appends the device address of a buffer the kernel writes, taken on `stream` (which must
    /// be the launch's stream). Its write guard is held until `self` drops.
    pub fn push_buffer_mut<T>(&mut self, buffer: &'a mut impl DevicePtrMut<T>, stream: &'a CudaStream) -> &mut Self {
        self.note_buffer(buffer.stream(), stream);
        let (ptr, guard) = buffer.device_ptr_mut(stream);
        self.guards.push(guard);
        self.push(ptr)
    }

    /// Holds a guard of an address the caller took itself (one inside a parameter struct or a
    /// tensor map) until `self` drops, i.e. until after the launch that borrows `self`.
    pub fn keep(&mut self, guard: SyncOnDrop<'a>) -> &mut Self {
        self.guards.push(guard);
        self
    }

    /// [`keep`](Self::keep)s each guard of `guards`.
    pub fn extend_guards(&mut self, guards: impl IntoIterator<Item = SyncOnDrop<'a>>) -> &mut Self {
        self.guards.extend(guards);
        self
    }

    /// Stream-ordering guards held (one per buffer pushed or kept).
    pub fn guards_held(&self) -> usize {
        self.guards.len()
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True with no parameters.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn note_buffer(&mut self, owner: &Arc<CudaStream>, stream: &CudaStream) {
        // Handles as integers: only compared, never dereferenced (and `KernelArgs` stays `Send`).
        self.streams.push(stream.cu_stream() as usize);
        self.contexts.push(owner.context().cu_ctx() as usize);
    }

    fn pointers(&mut self) -> Vec<*mut c_void> {
        self.slots.iter_mut().map(|s| s.0.as_mut_ptr() as *mut c_void).collect()
    }
}

/// A value that can be copied byte-for-byte into a kernel parameter.
///
/// # Safety
/// Implement only for primitive or `#[repr(C)]` types with no host references, whose every
/// byte pattern is a value the kernel accepts, and whose size is at most 128 bytes.
pub unsafe trait KernelParam: Copy + 'static {}

macro_rules! kernel_param {
    ($($t:ty),*) => {$(
        // SAFETY: primitive numeric type.
        unsafe impl KernelParam for $t {}
    )*};
}
kernel_param!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, half::bf16, half::f16);
// SAFETY: 128 opaque bytes written by the driver.
unsafe impl KernelParam for warpforge_abi::TensorMap {}
// SAFETY: #[repr(C)] struct of u32 fields.
unsafe impl KernelParam for warpforge_abi::TileVisit {}
// SAFETY: #[repr(C)] struct of integers, floats and device addresses (96 bytes); the launcher
// that fills it vouches for the addresses.
unsafe impl KernelParam for warpforge_abi::GemmParams {}
// SAFETY: #[repr(C)] struct of u32 fields and one #[repr(u32)] enum (52 bytes); a TilePlan is
// only made from `Rasterization` and `StreamKScheduler` values, whose fields are private to
// their checked constructors, so the enum holds a valid discriminant. That the plan matches the
// launch's grid is the launcher's contract.
unsafe impl KernelParam for warpforge_abi::TilePlan {}
// SAFETY: #[repr(C)] struct of two device addresses and two u32 (24 bytes); the launcher that
// fills it vouches for the addresses.
unsafe impl KernelParam for warpforge_abi::BlockScaleParams {}
// SAFETY: #[repr(C)] struct of two u32, a device address and two u64 strides (32 bytes, no
// padding); the kernel clamps every value it reads through the address (an index or a count) to
// the tensors, and the launcher vouches for the address and the strides.
unsafe impl KernelParam for warpforge_abi::GroupedParams {}
// SAFETY: #[repr(C)] struct of u64 sizes and device addresses (80 bytes), as above.
unsafe impl KernelParam for warpforge_abi::PackParams {}
// SAFETY: #[repr(C)] struct of u64 pitches and device addresses and two u32 (56 bytes), as
// above.
unsafe impl KernelParam for warpforge_abi::SkinnyOperands {}
// SAFETY: #[repr(C)] struct of u64 steps and device addresses and two u32 (72 bytes), as above.
unsafe impl KernelParam for warpforge_abi::DecodeOperands {}
// SAFETY: #[repr(C)] struct of device addresses, u32 and one f32 (64 bytes, no padding), as
// above.
unsafe impl KernelParam for warpforge_abi::AttentionParams {}
// SAFETY: #[repr(C)] struct of a device address and three u64 element strides (32 bytes), as
// above.
unsafe impl KernelParam for warpforge_abi::DecodeTensor {}
// SAFETY: #[repr(C)] struct of device addresses, u32 and one f32 (88 bytes, no padding), as
// above.
unsafe impl KernelParam for warpforge_abi::AttentionDecodeParams {}

impl Kernel {
    /// Checks `config` against this kernel's launch contract and the device, without launching.
    pub fn check_launch(&self, config: &LaunchConfig, arg_count: usize) -> Result<()> {
        let refuse = |reason: String| Err(Error::LaunchContract { kernel: self.name().to_string(), reason });
        let d = &self.directives;
        if arg_count != d.param_count {
            return refuse(format!("{arg_count} arguments given, the kernel takes {}", d.param_count));
        }
        if config.grid.contains(&0) || config.block.contains(&0) {
            return refuse(format!("empty grid {:?} or block {:?}", config.grid, config.block));
        }
        if config.grid[1] > 65535 || config.grid[2] > 65535 {
            return refuse(format!("grid {:?}: y and z are limited to 65535", config.grid));
        }
        let threads = config.threads_per_block();
        if threads > self.device.max_threads_per_block as u64 {
            return refuse(format!(
                "{threads} threads per block exceed the device's {}",
                self.device.max_threads_per_block
            ));
        }
        if let Some(req) = d.reqntid
            && config.block != req
        {
            return refuse(format!("block {:?} but the kernel requires exactly {req:?} (.reqntid)", config.block));
        }
        if let Some(max) = d.maxntid {
            let bound = max.iter().map(|&v| v as u64).product::<u64>();
            if threads > bound {
                return refuse(format!("{threads} threads per block exceed the kernel's bound {max:?} (.maxntid)"));
            }
        }
        let static_smem = self.static_shared_bytes()?;
        let limit = self.device.max_shared_per_block_optin.saturating_sub(static_smem);
        if config.dynamic_smem > limit {
            return refuse(format!(
                "{} B of dynamic shared memory; the device allows {} B per block ({} B static already)",
                config.dynamic_smem, limit, static_smem
            ));
        }
        let cluster = match (config.cluster, d.reqnctapercluster) {
            (Some(given), Some(required)) if given != required => {
                return refuse(format!("cluster {given:?} but the kernel is compiled for {required:?}"));
            }
            (given, required) => given.or(required),
        };
        if config.programmatic && !d.waits_for_prerequisite_grids {
            return refuse(
                "a programmatic dependent launch, but the kernel never waits for the previous grid \
                 (no griddepcontrol.wait in its body)"
                    .into(),
            );
        }
        if d.explicit_cluster && cluster.is_none() {
            return refuse("the kernel must be launched as a cluster (.explicitcluster)".into());
        }
        if let Some(c) = cluster {
            if !self.device.cluster_launch {
                return refuse("the device does not support cluster launches".into());
            }
            let size = c.iter().map(|&v| v as u64).product::<u64>();
            if c.contains(&0) || size > MAX_PORTABLE_CLUSTER_SIZE as u64 {
                return refuse(format!("cluster {c:?}: 1 to {MAX_PORTABLE_CLUSTER_SIZE} blocks per cluster"));
            }
            if (0..3).any(|i| !config.grid[i].is_multiple_of(c[i])) {
                return refuse(format!("grid {:?} is not a multiple of the cluster {c:?}", config.grid));
            }
        }
        Ok(())
    }

    /// Launches the kernel on `stream` after [`Kernel::check_launch`].
    ///
    /// # Safety
    /// 1. `args` matches the kernel's parameter list in order, size and meaning.
    /// 2. Every device pointer in `args` is valid for every access the kernel makes with the
    ///    given launch shape, and stays valid until the kernel completes.
    /// 3. No other work accesses written buffers concurrently, unless the kernel's contract
    ///    allows it.
    ///
    /// Refused with [`Error::InvalidArgument`] (before any driver call): a `stream` of another
    /// CUDA context than the module's, a buffer pushed with [`KernelArgs::push_buffer`] /
    /// [`KernelArgs::push_buffer_mut`] that belongs to another context, or whose address was
    /// taken on another stream than `stream`. `args` is consumed: its stream-ordering guards
    /// drop (recording cudarc's events) after `cuLaunchKernelEx` has enqueued the kernel.
    pub unsafe fn launch(&self, stream: &CudaStream, config: &LaunchConfig, mut args: KernelArgs<'_>) -> Result<()> {
        self.check_launch(config, args.len())?;
        self.check_context(stream)?;
        let ctx = self.module.context.cu_ctx() as usize;
        if args.contexts.iter().any(|&c| c != ctx) {
            return Err(Error::InvalidArgument(format!(
                "a buffer passed to `{}` belongs to another CUDA context than the module's",
                self.name()
            )));
        }
        if args.streams.iter().any(|&s| s != stream.cu_stream() as usize) {
            return Err(Error::InvalidArgument(format!(
                "a buffer passed to `{}` was bound to another stream than the launch's",
                self.name()
            )));
        }
        self.module.context.bind_to_thread().during("cuCtxSetCurrent")?;
        self.opt_into_dynamic_smem(config.dynamic_smem)?;
        let mut attrs: Vec<sys::CUlaunchAttribute> = Vec::new();
        if let Some([x, y, z]) = config.cluster {
            // SAFETY: CUlaunchAttribute is a plain C struct/union; all-zero is a valid start.
            let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            a.value.clusterDim.x = x;
            a.value.clusterDim.y = y;
            a.value.clusterDim.z = z;
            attrs.push(a);
        }
        if config.programmatic {
            // SAFETY: as above.
            let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            a.value.programmaticStreamSerializationAllowed = 1;
            attrs.push(a);
        }
        let launch = sys::CUlaunchConfig {
            gridDimX: config.grid[0],
            gridDimY: config.grid[1],
            gridDimZ: config.grid[2],
            blockDimX: config.block[0],
            blockDimY: config.block[1],
            blockDimZ: config.block[2],
            sharedMemBytes: config.dynamic_smem,
            hStream: stream.cu_stream(),
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        };
        let mut params = args.pointers();
        // SAFETY: the function handle is live (its module is held by `self`); `launch` and the
        // attribute array outlive the call; `params` points at `args.len()` slots, each holding
        // a parameter of the kernel's declared size (caller's contract 1); the driver copies the
        // parameter bytes before returning.
        let status =
            unsafe { sys::cuLaunchKernelEx(&launch, self.function, params.as_mut_ptr(), std::ptr::null_mut()) };
        let launched = status.result().during("cuLaunchKernelEx");
        // Only now, with the kernel enqueued, may the guards record their events.
        drop(args);
        launched
    }

    /// Refuses `stream` unless it belongs to this kernel's CUDA context (the module's).
    /// Handles of one driver context compare equal: a second `CudaContext::new(ordinal)`
    /// retains the same primary context, and its streams are accepted.
    pub fn check_context(&self, stream: &CudaStream) -> Result<()> {
        if **stream.context() == *self.module.context {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "the stream passed to `{}` belongs to another CUDA context than the module's",
            self.name()
        )))
    }

    pub(crate) fn opt_into_dynamic_smem(&self, bytes: u32) -> Result<()> {
        if bytes <= DEFAULT_DYNAMIC_SMEM_LIMIT || bytes <= self.opted_in_smem.load(Ordering::Acquire) {
            return Ok(());
        }
        // SAFETY: live function handle; the value was checked against the device limit.
        unsafe {
            sys::cuFuncSetAttribute(
                self.function,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .result()
        .during("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")?;
        self.opted_in_smem.fetch_max(bytes, Ordering::AcqRel);
        Ok(())
    }
}
