// The files a training run leaves next to its weights, each written through the atomic writer:
// results.csv (LibreYOLO's columns; rewritten whole so new columns fit), metrics.jsonl (one row
// per epoch, same schema), status.json (state, epoch, ETA) and curves.svg (losses and metrics by
// epoch, viewable in any browser).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace libreyolo::train {

class RunFiles {
 public:
  explicit RunFiles(std::filesystem::path run_dir);
  // Rows of an earlier run (metrics.jsonl) with epoch < `first_epoch` (1-based), for resume.
  void load_previous(int first_epoch);
  void add_epoch(const nlohmann::ordered_json& row);
  void write_status(const nlohmann::ordered_json& status) const;
  const std::vector<nlohmann::ordered_json>& rows() const { return rows_; }

 private:
  void write_csv() const;
  void write_jsonl() const;
  void write_svg() const;
  std::filesystem::path dir_;
  std::vector<nlohmann::ordered_json> rows_;
};

// The launcher's word on a data-parallel run that failed (dist/spawn.h): status.json says "failed",
// with `message` and the rank that failed, where rank 0 could not say it (killed, so "running"
// stayed) or said less (it only lost contact with the rank that failed). A completed or
// interrupted run keeps its status; a folder without status.json is left alone.
void mark_run_failed(const std::filesystem::path& run_dir, const std::string& message, int failed_rank);

// A rank other than 0 that lost contact, under a launcher other than ours (torchrun, srun): where
// status.json still says "running" (rank 0 wrote no failure of its own, so it was likely killed), it
// says "failed" with `message` and reported_by_rank. mark_run_failed may overwrite it.
void mark_run_lost(const std::filesystem::path& run_dir, const std::string& message, int reporting_rank);

}  // namespace libreyolo::train
