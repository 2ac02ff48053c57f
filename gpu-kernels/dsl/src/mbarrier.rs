//! L1 mbarrier: a typed handle to a shared-memory transaction barrier and the phase token that
//! says which completion a waiter expects (REFERENCE §4).
//!
//! Creating a handle is the unsafe step (the 8 bytes must be a barrier that one thread
//! initialised and published); waiting is then safe — at worst it hangs. Arrivals stay unsafe:
//! an extra arrival or a wrong byte count completes a phase early, which no type can prevent.

use crate::ptx::{cluster as raw_cluster, mbarrier as raw};
use crate::shared::{DynamicShared, SharedPtr};

/// Bytes of one barrier object.
pub const MBARRIER_BYTES: u32 = 8;

/// The parity of the phase a waiter waits to see completed: a fresh barrier is in phase 0, so
/// the first wait uses [`Phase::ZERO`]; each completed wait flips it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase(u32);

impl Phase {
    /// The first phase of a fresh barrier.
    pub const ZERO: Phase = Phase(0);
    /// The phase before [`Phase::ZERO`]: what a producer waits on for "empty" barriers that
    /// start out free (the wait returns at once).
    pub const ONE: Phase = Phase(1);

    /// The phase with PTX parity `parity` (only its low bit counts).
    #[inline(always)]
    pub const fn from_parity(parity: u32) -> Phase {
        Phase(parity & 1)
    }

    /// The next phase.
    #[inline(always)]
    pub const fn flipped(self) -> Phase {
        Phase(self.0 ^ 1)
    }

    /// The PTX parity operand (0 or 1).
    #[inline(always)]
    pub const fn parity(self) -> u32 {
        self.0
    }
}

/// A barrier in this CTA's shared memory.
#[derive(Clone, Copy, Debug)]
pub struct Mbarrier {
    addr: u32,
}

impl Mbarrier {
    /// Carves an 8-byte-aligned slot for a barrier from the dynamic shared memory. The barrier
    /// still has to be initialised by one thread ([`Mbarrier::init`]) and published.
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> SharedPtr<u64> {
        smem.alloc::<u64>(1, MBARRIER_BYTES)
    }

    /// The handle of the barrier at `slot`.
    ///
    /// # Safety
    /// `slot` is 8-byte aligned shared memory that holds an initialised barrier (published with
    /// [`fence_init`] and a block/cluster barrier) whenever the handle is used to arrive or wait.
    #[inline(always)]
    pub const unsafe fn at(slot: SharedPtr<u64>) -> Self {
        Mbarrier { addr: slot.addr() }
    }

    /// Initialises the barrier: phase 0, `arrivals` expected arrivals per phase.
    ///
    /// # Safety
    /// Called by exactly one thread, before any use and after any previous user is done;
    /// `1 <= arrivals < 2^20`.
    #[inline(always)]
    pub unsafe fn init(&self, arrivals: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { raw::init(self.addr, arrivals) }
    }

    /// Shared-window address (what the raw TMA operands take).
    #[inline(always)]
    pub const fn addr(&self) -> u32 {
        self.addr
    }

    /// Arrives once.
    ///
    /// # Safety
    /// The arrival is one of the `arrivals` this phase expects.
    #[inline(always)]
    pub unsafe fn arrive(&self) {
        // SAFETY: forwarded to the caller; the handle guarantees an initialised barrier.
        unsafe { raw::arrive(self.addr) };
    }

    /// Announces `bytes` of async-copy data for this phase and arrives once (the TMA producer
    /// step, issued before or after the copies).
    ///
    /// # Safety
    /// As for [`Self::arrive`]; exactly `bytes` will complete on this barrier in this phase.
    #[inline(always)]
    pub unsafe fn arrive_expect_tx(&self, bytes: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { raw::arrive_expect_tx(self.addr, bytes) };
    }

    /// Announces `bytes` of async-copy data without arriving.
    ///
    /// # Safety
    /// Exactly `bytes` more will complete on this barrier in the current phase.
    #[inline(always)]
    pub unsafe fn expect_tx(&self, bytes: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { raw::expect_tx(self.addr, bytes) };
    }

    /// Whether `phase` has completed (one bounded try).
    #[inline(always)]
    pub fn try_wait(&self, phase: Phase) -> bool {
        // SAFETY: the handle guarantees an initialised barrier; a parity is always 0 or 1.
        unsafe { raw::try_wait_parity(self.addr, phase.parity()) }
    }

    /// Waits until `phase` has completed; its writes (TMA data included) are then visible.
    #[inline(always)]
    pub fn wait_phase(&self, phase: Phase) {
        while !self.try_wait(phase) {}
    }

    /// Waits for `*phase` and flips it to the next phase: the consumer loop's step.
    #[inline(always)]
    pub fn wait(&self, phase: &mut Phase) {
        self.wait_phase(*phase);
        *phase = phase.flipped();
    }

    /// Waits until `phase` has completed, acquiring at cluster scope (pairs with arrivals from
    /// other CTAs of the cluster).
    #[inline(always)]
    pub fn wait_phase_cluster(&self, phase: Phase) {
        // SAFETY: as for try_wait.
        while !unsafe { raw::try_wait_parity_acquire_cluster(self.addr, phase.parity()) } {}
    }

    /// Arrives once on the barrier at the same offset in the CTA of rank `rank` of this cluster,
    /// releasing this thread's prior writes at cluster scope.
    ///
    /// # Safety
    /// `rank` is a running CTA of the cluster whose barrier at this offset is initialised and
    /// expects the arrival.
    #[inline(always)]
    pub unsafe fn arrive_remote(&self, rank: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { raw::arrive_remote_release_cluster(raw_cluster::mapa_shared_cluster(self.addr, rank)) };
    }

    /// [`Self::arrive_remote`] without the cluster-scope release (no `MEMBAR.ALL.GPU`): for
    /// handing back a buffer whose last readers were wgmmas that have completed, and which only
    /// async copies write next.
    ///
    /// # Safety
    /// As for [`Self::arrive_remote`]; nothing the peer does after observing this arrival
    /// relies on this thread's generic memory writes.
    #[inline(always)]
    pub unsafe fn arrive_remote_cta(&self, rank: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { raw::arrive_remote_release_cta(raw_cluster::mapa_shared_cluster(self.addr, rank)) };
    }

    /// Invalidates the barrier so its bytes may hold other data.
    ///
    /// # Safety
    /// Nothing uses the barrier afterwards (nor is any async copy still completing on it).
    #[inline(always)]
    pub unsafe fn invalidate(self) {
        // SAFETY: forwarded to the caller.
        unsafe { raw::inval(self.addr) };
    }
}

/// Publishes this thread's barrier initialisations to the async proxy (TMA) and to the other
/// CTAs of the cluster; follow it with a block or cluster barrier.
#[inline(always)]
pub fn fence_init() {
    // SAFETY: a fence has no preconditions.
    unsafe { raw::fence_mbarrier_init_release_cluster() }
}
