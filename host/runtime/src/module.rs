//! PTX modules per arch, loaded for the device they run on, and their kernels.

use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, DriverError};

use crate::device::{Device, DeviceAttributes};
use crate::error::{DriverContext, Error, Result};
use crate::ptx_info::{EntryDirectives, entry_directives};

/// The GPU architectures warpforge builds PTX for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Hopper, arch-specific features (H100, H200).
    Sm90a,
    /// Blackwell datacenter, arch-specific features (B200).
    Sm100a,
}

impl Arch {
    /// PTX target name.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
        }
    }

    /// The arch whose module runs on compute capability `cc`. Arch-specific (`a`) PTX runs only
    /// on exactly its major.minor: 9.0 for sm_90a, 10.0 for sm_100a.
    pub const fn for_compute_capability(cc: (u32, u32)) -> Option<Arch> {
        match cc {
            (9, 0) => Some(Arch::Sm90a),
            (10, 0) => Some(Arch::Sm100a),
            _ => None,
        }
    }
}

/// PTX sources, one per arch (usually `include_str!` of the builder's output).
#[derive(Clone, Copy, Debug, Default)]
pub struct PtxSet {
    sm90a: Option<&'static str>,
    sm100a: Option<&'static str>,
}

impl PtxSet {
    /// An empty set.
    pub const fn new() -> Self {
        PtxSet { sm90a: None, sm100a: None }
    }

    /// Adds the module for `arch`.
    pub const fn with(mut self, arch: Arch, ptx: &'static str) -> Self {
        match arch {
            Arch::Sm90a => self.sm90a = Some(ptx),
            Arch::Sm100a => self.sm100a = Some(ptx),
        }
        self
    }

    /// The module for `arch`, if present.
    pub const fn get(&self, arch: Arch) -> Option<&'static str> {
        match arch {
            Arch::Sm90a => self.sm90a,
            Arch::Sm100a => self.sm100a,
        }
    }
}

pub(crate) struct LoadedModule {
    pub(crate) context: Arc<CudaContext>,
    handle: sys::CUmodule,
}

// SAFETY: a CUmodule handle may be used from any thread once its context is bound; every use
// here binds the context first.
unsafe impl Send for LoadedModule {}
// SAFETY: as above; the handle is never mutated after load.
unsafe impl Sync for LoadedModule {}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        // Errors at unload cannot be reported from drop; the context keeps a record of them.
        let _ = self.context.bind_to_thread();
        // SAFETY: the handle came from cuModuleLoadDataEx and is unloaded exactly once.
        let _ = unsafe { sys::cuModuleUnload(self.handle) };
    }
}

/// A PTX module JIT-loaded onto one device.
#[derive(Clone)]
pub struct Module {
    inner: Arc<LoadedModule>,
    arch: Arch,
    entries: Arc<Vec<EntryDirectives>>,
    device: DeviceAttributes,
    /// Kernels already looked up: a later lookup returns the same handle with its cached
    /// attributes, so a launch path costs no driver queries after the first call.
    kernels: Arc<Mutex<Vec<Kernel>>>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("arch", &self.arch).field("entries", &self.entries.len()).finish()
    }
}

impl Module {
    /// Loads the module of `set` that matches `device`'s compute capability.
    pub fn load(device: &Device, set: &PtxSet) -> Result<Self> {
        let attrs = device.attributes();
        let (major, minor) = attrs.compute_capability;
        let unsupported = || Error::UnsupportedArch { name: attrs.name.clone(), major, minor };
        let arch = Arch::for_compute_capability(attrs.compute_capability).ok_or_else(unsupported)?;
        let ptx = set.get(arch).ok_or_else(unsupported)?;
        let context = device.context().clone();
        context.bind_to_thread().during("cuCtxSetCurrent")?;
        let handle =
            load_with_log(ptx).map_err(|(source, log)| Error::ModuleLoad { arch: arch.name(), source, log })?;
        Ok(Module {
            inner: Arc::new(LoadedModule { context, handle }),
            arch,
            entries: Arc::new(entry_directives(ptx)),
            device: attrs.clone(),
            kernels: Arc::default(),
        })
    }

