//! The per-stream stream-K buffers (partial-tile slots and flags) of the GEMM body, kept
//! between calls in a bounded cache.
//!
//! Launches on one stream are ordered, so they can share one set of buffers, and the kernel
//! leaves the flags zero, so nothing is cleared between calls; streams never share a set. The
//! cache keeps at most [`MAX_CACHED_STREAMS`] sets, and whenever it makes a new entry it first
//! drops the sets of streams nobody but the cache still holds. Dropping or evicting a set is
//! always sound: cudarc frees a buffer stream-ordered on the stream it was allocated on (after
//! its recorded uses, in multi-stream mode), so a kernel still using it finishes first; it only
//! costs the next call on that stream an allocation.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys::CUstreamCaptureStatus;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, SyncOnDrop};
use warpforge_abi::gemm_sm90::{FLAGS_PER_CTA, PARTIAL_SLOT_FLOATS};
use warpforge_host::{Error, Result};
use warpforge_logic::schedule::stream_k::StreamKMode;

/// Most streams whose buffers the cache keeps (a set is about 128 KiB per CTA, ~17 MiB for
/// 132 CTAs): a service with more concurrent GEMM streams reallocates on some calls.
pub const MAX_CACHED_STREAMS: usize = 16;

/// Refuses to allocate `what` for `stream` while the stream is capturing a CUDA graph: memory
/// allocated in a capture belongs to the graph (it exists only from the graph's launch, and the
/// graph cannot be launched again while it is held), and the per-stream caches keep theirs
/// across calls. One call of the same problem (or a larger one) on the stream before the capture
/// allocates it, or `remedy` where there is a call that does; a capture then records launches
/// only.
pub(crate) fn refuse_while_capturing(stream: &CudaStream, what: &str, remedy: &str) -> Result<()> {
    let status = stream.capture_status()?;
    if status == CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{what} for this stream would be allocated inside a CUDA graph capture ({status:?}): run the \
         call once on the stream before capturing it{remedy} (warpforge keeps them per stream)"
    )))
}

pub(crate) fn poisoned() -> Error {
    Error::InvalidArgument("a thread panicked while holding warpforge's stream-K workspace cache".into())
}

/// Stream-K buffers of one stream: a partial-tile slot and flags for `ctas` CTAs.
pub(crate) struct StreamKBuffers {
    slots: CudaSlice<f32>,
    flags: CudaSlice<u32>,
    ctas: u32,
}

impl StreamKBuffers {
    /// Device pointers to both buffers, with their stream-ordering guards.
    pub(crate) fn device_ptr_mut<'a>(
        &'a mut self,
        stream: &'a Arc<CudaStream>,
    ) -> ((u64, SyncOnDrop<'a>), (u64, SyncOnDrop<'a>)) {
        (self.slots.device_ptr_mut(stream), self.flags.device_ptr_mut(stream))
    }
}

/// A launch's stream-K workspace and flags: their addresses and write guards, or `(0, None)`
/// each for a data-parallel launch, which has none.
pub(crate) type StreamKPtrs<'a> = ((u64, Option<SyncOnDrop<'a>>), (u64, Option<SyncOnDrop<'a>>));

/// [`StreamKPtrs`] of `buffers` on `stream`.
fn stream_k_ptrs<'a>(buffers: Option<&'a mut StreamKBuffers>, stream: &'a Arc<CudaStream>) -> StreamKPtrs<'a> {
    match buffers {
        Some(buffers) => {
            let (workspace, flags) = buffers.device_ptr_mut(stream);
            ((workspace.0, Some(workspace.1)), (flags.0, Some(flags.1)))
        }
        None => ((0, None), (0, None)),
    }
}

/// Whether anything but the cache entry itself still holds the entry's stream.
pub(crate) trait StreamHeld {
    fn stream_held_elsewhere(&self) -> bool;
}

impl StreamHeld for StreamKBuffers {
    fn stream_held_elsewhere(&self) -> bool {
        // Each buffer holds one reference to the stream it was allocated on (this one).
        let own = 1 + Arc::ptr_eq(self.slots.stream(), self.flags.stream()) as usize;
        Arc::strong_count(self.slots.stream()) > own
    }
}

/// A small map from stream handles to values, bounded as the module docs say.
pub(crate) struct StreamMap<V> {
    /// (stream handle, last use, value).
    entries: Vec<(usize, u64, V)>,
    clock: u64,
    cap: usize,
}

impl<V: StreamHeld> StreamMap<V> {
    pub(crate) fn new(cap: usize) -> Self {
        StreamMap { entries: Vec::new(), clock: 0, cap: cap.max(1) }
    }

    /// Entries kept.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The value of `key`, made by `make` when missing or when `fits` refuses it. A new entry
    /// first drops the entries of streams held by nothing else, then the least recently used
    /// while the map is full.
    pub(crate) fn get_or_make(
        &mut self,
        key: usize,
        fits: impl Fn(&V) -> bool,
        make: impl FnOnce() -> Result<V>,
    ) -> Result<&mut V> {
        self.clock += 1;
        let at = match self.entries.iter().position(|e| e.0 == key) {
            Some(at) => {
                if !fits(&self.entries[at].2) {
                    self.entries[at].2 = make()?;
                }
                at
            }
            None => {
                let value = make()?;
                self.entries.retain(|e| e.2.stream_held_elsewhere());
                while self.entries.len() >= self.cap {
                    let oldest = (0..self.entries.len()).min_by_key(|&i| self.entries[i].1).expect("map is full");
                    self.entries.swap_remove(oldest);
                }
                self.entries.push((key, self.clock, value));
                self.entries.len() - 1
            }
        };
        self.entries[at].1 = self.clock;
        Ok(&mut self.entries[at].2)
    }
}

/// The stream-K buffers of the streams that ran stream-K GEMMs, shared by clones of one
/// `Warpforge`.
#[derive(Clone)]
pub(crate) struct StreamKCache(Arc<Mutex<StreamKSets>>);

impl Default for StreamKCache {
    fn default() -> Self {
        StreamKCache(Arc::new(Mutex::new(StreamKSets(StreamMap::new(MAX_CACHED_STREAMS)))))
    }
}

/// Buffers by stream handle.
pub(crate) struct StreamKSets(StreamMap<StreamKBuffers>);

impl StreamKCache {
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, StreamKSets>> {
        self.0.lock().map_err(|_| poisoned())
    }
}

impl std::fmt::Debug for StreamKCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let streams = self.0.lock().map_or(0, |sets| sets.len());
        write!(f, "StreamKCache {{ streams: {streams} }}")
    }
}

