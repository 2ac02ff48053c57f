//! TMA (`cp.async.bulk.tensor`), non-tensor bulk copies (`cp.async.bulk`), their completion
//! groups, L2 cache policies and the async-proxy fences (REFERENCE §3, §6.3, §7).
//!
//! Operand conventions, all checked by ptxas (`checks/tma_sm90a.ptx`, `checks/bulk_sm90.ptx`):
//! * `map` is the **generic** address of a 64-byte-aligned `CUtensorMap` image: for a kernel
//!   parameter `#[grid_constant] map: &TensorMap`, `map as *const TensorMap` is that address
//!   (the builder emits the `cvta.param`); a map in global memory is used as is.
//! * Coordinates are `i32`, innermost dimension first (the order of `cuTensorMapEncodeTiled`).
//! * `dst`/`src`/`bar` in shared memory are 32-bit shared-window addresses; loads complete on
//!   an mbarrier of the destination CTA (`complete_tx::bytes`), stores on the bulk async-group.
//! * A multicast `cta_mask` is 16 bits (bit i = `%cluster_ctarank` i); a cache `policy` is the
//!   64-bit value of [`create_policy_evict_first`] / [`create_policy_evict_last`].
//!
//! The 1D–5D forms differ only in the coordinate list, so they are produced by one macro per
//! form rather than written out ten times by hand.

use core::arch::asm;

use warpforge_abi::TensorMap;

