//! Register fragments of wgmma: which (row, column) of the tile each thread's register holds
//! (REFERENCE §8.5, verified on the H200). Kernels use the map to write accumulators out and to
//! build RS-form A fragments; the host uses it to check what the GPU wrote.

/// Threads in a warpgroup.
pub const WARPGROUP_THREADS: u32 = 128;
/// Rows of every wgmma tile.
pub const WGMMA_M: u32 = 64;

/// (row, col) of f32/s32 accumulator register `reg` (0..N/2) of warpgroup thread `thread`
/// (0..128) in an m64nN tile.
pub const fn acc_coord(thread: u32, reg: u32) -> (u32, u32) {
    let (w, l) = (thread / 32, thread % 32);
    let row = 16 * w + l / 4 + 8 * ((reg / 2) % 2);
    let col = 8 * (reg / 4) + 2 * (l % 4) + reg % 2;
    (row, col)
}

/// The upper of the two tile rows warpgroup thread `thread` holds in an m64nN accumulator:
/// `16 · warp + lane / 4` (every register's row is this or this + 8, [`acc_row_offset`]). A
/// per-row factor (an FP8 GEMM's row scales) needs only these two rows per thread.
pub const fn acc_thread_row(thread: u32) -> u32 {
    16 * (thread / 32) + (thread % 32) / 4
}

/// Row of accumulator register `reg` relative to [`acc_thread_row`]: 0 or 8.
pub const fn acc_row_offset(reg: u32) -> u32 {
    8 * ((reg / 2) % 2)
}

/// Inverse of [`acc_coord`]: the (thread, register) holding accumulator element (`row`, `col`).
pub const fn acc_owner(row: u32, col: u32) -> (u32, u32) {
    let thread = 32 * (row / 16) + 4 * (row % 8) + (col % 8) / 2;
    let reg = 4 * (col / 8) + 2 * ((row % 16) / 8) + col % 2;
    (thread, reg)
}

/// (row, k) of element `elem` (0..8, two per register, low half first) of the RS-form A
/// fragment of a 16-bit m64k16 operand held by warpgroup thread `thread`.
pub const fn a_frag_coord_16bit(thread: u32, elem: u32) -> (u32, u32) {
    let (w, l) = (thread / 32, thread % 32);
    let row = 16 * w + l / 4 + 8 * ((elem / 2) % 2);
    let k = 2 * (l % 4) + elem % 2 + 8 * (elem / 4);
    (row, k)
}

/// (row, k) of register `reg` (0..4) of the RS-form A fragment of a tf32 m64k8 operand: one
/// element per register, rows as for 16-bit, `k = l % 4 + 4 · (reg / 2)` (REFERENCE §8.5,
/// from the ISA text; not yet checked on the H200).
pub const fn a_frag_coord_tf32(thread: u32, reg: u32) -> (u32, u32) {
    let (w, l) = (thread / 32, thread % 32);
    (16 * w + l / 4 + 8 * (reg % 2), l % 4 + 4 * (reg / 2))
}

/// (row, k) of byte `elem` (0..16, four per register, lowest byte first) of the RS-form A
/// fragment of an 8-bit (fp8) m64k32 operand: the 16-bit pattern with 4-element groups,
/// `k = 4 · (l % 4) + elem % 4 + 16 · (elem / 8)` (REFERENCE §8.5, from the ISA text; not yet
/// checked on the H200).
pub const fn a_frag_coord_8bit(thread: u32, elem: u32) -> (u32, u32) {
    let (w, l) = (thread / 32, thread % 32);
    let reg = elem / 4;
    (16 * w + l / 4 + 8 * (reg % 2), 4 * (l % 4) + elem % 4 + 16 * (reg / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    #[test]
    fn accumulator_rows_are_the_thread_row_or_eight_below() {
        for thread in 0..WARPGROUP_THREADS {
            for reg in 0..128 {
                let (row, _) = acc_coord(thread, reg);
                assert_eq!(row, acc_thread_row(thread) + acc_row_offset(reg), "thread {thread} reg {reg}");
            }
        }
    }

    #[test]
    fn accumulator_map_is_a_bijection_onto_every_tile() {
        for n in (8..=256).step_by(8) {
            let mut seen = vec![false; (WGMMA_M * n) as usize];
            for t in 0..WARPGROUP_THREADS {
                for i in 0..n / 2 {
                    let (r, c) = acc_coord(t, i);
                    assert!(r < WGMMA_M && c < n, "n{n}: t{t} r{i} -> ({r},{c}) outside");
                    assert!(!seen[(r * n + c) as usize], "n{n}: ({r},{c}) held twice");
                    seen[(r * n + c) as usize] = true;
                }
            }
        }
    }

    #[test]
    fn accumulator_known_points() {
        assert_eq!(acc_coord(0, 0), (0, 0));
        assert_eq!(acc_coord(0, 2), (8, 0), "regs 2,3 are 8 rows down");
        assert_eq!(acc_coord(1, 1), (0, 3));
        assert_eq!(acc_coord(4, 4), (1, 8));
        assert_eq!(acc_coord(32, 0), (16, 0), "warp 1 owns rows 16..32");
    }

    #[test]
    fn a_fragment_is_a_bijection_onto_64x16() {
        let mut seen = [false; 64 * 16];
        for t in 0..WARPGROUP_THREADS {
            for e in 0..8 {
                let (r, k) = a_frag_coord_16bit(t, e);
                assert!(r < 64 && k < 16);
                assert!(!seen[(r * 16 + k) as usize], "({r},{k}) twice");
                seen[(r * 16 + k) as usize] = true;
            }
        }
        assert_eq!(a_frag_coord_16bit(0, 2), (8, 0));
        assert_eq!(a_frag_coord_16bit(0, 4), (0, 8));
    }

    #[test]
    fn tf32_and_8bit_a_fragments_are_bijections() {
        for (k_extent, per_thread, map) in [
            (8, 4, a_frag_coord_tf32 as fn(u32, u32) -> (u32, u32)),
            (32, 16, a_frag_coord_8bit as fn(u32, u32) -> (u32, u32)),
        ] {
            let mut seen = vec![false; (64 * k_extent) as usize];
            for t in 0..WARPGROUP_THREADS {
                for e in 0..per_thread {
                    let (r, k) = map(t, e);
                    assert!(r < 64 && k < k_extent, "k extent {k_extent}: ({r},{k}) outside");
                    assert!(!seen[(r * k_extent + k) as usize], "k extent {k_extent}: ({r},{k}) twice");
                    seen[(r * k_extent + k) as usize] = true;
                }
            }
        }
        assert_eq!(a_frag_coord_8bit(1, 5), (8, 5), "register 1 is 8 rows down");
        assert_eq!(a_frag_coord_8bit(0, 8), (0, 16), "registers 2, 3 are 16 bytes further along K");
    }

    proptest! {
        #[test]
        fn owner_inverts_coord(t in 0u32..128, i in 0u32..128) {
            let (r, c) = acc_coord(t, i);
            prop_assert_eq!(acc_owner(r, c), (t, i));
        }
    }
}
