"""A model ready to generate from: its file, tokenizer, chat template and weights on the active mtlinv device."""
from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

import mtlinv

from .chat_template import ChatTemplate, ChatTemplateError
from . import mlx_checkpoint
from .device_model import DeviceModel, DeviceWeights
from .fetch import ModelFetchError, load_model_path
from .gguf_model import GGUFModel, GGUFModelError, LlamaConfig, load_gguf
from .tokenizer import Tokenizer, require_utf8

# Layers a cheap draft leaves out, as fractions of the depth (for SmolLM2-135M's 30 layers the best acceptance
# among the patterns tried).
DRAFT_SKIP_FRACTIONS = (10 / 30, 14 / 30, 18 / 30, 22 / 30, 26 / 30)
# Token ids besides the end-of-sequence one after which a reply is over: end of turn, end of message.
_STOP_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
# The special tokens a chat template may name, and the metadata keys of their ids.
_TEMPLATE_TOKENS = {"bos_token": "tokenizer.ggml.bos_token_id", "eos_token": "tokenizer.ggml.eos_token_id",
                    "unk_token": "tokenizer.ggml.unknown_token_id", "pad_token": "tokenizer.ggml.padding_token_id"}


def draft_skip_layers(n_layers: int) -> list[int]:
    """The layers a layer-skipping draft of an n_layers model leaves out."""
    return sorted({int(f * n_layers) for f in DRAFT_SKIP_FRACTIONS if int(f * n_layers) < n_layers})


class Model:
    """A loaded model: `load(path)` builds one, from a GGUF file or an MLX checkpoint directory. Decoders made by
    `decoder` share its device weights.

    stop_ids: the ids after which a reply ends (end of sequence, turn, message), from the model's own metadata.
    template: its chat template's source (None: it has none); special_tokens: the strings a template may name."""

    def __init__(self, path: Path, config: LlamaConfig, tokenizer: Tokenizer, stop_ids: frozenset[int],
                 template: str | None, special_tokens: dict[str, str], make_weights):
        self.path = path
        self.config = config
        self.tokenizer = tokenizer
        self.stop_ids = stop_ids
        self.template, self._special_tokens = template, special_tokens
        self._make_weights = make_weights  # progress -> DeviceWeights
        self._weights: DeviceWeights | None = None
        self._target: PrefillReuse | None = None
        self._chat_template: ChatTemplate | None = None
        self.active_generation = None  # the generation that owns the target's cache (generation.Generation)

    @classmethod
    def from_gguf(cls, path: Path, source: GGUFModel | None = None) -> Model:
        """A GGUF file (source: the file already read), its weights not yet imported."""
        source = source if source is not None else load_gguf(path)
        try:
            tokenizer = Tokenizer.from_gguf(source)
        except ValueError as e:  # a vocabulary this package does not read: the model cannot run
            raise GGUFModelError(str(e)) from None
        md = source.metadata
        special = {name: tokenizer.decode([int(md[key])]) for name, key in _TEMPLATE_TOKENS.items() if key in md}
        return cls(Path(path), source.config, tokenizer, frozenset(int(md[k]) for k in _STOP_KEYS if k in md),
                   md.get("tokenizer.chat_template"), special,
                   lambda progress: DeviceWeights.from_gguf(source, progress=progress))

    @classmethod
    def from_mlx(cls, path: Path) -> Model:
        """An MLX checkpoint directory as mlx-lm writes it, its weights not yet imported."""
        ckpt = mlx_checkpoint.Checkpoint(Path(path))
        tokenizer, stops, template, special = mlx_checkpoint.read_tokenizer(Path(path), ckpt.raw)
        return cls(Path(path), ckpt.config, tokenizer, stops, template, special,
                   lambda progress: DeviceWeights.from_mlx(ckpt, progress=progress))

    @property
    def weights(self) -> DeviceWeights:
        """The weights on the device, imported on first use (import_weights reports progress)."""
        return self._weights if self._weights is not None else self.import_weights()

    def import_weights(self, progress=None) -> DeviceWeights:
        """Imports the weights onto the active device (once); progress(done, total) is called after each layer."""
        if self._weights is None:
            self._weights = self._make_weights(progress)
        return self._weights

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def chat_template(self) -> ChatTemplate:
        """The model's own template; ChatTemplateError when it has none."""
        if self._chat_template is None:
            if self.template is None:
                raise ChatTemplateError(f"{self.name} has no chat template; give the prompt as plain text")
            self._chat_template = ChatTemplate(self.template, self._special_tokens)
        return self._chat_template

    def render_chat(self, messages: Sequence[dict]) -> str:
        """The text of a conversation (dicts of role and content) up to where the assistant's reply starts."""
        return self.chat_template.render(messages)

    def chat_prompt(self, prompt: str, system: str | None = None) -> list[int]:
        """Ids of a one-turn conversation (with a system turn when given) in the model's chat template."""
        for what, text in (("prompt", prompt), ("system", system)):
            if text is not None:
                require_utf8(text, what)  # named here: in the rendered text its place would mislead
        messages = [{"role": "system", "content": system}] if system is not None else []
        return self.tokenizer.encode(self.render_chat(messages + [{"role": "user", "content": prompt}]))

    def decoder(self, capacity: int, skip_layers: Sequence[int] = ()) -> DeviceModel:
        """A new decoder with its own KV cache of `capacity` positions."""
        return DeviceModel(self.weights, capacity, skip_layers=skip_layers)

    def target(self, capacity: int) -> PrefillReuse:
        """The decoder generate() runs as its target: kept between calls (grown when a call needs more positions),
        so that a call with the last call's prompt reuses its prefill."""
        if self._target is None or self._target.model.capacity < capacity:
            self._target = PrefillReuse(self.decoder(capacity))
        return self._target


