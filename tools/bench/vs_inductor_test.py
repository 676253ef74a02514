"""//tools/bench:vs_inductor on f, one process of each kind: every figure
is printed, the ratios are the quotients of the figures, and every route's
result is eager's. Its timings are never asserted."""
import json
import math
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vs_inductor.py")
ROUTES = ("kiln_compile", "kiln_package", "kiln_dynamo", "kiln_export", "inductor", "aoti")
FIGURES = ("cold_ms", "fresh_warm_ms", "warm_call_us")


# An interpreter that does not exist: the bench runs without torch 2.9.1.
NO_TORCH291 = "/nonexistent/.venv-torch291/bin/python3"


@pytest.fixture(scope="module")
def figures():
    out = subprocess.run([sys.executable, BENCH, "--models=f", "--repetitions=1",
                          "--cold_repetitions=1", "--warmup_processes=0", "--json",
                          "--inductor291_python", NO_TORCH291],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_figure_of_f_is_printed_as_a_positive_number(figures):
    keys = [f"f_{route}_{figure}{suffix}" for route in ROUTES + ("kiln",) for figure in FIGURES
            for suffix in ("", "_min", "_max")]
    keys += ["f_eager_warm_call_us", "f_eager_warm_call_us_min", "f_eager_warm_call_us_max",
             "f_fresh_warm_ratio", "f_cold_ratio", "f_warm_call_ratio", "f_eager_warm_call_ratio",
             "f_aoti_fresh_warm_ratio", "f_aoti_cold_ratio", "cold_ratio_min",
             "warm_call_ratio_min", "warm_call_ratio_geomean"]
    keys += [f"f_{side}_{figure}_ratio" for side in ("dynamo", "export")
             for figure in ("cold", "fresh_warm", "warm_call")]
    missing = [key for key in keys if key not in figures]
    assert missing == []
    bad = {key: figures[key] for key in keys
           if not (isinstance(figures[key], float) and math.isfinite(figures[key])
                   and figures[key] > 0)}
    assert bad == {}


def test_the_ratios_are_inductor_over_kiln_next_to_the_issues_targets(figures):
    assert figures["f_kiln_cold_ms"] == figures["f_kiln_compile_cold_ms"]
    assert figures["f_kiln_fresh_warm_ms"] == figures["f_kiln_package_fresh_warm_ms"]
    assert figures["f_kiln_warm_call_us"] == figures["f_kiln_compile_warm_call_us"]
    assert figures["f_fresh_warm_ratio"] == pytest.approx(
        figures["f_inductor_fresh_warm_ms"] / figures["f_kiln_fresh_warm_ms"])
    assert figures["cold_ratio_min"] == pytest.approx(
        figures["f_inductor_cold_ms"] / figures["f_kiln_cold_ms"])
    assert figures["warm_call_ratio_min"] == pytest.approx(
        figures["f_inductor_warm_call_us"] / figures["f_kiln_warm_call_us"])
    assert figures["warm_call_ratio_geomean"] == pytest.approx(figures["warm_call_ratio_min"])
    assert figures["f_aoti_fresh_warm_ratio"] == pytest.approx(
        figures["f_aoti_fresh_warm_ms"] / figures["f_kiln_package_fresh_warm_ms"])
    for figure in FIGURES:
        name = figure.removesuffix("_ms").removesuffix("_us")
        assert figures[f"f_dynamo_{name}_ratio"] == pytest.approx(
            figures[f"f_inductor_{figure}"] / figures[f"f_kiln_dynamo_{figure}"])
        assert figures[f"f_export_{name}_ratio"] == pytest.approx(
            figures[f"f_aoti_{figure}"] / figures[f"f_kiln_export_{figure}"])
    assert {key: figures[key] for key in figures if key.endswith("_target")} == {
        "f_fresh_warm_ratio_target": 100, "cold_ratio_min_target": 10,
        "warm_call_ratio_min_target": 1.0, "warm_call_ratio_geomean_target": 1.2}


def test_every_route_gives_eagers_result(figures):
    for route in ROUTES + ("eager",):
        # 1e-4 of f's largest output (relu(x @ x.T + 1) on randn(64, 64): ~90).
        assert 1e-3 < figures[f"f_{route}_tolerance"] < 1e-1
        assert figures[f"f_{route}_max_abs_err"] <= figures[f"f_{route}_tolerance"]


def test_without_torch_291_its_figures_are_null_and_the_fact_says_why(figures):
    keys = [f"f_{route}_{figure}" for route in ("inductor291", "aoti291") for figure in FIGURES]
    keys += [f"f_{route}_{name}_ratio" for route in ("inductor291", "aoti291")
             for name in ("fresh_warm", "cold")]
    assert {key: figures.get(key, "missing") for key in keys} == dict.fromkeys(keys)
    assert figures["inductor291"] == (
        f"not measured: no {NO_TORCH291} (scripts/install-deps.sh --with-torch291 creates "
        ".venv-torch291 in the checkout)")


def test_an_unknown_model_is_refused_naming_the_models():
    out = subprocess.run([sys.executable, BENCH, "--models=f,gpt5"], capture_output=True,
                         text=True)
    assert out.returncode == 2
    assert "no model gpt5: the models are f, transformer, resnet18, bert" in out.stderr


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
