//! Warp-specialisation helpers and the hand-written part of wgmma (REFERENCE §8.2–§8.3, §9):
//! register reallocation (`setmaxnreg`), programmatic dependent launch (`griddepcontrol`),
//! 8×8 b16 matrix loads/stores (`ldmatrix`/`stmatrix`), and the wgmma fence/commit/wait.
//! The wide `wgmma.mma_async` family is generated: see [`super::wgmma`].

use core::arch::asm;

/// Raises this warp's register budget to `REGS` (the warpgroup's consumer side of a producer/
/// consumer split). Checked at compile time: a multiple of 8 in `[24, 256]`.
///
/// Emits `setmaxnreg.inc.sync.aligned.u32 REGS;`.
///
/// # Safety
/// All threads of the warpgroup execute it convergently with the same `REGS`; the kernel has a
/// fixed entry register count (`max_registers`, or `threads` + `min_blocks_per_sm`), else ptxas
/// ignores it (C7508); the block's total after every inc/dec fits the register file.
#[inline(always)]
pub unsafe fn setmaxnreg_inc<const REGS: u32>() {
    const { assert!(REGS.is_multiple_of(8) && REGS >= 24 && REGS <= 256, "setmaxnreg: a multiple of 8 in [24, 256]") };
    // SAFETY: forwarded to the caller.
    unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const REGS, options(nostack)) };
}

/// Lowers this warp's register budget to `REGS` (the producer side), releasing registers to
/// the pool for [`setmaxnreg_inc`].
///
/// Emits `setmaxnreg.dec.sync.aligned.u32 REGS;`.
///
/// # Safety
/// As for [`setmaxnreg_inc`]; the warp holds no live value in the registers it gives up (the
/// compiler arranges that at this point).
#[inline(always)]
pub unsafe fn setmaxnreg_dec<const REGS: u32>() {
    const { assert!(REGS.is_multiple_of(8) && REGS >= 24 && REGS <= 256, "setmaxnreg: a multiple of 8 in [24, 256]") };
    // SAFETY: forwarded to the caller.
    unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const REGS, options(nostack)) };
}

/// Lets the next kernel in the stream (launched with programmatic stream serialisation) start
/// launching before this grid finishes.
///
/// Emits `griddepcontrol.launch_dependents;`.
///
/// # Safety
/// None for this grid; the dependent grid must call [`griddepcontrol_wait`] before reading what
/// this grid writes.
#[inline(always)]
pub unsafe fn griddepcontrol_launch_dependents() {
    // SAFETY: a scheduling hint with no memory effect on this grid.
    unsafe { asm!("griddepcontrol.launch_dependents;", options(nostack)) };
}

/// Blocks until every prerequisite grid has completed and its memory is visible.
///
/// Emits `griddepcontrol.wait;`.
///
/// # Safety
/// None beyond running on sm_90+.
#[inline(always)]
pub unsafe fn griddepcontrol_wait() {
    // SAFETY: waiting has no preconditions.
    unsafe { asm!("griddepcontrol.wait;", options(nostack)) };
}

macro_rules! ldmatrix {
    ($($name:ident, $shape:literal, [$($r:ident),+], $regs:literal;)*) => {$(
        /// Loads 8×8 b16 matrices from shared memory into the warp's registers: thread `i`
        /// supplies the address of row `i % 8` of matrix `i / 8`; register `j` holds matrix `j`,
        /// thread `l` owning row `l / 4`, columns `2(l % 4)` (low half) and `+1`.
        #[doc = concat!("\n\nEmits `ldmatrix.sync.aligned.m8n8.", $shape, ".shared::cta.b16 {", $regs, "}, [addr];`.")]
        ///
        /// # Safety
        /// The whole warp executes it convergently; each supplying thread's `addr` is a 16-byte-
        /// aligned shared-window address of 16 readable bytes.
        #[inline(always)]
        pub unsafe fn $name(addr: u32) -> ($(ldmatrix!(@u32 $r),)+) {
            $(let $r: u32;)+
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("ldmatrix.sync.aligned.m8n8.", $shape, ".shared::cta.b16 {{", $regs, "}}, [{addr}];"),
                     $($r = out(reg32) $r,)+ addr = in(reg32) addr, options(readonly, nostack))
            };
            ($($r,)+)
        }
    )*};
    (@u32 $r:ident) => { u32 };
}

