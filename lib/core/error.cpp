#include "core/error.h"

#include <c10/util/Backtrace.h>
#include <c10/util/Exception.h>
#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace libreyolo {

bool debug_enabled() {
  const char* value = std::getenv("LIBREYOLO_DEBUG");
  return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
}

Error::Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {
  if (debug_enabled()) backtrace_ = c10::get_backtrace(/*frames_to_skip=*/1);
}

namespace {

// LibTorch messages carry file/line context lines after the first; keep the first line
// unless the user asked for everything.
std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

}  // namespace

int report_error(const std::exception_ptr& error) {
  const bool debug = debug_enabled();
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    fmt::print(stderr, "libreyolo: error: {}\n", e.what());
    if (debug && !e.backtrace().empty()) fmt::print(stderr, "{}\n", e.backtrace());
    return static_cast<int>(e.exit_code());
  } catch (const c10::Error& e) {
    if (debug) {
      fmt::print(stderr, "libreyolo: error (LibTorch): {}\n", e.what());
    } else {
      fmt::print(stderr, "libreyolo: error (LibTorch): {}\n", first_line(e.what_without_backtrace()));
    }
    return static_cast<int>(ExitCode::runtime);
  } catch (const std::exception& e) {
    fmt::print(stderr, "libreyolo: error: {}\n", e.what());
    return static_cast<int>(ExitCode::runtime);
  } catch (...) {
    fmt::print(stderr, "libreyolo: error: unknown exception\n");
    return static_cast<int>(ExitCode::runtime);
  }
}

}  // namespace libreyolo
