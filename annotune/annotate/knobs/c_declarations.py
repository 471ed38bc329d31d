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
    if previous in ("struct", "class", "union", "enum"):  # `struct S { ... }`: a type's body
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


_DECLARING_WORDS = frozenset(
    ("void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "bool",
     "_Bool", "auto", "const", "volatile", "static", "extern", "register", "inline", "constexpr",
     "consteval", "constinit", "mutable", "thread_local", "struct", "class", "union", "enum",
     "typename", "typedef", "restrict", "wchar_t", "char8_t", "char16_t", "char32_t")
)  # fmt: skip
_TYPE_WORDS = frozenset(("struct", "class", "union", "enum", "typedef", "typename"))
_CONTROL_WORDS = frozenset(("for", "if", "while", "switch", "catch"))


def name_role(tokens: list[Token], index: int) -> str | None:
    """What the name at `index` is in the code when no `-D` can stand for it, as a phrase
    ("a function", "a function parameter", ...); None where it is a use a macro can replace
    (`a[bs]`, `return bs;`, `f(bs)`). A config knob with no `#define` and no declaration
    annotune can rewrite becomes `-Dbs=4`, which replaces every such name: `int f(int bs)`
    reads `int f(int 4)`, `constexpr int num_threads()` reads `constexpr int 128()`, and the
    compiler fails at `<command-line>` on every variant. Read from the tokens alone: a name
    after a type (`int bs`, `size_t bs`, `float *bs`) is declared there, a name before `(`
    is a function's, one after `.`, `->` or `::` a member's."""
    previous = tokens[index - 1].text if index else ""
    if previous in (".", "->", "::"):
        return "a member of a struct, class or namespace"
    if index + 1 < len(tokens) and tokens[index + 1].text == "(":
        return "a function"
    if not _after_type(tokens, index):
        return None
    depth, at = 0, index - 1
    while at >= 0 and tokens[at].text not in _DECLARATION_ENDS:
        text = tokens[at].text
        if text == "template":
            return "a template parameter"
        if text in _TYPE_WORDS:
            return "a type"
        if text in (")", "]"):
            depth += 1
        elif text in ("(", "[") and depth:
            depth -= 1
        elif text == "(":
            before = tokens[at - 1].text if at else ""
            return "a variable of a `for` or `if`" if before in _CONTROL_WORDS else (
                "a function parameter"
            )
        at -= 1
    return "a variable no rewrite can set (no initializer, or a pointer's or a reference's)"


def _after_type(tokens: list[Token], index: int) -> bool:
    """Whether the name at `index` follows a type, as a declared name does: a type's keyword
    or a name (`int bs`, `dim3 bs`; two names never stand side by side in an expression), or
    `*`, `&`, `&&` after one of those keywords (`const float *bs`)."""
    at = index - 1
    while at >= 0 and tokens[at].text in ("*", "&", "&&"):
        at -= 1
    if at < 0:
        return False
    token = tokens[at]
    if at < index - 1:  # a pointer or reference: `a * bs` may be a product
        return token.text in _DECLARING_WORDS
    if token.kind == "keyword":
        return token.text in _DECLARING_WORDS
    return token.kind == "identifier"
