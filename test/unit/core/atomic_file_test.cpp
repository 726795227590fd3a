#include "core/atomic_file.h"
#include "test_util.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>
#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using test_util::read_all;
namespace fs = std::filesystem;

namespace {


std::size_t entries_in(const fs::path& folder) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(folder)) ++count;
  return count;
}

fs::path fresh_folder() {
  const auto path = fs::temp_directory_path() / ("libreyolo_atomic_" + std::to_string(::getpid()));
  fs::remove_all(path);
  return path;
}

}  // namespace

TEST_CASE("atomic write creates the folder and the file, and leaves no temporary", "[atomic]") {
  const auto folder = fresh_folder();
  const auto path = folder / "sub" / "results.csv";
  write_file_atomically(path, "epoch,loss\n1,0.5\n");
  CHECK(read_all(path) == "epoch,loss\n1,0.5\n");
  CHECK(entries_in(path.parent_path()) == 1);
  fs::remove_all(folder);
}

TEST_CASE("atomic write replaces an existing file whole", "[atomic]") {
  const auto folder = fresh_folder();
  const auto path = folder / "status.json";
  write_file_atomically(path, std::string(10000, 'a'));
  write_file_atomically(path, "short");
  CHECK(read_all(path) == "short");
  CHECK(entries_in(folder) == 1);
  fs::remove_all(folder);
}

TEST_CASE("a failing writer leaves the old file untouched and removes its temporary", "[atomic]") {
  const auto folder = fresh_folder();
  const auto path = folder / "last.pt";
  write_file_atomically(path, "good checkpoint");
  CHECK_THROWS_AS(write_atomically(path,
                                   [](const fs::path& temporary) {
                                     std::ofstream(temporary) << "half a checkpo";
                                     throw std::runtime_error("disk full");
                                   }),
                  std::runtime_error);
  CHECK(read_all(path) == "good checkpoint");
  CHECK(entries_in(folder) == 1);
  fs::remove_all(folder);
}

TEST_CASE("the writer gets a temporary path in the target folder, never the target", "[atomic]") {
  const auto folder = fresh_folder();
  const auto path = folder / "best.pt";
  write_atomically(path, [&](const fs::path& temporary) {
    CHECK(temporary != path);
    CHECK(temporary.parent_path() == path.parent_path());
    CHECK_FALSE(fs::exists(path));
    std::ofstream(temporary) << "weights";
  });
  CHECK(read_all(path) == "weights");
  fs::remove_all(folder);
}
