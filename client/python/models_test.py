"""torchvision's models through kiln.compile against eager: every
classification model (convolution nets, ViT, Swin and MaxViT: attention,
relative position tables indexed by tensors, shifted windows built by
slice writes, padding and rolls), the segmentation models (dict results,
bilinear upsampling), video nets (3-d convolutions; S3D's 3-d pooling;
MViT's pooled attention), optical flow (RAFT: correlation volumes,
grid_sample, a recurrent update whose count is an argument), and language model
blocks written the way such models usually are: GPT-style (a causal mask
buffer sliced and compared, masked_fill with -inf, tied embeddings),
Llama-style (RMSNorm, rotary embeddings, grouped-query attention through
expand and repeat_interleave, SiLU gating, a triu mask), T5's relative
position buckets, and a mixture of experts routing each token to its top
2 of 4 experts; a text CNN (embeddings, convolutions over time, max over
time) and a super-resolution net (pixel_shuffle); and small models of
other families: a diffusion U-Net, a graph network layer, PointNet, a
selective scan and an encoder-decoder transformer; a BERT-style encoder
called with keywords; TorchScript files. conftest.py starts the kilnd.
"""
import copy
import io
import math
import os
import sys

import pytest
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402

MODELS = ["alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s",
          "googlenet", "inception_v3", "maxvit_t", "mnasnet0_5", "mobilenet_v2",
          "mobilenet_v3_large", "regnet_x_400mf", "regnet_y_400mf", "resnext50_32x4d",
          "shufflenet_v2_x0_5", "squeezenet1_1", "swin_t", "vgg11", "vit_b_16",
          "wide_resnet50_2"]


SEGMENTATION = ["deeplabv3_mobilenet_v3_large", "fcn_resnet50", "lraspp_mobilenet_v3_large"]


def matches_eager(model, x):
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():  # ViT's head starts at zero
            if not parameter.any():
                parameter.normal_(0, 0.02)
        expected = model(x)
        got = kiln.compile(model, [x])(x)
        if isinstance(expected, dict):
            assert list(got) == list(expected)
            got, expected = got["out"], expected["out"]
        torch.testing.assert_close(got, expected,
                                   rtol=1e-3, atol=1e-4 * expected.abs().max().item())


@pytest.mark.parametrize("name", MODELS)
def test_a_classification_model_matches_eager(name):
    torch.manual_seed(0)
    options = {"aux_logits": False, "init_weights": True} if name in ("googlenet",
                                                                       "inception_v3") else {}
    size = 299 if name == "inception_v3" else 224
    matches_eager(getattr(torchvision.models, name)(**options).eval(),
                  torch.randn(1, 3, size, size))


@pytest.mark.parametrize("name", SEGMENTATION)
def test_a_segmentation_model_matches_eager(name):
    torch.manual_seed(0)
    model = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)
    matches_eager(model.eval(), torch.randn(1, 3, 128, 128))


def test_a_training_step_of_a_real_net_updates_its_batch_norms_as_eager():
    """mobilenet_v3_small in training mode (batch norms, squeeze-excitation,
    hardswish; dropout off): a step's loss and the module's state after it
    (running statistics, num_batches_tracked) match eager's, step after step.
    (Its gradients are not compared: near a ReLU's or hardswish's kink a
    rounding moves one, in eager too.)"""
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(num_classes=10).train()
    model.classifier[2].p = 0.0
    twin = copy.deepcopy(model)

    class Step(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, target):
            loss = torch.nn.functional.cross_entropy(self.net(x), target)
            return [loss] + list(torch.autograd.grad(loss, list(self.net.parameters())))
    x, target = torch.randn(4, 3, 64, 64), torch.tensor([1, 7, 3, 0])
    compiled, eager = kiln.compile(Step(model), [x, target]), Step(twin)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, target)[0], eager(x, target)[0],
                                   rtol=1e-4, atol=1e-5)
        for (name, mine), theirs in zip(model.state_dict().items(), twin.state_dict().values()):
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5, msg=name)
    assert model.features[0][1].num_batches_tracked.item() == 2


def test_a_video_model_matches_eager():
    torch.manual_seed(0)
    matches_eager(torchvision.models.video.r3d_18().eval(), torch.randn(1, 3, 4, 56, 56))


def test_a_video_model_with_3d_pooling_matches_eager():
    torch.manual_seed(0)
    matches_eager(torchvision.models.video.s3d().eval(), torch.randn(1, 3, 16, 224, 224))


