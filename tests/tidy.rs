//! Repository invariants that review would otherwise have to catch. They read the source tree;
//! where it is absent (the GPU machine runs a copied binary) each reports itself skipped.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | ".gpu" | "generated") {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Every hand-written and generated Rust file of the repository as (relative path, text), or
/// `None` (reported as a skip) without the source tree.
fn sources() -> Option<Vec<(String, String)>> {
    let root = crate::common::source_tree()?;
    let mut files = Vec::new();
    for dir in ["src", "host", "gpu-kernels", "tests", "benches", "examples", "build.rs"] {
        let p = root.join(dir);
        if p.is_file() {
            files.push(p);
        } else if p.is_dir() {
            rust_files(&p, &mut files);
        }
    }
    let texts = files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            (rel, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    Some(texts)
}

fn is_generated(text: &str) -> bool {
    text.starts_with("// @generated")
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let Some(sources) = sources() else { return };
    let missing: Vec<String> = sources
        .into_iter()
        .filter(|(_, text)| !is_generated(text) && !text.trim_start().starts_with("//!"))
        .map(|(path, _)| path)
        .collect();
    assert!(missing.is_empty(), "files without a `//!` doc: {missing:?}");
}

#[test]
fn inline_asm_lives_only_in_the_raw_ptx_layer() {
    let Some(sources) = sources() else { return };
    let offenders: Vec<String> = sources
        .into_iter()
        // The tidy test names the macro, and the L0 generator writes it into generated L0 files.
        .filter(|(path, _)| path != "tests/tidy.rs" && !path.starts_with("gpu-kernels/codegen/"))
        .filter(|(path, text)| !path.starts_with("gpu-kernels/dsl/src/ptx/") && text.contains(concat!("asm", "!(")))
        .map(|(path, _)| path)
        .collect();
    assert!(offenders.is_empty(), "asm! outside gpu-kernels/dsl/src/ptx/: {offenders:?}");
}

#[test]
fn kernels_use_the_typed_layers_not_raw_ptx() {
    let Some(sources) = sources() else { return };
    let offenders: Vec<String> = sources
        .into_iter()
        .filter(|(path, text)| {
            (path.starts_with("gpu-kernels/kernels/") || path.starts_with("gpu-kernels/checks/"))
                && text.contains("warpforge_dsl::ptx")
        })
        .map(|(path, _)| path)
        .collect();
    assert!(offenders.is_empty(), "kernel files importing the raw layer: {offenders:?}");
}

#[test]
fn hand_written_files_fit_in_a_head() {
    let Some(sources) = sources() else { return };
    let too_long: Vec<String> = sources
        .into_iter()
        .filter(|(_, text)| !is_generated(text))
        .filter(|(path, text)| {
            let device = path.starts_with("gpu-kernels/kernels/src/") || path.starts_with("gpu-kernels/checks/src/");
            let limit = if device { 450 } else { 1000 };
            text.lines().count() > limit
        })
        .map(|(path, text)| format!("{path} ({} lines)", text.lines().count()))
        .collect();
    assert!(too_long.is_empty(), "split these by concept: {too_long:?}");
}

#[test]
fn no_placeholders_in_shipped_code() {
    let Some(sources) = sources() else { return };
    let offenders: Vec<String> = sources
        .into_iter()
        .filter(|(_, text)| text.contains(concat!("todo", "!(")) || text.contains(concat!("unimplemented", "!(")))
        .map(|(path, _)| path)
        .collect();
    assert!(offenders.is_empty(), "todo!/unimplemented! in: {offenders:?}");
}

#[test]
fn every_unsafe_block_says_why() {
    let Some(sources) = sources() else { return };
    let mut missing = Vec::new();
    for (path, text) in sources {
        if is_generated(&text) || path.starts_with("tests/") {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let opens_block = code.contains("unsafe {") && !code.contains("unsafe fn");
            if !opens_block {
                continue;
            }
            // The justification sits on the lines just above (or on a wrapped statement start).
            let window = &lines[i.saturating_sub(8)..i];
            if !window.iter().any(|l| l.contains("SAFETY:")) {
                missing.push(format!("{path}:{}", i + 1));
            }
        }
    }
    assert!(missing.is_empty(), "unsafe blocks without a `// SAFETY:` line just above: {missing:?}");
}
