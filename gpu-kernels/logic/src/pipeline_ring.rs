//! The (stage, phase) state of an mbarrier ring pipeline, and a CPU model of the mbarrier
//! parity rule it relies on (REFERENCE §4), so the phase discipline is tested on the host.
//!
//! Each stage has a "full" barrier (producer → consumer) and an "empty" barrier (consumer →
//! producer). `try_wait.parity(p)` answers for the *current* phase (false) or the one before it
//! (true), so a fresh barrier already reports parity 1 as complete: the producer waits on
//! `empty` with `parity ^ 1` (its first lap passes at once) and the consumer on `full` with
//! `parity`; the parity flips whenever the stage index wraps to 0.

/// Position in a ring of `STAGES` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingState<const STAGES: usize> {
    /// Slot index, `0..STAGES`.
    pub stage: u32,
    /// Parity of this lap (0 on the first).
    pub parity: u32,
}

impl<const STAGES: usize> RingState<STAGES> {
    /// Slot 0 of the first lap.
    pub const START: Self = RingState { stage: 0, parity: 0 };

    /// The next slot; the parity flips when the ring wraps.
    #[inline(always)]
    pub fn advance(&mut self) {
        self.stage += 1;
        if self.stage == STAGES as u32 {
            self.stage = 0;
            self.parity ^= 1;
        }
    }

    /// The slot `n` slots later (what `n` calls of [`RingState::advance`] reach): how a consumer
    /// skips the slots another consumer takes.
    #[inline(always)]
    pub fn advance_by(&mut self, n: u32) {
        let stages = STAGES as u32;
        let ahead = self.stage + n % stages;
        let laps = n / stages + ahead / stages;
        self.stage = ahead % stages;
        self.parity ^= laps & 1;
    }

    /// Parity the consumer waits for on this slot's "full" barrier.
    #[inline(always)]
    pub const fn consumer_parity(self) -> u32 {
        self.parity
    }

    /// Parity the producer waits for on this slot's "empty" barrier.
    #[inline(always)]
    pub const fn producer_parity(self) -> u32 {
        self.parity ^ 1
    }
}

/// A CPU model of one mbarrier's arrival counting and parity wait (no transaction bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MbarrierModel {
    /// Completed phases so far; the current phase is number `completed`.
    pub completed: u32,
    /// Arrivals still missing in the current phase.
    pub pending: u32,
    /// Arrivals per phase.
    pub expected: u32,
}

impl MbarrierModel {
    /// `mbarrier.init` with `count` arrivals per phase.
    pub const fn new(count: u32) -> Self {
        MbarrierModel { completed: 0, pending: count, expected: count }
    }

    /// One arrival; the phase completes on the last one.
    pub fn arrive(&mut self) {
        self.pending -= 1;
        if self.pending == 0 {
            self.completed += 1;
            self.pending = self.expected;
        }
    }

    /// `try_wait.parity(parity)`: true iff the phase with that parity is the one just before the
    /// current phase (i.e. it has completed).
    pub const fn try_wait_parity(&self, parity: u32) -> bool {
        self.completed % 2 != parity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    /// Runs a producer and `consumers` consumers over a `STAGES` ring for `items` items,
    /// interleaved by `schedule` (each entry picks who tries a step). `producer_parity` chooses
    /// the parity the producer waits with. Returns what each consumer read, in order, or None
    /// when the ring deadlocks or a slot is overwritten before every consumer read it.
    fn simulate<const STAGES: usize>(
        items: u32,
        consumers: usize,
        schedule: &[usize],
        producer_parity: fn(RingState<STAGES>) -> u32,
    ) -> Option<Vec<Vec<u32>>> {
        let mut full = [MbarrierModel::new(1); STAGES];
        let mut empty = [MbarrierModel::new(consumers as u32); STAGES];
        let mut slot: [Option<(u32, usize)>; STAGES] = [None; STAGES];
        let mut producer = (RingState::<STAGES>::START, 0u32);
        let mut cons = vec![(RingState::<STAGES>::START, Vec::new()); consumers];
        let mut idle = 0;
        let mut step = 0;
        while cons.iter().any(|c| (c.1.len() as u32) < items) {
            let who = schedule[step % schedule.len()] % (consumers + 1);
            step += 1;
            let moved = if who == consumers {
                let (st, next) = &mut producer;
                if *next < items && empty[st.stage as usize].try_wait_parity(producer_parity(*st)) {
                    if matches!(slot[st.stage as usize], Some((_, unread)) if unread > 0) {
                        return None;
                    }
                    slot[st.stage as usize] = Some((*next, consumers));
                    full[st.stage as usize].arrive();
                    *next += 1;
                    st.advance();
                    true
                } else {
                    false
                }
            } else {
                let (st, seen) = &mut cons[who];
                if (seen.len() as u32) < items && full[st.stage as usize].try_wait_parity(st.consumer_parity()) {
                    let (value, unread) = slot[st.stage as usize].as_mut()?;
                    seen.push(*value);
                    *unread -= 1;
                    empty[st.stage as usize].arrive();
                    st.advance();
                    true
                } else {
                    false
                }
            };
            idle = if moved { 0 } else { idle + 1 };
            if idle > 4 * schedule.len() + 16 {
                return None;
            }
        }
        Some(cons.into_iter().map(|c| c.1).collect())
    }

    #[test]
    fn advance_wraps_and_flips() {
        let mut s = RingState::<3>::START;
        let mut seen = vec![];
        for _ in 0..7 {
            seen.push((s.stage, s.parity));
            s.advance();
        }
        assert_eq!(seen, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 0)]);
    }

    #[test]
    fn fresh_barrier_reports_the_previous_parity_complete() {
        let mut b = MbarrierModel::new(2);
        assert!(b.try_wait_parity(1) && !b.try_wait_parity(0));
        b.arrive();
        assert!(!b.try_wait_parity(0));
        b.arrive();
        assert!(b.try_wait_parity(0) && !b.try_wait_parity(1));
    }

    #[test]
    fn waiting_with_the_consumer_parity_deadlocks_the_producer() {
        // The classic bug: a producer waiting on `empty` with `parity` instead of `parity ^ 1`
        // never starts (fresh barriers have not completed phase 0).
        let schedule: Vec<usize> = (0..64).collect();
        assert_eq!(simulate::<2>(5, 1, &schedule, |s| s.consumer_parity()), None);
    }

    proptest! {
        #[test]
        fn advance_by_equals_repeated_advance(stage in 0u32..5, parity in 0u32..2, n in 0u32..10_000) {
            let start = RingState::<5> { stage, parity };
            let (mut stepped, mut jumped) = (start, start);
            for _ in 0..n {
                stepped.advance();
            }
            jumped.advance_by(n);
            prop_assert_eq!(jumped, stepped);
        }

        #[test]
        fn every_consumer_sees_every_item_once_in_order(
            items in 1u32..40,
            consumers in 1usize..4,
            schedule in proptest::collection::vec(0usize..8, 1..64),
        ) {
            let want: Vec<u32> = (0..items).collect();
            // Every interleaving must finish: pad the schedule with a round-robin tail.
            let mut schedule = schedule;
            schedule.extend(0..=consumers);
            for s in [
                simulate::<1>(items, consumers, &schedule, RingState::producer_parity),
                simulate::<3>(items, consumers, &schedule, RingState::producer_parity),
                simulate::<4>(items, consumers, &schedule, RingState::producer_parity),
            ] {
                let s = s.expect("no deadlock, no overwrite of an unread slot");
                for seen in s {
                    prop_assert_eq!(&seen, &want);
                }
            }
        }
    }
}
