"""device-map: spread the layers over every GPU, and past them into CPU RAM, with device_map="auto" and a
max_memory budget that leaves room for what accelerate does not plan for (KV cache, activations)."""

from __future__ import annotations

from infertune.techniques.base import Check, Facts, Setup, Technique, register

BUDGET_FRACTION = 0.80  # of each GPU for weights; the rest for KV cache, activations and the CUDA context


def budgets(f: Facts) -> dict[str, str]:
    gib = int(f.accelerator.memory_bytes * BUDGET_FRACTION / 2**30)
    mm = {str(i): f"{gib}GiB" for i in range(f.gpus)}
    if f.cpu_ram_bytes:
        mm["cpu"] = f"{int(f.cpu_ram_bytes * BUDGET_FRACTION / 2**30)}GiB"
    return mm


@register
class DeviceMap(Technique):
    id = "device-map"
    family = "device-map"
    title = 'device_map="auto" with max_memory at ~80 % of each device (CPU offload of what is left)'
    addresses = ("load-memory",)
    priority = 35

    def rank(self, f: Facts) -> int:
        # over several GPUs it is cheap and lossless; on one GPU it means CPU offload: a last resort
        return self.priority if f.gpus > 1 else 70

    tradeoffs = (
        "layers on several GPUs run one after another (pipeline, no overlap): no speed-up",
        "weights offloaded to CPU RAM cross PCIe at every forward pass: often 10-100x slower decode",
        "torch.compile is skipped by generate when weights are offloaded to the CPU",
    )
    docs = (
        "https://huggingface.co/docs/accelerate/concept_guides/big_model_inference",
        "https://huggingface.co/docs/transformers/main/en/models#big-model-loading",
    )

    def applied(self, s: Setup) -> bool:
        return s.device_map == "auto"

    def check(self, f: Facts, s: Setup) -> Check:
        return Check().need_platform(
            f, "cuda", why="on a CPU-only or Apple host there is no second memory to spread into"
        )

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"device_map": "auto", "max_memory": budgets(f), "tp": 1})


@register
class SingleDevice(Technique):
    id = "single-device"
    family = "device-map"
    title = "The whole model on one device (no device_map spread or offload, no tensor parallelism)"
    addresses = ("decode-speed", "prefill-speed", "concurrency")
    priority = 6
    tradeoffs = (
        "needs the weights, the KV cache and the activations in one device's memory",
        "frees the other GPUs (one replica per GPU multiplies throughput)",
    )
    docs = (
        "https://huggingface.co/docs/accelerate/concept_guides/big_model_inference",
        "https://huggingface.co/docs/transformers/main/en/perf_infer_gpu_one",
    )

    def applied(self, s: Setup) -> bool:
        return s.device_map is None and s.tp == 1

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"device_map": None, "max_memory": None, "tp": 1})
