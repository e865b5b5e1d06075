"""RFC 6570 templates as a router sees them: which URIs a template claims, and what
it costs to find out, whatever the template and the URI hold."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from protocol.mcp import uri_templates
from protocol.mcp.uri_spellings import read_as
from tests.support.hostile.cut_secret import MARKER, SECRET, beginnings, guarded, padded

TEMPLATE = "repo://{owner}{/path}"


def matches(template: str, uri: str) -> bool:
    """Whether ``template`` claims ``uri``; a template mcpd cannot parse claims none."""
    try:
        return uri_templates.parse(template).match(uri).matched
    except uri_templates.TemplateError:
        return False


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("test://template/{id}/data", "test://template/123/data", True),
        ("test://template/{id}/data", "test://template/1/2/data", False),  # {id} has no "/"
        ("test://template/{id}/data", "test://template/123/other", False),
        ("file:///{+path}", "file:///src/a b/c.py", True),  # + keeps reserved characters
        ("file:///{name}", "file:///a%20b.txt", True),
        ("file:///{name}", "file:///a b.txt", False),  # simple expansion percent-encodes
        ("file:///{name}", "file:///a%2.txt", False),  # not a percent-encoding
        ("db://rows{?limit,offset}", "db://rows", True),
        ("db://rows{?limit,offset}", "db://rows?limit=3&offset=4", True),
        ("db://rows{?limit}", "db://rowsX", False),
        ("x://{a}{/path*}", "x://a/b/c", True),
        ("x://page{#section}", "x://page#intro", True),
        ("x://{a}{.ext}{;p}{&q}", "x://a.tar.gz;x=1&y=2", True),
        ("x://{a}{.ext}", "x://a.b/c", False),  # "." expansions hold no "/"
        ("demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/1", False),
        (TEMPLATE, "repo://x/a/b", True),
        (TEMPLATE, "repo://x" + "/" * 26 + "#", False),
    ],
)
def test_which_uris_a_template_claims(template: str, uri: str, expected: bool) -> None:
    assert matches(template, uri) is expected


def test_a_broken_template_claims_nothing() -> None:
    assert matches("file:///{path", "file:///{path") is False
    for broken in ("x://{}", "x://{+}", "x://{a", "x://a}", "x://{a{b}}"):
        with pytest.raises(uri_templates.TemplateError):
            uri_templates.parse(broken)


def steps_bound(template: str, uri: str) -> int:
    """What a match may cost: linear in the URI, for any template mcpd accepts."""
    return (len(uri) + 1) * (len(template) + 2 * template.count("{") + 1)


@pytest.mark.parametrize("slashes", [26, 4000])
def test_a_run_of_slashes_then_a_fragment_costs_linear_steps(slashes: int) -> None:
    uri = "repo://x" + "/" * slashes + "#"
    verdict = uri_templates.parse(TEMPLATE).match(uri)
    assert verdict.matched is False
    assert 0 < verdict.steps <= steps_bound(TEMPLATE, uri)


def test_a_uri_past_the_cap_is_not_scanned() -> None:
    template = uri_templates.parse("x://{+rest}")
    at_cap = "x://" + "a" * (uri_templates.MAX_URI - 4)
    assert template.match(at_cap).matched is True
    assert template.match(at_cap + "a") == uri_templates.MatchVerdict(False, 0)


def test_a_template_past_the_length_cap_is_a_broken_template() -> None:
    longest = "x://{+a}" + "b" * (uri_templates.MAX_TEMPLATE - 8)
    assert matches(longest, "x://a" + "b" * (uri_templates.MAX_TEMPLATE - 8)) is True
    with pytest.raises(uri_templates.TemplateError, match="longer than 1024 characters"):
        uri_templates.parse(longest + "b")
    # A server's 250 KB template claims nothing, and costs no parsing past the cap.
    assert matches("x" * 250_000 + "{x}", "x" * 250_000 + "y") is False


LONG_LITERAL = "t://{+a}" + "b" * 1000
RUN = "t://" + "b" * (uri_templates.MAX_URI - 5) + "c"


def test_what_a_literal_compares_is_counted_in_characters() -> None:
    # {+a} can end anywhere, so the literal is tried at every position where it fits,
    # and each try may compare up to its 1,000 characters.
    verdict = uri_templates.parse(LONG_LITERAL).match(RUN)
    assert verdict.matched is False
    fits = len(RUN) - 1000 - 4 + 1
    assert verdict.steps >= fits * 1000
    assert verdict.steps <= steps_bound(LONG_LITERAL, RUN)


@pytest.mark.parametrize("budget", [1, 5_000, 9_000, 1_000_000])
def test_a_match_never_spends_more_than_its_budget(budget: int) -> None:
    for template, uri in [(LONG_LITERAL, RUN), (TEMPLATE, "repo://x" + "/" * 8000 + "#")]:
        verdict = uri_templates.parse(template).match(uri, budget)
        assert verdict.steps <= budget
        assert verdict.exhausted is (uri_templates.parse(template).match(uri).steps > budget)


def test_more_expressions_than_the_cap_is_a_broken_template() -> None:
    most = "x://" + "{a}" * uri_templates.MAX_EXPRESSIONS
    assert matches(most, "x://abc") is True
    with pytest.raises(uri_templates.TemplateError, match="expressions"):
        uri_templates.parse(most + "{b}")
    assert matches(most + "{b}", "x://abc") is False


# -- any template, any URI --

OPERATORS = ["", "+", "#", ".", "/", ";", "?", "&"]
expressions = st.builds(
    lambda op, name: "{" + op + name + "}",
    st.sampled_from(OPERATORS),
    st.sampled_from(["a", "b*", "c:3", "x,y"]),
)
# Literals and URIs are drawn from the characters the operators treat apart.
SPECIAL = "/.;&,%?#=:~-_"
literals = st.text(alphabet=SPECIAL + "aF0", max_size=4)


@st.composite
def hostile_cases(draw: st.DrawFn) -> tuple[str, str]:
    """A template, and a URI with its literals (mostly) in place and long runs of what
    some operator's expansion takes between them, ending on what none takes there."""
    exprs = draw(st.lists(expressions, max_size=uri_templates.MAX_EXPRESSIONS))
    adjacent = st.just("") | literals  # expressions side by side are the costly ones
    gaps = draw(st.lists(adjacent, min_size=len(exprs) + 1, max_size=len(exprs) + 1))
    template = gaps[0] + "".join(e + g for e, g in zip(exprs, gaps[1:], strict=True))
    runs = st.lists(
        st.tuples(st.sampled_from("/.;&,%aF0"), st.integers(0, uri_templates.MAX_URI)), max_size=2
    ).map(lambda rs: "".join(c * n for c, n in rs))
    shown = [draw(st.sampled_from([g] * 3 + [g + "/"]) | literals) for g in gaps]
    uri = shown[0] + "".join(draw(runs) + g for g in shown[1:])
    end = draw(st.sampled_from(["#", "?", "%", " ", ""]))
    return template, uri[: uri_templates.MAX_URI - len(end)] + end


