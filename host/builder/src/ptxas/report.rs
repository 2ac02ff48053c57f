//! Reading `ptxas -v`: each entry's own figures, the `.func` callees ptxas kept out of line
//! (attributed to the entries that reach them through the PTX's `call` sites), and the notes
//! that say wgmma was serialised.
//!
//! ptxas prints `Function properties for F` for an entry right after `Compiling entry function
//! 'F'`, and for a callee it did not inline somewhere after the entries; which entries call a
//! callee is not in its output, so it comes from the PTX call graph ([`PtxasReport::attribute_calls`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

/// Stack frame and spills of a called function (not an entry) as ptxas reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionReport {
    /// The `.func` name.
    pub name: String,
    /// Bytes of stack frame (local memory per thread; spills live in it too).
    pub stack_frame: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
}

/// Resources of one kernel as ptxas reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelReport {
    /// Entry name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores in the entry's own body.
    pub spill_stores: u32,
    /// Bytes of spill loads in the entry's own body.
    pub spill_loads: u32,
    /// Bytes of the entry's own stack frame (local memory per thread).
    pub stack_frame: u32,
    /// Bytes of static shared memory.
    pub shared_bytes: u32,
    /// ptxas's `cumulative stack size`: the own frame plus the deepest chain of callee frames,
    /// when ptxas printed one.
    pub cumulative_stack: Option<u32>,
    /// ptxas could not bound the stack (recursion, indirect calls).
    pub stack_unbounded: bool,
    /// The out-of-line functions this entry reaches in the PTX call graph, with their figures.
    pub callees: Vec<FunctionReport>,
    /// wgmma serialisation notes (`C75xx: reason`) for this entry or a function it calls.
    pub wgmma_serialized: Vec<String>,
}

impl KernelReport {
    /// Local memory per thread: ptxas's cumulative figure when it printed one, else the own
    /// frame plus every reachable callee's frame (an upper bound); `None` when unbounded.
    pub fn local_bytes(&self) -> Option<u32> {
        if self.stack_unbounded {
            return None;
        }
        let summed = self.stack_frame + self.callees.iter().map(|c| c.stack_frame).sum::<u32>();
        Some(self.cumulative_stack.map_or(summed, |c| c.max(self.stack_frame)))
    }

    /// Spill stores and loads of the entry and every callee it reaches.
    pub fn total_spills(&self) -> (u32, u32) {
        self.callees
            .iter()
            .fold((self.spill_stores, self.spill_loads), |(s, l), c| (s + c.spill_stores, l + c.spill_loads))
    }
}

impl fmt::Display for KernelReport {
    /// One report line: registers, shared memory, own stack frame, local memory in total
    /// (callees included), spills; then the callees with a frame and any wgmma serialisation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let local = self.local_bytes().map_or("unbounded".to_string(), |b| format!("{b} B"));
        let (stores, loads) = self.total_spills();
        write!(
            f,
            "{:<40} {:>3} regs  {:>6} B smem  stack {:>4} B  local {:>9}  spills {stores}/{loads} B",
            self.name, self.registers, self.shared_bytes, self.stack_frame, local
        )?;
        for c in self.callees.iter().filter(|c| c.stack_frame + c.spill_stores + c.spill_loads > 0) {
            write!(
                f,
                "  [callee {}: stack {} B, spills {}/{} B]",
                c.name, c.stack_frame, c.spill_stores, c.spill_loads
            )?;
        }
        for w in &self.wgmma_serialized {
            write!(f, "  [wgmma serialized: {w}]")?;
        }
        Ok(())
    }
}

/// ptxas's report for one module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    /// The ptxas that ran.
    pub ptxas: PathBuf,
    /// The assembled module (a cubin next to the PTX), loadable without a driver JIT on exactly
    /// the module's compute capability.
    pub cubin: PathBuf,
    /// Per-kernel resources.
    pub kernels: Vec<KernelReport>,
    /// Every out-of-line function ptxas reported, whether or not an entry was found to call it.
    pub functions: Vec<FunctionReport>,
    /// wgmma serialisation per function ptxas named: (function, `C75xx: reason`).
    pub wgmma_serialized: Vec<(String, String)>,
    /// Informational lines worth reading (e.g. wgmma serialisation, ignored setmaxnreg).
    pub notes: Vec<String>,
}