impl StreamKSets {
    /// Streams with buffers kept.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// What a launch of `grid` CTAs on `stream` under `schedule` passes for its stream-K
    /// buffers: none for a data-parallel schedule, else `stream`'s (see
    /// [`StreamKSets::buffers`]), written by the launch (the guards record it on drop).
    pub(crate) fn launch_ptrs<'a>(
        &'a mut self,
        stream: &'a Arc<CudaStream>,
        schedule: StreamKMode,
        grid: u32,
    ) -> Result<StreamKPtrs<'a>> {
        let buffers = if schedule == StreamKMode::DataParallel { None } else { Some(self.buffers(stream, grid)?) };
        Ok(stream_k_ptrs(buffers, stream))
    }

    /// `stream`'s buffers, (re)allocated when missing or smaller than `ctas` CTAs need (refused
    /// while the stream captures a graph: [`refuse_while_capturing`]). An entry holds
    /// references to its stream, so the handle (the key) cannot be reused by a new stream while
    /// the entry exists.
    pub(crate) fn buffers(&mut self, stream: &Arc<CudaStream>, ctas: u32) -> Result<&mut StreamKBuffers> {
        let make = || -> Result<StreamKBuffers> {
            refuse_while_capturing(stream, "stream-K buffers", ", or `Warpforge::reserve_gemm_workspace`")?;
            // SAFETY: the kernel writes every slot element before any read of it (a partial is
            // published before its flag is raised); f32 has no invalid bit patterns.
            let slots = unsafe { stream.alloc::<f32>(ctas as usize * PARTIAL_SLOT_FLOATS as usize)? };
            let flags = stream.alloc_zeros::<u32>(ctas as usize * FLAGS_PER_CTA as usize)?;
            Ok(StreamKBuffers { slots, flags, ctas })
        };
        self.0.get_or_make(stream.cu_stream() as usize, |b| b.ctas >= ctas, make)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{StreamHeld, StreamMap};

    /// A stand-in for a stream's buffers: the `Arc` plays the stream.
    struct Held(Arc<()>, u32);

    impl StreamHeld for Held {
        fn stream_held_elsewhere(&self) -> bool {
            Arc::strong_count(&self.0) > 1
        }
    }

    #[test]
    fn entries_of_dropped_streams_go_when_a_new_one_is_made() {
        let mut map = StreamMap::new(16);
        for key in 0..100 {
            // The "stream" is dropped right after its call: only the entry holds it.
            let stream = Arc::new(());
            map.get_or_make(key, |_| true, || Ok(Held(stream.clone(), 1))).unwrap();
            assert_eq!(map.len(), 1, "after stream {key}");
        }
    }

    #[test]
    fn live_streams_are_capped_least_recently_used_first() {
        let mut map = StreamMap::new(4);
        let streams: Vec<Arc<()>> = (0..6).map(|_| Arc::new(())).collect();
        for (key, s) in streams.iter().enumerate().take(4) {
            map.get_or_make(key, |_| true, || Ok(Held(s.clone(), 1))).unwrap();
        }
        map.get_or_make(0, |_| true, || unreachable!("kept")).unwrap();
        map.get_or_make(4, |_| true, || Ok(Held(streams[4].clone(), 1))).unwrap();
        assert_eq!(map.len(), 4);
        // Key 1 was the least recently used: gone; key 0 (used again) stays.
        let mut made = false;
        map.get_or_make(0, |_| true, || unreachable!("kept")).unwrap();
        map.get_or_make(
            1,
            |_| true,
            || {
                made = true;
                Ok(Held(streams[1].clone(), 1))
            },
        )
        .unwrap();
        assert!(made);
        assert!(map.len() <= 4);
    }

    #[test]
    fn a_smaller_entry_is_replaced_in_place() {
        let mut map = StreamMap::new(4);
        let s = Arc::new(());
        map.get_or_make(7, |h: &Held| h.1 >= 1, || Ok(Held(s.clone(), 1))).unwrap();
        let grown = map.get_or_make(7, |h| h.1 >= 8, || Ok(Held(s.clone(), 8))).unwrap();
        assert_eq!(grown.1, 8);
        assert_eq!(map.len(), 1);
        // Reserved large enough: a later, smaller request makes nothing.
        map.get_or_make(7, |h| h.1 >= 3, || unreachable!("reserved")).unwrap();
    }
}
