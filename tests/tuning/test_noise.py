"""Decisions above the noise: the paired comparison, and whether the machine was busy."""

import subprocess
import sys
import time

import pytest

from infertune.measure.machine import MachineLoad, Watch, between, combine
from infertune.measure.stats import band_rank, paired, spread


def test_with_three_pairs_the_band_is_the_range_of_the_ratios():
    c = paired([1.0, 1.0, 1.0], [0.80, 0.85, 0.90])
    assert c.n == 3 and c.delta == pytest.approx(-0.15) and c.noise == pytest.approx(0.05) and c.clear
    assert (c.a, c.b) == (1.0, 0.85)


def test_pairs_that_disagree_on_the_direction_are_never_clear():
    c = paired([1.0, 1.0, 1.0, 1.0], [0.6, 0.7, 0.65, 1.05])
    assert not c.clear and abs(c.delta) <= c.noise


def test_from_eight_pairs_one_disturbed_pair_on_each_side_is_left_out_of_the_band():
    calm = [1.0] * 8
    cand = [0.80, 0.82, 0.79, 0.81, 0.80, 0.83, 0.81, 1.40]  # the last pair: the candidate ran beside other work
    c = paired(calm, cand)
    assert band_rank(8) == 2 and band_rank(7) == 1
    assert c.delta == pytest.approx(-0.19) and c.noise == pytest.approx(0.02) and c.clear
    few = paired(calm[:3], [0.80, 0.82, 1.40])  # with three pairs the same disturbance leaves it undecided
    assert not few.clear


def test_a_single_pair_has_no_band_and_decides_nothing():
    c = paired([1.0], [0.5])
    assert c.noise is None and not c.clear and c.delta == pytest.approx(-0.5)


def test_a_zero_incumbent_is_compared_by_differences():
    c = paired([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert c.delta > 0 and c.clear  # no division by zero


def test_the_same_numbers_give_the_same_band():
    a, b = [1.0, 1.1, 0.9, 1.05], [0.9, 1.0, 0.95, 0.97]
    assert paired(a, b) == paired(a, b)


def test_spread_of_repeats():
    assert spread([1.0]) is None
    assert spread([1.0, 1.2, 1.1]) == pytest.approx(0.1 / 1.1)


def _snap(t, busy, steal, total, own, load, throttles):
    return t, (busy, steal, total), own, load, throttles


def test_a_quiet_window_is_not_busy_and_other_work_steal_or_throttling_are():
    tick = 100  # jiffies per second on Linux
    quiet = between(_snap(0, 0, 0, 0, 0, 1.0, 0), _snap(10, 19 * tick, 0, 20 * tick, 19, 1.9, 0), 2)
    assert not quiet.busy and quiet.others_cpu == pytest.approx(0, abs=0.01) and quiet.reasons == []
    others = between(_snap(0, 0, 0, 0, 0, 1.0, 0), _snap(10, 19 * tick, 0, 20 * tick, 12, 2.6, 0), 2)
    assert others.busy and others.others_cpu == pytest.approx(0.7) and "other processes" in others.reasons[0]
    stolen = between(_snap(0, 0, 0, 0, 0, 1.0, 0), _snap(10, 10 * tick, 4 * tick, 20 * tick, 10, 1.0, 0), 2)
    assert stolen.busy and stolen.steal == pytest.approx(0.2) and "stolen" in stolen.reasons[0]
    throttled = between(_snap(0, 0, 0, 0, 0, 1.0, 3), _snap(10, 10 * tick, 0, 20 * tick, 10, 1.0, 5), 2)
    assert throttled.busy and throttled.throttled
    loaded = between(_snap(0, 0, 0, 0, 0, 5.0, 0), _snap(10, 2 * tick, 0, 20 * tick, 2, 5.0, 0), 2)
    assert loaded.busy and any("load average 5.00 on 2 cores" in r for r in loaded.reasons)


def test_combined_windows_are_busy_when_any_was():
    quiet = MachineLoad(cores=2, seconds=5, load_average=1.0, others_cpu=0.0, busy=False)
    busy = MachineLoad(cores=2, seconds=5, load_average=3.0, others_cpu=0.9, busy=True, reasons=["x"])
    c = combine([quiet, None, busy])
    assert (
        c.busy
        and c.load_average == 3.0
        and c.seconds == 10
        and c.reasons == ["x", "1 of 2 trials ran on a busy machine"]
    )
    assert combine([None]) is None and not combine([quiet]).busy
    again = combine([c, combine([busy, busy])])  # steps of a run combined again: trials counted once each
    assert again.reasons == ["x", "3 of 4 trials ran on a busy machine"] and again.windows == 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_cpu_burning_process_beside_us_makes_the_machine_busy():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        with Watch() as w:
            time.sleep(2)
    finally:
        burner.kill()
        burner.wait()
    assert w.result.busy and w.result.others_cpu > 0.3 and w.result.reasons
