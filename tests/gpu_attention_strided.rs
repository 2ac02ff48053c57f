//! Strided attention layouts (`Warpforge::attention_strided`, `attention_varlen_strided`)
//! against the packed entry points on the same data: torch SDPA's `[batch, heads, seq, d]`,
//! views of a fused QKV projection, a sequence-major `[seq, batch, heads, d]` Q/K/V, and a padded
//! O (head and row strides past the packed ones) whose padding must keep its poison. The
//! packed kernels are checked against a float64 reference in `gpu_attention`; the strided
//! launches run the same kernel on the same values, so O and the LSE must match bit for bit.
//! Every gap of the strided Q/K/V buffers holds NaN: a read outside the view would show.
//! Head dimensions 64, 128 and 256, causal and not, GQA groups 1, 2 and 8, bf16 and f16.

use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use warpforge::{
    AttentionElement, AttentionProblem, AttentionStrides, AttentionVarlenProblem, AttentionVarlenStrides, RowStrides,
    TensorStrides,
};

use crate::common::{Element, gpu, random_f32};

/// One tensor's shape and strides: `batches` × `rows` × `heads` vectors of `head_dim`.
#[derive(Clone, Copy, Debug)]
struct View {
    batches: usize,
    rows: usize,
    heads: usize,
    s: TensorStrides,
}

impl View {
    /// Element offset of the vector of (batch, row, head) in the strided buffer, and in the
    /// packed `[batches, rows, heads, d]` one.
    fn at(&self, b: usize, r: usize, h: usize, d: usize) -> (usize, usize) {
        (b * self.s.batch + r * self.s.seq + h * self.s.head, ((b * self.rows + r) * self.heads + h) * d)
    }

    fn each(&self, d: usize, mut f: impl FnMut(usize, usize)) {
        for b in 0..self.batches {
            for r in 0..self.rows {
                for h in 0..self.heads {
                    let (strided, packed) = self.at(b, r, h, d);
                    f(strided, packed);
                }
            }
        }
    }

    /// Copies `packed` into `dst` at the view's places (the rest of `dst` is untouched).
    fn scatter<T: Copy>(&self, packed: &[T], d: usize, dst: &mut [T]) {
        self.each(d, |s, p| dst[s..s + d].copy_from_slice(&packed[p..p + d]));
    }

    /// The view's vectors, packed; and whether every element outside it kept its NaN.
    fn gather<T: Element>(&self, strided: &[T], d: usize) -> (Vec<T>, bool) {
        let mut packed = vec![T::ZERO; self.batches * self.rows * self.heads * d];
        let mut inside = vec![false; strided.len()];
        self.each(d, |s, p| {
            packed[p..p + d].copy_from_slice(&strided[s..s + d]);
            inside[s..s + d].iter_mut().for_each(|x| *x = true);
        });
        let untouched = strided.iter().zip(&inside).all(|(x, &i)| i || x.f64().is_nan());
        (packed, untouched)
    }

    fn varlen(rows: usize, heads: usize, s: RowStrides) -> View {
        View { batches: 1, rows, heads, s: TensorStrides { batch: 0, seq: s.row, head: s.head } }
    }
}

/// Bit-for-bit equality (NaN equal to NaN).
fn same<T: Element>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.f64().to_bits() == y.f64().to_bits())
}

/// Elements of NaN after each strided buffer's span.
const TAIL: usize = 29;

/// The four views of a call and how Q, K and V sit in memory: `fused` puts them in one buffer
/// (Q's heads, then K's, then V's, per row) at offsets 0, `heads_q·d` and `(heads_q+heads_kv)·d`.
struct Views {
    q: View,
    k: View,
    v: View,
    o: View,
    fused: bool,
}

/// The strided buffers on the device: Q, K, V (one buffer when fused) and O, poisoned.
struct Strided<T> {
    qkv: [CudaSlice<T>; 3],
    offsets: [usize; 3],
    o: CudaSlice<T>,
}

