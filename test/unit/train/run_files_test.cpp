// status.json after a data-parallel failure: who may overwrite whom. Rank 0's own failure stands
// against the launcher's word about rank 0; a surviving rank's guess (mark_run_lost) ends only a
// "running" and gives way to the launcher, who knows which rank failed.
#include "train/run_files.h"

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "catch.h"  // last: see catch.h

namespace {

nlohmann::json status_of(const std::filesystem::path& dir) {
  return nlohmann::json::parse(test_util::read_all(dir / "status.json"));
}

void write_status(const std::filesystem::path& dir, const std::string& state, const std::string& message) {
  test_util::write_all(dir / "status.json", nlohmann::json{{"state", state}, {"message", message}, {"epoch", 3}}.dump());
}

}  // namespace

TEST_CASE("run files: a surviving rank ends a running status, and gives way to the launcher", "[run_files]") {
  using namespace libreyolo::train;
  test_util::TempDir dir("run_files");

  write_status(dir.path, "running", "");
  mark_run_lost(dir.path, "rank 1 of 2 lost contact", 1);
  auto status = status_of(dir.path);
  CHECK(status["state"] == "failed");
  CHECK(status["message"] == "rank 1 of 2 lost contact");
  CHECK(status["reported_by_rank"] == 1);
  CHECK_FALSE(status.contains("failed_rank"));
  CHECK(status["epoch"] == 3);  // the rest kept

  mark_run_failed(dir.path, "rank 0 failed with exit code 137", 0);
  status = status_of(dir.path);
  CHECK(status["message"] == "rank 0 failed with exit code 137");
  CHECK(status["failed_rank"] == 0);
  CHECK_FALSE(status.contains("reported_by_rank"));

  // rank 0's own failure stands against a guess and against the launcher's word about rank 0
  write_status(dir.path, "failed", "rank 0's own words");
  mark_run_lost(dir.path, "a guess", 1);
  mark_run_failed(dir.path, "rank 0 failed with exit code 1", 0);
  CHECK(status_of(dir.path)["message"] == "rank 0's own words");
  // ... but not against the launcher naming another rank, whose failure caused it
  mark_run_failed(dir.path, "rank 1 failed with exit code 137", 1);
  status = status_of(dir.path);
  CHECK(status["message"] == "rank 1 failed with exit code 137");
  CHECK(status["rank0_message"] == "rank 0's own words");

  // finished runs keep their status; a folder without status.json is left alone
  for (const char* state : {"completed", "interrupted"}) {
    write_status(dir.path, state, "done");
    mark_run_lost(dir.path, "a guess", 1);
    mark_run_failed(dir.path, "rank 1 failed", 1);
    CHECK(status_of(dir.path)["state"] == state);
  }
  std::filesystem::remove(dir.path / "status.json");
  mark_run_lost(dir.path, "a guess", 1);
  CHECK_FALSE(std::filesystem::exists(dir.path / "status.json"));
}
