"""A scanner of C declarations over the compiler's tokens (no comments, no directives, nothing
skipped): the initializer of a name (`= 256`, `{256}`, `(256)`) and whether it is declared there
as a constant, a variable or neither, enough to find a knob a program writes as a C name."""

from __future__ import annotations

from annotune.annotate.source import SourceFile, Token

_DECLARATION_ENDS = {";", "{", "}"}
_CLOSING = {")": "(", "]": "[", "}": "{"}


def code_tokens(source: SourceFile) -> list[Token]:
    """The file's tokens the compiler parses as C: no comments, no preprocessor lines, nothing
    in a skipped `#if` branch."""
    spans = sorted((d.hash_token.start, d.end) for d in source.directives)
    tokens, at = [], 0
    for token in source.tokens:
        while at < len(spans) and spans[at][1] < token.start:
            at += 1
        in_directive = at < len(spans) and spans[at][0] <= token.start
        if token.kind != "comment" and not in_directive and source.is_active(token.start):
            tokens.append(token)
    return tokens


def initializer_tokens(tokens: list[Token], index: int) -> tuple[Token, ...] | None:
    """The tokens that initialize the name at `index` (`= 256`, `{256}`, `(256)`), up to the
    `;`, `,` or closing bracket that ends them; None when no initializer follows the name."""
    if index + 1 >= len(tokens) or tokens[index + 1].text not in ("=", "{", "("):
        return None
    opening = tokens[index + 1].text
    depth = 1 if opening != "=" else 0
    value: list[Token] = []
    for token in tokens[index + 2 :]:
        if token.text in ("(", "[", "{"):
            depth += 1
        elif token.text in _CLOSING:
            depth -= 1
            if depth < 0 or (depth == 0 and opening != "="):
                break
        elif depth == 0 and token.text in (";", ","):
            break
        value.append(token)
    else:
        return None
    return tuple(value) or None


_STATEMENT_WORDS = frozenset(
    ("return", "case", "goto", "else", "do", "throw", "delete", "new", "sizeof", "typedef",
     "using", "namespace", "co_return", "co_yield", "if", "while", "for", "switch")
)  # fmt: skip


def declaration_kind(tokens: list[Token], index: int) -> str | None:
    """What the name at `index` is declared as there: "constant" (an enumerator, or a
    declaration that says `const` or `constexpr`), "variable" (a plain declaration, `int n = 4`
    or `dim3 blocks (256)`), or None (an assignment, a pointer, a reference, a typedef, a
    function parameter). The declaration starts after the `;`, `{` or `}` before it."""
    depth, at = 0, index - 1
    while at >= 0:
        text = tokens[at].text
        if text in (")", "]"):  # a group inside the declaration (`int a[4], n = 2`)
            depth += 1
        elif text in ("(", "[") and depth:
            depth -= 1
        elif text in _DECLARATION_ENDS or text in ("(", "["):
            break
        at -= 1
    stop = tokens[at].text if at >= 0 else ";"
    declaration = tokens[at + 1 : index]
    words = [t.text for t in declaration]
    previous = tokens[index - 1].text if index else ""
    if stop == "{" and previous in ("{", ",") and _opens_enum(tokens, at):
        return "constant"  # an enumerator: `enum { A = 1, B = 2 }`
    if stop in ("(", "[") or previous in ("*", "&", "&&", "::", ".", "->"):
        return None
    if not declaration or declaration[0].kind not in ("identifier", "keyword"):
        return None
    if _STATEMENT_WORDS & set(words) or (previous != "," and not _specifiers(declaration)):
        return None
    return "constant" if {"const", "constexpr"} & set(words) else "variable"


def _specifiers(declaration: list[Token]) -> bool:
    """Whether the tokens before a first declarator's name are a type and its specifiers
    (`static const unsigned int`, `dim3`, `std::size_t`): names and keywords, `::` between."""
    return all(t.kind in ("identifier", "keyword") or t.text == "::" for t in declaration)


def _opens_enum(tokens: list[Token], brace: int) -> bool:
    """Whether the `{` at `brace` opens an enum's body (`enum`, `enum class E : int`)."""
    at = brace - 1
    while at >= 0 and tokens[at].text not in _DECLARATION_ENDS | {")"}:
        if tokens[at].text == "enum":
            return True
        at -= 1
    return False
