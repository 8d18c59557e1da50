"""Requirement checks of a React answer against a spec the data carries: is it the component that was asked for?

A row's ``extra_info["react_spec"]`` (a dict, all keys optional) says what the request asks:

=================  ================  =========================================================================
key                type              requirement
=================  ================  =========================================================================
``component``      ``str``           a component of this name is exported (rendered: its value is a component)
``default_export`` ``bool``          it (or, without ``component``, some component) is the default export
``elements``       ``list[str]``     each of these tags is shown in the rendered DOM (without a render: appears in
                                     the code's JSX); a capitalised one (``"Card"``) is read from the code
``only_elements``  ``bool``          no element outside ``elements`` is in the rendered DOM (without a render: no
                                     lowercase JSX tag in the code)
``props``          ``list[str]``     the component takes each of these props (its first parameter destructures or
                                     reads it; a class reads it from ``this.props``)
``texts``          ``list[str]``     each text is visible in the render (with ``render=True``), else in the code
=================  ================  =========================================================================

They are checked from TypeScript's parse (``outline`` of ``tsx/worker.mjs``) and, with a render, from the page
(``tsx/render.mjs``: the DOM in each state it explores, the text a person can see, what the export's value is; see
:func:`check_requirements`). A violation with a place is an error span: a tag outside ``elements`` (its opening
and closing tag names, where the code writes it as JSX), a missing prop (the component's parameter list). One
without a place (a missing component, element or text) only fails the outcome. :func:`spec_from_reference` derives a
spec from a reference solution (what ``recipes/data/prepare_react.py`` and the CPU demo attach to their rows).
"""

from dataclasses import dataclass, fields

import numpy as np

SPEC_KEY = "react_spec"


@dataclass(frozen=True)
class ReactSpec:
    """A request's requirements; see the module docstring."""

    component: str | None = None
    default_export: bool = False
    elements: tuple[str, ...] = ()
    only_elements: bool = False
    props: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

    @classmethod
    def from_extra_info(cls, extra_info) -> "ReactSpec | None":
        """The spec of a row's ``extra_info`` (None without one); ``ValueError`` naming a bad key or value."""
        raw = (extra_info or {}).get(SPEC_KEY) if hasattr(extra_info or {}, "get") else None
        if raw is None:
            return None
        if not hasattr(raw, "items"):
            raise ValueError(f"extra_info[{SPEC_KEY!r}] must be a dict, got {type(raw).__name__}")
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"extra_info[{SPEC_KEY!r}] has unknown keys {unknown}; allowed: {sorted(known)}")
        values = {}
        for key, value in raw.items():
            if key == "component":
                if value is not None and (not isinstance(value, str) or not value):
                    raise ValueError(f"react_spec.component must be a non-empty string, got {value!r}")
                values[key] = value
            elif key in ("default_export", "only_elements"):
                if not isinstance(value, bool | np.bool_):
                    raise ValueError(f"react_spec.{key} must be a bool, got {value!r}")
                values[key] = bool(value)
            else:
                items = list(value) if isinstance(value, list | tuple) or hasattr(value, "tolist") else None
                if items is None or not all(isinstance(item, str) and item for item in items):
                    raise ValueError(f"react_spec.{key} must be a list of non-empty strings, got {value!r}")
                values[key] = tuple(items)
        return cls(**values)


@dataclass(frozen=True)
class RequirementResult:
    """What a spec found in one block: ``places`` (``[start, end)`` UTF-16 offsets in the code, one per
    violation with a place), ``unmet`` (each violation, in words: one per stray tag name under ``only_elements``),
    ``checked`` (how many requirements were checked), ``met`` (how many of them hold) and ``named`` (the requested
    component is exported under the spec's name; true for a spec that names none)."""

    places: list[tuple[int, int]]
    unmet: list[str]
    checked: int
    met: int
    named: bool


COMPONENT_KINDS = ("function", "class", "memo", "forward_ref", "lazy")
"""What a rendered export's value may be for it to be a component (``export_kind`` of ``tsx/render.mjs``)."""


def component_name(spec: ReactSpec, outline: dict) -> str | None:
    """The component the spec is about: ``spec.component``, else the default export, else the first export."""
    if spec.component:
        return spec.component
    return outline.get("default") or next(iter(outline.get("exports") or []), None)


