from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.http import mcp_headers as h


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ("a b\tc", "a b\tc"),
        ("", "=?base64??="),
        ("\t", "=?base64?CQ==?="),
        ("x\x7f", "=?base64?eH8=?="),
        ("trailing\t", "=?base64?dHJhaWxpbmcJ?="),
    ],
)
def test_encode_value(value: str, encoded: str) -> None:
    assert h.encode_value(value) == encoded
    assert h.decode_value(encoded) == value


def test_sentinel_markers_are_case_sensitive() -> None:
    assert h.encode_value("=?BASE64?abc?=") == "=?BASE64?abc?="
    assert h.decode_value("=?BASE64?abc?=") == "=?BASE64?abc?="


def test_decode_rejects_bad_base64() -> None:
    with pytest.raises(h.HeaderValueError):
        h.decode_value("=?base64?not base64!?=")
    with pytest.raises(h.HeaderValueError):
        h.decode_value("=?base64?/w==?=")  # 0xff is not UTF-8


@given(st.text())
def test_round_trip_and_always_header_safe(value: str) -> None:
    encoded = h.encode_value(value)
    assert h.decode_value(encoded) == value
    assert encoded == "" or all(0x20 <= ord(c) < 0x7F or c == "\t" for c in encoded)
    assert encoded.strip(" \t") == encoded
    assert encoded != "" or value == ""


def test_request_headers() -> None:
    assert h.request_headers("2026-07-28", "tools/list") == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }
    assert h.request_headers("2026-07-28", "tools/call", "数据")["Mcp-Name"] == (
        "=?base64?5pWw5o2u?="
    )
    assert h.request_headers("2026-07-28", "resources/read", "file:///a b")["Mcp-Name"] == (
        "file:///a b"
    )
    with pytest.raises(h.HeaderValueError):
        h.request_headers("2026-07-28", "prompts/get")


def schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_header_params_nested_properties() -> None:
    s = schema(
        region={"type": "string", "x-mcp-header": "Region"},
        options={
            "type": "object",
            "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}},
        },
        confirm={"type": ["boolean", "null"], "x-mcp-header": "Confirm"},
        query={"type": "string"},
    )
    assert h.header_params(s) == {
        "Mcp-Param-Region": ("region",),
        "Mcp-Param-Limit": ("options", "limit"),
        "Mcp-Param-Confirm": ("confirm",),
    }
    assert h.header_params(msgspec.json.encode(s)) == h.header_params(s)
    assert h.header_params(msgspec.Raw(msgspec.json.encode(s))) == h.header_params(s)


def test_header_params_none() -> None:
    assert h.header_params({"type": "object"}) == {}


def test_property_named_like_the_annotation_is_not_an_annotation() -> None:
    s = schema(**{"x-mcp-header": {"type": "string"}})
    s["default"] = {"x-mcp-header": 42}
    s["examples"] = [{"x-mcp-header": ""}]
    assert h.header_params(s) == {}


@pytest.mark.parametrize(
    ("prop", "reason"),
    [
        ({"type": "string", "x-mcp-header": ""}, "empty"),
        ({"type": "string", "x-mcp-header": 7}, "not a string"),
        ({"type": "string", "x-mcp-header": "Re gion"}, "not an HTTP token"),
        ({"type": "string", "x-mcp-header": "Région"}, "not an HTTP token"),
        ({"type": "string", "x-mcp-header": "A:B"}, "not an HTTP token"),
        ({"type": "string", "x-mcp-header": "A\r\nX-Evil: 1"}, "control"),
        ({"type": "string", "x-mcp-header": "A\x00"}, "control"),
        ({"type": "number", "x-mcp-header": "N"}, "number"),
        ({"type": "object", "x-mcp-header": "O"}, "object"),
        ({"x-mcp-header": "Untyped"}, "None"),
        ({"type": ["string", "integer"], "x-mcp-header": "Either"}, "string"),
    ],
)
def test_invalid_annotation_values(prop: dict[str, Any], reason: str) -> None:
    with pytest.raises(h.InvalidHeaderAnnotation, match=reason):
        h.header_params(schema(p=prop))