ldmatrix! {
    ldmatrix_x1, "x1", [r0], "{r0}";
    ldmatrix_x2, "x2", [r0, r1], "{r0}, {r1}";
    ldmatrix_x4, "x4", [r0, r1, r2, r3], "{r0}, {r1}, {r2}, {r3}";
    ldmatrix_x1_trans, "x1.trans", [r0], "{r0}";
    ldmatrix_x2_trans, "x2.trans", [r0, r1], "{r0}, {r1}";
    ldmatrix_x4_trans, "x4.trans", [r0, r1, r2, r3], "{r0}, {r1}, {r2}, {r3}";
}

macro_rules! stmatrix {
    ($($name:ident, $shape:literal, [$($r:ident),+], $regs:literal;)*) => {$(
        /// Stores 8×8 b16 matrices from the warp's registers to shared memory, in the layout
        /// [`ldmatrix_x1`] reads (the wgmma accumulator order of one 8×8 slab).
        #[doc = concat!("\n\nEmits `stmatrix.sync.aligned.m8n8.", $shape, ".shared::cta.b16 [addr], {", $regs, "};`.")]
        ///
        /// # Safety
        /// The whole warp executes it convergently; each supplying thread's `addr` is a 16-byte-
        /// aligned shared-window address of 16 writable bytes that nothing else accesses meanwhile.
        #[inline(always)]
        pub unsafe fn $name(addr: u32, $($r: u32),+) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("stmatrix.sync.aligned.m8n8.", $shape, ".shared::cta.b16 [{addr}], {{", $regs, "}};"),
                     addr = in(reg32) addr, $($r = in(reg32) $r,)+ options(nostack))
            };
        }
    )*};
}

stmatrix! {
    stmatrix_x1, "x1", [r0], "{r0}";
    stmatrix_x2, "x2", [r0, r1], "{r0}, {r1}";
    stmatrix_x4, "x4", [r0, r1, r2, r3], "{r0}, {r1}, {r2}, {r3}";
    stmatrix_x1_trans, "x1.trans", [r0], "{r0}";
    stmatrix_x2_trans, "x2.trans", [r0, r1], "{r0}, {r1}";
    stmatrix_x4_trans, "x4.trans", [r0, r1, r2, r3], "{r0}, {r1}, {r2}, {r3}";
}

/// Orders prior register and shared-memory accesses of the warpgroup before the following
/// `wgmma.mma_async` reads its accumulators / A fragments.
///
/// Emits `wgmma.fence.sync.aligned;`.
///
/// # Safety
/// All 128 threads of the warpgroup execute it convergently (sm_90a only).
#[inline(always)]
pub unsafe fn wgmma_fence() {
    // SAFETY: forwarded to the caller.
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) };
}

/// Emits only a PTX comment, but the compiler must have `v` in a register here and may not assume what
/// it holds after: it fixes where a value is defined relative to the side effects around it
/// (e.g. an accumulator's initial value, before a wgmma that writes other registers).
#[inline(always)]
pub fn pin_register(v: &mut f32) {
    // SAFETY: the instruction string is a PTX comment; the operand stays in its register.
    unsafe { asm!("// pin {0}", inout(reg32) * v, options(nostack, preserves_flags)) };
}

/// Closes the group of this warpgroup's uncommitted `wgmma.mma_async` operations.
///
/// Emits `wgmma.commit_group.sync.aligned;`.
///
/// # Safety
/// As for [`wgmma_fence`].
#[inline(always)]
pub unsafe fn wgmma_commit_group() {
    // SAFETY: forwarded to the caller.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
}

/// Waits until at most `N` wgmma groups of this warpgroup are pending; only then may their
/// accumulators be read and their shared-memory operands overwritten.
///
/// Emits `wgmma.wait_group.sync.aligned N;`.
///
/// # Safety
/// As for [`wgmma_fence`].
#[inline(always)]
pub unsafe fn wgmma_wait_group<const N: u32>() {
    // SAFETY: forwarded to the caller. Not `nomem`: the accumulators are written by the
    // hardware up to this point, and shared memory read by it may be reused after.
    unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack)) };
}
