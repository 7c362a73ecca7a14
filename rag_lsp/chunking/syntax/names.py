"""Reading a definition's name (and what its members are qualified with) from its node.

Grammars agree on little, so the default reading tries, in order: a ``name`` field, the
innermost ``declarator`` (C and C++: ``int *Foo::bar(…)`` → ``Foo::bar``), an identifier
child, and a child's ``name`` field (Go ``type_spec``). Rules named in a table cover the
rest: Go receivers, Rust ``impl`` blocks, ``const f = () => …`` and ``app.get = function``.
"""

from __future__ import annotations

import re

_NAME_TYPES = frozenset({
    "identifier", "type_identifier", "simple_identifier", "constant", "name",
    "property_identifier", "field_identifier", "word", "scope_resolution",
    "qualified_identifier", "qualified_name", "namespace_name", "user_type",
})
_SPACE = re.compile(r"\s+")
MAX_NAME_CHARS = 80


def text(node) -> str:
    return _SPACE.sub(" ", node.text.decode("utf-8", "replace")).strip()[:MAX_NAME_CHARS]


def default_name(node) -> str:
    found = node.child_by_field_name("name")
    if found is not None:
        return text(found)
    declarator = node.child_by_field_name("declarator")
    if declarator is not None:
        while (inner := declarator.child_by_field_name("declarator")) is not None:
            declarator = inner
        return text(declarator) if declarator.type in _NAME_TYPES else _first_name(declarator)
    return _first_name(node)


def _first_name(node) -> str:
    for child in node.named_children:
        if child.type in _NAME_TYPES:
            return text(child)
    for child in node.named_children:
        found = child.child_by_field_name("name")
        if found is not None:
            return text(found)
    return ""


_TYPE_WORD = re.compile(r"[A-Za-z_][\w:]*")
_NOT_A_TYPE = frozenset({"dyn", "impl", "mut", "const", "unsafe"})


def _base_type(node) -> str:
    """``*Engine`` → ``Engine``, ``Router<S>`` → ``Router``, ``dyn Expected + '_`` →
    ``Expected``, ``&mut A`` → ``A``."""
    name = re.sub(r"'\w+|<.*", "", text(node))  # lifetimes, generic arguments
    words = [w for w in _TYPE_WORD.findall(name) if w not in _NOT_A_TYPE]
    return words[0] if words else ""


def receiver_type(node) -> str:
    """Go: the type a method is declared on."""
    receiver = node.child_by_field_name("receiver")
    for param in receiver.named_children if receiver is not None else ():
        kind = param.child_by_field_name("type")
        if kind is not None:
            return _base_type(kind)
    return ""


def impl_names(node) -> tuple[str, str]:
    """Rust: (``impl Serialize for Value``, ``Value``)."""
    of_type = node.child_by_field_name("type")
    trait = node.child_by_field_name("trait")
    type_name = _base_type(of_type) if of_type is not None else ""
    if trait is not None:
        return f"impl {text(trait)} for {type_name}", type_name
    return f"impl {type_name}", type_name


def value_of(node):
    """The value a declaration or assignment binds: ``const f = <value>``."""
    for field_name in ("value", "right"):
        found = node.child_by_field_name(field_name)
        if found is not None:
            return found
    for child in node.named_children:
        if child.type.endswith(("declarator", "assignment_statement")):
            return value_of(child)
    last = node.named_children[-1] if node.named_children else None
    if last is not None and last.type.endswith("_list") and last.named_children:
        return last.named_children[0]  # Lua: ``a.b = function() … end``
    return last


def bound_name(node) -> str:
    """The name a declaration or assignment binds: ``const <name> = …``, ``<a.b> = …``;
    for ``module.exports = function createApp`` the function's own name."""
    for field_name in ("name", "left", "pattern"):
        found = node.child_by_field_name(field_name)
        if found is not None:
            name = text(found)
            value = value_of(node)
            own = value.child_by_field_name("name") if value is not None else None
            if name.split(".")[-1] == "exports" and own is not None:
                return text(own)
            return name
    for child in node.named_children:
        if child.type.endswith(("declarator", "assignment_statement", "variable_declaration")):
            return bound_name(child)
    first = node.named_children[0] if node.named_children else None
    return text(first) if first is not None else ""
