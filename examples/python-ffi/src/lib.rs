//! warpforge's attention forward behind a C ABI, so a Python process can run it on tensors it
//! owns (PyTorch's, through `ctypes` and `tensor.data_ptr()`), on the same device, context and
//! stream as its own kernels: `benches/attention_vendor.py` times it interleaved with cuDNN and
//! FlashAttention-2 on the same inputs.
//!
//! The library keeps one [`Warpforge`] on device 0's primary context (the one PyTorch uses) and
//! launches on the legacy default stream, which PyTorch's default stream is; calls from one
//! thread at a time. Every call is validated by the safe API (extents, lengths, alignment): an
//! invalid call returns a negative code and leaves its message for [`warpforge_last_error`].

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::sync::{Arc, OnceLock};

use half::{bf16, f16};
use warpforge::host::cudarc::driver::{CudaSlice, CudaStream};
use warpforge::{AttentionElement, AttentionProblem, AttentionStrides, Device, TensorStrides, Warpforge};

/// The loaded kernels and the stream every call launches on.
struct Session {
    warpforge: Warpforge,
    stream: Arc<CudaStream>,
}

static SESSION: OnceLock<Result<Session, String>> = OnceLock::new();

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn session() -> Result<&'static Session, String> {
    let opened = SESSION.get_or_init(|| {
        let device = Device::new(0).map_err(|e| e.to_string())?;
        let warpforge = Warpforge::new(&device).map_err(|e| e.to_string())?;
        let stream = device.context().default_stream();
        Ok(Session { warpforge, stream })
    });
    opened.as_ref().map_err(Clone::clone)
}

/// The problem as the C caller describes it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FfiAttention {
    /// Device addresses of Q, K, V, O (`[batch, seq, heads, head_dim]` packed, or as `strides`
    /// say) and of the f32 LSE (`[batch, heads_q, seq_q]`) or 0.
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    pub lse: u64,
    pub batch: u64,
    pub heads_q: u64,
    pub heads_kv: u64,
    pub seq_q: u64,
    pub seq_k: u64,
    /// 64, 128 or 256 (anything else is refused with the safe API's message).
    pub head_dim: u64,
    /// Non-zero for the causal (bottom-right aligned) mask.
    pub causal: u32,
    /// 0 for bf16, 1 for f16.
    pub dtype: u32,
    /// Softmax scale; 0 means `1 / sqrt(head_dim)`.
    pub softmax_scale: f32,
    /// Element strides (batch, seq, head) of Q, K, V and O in that order, head_dim contiguous
    /// (a torch tensor `[batch, heads, seq, d]` gives `stride(0), stride(2), stride(1)`); all
    /// zero: every tensor packed `[batch, seq, heads, head_dim]`.
    pub strides: [u64; 12],
}

/// Borrows caller-owned device memory as a `CudaSlice` for one call.
struct Borrowed<T>(Option<CudaSlice<T>>);

impl<T> Borrowed<T> {
    /// # Safety
    /// `address` is a live device allocation of at least `len` elements of `T` on the session's
    /// context, not freed before this value drops.
    unsafe fn new(stream: &Arc<CudaStream>, address: u64, len: usize) -> Self {
        // SAFETY: forwarded to this function's contract; the slice is leaked on drop, never freed.
        Borrowed(Some(unsafe { stream.upgrade_device_ptr(address, len) }))
    }

    fn slice(&mut self) -> &mut CudaSlice<T> {
        self.0.as_mut().expect("present until drop")
    }
}

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        if let Some(slice) = self.0.take() {
            // The caller owns the memory: give it back without freeing it.
            slice.leak();
        }
    }
}

fn run<T: AttentionElement>(s: &Session, a: &FfiAttention) -> Result<(), String> {
    let dim = |v: u64| usize::try_from(v).map_err(|_| format!("{v} does not fit in usize"));
    let (batch, heads_q, heads_kv) = (dim(a.batch)?, dim(a.heads_q)?, dim(a.heads_kv)?);
    let mut p = AttentionProblem::new(batch, heads_q, heads_kv, dim(a.seq_q)?, dim(a.seq_k)?, dim(a.head_dim)?);
    p.causal = a.causal != 0;
    if a.softmax_scale != 0.0 {
        p.softmax_scale = a.softmax_scale;
    }
    let strides = if a.strides == [0; 12] {
        AttentionStrides::packed(&p)
    } else {
        let t = |i: usize| -> Result<TensorStrides, String> {
            Ok(TensorStrides { batch: dim(a.strides[i])?, seq: dim(a.strides[i + 1])?, head: dim(a.strides[i + 2])? })
        };
        AttentionStrides { q: t(0)?, k: t(3)?, v: t(6)?, o: t(9)? }
    };
    let e = p.check_strides(&strides).map_err(|e| e.to_string())?;
    if [a.q, a.k, a.v, a.o].contains(&0) {
        return Err("q, k, v and o must be device addresses (0 given)".into());
    }
    let stream = &s.stream;
    // SAFETY: the caller's contract on `warpforge_attention`: each address holds at least the
    // span its strides reach (checked arithmetic: `check_strides`), on device 0, alive for the
    // call.
    let (mut q, mut k, mut v, mut o) = unsafe {
        (
            Borrowed::<T>::new(stream, a.q, e.q),
            Borrowed::<T>::new(stream, a.k, e.k),
            Borrowed::<T>::new(stream, a.v, e.v),
            Borrowed::<T>::new(stream, a.o, e.o),
        )
    };
    // SAFETY: as above, for the LSE's `batch · heads_q · seq_q` floats when given.
    let mut lse = (a.lse != 0).then(|| unsafe { Borrowed::<f32>::new(stream, a.lse, e.lse) });
    let lse = lse.as_mut().map(|l| l.slice() as &mut _);
    let (q, k, v, o) = (q.slice(), k.slice(), v.slice(), o.slice());
    s.warpforge.attention_strided(stream, &p, &strides, q, k, v, o, lse).map_err(|e| e.to_string())
}

/// Runs `o = softmax(scale · q·kᵀ [+ causal mask]) · v`, queued on the legacy default stream.
/// Returns 0, or -1 with the reason in [`warpforge_last_error`].
///
/// # Safety
/// `problem` points to a valid [`FfiAttention`] whose addresses are device-0 allocations of at
/// least their tensor's extent (packed Q and O: `batch · seq_q · heads_q · head_dim` elements;
/// K and V: `batch · seq_k · heads_kv · head_dim`; strided: the highest element the strides
/// reach, plus one; LSE: `batch · heads_q · seq_q` f32) that stay alive until the stream has run
/// the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn warpforge_attention(problem: *const FfiAttention) -> i32 {
    let outcome = std::panic::catch_unwind(|| {
        // SAFETY: the caller passes a valid pointer (this function's contract); null is refused.
        let a = unsafe { problem.as_ref() }.ok_or("null problem")?;
        let s = session()?;
        match a.dtype {
            0 => run::<bf16>(s, a),
            1 => run::<f16>(s, a),
            other => Err(format!("dtype {other}: 0 (bf16) or 1 (f16)")),
        }
    });
    let message = match outcome {
        Ok(Ok(())) => return 0,
        Ok(Err(message)) => message,
        Err(_) => "warpforge panicked".to_string(),
    };
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
    -1
}

/// The message of this thread's last failed call (empty if none); valid until the next call.
#[unsafe(no_mangle)]
pub extern "C" fn warpforge_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}