/// Emits one tensor-copy function per dimension for a given template shape.
macro_rules! tensor_ops {
    (
        doc = $doc:literal;
        form = $form:ident;
        $( $name:ident($($c:ident),+) => $dim:literal, $coords:literal; )+
    ) => {
        $( tensor_ops!(@one $form, $doc, $name, $dim, $coords, ($($c),+)); )+
    };
    (@one load, $doc:literal, $name:ident, $dim:literal, $coords:literal, ($($c:ident),+)) => {
        #[doc = $doc]
        #[doc = concat!("\n\nEmits `cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst], [map, {",
                        $coords, "}], [bar];`.")]
        ///
        /// # Safety
        /// `map` is the generic address of a valid tensor map that stays unmodified until the copy
        /// completes; `dst` is a shared-window address aligned for the map's swizzle mode (128 B,
        /// 1024 B for 128B swizzle) with room for the whole box; `bar` is an initialised mbarrier of
        /// this CTA whose current phase expects the box's bytes (`arrive_expect_tx`); the
        /// innermost coordinate times the element size is a multiple of 16 bytes (on the H200 an
        /// unaligned innermost start faults with an illegal instruction).
        #[inline(always)]
        #[allow(clippy::too_many_arguments, reason = "one argument per PTX operand of the 4-D/5-D forms")]
        pub unsafe fn $name(dst: u32, map: *const TensorMap, $($c: i32,)+ bar: u32) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes [{dst}], [{map}, {{",
                             $coords, "}}], [{bar}];"),
                     dst = in(reg32) dst, map = in(reg64) map as u64, $($c = in(reg32) $c,)+ bar = in(reg32) bar,
                     options(nostack))
            };
        }
    };
    (@one load_cache_hint, $doc:literal, $name:ident, $dim:literal, $coords:literal, ($($c:ident),+)) => {
        #[doc = $doc]
        #[doc = concat!("\n\nEmits `cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [dst], [map, {",
                        $coords, "}], [bar], policy;`.")]
        ///
        /// # Safety
        /// As for the plain load of the same dimension; `policy` comes from a `createpolicy`.
        #[inline(always)]
        #[allow(clippy::too_many_arguments, reason = "one argument per PTX operand of the 4-D/5-D forms")]
        pub unsafe fn $name(dst: u32, map: *const TensorMap, $($c: i32,)+ bar: u32, policy: u64) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [{dst}], [{map}, {{",
                             $coords, "}}], [{bar}], {policy};"),
                     dst = in(reg32) dst, map = in(reg64) map as u64, $($c = in(reg32) $c,)+ bar = in(reg32) bar,
                     policy = in(reg64) policy, options(nostack))
            };
        }
    };
    (@one load_multicast, $doc:literal, $name:ident, $dim:literal, $coords:literal, ($($c:ident),+)) => {
        #[doc = $doc]
        #[doc = concat!("\n\nEmits `cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [dst], [map, {",
                        $coords, "}], [bar], cta_mask;`.")]
        ///
        /// # Safety
        /// As for the plain load, in **every** CTA named by `cta_mask`: the box lands at the same
        /// `dst` offset and completes on the barrier at the same `bar` offset of each, so each of
        /// them must have armed its own barrier with the box's bytes. The launch has a cluster
        /// containing every rank in the mask.
        #[inline(always)]
        #[allow(clippy::too_many_arguments, reason = "one argument per PTX operand of the 4-D/5-D forms")]
        pub unsafe fn $name(dst: u32, map: *const TensorMap, $($c: i32,)+ bar: u32, cta_mask: u16) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{dst}], [{map}, {{",
                             $coords, "}}], [{bar}], {mask};"),
                     dst = in(reg32) dst, map = in(reg64) map as u64, $($c = in(reg32) $c,)+ bar = in(reg32) bar,
                     mask = in(reg16) cta_mask, options(nostack))
            };
        }
    };
    (@one load_multicast_cache_hint, $doc:literal, $name:ident, $dim:literal, $coords:literal, ($($c:ident),+)) => {
        #[doc = $doc]
        #[doc = concat!("\n\nEmits `cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [dst], [map, {",
                        $coords, "}], [bar], cta_mask, policy;`.")]
        ///
        /// # Safety
        /// As for the multicast load of the same dimension; `policy` comes from a `createpolicy`.
        #[inline(always)]
        #[allow(clippy::too_many_arguments, reason = "one argument per PTX operand of the 4-D/5-D forms")]
        pub unsafe fn $name(dst: u32, map: *const TensorMap, $($c: i32,)+ bar: u32, cta_mask: u16, policy: u64) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("cp.async.bulk.tensor.", $dim, ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [{dst}], [{map}, {{",
                             $coords, "}}], [{bar}], {mask}, {policy};"),
                     dst = in(reg32) dst, map = in(reg64) map as u64, $($c = in(reg32) $c,)+ bar = in(reg32) bar,
                     mask = in(reg16) cta_mask, policy = in(reg64) policy, options(nostack))
            };
        }
    };
    (@one store, $doc:literal, $name:ident, $dim:literal, $coords:literal, ($($c:ident),+)) => {
        #[doc = $doc]
        #[doc = concat!("\n\nEmits `cp.async.bulk.tensor.", $dim, ".global.shared::cta.tile.bulk_group [map, {", $coords, "}], [src];`.")]
        ///
        /// # Safety
        /// `map` is the generic address of a valid tensor map; `src` is a shared-window address of
        /// this CTA holding the box in the map's swizzled layout, written by generic stores only
        /// before a `fence.proxy.async.shared::cta` + barrier; `src` is not overwritten before a
        /// [`bulk_wait_group_read`] covering this copy's commit group. Clipping at the tensor's
        /// innermost edge is 16-byte granular: where that extent is not a multiple of 16 bytes,
        /// a box reaching the edge also writes the rest of each row's last 16-byte chunk (the
        /// memory past the extent, up to the next multiple of 16 bytes; measured on the H200),
        /// so that memory must be writable and may be overwritten.
        #[inline(always)]
        #[allow(clippy::too_many_arguments, reason = "one argument per PTX operand of the 4-D/5-D forms")]
        pub unsafe fn $name(map: *const TensorMap, $($c: i32,)+ src: u32) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("cp.async.bulk.tensor.", $dim, ".global.shared::cta.tile.bulk_group [{map}, {{", $coords, "}}], [{src}];"),
                     map = in(reg64) map as u64, $($c = in(reg32) $c,)+ src = in(reg32) src, options(nostack))
            };
        }
    };
    (@one reduce_add, $doc:literal, $name:ident, $dim:literal, $coords:literal, ($($c:ident),+)) => {
        #[doc = $doc]
        #[doc = concat!("\n\nEmits `cp.reduce.async.bulk.tensor.", $dim, ".global.shared::cta.add.tile.bulk_group [map, {", $coords, "}], [src];`.")]
        ///
        /// # Safety
        /// As for the tensor store of the same dimension; the map's element type supports `add`.
        #[inline(always)]
        #[allow(clippy::too_many_arguments, reason = "one argument per PTX operand of the 4-D/5-D forms")]
        pub unsafe fn $name(map: *const TensorMap, $($c: i32,)+ src: u32) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(concat!("cp.reduce.async.bulk.tensor.", $dim, ".global.shared::cta.add.tile.bulk_group [{map}, {{", $coords, "}}], [{src}];"),
                     map = in(reg64) map as u64, $($c = in(reg32) $c,)+ src = in(reg32) src, options(nostack))
            };
        }
    };
}

