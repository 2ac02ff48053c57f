//! Launches the author's `histogram_u8` kernel with warpforge's host runtime and checks it
//! against a CPU histogram. `cargo run --release` from this folder.

use warpforge::host::module::Arch;
use warpforge::host::{KernelArgs, LaunchConfig, Module, PtxSet};
use warpforge::{Device, Error};

const PTX: PtxSet = PtxSet::new()
    .with(Arch::Sm90a, include_str!(env!("HISTOGRAM_PTX_SM_90A")))
    .with(Arch::Sm100a, include_str!(env!("HISTOGRAM_PTX_SM_100A")));

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("histogram kernel built for sm_90a and sm_100a; no GPU to run it on ({e})");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let module = Module::load(&device, &PTX)?;
    let kernel = module.kernel("histogram_u8")?;
    let stream = device.stream();

    let n = 10_000_019usize;
    let bytes: Vec<u8> = (0..n).map(|i| ((i as u64 * 2_654_435_761) >> 13) as u8 ^ (i % 7) as u8).collect();
    let mut want = vec![0u32; 256];
    for &b in &bytes {
        want[b as usize] += 1;
    }
    let d_bytes = stream.clone_htod(&bytes)?;
    let mut d_hist = stream.alloc_zeros::<u32>(256)?;
    let plan = kernel.plan_persistent(256, 0, None, n.div_ceil(256) as u64)?;
    let mut args = KernelArgs::new();
    args.push(n as u64).push_buffer(&d_bytes, stream).push_buffer_mut(&mut d_hist, stream);
    // SAFETY: (n, bytes, hist) as the kernel declares; `d_bytes` holds n bytes and `d_hist`
    // 256 zeroed counters that nothing else touches during the launch.
    unsafe { kernel.launch(stream, &LaunchConfig::linear(plan.blocks, 256), &mut args)? };
    let got = stream.clone_dtoh(&d_hist)?;
    let ok = got == want;
    println!(
        "histogram_u8 on {} ({} blocks of 256): {n} bytes, {}",
        device.attributes().name,
        plan.blocks,
        if ok { "matches the CPU histogram" } else { "MISMATCH" }
    );
    if ok { Ok(()) } else { Err("histogram mismatch".into()) }
}
