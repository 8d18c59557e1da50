"""A seeded generator of small React/TSX function components: the demo task in miniature.

Each :class:`Example` is a short instruction ("Write a React component ...") that states the component's
observable behaviour, and a correct TSX solution as the whole response, one fenced block::

    ```tsx
    export function TodoTitle({ text }: TodoTitleProps) { ... }
    ```

Eight kinds cover what a tiny policy can learn and a compiler can check: props interfaces, ``useState``,
lists rendered with ``map`` and ``key``, conditional rendering (``&&`` and ternaries), event handlers and
inline styles. Names, labels, colours, tags and numbers vary with the seed, so the corpus has hundreds of
distinct components while every solution stays short (a few lines).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

FENCE_OPEN = "```tsx\n"
FENCE_CLOSE = "```"

NOUNS = (
    "Profile", "Cart", "Todo", "Weather", "Score", "Note", "Task", "Book", "Movie", "Recipe", "Player",
    "Order", "Message", "Photo", "Event", "Song", "City", "Product", "Ticket", "Course", "Team", "Garden",
)  # fmt: skip
TAGS = ("div", "section", "article", "main")
HEADINGS = ("h1", "h2", "h3", "p", "strong")
COLORS = ("red", "green", "blue", "gray", "orange", "purple", "black", "teal")
LABELS = ("Clicks", "Count", "Total", "Votes", "Likes", "Points", "Items", "Stars")
WORDS = ("Hello", "Welcome", "Hi", "Good morning", "Café menu", "Thanks", "Last update", "★ Featured")
UNITS = ("items", "people", "days", "tasks", "songs", "points", "km", "°C")
PROP_NAMES = ("name", "title", "label", "text", "caption", "owner")
LIST_NAMES = (("items", "item"), ("names", "name"), ("tags", "tag"), ("cities", "city"), ("notes", "note"))
FLAGS = ("active", "online", "done", "open", "visible", "ready")
STATES = (("Active", "Inactive"), ("Online", "Offline"), ("Done", "Pending"), ("Yes", "No"), ("On", "Off"))


@dataclass(frozen=True)
class Example:
    """One prompt/solution pair of the corpus.

    Attributes:
        kind: the component family (a key of :data:`KINDS`).
        name: the component's name, e.g. ``"TodoCounter"``.
        prompt: the user instruction (one or two sentences).
        code: the TSX source of the solution, ending with a newline.
    """

    kind: str
    name: str
    prompt: str
    code: str

    @property
    def response(self) -> str:
        """The assistant's whole response: the code in one ```` ```tsx ```` fenced block."""
        return f"{FENCE_OPEN}{self.code}{FENCE_CLOSE}"


def _props_interface(name: str, fields: list[tuple[str, str]]) -> str:
    body = "".join(f"  {field}: {type_};\n" for field, type_ in fields)
    return f"interface {name}Props {{\n{body}}}\n\n"


def _capitalised(word: str) -> str:
    return word[0].upper() + word[1:]


def greeting(rng: random.Random) -> Example:
    """A string prop rendered after a fixed text inside a heading tag."""
    name = rng.choice(NOUNS) + rng.choice(("Title", "Header", "Greeting", "Label"))
    prop, tag, word = rng.choice(PROP_NAMES), rng.choice(HEADINGS), rng.choice(WORDS)
    code = (
        _props_interface(name, [(prop, "string")])
        + f"export function {name}({{ {prop} }}: {name}Props) {{\n"
        + f"  return <{tag}>{word}, {{{prop}}}</{tag}>;\n}}\n"
    )
    prompt = (
        f"Write a React component `{name}` that takes a `{prop}` string prop and renders "
        f'"{word}, " followed by it in an <{tag}> element.'
    )
    return Example("greeting", name, prompt, code)


def counter(rng: random.Random) -> Example:
    """A ``useState`` number shown in a button whose click handler adds a step."""
    name = rng.choice(NOUNS) + "Counter"
    label, start, step = rng.choice(LABELS), rng.randint(0, 5), rng.randint(1, 3)
    var = label.lower()
    code = (
        'import { useState } from "react";\n\n'
        f"export function {name}() {{\n"
        f"  const [{var}, set{label}] = useState({start});\n"
        "  return (\n"
        f"    <button onClick={{() => set{label}({var} + {step})}}>\n"
        f"      {label}: {{{var}}}\n"
        "    </button>\n  );\n}\n"
    )
    prompt = (
        f'Write a React component `{name}` with a button that shows "{label}: " and a counter that '
        f"starts at {start}; each click adds {step}."
    )
    return Example("counter", name, prompt, code)


