// GuardTable from Signature and Guards protos: what it holds, what it
// binds, and the error each failed guard gives. No daemon, no artifact.
#include "client/guard_table.h"

#include <google/protobuf/text_format.h>

#include "gtest/gtest.h"

namespace kiln {
namespace {

template <typename Message>
Message Parse(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

// x: [s0, 64] (contiguous), y: [s0, 2*t] with strides [1, s0] (a
// transpose), output [s0, t*s0*2]; s0 in [2, 512] and a multiple of 8.
constexpr char kSignature[] = R"pb(
  inputs {
    dtype: FLOAT32
    sizes { symbol: "s0" }
    sizes { constant: 64 }
  }
  inputs {
    dtype: FLOAT32
    sizes { symbol: "s0" }
    sizes { symbol: "t" multiplier: 2 }
    strides { constant: 1 }
    strides { symbol: "s0" }
  }
  outputs {
    dtype: FLOAT32
    sizes { symbol: "s0" }
    sizes { symbol: "t" multiplier: 2 times: "s0" }
  }
  symbols: "s0"
  symbols: "t"
)pb";
constexpr char kGuards[] = R"pb(
  relations { range { symbol: "s0" min: 2 max: 512 } }
  relations { divisible { symbol: "s0" divisor: 8 } }
)pb";
constexpr char kGraph[] = R"pb(
  inputs { value: 0 name: "x" }
  inputs { value: 1 }
)pb";

class GuardTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto table =
        GuardTable::Create(Parse<kiln::v1::Signature>(kSignature), Parse<kiln::v1::Guards>(kGuards),
                           Parse<kiln::v1::Graph>(kGraph));
    ASSERT_TRUE(table.ok()) << table.status();
    table_.emplace(*std::move(table));
  }

  // A view of the given sizes and strides (no data: guards never read it).
  struct Input {
    std::vector<int64_t> sizes, strides;
    DType dtype = kiln::v1::FLOAT32;
    TensorView view() const { return TensorView{nullptr, dtype, sizes, strides}; }
  };
  // Check's verdict: "ok s0=.. t=.." or the error it gives.
  std::string Check(const std::vector<Input>& inputs) {
    std::vector<TensorView> views;
    for (const Input& input : inputs) views.push_back(input.view());
    GuardTable::Symbols symbols;
    absl::Status why;
    const bool passed = table_->Check(views, symbols, &why);
    GuardTable::Symbols without_why;
    EXPECT_EQ(table_->Check(views, without_why), passed) << "the verdict needs no `why`";
    if (!passed) return why.ToString();
    EXPECT_TRUE(why.ok());
    return absl::StrCat("ok s0=", symbols[0], " t=", symbols[1]);
  }

  std::optional<GuardTable> table_;
};

TEST_F(GuardTableTest, FlattensTheSignatureAndRelations) {
  EXPECT_EQ(table_->DebugString(),
            "input 0 'x': FLOAT32 [s0, 64] strides contiguous\n"
            "input 1: FLOAT32 [s0, 2*t] strides [1, s0]\n"
            "output 0: [s0, 2*t*s0]\n"
            "s0: 2 <= s0 <= 512, s0 % 8 == 0\n"
            "t: 2 <= t\n");
  EXPECT_EQ(table_->num_symbols(), 2);
  EXPECT_EQ(table_->num_inputs(), 2u);
  EXPECT_EQ(table_->input_name(1), "input 1");
}

TEST_F(GuardTableTest, BindsSymbolsFromSizes) {
  EXPECT_EQ(Check({{{16, 64}, {64, 1}}, {{16, 6}, {1, 16}}}), "ok s0=16 t=3");
  // Outputs evaluate from the bound symbols.
  GuardTable::Symbols symbols;
  symbols.fill(-1);
  symbols[0] = 16;
  symbols[1] = 3;
  EXPECT_EQ(table_->output_sizes(0)[1].Evaluate(symbols), 96);
  symbols[0] = int64_t{1} << 62;
  EXPECT_EQ(table_->output_sizes(0)[1].Evaluate(symbols), -1) << "overflow";
}

