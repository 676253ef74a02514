#include "tools/kiln/human_units.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(HumanUnitsTest, SizesAndAgesParseAsPeopleWriteThem) {
  EXPECT_EQ(*ParseBytes("1024"), 1024);
  EXPECT_EQ(*ParseBytes("64K"), 64 << 10);
  EXPECT_EQ(*ParseBytes("1.5g"), int64_t{3} << 29);
  EXPECT_EQ(
      ParseBytes("2GT").status(),
      absl::InvalidArgumentError("'2GT' is not a size: give bytes, or a number with K, M, G or T"));
  EXPECT_FALSE(ParseBytes("-1M").ok());
  EXPECT_EQ(*ParseAge("30d"), absl::Hours(720));
  EXPECT_EQ(*ParseAge("1h30m"), absl::Minutes(90));
  EXPECT_EQ(ParseAge("soon").status(),
            absl::InvalidArgumentError("'soon' is not an age: give e.g. 30d, 12h or 90m"));
  EXPECT_EQ(ParseAge("-2h").status(), absl::InvalidArgumentError("age -2h is negative"));
}

}  // namespace
}  // namespace kiln
