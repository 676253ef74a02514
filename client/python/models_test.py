"""Every classification model of Debian's torchvision, through kiln.compile
against eager: convolution nets, ViT, Swin and MaxViT (attention, relative
position tables indexed by tensors, shifted windows built by slice writes,
padding and rolls). conftest.py starts the kilnd.
"""
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


@pytest.mark.parametrize("name", MODELS)
def test_a_torchvision_model_matches_eager(name):
    torch.manual_seed(0)
    options = {"aux_logits": False, "init_weights": True} if name in ("googlenet",
                                                                       "inception_v3") else {}
    model = getattr(torchvision.models, name)(**options).eval()
    with torch.no_grad():
        for parameter in model.parameters():  # ViT's head starts at zero
            if not parameter.any():
                parameter.normal_(0, 0.02)
        x = torch.randn(1, 3, 299 if name == "inception_v3" else 224, 224)
        x = x if name != "inception_v3" else torch.randn(1, 3, 299, 299)
        expected = model(x)
        torch.testing.assert_close(kiln.compile(model, [x])(x), expected,
                                   rtol=1e-3, atol=1e-4 * expected.abs().max().item())


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
