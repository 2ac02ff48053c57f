//! The per-stream claim counters of the persistent attention grid (`logic::schedule::claims`),
//! kept between calls in a bounded cache.
//!
//! A persistent launch's CTAs claim tiles from a pair of u32 counters that the launch leaves
//! zero again, so a pair zeroed once at allocation serves every later launch on its stream
//! (launches on one stream are ordered) and nothing is cleared between calls; streams never
//! share a pair, so two launches running at once never do. The cache keeps at most
//! [`MAX_CACHED_STREAMS`] pairs and drops those of streams nobody but the cache still holds
//! (as the GEMM's stream-K cache does: dropping a pair is sound, cudarc frees it
//! stream-ordered after its recorded uses).

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, SyncOnDrop};
use warpforge_host::{Error, Result};

use crate::gemm::workspace::{MAX_CACHED_STREAMS, StreamHeld, StreamMap, refuse_while_capturing};

/// One stream's counter pair (`[next, finished]`), zero between launches.
pub(crate) struct TileCounters(CudaSlice<u32>);

impl TileCounters {
    /// The pair's device address, with its stream-ordering guard (the launch writes it).
    pub(crate) fn device_ptr_mut<'a>(&'a mut self, stream: &'a Arc<CudaStream>) -> (u64, SyncOnDrop<'a>) {
        self.0.device_ptr_mut(stream)
    }
}

impl StreamHeld for TileCounters {
    fn stream_held_elsewhere(&self) -> bool {
        // The buffer holds one reference to the stream it was allocated on.
        Arc::strong_count(self.0.stream()) > 1
    }
}

/// The counter pairs of the streams that ran persistent attention launches, shared by clones
/// of one `Warpforge`.
#[derive(Clone)]
pub(crate) struct TileCounterCache(Arc<Mutex<StreamMap<TileCounters>>>);

impl Default for TileCounterCache {
    fn default() -> Self {
        TileCounterCache(Arc::new(Mutex::new(StreamMap::new(MAX_CACHED_STREAMS))))
    }
}

impl std::fmt::Debug for TileCounterCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let streams = self.0.lock().map_or(0, |pairs| pairs.len());
        write!(f, "TileCounterCache {{ streams: {streams} }}")
    }
}

impl TileCounterCache {
    /// The cache, locked for one launch (held until the kernel is enqueued).
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, StreamMap<TileCounters>>> {
        self.0.lock().map_err(|_| {
            Error::InvalidArgument("a thread panicked while holding warpforge's attention counter cache".into())
        })
    }
}

/// `stream`'s pair, allocated zeroed when missing (refused while the stream captures a graph:
/// `refuse_while_capturing`). An entry holds a reference to its stream,
/// so the handle (the key) cannot be reused by a new stream while the entry exists.
pub(crate) fn counters<'m>(
    map: &'m mut StreamMap<TileCounters>,
    stream: &Arc<CudaStream>,
) -> Result<&'m mut TileCounters> {
    map.get_or_make(
        stream.cu_stream() as usize,
        |_| true,
        || {
            refuse_while_capturing(stream, "attention tile counters", ", or `Warpforge::reserve_attention_workspace`")?;
            Ok(TileCounters(stream.alloc_zeros::<u32>(2)?))
        },
    )
}
