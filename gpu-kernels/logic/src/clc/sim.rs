//! Discrete-event CPU simulation of a grid scheduled by cluster launch control, and of the static
//! persistent alternative, driving the same [`ClcScheduler`] / [`StaticPersistent`] code the
//! kernels run.
//!
//! Model: `sms` SMs, each cluster occupies `cluster` of them while it lives. Some SMs are held by
//! other work until a random time. The launcher starts not-yet-launched clusters in ctaid order
//! whenever enough SMs are free. A CLC cluster issues `try_cancel` when it starts a work unit
//! (so the response is ready when the unit ends); the request takes effect `clc_latency` later:
//! it succeeds iff a not-yet-launched cluster remains, and that cluster is removed from the launch
//! queue for good. Static persistent grids launch `sms / cluster` clusters that each stride over
//! the work units. Every run checks: each CTA tile computed exactly once, no request after a
//! failed cancel, no cancelled cluster ever launched.

use super::*;
use proptest::prelude::*;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::vec::Vec;
use std::{format, println, vec};

/// Machine and grid parameters; times in arbitrary integer units (think ns).
#[derive(Clone, Debug)]
struct Machine {
    sms: u32,
    cluster: u32,
    clc_latency: u64,
    launch_latency: u64,
    /// Per SM: held by other work until this time (0 = free at start).
    sm_busy_until: Vec<u64>,
    /// A deliberately wrong launcher that still launches cancelled clusters, after the regular
    /// queue (to show that the checks catch a broken CLC model).
    cancel_keeps_cluster: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Clc,
    Static,
}

#[derive(Debug)]
struct Outcome {
    makespan: u64,
    requests: u32,
    requests_after_failure: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// An SM held by other work becomes free.
    SmFreed,
    /// A cluster retired (its SMs are already counted free): try to launch.
    ClusterRetired,
    UnitDone(usize),
    CancelTakesEffect(usize),
}

enum Sched {
    Clc(ClcScheduler),
    Static(StaticPersistent),
}

struct Worker {
    sched: Sched,
    response: Option<CancelResponse>,
    unit_done: bool,
    saw_failure: bool,
}

struct Sim<'a> {
    m: &'a Machine,
    costs: &'a [u64],
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    free_sms: u32,
    unlaunched: VecDeque<u32>,
    /// Cancelled clusters the faulty launcher runs anyway.
    relaunch: VecDeque<u32>,
    launched: Vec<u32>,
    cancelled: Vec<u32>,
    workers: Vec<Worker>,
    computed: Vec<u32>,
    static_workers: u32,
    makespan: u64,
    requests: u32,
    requests_after_failure: u32,
}

impl Sim<'_> {
    fn push(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, e)));
    }

    fn launch_what_fits(&mut self, t: u64, mode: Mode) {
        while self.free_sms >= self.m.cluster {
            let Some(cluster) = self.unlaunched.pop_front().or_else(|| self.relaunch.pop_front()) else { return };
            self.free_sms -= self.m.cluster;
            self.launched.push(cluster);
            let sched = match mode {
                Mode::Clc => Sched::Clc(ClcScheduler::for_cta(cluster * self.m.cluster, 0, self.m.cluster)),
                Mode::Static => {
                    Sched::Static(StaticPersistent::new(cluster, self.static_workers, self.costs.len() as u32))
                }
            };
            self.workers.push(Worker { sched, response: None, unit_done: false, saw_failure: false });
            let w = self.workers.len() - 1;
            self.start_unit(w, t + self.m.launch_latency);
        }
    }

    /// Starts the worker's current unit, or retires the worker if it has none.
    fn start_unit(&mut self, w: usize, t: u64) {
        let unit = match &self.workers[w].sched {
            Sched::Clc(s) => s.work_unit(),
            Sched::Static(s) => s.work_unit(),
        };
        let Some(unit) = unit else {
            self.free_sms += self.m.cluster;
            self.push(t, Event::ClusterRetired);
            return;
        };
        for rank in 0..self.m.cluster {
            self.computed[(unit * self.m.cluster + rank) as usize] += 1;
        }
        self.push(t + self.costs[unit as usize], Event::UnitDone(w));
        let worker = &mut self.workers[w];
        if let Sched::Clc(s) = &mut worker.sched
            && s.may_request()
        {
            s.request().expect("may_request said yes");
            self.requests += 1;
            if worker.saw_failure {
                self.requests_after_failure += 1;
            }
            self.push(t + self.m.clc_latency, Event::CancelTakesEffect(w));
        }
    }

    /// Both the unit and (for CLC) the response are in: pick the next unit.
    fn next_unit(&mut self, w: usize, t: u64) {
        let worker = &mut self.workers[w];
        worker.unit_done = false;
        match &mut worker.sched {
            Sched::Static(s) => {
                s.advance();
            }
            Sched::Clc(s) => {
                let response = worker.response.take().expect("caller checked");
                if s.respond(response).expect("one request in flight") == Step::Stop {
                    worker.saw_failure = true;
                }
            }
        }
        self.start_unit(w, t);
    }

    fn run(&mut self, mode: Mode) {
        while let Some(Reverse((t, _, event))) = self.queue.pop() {
            match event {
                Event::SmFreed => {
                    self.free_sms += 1;
                    self.launch_what_fits(t, mode);
                }
                Event::ClusterRetired => self.launch_what_fits(t, mode),
                Event::UnitDone(w) => {
                    self.makespan = self.makespan.max(t);
                    self.workers[w].unit_done = true;
                    let ready = match self.workers[w].sched {
                        Sched::Static(_) => true,
                        Sched::Clc(_) => self.workers[w].response.is_some(),
                    };
                    if ready {
                        self.next_unit(w, t);
                    }
                }
                Event::CancelTakesEffect(w) => {
                    let victim = self.unlaunched.pop_front();
                    if let (true, Some(cluster)) = (self.m.cancel_keeps_cluster, victim) {
                        self.relaunch.push_back(cluster);
                    }
                    let response = match victim {
                        Some(cluster) => {
                            self.cancelled.push(cluster);
                            CancelResponse::Canceled { first_cta_x: cluster * self.m.cluster }
                        }
                        None => CancelResponse::NotCanceled,
                    };
                    self.workers[w].response = Some(response);
                    if self.workers[w].unit_done {
                        self.next_unit(w, t);
                    }
                }
            }
        }
    }
}

