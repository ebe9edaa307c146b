"""The metric definitions of `vllm bench serve`, checked against hand-computed examples."""

from __future__ import annotations

import numpy as np
import pytest

from switchyard.bench.level_metrics import Distribution, LevelMetrics, percentile, summarize
from switchyard.bench.request_record import RequestRecord, failed_record

# Sent at 10.0 s; chunks at 10.2, 10.25, 10.35, 10.40; the server counted 4 tokens.
FOUR_TOKENS = RequestRecord(
    start_s=10.0, chunk_times_s=(10.2, 10.25, 10.35, 10.40), completion_tokens=4
)
# Sent at 10.1 s; chunks at 10.4 and 10.5; 2 tokens.
TWO_TOKENS = RequestRecord(start_s=10.1, chunk_times_s=(10.4, 10.5), completion_tokens=2)
FAILED = failed_record(10.0, "HTTP 503: busy")


def test_ttft_is_the_first_chunk_minus_the_send_time() -> None:
    assert FOUR_TOKENS.ttft_s == pytest.approx(0.2)
    assert TWO_TOKENS.ttft_s == pytest.approx(0.3)


def test_itl_is_one_gap_per_pair_of_consecutive_chunks() -> None:
    assert FOUR_TOKENS.itls_s == pytest.approx((0.05, 0.10, 0.05))


def test_e2el_ends_at_the_last_token_chunk() -> None:
    assert FOUR_TOKENS.e2el_s == pytest.approx(0.4)


def test_tpot_spreads_the_time_after_the_first_token_over_the_remaining_tokens() -> None:
    assert FOUR_TOKENS.tpot_s == pytest.approx((0.4 - 0.2) / 3)
    assert TWO_TOKENS.tpot_s == pytest.approx(0.1)


def test_a_one_token_request_has_no_tpot() -> None:
    one = RequestRecord(start_s=0.0, chunk_times_s=(0.5,), completion_tokens=1)
    assert one.tpot_s is None
    assert one.itls_s == ()


def test_tpot_uses_the_servers_token_count_when_chunks_bundle_tokens() -> None:
    bundled = RequestRecord(start_s=0.0, chunk_times_s=(0.1, 0.4), completion_tokens=4)
    assert bundled.tpot_s == pytest.approx(0.1)
    assert bundled.itls_s == pytest.approx((0.3,))


def test_without_usage_every_chunk_counts_as_one_token() -> None:
    no_usage = RequestRecord(start_s=0.0, chunk_times_s=(0.1, 0.2, 0.3))
    assert no_usage.output_tokens == 3


def test_a_failed_request_has_no_latencies_and_no_tokens() -> None:
    assert not FAILED.succeeded
    assert (FAILED.ttft_s, FAILED.e2el_s, FAILED.tpot_s, FAILED.output_tokens) == (
        None,
        None,
        None,
        0,
    )


def test_a_stream_broken_after_some_tokens_counts_as_failed() -> None:
    broken = RequestRecord(start_s=0.0, chunk_times_s=(0.1, 0.2), error="stream broke")
    assert not broken.succeeded
    assert broken.output_tokens == 0


def test_level_summary_matches_the_hand_computed_numbers() -> None:
    m = summarize(
        [FOUR_TOKENS, TWO_TOKENS, FAILED],
        duration_s=2.0,
        concurrency=4,
        request_rate_per_s=None,
        prompt_tokens=[16, 16, 16],
    )
    assert (m.num_prompts, m.completed, m.failed) == (3, 2, 1)
    assert (m.total_input_tokens, m.total_output_tokens) == (32, 6)
    assert m.request_throughput_per_s == pytest.approx(1.0)
    assert m.output_tokens_per_s == pytest.approx(3.0)
    assert m.total_tokens_per_s == pytest.approx(19.0)
    assert m.ttft is not None and m.itl is not None and m.tpot is not None and m.e2el is not None
    # TTFT samples 200 and 300 ms.
    assert m.ttft.count == 2
    assert m.ttft.mean_ms == pytest.approx(250)
    assert m.ttft.p50_ms == pytest.approx(250)
    assert m.ttft.p90_ms == pytest.approx(290)
    assert m.ttft.p99_ms == pytest.approx(299)
    assert m.ttft.std_ms == pytest.approx(50)
    # ITL samples 50, 100, 50 (first request) and 100 ms (second).
    assert m.itl.count == 4
    assert m.itl.mean_ms == pytest.approx(75)
    assert m.itl.p50_ms == pytest.approx(75)
    assert m.itl.std_ms == pytest.approx(25)
    # TPOT samples 66.7 and 100 ms; E2EL 400 and 400 ms.
    assert m.tpot.mean_ms == pytest.approx((200 / 3 + 100) / 2)
    assert m.e2el.p99_ms == pytest.approx(400)
    assert m.errors == ("HTTP 503: busy",)


def test_the_servers_prompt_count_replaces_the_clients() -> None:
    counted = RequestRecord(
        start_s=0.0, chunk_times_s=(0.1,), prompt_tokens=17, completion_tokens=1
    )
    m = summarize(
        [counted], duration_s=1.0, concurrency=1, request_rate_per_s=None, prompt_tokens=[16]
    )
    assert m.total_input_tokens == 17


def test_a_level_where_everything_failed_has_no_distributions() -> None:
    m = summarize(
        [FAILED, FAILED],
        duration_s=1.0,
        concurrency=1,
        request_rate_per_s=2.0,
        prompt_tokens=[8, 8],
    )
    assert (m.completed, m.failed, m.output_tokens_per_s) == (0, 2, 0.0)
    assert m.ttft is None and m.itl is None
    assert m.errors == ("HTTP 503: busy",)


def test_error_samples_are_distinct_and_bounded() -> None:
    records = [failed_record(0.0, f"error {i % 7}") for i in range(30)]
    m = summarize(
        records, duration_s=1.0, concurrency=1, request_rate_per_s=None, prompt_tokens=[1] * 30
    )
    assert m.errors == tuple(f"error {i}" for i in range(5))


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 0.5]])
@pytest.mark.parametrize("p", [0, 10, 50, 90, 99, 100])
def test_percentiles_interpolate_like_numpy(values: list[float], p: float) -> None:
    assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_distribution_std_is_numpys_population_std() -> None:
    d = Distribution.of_seconds([0.001, 0.002, 0.006])
    assert d is not None
    assert d.std_ms == pytest.approx(float(np.std([1.0, 2.0, 6.0])))


def test_summary_refuses_a_zero_duration() -> None:
    with pytest.raises(ValueError, match="duration_s"):
        summarize([], duration_s=0.0, concurrency=1, request_rate_per_s=None, prompt_tokens=[])


def test_a_level_reads_back_from_its_json() -> None:
    m = summarize(
        [FOUR_TOKENS, FAILED],
        duration_s=1.0,
        concurrency=2,
        request_rate_per_s=None,
        prompt_tokens=[16, 16],
    )
    assert LevelMetrics.from_json({**m.to_json(), "requests": []}) == m
