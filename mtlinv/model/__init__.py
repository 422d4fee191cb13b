"""The model layer: GGUF and MLX checkpoint loading, tokenizers, chat templates, a float64 reference decoder, decoding loops (greedy, seeded sampling,
speculative), a draft without weights (prompt lookup), and `generate`, the streaming front end over them all.

The decoding loops need no mtlinv op: any model with `forward` and `rollback` (`decoding.DecoderModel`) runs in
them, the float64 reference as well as the device model.
"""

from .chat_template import ChatTemplate, ChatTemplateError
from .decoding import Counts, DecoderModel, SpeculativeResult, first_difference, greedy, speculative, stream
from .fetch import ModelFetchError, cache_dir, default_model_path, load_model_path
from .generation import GeneratedToken, Generation, generate
from .gguf_model import GGUFModel, GGUFModelError, GGUFTensor, LlamaConfig, load_gguf
from .loader import Model, load
from .mlx_checkpoint import MLXCheckpointError
from .prompt_lookup import PromptLookupDraft
from .reference import LlamaWeights, ReferenceModel
from .sampling import Sampler
from .tokenizer import Tokenizer

__all__ = [
    "ChatTemplate", "ChatTemplateError", "MLXCheckpointError", "Counts", "DecoderModel", "GGUFModel", "GGUFModelError", "GGUFTensor", "GeneratedToken", "Generation",
    "LlamaConfig", "LlamaWeights", "Model", "ModelFetchError", "PromptLookupDraft", "ReferenceModel", "Sampler",
    "SpeculativeResult", "Tokenizer", "cache_dir", "default_model_path", "first_difference", "generate", "greedy",
    "load", "load_gguf", "load_model_path", "speculative", "stream",
]