def export_key(spec: ReactSpec | None, outline: dict | None) -> str | None:
    """The module export that holds the spec's component, for the render to show: its name when it is a named export,
    ``"default"`` when the default export is (a component named) it; None when the spec names no component or the
    module exports none of that name (the render then shows the default export, else the first component)."""
    if spec is None or not spec.component or outline is None:
        return None
    if spec.component in (outline.get("exports") or []):
        return spec.component
    return "default" if outline.get("default") == spec.component else None


def _is_component(kind) -> bool:
    return kind in COMPONENT_KINDS


def _strays(spec: ReactSpec, tags: list[dict], page: dict | None) -> list[str]:
    """The element names outside ``spec.elements``: every element in the page's DOM, else the source's lowercase
    JSX tags."""
    found = (
        set(page.get("tags") or []) if page is not None else {tag["name"] for tag in tags if tag["name"][:1].islower()}
    )
    return sorted(found - set(spec.elements))


def check_requirements(spec: ReactSpec, outline: dict | None, code: str, page: dict | None = None) -> RequirementResult:
    """Check ``spec`` against a block's ``outline`` (None: the parse failed, every requirement is unmet) and, when it
    was rendered, the ``page`` (the render's answer: ``tsx/render.mjs``; None: not rendered).

    With a page, what the page does decides: the named export (and the default export) must be a component by its
    value (``export_kind``, ``default_kind``: a number or a string exported under the name is not); each lowercase
    element must be shown in the DOM in some state of the page (``shown_tags``), ``only_elements`` holds when every
    element in the DOM is one of ``elements`` (``tags``: also those made through an alias or ``createElement``), and
    a text must be visible (``text``). Without one, the source's outline decides and texts are searched in ``code``.
    Props always come from the source: what the exported component (followed through aliases, memo, forwardRef)
    reads from its props."""
    checked = sum(
        (
            bool(spec.component),
            spec.default_export,
            len(spec.elements),
            spec.only_elements,
            len(spec.props),
            len(spec.texts),
        )
    )
    if outline is None:
        return RequirementResult([], ["the code could not be parsed for its outline"], checked, 0, False)
    places, unmet = [], []
    name = component_name(spec, outline)
    exported = set(outline.get("exports") or []) | ({outline["default"]} if outline.get("default") else set())
    named = not spec.component or (
        spec.component in exported and (page is None or _is_component(page.get("export_kind")))
    )
    if not named:
        unmet.append(f"no exported component {spec.component}")
    default = outline.get("default")
    if spec.default_export and (
        default is None
        or (spec.component and default != spec.component)
        or (page is not None and not _is_component(page.get("default_kind")))
    ):
        unmet.append(f"{name or 'the component'} is not the default export")
    tags = outline.get("tags") or []
    in_source = {tag["name"] for tag in tags}
    shown = set(page.get("shown_tags") or []) if page is not None else in_source
    unmet += [
        f"no <{element}> element"
        for element in spec.elements
        if element not in (shown if element[:1].islower() else in_source)
    ]
    stray_names = _strays(spec, tags, page) if spec.only_elements else []
    for tag in tags:
        if tag["name"] in stray_names:
            places += [tuple(tag["open"])] + ([tuple(tag["close"])] if tag.get("close") else [])
    unmet += [f"<{stray}> is not one of the requested elements" for stray in stray_names]
    function = (outline.get("functions") or {}).get(name or "")
    for prop in spec.props:
        if function is None or prop not in function["props"]:
            unmet.append(f"the component takes no {prop!r} prop")
            if function is not None:
                start, end = function["params"]
                places.append((start, max(end, start + 1)))
    haystack = page.get("text", "") if page is not None else code
    unmet += [f"the text {text!r} is not shown" for text in spec.texts if text not in haystack]
    # only_elements is one requirement, however many strays
    violated = len(unmet) - len(stray_names) + bool(stray_names)
    return RequirementResult(sorted(set(places)), unmet, checked, checked - violated, named)


def spec_from_reference(outline: dict) -> dict:
    """The ``react_spec`` of a reference solution's ``outline``: its component (default export or first export),
    whether that is the default export, exactly its lowercase JSX elements, and the props it destructures."""
    name = outline.get("default") or next(iter(outline.get("exports") or []), None)
    function = (outline.get("functions") or {}).get(name or "") or {}
    elements = sorted({tag["name"] for tag in outline.get("tags") or [] if tag["name"][:1].islower()})
    return {
        "component": name,
        "default_export": outline.get("default") is not None,
        "elements": elements,
        "only_elements": True,
        "props": list(function.get("props") or []),
    }