def string_list(rng: random.Random) -> Example:
    """A ``string[]`` prop rendered as list items with ``map`` and the item as ``key``."""
    name = rng.choice(NOUNS) + rng.choice(("List", "Items", "Menu"))
    items, item = rng.choice(LIST_NAMES)
    tag = rng.choice(("ul", "ol"))
    code = (
        _props_interface(name, [(items, "string[]")])
        + f"export function {name}({{ {items} }}: {name}Props) {{\n"
        + "  return (\n"
        + f"    <{tag}>\n"
        + f"      {{{items}.map(({item}) => (\n"
        + f"        <li key={{{item}}}>{{{item}}}</li>\n"
        + "      ))}\n"
        + f"    </{tag}>\n  );\n}}\n"
    )
    prompt = (
        f"Write a React component `{name}` that takes `{items}: string[]` and renders each one "
        f"as an <li> inside a <{tag}>, using the {item} as the key."
    )
    return Example("string_list", name, prompt, code)


def object_list(rng: random.Random) -> Example:
    """A list of ``{ id, title }`` objects keyed by ``id``, with an empty-state ternary."""
    noun = rng.choice(NOUNS)
    name = noun + rng.choice(("Table", "Feed", "Index"))
    field, tag = rng.choice(("title", "name", "label")), rng.choice(("ul", "ol"))
    empty = rng.choice((f"No {noun.lower()}s yet", "Nothing to show", "Empty"))
    code = (
        _props_interface(name, [("rows", f"{{ id: number; {field}: string }}[]")])
        + f"export function {name}({{ rows }}: {name}Props) {{\n"
        + "  if (rows.length === 0) {\n"
        + f"    return <p>{empty}</p>;\n  }}\n"
        + f"  return (\n    <{tag}>\n"
        + "      {rows.map((row) => (\n"
        + f"        <li key={{row.id}}>{{row.{field}}}</li>\n"
        + f"      ))}}\n    </{tag}>\n  );\n}}\n"
    )
    prompt = (
        f"Write a React component `{name}` that lists `rows` (objects with `id` and `{field}`) as <li> "
        f'items in a <{tag}> keyed by id, or shows "{empty}" when there are none.'
    )
    return Example("object_list", name, prompt, code)


def toggle(rng: random.Random) -> Example:
    """A ``useState`` boolean flipped by a button, and a paragraph shown only while it is true."""
    name = rng.choice(NOUNS) + rng.choice(("Toggle", "Details", "Spoiler"))
    flag, text = rng.choice(FLAGS), rng.choice(WORDS)
    setter = "set" + _capitalised(flag)
    show, hide = rng.choice((("Show", "Hide"), ("Open", "Close"), ("More", "Less")))
    code = (
        'import { useState } from "react";\n\n'
        f"export function {name}() {{\n"
        f"  const [{flag}, {setter}] = useState(false);\n"
        "  return (\n    <div>\n"
        f'      <button onClick={{() => {setter}(!{flag})}}>{{{flag} ? "{hide}" : "{show}"}}</button>\n'
        f"      {{{flag} && <p>{text}</p>}}\n"
        "    </div>\n  );\n}\n"
    )
    prompt = (
        f'Write a React component `{name}` with a button labelled "{show}" or "{hide}" that toggles '
        f'whether a paragraph saying "{text}" is shown; it starts hidden.'
    )
    return Example("toggle", name, prompt, code)


def status(rng: random.Random) -> Example:
    """A boolean prop choosing both the text and the colour of a ``<span>`` with ternaries."""
    name = rng.choice(NOUNS) + rng.choice(("Status", "Badge", "Flag"))
    flag = rng.choice(FLAGS)
    on, off = rng.choice(STATES)
    on_color, off_color = rng.sample(COLORS, 2)
    code = (
        _props_interface(name, [(flag, "boolean")])
        + f"export function {name}({{ {flag} }}: {name}Props) {{\n"
        + "  return (\n"
        + f'    <span style={{{{ color: {flag} ? "{on_color}" : "{off_color}" }}}}>\n'
        + f'      {{{flag} ? "{on}" : "{off}"}}\n'
        + "    </span>\n  );\n}\n"
    )
    prompt = (
        f'Write a React component `{name}` that takes a boolean `{flag}` prop and renders "{on}" in '
        f'{on_color} when it is true, otherwise "{off}" in {off_color}.'
    )
    return Example("status", name, prompt, code)


