// The special functions (torch.special and their aten spellings): the gamma
// family, the incomplete gamma functions, Hurwitz zeta, erfc, erfcx, erfinv,
// the normal quantile, Bessel and Airy functions and the orthogonal
// polynomials. Each element calls one function of kiln_special.h,
// kiln_bessel.h or kiln_polynomials.h (emit/functions.cc names them), which
// compute in double and follow eager's CPU kernels' special values.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/ops_doc.h"
#include "codegen/ops/pointwise.h"
#include "codegen/ops/pointwise_util.h"

namespace kiln::ops {
namespace {

// float32 and float64, the dtypes //tests/ops checks them in.
const std::vector<ir::DType> kSpecialTypes = {ir::DType::kFloat32, ir::DType::kFloat64};

Body Apply(const std::string& function) {
  return [function](ExprBuilder& b, const ir::Node&, const std::vector<int>& operands,
                    Types types) -> absl::StatusOr<int> {
    return b.Call(function, operands, types.compute);
  };
}

// polygamma(n, x): digamma for n = 0, trigamma for n = 1, else
// (-1)^(n+1) n! zeta(n + 1, x), as eager.
absl::StatusOr<int> Polygamma(ExprBuilder& b, const ir::Node& node,
                              const std::vector<int>& operands, Types types) {
  const int64_t n = std::get<int64_t>(node.args.at("n"));
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("polygamma's n is ", n, ": it must be 0 or more (as in eager PyTorch)"));
  }
  const ir::DType t = types.compute;
  if (n == 0) return b.Call("digamma", operands, t);
  if (n == 1) return b.Call("trigamma", operands, t);
  const double factor = (n % 2 ? 1.0 : -1.0) * std::tgamma(static_cast<double>(n) + 1);
  const int zeta = b.Call("zeta", {b.Constant(static_cast<double>(n + 1), t), operands[0]}, t);
  return b.Call("mul", {b.Constant(factor, t), zeta}, t);
}

}  // namespace

std::string SpecialFunctionsMarkdown() {
  return "\n## Special functions\n\n"
         "`lgamma`, `digamma`, `polygamma`, `igamma`, `igammac`, `erfc`, `erfinv`, `i0` and the\n"
         "`special_*` ops below (zeta, erfcx, ndtri, the Bessel and Airy functions, the\n"
         "orthogonal polynomials) are native, from Kiln's own vectorizable C\n"
         "(`codegen/emit/kiln_special.h`, `kiln_bessel.h`, `kiln_polynomials.h`, pasted into an\n"
         "artifact that calls one; no libm). They compute in double for every dtype: a float32\n"
         "operand is widened and the result rounded once, so float32 results are at least as\n"
         "close as eager's own float kernels. Algorithms: Cephes' (zeta, digamma, trigamma,\n"
         "ndtri, i0, i1, k0, k1 and their scaled forms, j0, j1, y0, y1, Airy Ai), Lanczos's\n"
         "lgamma, a fitted Chebyshev series for erfcx (erfc and erf from it), Newton's method\n"
         "for erfinv, Numerical Recipes' series and continued fraction for the incomplete\n"
         "gamma functions, and eager's own recurrences and trigonometric forms for the\n"
         "polynomials; special values (poles, infinities, NaN, domain edges) are eager's.\n"
         "`//codegen:kiln_special_test` holds float64 results to libm, libstdc++'s special\n"
         "functions, SciPy's and mpmath's values: within 1e-14 relative for most, 1e-13\n"
         "absolute for J and Y (their phase is x's rounding), 1e-12 for ndtri's far tail, 1e-11 "
         "for\n"
         "the polynomials' recurrences; trigamma is Cephes' series, within 1e-9. Differences\n"
         "from eager: at the negative integers trigamma's float32 result is float64's large\n"
         "finite value (eager's float kernel rounds `sin(pi x)` in float and gives another);\n"
         "erfinv takes a third Newton step. `zeta(x, q)` sums about -q terms for a negative q,\n"
         "as eager's, and so do the polynomials' recurrences up to their degree n. Kiln's sin\n"
         "and cos reduce their argument accurately while it is below 2^40 in magnitude: beyond,\n"
         "the oscillating functions (J, Y, Airy Ai for x << 0, trigamma's reflection) give\n"
         "other values than eager's (all tiny but trigamma's).\n";
}

