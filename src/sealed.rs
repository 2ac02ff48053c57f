//! The private supertrait of warpforge's element traits (`GemmInput`, `GemmOutput`,
//! `SwigluElement` through them, `SaxpyElement`): a kernel reads a buffer's bytes as the type
//! its entry was compiled for, so an element trait implemented outside this crate would launch
//! a kernel on data it does not understand. `Sealed` is public in a private module: nameable as
//! a bound here, impossible to implement elsewhere.

/// Implemented exactly for the element types some warpforge kernel is compiled for.
pub trait Sealed {}

impl Sealed for half::bf16 {}
impl Sealed for half::f16 {}
impl Sealed for f32 {}
