//! Tensor maps (TMA descriptors): a typed builder over `cuTensorMapEncodeTiled`.
//!
//! A TMA copy reads a 128-byte descriptor that the driver encodes on the host. The driver
//! answers a bad request with a bare `CUDA_ERROR_INVALID_VALUE` and no hint of which of its
//! dozen rules was broken, and some mistakes (a descriptor wider than its buffer) are not
//! caught at all and fault later on the GPU. So every documented rule is checked here first,
//! in [`TensorMapBuilder::validate`], a pure function that the CPU tests cover one rule at a
//! time; each broken rule has its own [`TensorMapError`]. The element type is a type parameter
//! ([`TmaElement`]) so the data type, element size and buffer type cannot disagree.
//!
//! Dimension order is the driver's: index 0 is the innermost (contiguous) dimension. Only
//! non-interleaved layouts are supported, which is what every warpforge kernel uses.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DriverError, SyncOnDrop};
use warpforge_logic::tile_spec::TileLayout;

mod spec;
pub use spec::HostElement;

/// The encoded descriptor, exactly as kernels take it (`#[grid_constant] map: &TensorMap`).
pub use warpforge_abi::TensorMap;

/// Highest tensor rank TMA supports.
pub const MAX_RANK: usize = 5;
/// Required alignment of the global address without interleave, in bytes.
pub const GLOBAL_ADDRESS_ALIGN: u64 = 16;
/// Largest extent of one global dimension.
pub const MAX_GLOBAL_DIM: u64 = 1 << 32;
/// Global strides are multiples of this many bytes.
pub const GLOBAL_STRIDE_ALIGN: u64 = 16;
/// Global strides are strictly below this many bytes.
pub const GLOBAL_STRIDE_LIMIT: u64 = 1 << 40;
/// Largest box extent in one dimension, in elements.
pub const MAX_BOX_DIM: u32 = 256;
/// The inner box row is a multiple of this many bytes.
pub const INNER_BOX_ALIGN: u64 = 16;
/// Largest element stride (traversal step) in one dimension.
pub const MAX_ELEMENT_STRIDE: u32 = 8;

// The driver writes a `CUtensorMap`; kernels take the ABI type. Both are the same 128 bytes.
const _: () = assert!(size_of::<TensorMap>() == size_of::<sys::CUtensorMap>());

/// A Rust type that TMA can copy, with the driver's name for it.
///
/// FP8 (E4M3, E5M2) and other byte formats travel as [`u8`]: TMA only moves bytes and never
/// converts, so the byte type gives the right element size.
///
/// Sealed: the bounds checks of [`TensorMapBuilder::encode`] trust `SIZE` and `DATA_TYPE`, so
/// only the types below, whose size and driver type agree, implement it:
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Mine(u8);
/// impl warpforge_host::TmaElement for Mine {
///     const DATA_TYPE: cudarc::driver::sys::CUtensorMapDataType =
///         cudarc::driver::sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
/// }
/// ```
pub trait TmaElement: sealed::Sealed + Copy {
    /// The driver's data type.
    const DATA_TYPE: CUtensorMapDataType;
    /// Size of one element in bytes.
    const SIZE: u64 = size_of::<Self>() as u64;
}

mod sealed {
    /// Implemented for [`super::TmaElement`]'s types only.
    pub trait Sealed {}
}

macro_rules! tma_element {
    ($($ty:ty => $variant:ident),* $(,)?) => {
        $(impl sealed::Sealed for $ty {}
        impl TmaElement for $ty {
            const DATA_TYPE: CUtensorMapDataType = CUtensorMapDataType::$variant;
        })*
    };
}

tma_element! {
    u8 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
    u16 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
    u32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
    i32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
    u64 => CU_TENSOR_MAP_DATA_TYPE_UINT64,
    i64 => CU_TENSOR_MAP_DATA_TYPE_INT64,
    half::f16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    half::bf16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    f32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    f64 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
}

/// How the TMA unit permutes 16-byte chunks of a box row in shared memory. This is the logic
/// crate's type, the one the kernels' shared-memory tiles and matrix descriptors are built from,
/// so a map and the tile it fills name their layout the same way.
pub use warpforge_logic::swizzle::Swizzle;

