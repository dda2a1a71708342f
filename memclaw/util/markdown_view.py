"""A reply rendered as Markdown on a terminal, safely: the one way memclaw builds one.

The model's text can hold escape sequences and links whose text names one place while the URL goes to another.
`reply_markdown` draws every control character as a symbol (memclaw.util.visible), keeping tabs for indentation.
It makes no terminal hyperlink: a link shows as its text followed by its URL, an image as its alt text and URL.
Rich's own styling is the only escape sequence that reaches the terminal.
Import it lazily: rich.markdown loads markdown-it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.markdown import Markdown, MarkdownElement
from rich.text import Text

from memclaw.util.visible import visible

if TYPE_CHECKING:
    from markdown_it.token import Token
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.markdown import MarkdownContext
    from rich.text import TextType


class _InlineImage(MarkdownElement):
    """An image as text in its paragraph, `🌆 alt (url)`: a terminal shows no image, and rich's own placeholder
    hides the URL and is drawn before the paragraph, whose first line then loses its end."""

    new_line: ClassVar[bool] = False

    @classmethod
    def create(cls, markdown: Markdown, token: Token) -> MarkdownElement:
        return cls(str(token.attrs.get("src", "")))

    def __init__(self, destination: str) -> None:
        self.destination = destination

    def on_text(self, context: MarkdownContext, text: TextType) -> None:
        """Called with the alt text once the image is closed: written into the element around it."""
        alt = text.plain if isinstance(text, Text) else text
        context.on_text(f"🌆 {alt} (" if alt else "🌆 (", "text")
        context.enter_style("markdown.link_url")
        context.on_text(self.destination, "text")
        context.leave_style()
        context.on_text(")", "text")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Drawn by the element around it
        yield from ()


class _ReplyMarkdown(Markdown):
    elements: ClassVar[dict[str, type[MarkdownElement]]] = {**Markdown.elements, "image": _InlineImage}


def reply_markdown(text: object) -> Markdown:
    """`text` as a Markdown renderable for a terminal: control characters as symbols, links with their URL shown
    and never made terminal hyperlinks."""
    return _ReplyMarkdown(visible(text, keep_tabs=True), hyperlinks=False)
