from __future__ import annotations

import json

import msgspec

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp


class _Supported(msgspec.Struct):
    supported: list[str]


def test_an_errors_data_is_the_peers_bytes_and_read_only_as_far_as_asked() -> None:
    data = b'{"supported":["v"],"junk":[{},{}]}'
    msg = envelope.decode_message(
        b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":%s}}' % data
    )
    assert isinstance(msg, rpc.ErrorResponse)
    exc = rpc.RPCError.from_object(msg.error)
    assert isinstance(exc.data, msgspec.Raw) and bytes(exc.data) == data
    said = exc.data_as(_Supported)
    assert said is not None and said.supported == ["v"]
    assert exc.data_as(int) is None
    assert json.loads(rpc.encode_error(1, exc.code, exc.message, exc.data))["error"]["data"][
        "junk"
    ] == [{}, {}]
    made = rpc.RPCError(1, "m", {"supported": ["w"]}).data_as(_Supported)
    assert made is not None and made.supported == ["w"]


def test_encoding_round_trips_and_passes_raw_results_through() -> None:
    raw = msgspec.Raw(b'{"content":[],"weird" : 1}')
    line = rpc.encode_result(5, raw)
    assert line == b'{"jsonrpc":"2.0","id":5,"result":{"content":[],"weird" : 1}}'
    assert rpc.encode_request(1, "ping") == b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert json.loads(rpc.encode_error(None, -32700, "bad")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "bad"},
    }


def test_mcp_error_codes_are_named() -> None:
    assert (
        rpc.HEADER_MISMATCH,
        rpc.MISSING_REQUIRED_CLIENT_CAPABILITY,
        rpc.UNSUPPORTED_PROTOCOL_VERSION,
    ) == (-32020, -32021, -32022)


def test_ids_are_never_reused() -> None:
    ids = rpc.IdAllocator()
    seen = {ids.next() for _ in range(1000)}
    assert len(seen) == 1000


def test_modern_meta_goes_on_params() -> None:
    meta = mcp.request_meta("2026-07-28", {}, mcp.Implementation("mcpd", "1"))
    params = mcp.CallToolParams(name="t", meta=meta)
    line = json.loads(rpc.encode_request(1, "tools/call", params))
    assert "_meta" not in line
    assert line["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert line["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {}
