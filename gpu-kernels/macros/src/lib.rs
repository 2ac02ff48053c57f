//! `#[kernel]`: turns an `unsafe fn` of a `no_std` device crate into a PTX entry point.
//!
//! rustc has no syntax for launch bounds, cluster shapes or grid-constant parameters, and its
//! NVPTX backend never emits them. The attribute therefore records them *inside the compiled
//! crate*: next to the entry it emits an exported byte-string static named
//! `__warpforge_kernel_attrs_<kernel>`. The warpforge builder reads that string from the linked
//! LLVM IR, turns it into LLVM's `nvvm.*` attributes before `llc`, and drops the static. The
//! string grammar is [`warpforge_logic::kernel_attrs`](../warpforge_logic/kernel_attrs/index.html),
//! shared with the builder, so neither side guesses the other's format.
//!
//! ```ignore
//! #[kernel(threads = 128, min_blocks_per_sm = 1, cluster = (2, 1, 1))]
//! pub unsafe fn tma_copy(#[grid_constant] map: &TensorMap, out: *mut u32) { ... }
//! ```
//!
//! The kernel must be `unsafe` (launching it is the unsafe boundary: the host promises the
//! pointer arguments), take only `Copy` parameters, and return nothing.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Error, Expr, ExprLit, ExprTuple, FnArg, ItemFn, Lit, MetaNameValue, ReturnType, Token};

/// Launch attributes accepted by `#[kernel(...)]`.
#[derive(Default)]
struct KernelAttrs {
    /// `threads = N` or `(x, y, z)`: the block must have exactly this shape (`.reqntid`).
    threads: Option<[u32; 3]>,
    /// `max_threads = N`: upper bound on the block size (`.maxntid`).
    max_threads: Option<[u32; 3]>,
    /// `min_blocks_per_sm = N` (`.minnctapersm`); with a thread bound it makes `setmaxnreg` legal.
    min_blocks_per_sm: Option<u32>,
    /// `cluster = (x, y, z)`: compile-time cluster shape (`.reqnctapercluster`).
    cluster: Option<[u32; 3]>,
    /// `max_registers = N` (`.maxnreg`).
    max_registers: Option<u32>,
}

impl Parse for KernelAttrs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attrs = KernelAttrs::default();
        let items = Punctuated::<MetaNameValue, Token![,]>::parse_terminated(input)?;
        for item in items {
            let key = item.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
            match key.as_str() {
                "threads" => attrs.threads = Some(dim3(&item.value)?),
                "max_threads" => attrs.max_threads = Some(dim3(&item.value)?),
                "min_blocks_per_sm" => attrs.min_blocks_per_sm = Some(int(&item.value)?),
                "cluster" => attrs.cluster = Some(dim3(&item.value)?),
                "max_registers" => attrs.max_registers = Some(int(&item.value)?),
                _ => {
                    return Err(Error::new_spanned(
                        &item.path,
                        "unknown kernel attribute; expected one of: threads, max_threads, \
                         min_blocks_per_sm, cluster, max_registers",
                    ));
                }
            }
        }
        if attrs.threads.is_some() && attrs.max_threads.is_some() {
            return Err(input.error("give either `threads` (exact) or `max_threads` (bound), not both"));
        }
        Ok(attrs)
    }
}

fn int(expr: &Expr) -> syn::Result<u32> {
    match expr {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => {
            let v: u32 = i.base10_parse()?;
            if v == 0 {
                return Err(Error::new_spanned(expr, "must be at least 1"));
            }
            Ok(v)
        }
        _ => Err(Error::new_spanned(expr, "expected an integer literal")),
    }
}

