//! Persistent-grid planning: how many workers (blocks or clusters) to launch so that all are
//! resident at once, from the device's SM count and the kernel's occupancy.
//!
//! A persistent kernel loops over work items itself; launching more workers than fit would
//! serialise waves, fewer would idle SMs. The pure rule is [`plan_persistent_grid`]; the
//! occupancy queries that feed it are [`Kernel::plan_persistent`].

use cudarc::driver::sys;

use crate::error::{DriverContext, Error, Result};
use crate::launch::LaunchConfig;
use crate::module::Kernel;

/// A persistent launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridPlan {
    /// Blocks to launch (a multiple of `cluster_size`); 0 when there is no work.
    pub blocks: u32,
    /// Blocks per cluster (1 without clusters).
    pub cluster_size: u32,
    /// Resident blocks per SM for this kernel and configuration.
    pub blocks_per_sm: u32,
    /// Resident clusters on the whole device (cluster launches only).
    pub max_active_clusters: Option<u32>,
}

/// The persistent grid for `work_items` independent items: every resident slot the device
/// offers, but never more workers than items (rounded up to whole clusters).
///
/// Capacity is `sm_count · blocks_per_sm` blocks, or `max_active_clusters · cluster_size` for
/// cluster launches (clusters must fit in one GPC, so the SM count alone overestimates).
pub fn plan_persistent_grid(
    sm_count: u32,
    blocks_per_sm: u32,
    max_active_clusters: Option<u32>,
    cluster_size: u32,
    work_items: u64,
) -> GridPlan {
    let cluster_size = cluster_size.max(1);
    let capacity_blocks = match max_active_clusters {
        Some(clusters) => clusters as u64 * cluster_size as u64,
        None => sm_count as u64 * blocks_per_sm as u64,
    };
    let capacity_blocks = capacity_blocks - capacity_blocks % cluster_size as u64;
    // Saturating: "as many as fit" callers pass u64::MAX items.
    let needed_blocks = work_items.div_ceil(cluster_size as u64).saturating_mul(cluster_size as u64);
    let blocks = capacity_blocks.min(needed_blocks).min(u32::MAX as u64) as u32;
    GridPlan { blocks, cluster_size, blocks_per_sm, max_active_clusters }
}

impl Kernel {
    /// Plans a persistent 1-D grid for this kernel with `block` threads, `dynamic_smem` bytes
    /// and an optional cluster shape, over `work_items` items.
    pub fn plan_persistent(
        &self,
        block: u32,
        dynamic_smem: u32,
        cluster: Option<[u32; 3]>,
        work_items: u64,
    ) -> Result<GridPlan> {
        self.module.context.bind_to_thread().during("cuCtxSetCurrent")?;
        // The occupancy calculator counts a block as unplaceable when its dynamic shared memory
        // exceeds the function's current opt-in, so opt in first (checked against the device).
        let limit = self.device.max_shared_per_block_optin.saturating_sub(self.static_shared_bytes()?);
        if dynamic_smem > limit {
            return Err(Error::LaunchContract {
                kernel: self.name().into(),
                reason: format!("{dynamic_smem} B of dynamic shared memory; the device allows {limit} B per block"),
            });
        }
        self.opt_into_dynamic_smem(dynamic_smem)?;
        let blocks_per_sm = self.blocks_per_sm(block, dynamic_smem)?;
        if blocks_per_sm <= 0 {
            return Err(Error::LaunchContract {
                kernel: self.name().into(),
                reason: format!("no block of {block} threads with {dynamic_smem} B shared memory fits on an SM"),
            });
        }
        let cluster = cluster.or(self.directives.reqnctapercluster);
        let (cluster_size, max_active_clusters) = match cluster {
            None => (1, None),
            Some(shape) => {
                let size = shape.iter().product::<u32>();
                // A grid of one cluster would cap the answer at one cluster: ask about a grid as
                // large as every SM could hold.
                let grid = size * self.device.sm_count.max(1) * blocks_per_sm as u32;
                let probe = LaunchConfig::linear(grid, block).with_dynamic_smem(dynamic_smem).with_cluster(shape);
                (size, Some(self.max_active_clusters(&probe)?))
            }
        };
        Ok(plan_persistent_grid(
            self.device.sm_count,
            blocks_per_sm as u32,
            max_active_clusters,
            cluster_size,
            work_items,
        ))
    }

    fn max_active_clusters(&self, probe: &LaunchConfig) -> Result<u32> {
        let [x, y, z] = probe.cluster.expect("cluster probe");
        // SAFETY: plain C struct/union; all-zero is a valid start.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = x;
        attr.value.clusterDim.y = y;
        attr.value.clusterDim.z = z;
        let config = sys::CUlaunchConfig {
            gridDimX: probe.grid[0],
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: probe.block[0],
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: probe.dynamic_smem,
            hStream: std::ptr::null_mut(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        let mut clusters = 0i32;
        // SAFETY: live function handle; `config` and `attr` outlive the call.
        unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, self.function, &config) }
            .result()
            .during("cuOccupancyMaxActiveClusters")?;
        Ok(clusters.max(0) as u32)
    }
}

impl Kernel {
    /// The occupancy calculator's blocks per SM for `block` threads and `dynamic_smem` bytes
    /// (asked once per shape; the answer depends only on the compiled kernel and the device).
    /// The caller has opted into `dynamic_smem` already.
    fn blocks_per_sm(&self, block: u32, dynamic_smem: u32) -> Result<i32> {
        let key = (block, dynamic_smem);
        let mut known = self.occupancy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&(_, blocks)) = known.iter().find(|(k, _)| *k == key) {
            return Ok(blocks as i32);
        }
        let mut blocks_per_sm = 0i32;
        // SAFETY: live function handle, valid out-pointer.
        unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks_per_sm,
                self.function,
                block as i32,
                dynamic_smem as usize,
            )
        }
        .result()
        .during("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        known.push((key, blocks_per_sm.max(0) as u32));
        Ok(blocks_per_sm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_the_device_but_never_exceeds_the_work() {
        let p = plan_persistent_grid(132, 2, None, 1, 10_000);
        assert_eq!(p.blocks, 264);
        assert_eq!(plan_persistent_grid(132, 2, None, 1, 100).blocks, 100);
        assert_eq!(plan_persistent_grid(132, 1, None, 1, 0).blocks, 0);
    }

    #[test]
    fn cluster_plans_use_whole_clusters_and_the_cluster_occupancy() {
        // 2-CTA clusters: 66 resident clusters → 132 blocks, even with 4 blocks/SM.
        let p = plan_persistent_grid(132, 4, Some(66), 2, 1_000);
        assert_eq!((p.blocks, p.cluster_size), (132, 2));
        // 7 items round up to 4 whole clusters.
        assert_eq!(plan_persistent_grid(132, 1, Some(66), 2, 7).blocks, 8);
        // "As many as fit" (u64::MAX items) is every resident cluster, not a wrapped-around 0.
        assert_eq!(plan_persistent_grid(132, 1, Some(66), 2, u64::MAX).blocks, 132);
        assert_eq!(plan_persistent_grid(132, 1, Some(16), 8, u64::MAX).blocks, 128);
    }
}
