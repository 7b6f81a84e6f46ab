"""Recursive-descent parsing of P4_16 expressions and types (the token cursor lives here too).

``parser.py`` builds statements and declarations on top of :class:`ExprParser`.  Precedence
follows the P4_16 grammar (spec Appendix: ``|`` binds tighter than ``==``, unlike C).  ``>>`` is
two adjacent ``>`` tokens so that nested generics ``bit<bit<8>>`` lex cleanly.
"""
from __future__ import annotations

from .ast import (Arg, Binary, BitType, BoolLit, BoolType, Call, Cast, Default, DontCareType,
                  ErrorType, Expr, Index, IntLit, IntType, ListExpr, Mask, Member, Name, Range,
                  Slice, StackType, StringType, StrLit, Ternary, TypeExpr, TypeName, Unary,
                  VarbitType, VoidType)
from .diagnostics import Pos, unknown
from .lexer import Token, TokKind

__all__ = ["ParseError", "ExprParser"]

# Binary operators by precedence level, loosest first (P4_16 grammar's %left table).
_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",), ("&&",), ("==", "!="), ("<", ">", "<=", ">="), ("|",), ("^",), ("&",),
    ("<<", ">>"), ("++", "+", "-", "|+|", "|-|"), ("*", "/", "%"),
)
_PRECEDENCE = {op: level for level, ops in enumerate(_LEVELS) for op in ops}
_TYPE_KEYWORDS = frozenset({"bit", "int", "bool", "varbit", "error", "string", "void"})


class ParseError(Exception):
    def __init__(self, pos: Pos, message: str) -> None:
        super().__init__(message)
        self.pos = pos
        self.message = message


