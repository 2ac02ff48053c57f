//! GEMM plans chosen by measurement: the shape buckets, the plans a table may name, the table's
//! text format and its checks, and the rule that turns a bucket's measurements into an entry.
//!
//! `examples/tune.rs` times every candidate plan on each bucket's representative shapes on a
//! GPU, checks each result against float64, and writes a table ([`PlanTable::to_text`]); the
//! table for the H200 ships in the crate (`tuned/h200.tsv`) and [`crate::Warpforge::new`] loads
//! the shipped table whose device matches. At run time a call with every knob `Auto`, one batch,
//! bf16 → bf16 or f16 → f16, A row-major and B stored N × K takes its bucket's plan;
//! every other call, and every bucket whose entry says `model`, takes the cost model (the rules
//! in `variant.rs`, `decode.rs` and `logic::schedule::heuristic`).
//!
//! **Buckets.** M by powers of two (`(2^(i−1), 2^i]`, 15 classes up to 16384 and above); N at
//! 512, 2048, 8192 and 32768; K at 512, 2048 and 8192; operands read in place or repacked (K or
//! a pitch not a multiple of 8). Each bucket is timed on the corners of its class ranges
//! ([`Bucket::shapes`]): M just past a power of two and at the next one (the ragged and the
//! aligned tile count), two N and two K per class (K one less where repacked).
//!
//! **Rejected:** a line whose checksum does not match its fields and the table's device (a
//! corrupted entry), an unknown plan, a plan the bucket cannot run (the decode kernel above 32
//! rows), a non-finite or non-positive time, a plan that does not beat the model by
//! [`MIN_GAIN`], a bucket listed twice. A table with any rejected line is refused whole.

use std::collections::BTreeMap;
use std::fmt;

use warpforge_host::{Error, Result};

use super::decode::{DECODE_MAX_ROWS, SKINNY_MAX_ROWS};
use super::{Clusters, Consumers, Cores, GemmProblem, KSplit, MAX_K_SPLIT, TileWidth};

/// First line of every table.
pub const TABLE_HEADER: &str = "# warpforge GEMM plan table v1";
/// How much faster (time ratio) a measured plan must be than the cost model's to be recorded
/// instead of `model`: below it the difference is within run-to-run noise.
pub const MIN_GAIN: f64 = 1.03;
/// M classes: `(2^(i−1), 2^i]` for i in 0..15, the last one unbounded.
pub const M_CLASSES: u8 = 15;
/// Upper bounds of the N classes but the last.
const N_BOUNDS: [usize; 4] = [512, 2048, 8192, 32768];
/// Upper bounds of the K classes but the last.
const K_BOUNDS: [usize; 3] = [512, 2048, 8192];
/// Representative N and K per class.
const N_SHAPES: [[usize; 2]; 5] = [[128, 512], [768, 2048], [3072, 7168], [12288, 28672], [49152, 129024]];
const K_SHAPES: [[usize; 2]; 4] = [[128, 512], [1024, 2048], [3072, 7168], [11008, 16384]];

/// A class of GEMM shapes sharing one table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bucket {
    /// M class: `ceil(log2 M)`, at most 14.
    pub m: u8,
    /// N class: how many of 512, 2048, 8192, 32768 lie below N.
    pub n: u8,
    /// K class: how many of 512, 2048, 8192 lie below K.
    pub k: u8,
    /// Whether the wgmma kernels must repack an operand (K or a pitch not a multiple of 8
    /// elements): those calls are timed on shapes with an odd K.
    pub repacked: bool,
}

impl Bucket {
    /// The bucket of an `m × n × k` problem (each ≥ 1) whose operands the wgmma kernels read in
    /// place, or must repack (`repacked`).
    pub fn of(m: usize, n: usize, k: usize, repacked: bool) -> Bucket {
        let m_class = usize::BITS - m.max(1).saturating_sub(1).leading_zeros();
        Bucket {
            m: m_class.min(M_CLASSES as u32 - 1) as u8,
            n: N_BOUNDS.iter().filter(|&&b| n > b).count() as u8,
            k: K_BOUNDS.iter().filter(|&&b| k > b).count() as u8,
            repacked,
        }
    }

    /// Every bucket, in table order.
    pub fn all() -> impl Iterator<Item = Bucket> {
        (0..M_CLASSES).flat_map(|m| {
            (0..N_SHAPES.len() as u8).flat_map(move |n| {
                (0..K_SHAPES.len() as u8)
                    .flat_map(move |k| [false, true].map(move |repacked| Bucket { m, n, k, repacked }))
            })
        })
    }

