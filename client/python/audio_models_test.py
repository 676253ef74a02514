"""torchaudio's models through kiln.compile against eager, with
random weights and small configurations: convolution nets over waveforms
and features (Wav2Letter, ConvTasNet: PReLU, group norm, transposed
convolution), recurrent ones (DeepSpeech; WaveRNN, a GRU unrolled over 64
steps), wav2vec 2.0 in both layouts (a grouped positional convolution with
weight norm), Emformer and an Emformer RNN-T (cats onto empty memories,
integer floor division of lengths). A Conformer reads lengths.max() to
size its mask: refused naming that line, and run eagerly on fallback.
conftest.py starts the kilnd."""
import os
import sys

import pytest
import torch
import torchaudio.models as M

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402


def wav2vec2(layer_norm_first):
    return M.wav2vec2_model(
        extractor_mode="layer_norm" if layer_norm_first else "group_norm",
        extractor_conv_layer_config=None, extractor_conv_bias=layer_norm_first,
        encoder_embed_dim=96, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=32,
        encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=4,
        encoder_attention_dropout=0.0, encoder_ff_interm_features=192,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
        encoder_layer_norm_first=layer_norm_first, encoder_layer_drop=0.0,
        aux_num_out=None if layer_norm_first else 32)


def rnnt():
    return M.emformer_rnnt_model(
        input_dim=40, encoding_dim=64, num_symbols=30, segment_length=4, right_context_length=1,
        time_reduction_input_dim=40, time_reduction_stride=2, transformer_num_heads=4,
        transformer_ffn_dim=128, transformer_num_layers=2, transformer_dropout=0.0,
        transformer_activation="gelu", transformer_left_context_length=8,
        transformer_max_memory_size=0, transformer_weight_init_scale_strategy="depthwise",
        transformer_tanh_on_mem=False, symbol_embedding_dim=32, num_lstm_layers=2,
        lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-3, lstm_dropout=0.0)


# name -> (model, example inputs)
MODELS = {
    "wav2letter": (lambda: M.Wav2Letter(num_classes=40),
                   lambda: [torch.randn(1, 1, 4000)]),
    "wav2letter_mfcc": (lambda: M.Wav2Letter(num_classes=40, input_type="mfcc", num_features=13),
                        lambda: [torch.randn(1, 13, 200)]),
    "deepspeech": (lambda: M.DeepSpeech(n_feature=40, n_hidden=64, n_class=29),
                   lambda: [torch.randn(1, 1, 50, 40)]),
    "conv_tasnet": (lambda: M.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=64,
                                         msk_kernel_size=3, msk_num_feats=32,
                                         msk_num_hidden_feats=64, msk_num_layers=2,
                                         msk_num_stacks=2),
                    lambda: [torch.randn(1, 1, 800)]),
    "wav2vec2": (lambda: wav2vec2(False), lambda: [torch.randn(1, 4000)]),
    "wav2vec2_layer_norm_first": (lambda: wav2vec2(True), lambda: [torch.randn(2, 4000)]),
    "emformer": (lambda: M.Emformer(input_dim=64, num_heads=4, ffn_dim=128, num_layers=2,
                                    segment_length=4, right_context_length=1),
                 lambda: [torch.randn(1, 21, 64), torch.tensor([21])]),
    "emformer_rnnt": (rnnt, lambda: [torch.randn(1, 21, 40), torch.tensor([21]),
                                     torch.randint(0, 30, (1, 5)), torch.tensor([5])]),
    "wavernn": (lambda: M.WaveRNN(upsample_scales=[2, 2, 4], n_classes=64, hop_length=16,
                                  n_res_block=1, n_rnn=32, n_fc=32, kernel_size=5, n_freq=20,
                                  n_hidden=16, n_output=16),
                lambda: [torch.randn(1, 1, 16 * 4), torch.randn(1, 1, 20, 8)]),
}


def tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in tensors(item)]
    return []


@pytest.mark.parametrize("name", MODELS)
def test_a_speech_model_matches_eager(name):
    make, inputs = MODELS[name]
    torch.manual_seed(0)
    model, example = make().eval(), inputs()
    with torch.no_grad():
        expected = tensors(model(*example))
        got = tensors(kiln.compile(model, example)(*example))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e.dtype.is_floating_point:
            torch.testing.assert_close(g, e, rtol=1e-3, atol=1e-4 * e.abs().max().item())
        else:
            assert torch.equal(g, e)


def test_a_model_that_sizes_a_mask_from_values_is_refused_by_strict_naming_the_line():
    torch.manual_seed(0)
    model = M.Conformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=2,
                        depthwise_conv_kernel_size=31).eval()
    x, lengths = torch.randn(2, 50, 80), torch.tensor([50, 40])
    with torch.no_grad():
        with pytest.raises(kiln.UnsupportedOpError,
                           match=r"conformer\.py:\d+ in _lengths_to_padding_mask \(max_length = "
                                 r"int\(torch\.max\(lengths\)\.item\(\)\)\) reads a tensor's value "
                                 r"while tracing"):
            kiln.compile(model, [x, lengths], strict=True)
        with pytest.warns(RuntimeWarning, match="reads a tensor's value"):
            fallback = kiln.compile(model, [x, lengths], fallback="eager")
            got, got_lengths = fallback(x, lengths)
        expected, expected_lengths = model(x, lengths)
    torch.testing.assert_close(got, expected)
    assert torch.equal(got_lengths, expected_lengths)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
