"""Per-language tables: which syntax nodes are definitions, of what kind, and how to read
their names. Data, not code: adding a language is adding a table (and its grammar wheel).

Kinds a rule can give:
  ``class``     a type with members (class, struct, enum, trait, interface, impl, object):
                its methods are qualified with its name (``Router.handle``);
  ``module``    a named module whose members are qualified (Ruby ``module``, Rust ``mod``);
  ``namespace`` a scope that only groups (C#/C++ namespaces, ``#ifdef`` blocks): members
                keep their own names;
  ``function``  a function (a ``method`` when it sits in a class);
  ``method``    a method declared outside its type (Go), qualified by its receiver;
  ``constant``  a module-level constant or variable: grouped with its neighbours, and named
                by the chunk when it fills it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CONTAINER_KINDS = frozenset({"class", "module", "namespace"})


@dataclass(frozen=True)
class Rule:
    kind: str
    # How the name is read (see names.py): "name" (the usual fields), "receiver" (Go
    # methods), "impl" (Rust impl blocks), "declarator" (``const f = …``), "assignment"
    # (``app.listen = function …``).
    name: str = "name"
    # A definition only by its value (``const f = () => …``): the kind for each value node
    # type. Anything else is a ``constant`` at module level when ``else_constant``.
    by_value: Mapping[str, str] | None = None
    else_constant: bool = False
    needs_body: bool = False  # ``struct S;`` is a forward declaration, not a definition


@dataclass(frozen=True)
class LanguageTable:
    definitions: Mapping[str, Rule]
    wrappers: frozenset[str] = frozenset()  # wrap one definition: export, decorators…
    comments: frozenset[str] = frozenset({"comment"})
    attributes: frozenset[str] = frozenset()  # siblings that belong to the next definition


def _rules(kind: str, *types: str, **options) -> dict[str, Rule]:
    return {t: Rule(kind, **options) for t in types}


_JS_FUNCTION_VALUES = {
    "arrow_function": "function", "function_expression": "function", "function": "function",
    "generator_function": "function", "class": "class",
}
_JS_DEFINITIONS = {
    **_rules("function", "function_declaration", "generator_function_declaration"),
    **_rules("class", "class_declaration", "class"),
    **_rules("method", "method_definition"),
    **_rules("function", "lexical_declaration", "variable_declaration", name="declarator",
             by_value=_JS_FUNCTION_VALUES, else_constant=True),
    **_rules("function", "assignment_expression", name="assignment",
             by_value=_JS_FUNCTION_VALUES),
    **_rules("function", "field_definition", "public_field_definition", name="declarator",
             by_value=_JS_FUNCTION_VALUES),
}
_JS_WRAPPERS = frozenset({"export_statement", "expression_statement"})

_TS_DEFINITIONS = {
    **_JS_DEFINITIONS,
    **_rules("class", "abstract_class_declaration", "interface_declaration",
             "type_alias_declaration", "enum_declaration"),
    **_rules("method", "method_signature", "abstract_method_signature"),
    **_rules("function", "function_signature"),
    **_rules("module", "internal_module", "module"),
}
_TS = LanguageTable(_TS_DEFINITIONS, _JS_WRAPPERS | {"ambient_declaration"})

_C_DEFINITIONS = {
    **_rules("function", "function_definition"),
    **_rules("class", "struct_specifier", "union_specifier", "enum_specifier",
             needs_body=True),
    **_rules("class", "type_definition"),
    **_rules("namespace", "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
             "linkage_specification"),
}

TABLES: dict[str, LanguageTable] = {
    "python": LanguageTable(
        {**_rules("function", "function_definition"), **_rules("class", "class_definition")},
        frozenset({"decorated_definition"}),
    ),
    "javascript": LanguageTable(_JS_DEFINITIONS, _JS_WRAPPERS),
    "typescript": _TS,
    "tsx": _TS,
    "go": LanguageTable({
        **_rules("function", "function_declaration"),
        **_rules("method", "method_declaration", name="receiver"),
        **_rules("class", "type_declaration"),
        **_rules("constant", "const_declaration", "var_declaration"),
    }),
    "rust": LanguageTable(
        {
            **_rules("function", "function_item", "function_signature_item",
                     "macro_definition"),
            **_rules("class", "struct_item", "enum_item", "union_item", "trait_item",
                     "type_item"),
            **_rules("class", "impl_item", name="impl"),
            **_rules("module", "mod_item", needs_body=True),
            **_rules("constant", "const_item", "static_item"),
        },
        comments=frozenset({"line_comment", "block_comment"}),
        attributes=frozenset({"attribute_item"}),
    ),
    "java": LanguageTable(
        {
            **_rules("class", "class_declaration", "interface_declaration",
                     "enum_declaration", "record_declaration",
                     "annotation_type_declaration"),
            **_rules("function", "method_declaration", "constructor_declaration",
                     "compact_constructor_declaration"),
        },
        comments=frozenset({"line_comment", "block_comment"}),
    ),
    "c": LanguageTable(_C_DEFINITIONS, frozenset({"declaration"})),
    "cpp": LanguageTable(
        {
            **_C_DEFINITIONS,
            **_rules("class", "class_specifier", needs_body=True),
            **_rules("namespace", "namespace_definition"),
        },
        frozenset({"declaration", "template_declaration"}),
    ),
    "csharp": LanguageTable(
        {
            **_rules("class", "class_declaration", "struct_declaration",
                     "interface_declaration", "enum_declaration", "record_declaration",
                     "record_struct_declaration"),
            **_rules("function", "method_declaration", "constructor_declaration",
                     "destructor_declaration", "operator_declaration",
                     "delegate_declaration"),
            **_rules("namespace", "namespace_declaration"),
        },
    ),
    "ruby": LanguageTable({
        **_rules("class", "class", "singleton_class"),
        **_rules("module", "module"),
        **_rules("function", "method", "singleton_method"),
    }),
    "php": LanguageTable(
        {
            **_rules("class", "class_declaration", "interface_declaration",
                     "trait_declaration", "enum_declaration"),
            **_rules("function", "function_definition", "method_declaration"),
            **_rules("namespace", "namespace_definition", needs_body=True),
        },
    ),
    "kotlin": LanguageTable(
        {
            **_rules("class", "class_declaration", "object_declaration",
                     "companion_object"),
            **_rules("function", "function_declaration"),
            **_rules("constant", "property_declaration"),
        },
        comments=frozenset({"line_comment", "block_comment", "comment"}),
    ),
    "swift": LanguageTable(
        {
            **_rules("class", "class_declaration", "protocol_declaration",
                     "typealias_declaration"),
            **_rules("function", "function_declaration", "init_declaration",
                     "protocol_function_declaration"),
            **_rules("constant", "property_declaration"),
        },
        comments=frozenset({"comment", "multiline_comment"}),
    ),
    "scala": LanguageTable(
        {
            **_rules("class", "class_definition", "object_definition", "trait_definition",
                     "enum_definition"),
            **_rules("function", "function_definition", "function_declaration"),
            **_rules("constant", "val_definition", "var_definition"),
        },
        comments=frozenset({"comment", "block_comment"}),
    ),
    "lua": LanguageTable(
        {
            **_rules("function", "function_declaration"),
            **_rules("function", "assignment_statement", name="assignment",
                     by_value={"function_definition": "function"}),
        },
        frozenset({"variable_declaration"}),
    ),
    "bash": LanguageTable(_rules("function", "function_definition")),
}