    /// Whether the class indices exist.
    fn is_valid(self) -> bool {
        self.m < M_CLASSES && (self.n as usize) < N_SHAPES.len() && (self.k as usize) < K_SHAPES.len()
    }

    /// Most rows a problem of this bucket has (`None`: unbounded).
    pub fn max_rows(self) -> Option<usize> {
        (self.m + 1 < M_CLASSES).then(|| 1 << self.m)
    }

    /// The shapes the tuner times for this bucket: M just past the class's lower power of two
    /// and at its upper one, and two N and two K of the class (duplicates removed); K one less
    /// (odd) where the operands are repacked.
    pub fn shapes(self) -> Vec<(usize, usize, usize)> {
        let ms = if self.m == 0 { vec![1] } else { vec![(1 << (self.m - 1)) + 1, 1 << self.m] };
        let mut shapes = Vec::new();
        for &m in &ms {
            for &n in &N_SHAPES[self.n as usize] {
                for &k in &K_SHAPES[self.k as usize] {
                    let k = if self.repacked { k - 1 } else { k };
                    if !shapes.contains(&(m, n, k)) {
                        shapes.push((m, n, k));
                    }
                }
            }
        }
        shapes
    }
}

/// What chose a call's plan ([`crate::GemmPlan::chosen_by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanSource {
    /// The caller forced a knob ([`crate::Cores`], [`crate::Consumers`], [`crate::TileWidth`],
    /// [`crate::Clusters`], [`crate::KSplit`]).
    Caller,
    /// The plan table's entry for the call's bucket.
    Table,
    /// The cost model (no table, a bucket whose entry is `model`, or a call the table does not
    /// cover).
    Model,
}

/// A plan a table entry names: a kernel and, for the wgmma kernels, the variant and K split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TablePlan {
    /// The cost model's choice (every knob `Auto`).
    Model,
    /// The `mma.sync` decode kernel ([`Cores::Decode`]).
    Decode,
    /// The CUDA-core kernel ([`Cores::Cuda`]).
    Cuda,
    /// The `mma.sync` gather kernel ([`Cores::Gather`]).
    Gather,
    /// Cooperative 128 × 256 tiles; `Some(w)`: at most `w` CTAs per tile ([`KSplit::Ways`]),
    /// `None`: the schedule model's split.
    Wide(Option<u32>),
    /// Cooperative 128 × 128 tiles, the K split as for [`TablePlan::Wide`].
    Narrow(Option<u32>),
    /// Ping-pong consumers on 64 × 256 tiles.
    PingPong,
}

impl TablePlan {
    /// The candidates the tuner times for `bucket` (before any duplicates are removed).
    pub fn candidates(bucket: Bucket) -> Vec<TablePlan> {
        let mut plans = vec![TablePlan::Model];
        let rows = bucket.max_rows().filter(|_| !bucket.repacked);
        if rows.is_some_and(|r| r <= DECODE_MAX_ROWS) {
            plans.push(TablePlan::Decode);
        }
        if rows.is_some_and(|r| r <= SKINNY_MAX_ROWS) {
            plans.push(TablePlan::Cuda);
        }
        plans.push(TablePlan::Gather);
        for ways in [None, Some(1), Some(2), Some(4), Some(8)] {
            plans.push(TablePlan::Wide(ways));
            plans.push(TablePlan::Narrow(ways));
        }
        plans.push(TablePlan::PingPong);
        plans
    }

    /// Whether every problem of `bucket` (linear layout, one batch) can run this plan.
    pub fn admissible(self, bucket: Bucket) -> bool {
        let rows_within = |limit: usize| !bucket.repacked && bucket.max_rows().is_some_and(|r| r <= limit);
        match self {
            TablePlan::Decode => rows_within(DECODE_MAX_ROWS),
            TablePlan::Cuda => rows_within(SKINNY_MAX_ROWS),
            TablePlan::Wide(Some(w)) | TablePlan::Narrow(Some(w)) => (1..=MAX_K_SPLIT).contains(&w),
            _ => true,
        }
    }

