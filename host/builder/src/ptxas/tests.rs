//! The ptxas report reader and the build verdict on sample `ptxas -v` output (CUDA 13 wording).

use super::*;

/// Two entries and a shared panic helper, as warpforge's modules print them.
const PLAIN: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
ptxas info    : Function properties for gemm
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
ptxas info    : (C7508) Potential Performance Loss: setmaxnreg ignored
ptxas info    : Compile time = 36525.188 ms
ptxas info    : Function properties for _RNvNtCsbSE61zFgCyu_4core9panicking9panic_fmt
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'saxpy' for 'sm_90a'
ptxas info    : Function properties for saxpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 380 bytes cmem[0]
";

/// A recursive callee ptxas kept out of line (with frame and spills), an entry whose stack it
/// cannot bound, an inlined array (cumulative stack), and a serialised wgmma; from ptxas 13.
const CALLS: &str = "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function 'wgmma_touched' in line 78
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'mma_step'
ptxas warning : Stack size for entry function 'calls_scratch' cannot be statically determined
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'wgmma_touched' for 'sm_90a'
ptxas info    : Function properties for wgmma_touched
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 0 barriers
ptxas info    : Compile time = 8.956 ms
ptxas info    : Compiling entry function 'calls_scratch' for 'sm_90a'
ptxas info    : Function properties for calls_scratch
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 76 registers, used 0 barriers
ptxas info    : Compile time = 40.958 ms
ptxas info    : Compiling entry function 'local_array' for 'sm_90a'
ptxas info    : Function properties for local_array
    256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 256 bytes cumulative stack size
ptxas info    : Compile time = 21.498 ms
ptxas info    : Compiling entry function 'calls_mma' for 'sm_90a'
ptxas info    : Function properties for calls_mma
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 90 registers, used 0 barriers
ptxas info    : Function properties for scratch_sum
    400 bytes stack frame, 144 bytes spill stores, 144 bytes spill loads
ptxas info    : Function properties for mma_step
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
";

/// The PTX call sites behind [`CALLS`], in the forms LLVM's NVPTX backend prints.
const CALLS_PTX: &str = "
.func  (.param .b32 func_retval0) scratch_sum(.param .b32 i, .param .b64 src);
.func mma_step
.visible .entry calls_scratch(
	.param .u64 p
)
{
	{ // callseq 0, 0
	call.uni (retval0), scratch_sum, (param0, param1);
	}
	ret;
}
.func  (.param .b32 func_retval0) scratch_sum(
	.param .b32 i,
	.param .b64 src
)
{
	call.uni (retval0),
	scratch_sum,
	(param0, param1);
	call (retval0), scratch_sum, (param0, param1);
	ret;
}
.visible .entry calls_mma(.param .u64 p)
{
	call.uni mma_step, ();
	call %rd4, (param0), prototype_0;
}
.func mma_step()
{
	ret;
}
";

fn kernel<'a>(r: &'a PtxasReport, name: &str) -> &'a KernelReport {
    r.kernels.iter().find(|k| k.name == name).unwrap_or_else(|| panic!("no entry {name}"))
}

fn report(text: &str, ptx: &str) -> PtxasReport {
    let mut r = parse_report(text);
    r.attribute_calls(ptx);
    r
}

fn check(r: &PtxasReport, deny_spills: bool, allow: &[&str]) -> Result<(), String> {
    Checks { deny_spills, allow_stack_frame: allow.iter().map(|s| s.to_string()).collect() }.verdict(r)
}

#[test]
fn reads_entries_own_figures_not_their_callees() {
    let r = report(PLAIN, "");
    assert_eq!(r.kernels.len(), 2);
    let gemm = kernel(&r, "gemm");
    assert_eq!((gemm.registers, gemm.shared_bytes), (168, 2048));
    assert_eq!((gemm.stack_frame, gemm.spill_stores, gemm.spill_loads), (8, 4, 12));
    assert_eq!((kernel(&r, "saxpy").registers, kernel(&r, "saxpy").stack_frame), (10, 0));
    assert_eq!(r.functions.len(), 1, "the panic helper is a function, not an entry's figures");
    assert_eq!(r.notes, ["(C7508) Potential Performance Loss: setmaxnreg ignored"]);
}

