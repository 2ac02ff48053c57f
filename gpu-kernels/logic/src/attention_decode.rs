//! The decode attention path's split of the keys: a work item (one sequence's key/value head)
//! has at most 16 query rows, so its K and V are the whole cost, streamed once; with few items
//! (a batch of 16 sequences × 4 key/value heads is 64 items on 132 SMs) each item's keys are
//! split over several CTAs, whose partial softmax states the combine step merges.

/// The keys of each work item cut into `splits` runs of `split_keys` (the last one shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeSplit {
    /// CTAs per work item, ≥ 1.
    pub splits: u32,
    /// Keys per split, a positive multiple of the planner's grain.
    pub split_keys: u32,
}

impl DecodeSplit {
    /// The split for `items` work items of at most `max_keys` keys on a GPU that holds
    /// `resident` CTAs at once: as many splits as the resident CTAs hold for every item — one
    /// wave, as the splits of equal length take equally long (one CTA more than fit would run
    /// in a second wave of its own) — but no split shorter than `min_split_keys` (each split's
    /// partial output is written and read again) and every split a multiple of `grain` keys (a
    /// step of every warp).
    /// `grain` ≥ 1; zero items, keys or CTAs count as one.
    pub const fn plan(items: u32, max_keys: u32, resident: u32, grain: u32, min_split_keys: u32) -> Self {
        let (items, max_keys, resident, grain) = (max(items, 1), max(max_keys, 1), max(resident, 1), max(grain, 1));
        let steps = max_keys.div_ceil(grain);
        let min_steps = max(min_split_keys.div_ceil(grain), 1);
        let wanted = max(resident / items, 1);
        let most = max(steps / min_steps, 1);
        let splits = min(wanted, most);
        let split_steps = steps.div_ceil(splits);
        // Rounding the steps up may leave the last splits empty: count only those with keys.
        DecodeSplit { splits: steps.div_ceil(split_steps), split_keys: split_steps * grain }
    }

    /// The keys `[begin, end)` of split `split` of an item with `keys` keys (empty past them).
    pub const fn keys_of(&self, split: u32, keys: u32) -> (u32, u32) {
        let begin = split.saturating_mul(self.split_keys);
        let end = begin.saturating_add(self.split_keys);
        (min(begin, keys), min(end, keys))
    }
}

const fn max(a: u32, b: u32) -> u32 {
    if a > b { a } else { b }
}

const fn min(a: u32, b: u32) -> u32 {
    if a < b { a } else { b }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    /// Every key of the longest item lies in exactly one split, no split is empty for it, the
    /// grain and the shortest split hold, and the grid stays near the resident CTAs.
    #[test]
    fn splits_cover_every_key_once_and_fill_the_gpu() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as u32 + 1
        };
        for _ in 0..20_000 {
            let (items, keys, resident) = (next(600), next(70_000), next(1100));
            let (grain, min_keys) = (64, 64 * next(32));
            let s = DecodeSplit::plan(items, keys, resident, grain, min_keys);
            let case = format!("{items} items × {keys} keys on {resident} CTAs, min {min_keys}: {s:?}");
            assert!(s.splits >= 1 && s.split_keys > 0 && s.split_keys.is_multiple_of(grain), "{case}");
            let mut covered = 0;
            for split in 0..s.splits {
                let (begin, end) = s.keys_of(split, keys);
                assert!(begin == covered && end > begin, "{case}: split {split} is [{begin}, {end})");
                covered = end;
            }
            assert_eq!(covered, keys, "{case}");
            assert_eq!(s.keys_of(s.splits, keys), (keys, keys), "{case}: past the last split");
            if s.splits > 1 {
                assert!(s.split_keys >= min_keys, "{case}: a split shorter than {min_keys}");
                assert!(items * s.splits <= resident, "{case}: a second wave of splits");
            }
        }
    }

    #[test]
    fn a_decode_batch_is_split_and_a_full_one_is_not() {
        // 16 sequences × 4 key/value heads, 8192 keys, 264 resident CTAs: four splits of 2048
        // (five would leave 56 CTAs for a second wave).
        assert_eq!(DecodeSplit::plan(64, 8192, 264, 64, 1024), DecodeSplit { splits: 4, split_keys: 2048 });
        // Two sequences × 8 heads of 32k keys: 16 splits, 256 CTAs.
        assert_eq!(DecodeSplit::plan(16, 32768, 264, 64, 1024), DecodeSplit { splits: 16, split_keys: 2048 });
        // Enough items for the GPU: no split.
        assert_eq!(DecodeSplit::plan(512, 8192, 264, 64, 1024), DecodeSplit { splits: 1, split_keys: 8192 });
        // Short caches are never split below the shortest split.
        assert_eq!(DecodeSplit::plan(4, 1500, 264, 64, 1024), DecodeSplit { splits: 1, split_keys: 1536 });
        assert_eq!(DecodeSplit::plan(0, 0, 0, 64, 1024), DecodeSplit { splits: 1, split_keys: 64 });
    }
}