tensor_ops! {
    doc = "Loads one box of a tensor (tile mode) into this CTA's shared memory.";
    form = load;
    load_1d(c0) => "1d", "{c0}";
    load_2d(c0, c1) => "2d", "{c0}, {c1}";
    load_3d(c0, c1, c2) => "3d", "{c0}, {c1}, {c2}";
    load_4d(c0, c1, c2, c3) => "4d", "{c0}, {c1}, {c2}, {c3}";
    load_5d(c0, c1, c2, c3, c4) => "5d", "{c0}, {c1}, {c2}, {c3}, {c4}";
}

tensor_ops! {
    doc = "Loads one box of a tensor into this CTA's shared memory with an L2 eviction policy.";
    form = load_cache_hint;
    load_1d_cache_hint(c0) => "1d", "{c0}";
    load_2d_cache_hint(c0, c1) => "2d", "{c0}, {c1}";
    load_3d_cache_hint(c0, c1, c2) => "3d", "{c0}, {c1}, {c2}";
    load_4d_cache_hint(c0, c1, c2, c3) => "4d", "{c0}, {c1}, {c2}, {c3}";
    load_5d_cache_hint(c0, c1, c2, c3, c4) => "5d", "{c0}, {c1}, {c2}, {c3}, {c4}";
}

tensor_ops! {
    doc = "Loads one box of a tensor once from L2 and delivers it to every CTA of the cluster named in `cta_mask`.";
    form = load_multicast;
    load_1d_multicast(c0) => "1d", "{c0}";
    load_2d_multicast(c0, c1) => "2d", "{c0}, {c1}";
    load_3d_multicast(c0, c1, c2) => "3d", "{c0}, {c1}, {c2}";
    load_4d_multicast(c0, c1, c2, c3) => "4d", "{c0}, {c1}, {c2}, {c3}";
    load_5d_multicast(c0, c1, c2, c3, c4) => "5d", "{c0}, {c1}, {c2}, {c3}, {c4}";
}

tensor_ops! {
    doc = "Multicast load with an L2 eviction policy.";
    form = load_multicast_cache_hint;
    load_1d_multicast_cache_hint(c0) => "1d", "{c0}";
    load_2d_multicast_cache_hint(c0, c1) => "2d", "{c0}, {c1}";
    load_3d_multicast_cache_hint(c0, c1, c2) => "3d", "{c0}, {c1}, {c2}";
    load_4d_multicast_cache_hint(c0, c1, c2, c3) => "4d", "{c0}, {c1}, {c2}, {c3}";
    load_5d_multicast_cache_hint(c0, c1, c2, c3, c4) => "5d", "{c0}, {c1}, {c2}, {c3}, {c4}";
}

tensor_ops! {
    doc = "Stores one box from this CTA's shared memory to the tensor (tile mode).";
    form = store;
    store_1d(c0) => "1d", "{c0}";
    store_2d(c0, c1) => "2d", "{c0}, {c1}";
    store_3d(c0, c1, c2) => "3d", "{c0}, {c1}, {c2}";
    store_4d(c0, c1, c2, c3) => "4d", "{c0}, {c1}, {c2}, {c3}";
    store_5d(c0, c1, c2, c3, c4) => "5d", "{c0}, {c1}, {c2}, {c3}, {c4}";
}

