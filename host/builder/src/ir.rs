//! Textual LLVM IR surgery: find kernels and their `#[kernel]` attribute strings, and rewrite
//! kernel definitions with LLVM's `nvvm.*` attributes.
//!
//! Pure string functions, tested without a toolchain. The IR is `llvm-dis` output of LLVM 22.

use warpforge_logic::kernel_attrs::KernelAttrs;

use crate::BuildError;

/// Prefix of the static that `#[kernel]` emits next to each entry.
pub const ATTRS_PREFIX: &str = "__warpforge_kernel_attrs_";

/// Names of the kernels defined in `ir` (`define ptx_kernel ... @name(`), sorted.
pub fn kernel_names(ir: &str) -> Vec<String> {
    let mut names: Vec<String> = ir
        .lines()
        .filter(|l| l.starts_with("define ") && l.contains(" ptx_kernel "))
        .filter_map(|l| l.split_once('@').map(|(_, r)| r))
        .filter_map(|r| r.split_once('(').map(|(n, _)| n.trim_matches('"').to_string()))
        .collect();
    names.sort();
    names
}

/// The attribute strings in `ir`: `(kernel, spec)` for each `@__warpforge_kernel_attrs_<kernel>`.
pub fn attribute_strings(ir: &str) -> Result<Vec<(String, String)>, BuildError> {
    let mut out = Vec::new();
    for line in ir.lines() {
        let Some(rest) = line.strip_prefix('@').and_then(|l| l.strip_prefix(ATTRS_PREFIX)) else {
            continue;
        };
        let Some((kernel, def)) = rest.split_once(" = ") else { continue };
        let bytes = if let Some(start) = def.find("c\"") {
            let body = &def[start + 2..];
            let end = body
                .find('"')
                .ok_or_else(|| BuildError::Invalid(format!("unterminated attribute string for {kernel}")))?;
            unescape(&body[..end])
        } else if def.contains("zeroinitializer") || def.contains("[0 x i8]") {
            Vec::new()
        } else {
            return Err(BuildError::Invalid(format!("unexpected IR for the attributes of {kernel}: {line}")));
        };
        let spec = String::from_utf8(bytes)
            .map_err(|_| BuildError::Invalid(format!("attribute string of {kernel} is not UTF-8")))?;
        out.push((kernel.to_string(), spec));
    }
    Ok(out)
}

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 <= b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// LLVM function attributes for one kernel's launch attributes.
pub fn nvvm_function_attrs(attrs: &KernelAttrs) -> Vec<String> {
    let dim = |[x, y, z]: [u32; 3]| format!("{x},{y},{z}");
    let mut out = Vec::new();
    if let Some(d) = attrs.reqntid {
        out.push(format!("\"nvvm.reqntid\"=\"{}\"", dim(d)));
    }
    if let Some(d) = attrs.maxntid {
        out.push(format!("\"nvvm.maxntid\"=\"{}\"", dim(d)));
    }
    if let Some(n) = attrs.minctasm {
        out.push(format!("\"nvvm.minctasm\"=\"{n}\""));
    }
    if let Some(d) = attrs.cluster_dim {
        out.push(format!("\"nvvm.cluster_dim\"=\"{}\"", dim(d)));
    }
    if let Some(n) = attrs.maxnreg {
        out.push(format!("\"nvvm.maxnreg\"=\"{n}\""));
    }
    out
}

/// Rewrites the `define` line of `kernel` in `ir`: appends the function attributes and turns
/// each grid-constant pointer parameter into `ptr byval([128 x i8]) align 64 "nvvm.grid_constant"`.
pub fn patch_kernel(ir: &str, kernel: &str, attrs: &KernelAttrs) -> Result<String, BuildError> {
    let needle = format!("@{kernel}(");
    let mut found = false;
    let mut out = String::with_capacity(ir.len() + 256);
    for line in ir.split_inclusive('\n') {
        if line.starts_with("define ") && line.contains(" ptx_kernel ") && line.contains(&needle) {
            found = true;
            out.push_str(&patch_define_line(line, kernel, attrs)?);
        } else {
            out.push_str(line);
        }
    }
    if !found {
        return Err(BuildError::Invalid(format!("kernel {kernel} has attributes but no definition in the linked IR")));
    }
    Ok(out)
}

