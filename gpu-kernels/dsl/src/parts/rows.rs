//! L3 register-tile ops along the rows of a wgmma f32 accumulator: what an online softmax and
//! a second wgmma reading the first one's result repeat (attention: `S = Q·Kᵀ`, then
//! `O += softmax(S)·V` with P in registers).
//!
//! Every thread of a warpgroup holds two rows of an m64nN accumulator, each spread over the
//! four lanes of a quad (`logic::acc_rows`); a [`RowPair`] is one value per such row, the same
//! in the four lanes. Row reductions ([`row_max`], [`row_sum`]) fold a thread's registers and
//! then the quad with two butterfly shuffles; [`scale_rows`], [`exp2_rows`] and [`mask`] work
//! in place with no data exchange; [`a_fragment`] rounds 16 columns of the accumulator into the
//! RS-form A fragment of the next wgmma (the same thread already holds the same elements, so
//! it is rounding and register renaming only).

use crate::logic::acc_rows::{QUAD_SHUFFLE_MASKS, a_fragment_source, row_slot};
use crate::logic::fragment::acc_coord;
use crate::math;
use crate::num::{Bf16, F16};
use crate::warp;
use crate::warpgroup::acc::{Accumulator, RegA};

/// One f32 per accumulator row this thread holds: `.0` for its upper row (`16·warp + lane/4`),
/// `.1` for the row 8 below.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RowPair(pub f32, pub f32);

impl RowPair {
    /// The same value for both rows.
    #[inline(always)]
    pub const fn splat(v: f32) -> Self {
        RowPair(v, v)
    }

    /// The value of row slot `slot` (0 or 1).
    #[inline(always)]
    pub fn get(&self, slot: u32) -> f32 {
        if slot == 0 { self.0 } else { self.1 }
    }

    /// `f` of each row's value.
    #[inline(always)]
    pub fn map(self, f: impl Fn(f32) -> f32) -> Self {
        RowPair(f(self.0), f(self.1))
    }

    /// `f` of each row's two values.
    #[inline(always)]
    pub fn zip(self, other: RowPair, f: impl Fn(f32, f32) -> f32) -> Self {
        RowPair(f(self.0, other.0), f(self.1, other.1))
    }
}

/// Folds each row's registers of this thread into `init` with `f` (no shuffles: the partial
/// over this thread's columns of the row), register by register: one dependent chain per row.
#[inline(always)]
pub fn fold_rows<A: Accumulator<Elem = f32>>(acc: &A, init: RowPair, f: impl Fn(f32, f32) -> f32) -> RowPair {
    let mut out = init;
    acc.for_each(|i, v| {
        if row_slot(i as u32) == 0 {
            out.0 = f(out.0, v);
        } else {
            out.1 = f(out.1, v);
        }
    });
    out
}

/// Independent partial folds per row in [`fold_rows_tree`]: registers `4g .. 4g + 4` (two of each
/// row) go to chain `g % FOLD_CHAINS`, and the chains are then combined pairwise.
const FOLD_CHAINS: usize = 8;

