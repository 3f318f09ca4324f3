from infertune.measure.memory import CpuMeter, CudaMeter, RssSampler, meter_for, peak_rss_bytes


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
    before = CpuMeter().current()
    with RssSampler() as phase:
        block = bytearray(200 * 2**20)
        for i in range(0, len(block), 4096):  # touch every page so it is resident
            block[i] = 1
        del block
    assert phase.peak - before > 150 * 2**20
    assert peak_rss_bytes() >= phase.peak * 0.99


def test_meter_choice():
    assert meter_for("cpu").kind == "cpu_rss"
    assert meter_for("mps").kind == "cpu_rss"