@settings(max_examples=150, deadline=None)
@given(hostile_cases())
@example((TEMPLATE, "repo://x" + "/" * (uri_templates.MAX_URI - 9) + "#"))
@example(
    (
        "x://" + "{/a}{.b}{;c}{&d}{e}{+f}{#g}{?h}" * 4,
        ("x://" + "/.;&,%" * 1400)[: uri_templates.MAX_URI],
    )
)
def test_any_match_ends_within_linear_steps(case: tuple[str, str]) -> None:
    template, uri = case
    verdict = uri_templates.parse(template).match(uri)
    assert verdict.steps <= steps_bound(template, uri)


def old_pattern(template: str) -> re.Pattern[str]:
    """The regex matcher templates had before: the oracle, only on short URIs (where
    its backtracking costs nothing)."""
    unreserved = r"(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})"
    operators = {
        "": rf"(?:{unreserved}|,)*",
        "+": r"[^?#]*",
        "#": r"(?:#.*)?",
        ".": r"(?:\.[^/?#]*)*",
        "/": r"(?:/[^?#]*)*",
        ";": r"(?:;[^/?#]*)*",
        "?": r"(?:\?[^#]*)?",
        "&": r"(?:&[^#]*)*",
    }
    out: list[str] = []
    pos = 0
    for m in re.finditer(r"\{([^{}]*)\}", template):
        literal = template[pos : m.start()]
        if "{" in literal or "}" in literal:
            raise uri_templates.TemplateError(template)
        out.append(re.escape(literal))
        body = m.group(1)
        op = body[:1] if body[:1] in "+#./;?&" else ""
        if not body[len(op) :]:
            raise uri_templates.TemplateError(template)
        out.append(operators[op])
        pos = m.end()
    tail = template[pos:]
    if "{" in tail or "}" in tail:
        raise uri_templates.TemplateError(template)
    out.append(re.escape(tail))
    return re.compile("".join(out), re.DOTALL)