/// [`fold_rows`] as a tree, for an associative and commutative `f` (a maximum, a sum up to its
/// rounding order): [`FOLD_CHAINS`] interleaved chains of `REGS / 4 / FOLD_CHAINS` registers
/// per row and three levels joining them, instead of one chain of `REGS / 2` (a 128-key row
/// maximum: 32 dependent `FMNMX`). Accumulators of fewer than `4 · FOLD_CHAINS` registers fold
/// in order. Which is faster is ptxas's schedule's to decide (measured per attention entry:
/// `abi::attention_sm90::Shape::tree_row_folds`): with the trees ptxas computes both rows'
/// maxima before any exponential and moves O's rescale behind them.
#[inline(always)]
pub fn fold_rows_tree<A: Accumulator<Elem = f32>>(acc: &A, init: RowPair, f: impl Fn(f32, f32) -> f32) -> RowPair {
    if A::REGS % 4 != 0 || A::REGS / 4 < FOLD_CHAINS {
        return fold_rows(acc, init, f);
    }
    // Every element is written by its chain's first registers before it is read (group g <
    // FOLD_CHAINS, the first of each row's pair); the indices are constants once `for_each` is
    // unrolled, so the array is registers.
    let mut chains = [RowPair::splat(0.0); FOLD_CHAINS];
    acc.for_each(|i, v| {
        let (group, first) = (i / 4, i % 2 == 0);
        let chain = &mut chains[group % FOLD_CHAINS];
        let opens = group < FOLD_CHAINS && first;
        if row_slot(i as u32) == 0 {
            chain.0 = if opens { v } else { f(chain.0, v) };
        } else {
            chain.1 = if opens { v } else { f(chain.1, v) };
        }
    });
    let join = |a: RowPair, b: RowPair| a.zip(b, &f);
    let [c0, c1, c2, c3, c4, c5, c6, c7] = chains;
    let all = join(join(join(c0, c4), join(c2, c6)), join(join(c1, c5), join(c3, c7)));
    join(init, all)
}

/// Combines per-thread partials of each row over the row's quad, so every lane holds the
/// whole row's `f`.
///
/// # Safety
/// All 32 lanes of the warp call it together (a butterfly shuffle).
#[inline(always)]
pub unsafe fn quad_reduce(v: RowPair, f: impl Fn(f32, f32) -> f32) -> RowPair {
    let step = |v: RowPair, mask: u32| {
        // SAFETY: all lanes (contract).
        let (a, b) = unsafe {
            (
                f32::from_bits(warp::shuffle_xor(v.0.to_bits(), mask)),
                f32::from_bits(warp::shuffle_xor(v.1.to_bits(), mask)),
            )
        };
        RowPair(f(v.0, a), f(v.1, b))
    };
    // Named, not iterated: an array iterator stays a loop over a stack copy of the masks.
    let [first, second] = QUAD_SHUFFLE_MASKS;
    step(step(v, first), second)
}

/// The maximum of each of this thread's rows (`-inf` for a row of `-inf`s).
///
/// # Safety
/// As for [`quad_reduce`].
#[inline(always)]
pub unsafe fn row_max<A: Accumulator<Elem = f32>>(acc: &A) -> RowPair {
    let partial = fold_rows(acc, RowPair::splat(f32::NEG_INFINITY), f32::max);
    // SAFETY: forwarded to the caller.
    unsafe { quad_reduce(partial, f32::max) }
}

/// The sum of each of this thread's rows.
///
/// # Safety
/// As for [`quad_reduce`].
#[inline(always)]
pub unsafe fn row_sum<A: Accumulator<Elem = f32>>(acc: &A) -> RowPair {
    let partial = fold_rows(acc, RowPair::splat(0.0), |a, b| a + b);
    // SAFETY: forwarded to the caller.
    unsafe { quad_reduce(partial, |a, b| a + b) }
}

/// Multiplies each row by its factor.
#[inline(always)]
pub fn scale_rows<A: Accumulator<Elem = f32>>(acc: &mut A, factor: RowPair) {
    acc.for_each_mut(|i, v| *v *= factor.get(row_slot(i as u32)));
}

/// `v ← 2^(v·scale − bias_row)` for every element (one `fma` and one `ex2.approx.ftz` each):
/// the exponentials of an online softmax in base 2, `scale` being the softmax scale times
/// log2(e) and `bias` each row's running maximum in those units. `-inf` elements become 0.
#[inline(always)]
pub fn exp2_rows<A: Accumulator<Elem = f32>>(acc: &mut A, scale: f32, bias: RowPair) {
    acc.for_each_mut(|i, v| *v = math::exp2_ftz(math::fma(*v, scale, -bias.get(row_slot(i as u32)))));
}

/// Sets every element whose tile (`row`, `col`) fails `keep` to `fill` (e.g. `-inf` for a
/// causal or sequence-end mask before a softmax). `thread` is this thread's index in its
/// warpgroup.
#[inline(always)]
pub fn mask<A: Accumulator<Elem = f32>>(acc: &mut A, thread: u32, fill: f32, keep: impl Fn(u32, u32) -> bool) {
    acc.for_each_mut(|i, v| {
        let (row, col) = acc_coord(thread, i as u32);
        *v = if keep(row, col) { *v } else { fill };
    });
}

