//! One error type for the host runtime, with messages that say what to do.

use cudarc::driver::DriverError;

/// Result alias of the runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a host call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libcuda could not be loaded.
    #[error(
        "no NVIDIA driver found (libcuda.so could not be loaded): install the NVIDIA driver to run kernels; building needs none"
    )]
    NoDriver,
    /// The driver loaded but reports no GPU (or not the requested one).
    #[error("no CUDA device {ordinal} (the driver reports {count})")]
    NoDevice {
        /// Requested ordinal.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// The GPU's architecture has no warpforge module.
    #[error(
        "unsupported GPU {name} (compute capability {major}.{minor}): warpforge ships PTX for sm_90a (Hopper, 9.0) and sm_100a (Blackwell, 10.0)"
    )]
    UnsupportedArch {
        /// Device name.
        name: String,
        /// CC major.
        major: u32,
        /// CC minor.
        minor: u32,
    },
    /// The driver refused to JIT-load a module.
    #[error("the driver could not load the {arch} PTX module: {source}{}", if log.is_empty() { String::new() } else { format!("\n{log}") })]
    ModuleLoad {
        /// Arch of the module.
        arch: &'static str,
        /// Driver error.
        source: DriverError,
        /// JIT error log.
        log: String,
    },
    /// A kernel name is not in the module.
    #[error("kernel `{0}` is not in the loaded module")]
    UnknownKernel(String),
    /// A launch would break the kernel's launch contract.
    #[error("launch of `{kernel}` refused: {reason}")]
    LaunchContract {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A caller argument is invalid (shape, length, alignment, dtype).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A tensor map could not be built (a TMA rule or the driver refused it).
    #[error("tensor map: {0}")]
    TensorMap(#[from] crate::tensor_map::TensorMapError),
    /// A driver call failed.
    #[error("CUDA driver call `{call}` failed: {source}")]
    Driver {
        /// The call.
        call: &'static str,
        /// The driver's error.
        source: DriverError,
    },
}

impl From<DriverError> for Error {
    /// A driver error from a cudarc call the caller made (allocation, copy).
    fn from(source: DriverError) -> Self {
        Error::Driver { call: "cudarc", source }
    }
}

/// Adds the name of the driver call to a cudarc result.
pub(crate) trait DriverContext<T> {
    fn during(self, call: &'static str) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn during(self, call: &'static str) -> Result<T> {
        self.map_err(|source| Error::Driver { call, source })
    }
}