/// Runs one grid of `costs.len()` cluster work units and checks the invariants.
fn simulate(m: &Machine, costs: &[u64], mode: Mode) -> Outcome {
    let units = costs.len() as u32;
    let static_workers = (m.sms / m.cluster).min(units).max(1);
    let grid = match mode {
        Mode::Clc => units,
        Mode::Static => static_workers,
    };
    let mut sim = Sim {
        m,
        costs,
        queue: BinaryHeap::new(),
        seq: 0,
        free_sms: 0,
        unlaunched: (0..grid).collect(),
        relaunch: VecDeque::new(),
        launched: Vec::new(),
        cancelled: Vec::new(),
        workers: Vec::new(),
        computed: vec![0; (units * m.cluster) as usize],
        static_workers,
        makespan: 0,
        requests: 0,
        requests_after_failure: 0,
    };
    // SMs free at time 0 are counted now; the others arrive as SmFreed events.
    sim.free_sms = m.sm_busy_until.iter().filter(|&&b| b == 0).count() as u32;
    for &b in m.sm_busy_until.iter().filter(|&&b| b > 0) {
        sim.push(b, Event::SmFreed);
    }
    sim.launch_what_fits(0, mode);
    sim.run(mode);

    for (tile, &n) in sim.computed.iter().enumerate() {
        assert_eq!(n, 1, "{mode:?}: CTA tile {tile} computed {n} times");
    }
    assert!(sim.unlaunched.is_empty(), "{mode:?}: clusters never launched nor cancelled");
    assert!(sim.cancelled.iter().all(|c| !sim.launched.contains(c)), "a cancelled cluster launched");
    assert_eq!(sim.launched.len() + sim.cancelled.len(), grid as usize);
    if mode == Mode::Clc {
        // Every launched cluster ends on exactly one failed cancel.
        assert_eq!(sim.requests as usize, sim.cancelled.len() + sim.launched.len());
    }
    Outcome { makespan: sim.makespan, requests: sim.requests, requests_after_failure: sim.requests_after_failure }
}

/// splitmix64: a tiny deterministic generator, so tables are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Base cost of one work unit (a 256×256 bf16 tile with K = 4096 at ~1.2 PFLOP/s ≈ 110 µs/SM-pair).
const UNIT: u64 = 1000;

#[derive(Clone, Copy, Debug)]
enum Workload {
    Uniform,
    /// 10 % of the units cost 8×.
    HeavyTail,
    /// Every unit that static round-robin hands to worker 0 costs 10×.
    StrideAligned,
    /// Cost grows with the unit's column, as in causal attention.
    Triangular,
}

fn costs(workload: Workload, units: u32, workers: u32, rng: &mut Rng) -> Vec<u64> {
    (0..units)
        .map(|u| {
            let jitter = UNIT * 9 / 10 + rng.below(UNIT / 5);
            match workload {
                Workload::Uniform => jitter,
                Workload::HeavyTail if rng.below(10) == 0 => 8 * jitter,
                Workload::HeavyTail => jitter,
                Workload::StrideAligned if u % workers == 0 => 10 * jitter,
                Workload::StrideAligned => jitter,
                Workload::Triangular => jitter * (1 + u64::from(u % 16)) / 4,
            }
        })
        .collect()
}

