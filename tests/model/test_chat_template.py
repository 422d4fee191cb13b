"""Chat templates rendered as transformers renders them (jinja2, trim_blocks/lstrip_blocks, loopcontrols, tojson,
raise_exception), from the model's own metadata."""
import pytest

from mtlinv.model.chat_template import ChatTemplate, ChatTemplateError

# A template in the style of Llama 3's: bos_token, whitespace control, loop controls, a refusal.
TEMPLATE = """{{ bos_token }}
{% for m in messages %}
  {% if m['role'] == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}
  {% if loop.index0 > 4 %}{% break %}{% endif %}
<|{{ m['role'] }}|>{{ m['content'] | trim }}{{ eos_token }}
{% endfor %}
{% if add_generation_prompt %}<|assistant|>{% endif %}"""


@pytest.fixture
def template():
    return ChatTemplate(TEMPLATE, {"bos_token": "<s>", "eos_token": "</s>"})


def test_renders_with_block_trimming(template):
    text = template.render([{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}])
    # trim_blocks drops the newline after a block tag ({% ... %}), lstrip_blocks the indentation before one; the
    # newline after an expression ({{ ... }}) stays.
    assert text == "<s>\n<|system|>Be brief.</s>\n<|user|>Hi</s>\n<|assistant|>"


def test_transformers_renders_the_same(template):
    """Where transformers is installed, its own apply_chat_template renders the template to the same text."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token="<s>",
                                               eos_token="</s>")
    messages = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}]
    assert template.render(messages) == tok.apply_chat_template(messages, chat_template=TEMPLATE, tokenize=False,
                                                                add_generation_prompt=True)


def test_refusals_and_bad_input_are_chat_template_errors(template):
    with pytest.raises(ChatTemplateError, match="the chat template refused the conversation: no tools here"):
        template.render([{"role": "tool", "content": "x"}])
    with pytest.raises(ChatTemplateError, match=r"messages\[0\] must be a dict with a role in"):
        template.render([{"role": "narrator", "content": "x"}])
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% for %}", {})
    with pytest.raises(ChatTemplateError, match="is empty"):
        ChatTemplate("  ", {})


def test_content_that_is_not_utf8_is_named_by_message(template):
    """Undecodable bytes from a terminal (lone surrogates) are named by message and place in its content (they
    were once named by their place in the rendered text, which the user never wrote)."""
    with pytest.raises(ValueError, match=r"messages\[1\] content is not valid UTF-8 at character 3: '\\udce9'"):
        template.render([{"role": "user", "content": "Hi"}, {"role": "user", "content": "caf\udce9"}])
