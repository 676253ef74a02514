#include "codegen/emit/functions.h"

#include <cmath>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace kiln {
namespace {

struct Function {
  int arity;
  // {0}, {1}, {2}: operands. {T}: the compute type. {zero}, {one}, {half}
  // and the named constants: literals of the compute type. {exp}, {log},
  // ...: the runtime's transcendental of the compute type; {sqrt},
  // {floor}, ...: builtins that compile to one instruction.
  std::string text;
  // For integer and bool compute types, when it differs: no NaN tests
  // (which clang flags as tautological on integers), and arithmetic that
  // wraps.
  const char* integral_text = nullptr;
};

// Functions every artifact calls through the runtime's table
// (kiln_abi.h): math_f32/f64[KILN_MATH_<index>] with one argument,
// math2_f32/f64[KILN_MATH2_<index>] with two. remainder and floor_divide
// are Python's modulo and floor division, as eager (the runtime's); their
// integer forms, and fmod's, are inline (kiln_math.h).
struct RuntimeFunction {
  const char* name;
  const char* index;
  int arity;
  const char* integral_text = nullptr;
};
constexpr RuntimeFunction kRuntimeFunctions[] = {
    {"expm1", "EXPM1", 1},
    {"log1p", "LOG1P", 1},
    {"erf", "ERF", 1},
    {"sin", "SIN", 1},
    {"cos", "COS", 1},
    {"tan", "TAN", 1},
    {"asin", "ASIN", 1},
    {"acos", "ACOS", 1},
    {"atan", "ATAN", 1},
    {"sinh", "SINH", 1},
    {"cosh", "COSH", 1},
    {"asinh", "ASINH", 1},
    {"acosh", "ACOSH", 1},
    {"atanh", "ATANH", 1},
    {"log2", "LOG2", 1},
    {"log10", "LOG10", 1},
    {"exp2", "EXP2", 1},
    {"pow", "POW", 2},
    {"atan2", "ATAN2", 2},
    {"fmod", "FMOD", 2, "({0} % {1})"},
    {"remainder", "REMAINDER", 2, "kiln_remainder_i64({0}, {1})"},
    {"floor_divide", "FLOOR_DIVIDE", 2, "kiln_floor_divide_i64({0}, {1})"},
};

// kiln_special.h's, kiln_bessel.h's and kiln_polynomials.h's functions,
// computed in double whatever the compute type
// (a float32 operand is widened, the result rounded once); the emitter
// pastes the header into a source that calls one (emit_cpp.cc).
struct SpecialFunction {
  const char* name;
  int arity;
};
constexpr SpecialFunction kSpecialFunctions[] = {
    {"lgamma", 1},
    {"digamma", 1},
    {"trigamma", 1},
    {"zeta", 2},
    {"igamma", 2},
    {"igammac", 2},
    {"erfc", 1},
    {"erfcx", 1},
    {"erfinv", 1},
    {"i0", 1},
    {"i0e", 1},
    {"i1", 1},
    {"i1e", 1},
    {"modified_bessel_k0", 1},
    {"modified_bessel_k1", 1},
    {"scaled_modified_bessel_k0", 1},
    {"scaled_modified_bessel_k1", 1},
    {"bessel_j0", 1},
    {"bessel_j1", 1},
    {"bessel_y0", 1},
    {"bessel_y1", 1},
    {"spherical_bessel_j0", 1},
    {"airy_ai", 1},
    {"ndtri", 1},
    {"chebyshev_polynomial_t", 2},
    {"chebyshev_polynomial_u", 2},
    {"chebyshev_polynomial_v", 2},
    {"chebyshev_polynomial_w", 2},
    {"shifted_chebyshev_polynomial_t", 2},
    {"shifted_chebyshev_polynomial_u", 2},
    {"shifted_chebyshev_polynomial_v", 2},
    {"shifted_chebyshev_polynomial_w", 2},
    {"hermite_polynomial_h", 2},
    {"hermite_polynomial_he", 2},
    {"laguerre_polynomial_l", 2},
    {"legendre_polynomial_p", 2},
};

// Numerics follow eager torch 2.15's CPU kernels, without fast-math.
const std::map<std::string, Function>& Table() {
  static const auto* const table = [] {
    auto* functions = new std::map<std::string, Function>{
        {"identity", {1, "{0}"}},
        {"cast", {1, "(({T}){0})"}},
        // A float32 value rounded to a 16-bit float and back (eager converts
        // operands to a 16-bit common dtype before computing).
        {"round_to_float16", {1, "((float)(_Float16){0})"}},
        {"round_to_bfloat16", {1, "kiln_bf16_to_float(kiln_float_to_bf16({0}))"}},
        // Integers wrap as in eager: computed as unsigned (signed overflow is
        // undefined in C++), converted back modulo 2^bits.
        {"add", {2, "({0} + {1})", "(({T})((unsigned long long){0} + (unsigned long long){1}))"}},
        {"sub", {2, "({0} - {1})", "(({T})((unsigned long long){0} - (unsigned long long){1}))"}},
        {"mul", {2, "({0} * {1})", "(({T})((unsigned long long){0} * (unsigned long long){1}))"}},
        {"div", {2, "({0} / {1})"}},
        {"neg", {1, "(-{0})", "(({T})(0ULL - (unsigned long long){0}))"}},
        // fabs clears the sign of -0.0 and of a NaN, as eager's abs.
        {"abs", {1, "{fabs}({0})", "({0} < {zero} ? ({T})(0ULL - (unsigned long long){0}) : {0})"}},
        {"square", {1, "({0} * {0})"}},
        {"cube", {1, "({0} * {0} * {0})"}},
        {"reciprocal", {1, "({one} / {0})"}},
        {"sqrt", {1, "{sqrt}({0})"}},
        {"rsqrt", {1, "({one} / {sqrt}({0}))"}},
        {"exp", {1, "{exp}({0})"}},
        // exp where the argument is known <= 0 (softmax's x - max).
        {"exp_nonpositive", {1, "{exp_nonpositive}({0})"}},
        {"log", {1, "{log}({0})"}},
        {"tanh", {1, "{tanh}({0})"}},
        // erf within 5e-7 absolute, vectorizable (kiln_math.h): gelu's and
        // its derivative's, where eager's own vectorized erf is no closer.
        {"erf_for_gelu", {1, "{erf_for_gelu}({0})"}},
        // cdf(x) + x pdf(x), gelu_backward's factor, with one exp (kiln_math.h):
        // float32 and 16-bit types only (float64 builds it from erf and exp).
        {"gelu_derivative", {1, "{gelu_derivative}({0})"}},
        {"sigmoid", {1, "({one} / ({one} + {exp}(-{0})))"}},
        {"silu", {1, "({0} / ({one} + {exp}(-{0})))"}},
        {"gelu", {1, "({0} * {half} * ({one} + {erf_for_gelu}({0} * {sqrt1_2})))"}},
        {"gelu_tanh",
         {1,
          "({half} * {0} * ({one} + {tanh}({gelu_beta} * ({0} + {gelu_kappa} * ({0} * {0} * "
          "{0})))))"}},
        {"floor", {1, "{floor}({0})"}},
        {"ceil", {1, "{ceil}({0})"}},
        {"round", {1, "{rint}({0})"}},  // half to even, as torch.round
        {"trunc", {1, "{trunc}({0})"}},
        // relu(-0.0) = -0.0 and relu(nan) = nan, as eager: neither
        // x > 0 ? x : 0 nor fmax(x, 0) gets both.
        {"relu", {1, "({0} < {zero} ? {zero} : {0})"}},
        // NaN-propagating, as torch.maximum (clamp's NaN bounds: ops/pointwise.cc).
        {"maximum",
         {2, "({0} != {0} ? {0} : ({1} != {1} ? {1} : ({0} > {1} ? {0} : {1})))",
          "({0} > {1} ? {0} : {1})"}},
        {"minimum",
         {2, "({0} != {0} ? {0} : ({1} != {1} ? {1} : ({0} < {1} ? {0} : {1})))",
          "({0} < {1} ? {0} : {1})"}},
        {"clamp_min",
         {2, "({0} != {0} ? {0} : ({0} < {1} ? {1} : {0}))", "({0} < {1} ? {1} : {0})"}},
        {"clamp_max",
         {2, "({0} != {0} ? {0} : ({0} > {1} ? {1} : {0}))", "({0} > {1} ? {1} : {0})"}},
        {"eq", {2, "({0} == {1})"}},
        {"ne", {2, "({0} != {1})"}},
        {"lt", {2, "({0} < {1})"}},
        {"le", {2, "({0} <= {1})"}},
        {"gt", {2, "({0} > {1})"}},
        {"ge", {2, "({0} >= {1})"}},
        {"logical_not", {1, "(!(bool)({0}))"}},
        {"logical_and", {2, "((bool)({0}) && (bool)({1}))"}},
        {"logical_or", {2, "((bool)({0}) || (bool)({1}))"}},
        {"logical_xor", {2, "((bool)({0}) != (bool)({1}))"}},
        {"where", {3, "({0} ? {1} : {2})"}},
        // A NaN loses to a number; of two equal values (-0.0 and 0.0) the
        // first, as eager's fmax and fmin (ops/ieee.cc).
        {"fmax", {2, "((({0} >= {1}) | ({1} != {1})) ? {0} : {1})", "({0} >= {1} ? {0} : {1})"}},
        {"fmin", {2, "((({0} <= {1}) | ({1} != {1})) ? {0} : {1})", "({0} <= {1} ? {0} : {1})"}},
        // Exact bit operations (ops/ieee.cc; kiln_math.h): float32 and
        // float64, and copysign of every float.
        {"copysign", {2, "{copysign}({0}, {1})"}},
        {"nextafter", {2, "{nextafter}({0}, {1})"}},
        {"frexp_mantissa", {1, "{frexp_mantissa}({0})"}},
        {"frexp_exponent", {1, "(({T}){frexp_exponent}({0}))"}},
        // int64 only (ops/integers.cc).
        {"gcd", {2, "kiln_gcd_i64({0}, {1})"}},
        {"lcm", {2, "kiln_lcm_i64({0}, {1})"}},
        // Integers and bools only (ops/integers.cc).
        {"bitwise_and", {2, "({0} & {1})"}},
        {"bitwise_or", {2, "({0} | {1})"}},
        {"bitwise_xor", {2, "({0} ^ {1})"}},
        {"bitwise_not", {1, "(~{0})"}},
        // Eager's: 0 for a count outside [0, width); shifted as unsigned, so
        // that a negative x's bits move out as they do in eager.
        {"shift_left",
         {2,
          "(({1}) < 0 || ({1}) >= (int)(8 * sizeof({T})) ? ({T})0 : "
          "({T})((unsigned long long){0} << ({1})))"}},
        // Eager's: past the width (or negative), a signed x keeps its sign
        // bit alone and an unsigned one nothing.
        {"shift_right",
         {2,
          "({0} >> (({1}) < 0 || ({1}) >= (int)(8 * sizeof({T})) - (({T})-1 < 0) "
          "? (int)(8 * sizeof({T})) - (({T})-1 < 0) : ({1})))"}},
    };
    // The runtime's: "{name}({0})" or "{name}({0}, {1})", and an integer
    // form where there is one.
    for (const RuntimeFunction& f : kRuntimeFunctions) {
      functions->emplace(
          f.name,
          Function{f.arity, absl::StrCat("{", f.name, "}(", f.arity == 1 ? "{0}" : "{0}, {1}", ")"),
                   f.integral_text});
    }
    for (const SpecialFunction& f : kSpecialFunctions) {
      std::string text = absl::StrCat("(({T})kiln_special_", f.name, "((double){0}");
      if (f.arity == 2) absl::StrAppend(&text, ", (double){1}");
      // Eager's Hermite polynomials are NaN past a degree that depends on
      // the dtype.
      if (absl::StartsWith(f.name, "hermite")) absl::StrAppend(&text, ", {hermite_limit}");
      functions->emplace(f.name, Function{f.arity, absl::StrCat(text, "))")});
    }
    return functions;
  }();
  return *table;
}

bool IsSingle(ir::DType dtype) { return dtype != ir::DType::kFloat64; }

std::string Math(const char* index, ir::DType dtype) {
  return absl::StrCat("rt->", IsSingle(dtype) ? "math_f32" : "math_f64", "[KILN_MATH_", index, "]");
}

std::string Math2(const char* index, ir::DType dtype) {
  return absl::StrCat("rt->", IsSingle(dtype) ? "math2_f32" : "math2_f64", "[KILN_MATH2_", index,
                      "]");
}

std::string Builtin(const char* name, ir::DType dtype) {
  return absl::StrCat("__builtin_", name, IsSingle(dtype) ? "f" : "");
}

// Placeholders whose float32 (and 16-bit) form is one of kiln_math.h's
// vectorizable polynomials; float64 takes the runtime table's libm entry
// (none: float64 never calls it).
struct Polynomial {
  const char* placeholder;
  const char* float32;
  const char* libm;  // KILN_MATH_<libm>, or null
};
constexpr Polynomial kPolynomials[] = {
    {"{exp}", "kiln_expf", "EXP"},
    {"{exp_nonpositive}", "kiln_expf_nonpositive", "EXP"},
    {"{log}", "kiln_logf", "LOG"},
    {"{tanh}", "kiln_tanhf", "TANH"},
    // gelu's erf: within 5e-7 absolute (kiln_math.h).
    {"{erf_for_gelu}", "kiln_erf_for_gelu", "ERF"},
    {"{gelu_derivative}", "kiln_gelu_derivative", nullptr},
};

// A literal of a 32-, 16- or 8-bit integer type: infinities (a max's or a
// min's start) saturate to the type's range, and other values wrap into it
// as eager converts a Python int to the type.
std::string NarrowIntegerLiteral(double value, ir::DType dtype) {
  const int bits = 8 * static_cast<int>(ir::DTypeSize(dtype));
  const bool is_unsigned = dtype == ir::DType::kUInt8;
  const int64_t lowest = is_unsigned ? 0 : -(int64_t{1} << (bits - 1));
  const int64_t highest = is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
  int64_t wrapped;
  if (std::isnan(value)) {
    wrapped = 0;
  } else if (value <= -9.2233720368547758e18 || value >= 9.2233720368547758e18) {
    wrapped = value < 0 ? lowest : highest;
  } else {
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    const uint64_t low_bits = static_cast<uint64_t>(static_cast<int64_t>(value)) & mask;
    wrapped = static_cast<int64_t>(low_bits) > highest
                  ? static_cast<int64_t>(low_bits) - (int64_t{1} << bits)
                  : static_cast<int64_t>(low_bits);
  }
  // INT32_MIN has no literal of its own: its negation overflows int.
  if (wrapped == lowest && bits == 32) return "(-2147483647 - 1)";
  return absl::StrCat(wrapped);
}

}  // namespace