void RegisterSpecialOps(OpTable& table) {
  // Unary.
  const std::pair<const char*, const char*> unary[] = {
      {"aten.lgamma.default", "lgamma"},
      {"aten.digamma.default", "digamma"},
      {"aten.erfc.default", "erfc"},
      {"aten.special_erfcx.default", "erfcx"},
      {"aten.erfinv.default", "erfinv"},
      {"aten.i0.default", "i0"},
      {"aten.special_i0e.default", "i0e"},
      {"aten.special_i1.default", "i1"},
      {"aten.special_i1e.default", "i1e"},
      {"aten.special_modified_bessel_i0.default", "i0"},
      {"aten.special_modified_bessel_i1.default", "i1"},
      {"aten.special_modified_bessel_k0.default", "modified_bessel_k0"},
      {"aten.special_modified_bessel_k1.default", "modified_bessel_k1"},
      {"aten.special_scaled_modified_bessel_k0.default", "scaled_modified_bessel_k0"},
      {"aten.special_scaled_modified_bessel_k1.default", "scaled_modified_bessel_k1"},
      {"aten.special_bessel_j0.default", "bessel_j0"},
      {"aten.special_bessel_j1.default", "bessel_j1"},
      {"aten.special_bessel_y0.default", "bessel_y0"},
      {"aten.special_bessel_y1.default", "bessel_y1"},
      {"aten.special_spherical_bessel_j0.default", "spherical_bessel_j0"},
      {"aten.special_airy_ai.default", "airy_ai"},
      {"aten.special_ndtri.default", "ndtri"},
  };
  for (const auto& [op, function] : unary) {
    AddPointwise(table, {op, 1, 1, {}, Result::kFloating, "", Apply(function), kSpecialTypes});
  }
  AddPointwise(table, {"aten.polygamma.default",
                       1,
                       1,
                       {{"n", ArgKind::kInt, std::nullopt}},
                       Result::kFloating,
                       "",
                       Polygamma,
                       kSpecialTypes});

  // The regularized incomplete gamma functions P(a, x) and Q(a, x).
  for (const char* function : {"igamma", "igammac"}) {
    AddPointwise(table, {absl::StrCat("aten.", function, ".default"),
                         2,
                         2,
                         {},
                         Result::kFloating,
                         "",
                         Apply(function),
                         kSpecialTypes});
  }

  // Binary, floating operands: zeta(x, q) and the polynomials p(x, n), the
  // second operand a tensor or a scalar.
  const std::pair<const char*, const char*> binary[] = {
      {"special_zeta", "zeta"},
      {"special_chebyshev_polynomial_t", "chebyshev_polynomial_t"},
      {"special_chebyshev_polynomial_u", "chebyshev_polynomial_u"},
      {"special_chebyshev_polynomial_v", "chebyshev_polynomial_v"},
      {"special_chebyshev_polynomial_w", "chebyshev_polynomial_w"},
      {"special_shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_t"},
      {"special_shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_u"},
      {"special_shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_v"},
      {"special_shifted_chebyshev_polynomial_w", "shifted_chebyshev_polynomial_w"},
      {"special_hermite_polynomial_h", "hermite_polynomial_h"},
      {"special_hermite_polynomial_he", "hermite_polynomial_he"},
      {"special_laguerre_polynomial_l", "laguerre_polynomial_l"},
      {"special_legendre_polynomial_p", "legendre_polynomial_p"},
  };
  for (const auto& [op, function] : binary) {
    const std::string name = op;
    const std::string scalar = name == "special_zeta" ? "other" : "n";
    const std::string overload = name == "special_zeta" ? "other_scalar" : "n_scalar";
    AddPointwise(table, {absl::StrCat("aten.", name, ".default"),
                         2,
                         2,
                         {},
                         Result::kFloating,
                         "",
                         Apply(function),
                         kSpecialTypes});
    AddPointwise(table, {absl::StrCat("aten.", name, ".", overload),
                         1,
                         2,
                         {{scalar, ArgKind::kScalar, std::nullopt}},
                         Result::kFloating,
                         scalar,
                         Apply(function),
                         kSpecialTypes});
  }
}

}  // namespace kiln::ops