def test_a_video_transformer_matches_eager():
    torch.manual_seed(0)
    matches_eager(torchvision.models.video.mvit_v2_s().eval(), torch.randn(1, 3, 16, 224, 224))


def test_an_optical_flow_model_with_its_iterations_as_an_argument_matches_eager():
    torch.manual_seed(0)
    model = torchvision.models.optical_flow.raft_small().eval()
    first, second = torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128)
    with torch.no_grad():
        compiled = kiln.compile(model, [first, second], example_kwargs={"num_flow_updates": 3})
        for updates in (3, 2):  # another count of iterations is another graph
            expected = model(first, second, num_flow_updates=updates)
            got = compiled(first, second, num_flow_updates=updates)
            assert len(got) == len(expected) == updates
            for flow, want in zip(got, expected):
                torch.testing.assert_close(flow, want, rtol=1e-3,
                                           atol=1e-4 * want.abs().max().item())


class SizesAsTensors(torch.nn.Module):
    """Shape arithmetic that TorchScript's tracer records as tensors and
    reads back (prim::NumToTensor, aten::Int)."""

    def __init__(self):
        super().__init__()
        self.classify = torch.nn.Linear(48, 4)

    def forward(self, x):
        return self.classify(x.view(x.size(0), -1) * (x.size(1) // 2))


class PaddedLayer(torch.nn.Module):
    """A transformer layer called with a key padding mask."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

    def forward(self, x, padding):
        return self.layer(x, src_key_padding_mask=padding)


def _saved_and_loaded(module):
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    buffer.seek(0)
    return torch.jit.load(buffer)


@pytest.mark.parametrize("kind", ["trace", "script"])
def test_torchscript_models_saved_and_loaded_match_eager(kind):
    """TorchScript files, as serving teams keep models: traced ones record
    cuDNN's _convolution and, under no_grad, the fused transformer ops;
    scripted ones always take those fused ops."""
    torch.manual_seed(0)
    tokens, padding = torch.randn(2, 10, 32), torch.zeros(2, 10, dtype=torch.bool)
    padding[0, 7:] = True
    cases = [
        (torchvision.models.resnet18(), (torch.randn(1, 3, 64, 64),)),
        (SizesAsTensors(), (torch.randn(2, 3, 16),)),
        (torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2), (tokens,)),
        (torch.nn.TransformerEncoderLayer(32, 4, 64, activation="gelu", norm_first=True,
                                          batch_first=True), (tokens,)),
        (PaddedLayer(), (tokens, padding)),
    ]
    with torch.no_grad():
        for module, inputs in cases:
            module.eval()
            saved = _saved_and_loaded(torch.jit.trace(module, inputs) if kind == "trace"
                                      else torch.jit.script(module))
            torch.testing.assert_close(kiln.compile(saved, list(inputs))(*inputs), module(*inputs),
                                       rtol=1e-4, atol=1e-4)
        if kind == "script":  # attention alone, with its weights averaged or not
            attention = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
            scripted = _saved_and_loaded(torch.jit.script(attention))
            for average in (True, False):
                options = {"key_padding_mask": padding, "average_attn_weights": average}
                got = kiln.compile(scripted, [tokens, tokens, tokens],
                                   example_kwargs=options)(tokens, tokens, tokens, **options)
                for part, want in zip(got, attention(tokens, tokens, tokens, **options)):
                    torch.testing.assert_close(part, want, rtol=1e-4, atol=1e-5)


class BertStyle(torch.nn.Module):
    """An encoder written the way BERT-style models usually are: called
    with keywords, an attention mask of 1s and 0s, optional token types,
    position ids sliced from a buffer, and a dict out that holds every
    layer's states when asked."""

    def __init__(self, vocabulary=100, width=32, heads=4, layers=2, positions=64):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocabulary, width)
        self.positions = torch.nn.Embedding(positions, width)
        self.types = torch.nn.Embedding(2, width)
        self.norm = torch.nn.LayerNorm(width)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(width, heads, 4 * width, activation="gelu",
                                             batch_first=True) for _ in range(layers))
        self.pool = torch.nn.Linear(width, width)
        self.register_buffer("position_ids", torch.arange(positions).expand(1, -1))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                output_hidden_states=False):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = self.position_ids[:, :input_ids.size(1)]
        x = self.norm(self.tokens(input_ids) + self.positions(positions)
                      + self.types(token_type_ids))
        padding = None if attention_mask is None else attention_mask == 0
        states = [x]
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=padding)
            states.append(x)
        out = {"last_hidden_state": x, "pooler_output": torch.tanh(self.pool(x[:, 0]))}
        if output_hidden_states:
            out["hidden_states"] = tuple(states)
        return out