def styled_card(rng: random.Random) -> Example:
    """Two typed props in a box with an inline style object (padding and border)."""
    noun = rng.choice(NOUNS)
    name = noun + rng.choice(("Card", "Panel", "Box", "Summary"))
    tag, unit, color = rng.choice(TAGS), rng.choice(UNITS), rng.choice(COLORS)
    padding = rng.choice((4, 8, 12, 16))
    code = (
        _props_interface(name, [("title", "string"), ("count", "number")])
        + f"export function {name}({{ title, count }}: {name}Props) {{\n"
        + "  return (\n"
        + f'    <{tag} style={{{{ padding: {padding}, border: "1px solid {color}" }}}}>\n'
        + "      <h2>{title}</h2>\n"
        + f"      <p>{{count}} {unit}</p>\n"
        + f"    </{tag}>\n  );\n}}\n"
    )
    prompt = (
        f"Write a React component `{name}` that shows a `title` in an <h2> and `count` followed by "
        f'"{unit}" in a <{tag}> with padding {padding} and a 1px solid {color} border.'
    )
    return Example("styled_card", name, prompt, code)


def text_input(rng: random.Random) -> Example:
    """A controlled ``<input>`` whose ``onChange`` handler stores the text, echoed below it."""
    noun = rng.choice(NOUNS)
    name = noun + rng.choice(("Search", "Input", "Form"))
    label = rng.choice(("You typed", "Query", "Preview", "Search"))
    placeholder = rng.choice((f"{noun} name", "Type here", f"Search {noun.lower()}s"))
    code = (
        'import { useState } from "react";\n\n'
        f"export function {name}() {{\n"
        '  const [value, setValue] = useState("");\n'
        "  return (\n    <div>\n"
        f'      <input value={{value}} placeholder="{placeholder}" onChange={{(e) => setValue(e.target.value)}} />\n'
        f"      <p>{label}: {{value}}</p>\n"
        "    </div>\n  );\n}\n"
    )
    prompt = (
        f'Write a React component `{name}` with a controlled text input (placeholder "{placeholder}") '
        f'and a paragraph below it that shows "{label}: " and the current text.'
    )
    return Example("text_input", name, prompt, code)


KINDS: dict[str, Callable[[random.Random], Example]] = {
    "greeting": greeting,
    "counter": counter,
    "string_list": string_list,
    "object_list": object_list,
    "toggle": toggle,
    "status": status,
    "styled_card": styled_card,
    "text_input": text_input,
}


def draw_distinct(size: int, seed: int, draw: Callable[[random.Random, int], T], what: str) -> list[T]:
    """``size`` items with distinct ``prompt`` attributes, ``draw(rng, i)`` proposing the i-th one, from
    ``random.Random(seed)``.

    Raises ``ValueError`` for a negative size or when ``draw`` cannot find enough distinct prompts.
    """
    if size < 0:
        raise ValueError(f"corpus size must be >= 0, got {size}")
    rng = random.Random(seed)
    items: list[T] = []
    seen: set[str] = set()
    attempts = 0
    while len(items) < size:
        attempts += 1
        if attempts > 50 * size + 1000:
            raise ValueError(f"could not draw {size} distinct {what} (got {len(items)}); lower the size")
        item = draw(rng, len(items))
        if item.prompt not in seen:
            seen.add(item.prompt)
            items.append(item)
    return items


def generate_corpus(size: int, seed: int) -> list[Example]:
    """``size`` distinct examples (distinct prompts), kinds in round-robin, drawn with ``random.Random(seed)``.

    Raises ``ValueError`` for a negative size or when the generator cannot find enough distinct prompts.
    """
    makers = list(KINDS.values())
    return draw_distinct(size, seed, lambda rng, i: makers[i % len(makers)](rng), "examples")
