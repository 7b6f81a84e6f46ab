"""Tokens of P4_16 (spec §6.3) from preprocessed text, with positions in the original files.

Owns cpp line markers (``# N "file" flags``): they never become tokens, they move the
position that later tokens report.  Integer literals keep their width/signedness prefix
(``8w5``, ``4s3``) decoded here so the parser sees values, not text.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from .diagnostics import Diagnostics, Pos

__all__ = ["TokKind", "Token", "tokenize", "KEYWORDS"]


class TokKind(enum.Enum):
    IDENT = "identifier"
    TYPE_IDENT = "type"  # reserved for parser use; lexer emits IDENT
    INT = "integer"
    STRING = "string"
    KEYWORD = "keyword"
    OP = "operator"
    EOF = "end of file"


KEYWORDS = frozenset("""
abstract action apply bit bool break const continue control default else entries enum error exit
extern false for header header_union if in inout int key list match_kind out package parser
priority return select state string struct switch table this transition true tuple type typedef
varbit void value_set
""".split())

# Longest operators first so that the regex alternation prefers them.
_OPS = ["&&&", "|+|=", "|-|=", "<<=", ">>=", "|+|", "|-|", "..", "++", "&&", "||", "==", "!=",
        ">=", "<=", "<<", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
        "{", "}", "(", ")", "[", "]", ";", ":", ",", ".", "?", "=", "<", ">", "+", "-", "*",
        "/", "%", "&", "|", "^", "~", "!", "@", "_"]


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokKind
    text: str
    pos: Pos
    value: object = None  # int literal: (value, width | None, signed)

    def __str__(self) -> str:
        return self.text if self.kind is not TokKind.EOF else "end of file"

    def int_parts(self) -> tuple[int, int | None, bool]:
        """(value, width | None, signed) of an INT token, as the lexer decoded it."""
        assert isinstance(self.value, tuple), "int_parts() of a token that is not an INT"
        return self.value


# Blanks before a token are part of its match (half as many matches as tokens-and-blanks);
# a run of blanks at the very end matches as `ws`.
_TOKEN_RE = re.compile(r"""
[ \t\r\f\v]*
(?:
  (?P<nl>\n)
| (?P<lcomment>//[^\n]*)
| (?P<bcomment>/\*.*?\*/)
| (?P<string>"(?:[^"\\\n]|\\.)*")
| (?P<int>(?:[0-9]+[ws])?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|[0-9][0-9_]*))
| (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
| (?P<op>""" + "|".join(re.escape(o) for o in _OPS) + r""")
| (?P<ws>$)
)
""", re.VERBOSE | re.DOTALL)

_LINE_MARKER = re.compile(r'#\s*(?:line\s+)?(\d+)\s+"((?:[^"\\]|\\.)*)"[^\n]*')


def _int_value(text: str) -> tuple[int, int | None, bool]:
    width: int | None = None
    signed = False
    m = re.match(r"([0-9]+)([ws])(.*)", text)
    if m and not text.lower().startswith("0x"):
        width = int(m.group(1))
        signed = m.group(2) == "s"
        text = m.group(3)
    body = text.replace("_", "")
    low = body.lower()
    if low.startswith("0x"):
        val = int(body[2:], 16)
    elif low.startswith("0b"):
        val = int(body[2:], 2)
    elif low.startswith("0o"):
        val = int(body[2:], 8)
    elif low.startswith("0d"):
        val = int(body[2:], 10)
    else:
        val = int(body, 10)
    return val, width, signed


def _annotation_depth(tokens: list[Token]) -> int:
    """How many parentheses of an annotation's body ``@name(...)`` are open at the end of
    ``tokens`` (0: not inside one).  Only asked for at an unexpected character (rare), so
    the backward scan (bounded: bodies are short) costs nothing on ordinary programs."""
    depth = 0
    for k in range(len(tokens) - 1, max(len(tokens) - 4096, 0) - 1, -1):
        t = tokens[k]
        if t.kind is not TokKind.OP:
            continue
        if t.text == ")":
            depth -= 1
        elif t.text == "(":
            depth += 1
            if depth > 0 and k >= 2 and tokens[k - 2].text == "@" and \
                    tokens[k - 1].kind in (TokKind.IDENT, TokKind.KEYWORD):
                return depth
    return 0


def tokenize(text: str, default_file: str, diags: Diagnostics) -> list[Token]:
    """Split preprocessed text into tokens; bad characters are reported and skipped."""
    tokens: list[Token] = []
    file = default_file
    line = 1
    line_start = 0
    i = 0
    n = len(text)
    at_line_start = True
    while i < n:
        if at_line_start and text.startswith("#", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            m = _LINE_MARKER.fullmatch(text, i, end)
            if m:
                line = int(m.group(1))
                file = m.group(2).encode().decode("unicode_escape")
            else:
                diags.error(Pos(file, line, 1), "unexpected preprocessor directive")
                line += 1
            i = end + 1
            line_start = i
            continue
        m = _TOKEN_RE.match(text, i)
        if m is None:
            j = i + len(text[i:]) - len(text[i:].lstrip(" \t\r\f\v"))
            pos = Pos(file, line, j - line_start + 1)
            if _annotation_depth(tokens) > 0:
                # The body of an unstructured annotation is any token sequence (spec 18.1):
                # p4c keeps such a character as a token of the body.
                tokens.append(Token(TokKind.OP, text[j], pos))
            else:
                diags.error(pos, f"unexpected character {text[j]!r}")
            i = j + 1
            continue
        kind = m.lastgroup
        assert kind is not None
        start = m.start(kind)
        col = start - line_start + 1
        tok_text = m.group(kind)
        if kind == "ws":
            break
        at_line_start = False
        if kind == "nl":
            line += 1
            line_start = m.end()
            at_line_start = True
        elif kind == "bcomment":
            nls = tok_text.count("\n")
            if nls:
                line += nls
                line_start = start + tok_text.rfind("\n") + 1
        elif kind == "ws" or kind == "lcomment":
            pass
        else:
            pos = Pos(file, line, col)
            if kind == "int":
                try:
                    tokens.append(Token(TokKind.INT, tok_text, pos, _int_value(tok_text)))
                except ValueError:
                    diags.error(pos, f"malformed integer literal '{tok_text}'")
            elif kind == "ident":
                if tok_text == "_":
                    tokens.append(Token(TokKind.OP, tok_text, pos))
                elif tok_text in KEYWORDS:
                    tokens.append(Token(TokKind.KEYWORD, tok_text, pos))
                else:
                    tokens.append(Token(TokKind.IDENT, tok_text, pos))
            elif kind == "string":
                tokens.append(Token(TokKind.STRING, tok_text, pos, tok_text[1:-1]))
            else:
                tokens.append(Token(TokKind.OP, tok_text, pos))
        i = m.end()
    tokens.append(Token(TokKind.EOF, "", Pos(file, line, i - line_start + 1)))
    return tokens
