#include "tools/kiln/human_units.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln {

std::string HumanBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string HumanTime(absl::Time time, absl::TimeZone zone) {
  if (time == absl::UnixEpoch()) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", time, zone);
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

}  // namespace kiln
