//! PTX modules per arch, loaded for the device they run on, and their kernels.

use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaStream, DriverError};

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

/// PTX sources, one per arch (usually `include_str!` of the builder's output), and optionally
/// the same modules pre-assembled by ptxas (cubins).
///
/// A cubin is loaded instead of its PTX when the device is exactly that arch's compute
/// capability: it skips the driver's JIT, which for a large module costs minutes on a machine
/// whose JIT cache is cold. The PTX stays the source of the entries' launch directives and is
/// the fallback when the driver refuses the cubin.
#[derive(Clone, Copy, Debug, Default)]
pub struct PtxSet {
    sm90a: Option<&'static str>,
    sm100a: Option<&'static str>,
    sm90a_cubin: Option<&'static [u8]>,
    sm100a_cubin: Option<&'static [u8]>,
}

impl PtxSet {
    /// An empty set.
    pub const fn new() -> Self {
        PtxSet { sm90a: None, sm100a: None, sm90a_cubin: None, sm100a_cubin: None }
    }

    /// Adds the module for `arch`.
    pub const fn with(mut self, arch: Arch, ptx: &'static str) -> Self {
        match arch {
            Arch::Sm90a => self.sm90a = Some(ptx),
            Arch::Sm100a => self.sm100a = Some(ptx),
        }
        self
    }

    /// Adds the cubin ptxas assembled from `arch`'s PTX (an empty slice adds nothing, so a
    /// build without ptxas can pass whatever it has).
    pub const fn with_cubin(mut self, arch: Arch, cubin: &'static [u8]) -> Self {
        let cubin = if cubin.is_empty() { None } else { Some(cubin) };
        match arch {
            Arch::Sm90a => self.sm90a_cubin = cubin,
            Arch::Sm100a => self.sm100a_cubin = cubin,
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

    /// The cubin for `arch`, if present.
    pub const fn cubin(&self, arch: Arch) -> Option<&'static [u8]> {
        match arch {
            Arch::Sm90a => self.sm90a_cubin,
            Arch::Sm100a => self.sm100a_cubin,
        }
    }
}

/// What a [`Module`] was loaded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleImage {
    /// The pre-assembled cubin: no JIT.
    Cubin,
    /// The PTX, compiled by the driver's JIT (or taken from its cache).
    Ptx,
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
    image: ModuleImage,
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
        // The cubin when there is one; the PTX when there is none or the driver refuses it.
        let cubin = set.cubin(arch).and_then(|cubin| load_with_log(Image::Cubin(cubin)).ok());
        let (handle, image) = match cubin {
            Some(handle) => (handle, ModuleImage::Cubin),
            None => {
                let handle = load_with_log(Image::Ptx(ptx)).map_err(|(source, log)| Error::ModuleLoad {
                    arch: arch.name(),
                    source,
                    log,
                })?;
                (handle, ModuleImage::Ptx)
            }
        };
        Ok(Module {
            inner: Arc::new(LoadedModule { context, handle }),
            arch,
            image,
            entries: Arc::new(entry_directives(ptx)),
            device: attrs.clone(),
            kernels: Arc::default(),
        })
    }

    /// The CUDA context the module is loaded in.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.context
    }

    /// Refuses `stream`, or a buffer allocated on one of `buffer_streams`, unless it belongs
    /// to this module's CUDA context. Handles of one driver context compare equal (a second
    /// `CudaContext::new(ordinal)` retains the same primary context and is accepted).
    pub fn check_context(&self, stream: &CudaStream, buffer_streams: &[&CudaStream]) -> Result<()> {
        let ours = &*self.inner.context;
        if **stream.context() != *ours {
            return Err(Error::InvalidArgument("the stream belongs to another CUDA context than warpforge's".into()));
        }
        if buffer_streams.iter().any(|s| **s.context() != *ours) {
            return Err(Error::InvalidArgument("a buffer belongs to another CUDA context than warpforge's".into()));
        }
        Ok(())
    }

    /// The arch of the loaded PTX.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Whether the module came from its cubin or from the PTX through the driver's JIT.
    pub fn image(&self) -> ModuleImage {
        self.image
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

/// A module image for `cuModuleLoadDataEx`.
enum Image<'a> {
    Ptx(&'a str),
    Cubin(&'a [u8]),
}

fn load_with_log(image: Image<'_>) -> std::result::Result<sys::CUmodule, (DriverError, String)> {
    // PTX must be NUL-terminated; a cubin is an ELF image whose headers give its size.
    let (ptx_text, aligned);
    let data: *const c_void = match image {
        Image::Ptx(ptx) => {
            ptx_text = CString::new(ptx).map_err(|_| {
                (DriverError(sys::cudaError_enum::CUDA_ERROR_INVALID_IMAGE), "PTX contains a NUL byte".to_string())
            })?;
            ptx_text.as_ptr() as *const c_void
        }
        Image::Cubin(cubin) => {
            // An 8-byte-aligned copy: the driver parses the ELF headers in place, and an
            // `include_bytes!` slice carries no alignment.
            aligned = aligned_copy(cubin);
            aligned.as_ptr() as *const c_void
        }
    };
    let mut log = vec![0u8; LOG_BYTES];
    let mut options =
        [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values = [log.as_mut_ptr() as *mut c_void, LOG_BYTES as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `data` points at a NUL-terminated PTX string or at a whole cubin (ELF) image, both
    // alive for the call; the option arrays have matching lengths and the log buffer outlives
    // the call; the context is bound by the caller.
    let result = unsafe {
        sys::cuModuleLoadDataEx(&mut module, data, options.len() as u32, options.as_mut_ptr(), values.as_mut_ptr())
    };
    result.result().map(|()| module).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        (e, String::from_utf8_lossy(&log[..end]).into_owned())
    })
}

/// `bytes` in 8-byte-aligned storage (the same bytes in memory order, zero-padded to 8).
fn aligned_copy(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks(8).map(|c| c.iter().rev().fold(0u64, |word, &b| word << 8 | b as u64).to_le()).collect()
}

#[cfg(test)]
mod tests {
    use super::aligned_copy;

    #[test]
    fn aligned_copy_keeps_the_bytes_in_order() {
        let bytes: Vec<u8> = (1..=19).collect();
        let words = aligned_copy(&bytes);
        assert_eq!(words.len(), 3);
        let back: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(&back[..19], &bytes[..]);
        assert_eq!(&back[19..], &[0, 0, 0, 0, 0]);
    }
}
