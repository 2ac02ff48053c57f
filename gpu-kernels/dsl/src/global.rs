//! Plain (non-atomic) global memory: single 32-bit values a warp reads alike ([`read_word`]),
//! and 16-byte pieces, one vector access per thread, typed by what the 16 bytes hold ([`F32x4`], [`Bf16x8`], [`F16x8`], [`U8x16`]) and by the cache policy,
//! a marker type ([`Cached`], [`ReadOnly`], [`ReadOnlyNoL1`]; [`WriteBack`], [`Streaming`]).
//!
//! ```ignore
//! let x: Bf16x8 = global::load::<_, ReadOnlyNoL1>(src.add(8 * i)); // 8 bf16 weights, read once
//! global::store::<_, Streaming>(dst.add(8 * i), Bf16x8::from_f32(&x.to_f32().map(relu)));
//! ```

use crate::num::{Bf16, F16};
use crate::ptx::global as raw;
use crate::reduce::Word32;
use crate::regs::{RegArray, Regs8, Regs16};

/// Four 32-bit words: the registers of one 16-byte access.
pub type Words = (u32, u32, u32, u32);

/// A 16-byte value one vector instruction moves; `Elem` is what the address points at.
pub trait Vector16: Copy {
    /// Element type in memory (the pointer type of [`load`] and [`store`]).
    type Elem;
    /// The value whose bytes are `w` (word `i` at byte offset `4i`).
    fn from_words(w: Words) -> Self;
    /// The bytes of `self` as words.
    fn words(self) -> Words;
}

mod sealed {
    pub trait Sealed {}
}

/// Cache policy of a 16-byte load.
pub trait LoadPolicy: sealed::Sealed {
    /// Loads the 16 bytes at `addr`.
    ///
    /// # Safety
    /// As the policy's PTX form in [`crate::ptx::global`].
    unsafe fn load(addr: *const u32) -> Words;
}

/// Cache policy of a 16-byte store.
pub trait StorePolicy: sealed::Sealed {
    /// Stores 16 bytes at `addr`.
    ///
    /// # Safety
    /// As the policy's PTX form in [`crate::ptx::global`].
    unsafe fn store(addr: *mut u32, w: Words);
}

