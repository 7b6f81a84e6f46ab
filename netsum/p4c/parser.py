"""Recursive-descent parser: tokens → :class:`ast.Program` (statements and declarations).

Expressions and types come from :class:`parse_expr.ExprParser`.  Each parse function has the
grammar rule it implements in a comment.  On a syntax error the parser reports it, skips to
the end of the enclosing declaration and goes on, so one run reports several errors.
"""
from __future__ import annotations

from .ast import (ActionDecl, Annotation, Assign, Binary, Block, Break, Call, CallStmt,
                  ConstDecl, Continue, ControlDecl, ControlTypeDecl, Default, EmptyStmt,
                  EnumDecl, ErrorDecl, Exit, Expr, ExternDecl, Field, For, ForIn, FunctionDecl,
                  BitType, BoolType, HeaderDecl, HeaderUnionDecl, If, IntType, Range, StackType,
                  Instantiation, KeyElement, ListExpr, MatchKindDecl, MethodDecl, Name, Node,
                  PackageDecl, Param, ParserDecl, ParserState, ParserTypeDecl, Program, Return,
                  Select, SelectCase, Stmt, StructDecl, Switch, SwitchCase, TableDecl,
                  TableEntry, TableProperty, TypeName, Typedef, VarDecl)
from . import structured_annotations
from .diagnostics import Diagnostics
from .lexer import Token, TokKind
from .parse_expr import ExprParser, ParseError

__all__ = ["parse"]


_COMPOUND = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "&=": "&", "|=": "|",
             "^=": "^", "<<=": "<<", ">>=": ">>", "|+|=": "|+|", "|-|=": "|-|"}


def parse(tokens: list[Token], diags: Diagnostics) -> Program:
    p = Parser(tokens, diags)
    return p.program()