    /// `problem` with this plan's knobs set (every knob as the caller left it for `Model`).
    pub fn apply(self, problem: &GemmProblem) -> GemmProblem {
        let tensor = |tile_width, consumers, ways: Option<u32>| GemmProblem {
            cores: Cores::Tensor,
            consumers,
            tile_width,
            clusters: Clusters::Off,
            k_split: ways.map_or(KSplit::Auto, KSplit::Ways),
            ..*problem
        };
        match self {
            TablePlan::Model => *problem,
            TablePlan::Decode => GemmProblem { cores: Cores::Decode, ..*problem },
            TablePlan::Cuda => GemmProblem { cores: Cores::Cuda, ..*problem },
            TablePlan::Gather => GemmProblem { cores: Cores::Gather, ..*problem },
            TablePlan::Wide(ways) => tensor(TileWidth::Wide, Consumers::Cooperative, ways),
            TablePlan::Narrow(ways) => tensor(TileWidth::Narrow, Consumers::Cooperative, ways),
            TablePlan::PingPong => tensor(TileWidth::Wide, Consumers::PingPong, None),
        }
    }

    fn parse(text: &str) -> Option<TablePlan> {
        let split = |rest: &str| -> Option<Option<u32>> {
            match rest {
                "" => Some(None),
                _ => rest.strip_prefix("/k")?.parse().ok().map(Some),
            }
        };
        Some(match text {
            "model" => TablePlan::Model,
            "decode" => TablePlan::Decode,
            "cuda" => TablePlan::Cuda,
            "gather" => TablePlan::Gather,
            "pingpong" => TablePlan::PingPong,
            _ => {
                if let Some(rest) = text.strip_prefix("wide") {
                    TablePlan::Wide(split(rest)?)
                } else {
                    TablePlan::Narrow(split(text.strip_prefix("narrow")?)?)
                }
            }
        })
    }
}

impl fmt::Display for TablePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TablePlan::Model => f.write_str("model"),
            TablePlan::Decode => f.write_str("decode"),
            TablePlan::Cuda => f.write_str("cuda"),
            TablePlan::Gather => f.write_str("gather"),
            TablePlan::PingPong => f.write_str("pingpong"),
            TablePlan::Wide(None) => f.write_str("wide"),
            TablePlan::Wide(Some(w)) => write!(f, "wide/k{w}"),
            TablePlan::Narrow(None) => f.write_str("narrow"),
            TablePlan::Narrow(Some(w)) => write!(f, "narrow/k{w}"),
        }
    }
}

/// One bucket's entry: the plan and the geometric-mean times (µs per call over the bucket's
/// shapes) of that plan and of the cost model's, and what the cost model chose on each shape
/// when it was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct TableEntry {
    /// The plan calls in this bucket take.
    pub plan: TablePlan,
    /// Its measured time.
    pub plan_us: f64,
    /// The cost model's measured time.
    pub model_us: f64,
    /// The cost model's kernel on each of [`Bucket::shapes`] when measured (as a plan, the split
    /// the model's own): a model that now chooses otherwise makes the entry stale.
    pub model_plans: Vec<TablePlan>,
}

impl TableEntry {
    /// Why this entry cannot stand in `bucket`, if it cannot.
    fn defect(&self, bucket: Bucket) -> Option<String> {
        let positive = |t: f64| t.is_finite() && t > 0.0;
        if !positive(self.plan_us) || !positive(self.model_us) {
            return Some(format!("times {} / {} µs are not positive and finite", self.plan_us, self.model_us));
        }
        if self.model_plans.len() != bucket.shapes().len() {
            return Some(format!("{} model plans for {} shapes", self.model_plans.len(), bucket.shapes().len()));
        }
        if !self.plan.admissible(bucket) {
            return Some(format!("plan {} cannot run bucket {bucket:?}", self.plan));
        }
        match self.plan {
            TablePlan::Model if self.plan_us != self.model_us => Some("model entry with two times".into()),
            TablePlan::Model => None,
            _ if self.plan_us * MIN_GAIN > self.model_us => {
                Some(format!("plan {} does not beat the model by {MIN_GAIN}×", self.plan))
            }
            _ => None,
        }
    }
}

impl TablePlan {
    /// The plan a planned call ran, in the table's terms (a wgmma plan with the model's split).
    pub fn of(plan: &crate::GemmPlan) -> TablePlan {
        match plan.path {
            crate::GemmPath::Decode => TablePlan::Decode,
            crate::GemmPath::Skinny => TablePlan::Cuda,
            crate::GemmPath::Gather => TablePlan::Gather,
            crate::GemmPath::TensorCores if plan.consumers == Consumers::PingPong => TablePlan::PingPong,
            crate::GemmPath::TensorCores if plan.tile_width == TileWidth::Narrow => TablePlan::Narrow(None),
            crate::GemmPath::TensorCores => TablePlan::Wide(None),
        }
    }
}