macro_rules! policies {
    ($($(#[$doc:meta])* $name:ident: $trait:ident::$method:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $raw:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;
        impl sealed::Sealed for $name {}
        impl $trait for $name {
            #[inline(always)]
            unsafe fn $method($($arg: $ty),*) $(-> $ret)? {
                // SAFETY: forwarded to the caller.
                unsafe { raw::$raw($($arg),*) }
            }
        }
    )*};
}

policies! {
    /// Default load (`ld.global.v4.b32`): cached in L1 and L2; coherent with this launch's
    /// earlier writes made visible by the caller's synchronisation.
    Cached: LoadPolicy::load(addr: *const u32) -> Words => ld_global_v4_b32;
    /// Read-only load (`ld.global.nc.v4.b32`) through the non-coherent path: data that nothing
    /// writes during the launch.
    ReadOnly: LoadPolicy::load(addr: *const u32) -> Words => ld_global_nc_v4_b32;
    /// Read-only load that allocates no L1 line (`ld.global.nc.L1::no_allocate.v4.b32`): data
    /// read once and not written during the launch (streamed weights, activations).
    ReadOnlyNoL1: LoadPolicy::load(addr: *const u32) -> Words => ld_global_nc_l1_no_allocate_v4_b32;
    /// Default store (`st.global.v4.b32`), write-back.
    WriteBack: StorePolicy::store(addr: *mut u32, w: Words) => st_global_v4_b32;
    /// Streaming store (`st.global.cs.v4.b32`): evict-first, for output not read again soon.
    Streaming: StorePolicy::store(addr: *mut u32, w: Words) => st_global_cs_v4_b32;
}

/// Reads the 32-bit value at `addr` with a `.global` load (`ld.global.b32`): for schedule data
/// every lane of a warp reads alike (a grouped GEMM's expert indices, variable-length offsets),
/// which ptxas then takes as warp-uniform when the address is; through a Rust dereference (a
/// generic load, which may reach thread-local memory) it never does, and the branches on it
/// make the code after them divergent to ptxas.
///
/// # Safety
/// `addr` is a 4-byte-aligned global address of a readable `T`, not written concurrently.
#[inline(always)]
pub unsafe fn read_word<T: Word32>(addr: *const T) -> T {
    const { assert!(core::mem::size_of::<T>() == 4, "a 32-bit value") };
    // SAFETY: the caller's contract.
    T::from_word(unsafe { raw::ld_global_b32(addr.cast()) })
}

/// Loads the 16 bytes at `addr` under policy `P`.
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of one `V` that is readable and not written
/// concurrently; under [`ReadOnly`] and [`ReadOnlyNoL1`], not written at all during the launch.
#[inline(always)]
pub unsafe fn load<V: Vector16, P: LoadPolicy>(addr: *const V::Elem) -> V {
    // SAFETY: the caller's contract.
    V::from_words(unsafe { P::load(addr.cast()) })
}

/// Stores `v` at `addr` under policy `P`.
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of one writable `V` that nothing else accesses
/// concurrently.
#[inline(always)]
pub unsafe fn store<V: Vector16, P: StorePolicy>(addr: *mut V::Elem, v: V) {
    // SAFETY: the caller's contract.
    unsafe { P::store(addr.cast(), v.words()) }
}

/// Four consecutive `f32`, moved as one 16-byte access.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct F32x4(pub f32, pub f32, pub f32, pub f32);

impl Vector16 for F32x4 {
    type Elem = f32;
    #[inline(always)]
    fn from_words((a, b, c, d): Words) -> Self {
        F32x4(f32::from_bits(a), f32::from_bits(b), f32::from_bits(c), f32::from_bits(d))
    }
    #[inline(always)]
    fn words(self) -> Words {
        (self.0.to_bits(), self.1.to_bits(), self.2.to_bits(), self.3.to_bits())
    }
}

/// Loads the four `f32` at `addr`, through L2 only (no L1 line is allocated, so nothing stale
/// from earlier in the launch can be hit).
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of four `f32`, readable and not written
/// concurrently; data written by another CTA is ordered before this load by the caller's
/// synchronisation.
#[inline(always)]
pub unsafe fn load_f32x4_l2(addr: *const f32) -> F32x4 {
    // SAFETY: the caller's contract.
    let (a, b, c, d) = unsafe { raw::ld_global_cg_v4_f32(addr) };
    F32x4(a, b, c, d)
}

/// Stores four `f32` at `addr`.
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of four writable `f32` that nothing else
/// accesses concurrently.
#[inline(always)]
pub unsafe fn store_f32x4(addr: *mut f32, v: F32x4) {
    // SAFETY: the caller's contract.
    unsafe { raw::st_global_v4_f32(addr, (v.0, v.1, v.2, v.3)) }
}

macro_rules! half_vectors {
    ($($(#[$doc:meta])* $name:ident($elem:ident);)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name(pub u32, pub u32, pub u32, pub u32);

        impl Vector16 for $name {
            type Elem = $elem;
            #[inline(always)]
            fn from_words((a, b, c, d): Words) -> Self {
                $name(a, b, c, d)
            }
            #[inline(always)]
            fn words(self) -> Words {
                (self.0, self.1, self.2, self.3)
            }
        }

        impl $name {
            /// Widens the eight values exactly (element `i` from halfword `i`).
            #[inline(always)]
            pub fn to_f32(self) -> Regs8<f32> {
                let ((a, b), (c, d)) = ($elem::unpack2(self.0), $elem::unpack2(self.1));
                let ((e, f), (g, h)) = ($elem::unpack2(self.2), $elem::unpack2(self.3));
                Regs8(a, b, c, d, e, f, g, h)
            }
            /// Rounds eight values to nearest even (element `i` to halfword `i`), four paired
            /// conversions.
            #[inline(always)]
            pub fn from_f32(v: &Regs8<f32>) -> Self {
                $name($elem::pack2(v.0, v.1), $elem::pack2(v.2, v.3), $elem::pack2(v.4, v.5), $elem::pack2(v.6, v.7))
            }
        }
    )*};
}

half_vectors! {
    /// Eight consecutive bf16, moved as one 16-byte access; word `i` holds elements `2i`
    /// (low half) and `2i + 1`.
    Bf16x8(Bf16);
    /// Eight consecutive f16, moved as one 16-byte access; word `i` holds elements `2i` (low
    /// half) and `2i + 1`.
    F16x8(F16);
}

/// Sixteen consecutive bytes (`u8`, or FP8 values through `num::E4m3::unpack4` on each word),
/// moved as one 16-byte access; word `i` holds bytes `4i..4i + 4`, the lowest in its low bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct U8x16(pub u32, pub u32, pub u32, pub u32);

impl Vector16 for U8x16 {
    type Elem = u8;
    #[inline(always)]
    fn from_words((a, b, c, d): Words) -> Self {
        U8x16(a, b, c, d)
    }
    #[inline(always)]
    fn words(self) -> Words {
        (self.0, self.1, self.2, self.3)
    }
}

impl U8x16 {
    /// The sixteen bytes, byte `i` in element `i`.
    #[inline(always)]
    pub fn bytes(self) -> Regs16<u8> {
        let word = |k: usize| match k {
            0 => self.0,
            1 => self.1,
            2 => self.2,
            _ => self.3,
        };
        // `i` is a constant in each unrolled call, so the match folds to one shift of one word.
        Regs16::from_fn(|i| (word(i / 4) >> (8 * (i % 4))) as u8)
    }
    /// The vector holding `b`, element `i` in byte `i`.
    #[inline(always)]
    pub fn from_bytes(b: &Regs16<u8>) -> Self {
        let word = |x: u8, y: u8, z: u8, t: u8| u32::from_le_bytes([x, y, z, t]);
        U8x16(
            word(b.0, b.1, b.2, b.3),
            word(b.4, b.5, b.6, b.7),
            word(b.8, b.9, b.10, b.11),
            word(b.12, b.13, b.14, b.15),
        )
    }
}