const INFO: &str = "ptxas info    : ";
const SERIALIZED: &str = "wgmma.mma_async instructions are serialized";

/// Parses `ptxas -v` output. Callees stay unattributed until [`PtxasReport::attribute_calls`].
pub fn parse_report(text: &str) -> PtxasReport {
    let mut report = PtxasReport::default();
    let mut unbounded = BTreeSet::new();
    // The entry being compiled, and the function whose `Function properties` line comes next.
    let mut current: Option<usize> = None;
    let mut properties_of: Option<String> = None;
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("ptxas info    : Compiling entry function '") {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            report.kernels.push(KernelReport { name, ..Default::default() });
            current = Some(report.kernels.len() - 1);
        } else if let Some(name) = l.strip_prefix("ptxas info    : Function properties for ") {
            properties_of = Some(name.trim().to_string());
        } else if l.contains("bytes stack frame") {
            let (stack_frame, spill_stores, spill_loads) = (
                number_before(l, "bytes stack frame"),
                number_before(l, "bytes spill stores"),
                number_before(l, "bytes spill loads"),
            );
            let Some(name) = properties_of.take() else { continue };
            match current.map(|i| &mut report.kernels[i]).filter(|k| k.name == name) {
                Some(k) => (k.stack_frame, k.spill_stores, k.spill_loads) = (stack_frame, spill_stores, spill_loads),
                // ptxas repeats a callee's block after every entry that keeps it out of line.
                None if report.functions.iter().any(|f| f.name == name) => {}
                None => report.functions.push(FunctionReport { name, stack_frame, spill_stores, spill_loads }),
            }
        } else if let (Some(k), true) = (current.map(|i| &mut report.kernels[i]), l.starts_with("ptxas info    : Used"))
        {
            k.registers = number_before(l, "registers");
            k.shared_bytes = number_before(l, "bytes smem");
            k.cumulative_stack =
                l.contains("cumulative stack size").then(|| number_before(l, "bytes cumulative stack"));
        }
        if let Some(rest) = l.strip_prefix("ptxas warning : Stack size for entry function '")
            && l.contains("cannot be statically determined")
        {
            unbounded.insert(rest.split('\'').next().unwrap_or_default().to_string());
        }
        if l.contains(SERIALIZED)
            && let Some(function) = quoted_after(l, "in the function '")
        {
            let code = l.split_once('(').and_then(|(_, r)| r.split_once(')')).map_or("", |(c, _)| c);
            let reason = l.split_once("serialized due to ").map_or(l, |(_, r)| r);
            let reason = reason.split(" in the function '").next().unwrap_or(reason);
            let entry = (function.to_string(), format!("{code}: {reason}"));
            if !report.wgmma_serialized.contains(&entry) {
                report.wgmma_serialized.push(entry);
            }
        }
        let note = l.strip_prefix(INFO).unwrap_or(l);
        if (l.contains("(C7517)") || l.contains("(C7508)") || l.contains(SERIALIZED) || l.starts_with("ptxas warning"))
            && !report.notes.iter().any(|n| n == note)
        {
            report.notes.push(note.to_string());
        }
    }
    for k in &mut report.kernels {
        k.stack_unbounded = unbounded.contains(&k.name);
        let own = report.wgmma_serialized.iter().filter(|(f, _)| *f == k.name);
        k.wgmma_serialized = own.map(|(_, w)| w.clone()).collect();
    }
    report
}

impl PtxasReport {
    /// Attributes every out-of-line function to the entries whose body reaches it through
    /// `call` sites in `ptx` (directly or through other functions), with its wgmma notes.
    pub fn attribute_calls(&mut self, ptx: &str) {
        let graph = call_graph(ptx);
        for k in &mut self.kernels {
            let reached = reachable(&graph, &k.name);
            k.callees = self.functions.iter().filter(|f| reached.contains(f.name.as_str())).cloned().collect();
            for (function, note) in &self.wgmma_serialized {
                let note = format!("{note} (in callee {function})");
                if reached.contains(function.as_str()) && !k.wgmma_serialized.contains(&note) {
                    k.wgmma_serialized.push(note);
                }
            }
        }
    }