/// A B200-like machine (148 SMs, 2-CTA clusters); `busy_percent` of the SMs are held by other
/// work for up to `busy_units` work units.
fn machine(busy_percent: u64, busy_units: u64, rng: &mut Rng) -> Machine {
    let sms = 148;
    let sm_busy_until =
        (0..sms).map(|_| if rng.below(100) < busy_percent { 1 + rng.below(busy_units * UNIT) } else { 0 }).collect();
    Machine {
        sms,
        cluster: 2,
        clc_latency: UNIT / 100,
        launch_latency: UNIT / 50,
        sm_busy_until,
        cancel_keeps_cluster: false,
    }
}

#[test]
fn clc_beats_static_on_a_strongly_skewed_workload() {
    let mut rng = Rng(0x5EED);
    let m = machine(30, 6, &mut rng);
    let units = 74 * 8;
    let c = costs(Workload::StrideAligned, units, m.sms / m.cluster, &mut rng);
    let clc = simulate(&m, &c, Mode::Clc);
    let stat = simulate(&m, &c, Mode::Static);
    assert_eq!(clc.requests_after_failure, 0);
    assert!(clc.makespan <= stat.makespan, "CLC {} vs static {}", clc.makespan, stat.makespan);
    // Not a tie: the heavy units all land on one static worker, 8 × 10 units ≈ 80 UNIT.
    assert!(clc.makespan * 2 < stat.makespan, "CLC {} vs static {}", clc.makespan, stat.makespan);
}

#[test]
fn makespan_respects_the_work_bound() {
    let mut rng = Rng(7);
    let m = machine(0, 1, &mut rng);
    let c = costs(Workload::Uniform, 500, 74, &mut rng);
    let slots = u64::from(m.sms / m.cluster);
    let lower = c.iter().sum::<u64>() / slots;
    for mode in [Mode::Clc, Mode::Static] {
        let out = simulate(&m, &c, mode);
        assert!(out.makespan >= lower, "{mode:?} {} below the bound {lower}", out.makespan);
        assert!(out.makespan <= lower + 2 * UNIT * 12 / 10 + UNIT, "{mode:?} {} far above {lower}", out.makespan);
    }
}

#[test]
fn the_checks_catch_a_launcher_that_runs_cancelled_clusters() {
    let mut rng = Rng(3);
    let mut m = machine(0, 1, &mut rng);
    m.cancel_keeps_cluster = true;
    let c = costs(Workload::Uniform, 400, 74, &mut rng);
    let caught = std::panic::catch_unwind(|| simulate(&m, &c, Mode::Clc)).expect_err("the broken launcher passed");
    let message = caught.downcast_ref::<std::string::String>().map(|s| s.as_str()).unwrap_or_default();
    assert!(message.contains("computed 2 times"), "unexpected failure: {message}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_tile_exactly_once_and_no_request_after_failure(
        seed: u64, sms in 2u32..40, cluster in 1u32..5, units in 1u32..300,
        busy_percent in 0u64..100, clc_latency in 1u64..3000,
    ) {
        let mut rng = Rng(seed);
        let sms = sms.max(cluster);
        let sm_busy_until = (0..sms).map(|_| if rng.below(100) < busy_percent { 1 + rng.below(5 * UNIT) } else { 0 }).collect();
        let m = Machine { sms, cluster, clc_latency, launch_latency: 5, sm_busy_until, cancel_keeps_cluster: false };
        let c: Vec<u64> = (0..units).map(|_| 1 + rng.below(4 * UNIT)).collect();
        let clc = simulate(&m, &c, Mode::Clc);
        let stat = simulate(&m, &c, Mode::Static);
        prop_assert_eq!(clc.requests_after_failure, 0);
        prop_assert!(clc.requests >= 1);
        prop_assert!(stat.makespan > 0 && clc.makespan > 0);
    }
}

/// `cargo test -p warpforge-logic clc_makespan_table -- --ignored --nocapture`
#[test]
#[ignore = "prints a table"]
fn clc_makespan_table() {
    println!("| workload | busy SMs | static | CLC | static / CLC |");
    println!("| --- | --- | --- | --- | --- |");
    for workload in [Workload::Uniform, Workload::HeavyTail, Workload::StrideAligned, Workload::Triangular] {
        for (busy, units_held) in [(0, 1), (30, 6)] {
            let (mut s_sum, mut c_sum) = (0, 0);
            for seed in 0..8 {
                let mut rng = Rng(seed);
                let m = machine(busy, units_held, &mut rng);
                let c = costs(workload, 74 * 8, m.sms / m.cluster, &mut rng);
                s_sum += simulate(&m, &c, Mode::Static).makespan;
                c_sum += simulate(&m, &c, Mode::Clc).makespan;
            }
            let ratio = format!("{:.2}", s_sum as f64 / c_sum as f64);
            println!("| {workload:?} | {busy}% | {} | {} | {ratio} |", s_sum / 8, c_sum / 8);
        }
    }
}