TEST_F(GuardTableTest, NamesTheInputAndDimOfEachFailedGuard) {
  const Input x{{16, 64}, {64, 1}};
  const Input y{{16, 6}, {1, 16}};
  EXPECT_EQ(Check({x}), "INVALID_ARGUMENT: got 1 inputs; the graph takes 2");
  Input wrong = x;
  wrong.dtype = kiln::v1::FLOAT64;
  EXPECT_EQ(Check({wrong, y}),
            "FAILED_PRECONDITION: input 0 'x' has dtype FLOAT64; the graph was compiled for "
            "FLOAT32");
  EXPECT_EQ(Check({{{16, 64, 1}, {64, 1, 1}}, y}),
            "FAILED_PRECONDITION: input 0 'x' has rank 3; the graph expects 2");
  EXPECT_EQ(Check({{{16, 32}, {32, 1}}, y}),
            "FAILED_PRECONDITION: input 0 'x': dim 1 has size 32; the graph was compiled for 64 "
            "(static shapes)");
  EXPECT_EQ(Check({{{1, 64}, {64, 1}}, y}),
            "FAILED_PRECONDITION: input 0 'x': dim 0 has size 1; s0 needs s0 >= 2");
  EXPECT_EQ(Check({x, {{16, 7}, {1, 16}}}),
            "FAILED_PRECONDITION: input 1: dim 1 has size 7; 2 * t needs t >= 2");
  EXPECT_EQ(Check({x, {{24, 6}, {1, 24}}}),
            "FAILED_PRECONDITION: input 1: dim 0 makes s0 = 24, but another input made it 16");
  EXPECT_EQ(Check({x, {{16, 6}, {6, 1}}}),
            "FAILED_PRECONDITION: input 1: dim 1 has stride 1; the graph was compiled for "
            "stride 16");
  EXPECT_EQ(Check({{{16, 64}, {1, 16}}, y}),
            "FAILED_PRECONDITION: input 0 'x': dim 1 has stride 16; the graph was compiled for "
            "stride 1");
}

TEST_F(GuardTableTest, StridesOfSizeOneAndEmptyDimsAreMoot) {
  // A dim of size 1 is only read at index 0, an empty tensor never.
  auto table = GuardTable::Create(Parse<kiln::v1::Signature>(
                                      R"pb(inputs {
                                             dtype: FLOAT32
                                             sizes { constant: 1 }
                                             sizes { constant: 0 }
                                           }
                                           inputs {
                                             dtype: FLOAT32
                                             sizes { constant: 1 }
                                             sizes { constant: 4 }
                                           })pb"),
                                  kiln::v1::Guards(), kiln::v1::Graph());
  ASSERT_TRUE(table.ok()) << table.status();
  const std::vector<int64_t> empty_sizes = {1, 0}, empty_strides = {7, 7};
  const std::vector<int64_t> row_sizes = {1, 4}, row_strides = {123, 1};
  const TensorView inputs[] = {{nullptr, kiln::v1::FLOAT32, empty_sizes, empty_strides},
                               {nullptr, kiln::v1::FLOAT32, row_sizes, row_strides}};
  GuardTable::Symbols symbols;
  EXPECT_TRUE(table->Check(inputs, symbols));
}

