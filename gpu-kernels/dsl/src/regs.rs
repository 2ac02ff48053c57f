//! Register arrays: fixed-size per-thread values that stay in registers.
//!
//! **The rule.** A Rust array (`[f32; 8]`) indexed at run time, or walked by a loop LLVM does not
//! fully unroll, is addressed memory: rustc puts it in local memory (per-thread DRAM behind L1),
//! and every access becomes a load or store. ptxas reports it as a stack frame or spill. A
//! register array avoids that by construction: it is a tuple struct with one field per register
//! (like the wgmma accumulators), and the only ways in are a const-generic index
//! ([`RegArray::get`], [`RegArray::set`]) and closures the macro unrolls into straight-line code
//! with constant indices ([`RegArray::from_fn`], [`RegArray::for_each`],
//! [`RegArray::for_each_mut`]). [`RegArray::select`] takes a run-time index as a chain of
//! selects over all fields, never an indexed load.

/// A register array of `LEN` values of `Elem` (see the module doc for the rule it keeps).
pub trait RegArray: Copy {
    /// Element type.
    type Elem: Copy;
    /// Number of elements.
    const LEN: usize;
    /// Every element `v`.
    fn splat(v: Self::Elem) -> Self;
    /// Element `i` is `f(i)`, `i` in order, unrolled.
    fn from_fn(f: impl FnMut(usize) -> Self::Elem) -> Self;
    /// Calls `f(i, element i)` for every `i` in order, unrolled (constant `i` in each call).
    fn for_each(&self, f: impl FnMut(usize, Self::Elem));
    /// Calls `f(i, &mut element i)` for every `i` in order, unrolled.
    fn for_each_mut(&mut self, f: impl FnMut(usize, &mut Self::Elem));
    /// Element `I` (a compile error when `I >= LEN`).
    fn get<const I: usize>(&self) -> Self::Elem;
    /// Sets element `I` (a compile error when `I >= LEN`).
    fn set<const I: usize>(&mut self, v: Self::Elem);

    /// Element `i` for a run-time `i`: `LEN` compares and selects (folds to one field when `i`
    /// is a constant after inlining). `i >= LEN` gives element 0.
    #[inline(always)]
    fn select(&self, i: usize) -> Self::Elem {
        let mut out = self.get::<0>();
        self.for_each(|j, v| {
            if j == i {
                out = v;
            }
        });
        out
    }

    /// Applies `f` to every element, unrolled.
    #[inline(always)]
    fn map(mut self, mut f: impl FnMut(Self::Elem) -> Self::Elem) -> Self {
        self.for_each_mut(|_, v| *v = f(*v));
        self
    }

    /// Element-wise `f(self[i], other[i])`, unrolled.
    #[inline(always)]
    fn zip_with(mut self, other: &Self, mut f: impl FnMut(Self::Elem, Self::Elem) -> Self::Elem) -> Self {
        self.for_each_mut(|i, v| *v = f(*v, other.select(i)));
        self
    }
}

/// Field `I` of a register array: `T` (the index only lets the macro name one field per index).
type Field<T, const I: usize> = T;

macro_rules! reg_arrays {
    ($($(#[$doc:meta])* $name:ident[$len:literal]: [$($i:tt)*];)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name<T>($(pub Field<T, $i>),*);

        impl<T: Copy> RegArray for $name<T> {
            type Elem = T;
            const LEN: usize = $len;
            #[inline(always)]
            fn splat(v: T) -> Self {
                $name($(reg_arrays!(@same v $i)),*)
            }
            #[inline(always)]
            fn from_fn(mut f: impl FnMut(usize) -> T) -> Self {
                $name($(f($i)),*)
            }
            #[inline(always)]
            fn for_each(&self, mut f: impl FnMut(usize, T)) {
                $(f($i, self.$i);)*
            }
            #[inline(always)]
            fn for_each_mut(&mut self, mut f: impl FnMut(usize, &mut T)) {
                $(f($i, &mut self.$i);)*
            }
            #[inline(always)]
            fn get<const I: usize>(&self) -> T {
                const { assert!(I < $len, "register array index out of range") };
                match I {
                    $($i => self.$i,)*
                    _ => unreachable!(),
                }
            }
            #[inline(always)]
            fn set<const I: usize>(&mut self, v: T) {
                const { assert!(I < $len, "register array index out of range") };
                match I {
                    $($i => self.$i = v,)*
                    _ => unreachable!(),
                }
            }
        }
    )*};
    (@same $v:ident $i:tt) => { $v };
}

reg_arrays! {
    /// Two registers.
    Regs2[2]: [0 1];
    /// Four registers.
    Regs4[4]: [0 1 2 3];
    /// Eight registers (one 16-byte vector of bf16 or f16, widened).
    Regs8[8]: [0 1 2 3 4 5 6 7];
    /// Sixteen registers (one 16-byte vector of bytes, widened).
    Regs16[16]: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15];
    /// Thirty-two registers.
    Regs32[32]: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31];
}
