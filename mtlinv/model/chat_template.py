"""The model's own chat template (`tokenizer.chat_template` in a GGUF), rendered with jinja2 the way transformers'
`apply_chat_template` renders it: a sandboxed environment with trim_blocks and lstrip_blocks, the loopcontrols
extension, a `tojson` filter, `raise_exception` and `strftime_now`, and the special tokens' strings as variables."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .tokenizer import require_utf8

ROLES = ("system", "user", "assistant", "tool")


class ChatTemplateError(ValueError):
    """The model has no chat template, the template is broken, or it refused the conversation."""


def _raise(message):
    raise ChatTemplateError(f"the chat template refused the conversation: {message}")


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class ChatTemplate:
    """A compiled template; `render(messages)` gives the text of the conversation up to the reply's start."""

    def __init__(self, source: str, special_tokens: Mapping[str, str]):
        if not isinstance(source, str) or not source.strip():
            raise ChatTemplateError("the model's chat template is empty")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateError as e:
            raise ChatTemplateError(f"the model's chat template does not compile: {e}") from None
        self.special_tokens = dict(special_tokens)

    def render(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True) -> str:
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                raise ChatTemplateError(f"messages[{i}] must be a dict with a role in {ROLES} and a str content, "
                                        f"got {m!r}")
            require_utf8(m["content"], f"messages[{i}] content")  # named here: in the rendered text its place misleads
        try:
            return self._template.render(messages=[dict(m) for m in messages],
                                         add_generation_prompt=add_generation_prompt, **self.special_tokens)
        except ChatTemplateError:
            raise
        except jinja2.TemplateError as e:
            raise ChatTemplateError(f"the model's chat template failed: {e}") from None