/// The span in bytes that one box row may not exceed, or `None` when the layout has no limit
/// (no swizzle: the logic type reports a 16-byte core-matrix row there, which is no box limit).
const fn swizzle_span_limit(swizzle: Swizzle) -> Option<u64> {
    match swizzle {
        Swizzle::None => None,
        Swizzle::B32 | Swizzle::B64 | Swizzle::B128 => Some(swizzle.span_bytes() as u64),
    }
}

/// The driver's name for a swizzle mode.
const fn swizzle_to_driver(swizzle: Swizzle) -> CUtensorMapSwizzle {
    match swizzle {
        Swizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// How far past each request the L2 fetches (larger sectors help streaming GEMM operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L2Promotion {
    /// No promotion.
    None,
    /// 64-byte promotion.
    B64,
    /// 128-byte promotion.
    B128,
    /// 256-byte promotion (default).
    B256,
}

impl L2Promotion {
    const fn to_driver(self) -> CUtensorMapL2promotion {
        match self {
            L2Promotion::None => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            L2Promotion::B64 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
            L2Promotion::B128 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            L2Promotion::B256 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        }
    }
}

/// What a load returns for elements outside the global tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OobFill {
    /// Zeros (default): ragged edges of a GEMM contribute nothing.
    Zeros,
    /// NaN, which FMA treats as zero (`NAN_REQUEST_ZERO_FMA`); floating-point types only.
    NanRequestZeroFma,
}

impl OobFill {
    const fn to_driver(self) -> CUtensorMapFloatOOBfill {
        match self {
            OobFill::Zeros => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            OobFill::NanRequestZeroFma => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
        }
    }
}

/// Which per-dimension list a [`TensorMapError::LengthMismatch`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DimList {
    /// Global strides (`rank − 1` entries).
    GlobalStrides,
    /// Box dimensions (`rank` entries).
    BoxDims,
    /// Element strides (`rank` entries).
    ElementStrides,
}

/// A tensor-map request that breaks a driver rule, or the driver's own refusal.
#[derive(Debug, thiserror::Error)]
pub enum TensorMapError {
    /// The rank must be 1..=5.
    #[error("tensor rank {rank} is outside 1..={MAX_RANK}")]
    RankOutOfRange {
        /// The rank asked for.
        rank: usize,
    },
    /// A per-dimension list has the wrong length for the rank.
    #[error("{list:?} has {got} entries, rank needs {expected}")]
    LengthMismatch {
        /// Which list.
        list: DimList,
        /// Entries needed.
        expected: usize,
        /// Entries given.
        got: usize,
    },
    /// The global address is not 16-byte aligned.
    #[error("global address {address:#x} is not {GLOBAL_ADDRESS_ALIGN}-byte aligned")]
    MisalignedAddress {
        /// The address.
        address: u64,
    },
    /// A global dimension is zero.
    #[error("global dimension {dim} is zero")]
    ZeroGlobalDim {
        /// Dimension index (0 = innermost).
        dim: usize,
    },
    /// A global dimension exceeds 2^32 elements.
    #[error("global dimension {dim} has {extent} elements, more than 2^32")]
    GlobalDimTooLarge {
        /// Dimension index.
        dim: usize,
        /// Its extent.
        extent: u64,
    },
    /// A global stride is not a multiple of 16 bytes.
    #[error("global stride of dimension {dim} is {stride} bytes, not a multiple of {GLOBAL_STRIDE_ALIGN}")]
    MisalignedGlobalStride {
        /// Dimension index the stride steps (1..rank).
        dim: usize,
        /// The stride in bytes.
        stride: u64,
    },
    /// A global stride is 2^40 bytes or more.
    #[error("global stride of dimension {dim} is {stride} bytes, not below 2^40")]
    GlobalStrideTooLarge {
        /// Dimension index the stride steps (1..rank).
        dim: usize,
        /// The stride in bytes.
        stride: u64,
    },
    /// A box dimension is 0 or above 256.
    #[error("box dimension {dim} is {extent}, outside 1..={MAX_BOX_DIM}")]
    BoxDimOutOfRange {
        /// Dimension index.
        dim: usize,
        /// Its extent in elements.
        extent: u32,
    },
    /// The inner box row is not a multiple of 16 bytes.
    #[error("inner box row is {bytes} bytes, not a multiple of {INNER_BOX_ALIGN}")]
    MisalignedInnerBox {
        /// Row size in bytes.
        bytes: u64,
    },
    /// The inner box row is wider than the swizzle span.
    #[error("inner box row is {bytes} bytes, wider than the {span}-byte swizzle span")]
    InnerBoxExceedsSwizzle {
        /// Row size in bytes.
        bytes: u64,
        /// The swizzle span in bytes.
        span: u64,
    },
    /// An element stride is 0 or above 8.
    #[error("element stride of dimension {dim} is {stride}, outside 1..={MAX_ELEMENT_STRIDE}")]
    ElementStrideOutOfRange {
        /// Dimension index.
        dim: usize,
        /// The stride.
        stride: u32,
    },
    /// The tensor described reaches past the end of the buffer.
    #[error("tensor spans {required} bytes but the buffer holds {available}")]
    OutOfBounds {
        /// Bytes from the base address to one past the last element.
        required: u128,
        /// Bytes in the buffer.
        available: u64,
    },
    /// The box or swizzle disagrees with the tile the map was built for
    /// ([`TensorMapBuilder::for_tile`], [`TensorMapBuilder::expect_tile`]).
    #[error(
        "box {box_dims:?} (innermost first) with {swizzle:?} swizzle does not load tile {tile:?}: expected box [cols, rows, 1, …] and the tile's swizzle"
    )]
    TileMismatch {
        /// The tile the kernel's shared memory holds.
        tile: TileLayout,
        /// The map's box.
        box_dims: Vec<u32>,
        /// The map's swizzle.
        swizzle: Swizzle,
    },
    /// The driver refused a request that passed every check here.
    #[error("cuTensorMapEncodeTiled failed: {0}")]
    Driver(#[from] DriverError),
}

