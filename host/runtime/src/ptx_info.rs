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
}

/// Parses every `.entry` of `ptx`.
pub fn entry_directives(ptx: &str) -> Vec<EntryDirectives> {
    let mut out = Vec::new();
    let mut current: Option<EntryDirectives> = None;
    let mut in_params = false;
    for raw in ptx.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
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
            }
            if line.starts_with(')') {
                in_params = false;
            }
            continue;
        }
        if line.starts_with('{') {
            out.push(current.take().expect("checked above"));
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
\tret;
}
";
        let e = entry_directives(ptx);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "k1");
        assert_eq!(e[0].param_count, 2);
        assert_eq!(e[0].reqntid, Some([128, 1, 1]));
        assert_eq!(e[0].minnctapersm, Some(1));
        assert_eq!(e[0].reqnctapercluster, Some([2, 1, 1]));
        assert!(e[0].explicit_cluster);
        assert_eq!(e[1].maxntid, Some([1024, 1, 1]));
        assert_eq!(e[1].param_count, 1);
        assert!(!e[1].explicit_cluster);
    }
}