class Parser(ExprParser):
    def __init__(self, tokens: list[Token], diags: Diagnostics) -> None:
        super().__init__(tokens)
        self.diags = diags

    def _recover(self, err: ParseError, start: int | None = None) -> None:
        """Report, then skip to the end of the declaration that began at token ``start``:
        past the '}' closing the braces it opened, or past its ';' when none is open.  A '}'
        of an enclosing block is left alone (unless it is the offending token itself)."""
        self.diags.error(err.pos, err.message)
        depth = 0
        if start is not None:
            for tok in self.toks[start:self.i]:
                if tok.kind is TokKind.OP and tok.text == "{":
                    depth += 1
                elif tok.kind is TokKind.OP and tok.text == "}":
                    depth -= 1
            depth = max(depth, 0)
        self._skip_to_end(depth, consume_stray_close=start is None)

    def _skip_to_end(self, depth: int, consume_stray_close: bool = False) -> None:
        """Skip tokens to the end of the current declaration/statement: a ';' or the '}' that
        closes what was open (`depth` braces already open); a '}' of an enclosing block stays,
        unless it is the very token we start at and `consume_stray_close` (a stray top-level
        '}' is the error itself)."""
        at_start = self.i
        while self.tok.kind is not TokKind.EOF:
            t = self.tok.text if self.tok.kind is TokKind.OP else ""
            if t == "}" and depth == 0:
                if consume_stray_close and self.i == at_start:
                    self.i += 1
                return
            self.i += 1
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if depth == 0:
                    return
            elif t == ";" and depth == 0:
                return

    # program: declaration*
    def program(self) -> Program:
        decls: list[Node] = []
        start = self.tok.pos
        while self.tok.kind is not TokKind.EOF:
            if self.accept(";"):
                continue
            begin = self.i
            try:
                decls.append(self.declaration())
            except ParseError as err:
                self._recover(err, begin)
                if self.i == begin:
                    self.i += 1  # always make progress
        return Program(start, tuple(decls))

    # annotations: ('@' name ['(' tokens ')'])*
    def annotations(self) -> tuple[Annotation, ...]:
        out: list[Annotation] = []
        while self.at("@"):
            at = self.tok
            self.i += 1
            name = self.ident("an annotation name")
            args: tuple[Expr, ...] = ()
            body = ""
            if self.at("(") and self.tok.pos.line == name.pos.line:
                start = self.i + 1
                depth = 0
                while True:
                    t = self.tok
                    if t.kind is TokKind.EOF:
                        raise ParseError(t.pos, "unterminated annotation")
                    self.i += 1
                    if t.text == "(" and t.kind is TokKind.OP:
                        depth += 1
                    elif t.text == ")" and t.kind is TokKind.OP:
                        depth -= 1
                        if depth == 0:
                            break
                body_toks = self.toks[start:self.i - 1]
                body = "".join(t.text + (" " if t.text == "," else "") for t in body_toks)
                sub = ExprParser(body_toks + [Token(TokKind.EOF, "", self.tok.pos)])
                try:
                    items = [sub.parse_expr()] if body_toks else []
                    while sub.accept(","):
                        items.append(sub.parse_expr())
                    if sub.tok.kind is TokKind.EOF:
                        args = tuple(items)
                except ParseError:
                    args = ()
            elif self.at("[") and self.tok.pos.line == name.pos.line:
                out.append(self._structured_annotation(at, name.text))
                continue
            out.append(Annotation(at.pos, name.text, args, body))
        return tuple(out)

    # structured annotation: '@' name '[' (expr (',' expr)* | name '=' expr (',' ...)*)? ']'
    def _structured_annotation(self, at: Token, name: str) -> Annotation:
        self.expect("[")
        items: list[tuple[str | None, int | str | bool]] = []
        while not self.accept("]"):
            if items:
                self.expect(",")
            key: str | None = None
            if self.tok.kind is TokKind.IDENT and self.peek().text == "=":
                key = self.ident("a key").text
                self.expect("=")
            e = self.parse_expr()
            v = structured_annotations.fold(e)
            if v is None:
                raise ParseError(e.pos, f"unsupported construct: structured annotation "
                                        f"'@{name}' value that is not a literal constant")
            if items and (key is None) != (items[0][0] is None):
                raise ParseError(e.pos, f"structured annotation '@{name}' mixes key = value "
                                        "pairs and expressions")
            items.append((key, v))
        return Annotation(at.pos, name, (), structured_annotations.encode(items), True)

    # declaration: annotations (constDecl | typedef | header | struct | enum | error
    #   | match_kind | extern | parser | control | package | action | instantiation)
    def declaration(self) -> Node:
        annos = self.annotations()
        t = self.tok
        if self.accept("const"):
            typ = self.parse_type()
            name = self.ident()
            self.expect("=")
            value = self.parse_expr()
            self.expect(";")
            return ConstDecl(name.pos, annos, name.text, typ, value)
        if self.at("typedef") or self.at("type"):
            self.i += 1
            typ = self.parse_type()
            name = self.ident()
            self.expect(";")
            self.type_names.add(name.text)
            return Typedef(name.pos, annos, name.text, typ, t.text == "type")
        if self.at("header") or self.at("struct") or self.at("header_union"):
            self.i += 1
            name = self.ident()
            self.type_names.add(name.text)
            tparams = self._type_params()
            fields = self._fields()
            cls = {"header": HeaderDecl, "struct": StructDecl, "header_union": HeaderUnionDecl}
            return cls[t.text](name.pos, annos, name.text, fields, tparams)
        if self.accept("enum"):
            underlying = None
            if self.at("bit") or self.at("int"):
                underlying = self.parse_type()
            name = self.ident()
            self.type_names.add(name.text)
            self.expect("{")
            members: list[tuple[str, Expr | None]] = []
            while not self.at("}"):
                m = self.ident("an enum member")
                val = self.parse_expr() if self.accept("=") else None
                members.append((m.text, val))
                if not self.accept(","):
                    break
            self.expect("}")
            return EnumDecl(name.pos, annos, name.text, underlying, tuple(members))
        if self.accept("error") or self.accept("match_kind"):
            self.expect("{")
            names: list[str] = []
            while not self.at("}"):
                names.append(self.ident().text)
                if not self.accept(","):
                    break
            self.expect("}")
            cls2 = ErrorDecl if t.text == "error" else MatchKindDecl
            return cls2(t.pos, annos, t.text, tuple(names))
        if self.accept("extern"):
            return self._extern(annos)
        if self.at("parser") or self.at("control"):
            return self._parser_or_control(annos)
        if self.accept("package"):
            name = self.ident()
            self.type_names.add(name.text)
            tps = self._type_params()
            params = self.params()
            self.expect(";")
            return PackageDecl(name.pos, annos, name.text, tps, params)
        if self.at("action"):
            return self.action(annos)
        if self.starts_type() or (t.kind is TokKind.IDENT and self.peek().text in ("(", "<")):
            return self.instantiation(annos)
        raise ParseError(t.pos, f"syntax error, unexpected '{t}' at the start of a declaration")

    # fields: '{' (annotations type name ';')* '}'
    def _fields(self) -> tuple[Field, ...]:
        self.expect("{")
        fields: list[Field] = []
        while not self.accept("}"):
            annos = self.annotations()
            typ = self.parse_type()
            name = self.ident("a field name")
            if self.at("[") or (isinstance(typ, StackType) and
                                isinstance(typ.elem, (BitType, IntType, BoolType))):
                # P4_16 1.2.5 arrays of bit strings (`bit<8>[16] a;`, or C's `bit<8> a[16];`
                # that p4c parses too): p4c-bm2-ss stops at them as well (a BMv2 header
                # cannot hold a stack).
                raise ParseError(name.pos, f"unsupported construct: an array field "
                                           f"'{name.text}' (arrays of bit strings)")
            self.expect(";")
            fields.append(Field(name.pos, annos, name.text, typ))
        return tuple(fields)

    # typeParams: ['<' name (',' name)* '>']
    def _type_params(self) -> tuple[str, ...]:
        if not self.accept("<"):
            return ()
        names = [self.ident("a type parameter").text]
        while self.accept(","):
            names.append(self.ident("a type parameter").text)
        self.expect(">")
        self.type_names.update(names)
        return tuple(names)

    # params: '(' [param (',' param)*] ')' ; param: annotations [direction] type name ['=' expr]
    def params(self) -> tuple[Param, ...]:
        self.expect("(")
        out: list[Param] = []
        if not self.at(")"):
            while True:
                annos = self.annotations()
                direction = ""
                for d in ("inout", "in", "out"):
                    if self.accept(d):
                        direction = d
                        break
                typ = self.parse_type()
                name = self.ident("a parameter name")
                default = self.parse_expr() if self.accept("=") else None
                out.append(Param(name.pos, annos, name.text, direction, typ, default))
                if not self.accept(","):
                    break
        self.expect(")")
        return tuple(out)

    # extern: 'extern' (name typeParams '{' method* '}' | type name typeParams params ';')
    def _extern(self, annos: tuple[Annotation, ...]) -> Node:
        if self.tok.kind is TokKind.IDENT and self.peek().text in ("{", "<") and \
                not (self.peek().text == "<" and self._is_function_after_generic()):
            name = self.ident()
            self.type_names.add(name.text)
            tps = self._type_params()
            self.expect("{")
            methods: list[MethodDecl] = []
            while not self.accept("}"):
                mannos = self.annotations()
                abstract = self.accept("abstract")
                if self.tok.text == name.text and self.peek().text == "(":
                    m = self.ident()
                    params = self.params()
                    self.expect(";")
                    methods.append(MethodDecl(m.pos, mannos, m.text, (), None, params))
                    continue
                ret = self.parse_type()
                m = self.ident("a method name")
                mtps = self._type_params()
                params = self.params()
                self.expect(";")
                methods.append(MethodDecl(m.pos, mannos, m.text, mtps, ret, params, abstract))
            return ExternDecl(name.pos, annos, name.text, tps, tuple(methods))
        ret = self.parse_type()
        name = self.ident()
        tps = self._type_params()
        params = self.params()
        self.expect(";")
        return FunctionDecl(name.pos, annos, name.text, tps, ret, params, None)

    def _is_function_after_generic(self) -> bool:
        # 'extern T f<T>(...)' never happens with T first; 'extern Name<T> {' is an extern type.
        return False

    # parserDecl: 'parser' name typeParams params (';' | ['(' ctorParams ')'] '{' locals states '}')
    # controlDecl: 'control' name typeParams params
    #              (';' | ['(' ctorParams ')'] '{' locals apply '}')
    def _parser_or_control(self, annos: tuple[Annotation, ...]) -> Node:
        kw = self.tok.text
        self.i += 1
        name = self.ident()
        tps = self._type_params()
        params = self.params()
        if self.accept(";"):
            self.type_names.add(name.text)
            cls = ParserTypeDecl if kw == "parser" else ControlTypeDecl
            return cls(name.pos, annos, name.text, tps, params)
        if tps:
            raise ParseError(name.pos, f"unsupported construct: generic {kw} declarations")
        ctor = self.params() if self.at("(") else ()
        self.type_names.add(name.text)
        self.expect("{")
        locals_: list[Node] = []
        if kw == "parser":
            states: list[ParserState] = []
            while not self.accept("}"):
                self._no_eof(kw, name.text)
                begin = self.i
                try:
                    sannos = self.annotations()
                    if self.accept("state"):
                        states.append(self._state(sannos))
                    else:
                        locals_.append(self._local(sannos))
                except ParseError as err:
                    self._recover(err, begin)
            return ParserDecl(name.pos, annos, name.text, params, ctor, tuple(locals_),
                              tuple(states))
        apply: Block | None = None
        while not self.accept("}"):
            self._no_eof(kw, name.text)
            begin = self.i
            try:
                lannos = self.annotations()
                if self.at("apply") and self.peek().text == "{":
                    self.i += 1
                    apply = self.block()
                elif self.at("action"):
                    locals_.append(self.action(lannos))
                elif self.accept("table"):
                    locals_.append(self._table(lannos))
                else:
                    locals_.append(self._local(lannos))
            except ParseError as err:
                self._recover(err, begin)
        if apply is None:
            raise ParseError(name.pos, f"control '{name.text}' has no apply block")
        return ControlDecl(name.pos, annos, name.text, params, ctor, tuple(locals_), apply)

    def _no_eof(self, kw: str, name: str) -> None:
        if self.tok.kind is TokKind.EOF:
            raise ParseError(self.tok.pos, f"syntax error, unexpected end of file: missing '}}' "
                                           f"to close {kw} '{name}'")

    # local: constDecl | varDecl | instantiation
    def _local(self, annos: tuple[Annotation, ...]) -> Node:
        t = self.tok
        if self.accept("const"):
            typ = self.parse_type()
            name = self.ident()
            self.expect("=")
            value = self.parse_expr()
            self.expect(";")
            return ConstDecl(name.pos, annos, name.text, typ, value)
        if self.accept("value_set"):
            # valueSetDeclaration: 'value_set' '<' type '>' '(' size ')' name ';'
            targs = self._type_args()
            args = self.parse_args()
            name = self.ident()
            self.expect(";")
            return Instantiation(name.pos, annos, name.text, TypeName(t.pos, "value_set", targs),
                                 args)
        typ = self.parse_type()
        if self.at("("):
            args = self.parse_args()
            name = self.ident()
            self.expect(";")
            return Instantiation(name.pos, annos, name.text, typ, args)
        name = self.ident("a variable name")
        init = self.parse_expr() if self.accept("=") else None
        self.expect(";")
        return VarDecl(name.pos, annos, typ, name.text, init)

    # instantiation: type '(' args ')' name ';'   |   functionDecl: type name params block
    def instantiation(self, annos: tuple[Annotation, ...]) -> Node:
        typ = self.parse_type()
        if self.tok.kind is TokKind.IDENT and self.peek().text in ("(", "<"):
            name = self.ident()
            tps = self._type_params()
            params = self.params()
            body = self.block()
            return FunctionDecl(name.pos, annos, name.text, tps, typ, params, body)
        if not self.at("("):
            raise ParseError(self.tok.pos, "unsupported construct: global variable declarations")
        args = self.parse_args()
        name = self.ident()
        self.expect(";")
        return Instantiation(name.pos, annos, name.text, typ, args)

    # action: 'action' name params block
    def action(self, annos: tuple[Annotation, ...]) -> ActionDecl:
        self.expect("action")
        name = self.ident("an action name")
        params = self.params()
        body = self.block()
        return ActionDecl(name.pos, annos, name.text, params, body)

    # state: 'state' name '{' stmt* transition '}' ; transition: 'transition' (name ';' | select)
    def _state(self, annos: tuple[Annotation, ...]) -> ParserState:
        name = self.ident("a state name")
        self.expect("{")
        stmts: list[Stmt] = []
        transition: Select | str | None = None
        tpos = name.pos
        while not self.accept("}"):
            if self.at("transition"):
                tpos = self.tok.pos
                self.i += 1
                if self.at("select"):
                    transition = self._select()
                else:
                    transition = self.ident("a state name").text
                    self.expect(";")
                if not self.at("}"):
                    raise ParseError(self.tok.pos, "syntax error, statements after 'transition'")
                continue
            if self.tok.kind is TokKind.EOF:
                raise ParseError(self.tok.pos, f"syntax error, unexpected end of file: missing "
                                               f"'}}' to close state '{name.text}'")
            try:
                stmts.append(self.statement())
            except ParseError as err:
                self.diags.error(err.pos, err.message)
                self._skip_to_end(0)
        return ParserState(name.pos, annos, name.text, tuple(stmts), transition, tpos)

    # select: 'select' '(' exprs? ')' '{' (keyset ':' name ';')* '}'
    def _select(self) -> Select | str:
        pos = self.expect("select").pos
        self.expect("(")
        keys: list[Expr] = []
        if not self.at(")"):
            keys.append(self.parse_expr())
            while self.accept(","):
                keys.append(self.parse_expr())
        self.expect(")")
        self.expect("{")
        cases: list[SelectCase] = []
        while not self.accept("}"):
            ks = self.parse_keyset()
            self.expect(":")
            st = self.ident("a state name")
            self.expect(";")
            cases.append(SelectCase(ks.pos, ks, st.text, st.pos))
        if keys:
            return Select(pos, tuple(keys), tuple(cases))
        # select() over no expressions: only a default case can match, so the first one is
        # the state's one transition (p4c's midend makes it a plain 'transition s;').
        for c in cases:
            if isinstance(c.keyset, Default):
                return c.state
            raise ParseError(c.pos, "a select() over no expressions can only have "
                                    "'default' cases")
        raise ParseError(pos, "unsupported construct: a select() over no expressions "
                              "without a 'default' case")

    # table: 'table' name '{' property* '}'
    def _table(self, annos: tuple[Annotation, ...]) -> TableDecl:
        name = self.ident("a table name")
        self.expect("{")
        props: list[TableProperty] = []
        while not self.accept("}"):
            pannos = self.annotations()
            is_const = self.accept("const")
            pt = self.tok
            pname = self.ident("a table property").text
            self.expect("=")
            value: object
            if pname == "key":
                self.expect("{")
                keys: list[KeyElement] = []
                while not self.accept("}"):
                    e = self.parse_expr()
                    self.expect(":")
                    mk = self.ident("a match kind")
                    kannos = self.annotations()
                    self.expect(";")
                    keys.append(KeyElement(e.pos, kannos, e, mk.text, mk.pos))
                value = tuple(keys)
            elif pname == "actions":
                self.expect("{")
                acts: list[tuple[tuple[Annotation, ...], Call]] = []
                while not self.accept("}"):
                    aannos = self.annotations()
                    e = self.parse_expr()
                    if not isinstance(e, Call):
                        e = Call(e.pos, e, (), ())
                    acts.append((aannos, e))
                    self.expect(";")
                value = tuple(acts)
            elif pname == "entries":
                self.expect("{")
                entries: list[TableEntry] = []
                while not self.accept("}"):
                    # entry: [const] [priority '=' expr ':'] keyset ':' action [annotations] ';'
                    epos = self.tok.pos
                    prio = None
                    self.accept("const")  # entries of a non-const list may be marked const
                    if self.accept("priority"):
                        # The entry's P4 priority is for P4Runtime only: p4c's BMv2 JSON
                        # orders entries by position unless @priority is given.
                        self.expect("=")
                        self.parse_expr()
                        self.expect(":")
                    ks = self.parse_keyset()
                    keyset = ks.items if isinstance(ks, ListExpr) else (ks,)
                    self.expect(":")
                    act = self.parse_expr()
                    if not isinstance(act, Call):
                        act = Call(act.pos, act, (), ())
                    for an in self.annotations():
                        if an.name == "priority" and an.args:
                            prio = an.args[0]  # `... : a() @priority(3);`: BMv2's priority
                    self.expect(";")
                    entries.append(TableEntry(epos, tuple(keyset), act, prio))
                value = tuple(entries)
            else:
                value = self.parse_expr()
                self.expect(";")
            props.append(TableProperty(pt.pos, pname, is_const, value, pannos))
        return TableDecl(name.pos, annos, name.text, tuple(props))

    # block: '{' statement* '}'
    def block(self) -> Block:
        pos = self.expect("{").pos
        stmts: list[Stmt] = []
        while not self.accept("}"):
            if self.tok.kind is TokKind.EOF:
                raise ParseError(self.tok.pos, "syntax error, unexpected end of file, expected '}'")
            try:
                stmts.append(self.statement())
            except ParseError as err:
                self.diags.error(err.pos, err.message)
                self._skip_to_end(0)
        return Block(pos, tuple(stmts))


    # statement: block | if | switch | for | break ';' | continue ';' | return | exit | ';'
    #          | varDecl | constDecl | lvalue '=' expr ';' | lvalue op'=' expr ';' | call ';'
    def statement(self) -> Stmt:
        t = self.tok
        if self.at("{"):
            return self.block()
        if self.accept(";"):
            return EmptyStmt(t.pos)
        if self.accept("if"):
            self.expect("(")
            cond = self.parse_expr()
            self.expect(")")
            then = self.statement()
            other = self.statement() if self.accept("else") else None
            return If(t.pos, cond, then, other)
        if self.accept("return"):
            value = None if self.at(";") else self.parse_expr()
            self.expect(";")
            return Return(t.pos, value)
        if self.accept("exit"):
            self.expect(";")
            return Exit(t.pos)
        if self.accept("switch"):
            return self._switch(t)
        if self.accept("break"):
            self.expect(";")
            return Break(t.pos)
        if self.accept("continue"):
            self.expect(";")
            return Continue(t.pos)
        annos = self.annotations()
        if annos and self.at("{"):
            return self.block()  # e.g. @atomic { ... }: BMv2 locks per action anyway
        if self.at("for"):
            return self._for(self.tok)  # annotations (@unroll ...) are hints: ignored
        if self.at("const"):
            self.i += 1
            typ = self.parse_type()
            name = self.ident()
            self.expect("=")
            init = self.parse_expr()
            self.expect(";")
            return VarDecl(name.pos, annos, typ, name.text, init, is_const=True)
        if self._starts_var_decl():
            decl = self._var_decl(annos)
            self.expect(";")
            return decl
        simple = self._simple_statement()
        self.expect(";")
        return simple

    # varDecl (without its ';'): type name ['=' expr]
    def _var_decl(self, annos: tuple[Annotation, ...]) -> VarDecl:
        typ = self.parse_type()
        name = self.ident("a variable name")
        init_opt = self.parse_expr() if self.accept("=") else None
        return VarDecl(name.pos, annos, typ, name.text, init_opt)

    # simpleStatement (without its ';'): lvalue '=' expr | lvalue op'=' expr | call
    def _simple_statement(self) -> Stmt:
        lhs = self.parse_expr()
        if self.at("="):
            pos = self.tok.pos
            self.i += 1
            return Assign(pos, lhs, self.parse_expr())
        if self.tok.text in _COMPOUND:
            # `a op= b` is `a = a op b` (P4_16 1.2.4); the left side is written once here.
            op_tok = self.tok
            self.i += 1
            rhs = self.parse_expr()
            return Assign(op_tok.pos, lhs, Binary(op_tok.pos, _COMPOUND[op_tok.text], lhs, rhs))
        if isinstance(lhs, Call):
            return CallStmt(lhs.pos, lhs)
        raise ParseError(self.tok.pos, f"syntax error, expected '=' or ';' but found '{self.tok}'")

    # for: 'for' '(' [forInit {',' forInit}] ';' [expr] ';' [simpleStatement {','
    #      simpleStatement}] ')' statement ; forInit: varDecl | simpleStatement
    #    | 'for' '(' annotations typeRef name 'in' expr ['..' expr] ')' statement
    def _for(self, t: Token) -> Stmt:
        self.expect("for")
        self.expect("(")
        annos = self.annotations()
        if self._starts_var_decl():
            start = self.i
            typ = self.parse_type()
            name = self.ident("a variable name")
            if self.accept("in"):
                coll = self.parse_expr()
                if self.accept(".."):
                    coll = Range(coll.pos, coll, self.parse_expr())
                self.expect(")")
                return ForIn(t.pos, typ, name.text, coll, self.statement())
            self.i = start
        init: list[Stmt] = []
        if not self.at(";"):
            while True:
                init.append(self._var_decl(annos) if self._starts_var_decl()
                            else self._simple_statement())
                annos = ()
                if not self.accept(","):
                    break
        self.expect(";")
        cond = None if self.at(";") else self.parse_expr()
        self.expect(";")
        update: list[Stmt] = []
        if not self.at(")"):
            while True:
                update.append(self._simple_statement())
                if not self.accept(","):
                    break
        self.expect(")")
        return For(t.pos, tuple(init), cond, tuple(update), self.statement())

    def _starts_var_decl(self) -> bool:
        t = self.tok
        if t.kind is TokKind.KEYWORD and t.text in ("bit", "int", "bool", "varbit", "error"):
            return t.text != "error" or self.peek().kind is TokKind.IDENT
        if t.kind is TokKind.IDENT:
            nxt = self.peek()
            if nxt.kind is TokKind.IDENT:
                return True
            if nxt.text == "<" and t.text in self.type_names:
                return True
            if nxt.text == "[" and t.text in self.type_names:
                return True
        return False

    # switch: 'switch' '(' expr ')' '{' (label ':' [block])* '}' ; label: name | default
    def _switch(self, t: Token) -> Switch:
        self.expect("(")
        e = self.parse_expr()
        self.expect(")")
        self.expect("{")
        cases: list[SwitchCase] = []
        while not self.accept("}"):
            lt = self.tok
            value: Expr | None = None
            if self.accept("default"):
                label = None
            else:
                value = self.parse_expr()
                label = value.name if isinstance(value, Name) else lt.text
            self.expect(":")
            body = self.block() if self.at("{") else None
            cases.append(SwitchCase(lt.pos, label, body, value))
        return Switch(t.pos, e, tuple(cases))