/// A tiled tensor-map request for elements of type `T`, checked before it is encoded.
///
/// Lists are innermost dimension first. Defaults: packed global strides (each dimension
/// directly after the previous one), element strides 1, no swizzle, 256-byte L2 promotion,
/// zero fill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapBuilder<T: TmaElement> {
    rank: usize,
    global_dims: [u64; MAX_RANK],
    /// `global_strides[i]` is the byte step of dimension `i + 1`.
    global_strides: [u64; MAX_RANK - 1],
    strides_given: usize,
    box_dims: [u32; MAX_RANK],
    box_given: usize,
    element_strides: [u32; MAX_RANK],
    element_strides_given: usize,
    swizzle: Swizzle,
    l2_promotion: L2Promotion,
    oob_fill: OobFill,
    /// The tile the map must load, when built from a tile description.
    tile: Option<TileLayout>,
    element: PhantomData<T>,
}

/// Copies up to `MAX_RANK` entries; the length check happens in `validate`.
fn copy_prefix<V: Copy + Default, const N: usize>(from: &[V]) -> [V; N] {
    let mut to = [V::default(); N];
    for (slot, &value) in to.iter_mut().zip(from) {
        *slot = value;
    }
    to
}

impl<T: TmaElement> TensorMapBuilder<T> {
    /// A map over a tensor of extents `global_dims` read in boxes of `box_dims` elements.
    pub fn new(global_dims: &[u64], box_dims: &[u32]) -> Self {
        let global: [u64; MAX_RANK] = copy_prefix(global_dims);
        // Packed strides; saturating so an oversized request fails validation, not here.
        let mut strides = [0u64; MAX_RANK - 1];
        let mut step = T::SIZE;
        for (i, stride) in strides.iter_mut().enumerate() {
            step = step.saturating_mul(global[i]);
            *stride = step;
        }
        TensorMapBuilder {
            rank: global_dims.len(),
            global_dims: global,
            global_strides: strides,
            strides_given: global_dims.len().saturating_sub(1),
            box_dims: copy_prefix(box_dims),
            box_given: box_dims.len(),
            element_strides: [1; MAX_RANK],
            element_strides_given: global_dims.len(),
            swizzle: Swizzle::None,
            l2_promotion: L2Promotion::B256,
            oob_fill: OobFill::Zeros,
            tile: None,
            element: PhantomData,
        }
    }