fn upload<T: AttentionElement + Element>(views: &Views, d: usize, q: &[T], k: &[T], v: &[T]) -> Strided<T> {
    let stream = gpu().0.stream();
    let span = |view: &View| view.at(view.batches - 1, view.rows - 1, view.heads - 1, d).0 + d;
    let o = stream.clone_htod(&vec![T::NAN; span(&views.o) + TAIL]).unwrap();
    if views.fused {
        let offsets = [0, views.q.heads * d, (views.q.heads + views.k.heads) * d];
        let len = [(&views.q, offsets[0]), (&views.k, offsets[1]), (&views.v, offsets[2])]
            .iter()
            .map(|(view, off)| off + span(view))
            .max()
            .unwrap();
        let mut host = vec![T::NAN; len + TAIL];
        views.q.scatter(q, d, &mut host[offsets[0]..]);
        views.k.scatter(k, d, &mut host[offsets[1]..]);
        views.v.scatter(v, d, &mut host[offsets[2]..]);
        let one = stream.clone_htod(&host).unwrap();
        Strided { qkv: [one.clone(), one.clone(), one], offsets, o }
    } else {
        let put = |view: &View, data: &[T]| {
            let mut host = vec![T::NAN; span(view) + TAIL];
            view.scatter(data, d, &mut host);
            stream.clone_htod(&host).unwrap()
        };
        Strided { qkv: [put(&views.q, q), put(&views.k, k), put(&views.v, v)], offsets: [0; 3], o }
    }
}

/// Runs `problem` packed and with `strides` (fused Q/K/V when asked), and compares O (gathered
/// from its view, padding untouched) and the LSE.
fn check_fixed<T: AttentionElement + Element>(problem: &AttentionProblem, strides: &AttentionStrides, fused: bool) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let p = problem;
    let e = p.check().expect("a valid problem");
    p.check_strides(strides).expect("valid strides");
    let data = |salt: u64, n: usize| -> Vec<T> { random_f32(salt, n, 1.0).into_iter().map(T::of).collect() };
    let (q, k, v) = (data(1, e.q), data(2, e.kv), data(3, e.kv));
    let (dq, dk, dv) = (stream.clone_htod(&q).unwrap(), stream.clone_htod(&k).unwrap(), stream.clone_htod(&v).unwrap());
    let mut o = stream.clone_htod(&vec![T::NAN; e.q]).unwrap();
    let mut lse = stream.clone_htod(&vec![f32::NAN; e.lse]).unwrap();
    wf.attention(stream, p, &dq, &dk, &dv, &mut o, Some(&mut lse)).expect("packed attention");

    let views = Views {
        q: View { batches: p.batch, rows: p.seq_q, heads: p.heads_q, s: strides.q },
        k: View { batches: p.batch, rows: p.seq_k, heads: p.heads_kv, s: strides.k },
        v: View { batches: p.batch, rows: p.seq_k, heads: p.heads_kv, s: strides.v },
        o: View { batches: p.batch, rows: p.seq_q, heads: p.heads_q, s: strides.o },
        fused,
    };
    let mut s = upload(&views, p.head_dim, &q, &k, &v);
    let mut s_lse = stream.clone_htod(&vec![f32::NAN; e.lse]).unwrap();
    let [sq, sk, sv] = &s.qkv;
    let (sq, sk, sv) = (sq.slice(s.offsets[0]..), sk.slice(s.offsets[1]..), sv.slice(s.offsets[2]..));
    if let Err(err) = wf.attention_strided(stream, p, strides, &sq, &sk, &sv, &mut s.o, Some(&mut s_lse)) {
        panic!("{p:?} {strides:?}: attention_strided failed: {err}");
    }
    compare(&format!("{p:?} {strides:?}"), &views.o, p.head_dim, (&o, &lse), (&s.o, &s_lse));
}

/// O and the LSE of the packed and the strided call: equal bit for bit, O's padding still NaN.
fn compare<T: AttentionElement + Element>(
    what: &str,
    o_view: &View,
    d: usize,
    (o, lse): (&CudaSlice<T>, &CudaSlice<f32>),
    (s_o, s_lse): (&CudaSlice<T>, &CudaSlice<f32>),
) {
    let stream = gpu().0.stream();
    let (want, want_lse) = (stream.clone_dtoh(o).unwrap(), stream.clone_dtoh(lse).unwrap());
    let (got, untouched) = o_view.gather(&stream.clone_dtoh(s_o).unwrap(), d);
    let got_lse = stream.clone_dtoh(s_lse).unwrap();
    assert!(untouched, "{what} ({}): O written outside its view", std::any::type_name::<T>());
    assert!(same(&got, &want), "{what} ({}): strided O differs from packed", std::any::type_name::<T>());
    assert!(same(&got_lse, &want_lse), "{what}: strided LSE differs from packed");
}

