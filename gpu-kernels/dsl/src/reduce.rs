//! Reduction operators and the 32-bit values they act on, shared by the warp-scope
//! ([`crate::warp::reduce`], [`crate::warp::inclusive_scan`]) and block-scope
//! ([`crate::block::ReduceScratch`]) collectives.
//!
//! An operator is a type (`Sum`, `Max`, `Min`), so the collective's op is part of its name at the
//! call site (`warp::reduce::<Max, _>(x)`) and an op a type does not support fails to compile.

/// A value a 32-bit shuffle moves: its bits go through one `shfl.sync` unchanged.
pub trait Word32: Copy {
    /// The bits of `self`.
    fn to_word(self) -> u32;
    /// The value whose bits are `w`.
    fn from_word(w: u32) -> Self;
}

impl Word32 for f32 {
    #[inline(always)]
    fn to_word(self) -> u32 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_word(w: u32) -> Self {
        f32::from_bits(w)
    }
}

impl Word32 for u32 {
    #[inline(always)]
    fn to_word(self) -> u32 {
        self
    }
    #[inline(always)]
    fn from_word(w: u32) -> Self {
        w
    }
}

impl Word32 for i32 {
    #[inline(always)]
    fn to_word(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn from_word(w: u32) -> Self {
        w as i32
    }
}

/// An associative, commutative combination with an identity: what a tree reduction may apply in
/// any order.
pub trait ReduceOp<T> {
    /// `combine(IDENTITY, x) == x` for every `x` (what lanes or warps without data contribute).
    const IDENTITY: T;
    /// One step of the reduction.
    fn combine(a: T, b: T) -> T;
}

/// Addition: `add.f32` (rounded per step, so a float sum's rounding depends on the tree shape;
/// the shape is fixed, so the result is deterministic), or wrapping `add.s32`/`add.u32`.
#[derive(Clone, Copy, Debug)]
pub struct Sum;
/// Maximum: `max.f32` (a NaN operand loses to a number, like `f32::max`), `max.s32`, `max.u32`.
#[derive(Clone, Copy, Debug)]
pub struct Max;
/// Minimum: `min.f32` (a NaN operand loses to a number, like `f32::min`), `min.s32`, `min.u32`.
#[derive(Clone, Copy, Debug)]
pub struct Min;

impl ReduceOp<f32> for Sum {
    const IDENTITY: f32 = 0.0;
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        a + b
    }
}
impl ReduceOp<f32> for Max {
    const IDENTITY: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        a.max(b)
    }
}
impl ReduceOp<f32> for Min {
    const IDENTITY: f32 = f32::INFINITY;
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        a.min(b)
    }
}

macro_rules! integer_ops {
    ($($t:ty),*) => {$(
        impl ReduceOp<$t> for Sum {
            const IDENTITY: $t = 0;
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
        }
        impl ReduceOp<$t> for Max {
            const IDENTITY: $t = <$t>::MIN;
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                if a > b { a } else { b }
            }
        }
        impl ReduceOp<$t> for Min {
            const IDENTITY: $t = <$t>::MAX;
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                if a < b { a } else { b }
            }
        }
    )*};
}
integer_ops!(i32, u32);