/// What the cost model runs for the linear-layer problem `m × n × k` (packed: repacked exactly
/// when K is not a multiple of 8) with `input` → `output` types on `sms` SMs, in the table's
/// terms: the same rules [`crate::Warpforge::gemm_plan`] follows without a table (the decode
/// kernels' and the wgmma variants' choices; pure, no GPU).
pub fn model_plan(m: usize, n: usize, k: usize, input: &str, output: &str, sms: u32) -> Result<TablePlan> {
    let p = GemmProblem::new(m, n, k);
    let e = p.check()?;
    let variant = super::Variant::choose(&p, input, output, sms)?;
    Ok(match super::decode::path(&p, &e)? {
        Some(crate::GemmPath::Decode) => TablePlan::Decode,
        Some(crate::GemmPath::Skinny) => TablePlan::Cuda,
        Some(crate::GemmPath::Gather) => TablePlan::Gather,
        _ if variant.pingpong => TablePlan::PingPong,
        _ if variant.narrow => TablePlan::Narrow(None),
        _ => TablePlan::Wide(None),
    })
}

/// One candidate's measurement on a bucket: its time per shape (µs per call; `None` where it
/// was not run) and whether every checked result matched the float64 reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// The candidate.
    pub plan: TablePlan,
    /// µs per call on each of the bucket's shapes.
    pub times_us: Vec<Option<f64>>,
    /// Every result of this candidate passed the float64 check.
    pub verified: bool,
}

impl Measurement {
    /// Geometric mean over the shapes, when every shape was timed.
    fn score(&self) -> Option<f64> {
        let times: Option<Vec<f64>> = self.times_us.iter().copied().collect();
        let times = times.filter(|t| !t.is_empty() && t.iter().all(|v| v.is_finite() && *v > 0.0))?;
        Some((times.iter().map(|t| t.ln()).sum::<f64>() / times.len() as f64).exp())
    }
}

/// The entry the tuner writes for a bucket's measurements: the fastest verified candidate that
/// was timed on every shape, recorded only if it beats the model ([`TablePlan::Model`], which
/// must be verified and fully timed) by [`MIN_GAIN`]; otherwise `model`. An unverified
/// candidate never enters the table, however fast.
pub fn choose_entry(bucket: Bucket, measurements: &[Measurement], model_plans: Vec<TablePlan>) -> Result<TableEntry> {
    // Times as the table writes them (ns resolution), so the written entry passes its checks.
    let rounded = |us: f64| (us * 1e3).round() / 1e3;
    let model = measurements
        .iter()
        .find(|m| m.plan == TablePlan::Model)
        .filter(|m| m.verified)
        .and_then(Measurement::score)
        .map(rounded)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("bucket {bucket:?}: the model's plan was not verified on every shape"))
        })?;
    let best = measurements
        .iter()
        .filter(|m| m.verified && m.plan.admissible(bucket))
        .filter_map(|m| Some((m.plan, rounded(m.score()?))))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Ok(match best {
        Some((plan, us)) if plan != TablePlan::Model && us * MIN_GAIN <= model => {
            TableEntry { plan, plan_us: us, model_us: model, model_plans }
        }
        _ => TableEntry { plan: TablePlan::Model, plan_us: model, model_us: model, model_plans },
    })
}

/// A table of measured plans for one device.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanTable {
    /// Device name, as the driver reports it.
    pub device: String,
    /// SMs of the device.
    pub sms: u32,
    /// The entries by bucket.
    pub entries: BTreeMap<Bucket, TableEntry>,
}

