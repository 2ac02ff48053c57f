//! The argument checks of the safe API, on the CPU: `GemmProblem::check` and
//! `SwigluProblem::check` are what `Warpforge::gemm` / `Warpforge::swiglu` run before touching a
//! buffer, so extreme field values (leading dimensions, batch strides and shapes at or near
//! `usize::MAX`) must give a typed `Err` or a consistent `Ok`, never an arithmetic-overflow panic
//! (debug) or a wrapped size (release). Likewise the attention stride rules
//! (`AttentionProblem::check_strides`): each refused with its message, and the spans of the
//! named layouts.

use proptest::prelude::*;
use warpforge::{
    AttentionProblem, AttentionStrides, AttentionVarlenProblem, AttentionVarlenStrides, Error, GemmProblem, Layout,
    QuantScheme, RowStrides, SwigluProblem, TensorStrides,
};

/// Values that break unchecked size arithmetic, plus ordinary ones.
const EXTREMES: [usize; 10] =
    [0, 1, 7, 4096, (1 << 31) - 1, 1 << 31, 1 << 48, (1 << 48) + 1, usize::MAX / 2 + 1, usize::MAX];

fn extreme() -> impl Strategy<Value = usize> {
    prop_oneof![proptest::sample::select(EXTREMES.to_vec()), any::<usize>(), 0usize..10_000]
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor)]
}

/// The checked extents, recomputed in u128 (which cannot overflow for these inputs).
fn span128(rows: usize, cols: usize, ld: usize, stride: usize, batch: usize) -> u128 {
    (batch as u128 - 1) * stride as u128 + (rows as u128 - 1) * ld as u128 + cols as u128
}

