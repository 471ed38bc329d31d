"""Where each knob is used, in one pass over the tokens of the user's files: in a launch (`<<<`,
a `dim3`), code, a pragma, an `#if`, another macro's definition, and in which function."""

from __future__ import annotations

from annotune.annotate.problem import Use
from annotune.annotate.source import Directive, ParsedSource, SourceFile, Token

CUDA_BUILTINS = frozenset(("threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"))
"""What these names are in device code: CUDA's own variables, whatever the host names so
(`int blockDim = 256;` in `main` is no value of a kernel's `blockDim.x`)."""


def find_uses(parsed: ParsedSource, names: set[str]) -> dict[str, list[Use]]:
    """Every use of every parameter, in one pass over the tokens of the user's files; in a
    kernel or a `__device__` function, a CUDA builtin's name is none."""
    uses: dict[str, list[Use]] = {name: [] for name in names}
    for source in parsed.files:
        spans = sorted((d.hash_token.start, d.end, d) for d in source.directives)
        launch_depth = 0
        statement_is_dim3 = False
        span_index = 0
        for token in source.tokens:
            while span_index < len(spans) and spans[span_index][1] < token.start:
                span_index += 1
            in_directive = (
                spans[span_index][2]
                if span_index < len(spans) and spans[span_index][0] <= token.start
                else None
            )
            if in_directive is not None:
                if token.kind == "identifier" and token.text in uses:
                    use = _directive_use(source, in_directive, token)
                    if use is not None:
                        uses[token.text].append(use)
                continue
            if token.kind == "punctuation":
                if token.text == "<<<":
                    launch_depth += 1
                elif token.text == ">>>":
                    launch_depth = max(0, launch_depth - 1)
                elif token.text in (";", "{", "}"):
                    statement_is_dim3 = False
                continue
            if token.kind == "identifier" and token.text == "dim3":
                statement_is_dim3 = True
            if token.kind == "identifier" and token.text in uses:
                function = parsed.function_at(source.path, token.start)
                if token.text in CUDA_BUILTINS and function and function.runs_on_device:
                    continue  # CUDA's `blockDim.x`, not a host variable named so
                kind = "launch" if launch_depth or statement_is_dim3 else "code"
                uses[token.text].append(
                    Use(
                        kind,
                        source.location(token.start),
                        function.name if function else None,
                        function.is_kernel if function else False,
                    )
                )
    return uses


def _directive_use(source: SourceFile, directive: Directive, token: Token) -> Use | None:
    words = directive.words
    location = source.location(token.start)
    if directive.name == "define":
        if words and words[0].start == token.start:
            return None  # the definition itself
        return Use("macro", location, detail=words[0].text if words else "")
    if directive.name in ("ifndef", "ifdef", "undef", "include"):
        return None
    if directive.name in ("if", "elif"):
        index = words.index(token)
        previous = [w.text for w in words[max(0, index - 2) : index]]
        if "defined" in previous:
            return None
        return Use("preprocessor", location)
    if directive.name == "pragma":
        if words and words[0].text == "annotune":
            return None
        return Use("pragma", location)
    return None