/// FNV-1a (64 bits) of `text`: the per-line checksum.
fn checksum(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

impl PlanTable {
    /// The entry for an `m × n × k` problem (`repacked`: see [`Bucket::repacked`]), if the table
    /// has its bucket.
    pub fn entry(&self, m: usize, n: usize, k: usize, repacked: bool) -> Option<&TableEntry> {
        self.entries.get(&Bucket::of(m, n, k, repacked))
    }

    /// The table as text: the header, the device line, one tab-separated line per bucket
    /// (`m n k repacked plan plan_us model_us model_plans checksum`, the model's plans
    /// comma-separated),
    /// the checksum over the device and the fields.
    pub fn to_text(&self) -> String {
        let mut out = format!("{TABLE_HEADER}\ndevice\t{}\t{}\n", self.device, self.sms);
        out.push_str("# m_class\tn_class\tk_class\trepacked\tplan\tplan_us\tmodel_us\tmodel_plans\tchecksum\n");
        for (b, e) in &self.entries {
            let models: Vec<String> = e.model_plans.iter().map(|p| p.to_string()).collect();
            let fields = format!(
                "{}\t{}\t{}\t{}\t{}\t{:.3}\t{:.3}\t{}",
                b.m,
                b.n,
                b.k,
                b.repacked as u8,
                e.plan,
                e.plan_us,
                e.model_us,
                models.join(",")
            );
            let sum = checksum(&format!("{}\t{}\t{fields}", self.device, self.sms));
            out.push_str(&format!("{fields}\t{sum:016x}\n"));
        }
        out
    }

    /// Parses and checks a table (see the module doc for what is rejected); the error names the
    /// line.
    pub fn parse(text: &str) -> Result<PlanTable> {
        let bad = |line: usize, why: String| Error::InvalidArgument(format!("plan table line {}: {why}", line + 1));
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, TABLE_HEADER)) => {}
            _ => return Err(bad(0, format!("the first line must be `{TABLE_HEADER}`"))),
        }
        let (device, sms) = match lines.next() {
            Some((i, line)) => {
                let fields: Vec<&str> = line.split('\t').collect();
                match fields.as_slice() {
                    ["device", name, sms] if !name.is_empty() => {
                        (name.to_string(), sms.parse::<u32>().map_err(|_| bad(i, format!("SM count `{sms}`")))?)
                    }
                    _ => return Err(bad(i, "the second line must be `device<TAB>name<TAB>SMs`".into())),
                }
            }
            None => return Err(bad(1, "no device line".into())),
        };
        let mut entries = BTreeMap::new();
        for (i, line) in lines {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((fields, sum)) = line.rsplit_once('\t') else {
                return Err(bad(i, "no checksum".into()));
            };
            let expected = checksum(&format!("{device}\t{sms}\t{fields}"));
            if u64::from_str_radix(sum, 16).ok() != Some(expected) || sum.len() != 16 {
                return Err(bad(i, "checksum does not match the entry (corrupted or edited by hand)".into()));
            }
            let f: Vec<&str> = fields.split('\t').collect();
            let [m, n, k, repacked, plan, plan_us, model_us, model_plans] = f.as_slice() else {
                return Err(bad(i, format!("{} fields, 8 expected", f.len())));
            };
            let class = |v: &str| v.parse::<u8>().map_err(|_| bad(i, format!("class `{v}`")));
            let repacked = match *repacked {
                "0" => false,
                "1" => true,
                other => return Err(bad(i, format!("repacked `{other}`: 0 or 1"))),
            };
            let bucket = Bucket { m: class(m)?, n: class(n)?, k: class(k)?, repacked };
            if !bucket.is_valid() {
                return Err(bad(i, format!("no bucket {bucket:?}")));
            }
            let plan = TablePlan::parse(plan).ok_or_else(|| bad(i, format!("unknown plan `{plan}`")))?;
            let time = |v: &str| v.parse::<f64>().map_err(|_| bad(i, format!("time `{v}`")));
            let model_plans = model_plans
                .split(',')
                .map(|p| TablePlan::parse(p).ok_or_else(|| bad(i, format!("unknown model plan `{p}`"))))
                .collect::<Result<Vec<_>>>()?;
            let entry = TableEntry { plan, plan_us: time(plan_us)?, model_us: time(model_us)?, model_plans };
            if let Some(why) = entry.defect(bucket) {
                return Err(bad(i, why));
            }
            if entries.insert(bucket, entry).is_some() {
                return Err(bad(i, format!("bucket {bucket:?} listed twice")));
            }
        }
        Ok(PlanTable { device, sms, entries })
    }
}

/// The tables that ship in the crate, by device.
const SHIPPED: &[&str] = &[include_str!("tuned/h200.tsv")];

/// The shipped table measured on a device named `device` with `sms` SMs, if any.
pub fn shipped_table(device: &str, sms: u32) -> Option<PlanTable> {
    SHIPPED.iter().filter_map(|text| PlanTable::parse(text).ok()).find(|t| t.device == device && t.sms == sms)
}

#[cfg(test)]
mod tests;
