//! Cluster launch control (CLC) as a pure state machine, shared by the sm_100a kernels and the
//! CPU simulation that checks it; plus the static persistent schedule it replaces.
//!
//! With CLC a kernel launches one cluster per work unit, as a non-persistent kernel would. A
//! running cluster asks the hardware (`clusterlaunchcontrol.try_cancel`) to cancel a cluster
//! that has not started yet; on success it computes the cancelled cluster's work itself, so the
//! grid behaves like a persistent one whose load balancing is done by the launcher, and SMs
//! that other work holds at first simply start later clusters. The ISA rules this type encodes
//! (REFERENCE §12):
//!
//! * one request in flight per cluster; its 16-byte response is read only after the mbarrier
//!   completes (the kernel wrapper does that), then decoded into a [`CancelResponse`];
//! * a successful response names the first CTA of the cancelled cluster, which never launches:
//!   each CTA of this cluster then computes `first_cta + rank`;
//! * after a failed response the cluster must **never** issue another `try_cancel`: the state
//!   machine becomes [`ClcPhase::Finished`] and refuses.
//!
//! Work units are cluster-granular and the grid is one-dimensional along x (cluster `(C,1,1)`),
//! so cluster `i` is CTAs `i·C … i·C+C−1` and a CTA's tile is its linear x index.

/// What `clusterlaunchcontrol.query_cancel` said about a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelResponse {
    /// A not-yet-launched cluster was cancelled; `first_cta_x` is `%ctaid.x` of its first CTA.
    Canceled { first_cta_x: u32 },
    /// Nothing was left to cancel: the grid has no unlaunched clusters any more.
    NotCanceled,
}

/// Where a cluster's CLC loop stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClcPhase {
    /// Computing a work unit; no request in flight.
    Working,
    /// Computing a work unit with a `try_cancel` in flight.
    Requested,
    /// A cancel failed: no more work, and no request may ever be issued again.
    Finished,
}

/// A call the ISA forbids in the current phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClcError {
    /// A second request while one is in flight (the response slot would be overwritten).
    RequestInFlight,
    /// A request after a failed cancel (undefined behaviour in the ISA).
    RequestAfterFailedCancel,
    /// A response handled with no request in flight.
    NoRequestInFlight,
    /// A successful response whose first CTA is not a cluster boundary.
    MisalignedCluster,
}

/// What a cluster does after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Compute the work unit whose first CTA has this x index.
    Work { first_cta_x: u32 },
    /// Leave the work loop (and, for the TMEM owner, free TMEM).
    Stop,
}

/// The CLC work loop of one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClcScheduler {
    cluster_size: u32,
    first_cta_x: u32,
    phase: ClcPhase,
}

impl ClcScheduler {
    /// The loop of the cluster whose first CTA is `own_first_cta_x`: it starts on its own work.
    /// `cluster_size` of 0 is treated as 1.
    pub const fn new(own_first_cta_x: u32, cluster_size: u32) -> Self {
        ClcScheduler {
            cluster_size: if cluster_size == 0 { 1 } else { cluster_size },
            first_cta_x: own_first_cta_x,
            phase: ClcPhase::Working,
        }
    }

    /// The loop of the cluster a CTA belongs to, from the CTA's `%ctaid.x` and its rank.
    pub const fn for_cta(cta_x: u32, rank_in_cluster: u32, cluster_size: u32) -> Self {
        Self::new(cta_x - rank_in_cluster, cluster_size)
    }

    /// Current phase.
    pub const fn phase(&self) -> ClcPhase {
        self.phase
    }

    /// Index of the current work unit (cluster index in the grid), or `None` once finished.
    pub const fn work_unit(&self) -> Option<u32> {
        match self.phase {
            ClcPhase::Finished => None,
            _ => Some(self.first_cta_x / self.cluster_size),
        }
    }

    /// Tile of the CTA of rank `rank` for the current work unit, or `None` once finished.
    pub const fn cta_tile(&self, rank: u32) -> Option<u32> {
        match self.phase {
            ClcPhase::Finished => None,
            _ => Some(self.first_cta_x + rank),
        }
    }

    /// True when a `try_cancel` may be issued now.
    pub const fn may_request(&self) -> bool {
        matches!(self.phase, ClcPhase::Working)
    }

    /// Records that `try_cancel` is being issued (call it, then issue, only on `Ok`).
    pub fn request(&mut self) -> Result<(), ClcError> {
        match self.phase {
            ClcPhase::Working => {
                self.phase = ClcPhase::Requested;
                Ok(())
            }
            ClcPhase::Requested => Err(ClcError::RequestInFlight),
            ClcPhase::Finished => Err(ClcError::RequestAfterFailedCancel),
        }
    }

    /// Consumes the response of the request in flight and says what to do next.
    pub fn respond(&mut self, response: CancelResponse) -> Result<Step, ClcError> {
        if !matches!(self.phase, ClcPhase::Requested) {
            return Err(ClcError::NoRequestInFlight);
        }
        match response {
            CancelResponse::Canceled { first_cta_x } => {
                if !first_cta_x.is_multiple_of(self.cluster_size) {
                    return Err(ClcError::MisalignedCluster);
                }
                self.first_cta_x = first_cta_x;
                self.phase = ClcPhase::Working;
                Ok(Step::Work { first_cta_x })
            }
            CancelResponse::NotCanceled => {
                self.phase = ClcPhase::Finished;
                Ok(Step::Stop)
            }
        }
    }
}

