"""The expected speed model's published and fitted factors (estimate/expected.py): the share of the datasheet a
GPU's kernels reach, the host-side costs of eager and compiled decoding, an uncalibrated CPU's shares and what each
quantization backend's kernel does with its packed weights. A calibrated host measures its own instead. Every
value names its source here and in docs/estimator.md (the table of factors).
"""

from __future__ import annotations

# --- GPU factors (used when the GPU is not calibrated on this host) -------------------------------------
# Share of the datasheet bandwidth a decode step's weight reads reach. gpt-fast's README (A100 80GB, Llama-2-7B,
# compiled): fp16 1397 GB/s of 2039 = 0.69; torch.compile output is what eager kernels reach at best.
GPU_BW_EFF = 0.69
# Share of dense peak FLOP/s the prefill's GEMMs reach (cuBLAS on large shapes, norms and attention between them).
GPU_FLOPS_EFF = 0.6
# Host-side cost of one eager decoder layer on CUDA (Python + ~40 kernel launches), and of generate's own
# per-step work (logits processing, stopping criteria, cache bookkeeping); fitted to the published eager
# transformers runs in benchmarks/published_gpu.csv (small models, where nothing else is visible).
CUDA_LAYER_S = {"eager": 0.6e-3, "sdpa": 0.55e-3, "flash_attention_2": 0.55e-3}
CUDA_STEP_S = 3e-3
# Compiled with CUDA graphs (static cache + torch.compile "reduce-overhead", what generate does for a static
# cache on CUDA): the graph replays every layer's kernels at once; generate's Python per step remains.
CUDA_COMPILED_LAYER_S = 5e-6
CUDA_COMPILED_STEP_S = 1.5e-3
# An uncalibrated CPU (INFERTUNE_NO_CALIBRATION=1): the probed rates at these shares, and a half type the CPU
# cannot compute natively (per /proc/cpuinfo) at CPU_EMULATED_SLOWDOWN times the time.
CPU_BW_EFF = 0.5
CPU_FLOPS_EFF = 0.5
CPU_EMULATED_SLOWDOWN = 4.0
SYNC_S = 0.1e-3  # the per-step device->host copy of the next token
# The host's single-thread speed scales every host-side cost above. Fitted to the same tables: GeForce cards
# sit in desktops with fast cores (RTX 4090: NF4 at batch 1 is faster than bf16 there, 0.6x the H100 host's
# per-Linear cost), T4s in older cloud VMs (LLM.int8 costs 1.8x the H100 host's per Linear). Other GPUs: 1.
# A100 hosts (cloud VMs): the Qwen2 and Qwen1.5 docs' transformers tables on an A100 80GB (published-gpu-2 dev rows,
# batch 1, host-bound small models) imply 0.76-0.85 ms per decoder layer on one host and about 0.6 on the other;
# 1.2x the H100 host's 0.55 fits the dev rows best (1.0: 57 % within 0.8-1.25x, 1.2: 67 %, 1.3: 62 %).
# H200: this project's own smoke run (2026-12-04, transformers 5.17, random Llama-3.2-1B shape) 0.72-0.99 ms.
HOST_SPEED = {
    "RTX 4090": 0.6,
    "RTX 3090": 0.6,
    "T4": 1.6,
    "A100 80GB": 1.2,
    "A100 40GB": 1.2,
    "A800 80GB": 1.2,
    "H200": 1.5,
}