    /// Functions with a stack frame or spills that no entry was found to call (an indirect call,
    /// or a call form the PTX reader does not know): reported by name.
    pub fn unattributed(&self) -> impl Iterator<Item = &FunctionReport> {
        self.functions.iter().filter(|f| !self.kernels.iter().any(|k| k.callees.iter().any(|c| c.name == f.name)))
    }
}

/// Direct callees of every `.entry` / `.func` defined in `ptx`.
pub fn call_graph(ptx: &str) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut current = None;
    // A call printed over several lines (`call.uni (retval0),` / `f,` / `(param0);`).
    let mut name_on_next_line = false;
    for line in ptx.lines() {
        let l = line.split("//").next().unwrap_or_default().trim();
        if l.is_empty() {
            continue;
        }
        let callee = match (name_on_next_line, called_name(l)) {
            (true, _) => Some(Callee::Named(l.trim_end_matches([',', ';']).trim())),
            (false, callee) => callee,
        };
        name_on_next_line = callee == Some(Callee::OnNextLine);
        if let Some(name) = defined_name(l) {
            current = Some(name);
            graph.entry(name).or_default();
        } else if let (Some(caller), Some(Callee::Named(callee))) = (current, callee)
            && !callee.is_empty()
            && !callee.starts_with('%')
        {
            graph.entry(caller).or_default().insert(callee);
        }
    }
    graph
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Callee<'a> {
    /// The callee (a register for an indirect call).
    Named(&'a str),
    /// The call continues on the next line.
    OnNextLine,
}

/// The name a `.entry` / `.func` header line declares: `.visible .entry k(`, `.func f()`,
/// `.func (.param .b32 r) f(`; prototypes (`;` at the end of the line) are skipped.
fn defined_name(l: &str) -> Option<&str> {
    let words = l.split_whitespace().take_while(|w| w.starts_with('.')).collect::<Vec<_>>();
    let at = words.iter().position(|w| *w == ".entry" || *w == ".func" || w.starts_with(".func("))?;
    if l.ends_with(';') {
        return None;
    }
    let mut rest = l.split_once(words[at]).map(|(_, r)| r.trim_start())?;
    if rest.starts_with('(') {
        // A return parameter list before the name.
        rest = rest.split_once(')').map(|(_, r)| r.trim_start())?;
    }
    let name = rest.split(|c: char| c == '(' || c == ';' || c.is_whitespace()).next()?;
    (!name.is_empty()).then_some(name)
}

/// The callee of a `call` / `call.uni` line; `None` for other lines.
fn called_name(l: &str) -> Option<Callee<'_>> {
    let (op, rest) = l.split_once(char::is_whitespace)?;
    if op != "call" && !op.starts_with("call.") {
        return None;
    }
    let mut rest = rest.trim_start();
    if rest.starts_with('(') {
        // The return value list: `call.uni (retval0), f, (...)`.
        rest = rest.split_once(')').map(|(_, r)| r.trim_start().trim_start_matches(',').trim_start())?;
    }
    match rest.split(|c: char| c == ',' || c == ';' || c.is_whitespace()).next() {
        Some(name) if !name.is_empty() => Some(Callee::Named(name)),
        _ => Some(Callee::OnNextLine),
    }
}

fn reachable<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>, from: &str) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = graph.get(from).into_iter().flatten().copied().collect();
    while let Some(f) = todo.pop() {
        if seen.insert(f) {
            todo.extend(graph.get(f).into_iter().flatten().copied());
        }
    }
    seen
}

fn quoted_after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.split_once(marker).and_then(|(_, r)| r.split_once('\'')).map(|(name, _)| name)
}

fn number_before(line: &str, unit: &str) -> u32 {
    line.find(unit).and_then(|i| line[..i].split_whitespace().last()).and_then(|n| n.parse().ok()).unwrap_or(0)
}