    /// The arch of the loaded PTX.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Names of the kernels in the module.
    pub fn kernel_names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// Looks up a kernel by name (once per module: later calls return the same handle).
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let mut known = self.kernels.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(kernel) = known.iter().find(|k| k.name() == name) {
            return Ok(kernel.clone());
        }
        let directives =
            self.entries.iter().find(|e| e.name == name).cloned().ok_or_else(|| Error::UnknownKernel(name.into()))?;
        let c_name = CString::new(name).map_err(|_| Error::UnknownKernel(name.into()))?;
        self.inner.context.bind_to_thread().during("cuCtxSetCurrent")?;
        let mut function: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module handle is live (held by `inner`), `c_name` is NUL-terminated and
        // `function` is a valid out-pointer.
        unsafe { sys::cuModuleGetFunction(&mut function, self.inner.handle, c_name.as_ptr()) }
            .result()
            .during("cuModuleGetFunction")?;
        let kernel = Kernel {
            module: self.inner.clone(),
            function,
            directives,
            device: self.device.clone(),
            opted_in_smem: Arc::new(std::sync::atomic::AtomicU32::new(0)),
            static_smem: Arc::new(OnceLock::new()),
            occupancy: Arc::default(),
        };
        known.push(kernel.clone());
        Ok(kernel)
    }
}

/// ((threads per block, dynamic shared bytes), blocks per SM).
pub(crate) type OccupancyEntry = ((u32, u32), u32);

/// A kernel entry of a loaded module: its handle and its launch contract.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) module: Arc<LoadedModule>,
    pub(crate) function: sys::CUfunction,
    pub(crate) directives: EntryDirectives,
    pub(crate) device: DeviceAttributes,
    /// Largest dynamic shared memory already opted into (the attribute is set once per size).
    pub(crate) opted_in_smem: Arc<std::sync::atomic::AtomicU32>,
    /// Static shared memory, read from the driver once.
    pub(crate) static_smem: Arc<OnceLock<u32>>,
    /// Blocks per SM by (threads, dynamic shared memory), from the occupancy calculator once
    /// per launch shape.
    pub(crate) occupancy: Arc<Mutex<Vec<OccupancyEntry>>>,
}

// SAFETY: a CUfunction is usable from any thread with its context bound; launches bind it.
unsafe impl Send for Kernel {}
// SAFETY: as above; the handle is immutable.
unsafe impl Sync for Kernel {}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("directives", &self.directives).finish()
    }
}

impl Kernel {
    /// The entry name.
    pub fn name(&self) -> &str {
        &self.directives.name
    }

    /// Launch directives read from the PTX.
    pub fn directives(&self) -> &EntryDirectives {
        &self.directives
    }

    /// Attributes of the device the module was loaded on.
    pub fn device_attributes(&self) -> &DeviceAttributes {
        &self.device
    }

    /// Registers per thread after JIT (`CU_FUNC_ATTRIBUTE_NUM_REGS`).
    pub fn registers(&self) -> Result<u32> {
        self.attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)
    }

    /// Static shared memory in bytes (`CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`).
    pub fn static_shared_bytes(&self) -> Result<u32> {
        if let Some(&bytes) = self.static_smem.get() {
            return Ok(bytes);
        }
        let bytes = self.attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        Ok(*self.static_smem.get_or_init(|| bytes))
    }

    pub(crate) fn attribute(&self, which: sys::CUfunction_attribute) -> Result<u32> {
        self.module.context.bind_to_thread().during("cuCtxSetCurrent")?;
        let mut value = 0i32;
        // SAFETY: `function` is live while `module` is held; `value` is a valid out-pointer.
        unsafe { sys::cuFuncGetAttribute(&mut value, which, self.function) }.result().during("cuFuncGetAttribute")?;
        Ok(value.max(0) as u32)
    }
}

const LOG_BYTES: usize = 16 * 1024;

fn load_with_log(ptx: &str) -> std::result::Result<sys::CUmodule, (DriverError, String)> {
    let image = CString::new(ptx).map_err(|_| {
        (DriverError(sys::cudaError_enum::CUDA_ERROR_INVALID_IMAGE), "PTX contains a NUL byte".to_string())
    })?;
    let mut log = vec![0u8; LOG_BYTES];
    let mut options =
        [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values = [log.as_mut_ptr() as *mut c_void, LOG_BYTES as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `image` is a NUL-terminated PTX string; the option arrays have matching lengths
    // and the log buffer outlives the call; the context is bound by the caller.
    let result = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image.as_ptr() as *const c_void,
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    result.result().map(|()| module).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        (e, String::from_utf8_lossy(&log[..end]).into_owned())
    })
}