/// `(batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal)`: every head dimension, causal
/// and not, GQA groups 1, 2 and 8, lengths off the tiles and the 80-key blocks; the last two
/// take the decode path (at most 16 query rows per key/value head).
const CASES: [(usize, usize, usize, usize, usize, usize, bool); 8] = [
    (2, 2, 2, 130, 130, 64, false),
    (2, 4, 2, 77, 77, 64, true),
    (2, 8, 1, 200, 200, 128, true),
    (1, 2, 1, 129, 129, 128, false),
    (2, 4, 2, 161, 161, 256, true),
    (1, 2, 2, 81, 81, 256, false),
    (3, 8, 1, 1, 300, 128, false),
    (2, 4, 2, 4, 90, 64, true),
];

fn problems() -> impl Iterator<Item = AttentionProblem> {
    CASES.into_iter().map(|(batch, heads_q, heads_kv, seq_q, seq_k, d, causal)| {
        let mut p = AttentionProblem::new(batch, heads_q, heads_kv, seq_q, seq_k, d);
        p.causal = causal;
        p
    })
}

/// O padded past the packed strides: 2 elements between heads, 6 between rows, 10 between
/// sequences (all even, non-overlapping).
fn padded_o(p: &AttentionProblem) -> TensorStrides {
    let head = p.head_dim + 2;
    let seq = p.heads_q * head + 6;
    TensorStrides { batch: p.seq_q * seq + 10, seq, head }
}

/// Q, K and V as views of one fused projection, O packed: `AttentionStrides::fused_qkv`, whose
/// sequences are one length. Where `seq_q ≠ seq_k` (the decode cases) the projection is padded
/// to the longer one: with `fused_qkv`'s batch stride of `seq_q` rows, K's sequences would
/// overlap and the strided K would not hold the packed K's values.
fn fused_qkv(p: &AttentionProblem) -> AttentionStrides {
    let s = AttentionStrides::fused_qkv(p);
    let batch = p.seq_q.max(p.seq_k) * s.q.seq;
    let view = TensorStrides { batch, ..s.q };
    AttentionStrides { q: view, k: view, v: view, ..s }
}

/// `[batch, heads, seq, d]` for every tensor (torch SDPA's layout).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_bhsd_matches_packed() {
    for p in problems() {
        check_fixed::<bf16>(&p, &AttentionStrides::bhsd(&p), false);
        check_fixed::<f16>(&p, &AttentionStrides::bhsd(&p), false);
    }
}

/// Q, K and V as views of one `[batch, seq, heads_q + 2·heads_kv, d]` projection, O packed.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_fused_qkv_matches_packed() {
    for p in problems() {
        check_fixed::<bf16>(&p, &fused_qkv(&p), true);
        check_fixed::<f16>(&p, &fused_qkv(&p), true);
    }
}

/// Sequence-major Q/K/V (`[seq, batch, heads, d]`, K and V with padded rows) and a padded O
/// whose padding keeps its NaN; and a fused QKV with a padded O.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_padded_output_and_sequence_major_inputs_match_packed() {
    for p in problems() {
        let d = p.head_dim;
        let sbhd = |heads: usize, pad: usize| {
            let seq = p.batch * (heads * d + pad);
            TensorStrides { batch: heads * d + pad, seq, head: d }
        };
        let strides = AttentionStrides {
            q: sbhd(p.heads_q, 0),
            k: sbhd(p.heads_kv, 8),
            v: sbhd(p.heads_kv, 16),
            o: padded_o(&p),
        };
        check_fixed::<bf16>(&p, &strides, false);
        let fused = AttentionStrides { o: padded_o(&p), ..fused_qkv(&p) };
        check_fixed::<f16>(&p, &fused, true);
    }
}

/// Variable length: Q, K and V as views of one fused `[rows, heads_q + 2·heads_kv, d]`
/// projection and O with padded heads and rows, against `attention_varlen` on the packed data;
/// sequence lengths of 0, 1, off the tiles and long, every head dimension, causal and not.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_varlen_strided_matches_packed() {
    let lens = [130usize, 0, 1, 77, 300];
    for (heads_q, heads_kv, d, causal) in [(4, 2, 64, true), (8, 1, 128, false), (2, 2, 256, true), (4, 1, 256, false)]
    {
        check_varlen::<bf16>(&lens, heads_q, heads_kv, d, causal);
        check_varlen::<f16>(&lens, heads_q, heads_kv, d, causal);
    }
}