class ExprParser:
    """Token cursor plus expression/type grammar."""

    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.i = 0
        # Names declared as types so far: '(' IDENT ')' is a cast only when IDENT is a type.
        self.type_names: set[str] = set()

    # ------------------------------------------------------------ cursor
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and t.kind in (TokKind.OP, TokKind.KEYWORD)

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.at(text):
            raise ParseError(self.tok.pos, f"syntax error, expected '{text}'"
                             f"{' ' + what if what else ''} but found '{self.tok}'")
        t = self.tok
        self.i += 1
        return t

    def ident(self, what: str = "a name") -> Token:
        t = self.tok
        if t.kind is TokKind.IDENT:
            self.i += 1
            return t
        # Contextual keywords usable as names (spec allows 'apply', 'key', ... as members).
        if t.kind is TokKind.KEYWORD and t.text in ("apply", "key", "actions", "state", "entries",
                                                    "type", "priority", "value_set", "list"):
            self.i += 1
            return t
        raise ParseError(t.pos, f"syntax error, expected {what} but found '{t}'")

    def at_shift_right(self) -> bool:
        a, b = self.tok, self.peek()
        return (a.text == ">" and b.text == ">" and a.kind is TokKind.OP and b.kind is TokKind.OP
                and a.pos.line == b.pos.line and b.pos.col == a.pos.col + 1)

    # ------------------------------------------------------------ types
    def starts_type(self) -> bool:
        t = self.tok
        if t.kind is TokKind.KEYWORD and t.text in _TYPE_KEYWORDS | {"tuple"}:
            return True
        return t.kind is TokKind.IDENT and t.text in self.type_names

    # typeRef: baseType | typeName [ '<' typeArgs '>' ] | typeRef '[' expr ']' | tuple<...>
    def parse_type(self) -> TypeExpr:
        t = self.tok
        base: TypeExpr
        if self.accept("bit"):
            base = BitType(t.pos, self._width_arg())
        elif self.accept("int"):
            base = IntType(t.pos, self._width_arg())
        elif self.accept("varbit"):
            w = self._width_arg()
            if w is None:
                raise ParseError(t.pos, "varbit needs a width")
            base = VarbitType(t.pos, w)
        elif self.accept("bool"):
            base = BoolType(t.pos)
        elif self.accept("error"):
            base = ErrorType(t.pos)
        elif self.accept("string"):
            base = StringType(t.pos)
        elif self.accept("void"):
            base = VoidType(t.pos)
        elif self.at("_"):
            self.i += 1
            base = DontCareType(t.pos)
        elif self.accept("tuple"):
            base = TypeName(t.pos, "tuple", self._type_args())
        else:
            name = self.ident("a type")
            args: tuple[TypeExpr, ...] = ()
            if self.at("<") and self.peek().kind is TokKind.INT:
                # Only bit/int/varbit take a number; 'bitt<8>' is a misspelling, not generics.
                raise ParseError(name.pos, unknown("type", name.text, ("bit", "int", "varbit")))
            if self.at("<"):
                args = self._type_args()
            base = TypeName(name.pos, name.text, args)
        while self.at("["):
            self.i += 1
            size = self.parse_expr()
            self.expect("]")
            base = StackType(base.pos, base, size)
        return base

    def _width_arg(self) -> Expr | None:
        if not self.accept("<"):
            return None
        if self.at("("):
            self.i += 1
            w = self.parse_expr()
            self.expect(")")
        else:
            t = self.tok
            if t.kind is TokKind.INT:
                self.i += 1
                v, width, signed = t.int_parts()
                w = IntLit(t.pos, v, width, signed, t.text)
            else:
                nm = self.ident("a width")
                w = Name(nm.pos, nm.text)
        self.expect(">")
        return w

    def _type_args(self) -> tuple[TypeExpr, ...]:
        self.expect("<")
        args = [self.parse_type()]
        while self.accept(","):
            args.append(self.parse_type())
        self.expect(">")
        return tuple(args)

    # ------------------------------------------------------------ expressions
    # expression: expr '?' expr ':' expr | binary
    def parse_expr(self) -> Expr:
        cond = self._binary(0)
        if self.at("?"):
            pos = self.tok.pos
            self.i += 1
            a = self.parse_expr()
            self.expect(":")
            b = self.parse_expr()
            return Ternary(pos, cond, a, b)
        return cond

    # binary: unary (op unary)* by precedence level
    # (precedence climbing: recursion depth grows with nesting, not with the number of levels)
    def _binary(self, min_level: int) -> Expr:
        left = self._unary()
        while True:
            t = self.tok
            if self.at_shift_right():
                op, width = ">>", 2
            elif t.kind is TokKind.OP and t.text in _PRECEDENCE and t.text != ">>":
                op, width = t.text, 1
            else:
                return left
            level = _PRECEDENCE[op]
            if level < min_level:
                return left
            self.i += width
            right = self._binary(level + 1)  # left-associative
            left = Binary(t.pos, op, left, right)

    # unary: ('!' | '~' | '-' | '+') unary | '(' type ')' unary | postfix
    def _unary(self) -> Expr:
        t = self.tok
        if t.kind is TokKind.OP and t.text in ("!", "~", "-", "+"):
            self.i += 1
            operand = self._unary()
            if t.text == "+":
                return operand
            return Unary(t.pos, t.text, operand)
        if self.at("(") and self._is_cast():
            self.i += 1
            typ = self.parse_type()
            self.expect(")")
            return Cast(t.pos, typ, self._unary())
        return self._postfix()

    def _is_cast(self) -> bool:
        nxt = self.peek()
        if nxt.kind is TokKind.KEYWORD and nxt.text in ("bit", "int", "bool", "varbit"):
            return True
        return (nxt.kind is TokKind.IDENT and nxt.text in self.type_names
                and self.peek(2).text in (")", "<"))

    # postfix: primary ( '.' name | '[' expr [':' expr] ']' | ['<' types '>'] '(' args ')' )*
    def _postfix(self) -> Expr:
        e = self._primary()
        while True:
            t = self.tok
            if self.accept("."):
                m = self.ident("a member name")
                e = Member(m.pos, e, m.text)
            elif self.accept("["):
                a = self.parse_expr()
                if self.accept(":"):
                    b = self.parse_expr()
                    self.expect("]")
                    e = Slice(t.pos, e, a, b)
                else:
                    self.expect("]")
                    e = Index(t.pos, e, a)
            elif self.at("(") or (self.at("<") and self._type_args_follow()):
                targs: tuple[TypeExpr, ...] = ()
                if self.at("<"):
                    targs = self._type_args()
                e = Call(e.pos, e, targs, self.parse_args())
            else:
                return e

    def _type_args_follow(self) -> bool:
        save = self.i
        try:
            self._type_args()
            return self.at("(")
        except ParseError:
            return False
        finally:
            self.i = save

    # args: '(' [arg (',' arg)*] ')' ; arg: expr | name '=' expr | '_'
    def parse_args(self) -> tuple[Arg, ...]:
        self.expect("(")
        args: list[Arg] = []
        if not self.at(")"):
            while True:
                t = self.tok
                if self.at("_") and self.peek().text in (",", ")"):
                    self.i += 1
                    args.append(Arg(t.pos, None, None))
                elif t.kind is TokKind.IDENT and self.peek().text == "=":
                    self.i += 2
                    args.append(Arg(t.pos, t.text, self.parse_expr()))
                else:
                    args.append(Arg(t.pos, None, self.parse_expr()))
                if not self.accept(","):
                    break
        self.expect(")")
        return tuple(args)

    # primary: INT | true | false | STRING | name | '.' name | '(' expr ')' | '{' exprs '}'
    #        | error '.' name | type-ish names used as values (e.g. bit<8> in casts handled above)
    def _primary(self) -> Expr:
        t = self.tok
        if t.kind is TokKind.INT:
            self.i += 1
            v, width, signed = t.int_parts()
            return IntLit(t.pos, v, width, signed, t.text)
        if t.kind is TokKind.STRING:
            self.i += 1
            return StrLit(t.pos, str(t.value))
        if self.accept("true"):
            return BoolLit(t.pos, True)
        if self.accept("false"):
            return BoolLit(t.pos, False)
        if self.accept("error"):
            return Name(t.pos, "error")
        if self.accept("this"):
            raise ParseError(t.pos, "unsupported construct: 'this'")
        if self.at("."):
            self.i += 1
            n = self.ident()
            return Name(n.pos, n.text, top_level=True)
        if self.accept("("):
            e = self.parse_expr()
            self.expect(")")
            return e
        if self.accept("{"):
            # '{' [expr {',' expr}] '}'  |  '{' name '=' expr {',' name '=' expr} [','] '}'
            items: list[Expr] = []
            names: list[str] = []
            while not self.at("}"):
                if self.tok.kind is TokKind.IDENT and self.peek().text == "=":
                    names.append(self.tok.text)
                    self.i += 2
                items.append(self.parse_expr())
                if not self.accept(","):
                    break
            self.expect("}")
            if names and len(names) != len(items):
                raise ParseError(t.pos, "syntax error, a structure expression names every "
                                        "field or none")
            return ListExpr(t.pos, tuple(items), tuple(names))
        if t.kind is TokKind.IDENT or (t.kind is TokKind.KEYWORD and t.text in (
                "apply", "key", "type", "priority", "entries", "actions", "state", "list")):
            # Contextual keywords name variables and fields too (p4c accepts `type = ...`).
            self.i += 1
            return Name(t.pos, t.text)
        if t.kind is TokKind.EOF:
            raise ParseError(t.pos, "syntax error, unexpected end of file")
        raise ParseError(t.pos, f"syntax error, unexpected '{t}' in an expression")

    # keysetElement: default | '_' | expr [ '&&&' expr | '..' expr ]
    def parse_keyset_element(self) -> Expr:
        t = self.tok
        if self.accept("default") or self.accept("_"):
            return Default(t.pos)
        e = self.parse_expr()
        if self.accept("&&&"):
            return Mask(t.pos, e, self.parse_expr())
        if self.accept(".."):
            return Range(t.pos, e, self.parse_expr())
        return e

    # keyset: '(' elements ')' | element   (a parenthesised single element stays a value)
    def parse_keyset(self) -> Expr:
        t = self.tok
        if self.at("("):
            save = self.i
            self.i += 1
            items = [self.parse_keyset_element()]
            while self.accept(","):
                items.append(self.parse_keyset_element())
            if self.accept(")") and (len(items) > 1 or self.at(":")):
                return ListExpr(t.pos, tuple(items)) if len(items) > 1 else items[0]
            self.i = save
        return self.parse_keyset_element()
