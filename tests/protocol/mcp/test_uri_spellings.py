"""The spellings of a URI a server may read as the same resource."""

from __future__ import annotations

import pytest

from protocol.mcp.uri_spellings import climbs, forms, paths, read_as


@pytest.mark.parametrize(
    "spelled",
    [
        "res://s1/c#",
        "res://s1/c?",
        "RES://s1/c",
        "res://s1/./c",
        "res://s1//c",
        "res://s1/%63",
        "res://s1/t/../c",
        "res://s1/t/u/../../c",
        " res://s1/c\n",
        "res://s1/\tc",
        "res://s1\\c",
    ],
)
def test_every_spelling_is_read_as_the_uri_it_spells(spelled: str) -> None:
    assert read_as(spelled) == "res://s1/c"


def test_a_path_climbs_no_higher_than_its_root() -> None:
    assert read_as("file:///srv/a/../../../etc/passwd") == "file:///etc/passwd"
    assert read_as("file:///srv/a%2F..%2F..%2Fetc/passwd") == "file:///etc/passwd"
    assert read_as("file:///home/u/./.ssh/") == "file:///home/u/.ssh/"


def test_a_query_is_kept_as_read_and_dropped_in_the_bare_form() -> None:
    assert forms("res://s1/c?v=1#top") == (
        "res://s1/c?v=1#top",
        ("res://s1/c?v=1",),
        ("res://s1/c",),
    )


def test_a_uri_written_plainly_is_its_own_reading() -> None:
    for uri in ("file:///srv/notes.txt", "notes://{id}", "res:c", "github://Owner/repo"):
        assert forms(uri) == (uri, (uri,), (uri,))


def test_an_authority_keeps_its_case_unless_its_scheme_names_a_host() -> None:
    # A server's own scheme may tell cases apart where a host name would not.
    assert read_as("Notes://Inbox/1") == "notes://Inbox/1"
    assert read_as("HTTPS://Example.COM/A") == "https://example.com/A"
    assert read_as("file://Server/Share") == "file://server/Share"


# WHATWG's URL parser (Node's new URL) reads each as naming the host example.com, and
# the default port as none.
@pytest.mark.parametrize(
    "spelled",
    [
        "http://example.com:80/doc/1",
        "http://example.com:0080/doc/1",
        "http://example.com:/doc/1",
        "http://u@example.com/doc/1",
        "http://u:p@q@example.com/doc/1",
        "http://example.com./doc/1",
        "http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com/doc/1",
        "http://exam\u00adple\u3002com/doc/1",
        "HTTP://Ex%61mple.COM:80/doc/1",
    ],
)
def test_a_web_host_is_read_as_the_server_it_names(spelled: str) -> None:
    assert read_as(spelled) == "http://example.com/doc/1"


def test_a_host_outside_ascii_is_read_in_its_xn_form() -> None:
    assert read_as("http://EX\u00c4MPLE.com/a") == "http://xn--exmple-cua.com/a"
    assert read_as("http://xn--exmple-cua.com/a") == "http://xn--exmple-cua.com/a"


# Node's new URL reads each as the host 127.0.0.1 (an IPv4 address in any spelling).
@pytest.mark.parametrize(
    "spelled", ["http://127.1/a", "http://2130706433/a", "http://0x7f.1/a", "http://0177.0.0.1/a"]
)
def test_an_ipv4_address_is_read_as_its_four_numbers(spelled: str) -> None:
    assert read_as(spelled) == "http://127.0.0.1/a"


def test_what_is_no_ipv4_address_is_read_as_a_name() -> None:
    assert read_as("http://256.1.1.1/a") == "http://256.1.1.1/a"
    assert read_as("http://1.2.3.4.5/a") == "http://1.2.3.4.5/a"
    assert read_as("http://09.1.1.1/a") == "http://09.1.1.1/a"
    assert read_as("http://1.example/a") == "http://1.example/a"


def test_sharp_s_and_final_sigma_are_kept_as_node_keeps_them() -> None:
    # Not the older IDNA's "ss" and plain sigma: those name other hosts to Node.
    assert read_as("http://\u00df.de/a") == "http://xn--zca.de/a"
    assert read_as("http://ss.de/a") == "http://ss.de/a"
    assert read_as("http://\u03c2.gr/a") == "http://xn--3xa.gr/a"
    assert read_as("http://\u03c3.gr/a") == "http://xn--4xa.gr/a"


def test_a_name_longer_than_a_host_name_is_read_as_written() -> None:
    # No host is named, so nothing is worked out of it (at a cost of its length).
    long = "\u00e9" * 300_000
    assert read_as(f"http://{long}/x") == f"http://{long}/x"
    label = "\u00c9" * 64
    assert read_as(f"http://{label}.de/x") == f"http://{label.lower()}.de/x"


def test_a_port_is_folded_only_where_it_is_the_schemes_own() -> None:
    assert read_as("https://example.com:443/a") == "https://example.com/a"
    assert read_as("wss://example.com:443/a") == "wss://example.com/a"
    assert read_as("ws://[::1]:80/a") == "ws://[::1]/a"
    assert read_as("https://example.com:80/a") == "https://example.com:80/a"
    assert read_as("http://example.com:8080/a") == "http://example.com:8080/a"
    # Another host, its letters Cyrillic, and another scheme's authority as written.
    assert read_as("http://exam\u0440le.com/a") == "http://xn--examle-erf.com/a"
    assert read_as("notes://u@Inbox.:80/1") == "notes://u@Inbox.:80/1"


