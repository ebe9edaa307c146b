"""The streaming client turns an SSE stream into a timed record, and never raises."""

from __future__ import annotations

import httpx
import pytest

from switchyard.bench.client import Endpoint, new_http_client, stream_completion
from switchyard.bench.load import poisson_delays_s, run_level
from tests.unit.bench.fake_openai_server import FakeServer

ENDPOINT = Endpoint("http://bench.test/v1", "mini-llama", api_key="k")


def _client(server: FakeServer) -> httpx.AsyncClient:
    return new_http_client(8, 30.0, httpx.ASGITransport(app=server.app()))


@pytest.mark.anyio
async def test_a_streamed_completion_records_every_chunk_and_the_usage() -> None:
    server = FakeServer()
    async with _client(server) as client:
        record = await stream_completion(client, ENDPOINT, "hello there", 5)
    assert record.succeeded
    assert len(record.chunk_times_s) == 5
    assert (record.prompt_tokens, record.completion_tokens) == (16, 5)
    assert list(record.chunk_times_s) == sorted(record.chunk_times_s)
    assert record.start_s <= record.chunk_times_s[0]


@pytest.mark.anyio
async def test_the_request_asks_for_exact_lengths_and_usage_like_vllm_bench() -> None:
    server = FakeServer()
    async with _client(server) as client:
        await stream_completion(client, ENDPOINT, "hello", 7)
    (body,) = server.bodies
    assert body["model"] == "mini-llama"
    assert body["prompt"] == "hello"
    assert body["max_tokens"] == 7
    assert body["ignore_eos"] is True
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.anyio
async def test_an_http_error_becomes_a_failed_record_with_the_servers_message() -> None:
    server = FakeServer(fail_with=503)
    async with _client(server) as client:
        record = await stream_completion(client, ENDPOINT, "hello", 3)
    assert not record.succeeded
    assert record.error == "HTTP 503: The model is busy."


@pytest.mark.anyio
async def test_an_error_event_mid_stream_fails_the_request_and_keeps_its_chunks() -> None:
    server = FakeServer(break_after=2)
    async with _client(server) as client:
        record = await stream_completion(client, ENDPOINT, "hello", 6)
    assert not record.succeeded
    assert len(record.chunk_times_s) == 2
    assert record.error == "engine died"


@pytest.mark.anyio
async def test_an_unreachable_server_is_a_failed_record_not_an_exception() -> None:
    async with new_http_client(1, 5.0) as client:
        record = await stream_completion(client, Endpoint("http://127.0.0.1:9/v1", "m"), "hello", 3)
    assert not record.succeeded
    assert record.error is not None and "ConnectError" in record.error


@pytest.mark.anyio
async def test_a_level_never_has_more_requests_in_flight_than_its_concurrency() -> None:
    server = FakeServer(delay_s=0.01)
    run = await run_level(
        ENDPOINT,
        [f"prompt {i}" for i in range(12)],
        output_len=4,
        concurrency=3,
        request_rate_per_s=None,
        transport=httpx.ASGITransport(app=server.app()),
    )
    assert server.max_in_flight == 3
    assert len(run.records) == 12
    assert all(r.succeeded for r in run.records)
    assert [b["prompt"] for b in server.bodies] == [f"prompt {i}" for i in range(12)]
    assert run.duration_s > 0


def test_without_a_rate_every_request_is_released_at_once() -> None:
    assert poisson_delays_s(4, None, seed=0) == [0.0] * 4


def test_poisson_gaps_average_one_over_the_rate() -> None:
    gaps = poisson_delays_s(20_000, 8.0, seed=1)
    assert sum(gaps) / len(gaps) == pytest.approx(1 / 8.0, rel=0.05)
    assert min(gaps) >= 0