// Other strides pass CheckCopyable, which InputStrides then says how to
// lay out; a layout whose elements share memory takes no copy.
TEST_F(GuardTableTest, OtherStridesAreCopyableIntoTheDeclaredLayout) {
  const Input x{{16, 64}, {1, 16}};  // transposed: x is declared contiguous
  const Input y{{16, 6}, {6, 1}};    // contiguous: y is declared [1, s0]
  const TensorView views[] = {x.view(), y.view()};
  GuardTable::Symbols symbols;
  EXPECT_FALSE(table_->Check(views, symbols));
  ASSERT_TRUE(table_->CheckCopyable(views, symbols));
  EXPECT_EQ(symbols[0], 16);
  EXPECT_FALSE(table_->StridesPass(0, views[0], symbols));
  EXPECT_EQ(table_->InputStrides(0, views[0], symbols), (std::vector<int64_t>{64, 1}));
  EXPECT_EQ(table_->InputStrides(1, views[1], symbols), (std::vector<int64_t>{1, 16}));
  const Input small{{8, 64}, {64, 1}};
  const TensorView wrong_sizes[] = {small.view(), y.view()};
  EXPECT_FALSE(table_->CheckCopyable(wrong_sizes, symbols)) << "sizes are still checked";

  auto expanded = GuardTable::Create(Parse<kiln::v1::Signature>(R"pb(inputs {
                                                                       dtype: FLOAT32
                                                                       sizes { constant: 3 }
                                                                       sizes { constant: 4 }
                                                                       strides { constant: 0 }
                                                                       strides { constant: 1 }
                                                                     })pb"),
                                     kiln::v1::Guards(), kiln::v1::Graph());
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const std::vector<int64_t> sizes = {3, 4}, contiguous = {4, 1}, broadcast = {0, 1};
  const TensorView full[] = {{nullptr, kiln::v1::FLOAT32, sizes, contiguous}};
  const TensorView same[] = {{nullptr, kiln::v1::FLOAT32, sizes, broadcast}};
  EXPECT_FALSE(expanded->CheckCopyable(full, symbols)) << "three rows cannot share one";
  EXPECT_TRUE(expanded->CheckCopyable(same, symbols));
}

TEST_F(GuardTableTest, RelationsAreCheckedAfterBinding) {
  EXPECT_EQ(Check({{{20, 64}, {64, 1}}, {{20, 6}, {1, 20}}}),
            "FAILED_PRECONDITION: input 0 'x': dim 0 has size 20, so s0 = 20; the graph's "
            "relations require 2 <= s0 <= 512 and s0 % 8 == 0");
  EXPECT_EQ(Check({{{520, 64}, {64, 1}}, {{520, 6}, {1, 520}}}),
            "FAILED_PRECONDITION: input 0 'x': dim 0 has size 520, so s0 = 520; the graph's "
            "relations require 2 <= s0 <= 512 and s0 % 8 == 0");
  EXPECT_EQ(Check({{{512, 64}, {64, 1}}, {{512, 6}, {1, 512}}}), "ok s0=512 t=3");
}

TEST(GuardTableCreateTest, RefusesWhatCanonicalGuardsNeverHold) {
  kiln::v1::Signature many;
  for (int s = 0; s <= GuardTable::kMaxSymbols; ++s) many.add_symbols(absl::StrCat("s", s));
  EXPECT_EQ(GuardTable::Create(many, {}, {}).status(),
            absl::UnimplementedError("the graph has 9 size symbols; at most 8"));

  const auto signature = Parse<kiln::v1::Signature>(kSignature);
  const auto create = [&](const std::string& relation) {
    return GuardTable::Create(signature, Parse<kiln::v1::Guards>(relation), {}).status();
  };
  EXPECT_EQ(
      create(R"pb(relations { equal { lhs: "s0" rhs: "t" } })pb"),
      absl::InternalError(
          "artifact guard relation equal { lhs: \"s0\" rhs: \"t\" }: not a range or divisor"));
  EXPECT_EQ(create(R"pb(relations { divisible { symbol: "u" divisor: 2 } })pb"),
            absl::InternalError("artifact guard relation divisible { symbol: \"u\" divisor: 2 }: "
                                "names no symbol of the signature"));
  EXPECT_EQ(create(R"pb(relations { range { symbol: "t" min: 9 max: 4 } })pb"),
            absl::InternalError(
                "artifact guard relation range { symbol: \"t\" min: 9 max: 4 }: empty range"));
  EXPECT_EQ(create(R"pb(relations { divisible { symbol: "t" divisor: 0 } })pb"),
            absl::InternalError("artifact guard relation divisible { symbol: \"t\" }: divisor is "
                                "not positive"));
}

}  // namespace
}  // namespace kiln
