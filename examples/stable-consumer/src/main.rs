//! Proof that a Rust service can use warpforge on stable Rust: this crate is built by
//! `.ci/run` with `cargo +stable`, which embeds the shipped PTX (no nightly, no CUDA toolkit).

fn main() {
    println!("warpforge PTX origin: {}", warpforge::ptx::ORIGIN);
    println!(
        "sm_90a module: {} bytes, sm_100a module: {} bytes",
        warpforge::ptx::SM_90A.len(),
        warpforge::ptx::SM_100A.len()
    );
    match warpforge::Device::new(0).and_then(|d| warpforge::Warpforge::new(&d).map(|_| d)) {
        Ok(d) => println!("kernels loaded on {}", d.attributes().name),
        Err(e) => println!("no GPU here: {e}"),
    }
}
