#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace kiln {
namespace {

std::atomic<int> min_severity{static_cast<int>(LogSeverity::kInfo)};

const char* SeverityLetter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kDebug:
      return "D";
    case LogSeverity::kInfo:
      return "I";
    case LogSeverity::kWarning:
      return "W";
    case LogSeverity::kError:
      return "E";
    case LogSeverity::kFatal:
      return "F";
  }
  return "?";
}

}  // namespace

void SetMinLogSeverity(LogSeverity severity) { min_severity.store(static_cast<int>(severity)); }

LogSeverity MinLogSeverity() {
  return static_cast<LogSeverity>(min_severity.load(std::memory_order_relaxed));
}

bool ParseLogSeverity(const std::string& text, LogSeverity* severity) {
  static constexpr struct {
    const char* name;
    LogSeverity severity;
  } kNames[] = {{"debug", LogSeverity::kDebug},
                {"info", LogSeverity::kInfo},
                {"warning", LogSeverity::kWarning},
                {"error", LogSeverity::kError}};
  for (const auto& entry : kNames) {
    if (text == entry.name) {
      *severity = entry.severity;
      return true;
    }
  }
  return false;
}

LogMessage::LogMessage(LogSeverity severity, const char* file, int line) : severity_(severity) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm local;
  localtime_r(&now.tv_sec, &local);
  char stamp[32];
  strftime(stamp, sizeof(stamp), "%m%d %H:%M:%S", &local);
  const char* base = strrchr(file, '/');
  stream_ << SeverityLetter(severity) << stamp << "." << (now.tv_nsec / 1000000) << " " << getpid()
          << " " << (base ? base + 1 : file) << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << "\n";
  const std::string text = stream_.str();
  ssize_t unused = write(STDERR_FILENO, text.data(), text.size());
  (void)unused;
  if (severity_ == LogSeverity::kFatal) abort();
}

}  // namespace kiln
