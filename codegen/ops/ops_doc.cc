#include "codegen/ops/ops_doc.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/ops/numerics.h"
#include "codegen/ops/op_table.h"

namespace kiln::ops {
namespace {

std::string ArgText(const ArgSpec& arg) {
  if (arg.kind == ArgKind::kOptionalTensor) return absl::StrCat(arg.name, " (optional tensor)");
  if (!arg.default_value.has_value()) return arg.name;
  ir::Graph no_symbols;
  return absl::StrCat(arg.name, "=", ir::ToString(*arg.default_value, no_symbols));
}

}  // namespace

std::string OpsMarkdown() {
  std::string text =
      "# Supported ops\n\n"
      "Generated from the op table (`codegen/ops/`) by `kiln ops`; a test fails when this\n"
      "file and the table disagree. Regenerate: `bazel run //tools/kiln -- ops > docs/OPS.md`.\n\n"
      "An op not listed here is refused with `Unimplemented`, naming the node and the op;\n"
      "an input dtype an op does not list is `Unimplemented` too, or `InvalidArgument`\n"
      "where eager PyTorch refuses it as well (`-bool`, `argmax` of bool).\n"
      "Composites are rewritten into other ops before lowering; `kiln.*` ops are internal.\n"
      "16-bit floats compute in float32 inside a kernel and are rounded when stored;\n"
      "a Python scalar next to a 16-bit tensor is rounded to its dtype first, as eager does.\n"
      "Every op and dtype here is tested against eager PyTorch by `//tests/ops:ops_test`.\n"
      "The Python tracer (`kiln.compile`, `kiln_trace.py`) decomposes more ops into these\n"
      "before Kiln sees them (indexing, padding, interpolation, norms, losses, and more):\n"
      "docs/PYTHON.md lists them.\n\n"
      "## Numerics\n\n"
      "No fast-math: NaN, infinities and -0.0 behave as in eager; selections, comparisons\n"
      "and IEEE arithmetic match eager bit for bit. Transcendentals come from two named\n"
      "sources: float32 (and 16-bit) exp, log and tanh, and so sigmoid, silu, softmax and\n"
      "gelu's erf, from Kiln's vectorizable polynomials (`codegen/emit/kiln_math.h`, pasted\n"
      "into every artifact); the others and all float64 functions from the client\n"
      "runtime's table (glibc's libm, `codegen/abi/kiln_abi.h`). Eager's come from SLEEF\n"
      "or its own polynomials, so results may differ by the bounds below:\n"
      "the largest distance from eager, in units in the last place of the result dtype,\n"
      "over sweeps of random, huge, tiny, denormal and exceptional inputs (`tests/ops`).\n"
      "Reductions and composites match within `torch.testing.assert_close`'s defaults.\n"
      "fmod, remainder and floor division (`floor_divide`, `div`'s rounding modes) match\n"
      "eager's scalar loop bit for bit (C's fmod; remainder and floor division are eager's\n"
      "definitions on it, in the runtime's table); eager's vectorized loop returns NaN\n"
      "for quotients beyond SLEEF's fmod (fmod(3.4e38, 0.1)) and for floor division by\n"
      "zero, where IEEE division gives an infinity. Integers divide by a nonzero constant\n"
      "only (`x // 2`, `x % 3`): eager raises on a zero divisor, which a kernel cannot.\n\n"
      "| function | float32 | float64 | float16 | bfloat16 |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const UlpBound& bound : UlpBounds()) {
    absl::StrAppend(&text, "| `", bound.function, "` | ", bound.float32, " | ", bound.float64,
                    " | ", bound.float16, " | ", bound.bfloat16, " |\n");
  }
  absl::StrAppend(&text,
                  "\n16-bit bounds are 1 because a 1-ulp difference in float32 can round either\n"
                  "way (most measure 0). Known differences: SLEEF's `log1p` (eager, contiguous\n"
                  "inputs) returns inf above 1e38 (float32) and 1e307 (float64) where Kiln, like\n"
                  "eager's strided path, gives the finite log; `gelu` (both forms) cancels for\n"
                  "x << 0 and eager's contiguous float32 `gelu` is oneDNN's own approximation, so\n"
                  "it is held to assert_close's tolerances instead of an ulp bound; so is\n"
                  "`elu` (and its backward), whose exp(x) - 1 cancels near 0 as eager's does.\n"
                  "Where eager's vectorized and scalar loops disagree (a NaN input of\n"
                  "`hardtanh_backward`, `hardswish_backward` and `elu_backward`; `softshrink`'s\n"
                  "zero for a negative x inside), Kiln gives the vectorized loop's result,\n"
                  "eager's for contiguous tensors.\n\n"
                  "Partial: `cat`'s parts may be symbolic in other dims, and along the cat dim\n"
                  "must add up to a size (constants, or 2*T from two T); it takes parts of\n"
                  "equal size along the cat dim only (others are\n"
                  "`Unimplemented`: the emitter evaluates both sides of a select, so a kernel\n"
                  "cannot pick between parts of different sizes without reading out of bounds);\n"
                  "`native_layer_norm_backward` computes all three gradients whatever\n"
                  "`output_mask` says; `pow` takes floating tensors only; a factory's `size`\n"
                  "may name symbols (`ones(T, T)`), and `arange` a symbolic end only counting\n"
                  "from 0 by 1 (`arange(T)`); `slice` of a static dim to a symbolic end only\n"
                  "from 0 by 1 (`table[:T]`, which the relations must keep within the dim:\n"
                  "the tracer states `T <= size`), `select` in a symbolic dim only counting\n"
                  "from its start, below its smallest size (`x[:, 0]`); pooling takes a\n"
                  "static height and width (the\n"
                  "batch and channels may be symbolic), `_adaptive_avg_pool2d` windows of at\n"
                  "most 64 sizes and places (any size pair whose input divides by the output has\n"
                  "one) and its backward windows of one size.\n"
                  "\n"
                  "Normalizations: `native_batch_norm` in training mode (`training=True`)\n"
                  "normalizes with the batch's statistics and returns them (`save_mean`,\n"
                  "`save_invstd`), but never updates `running_mean` and `running_var` as eager\n"
                  "does in place: an artifact is a pure function, so in training mode the running\n"
                  "statistics and `momentum` are ignored. `kiln.compile` updates them as eager\n"
                  "does: its tracer adds their new values (momentum times the batch's mean and\n"
                  "unbiased variance plus the rest of the old ones) as outputs and copies them\n"
                  "into the module's buffers after each call, as it does for every input a\n"
                  "function changes in place (docs/PYTHON.md). The command-line tracer, whose\n"
                  "graph files have nowhere to copy them, warns when it traces one and refuses an\n"
                  "`nn.BatchNorm` module in training mode (which also counts\n"
                  "`num_batches_tracked`). Eval mode needs the running statistics (eager\n"
                  "crashes without them) and is one pass over the input, `x * scale + shift` per\n"
                  "channel, as eager's CPU kernel computes it; its `save_mean` and `save_invstd`\n"
                  "are empty as eager's, but `[C]` float32 in float16 graphs, as the meta kernels\n"
                  "that trace those declare (the running mean and `1 / sqrt(running_var + eps)`).\n"
                  "Parameters have the input's dtype, or float32 beside a 16-bit batch norm input\n"
                  "(eager's mixed precision). The batch and group norm backward ops compute all\n"
                  "three gradients whatever `output_mask` says. Instance norm is what make_fx\n"
                  "makes of it: a training-mode batch norm over `[1, N * C, ...]` (after a\n"
                  "`repeat` of an affine one's weight and bias). Group norm needs a static\n"
                  "channel count.\n\n"
                  "`cumsum` is one running sum per line, linear in its length, accumulated as\n"
                  "eager does (in double for float32): its float32, float64, bfloat16 and\n"
                  "integer results are eager's bit for bit. `flip` of a symbolic dim (cumsum's\n"
                  "backward flips) is `Unimplemented`.\n\n"
                  "Lookups (`embedding`, `index_select`, `gather`) read the table at positions an\n"
                  "int64 or int32 index tensor holds, as eager. An index outside the dim "
                  "(negative, or past its size) is an\n"
                  "`IndexError` in eager; an artifact cannot raise, so Kiln reads 0 there and\n"
                  "never touches memory out of bounds. Their backward ops scatter:\n"
                  "`embedding_dense_backward` (embedding's), `index_add` (index_select's) and\n"
                  "`scatter_add` (gather's) start from zeros or `self`, then add each source\n"
                  "element at the position its index names, one after another in eager's order,\n"
                  "16-bit results summed in float32 and rounded once as eager does, so the sums\n"
                  "are eager's bit for bit. A scatter runs on one thread. An out-of-range\n"
                  "index adds nothing (eager's `embedding_dense_backward` skips it too; its\n"
                  "`index_add` and `scatter_add` raise an `IndexError`).\n"
                  "`embedding_dense_backward` leaves the `padding_idx` row zero; with\n"
                  "`scale_grad_by_freq=True` it is `Unimplemented`, and `sparse=True` makes a\n"
                  "sparse gradient Kiln does not support. `index_select`, `gather`, `index_add`\n"
                  "and `scatter_add` of a 0-dim tensor are `Unimplemented`, as are index sizes\n"
                  "that differ symbolically from the input's and an `index_add` source broadcast\n"
                  "along `self`.\n"
                  "\n## Integer dtypes\n\n"
                  "int8, uint8 and int16 tensors are stored and computed in their own C types\n"
                  "(`signed char`, `unsigned char`, `short`); every intermediate result is\n"
                  "stored in the op's dtype, so sums, differences and products wrap as in eager\n"
                  "(C++ computes them in `int`, which these never overflow, and converts back\n"
                  "modulo 2^8 or 2^16). A Python int next to one of these tensors wraps into its\n"
                  "dtype first, as eager converts it. Promotion is c10's: uint8 with int8 is\n"
                  "int16, integers with floats the float, a 0-dim tensor only across categories.\n"
                  "Sums, products and cumulative sums of integers and bools are int64, as eager.\n"
                  "Bitwise ops (`&`, `|`, `^`, `~`) take integers and bools, shifts (`<<`, `>>`)\n"
                  "integers; eager refuses both on floats, and shifts on bools, and so does Kiln\n"
                  "(`InvalidArgument`). A shift by a count that is negative or not below the\n"
                  "width gives eager's result: 0, or for `>>` of a signed value its sign.\n"
                  "Lookups and scatters (`embedding`, `gather`, `index_add`, ...) do not take\n"
                  "these dtypes as values yet (`Unimplemented`).\n"
                  "\n## Ops\n\n"
                  "| op | family | tensor inputs | arguments (default) | dtypes |\n"
                  "| --- | --- | --- | --- | --- |\n");
  for (const auto& [name, op] : OpTable::Get().ops()) {
    // cat and stack take a list: "1 or more".
    const std::string inputs = op.min_inputs == op.max_inputs ? absl::StrCat(op.min_inputs)
                               : op.max_inputs >= (1 << 16)
                                   ? absl::StrCat(op.min_inputs, " or more")
                                   : absl::StrCat(op.min_inputs, "–", op.max_inputs);
    std::vector<std::string> args;
    for (const ArgSpec& arg : op.args) args.push_back(ArgText(arg));
    std::vector<std::string> dtypes;
    for (ir::DType dtype : op.dtypes) dtypes.push_back(ir::DTypeName(dtype));
    absl::StrAppend(&text, "| `", name, "` | ", op.family, " | ", inputs, " | ",
                    args.empty() ? "" : absl::StrCat("`", absl::StrJoin(args, "`, `"), "`"), " | ",
                    absl::StrJoin(dtypes, ", "), " |\n");
  }
  return text;
}

}  // namespace kiln::ops