URI_CHARS = SPECIAL + "aFG0 \n"
percents = st.builds(lambda a, b: "%" + a + b, st.sampled_from("0aFG/"), st.sampled_from("0aFG/"))
pieces = st.lists(st.sampled_from(URI_CHARS) | percents, max_size=4).map("".join)


@st.composite
def near_expansions(draw: st.DrawFn) -> tuple[str, str]:
    """A small template and a URI made like its expansions, each literal kept or not:
    matches and near misses, not only misses."""
    exprs = draw(st.lists(expressions, max_size=4))
    gaps = draw(st.lists(literals, min_size=len(exprs) + 1, max_size=len(exprs) + 1))
    template = gaps[0] + "".join(e + g for e, g in zip(exprs, gaps[1:], strict=True))
    shown = [draw(st.sampled_from([g] * 6 + [g + "/", g[1:]]) | literals) for g in gaps]
    uri = shown[0] + "".join(draw(pieces) + g for g in shown[1:])
    return template, uri


@settings(max_examples=1500, deadline=None)
@given(near_expansions())
@example(("x://{a}", "x://%0G"))
@example(("x://{a}{.b}", "x://%aF.%."))
def test_matches_as_the_regexes_did(case: tuple[str, str]) -> None:
    template, uri = case
    assert matches(template, uri) is (old_pattern(template).fullmatch(uri) is not None)


def test_every_short_uri_matches_as_the_regexes_did() -> None:
    alphabet = "/.;&,%#?aF0G "
    uris = ["".join(chars) for n in range(4) for chars in itertools.product(alphabet, repeat=n)]
    shapes = [f"{{{op}a}}" for op in OPERATORS]
    shapes += [f"{{{a}a}}{{{b}b}}" for a in OPERATORS for b in OPERATORS]
    shapes += [f"{{{op}a}}/" for op in OPERATORS] + [f"a{{{op}a}}" for op in OPERATORS]
    for template in shapes:
        oracle = old_pattern(template)
        wrong = [u for u in uris if matches(template, u) is not bool(oracle.fullmatch(u))]
        assert wrong == [], template


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=SPECIAL + "a{}+", max_size=10), pieces)
def test_templates_are_refused_as_the_regexes_did(template: str, uri: str) -> None:
    try:
        oracle = old_pattern(template)
    except uri_templates.TemplateError:
        with pytest.raises(uri_templates.TemplateError):
            uri_templates.parse(template)
        assert matches(template, uri) is False
        return
    assert matches(template, uri) is (oracle.fullmatch(uri) is not None)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("notes://{id}", "notes://{note}", True),
        ("db://{t}/rows{?limit,offset}", "db://{table}/rows{?n}", True),
        ("file:///{path*}", "file:///{p:3}", True),  # modifiers do not change what matches
        ("file:///{+path}", "file:///{path}", False),
        ("notes://{id}", "notes:/{id}", False),
        ("notes://{id", "notes://{id", True),  # not a template: itself
        ("notes://{id", "notes://{x", False),
    ],
)
def test_templates_of_one_shape(a: str, b: str, same: bool) -> None:
    assert (uri_templates.shape(a) == uri_templates.shape(b)) is same