def test_duplicate_names_ignoring_case() -> None:
    s = schema(
        a={"type": "string", "x-mcp-header": "Region"},
        b={"type": "string", "x-mcp-header": "REGION"},
    )
    with pytest.raises(h.InvalidHeaderAnnotation, match="ignore case"):
        h.header_params(s)


ANNOTATED = {"type": "string", "x-mcp-header": "X"}


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "object", "x-mcp-header": "X"},
        schema(a={"type": "array", "items": ANNOTATED}),
        schema(a={"type": "array", "prefixItems": [ANNOTATED]}),
        schema(a={"anyOf": [ANNOTATED]}),
        schema(a={"type": "object", "oneOf": [schema(b=ANNOTATED)]}),
        {"type": "object", "allOf": [schema(a=ANNOTATED)]},
        {"type": "object", "not": schema(a=ANNOTATED)},
        {"type": "object", "if": schema(a=ANNOTATED)},
        {"type": "object", "then": schema(a=ANNOTATED)},
        {"type": "object", "else": schema(a=ANNOTATED)},
        {"type": "object", "$defs": {"r": ANNOTATED}, "properties": {"a": {"$ref": "#/$defs/r"}}},
        {"type": "object", "additionalProperties": ANNOTATED},
        {"type": "object", "patternProperties": {"^a": ANNOTATED}},
        {"type": "object", "dependentSchemas": {"a": schema(b=ANNOTATED)}},
    ],
)
def test_unreachable_annotations_invalidate_the_tool(bad: dict[str, Any]) -> None:
    with pytest.raises(h.InvalidHeaderAnnotation, match="reachable"):
        h.header_params(bad)


def test_runaway_schemas_are_refused() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = schema(a=deep)
    with pytest.raises(h.InvalidHeaderAnnotation, match="deeper"):
        h.header_params(deep)
    wide = schema(**{f"p{i}": {"type": "string"} for i in range(20_000)})
    with pytest.raises(h.InvalidHeaderAnnotation, match="subschemas"):
        h.header_params(wide)


def test_non_object_schemas() -> None:
    with pytest.raises(h.InvalidHeaderAnnotation):
        h.header_params(b"[1]")
    with pytest.raises(h.InvalidHeaderAnnotation, match="JSON"):
        h.header_params(b"{nope")


PARAMS = {
    "Mcp-Param-Region": ("region",),
    "Mcp-Param-Limit": ("options", "limit"),
    "Mcp-Param-Confirm": ("confirm",),
}


def test_param_headers_values() -> None:
    args = {"region": "us-west1", "options": {"limit": -7}, "confirm": False}
    assert h.param_headers(PARAMS, args) == {
        "Mcp-Param-Region": "us-west1",
        "Mcp-Param-Limit": "-7",
        "Mcp-Param-Confirm": "false",
    }
    assert h.param_headers(PARAMS, {"confirm": True, "options": {"limit": 42.0}}) == {
        "Mcp-Param-Confirm": "true",
        "Mcp-Param-Limit": "42",
    }


def test_param_headers_omit_null_and_absent() -> None:
    assert h.param_headers(PARAMS, {"region": None, "options": None}) == {}
    assert h.param_headers(PARAMS, {"options": {"other": 1}}) == {}
    assert h.param_headers(PARAMS, {"options": "not an object"}) == {}
    assert h.param_headers(PARAMS, None) == {}


def test_param_headers_encode_unsafe_strings() -> None:
    out = h.param_headers(PARAMS, {"region": "Hello, 世界"})
    assert out == {"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="}


@pytest.mark.parametrize("value", [2**53, -(2**53), 1.5, float("nan"), [1], {"a": 1}, 1e300])
def test_param_headers_refuse_unsendable_values(value: Any) -> None:
    with pytest.raises(h.HeaderValueError):
        h.param_headers(PARAMS, {"region": value})


def test_param_headers_accept_the_safe_integer_bounds() -> None:
    out = h.param_headers(PARAMS, {"options": {"limit": -(2**53 - 1)}})
    assert out == {"Mcp-Param-Limit": str(-(2**53 - 1))}
