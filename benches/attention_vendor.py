#!/usr/bin/env python3
"""Attention forward, warpforge against cuDNN and FlashAttention-2, in one process on the same
inputs: torch's scaled_dot_product_attention with each backend forced, and warpforge's
`Warpforge::attention` called on the same tensors through `examples/python-ffi` (a C ABI cdylib;
cudarc has no cuDNN attention binding, so the comparison runs where the vendor kernels are).

Method, per shape: Q, K, V uniform(-1, 1) (never zero) in warpforge's layout [batch, seq, heads,
head_dim]; SDPA gets [batch, heads, seq, head_dim] views of the same tensors (FlashAttention's own
layout reaches SDPA this way). Each side is warmed up, then ROUNDS rounds of about 20 ms of calls
each are timed with CUDA events on the default stream (where warpforge launches too), the order
of the sides rotating every round; the median round is reported. After the timed rounds every
side's output is checked against a float64 reference on sampled (sequence, head) pairs and
query rows, with a tolerance per dtype; a side that fails is marked and its ratio left out.

Causal masks are bottom-right aligned in warpforge; SDPA's is_causal is top-left, so causal rows
here have seq_q == seq_k (the same mask). FLOPs: 4 · batch · heads_q · seq_q · seq_k · head_dim,
halved when causal.

Usage (GPU machine, after bash .ci/gpu-bundle):
  python3 benches/attention_vendor.py --warpforge .gpu/libwarpforge_python_ffi.so \
      [--candidate OTHER.so ...] [--dtype bf16|f16] [--rounds N] [--filter SUBSTR] [--quick]
      [--set sweep|offbench] [--out DIR]
writes DIR/attention_sweep.csv and DIR/attention_sweep.svg (attention_offbench.* for --set offbench;
DIR defaults to $OUT or .).
Without --warpforge only the vendor columns are timed. Each --candidate adds another warpforge
build (a change under test) as a side `candN`, timed in the same rotation on the same inputs and
verified the same way, with its ratio to the first (`candN/ours`).
"""

import argparse
import ctypes
import math
import os
import statistics
import sys

ROUNDS = 6
ROUND_SECONDS = 0.02
TOKENS = 16384  # batch · seq of the sweep rows
HIDDEN = 2048  # heads · head_dim of the sweep rows


