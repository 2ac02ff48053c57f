//! Element-wise kernels (saxpy, vector add): grid-stride loops, memory-bound.
//!
//! They prove the build → load → launch chain for each storage dtype rather than chase
//! bandwidth; each element is touched once with f32 arithmetic.

use warpforge_dsl::kernel;
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::thread::{global_x, grid_stride_x};

/// `y[i] = a·x[i] + y[i]` for `i < n`, f32.
///
/// # Safety
/// `x` and `y` point to at least `n` valid f32 in global memory; `y` does not alias `x`.
#[kernel(max_threads = 1024)]
pub unsafe fn saxpy_f32(n: u64, a: f32, x: *const f32, y: *mut f32) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) };
        i += grid_stride_x();
    }
}

/// `y[i] = round(a·x[i] + y[i])` for `i < n`, bf16 storage, f32 arithmetic.
///
/// # Safety
/// As for [`saxpy_f32`], with bf16 elements.
#[kernel(max_threads = 1024)]
pub unsafe fn saxpy_bf16(n: u64, a: f32, x: *const Bf16, y: *mut Bf16) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *y.add(i) = Bf16::from_f32(a * (*x.add(i)).to_f32() + (*y.add(i)).to_f32()) };
        i += grid_stride_x();
    }
}

/// `y[i] = round(a·x[i] + y[i])` for `i < n`, f16 storage, f32 arithmetic.
///
/// # Safety
/// As for [`saxpy_f32`], with f16 elements.
#[kernel(max_threads = 1024)]
pub unsafe fn saxpy_f16(n: u64, a: f32, x: *const F16, y: *mut F16) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *y.add(i) = F16::from_f32(a * (*x.add(i)).to_f32() + (*y.add(i)).to_f32()) };
        i += grid_stride_x();
    }
}

/// `out[i] = a[i] + b[i]` for `i < n`, f32.
///
/// # Safety
/// `a`, `b`, `out` point to at least `n` valid f32; `out` aliases neither input.
#[kernel(max_threads = 1024)]
pub unsafe fn vector_add_f32(n: u64, a: *const f32, b: *const f32, out: *mut f32) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *out.add(i) = *a.add(i) + *b.add(i) };
        i += grid_stride_x();
    }
}
