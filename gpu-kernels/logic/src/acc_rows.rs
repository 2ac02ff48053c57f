//! Row structure of a wgmma f32 accumulator fragment, for register-tile ops that work along
//! rows (attention's online softmax: row max, row sum, row scale) and for turning an
//! accumulator into the A operand of the next wgmma (P·V with P in registers).
//!
//! Facts from the m64nN map ([`crate::fragment::acc_coord`]):
//! - every thread holds exactly two rows, `16·warp + lane/4` ("slot 0") and 8 rows further
//!   ("slot 1"); register `i` is in slot `(i / 2) % 2`;
//! - a row is spread over the four lanes of one quad (`lane / 4` equal), so a row reduction is
//!   a thread-local reduction over the slot's registers followed by two butterfly shuffles with
//!   lane masks 1 and 2 ([`QUAD_SHUFFLE_MASKS`]);
//! - the 16 columns `16k .. 16k + 16` of the accumulator are registers `8k .. 8k + 8`, and
//!   element `e` (0..8) of the 16-bit RS-form A fragment of K step `k` is accumulator register
//!   `8k + e` ([`a_fragment_source`]): the same thread holds the same (row, column), so the
//!   conversion is register renaming plus rounding, with no data exchange between threads.

use crate::fragment::WARPGROUP_THREADS;

/// Rows each thread's accumulator registers cover.
pub const ROWS_PER_THREAD: u32 = 2;
/// Lanes sharing one row.
pub const QUAD_LANES: u32 = 4;
/// Butterfly lane masks that combine a value over the four lanes of a quad.
pub const QUAD_SHUFFLE_MASKS: [u32; 2] = [1, 2];
/// Accumulator registers per 16-column K step of an RS A fragment (8 elements, 16-bit).
pub const REGS_PER_K_STEP: u32 = 8;

/// The row slot (0: the thread's upper row, 1: 8 rows lower) of accumulator register `reg`.
pub const fn row_slot(reg: u32) -> u32 {
    (reg / 2) % 2
}

/// The tile row of `slot` for warpgroup thread `thread`.
pub const fn slot_row(thread: u32, slot: u32) -> u32 {
    let (w, l) = (thread / 32, thread % 32);
    16 * w + l / 4 + 8 * slot
}

/// The accumulator register that supplies element `elem` (0..8; two per A register, low half
/// first) of the 16-bit RS-form A fragment of K step `k_step` (accumulator columns
/// `16·k_step .. 16·k_step + 16`).
pub const fn a_fragment_source(k_step: u32, elem: u32) -> u32 {
    REGS_PER_K_STEP * k_step + elem
}

/// K steps of 16 columns in an accumulator `n` columns wide.
pub const fn k_steps(n: u32) -> u32 {
    n / 16
}

/// A CPU model of the row reduction the device performs: `values[t][i]` is register `i` of
/// warpgroup thread `t`; each thread first folds its slot's registers, then combines with the
/// lanes `lane ^ 1` and `lane ^ 2` (the shuffles). Returns each thread's two results.
pub fn quad_reduce_model<const REGS: usize>(
    values: &[[f32; REGS]; WARPGROUP_THREADS as usize],
    fold: impl Fn(f32, f32) -> f32,
    init: f32,
) -> [[f32; 2]; WARPGROUP_THREADS as usize] {
    let mut partial = [[init; 2]; WARPGROUP_THREADS as usize];
    for (t, regs) in values.iter().enumerate() {
        for (i, &v) in regs.iter().enumerate() {
            let s = row_slot(i as u32) as usize;
            partial[t][s] = fold(partial[t][s], v);
        }
    }
    for mask in QUAD_SHUFFLE_MASKS {
        let before = partial;
        for (t, p) in partial.iter_mut().enumerate() {
            let other = (t as u32 & !31) | ((t as u32 % 32) ^ mask);
            for s in 0..2 {
                p[s] = fold(before[t][s], before[other as usize][s]);
            }
        }
    }
    partial
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fragment::{a_frag_coord_16bit, acc_coord};
    use proptest::prelude::*;

    #[test]
    fn registers_of_a_slot_are_one_row() {
        for n in (8..=256).step_by(8) {
            for t in 0..WARPGROUP_THREADS {
                for i in 0..n / 2 {
                    let (row, _) = acc_coord(t, i);
                    assert_eq!(row, slot_row(t, row_slot(i)), "n{n} t{t} r{i}");
                }
            }
        }
    }

    #[test]
    fn a_row_lives_in_one_quad() {
        for t in 0..WARPGROUP_THREADS {
            for s in 0..ROWS_PER_THREAD {
                let quad_start = t - t % QUAD_LANES;
                for u in quad_start..quad_start + QUAD_LANES {
                    assert_eq!(slot_row(t, s), slot_row(u, s));
                }
                // And no thread outside the quad holds that row.
                for u in 0..WARPGROUP_THREADS {
                    if u / QUAD_LANES != t / QUAD_LANES {
                        assert_ne!(slot_row(u, s), slot_row(t, s));
                        assert_ne!(slot_row(u, 1 - s), slot_row(t, s));
                    }
                }
            }
        }
    }

    #[test]
    fn a_fragment_elements_are_the_accumulator_elements_of_the_same_thread() {
        for n in (16..=256).step_by(16) {
            for k in 0..k_steps(n) {
                for t in 0..WARPGROUP_THREADS {
                    for e in 0..8 {
                        let (row, kk) = a_frag_coord_16bit(t, e);
                        let reg = a_fragment_source(k, e);
                        assert!(reg < n / 2);
                        assert_eq!(acc_coord(t, reg), (row, 16 * k + kk), "n{n} k{k} t{t} e{e}");
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn quad_reduction_gives_every_thread_its_rows_max_and_sum(
            seed in proptest::collection::vec(-1000i32..1000, 64 * 64)
        ) {
            // A 64 × 64 tile of values, scattered into registers by the accumulator map.
            let tile = |r: u32, c: u32| seed[(r * 64 + c) as usize] as f32 / 8.0;
            let mut regs = [[0f32; 32]; WARPGROUP_THREADS as usize];
            for (t, r) in regs.iter_mut().enumerate() {
                for (i, v) in r.iter_mut().enumerate() {
                    let (row, col) = acc_coord(t as u32, i as u32);
                    *v = tile(row, col);
                }
            }
            let max = quad_reduce_model(&regs, f32::max, f32::NEG_INFINITY);
            let sum = quad_reduce_model(&regs, |a, b| a + b, 0.0);
            for t in 0..WARPGROUP_THREADS {
                for s in 0..2 {
                    let row = slot_row(t, s);
                    let want_max = (0..64).map(|c| tile(row, c)).fold(f32::NEG_INFINITY, f32::max);
                    let want_sum: f32 = (0..64).map(|c| tile(row, c)).sum();
                    prop_assert_eq!(max[t as usize][s as usize], want_max);
                    // Values are multiples of 1/8 below 2^7: every partial sum is exact.
                    prop_assert_eq!(sum[t as usize][s as usize], want_sum);
                }
            }
        }
    }
}