tensor_ops! {
    doc = "Adds one box from this CTA's shared memory into the tensor element-wise (in L2, atomically per element).";
    form = reduce_add;
    reduce_add_1d(c0) => "1d", "{c0}";
    reduce_add_2d(c0, c1) => "2d", "{c0}, {c1}";
    reduce_add_3d(c0, c1, c2) => "3d", "{c0}, {c1}, {c2}";
    reduce_add_4d(c0, c1, c2, c3) => "4d", "{c0}, {c1}, {c2}, {c3}";
    reduce_add_5d(c0, c1, c2, c3, c4) => "5d", "{c0}, {c1}, {c2}, {c3}, {c4}";
}

/// Prefetches the tensor map itself into the TMA unit's descriptor cache.
///
/// Emits `cp.async.bulk.prefetch.tensor.4d.L2.global.tile [map, {c0, c1, c2, c3}];`: asks L2
/// for the box at those coordinates (REFERENCE §3), no shared memory, no barrier, no completion.
///
/// # Safety
/// `map` is the generic address of a valid tensor map that stays unmodified until the prefetch
/// has been issued; the innermost coordinate times the element size is a multiple of 16 bytes
/// (as for the loads). Coordinates outside the tensor fetch nothing for those elements.
#[inline(always)]
pub unsafe fn prefetch_l2_4d(map: *const TensorMap, c0: i32, c1: i32, c2: i32, c3: i32) {
    // SAFETY: forwarded to the caller; a prefetch writes nothing architectural.
    unsafe {
        asm!("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [{map}, {{{c0}, {c1}, {c2}, {c3}}}];",
             map = in(reg64) map as u64, c0 = in(reg32) c0, c1 = in(reg32) c1, c2 = in(reg32) c2, c3 = in(reg32) c3,
             options(nostack))
    };
}

/// Emits `prefetch.tensormap [map];`.
///
/// # Safety
/// `map` is the generic address of a tensor map.
#[inline(always)]
pub unsafe fn prefetch_tensormap(map: *const TensorMap) {
    // SAFETY: a prefetch has no architectural effect beyond caching.
    unsafe { asm!("prefetch.tensormap [{0}];", in(reg64) map as u64, options(nostack)) };
}

/// Closes the group of bulk copies (tensor stores, bulk stores) issued by this thread since the
/// last commit.
///
/// Emits `cp.async.bulk.commit_group;`.
///
/// # Safety
/// None beyond running on sm_90+.
#[inline(always)]
pub unsafe fn bulk_commit_group() {
    // SAFETY: committing has no preconditions.
    unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) };
}

/// Waits until at most `N` of this thread's bulk groups are pending (writes complete and visible).
///
/// Emits `cp.async.bulk.wait_group N;`.
///
/// # Safety
/// None beyond running on sm_90+.
#[inline(always)]
pub unsafe fn bulk_wait_group<const N: u32>() {
    // SAFETY: waiting has no preconditions.
    unsafe { asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack)) };
}

/// Waits until at most `N` of this thread's bulk groups still *read* their shared-memory source
/// (the source may then be overwritten; the global writes may still be in flight).
///
/// Emits `cp.async.bulk.wait_group.read N;`.
///
/// # Safety
/// None beyond running on sm_90+.
#[inline(always)]
pub unsafe fn bulk_wait_group_read<const N: u32>() {
    // SAFETY: waiting has no preconditions.
    unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack)) };
}

/// Copies `bytes` contiguous bytes from global memory into this CTA's shared memory, completing
/// on `bar`.
///
/// Emits `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], bytes, [bar];`.
///
/// # Safety
/// `src` is a global address and `dst` a shared-window address, both 16-byte aligned, with
/// `bytes` (a multiple of 16) valid at each; `bar` is an initialised mbarrier of this CTA that
/// expects these bytes in its current phase.
#[inline(always)]
pub unsafe fn bulk_load(dst: u32, src: *const u8, bytes: u32, bar: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{0}], [{1}], {2}, [{3}];",
             in(reg32) dst, in(reg64) src as u64, in(reg32) bytes, in(reg32) bar, options(nostack))
    };
}