/// A 16-bit wgmma input an f32 pair rounds to.
pub trait Pack16: Copy {
    /// Rounds `lo` and `hi` to nearest even into one word (`lo` in the low half).
    fn pack2(lo: f32, hi: f32) -> u32;
}

impl Pack16 for Bf16 {
    #[inline(always)]
    fn pack2(lo: f32, hi: f32) -> u32 {
        Bf16::pack2(lo, hi)
    }
}

impl Pack16 for F16 {
    #[inline(always)]
    fn pack2(lo: f32, hi: f32) -> u32 {
        F16::pack2(lo, hi)
    }
}

/// The RS-form A fragment of K step `k_step` (columns `16·k_step .. 16·k_step + 16` of `acc`,
/// as a 64 × 16 operand) rounded to `T`. Call it with a constant `k_step` (an unrolled loop):
/// the registers are then fields, not a select chain.
#[inline(always)]
pub fn a_fragment<T: Pack16, A: Accumulator<Elem = f32>>(acc: &A, k_step: u32) -> RegA {
    let pair = |r: u32| {
        let (lo, hi) = (a_fragment_source(k_step, 2 * r), a_fragment_source(k_step, 2 * r + 1));
        T::pack2(acc.get(lo as usize), acc.get(hi as usize))
    };
    RegA(pair(0), pair(1), pair(2), pair(3))
}

/// The RS-form A fragments of every K step of a 64 × N f32 accumulator, rounded to 16 bits:
/// registers an RS wgmma can read while the accumulator's own registers take the next block
/// (attention's P of one key block while `Q·Kᵀ` of the next one runs). Implemented by tuple
/// structs (an array would live in local memory), one per key-block width.
pub trait AFragments: Copy + Default {
    /// K steps held (`N / 16`).
    const STEPS: u32;

    /// Rounds `acc` (64 × 16·STEPS) to `T` fragments ([`a_fragment`] of every K step).
    fn of<T: Pack16, A: Accumulator<Elem = f32>>(acc: &A) -> Self;

    /// The fragment of K step `k` (`< STEPS`; call with a constant, from an unrolled loop).
    fn step(&self, k: u32) -> &RegA;
}

/// P of a 128-key block: the eight K steps of a 64 × 128 accumulator (32 registers).
#[derive(Clone, Copy, Debug, Default)]
pub struct AFragments8(pub RegA, pub RegA, pub RegA, pub RegA, pub RegA, pub RegA, pub RegA, pub RegA);

/// P of a 176-key block: the eleven K steps of a 64 × 176 accumulator (44 registers).
#[derive(Clone, Copy, Debug, Default)]
pub struct AFragments11(
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
    pub RegA,
);

/// P of an 80-key block: the five K steps of a 64 × 80 accumulator (20 registers).
#[derive(Clone, Copy, Debug, Default)]
pub struct AFragments5(pub RegA, pub RegA, pub RegA, pub RegA, pub RegA);

/// The [`AFragments`] impl of a tuple struct with one `RegA` field per K step.
macro_rules! a_fragments {
    ($name:ident: $($k:tt)*) => {
        impl AFragments for $name {
            const STEPS: u32 = [$($k),*].len() as u32;

            #[inline(always)]
            fn of<T: Pack16, A: Accumulator<Elem = f32>>(acc: &A) -> Self {
                const { assert!(A::N == 16 * Self::STEPS, "the accumulator's N is 16 per K step") };
                $name($(a_fragment::<T, A>(acc, $k)),*)
            }

            #[inline(always)]
            fn step(&self, k: u32) -> &RegA {
                // Constant `k` folds the chain to one field; the last arm takes every k ≥
                // STEPS − 1 (contract: k < STEPS).
                a_fragments!(@step self, k, $($k)*)
            }
        }
    };
    (@step $self:ident, $k:ident, $last:tt) => { &$self.$last };
    (@step $self:ident, $k:ident, $first:tt $($rest:tt)+) => {
        if $k == $first { &$self.$first } else { a_fragments!(@step $self, $k, $($rest)+) }
    };
}