def test_a_bert_style_encoder_called_with_keywords_matches_eager():
    torch.manual_seed(0)
    model = BertStyle().eval()
    ids, mask = torch.randint(0, 100, (2, 12)), torch.ones(2, 12, dtype=torch.long)
    mask[1, 9:] = 0
    with torch.no_grad():
        compiled = kiln.compile(model, [ids], example_kwargs={"attention_mask": mask},
                                dynamic={0: {1: "T"}, "attention_mask": {1: "T"}})
        for options in ({"attention_mask": mask}, {"attention_mask": mask,
                                                   "output_hidden_states": True}, {}):
            got, want = compiled(ids, **options), model(ids, **options)
            assert list(got) == list(want)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        for length in (5, 64):  # the sequence's length is symbolic
            ids, mask = torch.randint(0, 100, (2, length)), torch.ones(2, length, dtype=torch.long)
            torch.testing.assert_close(compiled(ids, attention_mask=mask),
                                       model(ids, attention_mask=mask), rtol=1e-4, atol=1e-4)


class TextCnn(torch.nn.Module):
    """Kim's sentence classifier: embeddings, convolutions of three widths
    over time, each max-pooled over the whole sentence (x.max(dim))."""

    def __init__(self, vocabulary=1000, width=32, classes=4):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocabulary, width)
        self.convolutions = torch.nn.ModuleList(
            torch.nn.Conv1d(width, 16, k, padding=k // 2) for k in (3, 4, 5))
        self.classify = torch.nn.Linear(3 * 16, classes)

    def forward(self, tokens):
        x = self.embedding(tokens).transpose(1, 2)
        pooled = [torch.relu(c(x)).max(dim=2).values for c in self.convolutions]
        return self.classify(torch.cat(pooled, 1))


def test_a_text_cnn_matches_eager():
    torch.manual_seed(0)
    matches_eager(TextCnn().eval(), torch.randint(0, 1000, (2, 20)))


class SuperResolution(torch.nn.Module):
    """ESPCN: convolutions at low resolution, then a sub-pixel convolution
    (pixel_shuffle) up by 3."""

    def __init__(self, factor=3):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.Tanh(),
            torch.nn.Conv2d(32, 16, 3, padding=1), torch.nn.Tanh(),
            torch.nn.Conv2d(16, factor * factor, 3, padding=1), torch.nn.PixelShuffle(factor))

    def forward(self, x):
        return torch.sigmoid(self.body(x))


def test_a_super_resolution_net_matches_eager():
    torch.manual_seed(0)
    matches_eager(SuperResolution().eval(), torch.randn(1, 1, 24, 32))


class Block(torch.nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.attention, self.projection = (torch.nn.Linear(width, 3 * width),
                                           torch.nn.Linear(width, width))
        self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)
        causal = torch.tril(torch.ones(context, context)).view(1, 1, context, context)
        self.register_buffer("causal", causal)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = (part.view(batch, length, self.heads, width // self.heads).transpose(1, 2)
                   for part in self.attention(self.norm1(x)).split(width, dim=2))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        scores = scores.masked_fill(self.causal[:, :, :length, :length] == 0, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).contiguous()
        x = x + self.projection(y.view(batch, length, width))
        up = torch.nn.functional.gelu(self.up(self.norm2(x)), approximate="tanh")
        return x + self.down(up)


class Gpt(torch.nn.Module):
    def __init__(self, vocabulary=100, width=64, heads=4, context=32, layers=2):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocabulary, width)
        self.positions = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.Sequential(*(Block(width, heads, context) for _ in range(layers)))
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, ids):
        positions = torch.arange(0, ids.shape[1], dtype=torch.long).unsqueeze(0)
        x = self.blocks(self.tokens(ids) + self.positions(positions))
        return self.norm(x) @ self.tokens.weight.T


def test_a_gpt_style_language_model_matches_eager():
    torch.manual_seed(0)
    matches_eager(Gpt().eval(), torch.randint(0, 100, (2, 32)))


