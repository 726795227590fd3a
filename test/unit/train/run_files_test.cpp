// status.json after a data-parallel failure: who may overwrite whom. Rank 0's own failure stands
// against the launcher's word about rank 0; a surviving rank's guess (mark_run_lost) ends only a
// "running" and gives way to the launcher, who knows which rank failed.
#include "train/run_files.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>

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

TEST_CASE("run files: rank 0 killed mid-epoch: the epoch in progress, the time until now, each rank's words under its name",
          "[run_files]") {
  using namespace libreyolo::train;
  test_util::TempDir dir("run_files_killed");
  const auto path = dir.path / "status.json";
  test_util::write_all(path, nlohmann::json{{"state", "running"}, {"epoch", 3}, {"epochs", 10}, {"elapsed_s", 100.0}}.dump());
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() - std::chrono::seconds(5));
  mark_run_lost(dir.path, "rank 1 of 2 lost contact with another rank", 1);
  auto status = status_of(dir.path);
  CHECK(status["epoch"] == 4);  // 3 done when rank 0 last wrote: it was in epoch 4
  CHECK(status["elapsed_s"].get<double>() >= 104.9);
  CHECK(status["elapsed_s"].get<double>() < 200);

  mark_run_failed(dir.path, "rank 0 failed with exit code 137; the other ranks were stopped. Its last lines:\n  | epoch 4", 0);
  status = status_of(dir.path);
  CHECK(status["message"] == "rank 0 failed with exit code 137; the other ranks were stopped. Its last lines:\n  | epoch 4");
  CHECK(status["rank1_message"] == "rank 1 of 2 lost contact with another rank");  // not called rank 0's
  CHECK_FALSE(status.contains("rank0_message"));
  CHECK(status["epoch"] == 4);  // advanced once, not twice

  // the launcher alone (no surviving rank's word first): the same advance
  test_util::write_all(path, nlohmann::json{{"state", "running"}, {"epoch", 10}, {"epochs", 10}, {"elapsed_s", 7.0}}.dump());
  mark_run_failed(dir.path, "rank 0 failed", 0);
  status = status_of(dir.path);
  CHECK(status["epoch"] == 10);  // never past the last epoch
  CHECK(status["elapsed_s"].get<double>() >= 7.0);
}