# --- quantization backends: what their kernels do with the packed weights --------------------------------
# eff: share of the bandwidth the batch-1 kernel reaches reading the packed weights; dequant_rows: from this many
# activation rows on, the backend dequantizes each weight to the compute dtype first (reads packed, writes and
# reads the dtype copy); linear_s / dequant_linear_s: extra host cost per Linear call (its own small kernels and
# Python) on the batch-1 path and on the dequantizing path; dq_linear_s: added by bitsandbytes' double
# quantization (the absmax is dequantized first). Host costs were fitted to the bitsandbytes 0.45 optimum-benchmark
# tables (benchmarks/published_gpu.csv): per Linear, NF4 adds 39 us over bf16 at batch 1 on an H100 host, double
# quantization 36 us more, LLM.int8 with outlier decomposition 250 us (H100) / 130 us (RTX 4090 host), the
# dequantizing path (batch 8) ~100 us.
QUANT_KERNELS: dict[str, dict[str, float]] = {
    # bitsandbytes 0.40+ fast batch-1 kernel (gemv_4bit): 3.4x fp16 on Ampere per its release notes
    "bnb-nf4": {"eff": 0.6, "dequant_rows": 2, "linear_s": 35e-6, "dequant_linear_s": 90e-6, "dq_linear_s": 30e-6},
    "bnb-fp4": {"eff": 0.6, "dequant_rows": 2, "linear_s": 35e-6, "dequant_linear_s": 90e-6, "dq_linear_s": 30e-6},
    # LLM.int8(): int8 matmul plus outlier decomposition, several kernels per Linear (quantize the input,
    # find outliers, int8 GEMM, dequantize, fp16 matmul of the outlier columns)
    "bnb-int8": {"eff": 0.5, "dequant_rows": 1 << 30, "linear_s": 190e-6},
    # GPTQ/AWQ with exllama/marlin-style kernels: packed 4-bit weights read by a fused dequant-GEMV
    # exllama (v1, what transformers used through AutoGPTQ) reconstructs fp16 weights from 4 rows on: optimum's
    # table has batch 4 at 1.6x batch 1 and 1.4x fp16
    "gptq": {"eff": 0.45, "dequant_rows": 4, "linear_s": 20e-6, "dequant_linear_s": 20e-6},
    # AutoAWQ's GEMM kernel (unfused modules): decode near the 4-bit roofline's host-bound pace, prefill at ~0.22 of
    # the fp16 GEMM rate (transformers' AWQ docs: Mistral-7B prefill ~3000 tokens/s from 256 to 2048 tokens)
    "awq": {"eff": 0.45, "dequant_rows": 1 << 30, "linear_s": 20e-6, "flops_eff": 0.22},
    # torchao weight-only int8/int4 (gpt-fast README, compiled: int8 1069 GB/s and int4 862 GB/s on an A100 of
    # 2039: 0.52 and 0.42); uncompiled they dispatch through tensor subclasses (extra host cost per call)
    "int8": {"eff": 0.52, "dequant_rows": 1 << 30, "linear_s": 40e-6},
    "int4": {"eff": 0.42, "dequant_rows": 1 << 30, "linear_s": 40e-6},
    "fp8": {"eff": 0.6, "dequant_rows": 1 << 30, "linear_s": 20e-6},
}
LINEARS_PER_LAYER = 7  # q, k, v, o, gate, up, down
# transformers' fine-grained FP8Linear (4.49-5.3, estimate/library.py): per call, two Triton launches from Python
# (the activation quantization and the block matmul; a launch costs ~6 us bare and ~13 us with ~20 arguments in
# Triton 3.5, tritonbench#669, and 40-60 us in Triton 2.x, triton#3503/#3638; taken at the Triton 3.x pace of
# torch 2.6-2.9) with their asserts and output allocations, then torch.cuda.synchronize(): a round trip plus
# the GPU's idle start of the next kernel (~10 us, pytorch/pytorch#18012's and CUDA's launch latency).
FP8_TRITON_LINEAR_S = 35e-6
FP8_SYNC_S = 15e-6
# Its Triton block-FP8 matmul tiles 64 activation rows (BLOCK_SIZE_M, the default config without a tuned file): at
# decode's 1-8 rows most of the tile is idle; a 16-row tile ran the same kernel 1.8-2.1x faster at M = 1-8 on the
# four Qwen3 shapes (vllm-project/vllm#48035, the same kernel family): half the fp8 kernel's share of bandwidth.
FP8_TRITON_SMALL_M_EFF = 0.3
# AutoGPTQ's CUDA QuantLinear for 8-bit (and 2/3-bit) GPTQ: ~4 more launches per call than ExLlama's (fp32 casts
# of the input and scales, an fp32 output, a cast back). Fitted to the published-gpu-2 dev rows (Qwen2-0.5B,
# 1.5B, 7B GPTQ-Int8 on an A100, transformers 4.38.2: 20-27 us per Linear slower than expected, 17-23 us at the
# H100 host's pace).
GPTQ_CUDA_LINEAR_S = 20e-6
# One iteration of transformers' Python loop over a MoE layer's experts before the grouped kernels of 5.0
# (estimate/library.py): torch.where on the expert mask (a device-to-host sync), index the routed tokens, gate, up
# and down projections, the activation and product, scale and index_add: about nine kernel launches and a sync.
# At the per-op pace CUDA_LAYER_S implies that is ~109 us; fitted to the published-gpu-2 dev MoE rows (Qwen2-57B-A14B
# GPTQ at 4.38.2, Qwen1.5-MoE-A2.7B at 4.37: 1,792 and 1,440 iterations per token on an A100 host), 80 us: those
# rows at 0.82-1.24 of measured (60 us: 0.65-0.99, 109 us: 1.1-1.6).
MOE_EXPERT_ITER_S = 80e-6
