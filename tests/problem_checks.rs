//! The argument checks of the safe API, on the CPU: `GemmProblem::check` and
//! `SwigluProblem::check` are what `Warpforge::gemm` / `Warpforge::swiglu` run before touching a
//! buffer, so extreme field values (leading dimensions, batch strides and shapes at or near
//! `usize::MAX`) must give a typed `Err` or a consistent `Ok`, never an arithmetic-overflow panic
//! (debug) or a wrapped size (release).

use proptest::prelude::*;
use warpforge::{Error, GemmProblem, Layout, QuantScheme, SwigluProblem};

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
            let refused =
                rows == 0 || cols == 0 || !cols.is_multiple_of(multiple) || elements > (isize::MAX / 4) as u128;
            prop_assert!(refused || scales_overflow, "refused {:?} {} × {}", scheme, rows, cols);
        }
        Err(other) => prop_assert!(false, "untyped error {other:?}"),
        Ok(e) => {
            prop_assert!(rows > 0 && cols.is_multiple_of(multiple));
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
