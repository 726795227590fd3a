#include "core/error.h"
#include "core/run_dir.h"

#include <filesystem>
#include <unistd.h>
#include "catch.h"  // last: see catch.h

using namespace libreyolo;
namespace fs = std::filesystem;

namespace {
fs::path fresh_folder(const char* tag) {
  const auto path = fs::temp_directory_path() / ("libreyolo_test_" + std::string(tag) + "_" + std::to_string(::getpid()));
  fs::remove_all(path);
  return path;
}
}  // namespace

TEST_CASE("run folders increment exp, exp2, exp3", "[run_dir]") {
  const auto project = fresh_folder("rundir");
  CHECK(create_run_dir(project, "exp", false) == project / "exp");
  CHECK(create_run_dir(project, "exp", false) == project / "exp2");
  CHECK(create_run_dir(project, "exp", false) == project / "exp3");
  CHECK(fs::is_directory(project / "exp3"));
  // a name already ending in a digit still increments by appending
  CHECK(create_run_dir(project, "run1", false) == project / "run1");
  CHECK(create_run_dir(project, "run1", false) == project / "run12");
  fs::remove_all(project);
}

TEST_CASE("exist_ok reuses the folder", "[run_dir]") {
  const auto project = fresh_folder("existok");
  CHECK(create_run_dir(project, "exp", false) == project / "exp");
  CHECK(create_run_dir(project, "exp", true) == project / "exp");
  CHECK_FALSE(fs::exists(project / "exp2"));
  fs::remove_all(project);
}

TEST_CASE("a name with a slash is a usage error", "[run_dir]") {
  const auto project = fresh_folder("badname");
  CHECK_THROWS_AS(create_run_dir(project, "a/b", false), UsageError);
  CHECK_THROWS_AS(create_run_dir(project, "", false), UsageError);
  fs::remove_all(project);
}