    /// A row-major `rows × cols` matrix whose rows are `row_stride` elements apart, read in
    /// `box_rows × box_cols` boxes. (TMA order: dimension 0 is the column.)
    pub fn row_major_2d(rows: u64, cols: u64, row_stride: u64, box_rows: u32, box_cols: u32) -> Self {
        Self::new(&[cols, rows], &[box_cols, box_rows]).global_strides(&[row_stride.saturating_mul(T::SIZE)])
    }

    /// Byte strides of dimensions `1..rank` (`rank − 1` entries).
    pub fn global_strides(mut self, bytes: &[u64]) -> Self {
        self.global_strides = copy_prefix(bytes);
        self.strides_given = bytes.len();
        self
    }

    /// Traversal steps in elements, per dimension (`rank` entries).
    pub fn element_strides(mut self, strides: &[u32]) -> Self {
        self.element_strides = copy_prefix(strides);
        self.element_strides_given = strides.len();
        self
    }

    /// The shared-memory swizzle.
    pub fn swizzle(mut self, swizzle: Swizzle) -> Self {
        self.swizzle = swizzle;
        self
    }

    /// The L2 promotion.
    pub fn l2_promotion(mut self, promotion: L2Promotion) -> Self {
        self.l2_promotion = promotion;
        self
    }

    /// The out-of-bounds fill.
    pub fn oob_fill(mut self, fill: OobFill) -> Self {
        self.oob_fill = fill;
        self
    }

    /// Bytes of shared memory one box occupies (the expect-tx count of one copy).
    pub fn box_bytes(&self) -> u64 {
        let dims = &self.box_dims[..self.rank.min(MAX_RANK)];
        dims.iter().fold(T::SIZE, |acc, &d| acc.saturating_mul(u64::from(d)))
    }

    /// Checks every driver rule for a tensor at `address` in a buffer of `available_bytes`,
    /// without calling the driver. Returns the first rule broken.
    pub fn validate(&self, address: u64, available_bytes: u64) -> Result<(), TensorMapError> {
        let rank = self.rank;
        if !(1..=MAX_RANK).contains(&rank) {
            return Err(TensorMapError::RankOutOfRange { rank });
        }
        for (list, expected, got) in [
            (DimList::GlobalStrides, rank - 1, self.strides_given),
            (DimList::BoxDims, rank, self.box_given),
            (DimList::ElementStrides, rank, self.element_strides_given),
        ] {
            if got != expected {
                return Err(TensorMapError::LengthMismatch { list, expected, got });
            }
        }
        self.check_tile()?;
        if !address.is_multiple_of(GLOBAL_ADDRESS_ALIGN) {
            return Err(TensorMapError::MisalignedAddress { address });
        }
        for (dim, &extent) in self.global_dims[..rank].iter().enumerate() {
            if extent == 0 {
                return Err(TensorMapError::ZeroGlobalDim { dim });
            }
            if extent > MAX_GLOBAL_DIM {
                return Err(TensorMapError::GlobalDimTooLarge { dim, extent });
            }
        }
        for (i, &stride) in self.global_strides[..rank - 1].iter().enumerate() {
            let dim = i + 1;
            if !stride.is_multiple_of(GLOBAL_STRIDE_ALIGN) {
                return Err(TensorMapError::MisalignedGlobalStride { dim, stride });
            }
            if stride >= GLOBAL_STRIDE_LIMIT {
                return Err(TensorMapError::GlobalStrideTooLarge { dim, stride });
            }
        }
        for (dim, &extent) in self.box_dims[..rank].iter().enumerate() {
            if !(1..=MAX_BOX_DIM).contains(&extent) {
                return Err(TensorMapError::BoxDimOutOfRange { dim, extent });
            }
        }
        let inner_bytes = u64::from(self.box_dims[0]) * T::SIZE;
        if !inner_bytes.is_multiple_of(INNER_BOX_ALIGN) {
            return Err(TensorMapError::MisalignedInnerBox { bytes: inner_bytes });
        }
        if let Some(span) = swizzle_span_limit(self.swizzle)
            && inner_bytes > span
        {
            return Err(TensorMapError::InnerBoxExceedsSwizzle { bytes: inner_bytes, span });
        }
        for (dim, &stride) in self.element_strides[..rank].iter().enumerate() {
            if !(1..=MAX_ELEMENT_STRIDE).contains(&stride) {
                return Err(TensorMapError::ElementStrideOutOfRange { dim, stride });
            }
        }
        // Extents ≤ 2^32 and strides < 2^40: every term fits u128 with room to spare.
        let required = self.global_strides[..rank - 1]
            .iter()
            .zip(&self.global_dims[1..rank])
            .fold(u128::from(self.global_dims[0]) * u128::from(T::SIZE), |end, (&stride, &extent)| {
                end + u128::from(stride) * u128::from(extent - 1)
            });
        if required > u128::from(available_bytes) {
            return Err(TensorMapError::OutOfBounds { required, available: available_bytes });
        }
        Ok(())
    }

