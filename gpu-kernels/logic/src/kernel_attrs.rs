//! The launch-attribute string that `#[kernel]` stores next to each entry point.
//!
//! Grammar: `key=value` items joined by `;`, keys `reqntid`, `maxntid`, `cluster_dim` (three
//! comma-separated integers), `minctasm`, `maxnreg` (one integer) and `grid_constant` (a
//! parameter index, may repeat). The macro writes it, the builder parses it: both sides use
//! this module.

/// Launch attributes of one kernel, as declared in its `#[kernel(...)]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelAttrs {
    /// Exact block shape (`.reqntid`).
    pub reqntid: Option<[u32; 3]>,
    /// Upper bound on the block shape (`.maxntid`).
    pub maxntid: Option<[u32; 3]>,
    /// Minimum resident blocks per SM (`.minnctapersm`).
    pub minctasm: Option<u32>,
    /// Compile-time cluster shape (`.reqnctapercluster`).
    pub cluster_dim: Option<[u32; 3]>,
    /// Register cap per thread (`.maxnreg`).
    pub maxnreg: Option<u32>,
    /// Bit i set: parameter i is a 128-byte tensor map passed by value as a grid constant.
    pub grid_constant_mask: u64,
}

/// Why an attribute string could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttrError {
    /// An item without `=`.
    MissingValue,
    /// A key this version does not know.
    UnknownKey,
    /// A value that is not the integer list the key needs.
    BadValue,
    /// A grid-constant index ≥ 64.
    ParamIndexTooLarge,
}

impl KernelAttrs {
    /// Parses the string written by `#[kernel]`.
    pub fn parse(spec: &str) -> Result<Self, AttrError> {
        let mut attrs = KernelAttrs::default();
        for item in spec.split(';').filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or(AttrError::MissingValue)?;
            match key {
                "reqntid" => attrs.reqntid = Some(dim3(value)?),
                "maxntid" => attrs.maxntid = Some(dim3(value)?),
                "cluster_dim" => attrs.cluster_dim = Some(dim3(value)?),
                "minctasm" => attrs.minctasm = Some(int(value)?),
                "maxnreg" => attrs.maxnreg = Some(int(value)?),
                "grid_constant" => {
                    let index = int(value)?;
                    if index >= 64 {
                        return Err(AttrError::ParamIndexTooLarge);
                    }
                    attrs.grid_constant_mask |= 1 << index;
                }
                _ => return Err(AttrError::UnknownKey),
            }
        }
        Ok(attrs)
    }

    /// Threads per block the kernel accepts at most (`reqntid` or `maxntid` product), if bounded.
    pub fn max_threads_per_block(&self) -> Option<u32> {
        self.reqntid.or(self.maxntid).map(|[x, y, z]| x.saturating_mul(y).saturating_mul(z))
    }

    /// Whether parameter `index` is a grid-constant tensor map.
    pub fn is_grid_constant(&self, index: usize) -> bool {
        index < 64 && self.grid_constant_mask & (1 << index) != 0
    }
}

fn int(s: &str) -> Result<u32, AttrError> {
    s.trim().parse().map_err(|_| AttrError::BadValue)
}

fn dim3(s: &str) -> Result<[u32; 3], AttrError> {
    let mut out = [1u32; 3];
    for (n, part) in s.split(',').enumerate() {
        *out.get_mut(n).ok_or(AttrError::BadValue)? = int(part)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key() {
        let a = KernelAttrs::parse(
            "maxntid=384,1,1;minctasm=1;cluster_dim=2,1,1;maxnreg=168;grid_constant=0;grid_constant=2",
        )
        .unwrap();
        assert_eq!(a.maxntid, Some([384, 1, 1]));
        assert_eq!(a.minctasm, Some(1));
        assert_eq!(a.cluster_dim, Some([2, 1, 1]));
        assert_eq!(a.maxnreg, Some(168));
        assert!(a.is_grid_constant(0) && !a.is_grid_constant(1) && a.is_grid_constant(2));
        assert_eq!(a.max_threads_per_block(), Some(384));
    }

    #[test]
    fn empty_string_means_no_attributes() {
        assert_eq!(KernelAttrs::parse("").unwrap(), KernelAttrs::default());
    }

    #[test]
    fn rejects_malformed_items() {
        assert_eq!(KernelAttrs::parse("maxntid"), Err(AttrError::MissingValue));
        assert_eq!(KernelAttrs::parse("warp=1"), Err(AttrError::UnknownKey));
        assert_eq!(KernelAttrs::parse("reqntid=1,2,3,4"), Err(AttrError::BadValue));
        assert_eq!(KernelAttrs::parse("minctasm=x"), Err(AttrError::BadValue));
        assert_eq!(KernelAttrs::parse("grid_constant=64"), Err(AttrError::ParamIndexTooLarge));
    }
}