def shapes():
    """(name, batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal)."""
    rows = []
    for d in (64, 128, 256):
        for s in (512, 1024, 2048, 4096, 8192, 16384):
            for causal in (False, True):
                h = HIDDEN // d
                rows.append((f"d{d}_s{s}{'_causal' if causal else ''}", TOKENS // s, h, h, s, s, d, causal))
    rows += [
        # Llama-3-8B-like GQA (32 query heads, 8 KV heads) and 70B-like (64/8).
        ("gqa8b_s4k", 4, 32, 8, 4096, 4096, 128, False),
        ("gqa8b_s4k_causal", 4, 32, 8, 4096, 4096, 128, True),
        ("gqa70b_s8k_causal", 1, 64, 8, 8192, 8192, 128, True),
        # Prefill of a 512-token chunk against an 8k cache (decode-prefill), GQA.
        ("gqa_chunk512_of_8k", 4, 32, 8, 512, 8192, 128, False),
    ]
    return rows


def offbench_shapes():
    """`--set offbench`: problems outside the sweep's grid, as a service would send them."""
    return [
        # Ragged lengths (not multiples of any tile), non-causal and causal.
        ("d128_s1000_b16", 16, 16, 16, 1000, 1000, 128, False),
        ("d128_s3000_b5_causal", 5, 16, 16, 3000, 3000, 128, True),
        ("d64_s777_b20", 20, 32, 32, 777, 777, 64, False),
        ("d64_s2500_b6_causal", 6, 32, 32, 2500, 2500, 64, True),
        ("d256_s1500_b8", 8, 8, 8, 1500, 1500, 256, False),
        # One long sequence with few heads: few tiles per SM.
        ("d128_b1_h8_s8192", 1, 8, 8, 8192, 8192, 128, False),
        ("d128_b1_h8_s8192_causal", 1, 8, 8, 8192, 8192, 128, True),
        ("d64_b1_h16_s4096_causal", 1, 16, 16, 4096, 4096, 64, True),
        # GQA 4 and MQA at ragged lengths.
        ("gqa4_d128_s1537", 3, 32, 8, 1537, 1537, 128, False),
        ("mqa_d128_s2049_causal", 2, 16, 1, 2049, 2049, 128, True),
        # A short chunk against a long cache (S_q < S_k, non-causal) and a decode-sized query.
        ("chunk64_of_4k_gqa8", 8, 32, 4, 64, 4096, 128, False),
        ("chunk300_of_6000", 2, 16, 16, 300, 6000, 128, False),
        ("decode_q1_k8192_gqa8", 16, 32, 4, 1, 8192, 128, False),
        # Decode steps: MHA and GQA, short and long caches, d64, a batch of 4 speculative tokens.
        ("decode_q1_k4096_mha_b32", 32, 32, 32, 1, 4096, 128, False),
        ("decode_q1_k2048_gqa4_b64", 64, 32, 8, 1, 2048, 128, False),
        ("decode_q1_k32k_gqa8_b2", 2, 64, 8, 1, 32768, 128, False),
        ("decode_q1_k1024_d64_b128", 128, 16, 16, 1, 1024, 64, False),
        ("decode_q4_k4096_gqa4_b16", 16, 32, 8, 4, 4096, 128, False),
        # A small prompt batch: launch and tail costs.
        ("d128_s256_b4", 4, 16, 16, 256, 256, 128, False),
        ("d128_s128_b64_causal", 64, 16, 16, 128, 128, 128, True),
    ]


def flops(batch, heads_q, seq_q, seq_k, head_dim, causal):
    f = 4.0 * batch * heads_q * seq_q * seq_k * head_dim
    return f / 2 if causal else f


class FfiAttention(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("q", "k", "v", "o", "lse", "batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim")] + [
        ("causal", ctypes.c_uint32),
        ("dtype", ctypes.c_uint32),
        ("softmax_scale", ctypes.c_float),
        # (batch, seq, head) element strides of Q, K, V, O; all zero (the default): packed.
        ("strides", ctypes.c_uint64 * 12),
    ]


def load_warpforge(path):
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.warpforge_attention.argtypes = [ctypes.POINTER(FfiAttention)]
    lib.warpforge_attention.restype = ctypes.c_int32
    lib.warpforge_last_error.restype = ctypes.c_char_p
    return lib


def reference_rows(torch, q, k, v, b, h, group, rows, causal):
    """float64 O rows `rows` of sequence b, query head h (bottom-right causal mask)."""
    sq, sk, d = q.shape[1], k.shape[1], q.shape[3]
    qs = q[b, rows, h, :].double()
    ks = k[b, :, h // group, :].double()
    vs = v[b, :, h // group, :].double()
    s = (qs @ ks.T) / math.sqrt(d)
    if causal:
        keys = torch.arange(sk, device=q.device)[None, :]
        limit = (rows + (sk - sq))[:, None]
        s = s.masked_fill(keys > limit, float("-inf"))
    return torch.softmax(s, dim=-1) @ vs


def verify(torch, out, q, k, v, group, causal, tol, seed):
    """Largest error over sampled (sequence, head, row)s of `out` ([b, s, h, d]) against float64,
    and whether it is within tol (absolute, on outputs bounded by 1)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    batch, sq, hq = q.shape[0], q.shape[1], q.shape[2]
    worst = 0.0
    for _ in range(3):
        b = int(torch.randint(batch, (1,), generator=gen))
        h = int(torch.randint(hq, (1,), generator=gen))
        rows = torch.unique(torch.cat([torch.tensor([0, sq - 1]), torch.randint(sq, (30,), generator=gen)])).to(q.device)
        want = reference_rows(torch, q, k, v, b, h, group, rows, causal)
        got = out[b, rows, h, :].double()
        err = (got - want).abs().max().item()
        worst = max(worst, err if math.isfinite(err) else float("inf"))
    return worst, worst <= tol


def time_rounds(torch, sides, rounds):
    """Median seconds per call for each side: warm-up, calls per round sized to ROUND_SECONDS,
    rounds with the order of the sides rotating."""
    reps = {}
    for name, call in sides:
        call()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            call()
        stop.record()
        torch.cuda.synchronize()
        per = start.elapsed_time(stop) / 3e3
        reps[name] = max(1, min(1000, int(ROUND_SECONDS / max(per, 1e-6))))
    times = {name: [] for name, _ in sides}
    for r in range(rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for name, call in order:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps[name]):
                call()
            stop.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(stop) / 1e3 / reps[name])
    return {name: statistics.median(t) for name, t in times.items()}


def write_svg(path, rows, sides):
    """TFLOP/s per shape, one marker series per side."""
    width, height, left, bottom, top = 60 + 22 * len(rows), 420, 50, 110, 20
    peak = max([r[s] for r in rows for s in sides if r.get(s)] + [1.0])
    colours = {"warpforge": "#d62728", "cand1": "#ff7f0e", "cand2": "#9467bd", "cand3": "#8c564b", "cudnn": "#1f77b4", "fa2": "#2ca02c"}
    y = lambda v: top + (height - top - bottom) * (1 - v / peak)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="10">']
    for tick in range(0, int(peak) + 1, 100):
        out.append(f'<line x1="{left}" x2="{width}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 4}" y="{y(tick) + 3:.1f}" text-anchor="end">{tick}</text>')
    out.append(f'<text x="12" y="{top + 120}" transform="rotate(-90 12 {top + 120})">TFLOP/s</text>')
    for i, r in enumerate(rows):
        x = left + 12 + 22 * i
        for s in sides:
            if r.get(s):
                out.append(f'<circle cx="{x}" cy="{y(r[s]):.1f}" r="3.5" fill="{colours[s]}"/>')
        out.append(f'<text x="{x}" y="{height - bottom + 8}" transform="rotate(60 {x} {height - bottom + 8})">{r["shape"]}</text>')
    for j, s in enumerate(sides):
        out.append(f'<circle cx="{left + 10 + 110 * j}" cy="{height - 10}" r="4" fill="{colours[s]}"/>')
        out.append(f'<text x="{left + 18 + 110 * j}" y="{height - 6}">{s}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warpforge", help="path to libwarpforge_python_ffi.so")
    parser.add_argument("--candidate", action="append", default=[], help="another build's libwarpforge_python_ffi.so, timed beside the first (repeatable, up to 3)")
    parser.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--filter", default="")
    parser.add_argument("--quick", action="store_true", help="d128 rows only")
    parser.add_argument("--set", choices=["sweep", "offbench"], default="sweep", help="the sweep's grid, or problems outside it")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"needs torch with CUDA: {e}")
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    tol = 1.5e-2 if args.dtype == "bf16" else 4e-3
    dev = torch.device("cuda")
    torch.cuda.init()
    if args.candidate and not args.warpforge:
        sys.exit("--candidate needs --warpforge (the build it is compared with)")
    if len(args.candidate) > 3:
        sys.exit("at most three --candidate builds")
    paths = [("warpforge", args.warpforge)] + [(f"cand{i + 1}", path) for i, path in enumerate(args.candidate)]
    builds = {side: load_warpforge(path) for side, path in paths if path}
    candidates = [side for side in builds if side != "warpforge"]
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {args.dtype}, {args.rounds} rounds")
    sides_named = list(builds) + ["cudnn", "fa2"]
    print(f"{'shape':22} " + " ".join(f"{s + ' TF/s':>14}" for s in sides_named) + f" {'vs cuDNN':>9} {'vs FA2':>7}"
          + "".join(f" {c + '/ours':>10}" for c in candidates) + f"  max err ({', '.join(sides_named)})")

    results = []
    for seed, (name, batch, hq, hkv, sq, sk, d, causal) in enumerate(shapes() if args.set == "sweep" else offbench_shapes()):
        if args.filter not in name or (args.quick and d != 128):
            continue
        gen = torch.Generator(device=dev).manual_seed(seed)
        q, k, v = (torch.rand(batch, s, h, d, device=dev, dtype=dtype, generator=gen) * 2 - 1 for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        outs = {}
        sides = []
        for side, lib in builds.items():
            o = torch.full_like(q, float("nan"))
            problem = FfiAttention(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), 0, batch, hq, hkv, sq, sk, d, int(causal), 0 if args.dtype == "bf16" else 1, 0.0)
            outs[side] = o

            def ours(problem=problem, lib=lib):
                if lib.warpforge_attention(ctypes.byref(problem)) != 0:
                    raise RuntimeError(lib.warpforge_last_error().decode())

            sides.append((side, ours))
        for side, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            def vendor(backend=backend, side=side):
                with sdpa_kernel([backend]):
                    outs[side] = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=hq != hkv).transpose(1, 2)

            sides.append((side, vendor))
        runnable, notes = [], {}
        for side, call in sides:
            try:
                call()
                torch.cuda.synchronize()
                runnable.append((side, call))
            except RuntimeError as e:
                notes[side] = str(e).splitlines()[0][:70]
        seconds = time_rounds(torch, runnable, args.rounds) if runnable else {}
        row = {"shape": name, "batch": batch, "heads_q": hq, "heads_kv": hkv, "seq_q": sq, "seq_k": sk, "head_dim": d, "causal": int(causal)}
        errs = {}
        for side, _ in runnable:
            err, ok = verify(torch, outs[side], q, k, v, hq // hkv, causal, tol, seed)
            errs[side] = err
            row[f"{side}_ms"] = seconds[side] * 1e3
            row[f"{side}_ok"] = int(ok)
            if ok:
                row[side] = flops(batch, hq, sq, sk, d, causal) / seconds[side] / 1e12
        ratio = lambda a, b: row[a] / row[b] if row.get(a) and row.get(b) else None
        row["vs_cudnn"], row["vs_fa2"] = ratio("warpforge", "cudnn"), ratio("warpforge", "fa2")
        for c in candidates:
            row[f"{c}_vs_ours"] = ratio(c, "warpforge")
        results.append(row)
        cell = lambda s: f"{row[s]:14.1f}" if row.get(s) else f"{('FAILED' if s in errs else 'n/a'):>14}"
        fmt = lambda r, w: f"{r:{w}.3f}" if r else f"{'-':>{w}}"
        err_text = ", ".join(f"{errs[s]:.1e}" if s in errs else "-" for s in sides_named)
        cand = "".join(f" {fmt(row[f'{c}_vs_ours'], 10)}" for c in candidates)
        print(f"{name:22} " + " ".join(cell(s) for s in sides_named) + f" {fmt(row['vs_cudnn'], 9)} {fmt(row['vs_fa2'], 7)}{cand}  {err_text}"
              + "".join(f"  [{s}: {m}]" for s, m in notes.items()), flush=True)
        del q, k, v, qt, kt, vt, outs

    summaries = [("vs_cudnn", "warpforge / cuDNN"), ("vs_fa2", "warpforge / FA2")] + [(f"{c}_vs_ours", f"{c} / warpforge") for c in candidates]
    for key, label in summaries:
        ratios = [r[key] for r in results if r.get(key)]
        if ratios:
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"# {label}: geomean {geo:.3f} over {len(ratios)} rows, min {min(ratios):.3f}, max {max(ratios):.3f}")
    os.makedirs(args.out, exist_ok=True)
    columns = ["shape", "batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "causal"]
    for s in sides_named:
        columns += [f"{s}_ms", s, f"{s}_ok"]
    columns += ["vs_cudnn", "vs_fa2"] + [f"{c}_vs_ours" for c in candidates]
    stem = os.path.join(args.out, "attention_sweep" if args.set == "sweep" else "attention_offbench")
    with open(stem + ".csv", "w") as f:
        f.write(",".join(c if c not in sides_named else f"{c}_tflops" for c in columns) + "\n")
        for r in results:
            f.write(",".join("" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c])) for c in columns) + "\n")
    write_svg(stem + ".svg", results, sides_named)
    print(f"# wrote {stem}.csv and .svg")


if __name__ == "__main__":
    main()
