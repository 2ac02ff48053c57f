//! Launch directives of each `.entry` in a PTX module, read from the text.
//!
//! The driver does not report `.reqntid` or `.maxntid` back (a `.reqntid 128` kernel still
//! answers 1024 for `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`) and fails a violating launch
//! with an unhelpful error. The directives are in the PTX we load, so the launcher reads them
//! there and refuses a bad launch with a message instead.

/// Directives of one entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryDirectives {
    /// Entry name.
    pub name: String,
    /// `.reqntid x, y, z`.
    pub reqntid: Option<[u32; 3]>,
    /// `.maxntid x, y, z`.
    pub maxntid: Option<[u32; 3]>,
    /// `.minnctapersm n`.
    pub minnctapersm: Option<u32>,
    /// `.reqnctapercluster x, y, z`.
    pub reqnctapercluster: Option<[u32; 3]>,
    /// `.explicitcluster` (a cluster launch is mandatory).
    pub explicit_cluster: bool,
    /// `.maxnreg n`.
    pub maxnreg: Option<u32>,
    /// Number of parameters.
    pub param_count: usize,
    /// Bytes of each parameter, in declaration order (`.u64` → 8, `.b8 name[96]` → 96).
    pub param_sizes: Vec<usize>,
    /// The entry's own body executes `griddepcontrol.wait` (a wait in a called `.func` does
    /// not count): the one kind of kernel a programmatic dependent launch may start early.
    pub waits_for_prerequisite_grids: bool,
}

/// Parses every `.entry` of `ptx`.
pub fn entry_directives(ptx: &str) -> Vec<EntryDirectives> {
    let mut out: Vec<EntryDirectives> = Vec::new();
    let mut current: Option<EntryDirectives> = None;
    let mut in_params = false;
    // The entry whose body is being read (its index in `out`) and the body's brace depth.
    let mut body: Option<(usize, usize)> = None;
    for raw in ptx.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if let Some((index, depth)) = body.as_mut() {
            if line.starts_with("griddepcontrol.wait") {
                out[*index].waits_for_prerequisite_grids = true;
            }
            let opened = line.matches('{').count();
            let closed = line.matches('}').count();
            *depth = (*depth + opened).saturating_sub(closed);
            if *depth == 0 {
                body = None;
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix(".visible .entry ").or_else(|| line.strip_prefix(".entry ")) {
            if let Some(done) = current.take() {
                out.push(done);
            }
            let name = rest.split('(').next().unwrap_or("").trim().to_string();
            current = Some(EntryDirectives { name, ..Default::default() });
            in_params = rest.contains('(') && !rest.contains(')');
            continue;
        }
        let Some(entry) = current.as_mut() else { continue };
        if in_params {
            if line.starts_with(".param") {
                entry.param_count += 1;
                entry.param_sizes.push(param_size(line));
            }
            if line.starts_with(')') {
                in_params = false;
            }
            continue;
        }
        if line.starts_with('{') {
            out.push(current.take().expect("checked above"));
            body = Some((out.len() - 1, 1));
            continue;
        }
        let mut words = line.splitn(2, char::is_whitespace);
        let directive = words.next().unwrap_or("");
        let args = words.next().unwrap_or("");
        match directive {
            ".reqntid" => entry.reqntid = dim3(args),
            ".maxntid" => entry.maxntid = dim3(args),
            ".reqnctapercluster" => entry.reqnctapercluster = dim3(args),
            ".minnctapersm" => entry.minnctapersm = args.trim().parse().ok(),
            ".maxnreg" => entry.maxnreg = args.trim().parse().ok(),
            ".explicitcluster" => entry.explicit_cluster = true,
            _ => {}
        }
    }
    if let Some(done) = current {
        out.push(done);
    }
    out
}

/// Bytes of one `.param` declaration: the array length of a `.b8 name[N]` aggregate, else the
/// width of its scalar type (0 when neither is recognised, which no host list matches).
fn param_size(line: &str) -> usize {
    if let (Some(open), Some(close)) = (line.find('['), line.find(']')) {
        return line[open + 1..close].trim().parse().unwrap_or(0);
    }
    let width = |t: &str| match t {
        ".u64" | ".s64" | ".b64" | ".f64" => Some(8),
        ".u32" | ".s32" | ".b32" | ".f32" => Some(4),
        ".u16" | ".s16" | ".b16" | ".f16" => Some(2),
        ".u8" | ".s8" | ".b8" => Some(1),
        _ => None,
    };
    line.split_whitespace().find_map(width).unwrap_or(0)
}

fn dim3(args: &str) -> Option<[u32; 3]> {
    let mut d = [1u32; 3];
    for (i, part) in args.split(',').enumerate() {
        *d.get_mut(i)? = part.trim().parse().ok()?;
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_directives_of_each_entry() {
        let ptx = "\
.version 8.6
.target sm_90a
.address_size 64

\t// .globl\tk1
.visible .entry k1(
\t.param .u64 k1_param_0,
\t.param .align 64 .b8 k1_param_1[128]
)
.reqntid 128, 1, 1
.minnctapersm 1
.explicitcluster
.reqnctapercluster 2, 1, 1                     // @k1
{
\tret;
}
.visible .entry k2(
\t.param .u32 k2_param_0
)
.maxntid 1024, 1, 1
{
\t{
\t.reg .pred p;
\tmov.b32 {%rs1, %rs2}, %r1;
\t}
\t// begin inline asm
\tgriddepcontrol.wait;
\t// end inline asm
\tret;
}
.visible .entry k3(
\t.param .u64 .ptr .align 1 k3_param_0,
\t.param .f32 k3_param_1,
\t.param .align 8 .b8 k3_param_2[96]
)
{
\tret;
}
";
        let e = entry_directives(ptx);
        assert_eq!(e[2].param_sizes, [8, 4, 96], "pointer, scalar and aggregate parameters");
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].name, "k1");
        assert_eq!(e[0].param_count, 2);
        assert_eq!(e[0].param_sizes, [8, 128]);
        assert_eq!(e[1].param_sizes, [4]);
        assert_eq!(e[0].reqntid, Some([128, 1, 1]));
        assert_eq!(e[0].minnctapersm, Some(1));
        assert_eq!(e[0].reqnctapercluster, Some([2, 1, 1]));
        assert!(e[0].explicit_cluster);
        assert_eq!(e[1].maxntid, Some([1024, 1, 1]));
        assert_eq!(e[1].param_count, 1);
        assert!(!e[1].explicit_cluster);
        assert!(e[1].waits_for_prerequisite_grids, "the wait after a nested scope is still k2's");
        assert!(!e[0].waits_for_prerequisite_grids && !e[2].waits_for_prerequisite_grids);
    }
}