/// The alternative without CLC: `workers` persistent clusters (what fits on the GPU at once)
/// take work units `w, w + W, w + 2W, …` of `units`. Fixed at launch, so it cannot react to
/// SMs held by other work or to skewed per-unit costs — the case CLC exists for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticPersistent {
    unit: u32,
    stride: u32,
    units: u32,
}

impl StaticPersistent {
    /// Worker `worker` of `workers` over `units` work units (`workers` of 0 is treated as 1).
    pub const fn new(worker: u32, workers: u32, units: u32) -> Self {
        StaticPersistent { unit: worker, stride: if workers == 0 { 1 } else { workers }, units }
    }

    /// The current work unit, or `None` when this worker is done.
    pub const fn work_unit(&self) -> Option<u32> {
        if self.unit < self.units { Some(self.unit) } else { None }
    }

    /// Moves to the next work unit and returns it.
    pub fn advance(&mut self) -> Option<u32> {
        self.unit = self.unit.saturating_add(self.stride);
        self.work_unit()
    }
}

#[cfg(test)]
mod sim;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_moves_to_the_cancelled_cluster() {
        let mut s = ClcScheduler::for_cta(13, 1, 4);
        assert_eq!((s.work_unit(), s.cta_tile(1)), (Some(3), Some(13)));
        assert!(s.may_request());
        s.request().unwrap();
        assert_eq!(s.request(), Err(ClcError::RequestInFlight));
        assert_eq!(s.respond(CancelResponse::Canceled { first_cta_x: 40 }), Ok(Step::Work { first_cta_x: 40 }));
        assert_eq!((s.work_unit(), s.cta_tile(3)), (Some(10), Some(43)));
        assert_eq!(s.phase(), ClcPhase::Working);
    }

    #[test]
    fn a_failed_cancel_ends_the_loop_for_good() {
        let mut s = ClcScheduler::new(0, 2);
        s.request().unwrap();
        assert_eq!(s.respond(CancelResponse::NotCanceled), Ok(Step::Stop));
        assert_eq!(s.work_unit(), None);
        assert_eq!(s.cta_tile(0), None);
        assert!(!s.may_request());
        assert_eq!(s.request(), Err(ClcError::RequestAfterFailedCancel));
        assert_eq!(s.respond(CancelResponse::Canceled { first_cta_x: 2 }), Err(ClcError::NoRequestInFlight));
        assert_eq!(s.request(), Err(ClcError::RequestAfterFailedCancel));
    }

    #[test]
    fn responses_need_a_request_and_a_cluster_boundary() {
        let mut s = ClcScheduler::new(0, 2);
        assert_eq!(s.respond(CancelResponse::NotCanceled), Err(ClcError::NoRequestInFlight));
        s.request().unwrap();
        assert_eq!(s.respond(CancelResponse::Canceled { first_cta_x: 3 }), Err(ClcError::MisalignedCluster));
    }

    /// The typed cursor keeps one scheduler copy per thread: reader warps replay the request
    /// (bookkeeping only) and every CTA of a cluster reads the same multicast answer. All copies
    /// must walk the same work units, each CTA at `first + rank`.
    #[test]
    fn replicas_in_every_warp_and_cta_follow_the_issuer() {
        let answers = [
            CancelResponse::Canceled { first_cta_x: 8 },
            CancelResponse::Canceled { first_cta_x: 2 },
            CancelResponse::NotCanceled,
        ];
        let mut issuer = ClcScheduler::for_cta(5, 1, 2);
        let mut reader = issuer;
        let mut peer = ClcScheduler::for_cta(4, 0, 2);
        let mut units = std::vec::Vec::new();
        for answer in answers {
            units.push(issuer.work_unit());
            issuer.request().unwrap();
            assert_eq!(reader.request(), Ok(()));
            assert_eq!(peer.request(), Ok(()));
            // The issuing warp's other lanes replay the request too; it must stay one request.
            let mut lane = issuer;
            assert_eq!(lane.request(), Err(ClcError::RequestInFlight));
            let step = issuer.respond(answer);
            assert_eq!(reader.respond(answer), step);
            assert_eq!(peer.respond(answer), step);
            assert_eq!(issuer.cta_tile(1), reader.cta_tile(1));
            assert_eq!(peer.cta_tile(0).map(|t| t + 1), issuer.cta_tile(1));
        }
        assert_eq!(units, [Some(2), Some(4), Some(1)]);
        assert!(issuer.cta_tile(1).is_none() && peer.cta_tile(0).is_none());
    }

    #[test]
    fn static_persistent_strides_over_the_units() {
        let mut w = StaticPersistent::new(2, 3, 9);
        assert_eq!(w.work_unit(), Some(2));
        assert_eq!(w.advance(), Some(5));
        assert_eq!(w.advance(), Some(8));
        assert_eq!(w.advance(), None);
        assert_eq!(StaticPersistent::new(9, 3, 9).work_unit(), None);
    }
}