fn patch_define_line(line: &str, kernel: &str, attrs: &KernelAttrs) -> Result<String, BuildError> {
    let start = line.find(&format!("@{kernel}(")).expect("caller checked") + kernel.len() + 2;
    // Find the parameter list's closing parenthesis at depth 0.
    let mut depth = 1;
    let mut end = start;
    for (i, c) in line[start..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = start + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let params = split_params(&line[start..end]);
    let mut new_params = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        if attrs.is_grid_constant(i) {
            if !p.starts_with("ptr") {
                return Err(BuildError::Invalid(format!(
                    "#[grid_constant] parameter {i} of {kernel} is not a pointer in the IR: {p}"
                )));
            }
            let name = p.split_whitespace().last().filter(|n| n.starts_with('%')).unwrap_or("");
            new_params
                .push(format!("ptr byval([128 x i8]) align 64 \"nvvm.grid_constant\" {name}").trim_end().to_string());
        } else {
            new_params.push(p.clone());
        }
    }
    if params.len() < 64 && attrs.grid_constant_mask >> params.len() != 0 {
        return Err(BuildError::Invalid(format!("#[grid_constant] index out of range for {kernel}")));
    }
    let tail = line[end + 1..].trim_end();
    let Some(body_open) = tail.rfind('{') else {
        return Err(BuildError::Invalid(format!("definition of {kernel} does not end in `{{`")));
    };
    // Function string attributes must follow `unnamed_addr`/`#N`, right before the body.
    let mut suffix: Vec<String> = Vec::new();
    let before_body = tail[..body_open].trim();
    if !before_body.is_empty() {
        suffix.push(before_body.to_string());
    }
    suffix.extend(nvvm_function_attrs(attrs));
    let suffix = if suffix.is_empty() { String::new() } else { format!(" {}", suffix.join(" ")) };
    Ok(format!("{}{}){suffix} {{\n", &line[..start], new_params.join(", ")))
}

fn split_params(s: &str) -> Vec<String> {
    let mut params = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    let mut in_string = false;
    for c in s.chars() {
        match c {
            '"' => in_string = !in_string,
            '(' | '[' | '{' | '<' if !in_string => depth += 1,
            ')' | ']' | '}' | '>' if !in_string => depth -= 1,
            ',' if depth == 0 && !in_string => {
                params.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        params.push(current.trim().to_string());
    }
    params
}

/// Declares the dynamic shared-memory window at PTX module scope when the module uses it.
pub fn declare_dynamic_smem(ptx: &str, symbol: &str) -> String {
    let decl = format!(".extern .shared .align 1024 .b8 {symbol}[];");
    if !ptx.contains(symbol) || ptx.contains(&decl) {
        return ptx.to_string();
    }
    match ptx.find(".address_size 64\n") {
        Some(i) => {
            let at = i + ".address_size 64\n".len();
            format!("{}\n{decl}\n{}", &ptx[..at], &ptx[at..])
        }
        None => ptx.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = r#"@__warpforge_kernel_attrs_tma = local_unnamed_addr addrspace(1) constant [37 x i8] c"reqntid=128,1,1;grid_constant=0\3Bx=\22", align 1
@__warpforge_kernel_attrs_plain = local_unnamed_addr addrspace(1) constant [0 x i8] zeroinitializer, align 1

define ptx_kernel void @tma(ptr noalias noundef readonly align 64 captures(none) dereferenceable(128) %0, ptr noundef %out) unnamed_addr #0 {
start:
  ret void
}

define ptx_kernel void @plain(i64 noundef %n) unnamed_addr #1 {
  ret void
}
"#;

    #[test]
    fn finds_kernels_and_attribute_strings() {
        assert_eq!(kernel_names(IR), ["plain", "tma"]);
        let strings = attribute_strings(IR).unwrap();
        assert_eq!(strings[0], ("tma".to_string(), "reqntid=128,1,1;grid_constant=0;x=\"".to_string()));
        assert_eq!(strings[1], ("plain".to_string(), String::new()));
    }

    #[test]
    fn patches_grid_constant_and_launch_bounds() {
        let attrs = KernelAttrs::parse("reqntid=128,1,1;cluster_dim=2,1,1;grid_constant=0").unwrap();
        let out = patch_kernel(IR, "tma", &attrs).unwrap();
        let line = out.lines().find(|l| l.contains("@tma(")).unwrap();
        assert_eq!(
            line,
            "define ptx_kernel void @tma(ptr byval([128 x i8]) align 64 \"nvvm.grid_constant\" %0, ptr noundef %out) \
             unnamed_addr #0 \"nvvm.reqntid\"=\"128,1,1\" \"nvvm.cluster_dim\"=\"2,1,1\" {"
        );
        // Other definitions are untouched.
        assert!(out.contains("define ptx_kernel void @plain(i64 noundef %n) unnamed_addr #1 {"));
    }

    #[test]
    fn rejects_grid_constant_on_a_non_pointer() {
        let attrs = KernelAttrs::parse("grid_constant=0").unwrap();
        assert!(patch_kernel(IR, "plain", &attrs).is_err());
    }

    #[test]
    fn declares_dynamic_smem_once_and_only_when_used() {
        let ptx =
            ".version 8.6\n.target sm_90a\n.address_size 64\n\n.visible .entry k() { mov.u32 %r1, warpforge_dsmem; }\n";
        let once = declare_dynamic_smem(ptx, "warpforge_dsmem");
        assert!(once.contains(".address_size 64\n\n.extern .shared .align 1024 .b8 warpforge_dsmem[];\n"));
        assert_eq!(declare_dynamic_smem(&once, "warpforge_dsmem"), once);
        let unused = ".address_size 64\n.visible .entry k() { ret; }\n";
        assert_eq!(declare_dynamic_smem(unused, "warpforge_dsmem"), unused);
    }
}
