// One error policy for the whole program: throw an Error subclass whose category picks the
// exit code; main() catches once and prints one clean line (see report_error).
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace libreyolo {

enum class ExitCode : int {
  ok = 0,
  runtime = 1,
  usage = 2,
  data = 3,
  model = 4,
  interrupted = 130,  // SIGINT
  terminated = 143,   // SIGTERM
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message);
  ExitCode exit_code() const { return code_; }
  // Filled only when LIBREYOLO_DEBUG=1, so normal runs pay nothing for it.
  const std::string& backtrace() const { return backtrace_; }

 private:
  ExitCode code_;
  std::string backtrace_;
};

// Bad command line, unknown key, wrong type or out-of-range value (exit 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::usage, message) {}
};

// Missing or malformed dataset, labels or images (exit 3).
class DataError : public Error {
 public:
  explicit DataError(const std::string& message) : Error(ExitCode::data, message) {}
};

// Unknown model name, missing or incompatible weights (exit 4).
class ModelError : public Error {
 public:
  explicit ModelError(const std::string& message) : Error(ExitCode::model, message) {}
};

// Anything that went wrong while running: I/O, device, diverged training (exit 1).
class RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& message) : Error(ExitCode::runtime, message) {}
};

bool debug_enabled();

// Prints one line for the exception to stderr (the full LibTorch backtrace only under
// LIBREYOLO_DEBUG=1) and returns the process exit code for it.
int report_error(const std::exception_ptr& error);

}  // namespace libreyolo
