"""The model side of `mtlinv demo`: GGUF loading, tokenizer, a float64 reference decoder, decoding loops, and a
draft without weights (prompt lookup).

Nothing here needs the mtlinv GPU ops; a device model only has to offer `forward` and `rollback`
(see `decoding.DecoderModel`) to run in the same loops.
"""

from .decoding import DecoderModel, SpeculativeResult, first_difference, greedy, speculative
from .fetch import ModelFetchError, cache_dir, default_model_path, load_model_path
from .gguf_model import GGUFModel, GGUFModelError, GGUFTensor, LlamaConfig, load_gguf
from .prompt_lookup import PromptLookupDraft
from .reference import LlamaWeights, ReferenceModel
from .tokenizer import Tokenizer

__all__ = [
    "DecoderModel", "GGUFModel", "GGUFModelError", "GGUFTensor", "LlamaConfig", "LlamaWeights", "ModelFetchError",
    "PromptLookupDraft", "ReferenceModel", "SpeculativeResult", "Tokenizer", "cache_dir", "default_model_path",
    "first_difference", "greedy", "load_gguf", "load_model_path", "speculative",
]