@pytest.mark.parametrize(
    ("template", "path"),
    [
        ("notes://{id}", "notes://{}"),
        ("notes://{id}{?v}", "notes://{}"),
        ("notes://{id}{&v}", "notes://{}"),
        ("notes://{id}{#part}", "notes://{}"),
        ("notes://{id}?mode=raw", "notes://{}"),
        ("notes://{id}#top", "notes://{}"),
        ("db://{t}/rows{?limit}{&offset}", "db://{}/rows"),
        ("file:///{+path}{.ext}{/more}", "file:///{+}{.}{/}"),  # all of the path
        ("a://x&y/{id}", "a://x&y/{}"),  # a literal & is no query
        ("notes://{id", "notes://{id"),  # not a template: itself
        ("NoTes://{id}", "notes://{}"),  # a scheme is case-insensitive
    ],
)
def test_the_path_shape_leaves_out_the_query_and_the_fragment(template: str, path: str) -> None:
    assert uri_templates.path_shape(template) == path


@pytest.mark.parametrize(
    ("template", "reach"),
    [
        ("notes://{id}", "notes://"),
        ("NOTES://Box/{id}", "notes://Box/"),  # the scheme alone in lower case
        ("NOTES{x}", "notes"),  # all of it may be the scheme
        ("{+uri}", ""),
        ("notes://{id", "notes://"),  # not a template: its text before a brace
        # A file server reads a file URI's localhost, in any case, as no host, and one
        # without an authority from the root; a web server a host in any case.
        ("file://localhost/data/{+p}", "file:///data/"),
        ("FILE://LocalHost/data/{+p}", "file:///data/"),
        ("file:/data/{+p}", "file:///data/"),
        ("file:data/{+p}", "file:///data/"),
        ("HTTPS://Example.COM/{x}", "https://example.com/"),
        ("https://Ex{host}/", "https://ex"),
        # Cut short, an authority may yet be localhost, or one yet to come.
        ("file://local{host}/", "file://"),
        ("file:/{+p}", "file:"),
    ],
)
def test_every_uri_a_template_expands_to_begins_with_its_reach(template: str, reach: str) -> None:
    assert uri_templates.reach(template) == reach


@pytest.mark.parametrize(
    ("template", "expanded"),
    [
        ("file://localhost/data/{+p}", "file://localhost/data/a/b"),
        ("file:/{+p}", "file://localhost/etc/passwd"),
        ("file:/{+p}", "file://host/x"),
        ("file://local{host}/x", "file://localhost/x"),
        ("HTTP://Ex{h}/a", "HTTP://ExAMPLE.com/a"),
        ("https://Ex%41mple.com/{p}", "https://Ex%41mple.com/x"),
    ],
)
def test_a_uri_read_as_a_server_reads_it_begins_with_its_templates_reach(
    template: str, expanded: str
) -> None:
    assert matches(template, expanded)
    assert read_as(expanded).startswith(uri_templates.reach(template))


@pytest.mark.parametrize(
    ("template", "expanded"),
    [
        ("file://localhost/data/{+p}", "file:///data/a/b"),
        ("file://localhost/data/{+p}", "FILE://LOCALHOST/data/a"),
        ("file:///data/{+p}", "file:/data/a"),
        ("NOTES://{id}", "notes://1"),
        ("notes://{id}", "Notes://1"),
        ("HTTPS://Example.COM/{x}", "https://EXAMPLE.com/y"),
    ],
)
def test_a_template_read_as_a_server_reads_it_matches_each_spelling_of_its_uris(
    template: str, expanded: str
) -> None:
    assert uri_templates.parse(uri_templates.read_form(template)).match(read_as(expanded)).matched


@settings(max_examples=100, deadline=None)
@given(hostile_cases(), st.text(alphabet="abcxyz_", min_size=1, max_size=4))
def test_templates_of_one_shape_match_the_same_uris(case: tuple[str, str], name: str) -> None:
    template, uri = case
    renamed = re.sub(r"\{([+#./;?&]?)[^}]*\}", lambda m: "{" + m[1] + name + "}", template)
    assert uri_templates.shape(renamed) == uri_templates.shape(template)
    assert matches(renamed, uri[:200]) == matches(template, uri[:200])


def test_a_template_quoted_in_an_error_cut_inside_a_secret_shows_none_of_it_once_guarded() -> None:
    with pytest.raises(uri_templates.TemplateError) as info:
        uri_templates.parse(padded(80) + "}")
    said = str(info.value)
    assert SECRET[:-1] in said and SECRET not in said
    assert beginnings(guarded(said)) == [] and MARKER in guarded(said)