fn dim3(expr: &Expr) -> syn::Result<[u32; 3]> {
    match expr {
        Expr::Tuple(ExprTuple { elems, .. }) => {
            let v: Vec<u32> = elems.iter().map(int).collect::<syn::Result<_>>()?;
            match v.as_slice() {
                [x] => Ok([*x, 1, 1]),
                [x, y] => Ok([*x, *y, 1]),
                [x, y, z] => Ok([*x, *y, *z]),
                _ => Err(Error::new_spanned(expr, "expected (x), (x, y) or (x, y, z)")),
            }
        }
        _ => Ok([int(expr)?, 1, 1]),
    }
}

/// Marks an `unsafe fn` as a PTX kernel entry; see the crate docs.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attrs = syn::parse_macro_input!(attr as KernelAttrs);
    let func = syn::parse_macro_input!(item as ItemFn);
    match expand(attrs, func) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(attrs: KernelAttrs, mut func: ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let sig = &func.sig;
    if sig.unsafety.is_none() {
        return Err(Error::new_spanned(
            sig.fn_token,
            "a #[kernel] must be `unsafe fn`: its launch is where the host vouches for the pointers",
        ));
    }
    if !matches!(sig.output, ReturnType::Default) {
        return Err(Error::new_spanned(&sig.output, "a #[kernel] returns nothing"));
    }
    if !sig.generics.params.is_empty() || sig.asyncness.is_some() || sig.abi.is_some() {
        return Err(Error::new_spanned(
            sig,
            "a #[kernel] is a plain non-generic, non-async fn without an explicit ABI",
        ));
    }

    let mut spec: Vec<String> = Vec::new();
    if let Some([x, y, z]) = attrs.threads {
        spec.push(format!("reqntid={x},{y},{z}"));
    }
    if let Some([x, y, z]) = attrs.max_threads {
        spec.push(format!("maxntid={x},{y},{z}"));
    }
    if let Some(n) = attrs.min_blocks_per_sm {
        spec.push(format!("minctasm={n}"));
    }
    if let Some([x, y, z]) = attrs.cluster {
        spec.push(format!("cluster_dim={x},{y},{z}"));
    }
    if let Some(n) = attrs.max_registers {
        spec.push(format!("maxnreg={n}"));
    }

    let mut param_types = Vec::new();
    for (index, arg) in func.sig.inputs.iter_mut().enumerate() {
        let FnArg::Typed(pat) = arg else {
            return Err(Error::new_spanned(arg, "a #[kernel] has no `self`"));
        };
        let before = pat.attrs.len();
        pat.attrs.retain(|a| !a.path().is_ident("grid_constant"));
        if pat.attrs.len() != before {
            if !matches!(*pat.ty, syn::Type::Reference(_) | syn::Type::Ptr(_)) {
                return Err(Error::new_spanned(
                    &pat.ty,
                    "#[grid_constant] applies to `&TensorMap` / `*const TensorMap` parameters",
                ));
            }
            spec.push(format!("grid_constant={index}"));
        }
        param_types.push((*pat.ty).clone());
    }

    let name = func.sig.ident.clone();
    let attrs_static = format_ident!("__warpforge_kernel_attrs_{}", name);
    let spec_bytes = syn::LitByteStr::new(spec.join(";").as_bytes(), Span::call_site());
    let spec_len = spec.join(";").len();
    let check_copy = format_ident!("__warpforge_params_are_copy_{}", name);
    let vis = &func.vis;
    let fn_attrs = &func.attrs;
    let sig_inputs = &func.sig.inputs;
    let body = &func.block;

    Ok(quote! {
        #(#fn_attrs)*
        #[unsafe(no_mangle)]
        #vis unsafe extern "ptx-kernel" fn #name(#sig_inputs) #body

        /// Launch attributes of the kernel above, read and removed by the warpforge builder.
        #[unsafe(no_mangle)]
        pub static #attrs_static: [u8; #spec_len] = *#spec_bytes;

        #[allow(dead_code, non_snake_case)]
        fn #check_copy() {
            fn require_copy<T: ::core::marker::Copy>() {}
            #( require_copy::<#param_types>(); )*
        }
    })
}