class RmsNorm(torch.nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(width) + 0.1 * torch.randn(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(torch.nn.Module):
    def __init__(self, width=64, heads=4, kv_heads=2, hidden=128):
        super().__init__()
        self.heads, self.kv_heads, self.head = heads, kv_heads, width // heads
        linear = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.q, self.k = linear(width, width), linear(width, kv_heads * self.head)
        self.v, self.o = linear(width, kv_heads * self.head), linear(width, width)
        self.gate, self.up, self.down = linear(width, hidden), linear(width, hidden), \
            linear(hidden, width)
        self.norm1, self.norm2 = RmsNorm(width), RmsNorm(width)
        self.register_buffer("inverse_frequencies",
                             1.0 / (10000 ** (torch.arange(0, self.head, 2).float() / self.head)))

    def attention(self, x):
        batch, length, _ = x.shape
        q = self.q(x).view(batch, length, self.heads, self.head).transpose(1, 2)
        k = self.k(x).view(batch, length, self.kv_heads, self.head).transpose(1, 2)
        v = self.v(x).view(batch, length, self.kv_heads, self.head).transpose(1, 2)
        angles = torch.outer(torch.arange(length, dtype=torch.float32), self.inverse_frequencies)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos()[None, None], angles.sin()[None, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k[:, :, None].expand(batch, self.kv_heads, group, length, self.head) \
            .reshape(batch, self.heads, length, self.head)
        v = torch.repeat_interleave(v, group, dim=1)
        mask = torch.full((length, length), float("-inf")).triu(1)
        scores = (q @ k.transpose(2, 3)) / math.sqrt(self.head) + mask
        y = torch.softmax(scores.float(), dim=-1).type_as(q) @ v
        return self.o(y.transpose(1, 2).reshape(batch, length, -1))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        h = self.norm2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def test_a_llama_style_block_matches_eager():
    torch.manual_seed(0)
    matches_eager(LlamaBlock().eval(), torch.randn(2, 16, 64))


def test_decoders_compile_once_for_every_sequence_length():
    """GPT's causal mask cut from a buffer, Llama's rotary halves joined by
    cat: one symbolic artifact for any length up to the mask's."""
    torch.manual_seed(0)
    for model, make in ((Gpt().eval(), lambda t: torch.randint(0, 100, (2, t))),
                        (LlamaBlock().eval(), lambda t: torch.randn(2, t, 64))):
        with torch.no_grad():
            compiled = kiln.compile(model, [make(16)], dynamic={0: {1: "T"}})
            for length in (16, 5, 30):
                x = make(length)
                torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def t5_buckets(relative, buckets=32, max_distance=128):
    buckets //= 2
    bucket = (relative > 0).to(torch.long) * buckets
    distance = torch.abs(relative)
    exact = buckets // 2
    large = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                     * (buckets - exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return bucket + torch.where(distance < exact, distance, large)


class T5Bias(torch.nn.Module):
    def __init__(self, heads=4):
        super().__init__()
        self.bias = torch.nn.Embedding(32, heads)

    def forward(self, scores):
        length = scores.shape[-1]
        positions = torch.arange(length, dtype=torch.long)
        buckets = t5_buckets(positions[None, :] - positions[:, None])
        return scores + self.bias(buckets).permute(2, 0, 1).unsqueeze(0)


def test_t5_relative_position_buckets_match_eager():
    torch.manual_seed(0)
    matches_eager(T5Bias().eval(), torch.randn(2, 4, 20, 20))


class MixtureOfExperts(torch.nn.Module):
    """Every expert runs on every token; each token keeps its top 2 experts'
    outputs, weighted by the router (the form with static shapes)."""

    def __init__(self, width=32, experts=4, hidden=64):
        super().__init__()
        self.router = torch.nn.Linear(width, experts, bias=False)
        self.up = torch.nn.Parameter(torch.randn(experts, width, hidden) * 0.1)
        self.down = torch.nn.Parameter(torch.randn(experts, hidden, width) * 0.1)

    def forward(self, x):
        weights, chosen = self.router(x).softmax(-1).topk(2)
        gates = torch.zeros(x.shape[0], self.up.shape[0]).scatter(
            1, chosen, weights / weights.sum(-1, keepdim=True))
        hidden = torch.nn.functional.silu(torch.einsum("tw,ewh->eth", x, self.up))
        outputs = torch.einsum("eth,ehw->etw", hidden, self.down)
        return torch.einsum("te,etw->tw", gates, outputs)


def test_a_mixture_of_experts_layer_matches_eager():
    torch.manual_seed(0)
    matches_eager(MixtureOfExperts().eval(), torch.randn(10, 32))


class TimeEmbedding(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.width = width
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.SiLU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, t):
        half = self.width // 2
        frequencies = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        angles = t[:, None].float() * frequencies[None]
        return self.mlp(torch.cat([torch.cos(angles), torch.sin(angles)], -1))


class DiffusionBlock(torch.nn.Module):
    def __init__(self, channels, width):
        super().__init__()
        self.norm1, self.norm2 = torch.nn.GroupNorm(8, channels), torch.nn.GroupNorm(8, channels)
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.time = torch.nn.Linear(width, channels)

    def forward(self, x, embedding):
        silu = torch.nn.functional.silu
        h = self.conv1(silu(self.norm1(x))) + self.time(embedding)[:, :, None, None]
        return x + self.conv2(silu(self.norm2(h)))


class DiffusionUNet(torch.nn.Module):
    """A denoiser's U-Net: sinusoidal time embeddings, group norm and SiLU
    residual blocks, a strided convolution down, self-attention over
    pixels, a transposed convolution up and a skip connection."""

    def __init__(self, channels=32, width=32):
        super().__init__()
        self.embed = TimeEmbedding(width)
        self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.block1 = DiffusionBlock(channels, width)
        self.down = torch.nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1)
        self.block2 = DiffusionBlock(2 * channels, width)
        self.attention_norm = torch.nn.GroupNorm(8, 2 * channels)
        self.qkv = torch.nn.Conv2d(2 * channels, 6 * channels, 1)
        self.up = torch.nn.ConvTranspose2d(2 * channels, channels, 4, 2, 1)
        self.block3 = DiffusionBlock(channels, width)
        self.out = torch.nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x, t):
        embedding = self.embed(t)
        skip = self.block1(self.stem(x), embedding)
        h = self.block2(self.down(skip), embedding)
        b, c, height, width = h.shape
        q, k, v = self.qkv(self.attention_norm(h)).reshape(b, 3, c, height * width).unbind(1)
        weights = torch.softmax(q.transpose(1, 2) @ k / math.sqrt(c), -1)
        h = h + (v @ weights.transpose(1, 2)).reshape(b, c, height, width)
        return self.out(torch.nn.functional.silu(self.block3(self.up(h) + skip, embedding)))


class MessagePassing(torch.nn.Module):
    """A graph network layer: messages gathered at edge sources, summed at
    their destinations with index_add and averaged by in-degree."""

    def __init__(self, width=16):
        super().__init__()
        self.message, self.update = torch.nn.Linear(width, width), torch.nn.Linear(2 * width, width)

    def forward(self, x, source, destination):
        summed = torch.zeros_like(x).index_add(0, destination, self.message(x)[source])
        degree = torch.zeros(x.shape[0]).index_add(0, destination, torch.ones(destination.shape[0]))
        mean = summed / degree.clamp(min=1)[:, None]
        return torch.nn.functional.relu(self.update(torch.cat([x, mean], -1)))


class PointNet(torch.nn.Module):
    """Per-point 1x1 convolutions with batch norm, a max over the points."""

    def __init__(self):
        super().__init__()
        self.points = torch.nn.Sequential(
            torch.nn.Conv1d(3, 64, 1), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
            torch.nn.Conv1d(64, 128, 1), torch.nn.ReLU())
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.points(x).max(dim=2).values)


class SelectiveScan(torch.nn.Module):
    """A diagonal state space layer in its parallel form (cumulative sums of
    log decays), as selective scans are written without a custom kernel."""

    def __init__(self, width=16):
        super().__init__()
        self.decay = torch.nn.Parameter(-torch.rand(width))
        self.project = torch.nn.Linear(width, 2 * width)

    def forward(self, x):
        u, step = self.project(x).chunk(2, -1)
        step = torch.nn.functional.softplus(step)
        log_decay = torch.cumsum(step * self.decay, 1)
        return torch.exp(log_decay) * torch.cumsum(torch.exp(-log_decay) * u * step, 1)


FAMILIES = {
    "diffusion_unet": (DiffusionUNet, lambda: [torch.randn(2, 3, 16, 16), torch.tensor([3, 500])]),
    "message_passing": (MessagePassing, lambda: [torch.randn(10, 16), torch.randint(0, 10, (30,)),
                                                 torch.randint(0, 10, (30,))]),
    "pointnet": (PointNet, lambda: [torch.randn(2, 3, 100)]),
    "selective_scan": (SelectiveScan, lambda: [torch.randn(2, 20, 16)]),
    "encoder_decoder_transformer": (
        lambda: torch.nn.Transformer(32, 4, 2, 2, 64, 0.0, batch_first=True),
        lambda: [torch.randn(2, 7, 32), torch.randn(2, 5, 32)]),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_a_model_of_another_family_matches_eager(name):
    make, inputs = FAMILIES[name]
    torch.manual_seed(0)
    model, example = make().eval(), inputs()
    with torch.no_grad():
        expected = model(*example)
        got = kiln.compile(model, example)(*example)
    torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-4 * expected.abs().max().item())


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