a_fragments!(AFragments8: 0 1 2 3 4 5 6 7);
a_fragments!(AFragments5: 0 1 2 3 4);
a_fragments!(AFragments11: 0 1 2 3 4 5 6 7 8 9 10);

/// The running state of an online softmax over blocks of columns, per accumulator row, in
/// base 2: `max` is the largest `score · scale` seen (`scale` = softmax scale · log2 e; `-inf`
/// before any unmasked score), `sum` this thread's partial of `Σ 2^(score·scale − max)` (the
/// quad's partials are added once, by [`OnlineSoftmax::total`]).
#[derive(Clone, Copy, Debug)]
pub struct OnlineSoftmax {
    /// Running maximum of `score · scale`, per row.
    pub max: RowPair,
    /// This thread's partial sum of the exponentials, relative to `max`, per row.
    pub sum: RowPair,
}

impl OnlineSoftmax {
    /// Before any block.
    pub const START: Self = OnlineSoftmax { max: RowPair::splat(f32::NEG_INFINITY), sum: RowPair::splat(0.0) };

    /// Folds a block of raw scores in (masked ones `-inf`): the new row maxima, the old sums
    /// rescaled to them, `s` turned in place into `P = 2^(s·scale − max)` (masked → 0) and
    /// added to the sums. Returns the factor `2^(max_old − max_new)` per row, by which the
    /// caller rescales what it accumulated from earlier blocks (before adding P's product). A
    /// row that has seen only masked scores keeps maximum `-inf` and subtracts 0 instead, so no
    /// `-inf − -inf` arises.
    ///
    /// # Safety
    /// As for [`quad_reduce`] (the row maximum).
    #[inline(always)]
    pub unsafe fn step<A: Accumulator<Elem = f32>>(&mut self, s: &mut A, scale: f32) -> RowPair {
        // SAFETY: forwarded to the caller.
        unsafe { self.step_folded::<false, A>(s, scale) }
    }

    /// [`OnlineSoftmax::step`] with the block's row maximum and sum folded as trees
    /// ([`fold_rows_tree`]) when `TREE`, else in order ([`fold_rows`]): the same values up to
    /// the sum's rounding order.
    ///
    /// # Safety
    /// As for [`quad_reduce`] (the row maximum).
    #[inline(always)]
    pub unsafe fn step_folded<const TREE: bool, A: Accumulator<Elem = f32>>(
        &mut self,
        s: &mut A,
        scale: f32,
    ) -> RowPair {
        let lowest = RowPair::splat(f32::NEG_INFINITY);
        let partial = if TREE { fold_rows_tree(s, lowest, f32::max) } else { fold_rows(s, lowest, f32::max) };
        // SAFETY: forwarded to the caller.
        let block_max = unsafe { quad_reduce(partial, f32::max) };
        let new_max = self.max.zip(block_max, |old, b| old.max(b * scale));
        let base = new_max.map(|m| if m == f32::NEG_INFINITY { 0.0 } else { m });
        let alpha = self.max.zip(base, |old, b| math::exp2_ftz(old - b));
        exp2_rows(s, scale, base);
        let rescaled = self.sum.zip(alpha, |l, a| l * a);
        self.sum = if TREE { fold_rows_tree(s, rescaled, |a, b| a + b) } else { fold_rows(s, rescaled, |a, b| a + b) };
        self.max = new_max;
        alpha
    }

    /// The whole rows' sums (the quad's partials added).
    ///
    /// # Safety
    /// As for [`quad_reduce`].
    #[inline(always)]
    pub unsafe fn total(&self) -> RowPair {
        // SAFETY: forwarded to the caller.
        unsafe { quad_reduce(self.sum, |a, b| a + b) }
    }
}