class PrefillReuse:
    """A DecoderModel around a DeviceModel that remembers its last prompt's prefill (the tokens, the limit it ran
    under, its logits). A new prefill of the same tokens under the same limit would be the same call, of the same
    bits, so it is skipped: the cache still holds the prompt's K/V, since only a forward from position 0 (which comes
    here) rewrites positions below the prompt's length."""

    def __init__(self, model: DeviceModel):
        self.model = model
        self._key: tuple | None = None
        self._logits = None

    @property
    def kv_len(self) -> int:
        return self.model.kv_len

    def rollback(self, n_valid: int) -> None:
        self.model.rollback(n_valid)

    def forward(self, tokens, start_pos: int):
        key = (tuple(int(t) for t in tokens), mtlinv.get_limit())
        if start_pos == 0 and key == self._key:
            self.model.kv_len = len(tokens)
            return self._logits
        if start_pos < len(self._key[0] if self._key else ()):
            self._key = None  # the prompt's positions are being rewritten
        logits = self.model.forward(tokens, start_pos)
        if start_pos == 0:
            self._key, self._logits = key, logits
        return logits


def load(path: str | PathLike | None = None, progress=None, import_weights: bool = True) -> Model:
    """Loads a model: a llama, qwen2 or qwen3 GGUF file (default: SmolLM2-135M-Instruct, fetched once) or an MLX
    checkpoint directory, and unless import_weights is False imports its weights onto the active device, calling
    progress(done, total) after each layer. Raises ModelFetchError or GGUFModelError (MLXCheckpointError for a
    checkpoint), naming what is missing or not supported."""
    if path is not None and not isinstance(path, (str, PathLike)):
        raise TypeError(f"load: path must be a str or os.PathLike (None: the default model), got "
                        f"{type(path).__name__} {path!r}")
    if path is not None and not str(path):  # Path("") is the current directory
        raise ModelFetchError("the model path is empty")
    if path is not None and mlx_checkpoint.is_checkpoint(Path(path).expanduser()):
        model = Model.from_mlx(Path(path).expanduser())
    else:
        model = Model.from_gguf(load_model_path(path))
    if import_weights:
        model.import_weights(progress)
    return model
