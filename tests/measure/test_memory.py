import json
import subprocess
import sys

import pytest

from infertune.measure.memory import CpuMeter, CudaMeter, HwmPhase, RssSampler, meter_for


class FakeCudaCounters:
    """torch.cuda's memory counters, driven by the test like an allocator would be."""

    def __init__(self):
        self.allocated = self.peak = self.reserved_peak = 0
        self.resets = 0

    def alloc(self, n):
        self.allocated += n
        self.peak = max(self.peak, self.allocated)
        self.reserved_peak = max(self.reserved_peak, self.allocated + 2 * 2**20)

    def free(self, n):
        self.allocated -= n

    def synchronize(self, device):
        pass

    def memory_allocated(self, device):
        return self.allocated

    def max_memory_allocated(self, device):
        return self.peak

    def max_memory_reserved(self, device):
        return self.reserved_peak

    def reset_peak_memory_stats(self, device):
        self.resets += 1
        self.peak = self.allocated
        self.reserved_peak = self.allocated


def test_cuda_meter_separates_load_and_generation_peaks():
    cuda = FakeCudaCounters()
    meter = CudaMeter("cuda:0", cuda=cuda)
    assert meter.current() == 0
    cuda.alloc(1000)  # weights
    cuda.alloc(500)  # a load-time temporary
    cuda.free(500)
    assert meter.load_peak() == 1500
    with meter.generate_phase() as phase:
        assert cuda.resets == 1  # the load peak must not leak into the generation peak
        cuda.alloc(300)  # KV cache
        cuda.free(300)
    assert phase.peak == 1300
    assert meter.reserved_peak() == 1500 + 2 * 2**20
    assert meter.kind == "cuda_allocated"


def test_rss_sampler_sees_a_short_lived_allocation():
    # In a fresh process: in this one, memory freed by earlier tests stays resident and hides new pages.
    code = (
        "import time\nfrom infertune.measure.memory import CpuMeter, RssSampler, vm_hwm\n"
        "before = CpuMeter().current()\n"
        "with RssSampler() as phase:\n"
        "    block = bytearray(200 * 2**20)\n"
        "    for i in range(0, len(block), 4096):\n"
        "        block[i] = 1\n"
        "    time.sleep(0.05)  # like a torch op, release the GIL so the sampler thread runs\n"
        "    del block\n"
        "print(phase.peak - before, vm_hwm() - phase.peak * 0.99)\n"
    )
    grew, slack = map(
        float, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert grew > 150 * 2**20
    assert slack >= 0  # the kernel's mark agrees with the sampler


def test_meter_choice():
    assert meter_for("cpu").kind == "cpu_rss"
    assert meter_for("mps").kind == "cpu_rss"


@pytest.mark.skipif(not HwmPhase.available(), reason="needs Linux /proc/self/clear_refs")
def test_hwm_phase_counts_a_transient_too_short_to_sample():
    # Fresh process; the big block is allocated and freed while holding the GIL: no sampler sees it.
    code = (
        "from infertune.measure.memory import CpuMeter, HwmPhase\n"
        "big = b'x' * (300 * 2**20); del big  # an earlier, larger peak: the phase must not report it\n"
        "before = CpuMeter().current()\n"
        "with HwmPhase() as phase:\n"
        "    block = b'x' * (120 * 2**20)  # written: every page resident\n"
        "    del block\n"
        "print(phase.peak - before)\n"
    )
    grew = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 110 * 2**20 < grew < 200 * 2**20


def test_cpu_meter_prefers_the_kernel_mark_on_linux():
    meter = CpuMeter()
    assert isinstance(meter.generate_phase(), HwmPhase if HwmPhase.available() else RssSampler)
    assert meter.method == ("vmhwm" if HwmPhase.available() else "rss_sampler")


@pytest.mark.skipif(not HwmPhase.available(), reason="needs Linux /proc/self/status VmHWM")
def test_the_meter_keeps_the_peak_from_before_a_phase_reset():
    code = (
        "from infertune.measure.memory import CpuMeter\n"
        "meter = CpuMeter(); before = meter.current()\n"
        "big = b'x' * (200 * 2**20); del big  # the load's peak\n"
        "load = meter.load_peak()\n"
        "with meter.generate_phase() as phase:\n"
        "    small = b'x' * (50 * 2**20); del small\n"
        "print(load - before, phase.peak - before, meter.process_peak() - before)\n"
    )
    load, gen, whole = map(
        float, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert 190 * 2**20 < load < 260 * 2**20 and 40 * 2**20 < gen < 120 * 2**20
    assert whole == load  # the reset at generation does not lose the load's peak


def test_a_trial_started_by_a_big_parent_reports_its_own_peak(tiny_model):
    """Linux keeps ru_maxrss across fork+exec: a trial launched by a parent that once touched 1.5 GB must
    still report only what the trial itself held."""
    code = (
        "import json, sys\n"
        "from infertune.core.config import InferenceConfig\n"
        "from infertune.measure import run_trial\n"
        "from infertune.core.workload import Workload\n"
        "big = b'x' * (1536 * 2**20)  # written: every page resident\n"
        "del big\n"
        f"r = run_trial(InferenceConfig(), Workload(model='m', max_new_tokens=2, warmup=0), {str(tiny_model)!r})\n"
        "print(json.dumps(r.metrics.model_dump()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    m = json.loads(out.stdout.splitlines()[-1])
    assert m["peak_memory_bytes"] < 1024 * 2**20 and m["cpu_peak_rss_bytes"] < 1024 * 2**20
    assert m["peak_memory_method"] == ("vmhwm" if HwmPhase.available() else "rss_sampler")
    assert m["peak_memory_bytes"] >= m["baseline_memory_bytes"]