#[test]
fn call_graph_reads_definitions_and_direct_calls_only() {
    let g = call_graph(CALLS_PTX);
    let callees = |f: &str| g[f].iter().copied().collect::<Vec<_>>();
    assert_eq!(callees("calls_scratch"), ["scratch_sum"]);
    assert_eq!(callees("calls_mma"), ["mma_step"], "the indirect call names no function");
    assert!(callees("scratch_sum").contains(&"scratch_sum"));
    assert!(callees("mma_step").is_empty());
}

#[test]
fn callees_are_attributed_to_the_entries_that_reach_them() {
    let r = report(CALLS, CALLS_PTX);
    let scratch = kernel(&r, "calls_scratch");
    assert_eq!(scratch.stack_frame, 0);
    assert_eq!(
        scratch.callees.iter().map(|c| (c.name.as_str(), c.stack_frame)).collect::<Vec<_>>(),
        [("scratch_sum", 400)]
    );
    assert_eq!(scratch.total_spills(), (144, 144));
    assert!(scratch.stack_unbounded);
    assert_eq!(scratch.local_bytes(), None);
    assert_eq!(kernel(&r, "local_array").local_bytes(), Some(256));
    assert!(kernel(&r, "wgmma_touched").callees.is_empty());
    assert_eq!(r.unattributed().count(), 0);
}

#[test]
fn wgmma_serialisation_is_read_and_attributed_through_calls() {
    let r = report(CALLS, CALLS_PTX);
    assert_eq!(
        kernel(&r, "wgmma_touched").wgmma_serialized,
        ["C7511: insufficient register resources for the wgmma pipeline"]
    );
    let via_callee = &kernel(&r, "calls_mma").wgmma_serialized;
    assert_eq!(via_callee.len(), 1);
    assert!(via_callee[0].starts_with("C7515: non wgmma instructions defining accumulator registers"));
    assert!(via_callee[0].ends_with("(in callee mma_step)"));
    assert!(kernel(&r, "local_array").wgmma_serialized.is_empty());
}

#[test]
fn a_stack_frame_is_refused_by_default_naming_entry_bytes_and_cause() {
    let r = report(CALLS, CALLS_PTX);
    let err = check(&r, false, &[]).unwrap_err();
    let line = err.lines().find(|l| l.contains("`local_array`")).expect("local_array refused");
    assert!(line.contains("256 B of local memory"), "{line}");
    assert!(line.contains("Rust array"), "{line}");
    assert!(line.contains("allow_stack_frame(\"local_array\")"), "{line}");
    let line = err.lines().find(|l| l.contains("`calls_scratch`")).expect("calls_scratch refused");
    assert!(line.contains("callee `scratch_sum` stack frame 400 B"), "{line}");
    assert!(!err.contains("wgmma"), "serialisation fails only with spills denied:\n{err}");
}

#[test]
fn allow_listed_entries_pass_unless_spills_are_denied() {
    let r = report(CALLS, CALLS_PTX);
    check(&r, false, &["local_array", "calls_scratch"]).unwrap();
    check(&r, false, &["*"]).unwrap();
    let err = check(&r, true, &["*"]).unwrap_err();
    assert!(err.contains("entry `calls_scratch` spills registers (144 B stores, 144 B loads"), "{err}");
    assert!(err.contains("entry `wgmma_touched`: ptxas serialized its wgmma (C7511"), "{err}");
    assert!(err.contains("entry `calls_mma`: ptxas serialized its wgmma (C7515"), "{err}");
    assert!(!err.contains("local_array"), "{err}");
}

#[test]
fn unattributed_functions_are_reported_by_name() {
    // Without the PTX no callee can be attributed: its frame fails on its own name.
    let r = report(CALLS, "");
    check(&r, false, &["*"]).expect("`*` allows functions too");
    let err = check(&r, false, &["local_array", "calls_scratch"]).unwrap_err();
    assert!(err.contains("function `scratch_sum`") && err.contains("400 B stack frame"), "{err}");
}

#[test]
fn plain_modules_pass_and_the_report_line_shows_stack_and_local_memory() {
    let r = report(PLAIN, "");
    check(&r, false, &["gemm"]).unwrap();
    assert!(check(&r, true, &["gemm"]).unwrap_err().contains("entry `gemm` spills registers (4 B stores, 12 B loads"));
    let line = kernel(&report(CALLS, CALLS_PTX), "calls_scratch").to_string();
    assert!(line.contains("76 regs") && line.contains("stack    0 B") && line.contains("local unbounded"), "{line}");
    assert!(line.contains("spills 144/144 B") && line.contains("[callee scratch_sum: stack 400 B"), "{line}");
}