std::string EmitLiteral(double value, ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kBool:
      return value != 0 ? "true" : "false";
    case ir::DType::kInt64:
      if (value <= -9.2233720368547758e18) return "(-9223372036854775807LL - 1)";
      if (value >= 9.2233720368547758e18) return "9223372036854775807LL";
      return absl::StrCat(static_cast<int64_t>(value), "LL");
    case ir::DType::kInt32:
    case ir::DType::kInt8:
    case ir::DType::kUInt8:
    case ir::DType::kInt16:
      return NarrowIntegerLiteral(value, dtype);
    default:
      break;
  }
  const bool single = dtype != ir::DType::kFloat64;
  if (std::isnan(value)) return single ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(value)) {
    return absl::StrCat(value < 0 ? "(-" : "(", single ? "__builtin_inff())" : "__builtin_inf())");
  }
  if (single) return absl::StrFormat("%af", static_cast<double>(static_cast<float>(value)));
  return absl::StrFormat("%a", value);
}

const char* StorageCType(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFloat32:
      return "float";
    case ir::DType::kFloat64:
      return "double";
    case ir::DType::kInt64:
      return "long long";
    case ir::DType::kInt32:
      return "int";
    case ir::DType::kBool:
      return "bool";
    case ir::DType::kInt8:
      return "signed char";
    case ir::DType::kUInt8:
      return "unsigned char";
    case ir::DType::kInt16:
      return "short";
    case ir::DType::kFloat16:
      return "_Float16";
    case ir::DType::kBFloat16:
      return "kiln_bf16";
    case ir::DType::kComplex64:  // split into real pairs before lowering
    case ir::DType::kComplex128:
      break;
  }
  return "void";
}

