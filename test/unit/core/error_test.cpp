#include "core/error.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include "catch.h"  // last: see catch.h

using namespace libreyolo;

namespace {

// Runs report_error with stderr redirected to a file; returns the exit code and the text.
std::pair<int, std::string> report(const std::exception_ptr& error) {
  char path[] = "/tmp/libreyolo_error_XXXXXX";
  const int fd = ::mkstemp(path);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  const int code = report_error(error);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  ::lseek(fd, 0, SEEK_SET);
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  ::unlink(path);
  return {code, text};
}

template <typename E>
std::exception_ptr make(const std::string& message) {
  return std::make_exception_ptr(E(message));
}

std::exception_ptr torch_error() {
  try {
    TORCH_CHECK(false, "shape mismatch in test");
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

TEST_CASE("each error class maps to its exit code with one clean line", "[errors]") {
  ::unsetenv("LIBREYOLO_DEBUG");
  CHECK(report(make<UsageError>("bad key")) == std::pair<int, std::string>{2, "libreyolo: error: bad key\n"});
  CHECK(report(make<DataError>("no images")).first == 3);
  CHECK(report(make<ModelError>("no weights")).first == 4);
  CHECK(report(make<RuntimeError>("disk full")).first == 1);
  CHECK(report(make<std::runtime_error>("plain")).first == 1);
}

TEST_CASE("LibTorch errors print one line without backtrace unless LIBREYOLO_DEBUG=1", "[errors]") {
  ::unsetenv("LIBREYOLO_DEBUG");
  const auto [code, text] = report(torch_error());
  CHECK(code == 1);
  CHECK(text.find("shape mismatch in test") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);

  ::setenv("LIBREYOLO_DEBUG", "1", 1);
  const auto [debug_code, debug_text] = report(torch_error());
  ::unsetenv("LIBREYOLO_DEBUG");
  CHECK(debug_code == 1);
  CHECK(std::count(debug_text.begin(), debug_text.end(), '\n') > 1);
}

TEST_CASE("our errors carry a backtrace only under LIBREYOLO_DEBUG=1", "[errors]") {
  ::unsetenv("LIBREYOLO_DEBUG");
  CHECK(UsageError("x").backtrace().empty());
  ::setenv("LIBREYOLO_DEBUG", "1", 1);
  CHECK_FALSE(UsageError("x").backtrace().empty());
  ::unsetenv("LIBREYOLO_DEBUG");
}