fn check_varlen<T: AttentionElement + Element>(
    lens: &[usize],
    heads_q: usize,
    heads_kv: usize,
    d: usize,
    causal: bool,
) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let cu: Vec<u32> = std::iter::once(0)
        .chain(lens.iter().scan(0u32, |acc, &l| {
            *acc += l as u32;
            Some(*acc)
        }))
        .collect();
    let total = *cu.last().unwrap() as usize;
    let longest = *lens.iter().max().unwrap();
    let mut p = AttentionVarlenProblem::new(lens.len(), heads_q, heads_kv, total, total, longest, longest, d);
    p.causal = causal;
    let e = p.check().expect("a valid problem");
    let data = |salt: u64, n: usize| -> Vec<T> { random_f32(salt, n, 1.0).into_iter().map(T::of).collect() };
    let (q, k, v) = (data(4, e.q), data(5, e.kv), data(6, e.kv));
    let (dq, dk, dv) = (stream.clone_htod(&q).unwrap(), stream.clone_htod(&k).unwrap(), stream.clone_htod(&v).unwrap());
    let dcu = stream.clone_htod(&cu).unwrap();
    let mut o = stream.clone_htod(&vec![T::NAN; e.q]).unwrap();
    let mut lse = stream.clone_htod(&vec![f32::NAN; e.lse]).unwrap();
    wf.attention_varlen(stream, &p, &dq, &dk, &dv, &dcu, &dcu, &mut o, Some(&mut lse)).expect("packed varlen");

    let o_strides = RowStrides { row: heads_q * (d + 4) + 2, head: d + 4 };
    let strides = AttentionVarlenStrides { o: o_strides, ..AttentionVarlenStrides::fused_qkv(&p) };
    p.check_strides(&strides).expect("valid strides");
    let views = Views {
        q: View::varlen(total, heads_q, strides.q),
        k: View::varlen(total, heads_kv, strides.k),
        v: View::varlen(total, heads_kv, strides.v),
        o: View::varlen(total, heads_q, strides.o),
        fused: true,
    };
    let mut s = upload(&views, d, &q, &k, &v);
    let mut s_lse = stream.clone_htod(&vec![f32::NAN; e.lse]).unwrap();
    let [sq, sk, sv] = &s.qkv;
    let (sq, sk, sv) = (sq.slice(s.offsets[0]..), sk.slice(s.offsets[1]..), sv.slice(s.offsets[2]..));
    let result =
        wf.attention_varlen_strided(stream, &p, &strides, &sq, &sk, &sv, &dcu, &dcu, &mut s.o, Some(&mut s_lse));
    if let Err(err) = result {
        panic!("{p:?} {strides:?}: attention_varlen_strided failed: {err}");
    }
    compare(&format!("{p:?} {strides:?}"), &views.o, d, (&o, &lse), (&s.o, &s_lse));
}

/// The buffer rules the strides add, refused before any launch (O keeps its poison): a view
/// shorter than its strides' span, a fused K view off 16 bytes, an O view that does not span its
/// padded rows, and bad strides.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_strided_refuses_short_and_misaligned_views() {
    let (device, wf) = gpu();
    let stream = device.stream();
    let p = AttentionProblem::new(2, 2, 1, 64, 64, 64);
    let fused = AttentionStrides::fused_qkv(&p);
    let s = p.check_strides(&fused).unwrap();
    let qkv = stream.clone_htod(&vec![bf16::ONE; 2 * 64 * 4 * 64]).unwrap();
    let (q, k, v) = (qkv.slice(0..), qkv.slice(2 * 64..), qkv.slice(3 * 64..));
    let mut o = stream.clone_htod(&vec![bf16::NAN; s.o]).unwrap();
    let refuse = |what: &str, result: warpforge::Result<()>, message: &str| match result {
        Err(warpforge::Error::InvalidArgument(m)) => assert!(m.contains(message), "{what}: {m:?} lacks {message:?}"),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    let short_v = qkv.slice(3 * 64..3 * 64 + s.v - 1);
    refuse("v short", wf.attention_strided(stream, &p, &fused, &q, &k, &short_v, &mut o, None), "v holds");
    let odd_k = qkv.slice(2 * 64 + 4..);
    refuse("k off 16 B", wf.attention_strided(stream, &p, &fused, &q, &odd_k, &v, &mut o, None), "16-byte aligned");
    let padded = AttentionStrides { o: padded_o(&p), ..fused };
    refuse("o short", wf.attention_strided(stream, &p, &padded, &q, &k, &v, &mut o, None), "o holds");
    let odd = AttentionStrides { o: TensorStrides { head: 65, ..fused.o }, ..fused };
    refuse("o odd", wf.attention_strided(stream, &p, &odd, &q, &k, &v, &mut o, None), "odd");
    assert!(stream.clone_dtoh(&o).unwrap().iter().all(|x| x.is_nan()), "a refused call wrote O");
}
