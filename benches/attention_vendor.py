#!/usr/bin/env python3
"""Vendor side of the attention bench: torch's scaled_dot_product_attention on the H200, with
each backend forced (cuDNN, FlashAttention), on the shapes warpforge's attention bench times.

cudarc has no cuDNN attention binding, so the vendor figures come from this script (DESIGN.md:
"cuDNN/torch through a script where cudarc has no binding"). Run it on the same GPU, in the same
session, as the warpforge side, and compare the TFLOP/s column by shape name.

Layouts match `Warpforge::attention`: Q, K, V, O as [batch, seq, heads, head_dim] bf16/f16
(torch's SDPA takes [batch, heads, seq, head_dim], so the tensors are made in our layout and
transposed as views, which is how FlashAttention's own layout reaches SDPA). Causal masks are
bottom-right aligned in warpforge; for seq_q == seq_k (every causal shape here) that is the same
as SDPA's `is_causal=True` (top-left).

FLOPs counted: 4 · batch · heads_q · seq_q · seq_k · head_dim (two GEMMs), halved when causal.

Usage: python3 benches/attention_vendor.py [--dtype bf16|f16] [--iters N] [--filter SUBSTR]
"""

import argparse
import sys

# (name, batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal)
SHAPES = [
    ("prefill_d128_s1k", 16, 16, 16, 1024, 1024, 128, False),
    ("prefill_d128_s2k", 8, 16, 16, 2048, 2048, 128, False),
    ("prefill_d128_s4k", 4, 16, 16, 4096, 4096, 128, False),
    ("prefill_d128_s8k", 2, 16, 16, 8192, 8192, 128, False),
    ("prefill_d128_s16k", 1, 16, 16, 16384, 16384, 128, False),
    ("prefill_d128_s2k_causal", 8, 16, 16, 2048, 2048, 128, True),
    ("prefill_d128_s8k_causal", 2, 16, 16, 8192, 8192, 128, True),
    ("prefill_d64_s2k", 8, 32, 32, 2048, 2048, 64, False),
    ("prefill_d64_s8k", 2, 32, 32, 8192, 8192, 64, False),
    ("prefill_d64_s8k_causal", 2, 32, 32, 8192, 8192, 64, True),
    # Llama-3-8B-like GQA (32 query heads, 8 KV heads).
    ("llama3_8b_gqa_s4k", 4, 32, 8, 4096, 4096, 128, False),
    ("llama3_8b_gqa_s4k_causal", 4, 32, 8, 4096, 4096, 128, True),
    # Llama-3-70B-like GQA (64 query heads, 8 KV heads) on one sequence.
    ("llama3_70b_gqa_s8k_causal", 1, 64, 8, 8192, 8192, 128, True),
    # Chunked prefill against a long cache (seq_q < seq_k).
    ("chunk_512_of_8k", 4, 32, 8, 512, 8192, 128, False),
]


def flops(batch, heads_q, seq_q, seq_k, head_dim, causal):
    f = 4.0 * batch * heads_q * seq_q * seq_k * head_dim
    return f / 2 if causal else f


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--filter", default="")
    args = parser.parse_args()

    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit(f"needs torch with CUDA: {e}")
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    dev = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {args.dtype}, {args.iters} iterations")
    print(f"{'shape':32} {'backend':10} {'ms':>9} {'TFLOP/s':>9}")

    backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]
    for name, batch, hq, hkv, sq, sk, d, causal in SHAPES:
        if args.filter not in name:
            continue
        q = torch.randn(batch, sq, hq, d, device=dev, dtype=dtype)
        k = torch.randn(batch, sk, hkv, d, device=dev, dtype=dtype)
        v = torch.randn(batch, sk, hkv, d, device=dev, dtype=dtype)
        # [b, s, h, d] -> [b, h, s, d] views; GQA by enable_gqa (torch >= 2.5).
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        for backend_name, backend in backends:
            try:
                with sdpa_kernel([backend]):
                    def run():
                        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=hq != hkv)

                    run()
                    torch.cuda.synchronize()
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(args.iters):
                        run()
                    stop.record()
                    torch.cuda.synchronize()
                    ms = start.elapsed_time(stop) / args.iters
            except RuntimeError as e:
                print(f"{name:32} {backend_name:10} {'n/a':>9} {'n/a':>9}  ({str(e).splitlines()[0][:60]})")
                continue
            tflops = flops(batch, hq, sq, sk, d, causal) / ms / 1e9
            print(f"{name:32} {backend_name:10} {ms:9.3f} {tflops:9.1f}")


if __name__ == "__main__":
    main()