# Node's fileURLToPath(new URL(uri)) and Python's normpath(url2pathname(urlparse(uri)
# .path)) both read each of these as /home/u/.ssh/id_rsa.
@pytest.mark.parametrize(
    "spelled",
    [
        "file://localhost/home/u/.ssh/id_rsa",
        "FILE://LOCALHOST/home/u/.ssh/id_rsa",
        "file://%6Cocalhost/home/u/.ssh/id_rsa",
        "file:/home/u/.ssh/id_rsa",
        "file:home/u/.ssh/id_rsa",
        "file:../home/u/.ssh/id_rsa",
    ],
)
def test_a_file_uri_naming_localhost_or_no_authority_is_read_from_the_root(spelled: str) -> None:
    assert read_as(spelled) == "file:///home/u/.ssh/id_rsa"


@pytest.mark.parametrize(
    "host",
    ["\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54", "local\u00adhost", "127.1", "nas"],
)
def test_a_file_uri_with_any_host_is_also_read_as_this_machines(host: str) -> None:
    got = forms(f"file://{host}/home/u/.ssh/id_rsa?x")
    assert "file:///home/u/.ssh/id_rsa?x" in got.read
    assert "file:///home/u/.ssh/id_rsa" in got.bare


def test_an_escaped_question_mark_or_hash_is_part_of_the_path_its_dots_resolve() -> None:
    # Node and Python split the URI as written and resolve ".." after the escape.
    assert read_as("file:///home/u/x%3f/../.ssh/id_rsa") == "file:///home/u/.ssh/id_rsa"
    assert read_as("file:///home/u/x%23/../.ssh/id_rsa") == "file:///home/u/.ssh/id_rsa"
    assert read_as("file:///srv/x%3F/../../outside") == "file:///outside"
    assert read_as("file:///srv/what%3f.txt?v=1#top") == "file:///srv/what?.txt?v=1"


def test_a_server_that_decodes_before_it_splits_is_read_too() -> None:
    # Such a server takes an escaped "?" or "#" for the end of the path.
    _, read, bare = forms("file:///home/u/.ssh/id_rsa%3fx")
    assert read == ("file:///home/u/.ssh/id_rsa?x",)
    assert bare == ("file:///home/u/.ssh/id_rsa?x", "file:///home/u/.ssh/id_rsa")
    assert forms("file:///srv/..%23").read == ("file:///srv/..#", "file:///")


# What Python's open(unquote(urlparse(uri).path)), or open(uri) of a URI with no
# scheme, opens for each: /srv/secret/key.txt.
@pytest.mark.parametrize(
    "spelled",
    [
        "/srv/secret/key.txt",
        "//srv/secret/key.txt",
        "/srv/./secret/../secret/key.txt",
        "/srv/secret/key.txt?v=1",
        "/srv/secret/key.txt#top",
        "x:///srv/secret/key.txt",
        "mcpd:/srv/secret/key.txt",
        "HTTP://example.com/srv/secret/key.txt?q",
        "x:///srv/secret%2Fkey.txt",
        "x:///srv/other%2F..%2Fsecret/key.txt",
        "x:///srv/secret/key.txt%3fv=1",
        "file:srv/secret/key.txt",
        "file://nas/srv/secret/key.txt",
        "/srv/secret/key.txt;x",
        "https://example.com/srv/secret/key.txt;x",
        "/srv/secret/key.txt;v=1?q",
    ],
)
def test_the_path_a_server_may_open_is_read_under_any_scheme_or_none(spelled: str) -> None:
    assert "/srv/secret/key.txt" in paths(spelled)


def test_an_authority_is_read_as_the_first_folder_of_a_path_too() -> None:
    # A server that drops the scheme alone opens //srv/secret/key.txt.
    assert paths("x://srv/secret/key.txt") == ("/secret/key.txt", "/srv/secret/key.txt")
    assert paths("notes:inbox/1") == ("inbox/1",)


def test_params_are_cut_as_each_reading_of_them_cuts() -> None:
    # urlparse cuts the last segment's; a servlet each segment's; a server may cut
    # the whole path at its first ``;``.
    assert paths("/srv/a;b/key.txt;x") == (
        "/srv/a;b/key.txt;x",
        "/srv/a;b/key.txt",
        "/srv/a/key.txt",
        "/srv/a",
    )
    assert paths("x:///srv/id.pem%3b.txt") == ("/srv/id.pem;.txt", "/srv/id.pem")
    assert paths("/srv/key.txt") == ("/srv/key.txt",)


@pytest.mark.parametrize(
    "spelled",
    [
        "../srv/key.txt",
        "a/../../srv/key.txt",
        "./../key.txt",
        "..",
        "x:../srv/key.txt",
        "file:../srv/key.txt",
        "%2e%2e/srv/key.txt",
        "x:..%2Fsrv/key.txt",
        "..\\srv\\key.txt",
        "notes:a/b/../../../key.txt",
    ],
)
def test_a_relative_path_that_leaves_its_folder_climbs(spelled: str) -> None:
    assert climbs(spelled)


@pytest.mark.parametrize(
    "spelled",
    [
        "/../srv/key.txt",
        "x:///../key.txt",
        "x://../key.txt",
        "srv/key.txt",
        "a/../key.txt",
        "a..b/c",
    ],
)
def test_a_rooted_path_or_one_that_stays_below_its_folder_does_not_climb(spelled: str) -> None:
    assert not climbs(spelled)