/// Copies `bytes` from this CTA's shared memory into another CTA's shared memory of the cluster,
/// completing on that CTA's barrier (both remote addresses from `mapa`).
///
/// Emits `cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [remote_dst], [src], bytes, [remote_bar];`.
///
/// # Safety
/// As for [`bulk_load`] with `src` a local shared-window address and `remote_dst`/`remote_bar`
/// `.shared::cluster` addresses in one running CTA of this cluster.
#[inline(always)]
pub unsafe fn bulk_copy_to_cluster(remote_dst: u32, src: u32, bytes: u32, remote_bar: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [{0}], [{1}], {2}, [{3}];",
             in(reg32) remote_dst, in(reg32) src, in(reg32) bytes, in(reg32) remote_bar, options(nostack))
    };
}

/// Copies `bytes` contiguous bytes from this CTA's shared memory to global memory (bulk group).
///
/// Emits `cp.async.bulk.global.shared::cta.bulk_group [dst], [src], bytes;`.
///
/// # Safety
/// `dst` global and `src` shared-window, both 16-byte aligned, `bytes` a multiple of 16; `src`
/// was written by generic stores only before `fence.proxy.async.shared::cta` and is kept until
/// [`bulk_wait_group_read`].
#[inline(always)]
pub unsafe fn bulk_store(dst: *mut u8, src: u32, bytes: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("cp.async.bulk.global.shared::cta.bulk_group [{0}], [{1}], {2};",
             in(reg64) dst as u64, in(reg32) src, in(reg32) bytes, options(nostack))
    };
}

/// An L2 policy that marks the data accessed with it as first to evict (streamed once).
///
/// Emits `createpolicy.fractional.L2::evict_first.b64 policy, 1.0;`.
///
/// # Safety
/// None beyond running on sm_80+.
#[inline(always)]
pub unsafe fn create_policy_evict_first() -> u64 {
    let policy: u64;
    // SAFETY: building a policy value has no side effects.
    unsafe {
        asm!("createpolicy.fractional.L2::evict_first.b64 {0}, 1.0;", out(reg64) policy, options(pure, nomem, nostack))
    };
    policy
}

/// An L2 policy that marks the data accessed with it as last to evict (reused by many CTAs).
///
/// Emits `createpolicy.fractional.L2::evict_last.b64 policy, 1.0;`.
///
/// # Safety
/// None beyond running on sm_80+.
#[inline(always)]
pub unsafe fn create_policy_evict_last() -> u64 {
    let policy: u64;
    // SAFETY: building a policy value has no side effects.
    unsafe {
        asm!("createpolicy.fractional.L2::evict_last.b64 {0}, 1.0;", out(reg64) policy, options(pure, nomem, nostack))
    };
    policy
}

/// Orders this thread's generic-proxy accesses (all state spaces) with later async-proxy ones.
///
/// Emits `fence.proxy.async;`.
///
/// # Safety
/// None: a fence only orders.
#[inline(always)]
pub unsafe fn fence_proxy_async() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.proxy.async;", options(nostack)) };
}

/// Orders generic-proxy accesses to cluster shared memory with later async-proxy ones.
///
/// Emits `fence.proxy.async.shared::cluster;`.
///
/// # Safety
/// None: a fence only orders.
#[inline(always)]
pub unsafe fn fence_proxy_async_shared_cluster() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.proxy.async.shared::cluster;", options(nostack)) };
}

/// Orders generic-proxy global accesses with later async-proxy ones (e.g. before a TMA load of
/// data this thread just wrote with `st.global`).
///
/// Emits `fence.proxy.async.global;`.
///
/// # Safety
/// None: a fence only orders.
#[inline(always)]
pub unsafe fn fence_proxy_async_global() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.proxy.async.global;", options(nostack)) };
}