/// `check` returns `Err(InvalidArgument)` or extents that cover the problem exactly.
fn check_gemm(p: &GemmProblem) -> Result<(), TestCaseError> {
    match p.check() {
        Err(Error::InvalidArgument(_)) => {}
        Err(other) => prop_assert!(false, "untyped error {other:?}"),
        Ok(e) => {
            let (a_rows, a_cols) = if p.a_layout == Layout::RowMajor { (p.m, p.k) } else { (p.k, p.m) };
            let (b_rows, b_cols) = if p.b_layout == Layout::RowMajor { (p.k, p.n) } else { (p.n, p.k) };
            prop_assert_eq!(e.a as u128, span128(a_rows, a_cols, e.lda, e.strides[0], p.batch));
            prop_assert_eq!(e.b as u128, span128(b_rows, b_cols, e.ldb, e.strides[1], p.batch));
            prop_assert_eq!(e.c as u128, span128(p.m, p.n, e.ldc, e.strides[2], p.batch));
            prop_assert_eq!(e.d as u128, span128(p.m, p.n, e.ldd, e.strides[3], p.batch));
            prop_assert!(e.lda >= a_cols && e.ldb >= b_cols && e.ldc >= p.n && e.ldd >= p.n);
            prop_assert!(
                [e.lda, e.ldb, e.ldc, e.ldd].into_iter().chain(e.strides).all(|v| v <= warpforge::gemm::MAX_PITCH)
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn gemm_check_never_panics_and_covers_what_it_accepts(
        [m, n, k, batch] in [extreme(), extreme(), extreme(), extreme()],
        [lda, ldb, ldc, ldd] in [extreme(), extreme(), extreme(), extreme()],
        strides in [extreme(), extreme(), extreme(), extreme()],
        (a_layout, b_layout) in (layout(), layout()),
        alpha in prop_oneof![Just(1.0f32), Just(f32::NAN), Just(f32::INFINITY)],
    ) {
        let mut p = GemmProblem::new(m, n, k);
        p.batch = batch;
        (p.a_layout, p.b_layout) = (a_layout, b_layout);
        (p.lda, p.ldb, p.ldc, p.ldd) = (lda, ldb, ldc, ldd);
        p.batch_strides = strides;
        p.alpha = alpha;
        let _ = p.strides(); // saturates, never panics
        check_gemm(&p)?;
    }

    #[test]
    fn swiglu_check_never_panics(m in extreme(), hidden in extreme(), intermediate in extreme()) {
        let p = SwigluProblem::new(m, hidden, intermediate);
        match p.check() {
            Err(Error::InvalidArgument(_)) => {}
            Err(other) => prop_assert!(false, "untyped error {other:?}"),
            Ok(e) => {
                prop_assert_eq!(e.x as u128, m as u128 * hidden as u128);
                prop_assert_eq!(e.out as u128, m as u128 * intermediate as u128);
                prop_assert!(e.gate_up_rows >= 2 * intermediate);
                prop_assert_eq!(e.w_gate_up as u128, e.gate_up_rows as u128 * hidden as u128);
            }
        }
    }
}

/// Sets one field of a problem.
type SetField = fn(&mut GemmProblem, usize);

/// The review's cases: each field alone at an extreme refuses with a typed error (the unchecked
/// code panicked on several of these in debug builds, e.g. `ldd = usize::MAX` with `m = 2`).
#[test]
fn extreme_fields_are_refused_with_a_typed_error() {
    let base = GemmProblem::new(64, 64, 64);
    assert!(base.check().is_ok());
    for big in [usize::MAX, usize::MAX / 2 + 1, (1 << 48) + 1] {
        let cases: [(&str, SetField); 12] = [
            ("m", |p, v| p.m = v),
            ("n", |p, v| p.n = v),
            ("k", |p, v| p.k = v),
            ("batch", |p, v| p.batch = v),
            ("lda", |p, v| p.lda = v),
            ("ldb", |p, v| p.ldb = v),
            ("ldc", |p, v| p.ldc = v),
            ("ldd", |p, v| p.ldd = v),
            ("stride A", |p, v| (p.batch, p.batch_strides[0]) = (2, v)),
            ("stride B", |p, v| (p.batch, p.batch_strides[1]) = (2, v)),
            ("stride C", |p, v| (p.batch, p.batch_strides[2]) = (2, v)),
            ("stride D", |p, v| (p.batch, p.batch_strides[3]) = (2, v)),
        ];
        for (what, set) in cases {
            let mut p = base;
            set(&mut p, big);
            assert!(matches!(p.check(), Err(Error::InvalidArgument(_))), "{what} = {big}: {:?}", p.check());
        }
    }
    // Packed strides that overflow only once multiplied out.
    let mut p = GemmProblem::new(2, 64, 64);
    (p.batch, p.ldd) = (2, usize::MAX / 2 + 1);
    assert!(matches!(p.check(), Err(Error::InvalidArgument(_))));
    // Large but sane pitches are fine.
    let mut p = GemmProblem::new(3, 64, 64);
    (p.lda, p.ldd) = (1 << 40, 1 << 40);
    assert!(p.check().is_ok());
    let too_wide = SwigluProblem::new(1 << 30, 1 << 30, (1 << 30) - 1);
    assert!(too_wide.check().is_ok() || matches!(too_wide.check(), Err(Error::InvalidArgument(_))));
    assert!(matches!(SwigluProblem::new(1, 1, usize::MAX).check(), Err(Error::InvalidArgument(_))));
}

/// `QuantScheme::extents` refuses what its scheme cannot run and sizes the rest exactly.
fn check_quant(scheme: QuantScheme, rows: usize, cols: usize) -> Result<(), TestCaseError> {
    let multiple = match scheme {
        QuantScheme::PerTokenGroup => 128,
        QuantScheme::PerBlock => 8,
        QuantScheme::PerTensor => 1,
        QuantScheme::Mxfp8 => 32,
        QuantScheme::Nvfp4 => 16,
    };
    let elements = rows as u128 * cols as u128;
    match scheme.extents(rows, cols) {
        Err(Error::InvalidArgument(_)) => {
            let pad = (rows as u128).div_ceil(4) * 4;
            let scales_overflow =
                scheme == QuantScheme::PerTokenGroup && pad * (cols / 128) as u128 > usize::MAX as u128;
            let refused = rows == 0
                || cols == 0
                || !cols.is_multiple_of(multiple)
                || elements > warpforge_logic::quant::MAX_ELEMENTS as u128;
            prop_assert!(refused || scales_overflow, "refused {:?} {} × {}", scheme, rows, cols);
        }
        Err(other) => prop_assert!(false, "untyped error {other:?}"),
        Ok(e) => {
            prop_assert!(rows > 0 && cols.is_multiple_of(multiple));
            prop_assert!(elements <= warpforge_logic::quant::MAX_ELEMENTS as u128);
            prop_assert_eq!(e.elements as u128, elements);
            prop_assert_eq!(e.codes as u128, if scheme == QuantScheme::Nvfp4 { elements / 2 } else { elements });
            let scales = match scheme {
                QuantScheme::PerTokenGroup => (rows as u128).div_ceil(4) * 4 * (cols / 128) as u128,
                QuantScheme::PerBlock => (rows as u128).div_ceil(128) * (cols as u128).div_ceil(128),
                QuantScheme::PerTensor => 1,
                QuantScheme::Mxfp8 => elements / 32,
                QuantScheme::Nvfp4 => elements / 16,
            };
            prop_assert_eq!(e.scales as u128, scales);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn quant_extents_are_checked(rows in extreme(), cols in extreme(), scheme in 0..5usize) {
        let scheme = [
            QuantScheme::PerTokenGroup,
            QuantScheme::PerBlock,
            QuantScheme::PerTensor,
            QuantScheme::Mxfp8,
            QuantScheme::Nvfp4,
        ][scheme];
        check_quant(scheme, rows, cols)?;
        check_quant(scheme, rows, cols / 128 * 128)?;
    }
}

/// One launch quantises at most `MAX_ELEMENTS` (the kernels' 32-bit vector indices): exactly
/// that many is taken, one row more is refused with a typed error, by every scheme.
#[test]
fn quant_launches_stop_at_max_elements() {
    let cols = 1 << 14;
    let rows = warpforge_logic::quant::MAX_ELEMENTS / cols;
    for scheme in [
        QuantScheme::PerTokenGroup,
        QuantScheme::PerBlock,
        QuantScheme::PerTensor,
        QuantScheme::Mxfp8,
        QuantScheme::Nvfp4,
    ] {
        assert_eq!(scheme.extents(rows, cols).unwrap().elements, rows * cols);
        assert!(matches!(scheme.extents(rows + 1, cols), Err(Error::InvalidArgument(_))), "{scheme:?}");
    }
}

/// The span one strided tensor reaches, in u128: `head_dim` plus each stepped dimension.
fn span_of(d: usize, dims: [(usize, usize); 3]) -> u128 {
    dims.iter().fold(d as u128, |end, &(n, s)| end + (n as u128 - 1) * s as u128)
}

/// The spans of the packed, BHSD and fused-QKV layouts, fixed and variable length.
#[test]
fn attention_stride_spans_of_the_named_layouts() {
    let p = AttentionProblem::new(2, 4, 2, 100, 100, 64);
    let e = p.check().unwrap();
    for strides in [AttentionStrides::packed(&p), AttentionStrides::bhsd(&p)] {
        let s = p.check_strides(&strides).unwrap();
        assert_eq!((s.q, s.k, s.v, s.o, s.lse), (e.q, e.kv, e.kv, e.q, e.lse), "{strides:?}");
    }
    assert_eq!(AttentionStrides::bhsd(&p).q, TensorStrides { batch: 4 * 100 * 64, seq: 64, head: 100 * 64 });
    // Fused `[2, 100, 4 + 2 + 2, 64]`: rows of 512 elements, sequences of 51,200.
    let fused = AttentionStrides::fused_qkv(&p);
    assert_eq!(fused.k, TensorStrides { batch: 51_200, seq: 512, head: 64 });
    let s = p.check_strides(&fused).unwrap();
    assert_eq!(s.q as u128, span_of(64, [(4, 64), (100, 512), (2, 51_200)]));
    assert_eq!((s.k, s.v), (51_200 + 99 * 512 + 128, 51_200 + 99 * 512 + 128));
    assert_eq!(s.o, e.q);

    let mut v = AttentionVarlenProblem::new(3, 8, 1, 500, 700, 300, 400, 128);
    v.causal = true;
    let e = v.check().unwrap();
    let s = v.check_strides(&AttentionVarlenStrides::packed(&v)).unwrap();
    assert_eq!((s.q, s.k, s.v, s.o, s.lse), (e.q, e.kv, e.kv, e.q, e.lse));
    let (mut v, row) = (v, (8 + 2) * 128);
    v.total_k = 500;
    let fused = AttentionVarlenStrides::fused_qkv(&v);
    assert_eq!(fused.q, RowStrides { row, head: 128 });
    let s = v.check_strides(&fused).unwrap();
    assert_eq!((s.q, s.k, s.o), (499 * row + 8 * 128, 499 * row + 128, 500 * 8 * 128));
}

/// Each stride rule refused with its message (and what the rules leave free accepted).
#[test]
fn attention_stride_rules_are_refused_with_their_message() {
    let p = AttentionProblem::new(2, 4, 2, 100, 100, 64);
    let packed = AttentionStrides::packed(&p);
    let refused: [(&str, AttentionStrides, &str); 8] = [
        (
            "q head not 16 B",
            AttentionStrides { q: TensorStrides { head: 68, ..packed.q }, ..packed },
            "q's head stride 68 is not a multiple of 8 elements",
        ),
        (
            "k row not 16 B",
            AttentionStrides { k: TensorStrides { seq: 129, ..packed.k }, ..packed },
            "k's row stride 129 is not a multiple of 8",
        ),
        (
            "v batch not 16 B",
            AttentionStrides { v: TensorStrides { batch: 12_804, ..packed.v }, ..packed },
            "v's batch stride 12804 is not a multiple of 8",
        ),
        (
            "k row ≥ 2^40 B",
            AttentionStrides { k: TensorStrides { seq: 1 << 39, ..packed.k }, ..packed },
            "not below 2^40 bytes",
        ),
        ("o odd", AttentionStrides { o: TensorStrides { seq: 257, ..packed.o }, ..packed }, "o's stride 257 is odd"),
        (
            "o heads overlap",
            AttentionStrides { o: TensorStrides { head: 62, ..packed.o }, ..packed },
            "o's strides make elements overlap",
        ),
        (
            "o rows overlap heads",
            AttentionStrides { o: TensorStrides { seq: 200, ..packed.o }, ..packed },
            "o's strides make elements overlap",
        ),
        (
            "o overflow",
            AttentionStrides { o: TensorStrides { batch: usize::MAX - 1, ..packed.o }, ..packed },
            "o's strides overflow usize",
        ),
    ];
    for (what, strides, message) in refused {
        match p.check_strides(&strides) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(message), "{what}: {m:?} lacks {message:?}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Any order of O's dimensions that does not overlap: heads outermost, rows innermost.
    let heads_outer = TensorStrides { batch: 100 * 64, seq: 64, head: 2 * 100 * 64 };
    assert!(p.check_strides(&AttentionStrides { o: heads_outer, ..packed }).is_ok());
    // A dimension of extent 1 is never stepped: its stride is free.
    let one = AttentionProblem::new(1, 1, 1, 100, 100, 64);
    let free = TensorStrides { batch: 3, seq: 64, head: 1 };
    let s = one.check_strides(&AttentionStrides { q: free, k: free, v: free, o: free }).unwrap();
    assert_eq!(s.q, 100 * 64);
    // The problem's own rules come first.
    let bad = AttentionProblem::new(2, 3, 2, 100, 100, 64);
    assert!(matches!(bad.check_strides(&packed), Err(Error::InvalidArgument(m)) if m.contains("GQA")));
    // Variable length: the same rules on row and head strides.
    let v = AttentionVarlenProblem::new(2, 4, 2, 300, 300, 200, 200, 64);
    let vp = AttentionVarlenStrides::packed(&v);
    let odd = AttentionVarlenStrides { o: RowStrides { row: 255, head: 64 }, ..vp };
    assert!(matches!(v.check_strides(&odd), Err(Error::InvalidArgument(m)) if m.contains("odd")));
    let unaligned = AttentionVarlenStrides { q: RowStrides { row: 260, head: 64 }, ..vp };
    assert!(matches!(v.check_strides(&unaligned), Err(Error::InvalidArgument(m)) if m.contains("not a multiple of 8")));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Extreme strides give a typed error or spans that cover exactly what the strides reach.
    #[test]
    fn attention_check_strides_never_panics(
        strides in [extreme(), extreme(), extreme(), extreme(), extreme(), extreme()],
        batch in 1usize..4,
        seq in prop_oneof![Just(1usize), 2usize..300],
    ) {
        let p = AttentionProblem::new(batch, 2, 1, seq, seq, 64);
        let [b, s, h, ob, os, oh] = strides;
        let t = TensorStrides { batch: b, seq: s, head: h };
        let o = TensorStrides { batch: ob, seq: os, head: oh };
        match p.check_strides(&AttentionStrides { q: t, k: t, v: t, o }) {
            Err(Error::InvalidArgument(_)) => {}
            Err(other) => prop_assert!(false, "untyped error {other:?}"),
            Ok(spans) => {
                prop_assert_eq!(spans.q as u128, span_of(64, [(2, h), (seq, s), (batch, b)]));
                prop_assert_eq!(spans.k as u128, span_of(64, [(1, h), (seq, s), (batch, b)]));
                prop_assert_eq!(spans.o as u128, span_of(64, [(2, oh), (seq, os), (batch, ob)]));
            }
        }
    }
}
