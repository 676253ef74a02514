#include "tools/kiln/human_units.h"

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kiln {

std::string HumanBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  // "%.1f" without printf (a listing prints 100,000 of them): dividing by
  // 1024 is exact, so is `value * 10` below 2^49 bytes, and nearbyint
  // rounds half to even as printf does.
  const int64_t tenths = static_cast<int64_t>(std::nearbyint(value * 10));
  return absl::StrCat(tenths / 10, ".", tenths % 10, " ", kUnits[unit]);
}

namespace {

// The fields of a civil second.
struct Civil {
  int64_t year;
  int month, day, hour, minute, second;
};

// The civil time in `zone` of `time`, through the quarter hour holding it:
// the civil time its first second begins is looked up in the zone's rules
// once and remembered (a listing formats 100,000 times, mostly close
// together; looking each up was a fifth of `kiln ls`), and the minutes and
// seconds since are added. A quarter is remembered only where the zone's
// offset is the same at both its ends (no zone changes twice in a quarter
// of an hour) and it begins on a local quarter hour (so adding never
// carries into the hour); other times are looked up each.
Civil ToCivil(absl::Time time, absl::TimeZone zone) {
  constexpr int64_t kQuarter = 900;
  const int64_t seconds = absl::ToUnixSeconds(time);
  const int64_t index = seconds / kQuarter - (seconds % kQuarter < 0 ? 1 : 0);
  struct Quarter {
    absl::TimeZone zone;
    int64_t index = std::numeric_limits<int64_t>::min();
    std::optional<absl::CivilSecond> start;
  };
  // Direct-mapped: a listing's rows alternate between last-use and creation
  // times.
  thread_local Quarter quarters[16];
  Quarter& quarter = quarters[static_cast<uint64_t>(index) % 16];
  if (quarter.index != index || quarter.zone != zone) {
    const absl::TimeZone::CivilInfo first = zone.At(absl::FromUnixSeconds(index * kQuarter));
    const int final = zone.At(absl::FromUnixSeconds(index * kQuarter + kQuarter - 1)).offset;
    quarter.zone = zone;
    quarter.index = index;
    quarter.start.reset();
    if (first.offset == final && first.cs.second() == 0 && first.cs.minute() % 15 == 0) {
      quarter.start = first.cs;
    }
  }
  if (quarter.start.has_value()) {
    const absl::CivilSecond& start = *quarter.start;
    const int since = static_cast<int>(seconds - index * kQuarter);
    return {start.year(), start.month(), start.day(), start.hour(), start.minute() + since / 60,
            since % 60};
  }
  const absl::CivilSecond civil = absl::ToCivilSecond(time, zone);
  return {civil.year(), civil.month(), civil.day(), civil.hour(), civil.minute(), civil.second()};
}

}  // namespace

std::string HumanTime(absl::Time time, absl::TimeZone zone) {
  if (time == absl::UnixEpoch()) return "-";
  const Civil civil = ToCivil(time, zone);
  // What FormatTime("%Y-%m-%d %H:%M:%S") prints, digit by digit.
  if (civil.year < 0 || civil.year > 9999) {
    return absl::FormatTime("%Y-%m-%d %H:%M:%S", time, zone);
  }
  std::string text = "0000-00-00 00:00:00";
  auto put = [&text](size_t at, int64_t value, int digits) {
    for (int i = digits - 1; i >= 0; --i, value /= 10) text[at + i] = '0' + value % 10;
  };
  put(0, civil.year, 4);
  put(5, civil.month, 2);
  put(8, civil.day, 2);
  put(11, civil.hour, 2);
  put(14, civil.minute, 2);
  put(17, civil.second, 2);
  return text;
}

std::string HumanDuration(absl::Duration duration) {
  int64_t seconds = absl::ToInt64Seconds(duration);
  if (seconds < 0) seconds = 0;
  const int64_t days = seconds / 86400, hours = seconds / 3600 % 24, minutes = seconds / 60 % 60;
  if (days > 0) return absl::StrCat(days, "d ", hours, "h");
  if (hours > 0) return absl::StrCat(hours, "h ", minutes, "m");
  if (minutes > 0) return absl::StrCat(minutes, "m ", seconds % 60, "s");
  return absl::StrCat(seconds, "s");
}

absl::StatusOr<int64_t> ParseBytes(const std::string& text) {
  static constexpr std::pair<char, int64_t> kUnits[] = {{'K', int64_t{1} << 10},
                                                        {'M', int64_t{1} << 20},
                                                        {'G', int64_t{1} << 30},
                                                        {'T', int64_t{1} << 40}};
  absl::string_view number = text;
  int64_t unit = 1;
  for (const auto& [suffix, size] : kUnits) {
    if (!number.empty() && absl::ascii_toupper(number.back()) == suffix) {
      number.remove_suffix(1);
      unit = size;
      break;
    }
  }
  double value;
  if (!absl::SimpleAtod(number, &value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a size: give bytes, or a number with K, M, G or T"));
  }
  return static_cast<int64_t>(value * static_cast<double>(unit));
}

absl::StatusOr<absl::Duration> ParseAge(const std::string& text) {
  absl::Duration age;
  double days;
  if (absl::EndsWith(text, "d") && absl::SimpleAtod(text.substr(0, text.size() - 1), &days)) {
    age = absl::Hours(24 * days);
  } else if (!absl::ParseDuration(text, &age)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not an age: give e.g. 30d, 12h or 90m"));
  }
  if (age < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("age ", text, " is negative"));
  }
  return age;
}

}  // namespace kiln
