//! The fixed part of the tcgen05.ld/st layer: the [`TmemCopy`] trait and the shape marker
//! types that the generated table (`generated/tcgen05_ld_st.rs`) implements it for.
//! Hand-written; only the table is generated.

/// A TMEM ↔ register copy form: `Shape<N>` with `N` repetitions.
pub trait TmemCopy {
    /// The registers of one thread (a tuple struct of scalar `u32`).
    type Regs: Copy;
    /// TMEM lanes one warp covers.
    const LANES: u32;
    /// 32-bit TMEM columns covered.
    const COLUMNS: u32;

    /// Starts the load; registers are valid only after `tcgen05.wait::ld`.
    ///
    /// # Safety
    /// Executed by all 32 threads of a warp, converged, with the same `taddr`; `taddr` is
    /// `(lane << 16) | column` inside columns this CTA allocated and inside the lane quarter
    /// `32 * (warp % 4)` this warp may access; the data were ordered before this load
    /// (`tcgen05.fence::after_thread_sync` after the synchronisation that published them).
    unsafe fn load(taddr: u32) -> Self::Regs;

    /// Loads and waits, so the registers are valid on return.
    ///
    /// # Safety
    /// As [`TmemCopy::load`].
    unsafe fn load_wait(taddr: u32) -> Self::Regs;

    /// Starts the store; complete after `tcgen05.wait::st`.
    ///
    /// # Safety
    /// As [`TmemCopy::load`]; no async tcgen05 op (mma, cp) may access the columns meanwhile.
    unsafe fn store(taddr: u32, v: Self::Regs);
}

/// Shape 32x32b: thread t ↔ lane t; `.xN` covers N consecutive columns.
pub struct Tmem32x32b<const N: u32>;
/// Shape 16x64b: 16 lanes × 2 columns per repetition.
pub struct Tmem16x64b<const N: u32>;
/// Shape 16x128b: 16 lanes × 4 columns per repetition, 2 registers each.
pub struct Tmem16x128b<const N: u32>;
/// Shape 16x256b: 16 lanes × 8 columns per repetition, 4 registers each.
pub struct Tmem16x256b<const N: u32>;