    /// Validates and encodes a map over `buffer`, which must hold the whole tensor and which
    /// the kernel only reads through the map.
    ///
    /// The map stores `buffer`'s raw address and does not borrow it: a kernel launched with
    /// the map after `buffer` is freed reads freed memory. Launchers that take a map must keep
    /// the buffer alive for the launch (that is their `# Safety` contract). The returned guard
    /// is cudarc's stream-ordering record of this read on `stream`: hand it to
    /// [`KernelArgs::keep`](crate::KernelArgs::keep) so it drops after the launch (dropped
    /// earlier, another stream would not wait for the kernel's reads).
    pub fn encode<'a, B: DevicePtr<T>>(
        &self,
        buffer: &'a B,
        stream: &'a CudaStream,
    ) -> Result<(TensorMap, SyncOnDrop<'a>), TensorMapError> {
        let available = (buffer.len() as u64).saturating_mul(T::SIZE);
        let (address, access) = buffer.device_ptr(stream);
        self.validate(address, available)?;
        Ok((self.encode_unchecked_address(address)?, access))
    }

    /// As [`Self::encode`] for a buffer the kernel writes through the map (TMA stores): the
    /// guard records a write.
    pub fn encode_mut<'a, B: DevicePtrMut<T>>(
        &self,
        buffer: &'a mut B,
        stream: &'a CudaStream,
    ) -> Result<(TensorMap, SyncOnDrop<'a>), TensorMapError> {
        let available = (buffer.len() as u64).saturating_mul(T::SIZE);
        let (address, access) = buffer.device_ptr_mut(stream);
        self.validate(address, available)?;
        Ok((self.encode_unchecked_address(address)?, access))
    }

    /// Validates and encodes a map over the device allocation at `address` holding
    /// `available_bytes` bytes.
    ///
    /// # Safety
    /// 1. `address .. address + available_bytes` lies inside one live device allocation of
    ///    the context the map will be used in.
    /// 2. The map is not used by any kernel after that allocation is freed.
    pub unsafe fn encode_raw(&self, address: u64, available_bytes: u64) -> Result<TensorMap, TensorMapError> {
        self.validate(address, available_bytes)?;
        Ok(self.encode_unchecked_address(address)?)
    }

    /// The driver call, for a request that has passed [`Self::validate`].
    fn encode_unchecked_address(&self, address: u64) -> Result<TensorMap, DriverError> {
        let rank = self.rank;
        let mut raw = MaybeUninit::<sys::CUtensorMap>::uninit();
        // SAFETY: `raw` is a writable, correctly aligned `CUtensorMap`. The four arrays are
        // live locals of at least `rank` (`rank − 1` for strides) entries, `rank` ≤ 5 was
        // checked by `validate`, and the driver only reads them during the call. The global
        // address is only recorded in the map, never dereferenced by the encoder; whether it
        // is valid when a kernel uses the map is the caller's contract (see `encode_raw`).
        let result = unsafe {
            sys::cuTensorMapEncodeTiled(
                raw.as_mut_ptr(),
                T::DATA_TYPE,
                rank as u32,
                address as *mut c_void,
                self.global_dims.as_ptr(),
                self.global_strides.as_ptr(),
                self.box_dims.as_ptr(),
                self.element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle_to_driver(self.swizzle),
                self.l2_promotion.to_driver(),
                self.oob_fill.to_driver(),
            )
        };
        result.result()?;
        // SAFETY: the driver fully wrote the map when it returned CUDA_SUCCESS.
        let raw = unsafe { raw.assume_init() };
        Ok(TensorMap { opaque: raw.opaque })
    }
}

#[cfg(test)]
mod tests;