absl::StatusOr<std::string> EmitFunction(const std::string& function,
                                         const std::vector<std::string>& operands,
                                         ir::DType dtype) {
  auto it = Table().find(function);
  if (it == Table().end()) {
    return absl::NotFoundError(absl::StrCat("no pointwise function '", function, "'"));
  }
  if (static_cast<int>(operands.size()) != it->second.arity) {
    return absl::InternalError(absl::StrCat("function '", function, "' takes ", it->second.arity,
                                            " operands, got ", operands.size()));
  }
  std::vector<std::pair<std::string, std::string>> replacements = {
      {"{T}", StorageCType(dtype)},
      {"{zero}", EmitLiteral(0.0, dtype)},
      {"{one}", EmitLiteral(1.0, dtype)},
      {"{half}", EmitLiteral(0.5, dtype)},
      {"{sqrt1_2}", EmitLiteral(M_SQRT1_2, dtype)},
      {"{gelu_beta}", EmitLiteral(M_SQRT2 * M_2_SQRTPI * 0.5, dtype)},
      {"{gelu_kappa}", EmitLiteral(0.044715, dtype)},
      {"{sqrt}", Builtin("sqrt", dtype)},
      {"{floor}", Builtin("floor", dtype)},
      {"{fabs}", Builtin("fabs", dtype)},
      {"{ceil}", Builtin("ceil", dtype)},
      {"{rint}", Builtin("rint", dtype)},
      {"{trunc}", Builtin("trunc", dtype)},
      {"{hermite_limit}", IsSingle(dtype) ? "128" : "512"},
      {"{copysign}", Builtin("copysign", dtype)},
      {"{nextafter}", IsSingle(dtype) ? "kiln_nextafterf" : "kiln_nextafter"},
      {"{frexp_mantissa}", IsSingle(dtype) ? "kiln_frexp_mantissaf" : "kiln_frexp_mantissa"},
      {"{frexp_exponent}", IsSingle(dtype) ? "kiln_frexp_exponentf" : "kiln_frexp_exponent"},
  };
  const Function& entry = it->second;
  for (const RuntimeFunction& f : kRuntimeFunctions) {
    const std::string placeholder = absl::StrCat("{", f.name, "}");
    if (!absl::StrContains(entry.text, placeholder)) continue;
    replacements.push_back(
        {placeholder, f.arity == 1 ? Math(f.index, dtype) : Math2(f.index, dtype)});
  }
  for (const Polynomial& polynomial : kPolynomials) {
    if (dtype != ir::DType::kFloat64) {
      replacements.push_back({polynomial.placeholder, polynomial.float32});
    } else if (polynomial.libm != nullptr) {
      replacements.push_back({polynomial.placeholder, Math(polynomial.libm, dtype)});
    }
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    replacements.push_back({absl::StrCat("{", i, "}"), operands[i]});
  }
  const bool integral = !ir::IsFloatingPoint(dtype);
  const absl::string_view text = integral && entry.integral_text != nullptr
                                     ? absl::string_view(entry.integral_text)
                                     : absl::string_view(entry.text);
  return absl::StrReplaceAll(text, replacements);
}

bool HasFunction(const std::string& function) { return Table().count(function) > 0; }

bool CallsPolynomial(const std::string& function, ir::DType dtype) {
  const auto it = Table().find(function);
  if (it == Table().end() || dtype == ir::DType::kFloat64 || !ir::IsFloatingPoint(dtype)) {
    return false;
  }
  for (const Polynomial& polynomial : kPolynomials) {
    if (absl::StrContains(it->second.text, polynomial.placeholder)) return true;
  }
  return false;
}

}  // namespace kiln
