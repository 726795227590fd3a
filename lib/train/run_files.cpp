#include "train/run_files.h"

#include "core/atomic_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <string>

namespace libreyolo::train {

RunFiles::RunFiles(std::filesystem::path run_dir) : dir_(std::move(run_dir)) {}

void RunFiles::load_previous(int first_epoch) {
  std::ifstream in(dir_ / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      auto row = nlohmann::ordered_json::parse(line);
      if (row.value("epoch", 0) < first_epoch) rows_.push_back(std::move(row));
    } catch (const nlohmann::json::exception&) {
      // a torn last line of an interrupted run: dropped
    }
  }
}

void RunFiles::add_epoch(const nlohmann::ordered_json& row) {
  rows_.push_back(row);
  write_csv();
  write_jsonl();
  write_svg();
}

void RunFiles::write_csv() const {
  std::vector<std::string> columns;
  for (const auto& row : rows_) {
    for (const auto& item : row.items()) {
      if (std::find(columns.begin(), columns.end(), item.key()) == columns.end()) columns.push_back(item.key());
    }
  }
  std::string text;
  for (std::size_t i = 0; i < columns.size(); ++i) text += (i ? "," : "") + columns[i];
  text += "\n";
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if (i) text += ",";
      if (!row.contains(columns[i])) continue;
      const auto& v = row.at(columns[i]);
      if (v.is_boolean()) text += v.get<bool>() ? "1" : "0";
      else if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d)) text += fmt::format("{:.6g}", d);  // non-finite: empty, as LibreYOLO
      } else if (v.is_number()) text += v.dump();
      else if (v.is_string()) text += v.get<std::string>();
    }
    text += "\n";
  }
  write_file_atomically(dir_ / "results.csv", text);
}

void RunFiles::write_jsonl() const {
  std::string text;
  for (const auto& row : rows_) text += row.dump() + "\n";
  write_file_atomically(dir_ / "metrics.jsonl", text);
}

void RunFiles::write_status(const nlohmann::ordered_json& status) const {
  write_file_atomically(dir_ / "status.json", status.dump(2) + "\n");
}

void RunFiles::write_svg() const {
  // One panel per series: every train/* loss and the validation metrics.
  std::vector<std::string> series;
  for (const auto& row : rows_) {
    for (const auto& item : row.items()) {
      const std::string& key = item.key();
      const bool wanted = key.rfind("train/", 0) == 0 || key.rfind("metrics/", 0) == 0;  // the task's metric columns
      if (wanted && std::find(series.begin(), series.end(), key) == series.end()) series.push_back(key);
    }
  }
  const int columns = 4, panel_w = 260, panel_h = 180, margin = 36;
  const int rows = std::max<int>(1, (static_cast<int>(series.size()) + columns - 1) / columns);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      columns * panel_w, rows * panel_h);
  for (std::size_t s = 0; s < series.size(); ++s) {
    const int x0 = static_cast<int>(s % columns) * panel_w, y0 = static_cast<int>(s / columns) * panel_h;
    std::vector<std::pair<double, double>> points;
    for (const auto& row : rows_) {
      if (!row.contains(series[s]) || !row.at(series[s]).is_number()) continue;
      const double v = row.at(series[s]).get<double>();
      if (std::isfinite(v)) points.emplace_back(row.value("epoch", 0), v);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", x0 + margin, y0 + 16, series[s]);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccc\"/>\n",
                       x0 + margin, y0 + 24, panel_w - margin - 10, panel_h - 50);
    if (points.empty()) continue;
    double xmin = points.front().first, xmax = points.back().first, ymin = points[0].second, ymax = points[0].second;
    for (const auto& [x, y] : points) {
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
    if (xmax == xmin) xmax = xmin + 1;
    if (ymax == ymin) ymax = ymin + 1e-9 + std::abs(ymin) * 0.01;
    const double w = panel_w - margin - 10, h = panel_h - 50;
    std::string path;
    for (const auto& [x, y] : points) {
      path += fmt::format("{:.1f},{:.1f} ", x0 + margin + (x - xmin) / (xmax - xmin) * w,
                          y0 + 24 + h - (y - ymin) / (ymax - ymin) * h);
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"{}\"/>\n", path);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.3g}</text>\n", x0 + margin - 2, y0 + 30, ymax);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.3g}</text>\n", x0 + margin - 2, y0 + 24 + h, ymin);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">epoch {:g}</text>\n", x0 + margin, y0 + panel_h - 10, xmin);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:g}</text>\n", x0 + panel_w - 10, y0 + panel_h - 10, xmax);
  }
  svg += "</svg>\n";
  write_file_atomically(dir_ / "curves.svg", svg);
}

namespace {

// A run's status.json as an object; nothing for a folder without one or with a damaged one.
std::optional<nlohmann::ordered_json> read_status(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::ordered_json status = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!status.is_object()) return std::nullopt;
  return status;
}

// A "running" status.json that rank 0 can no longer update (it was killed): rank 0 wrote it at an
// epoch's end, and the run went on into the next epoch until now. Its elapsed time is carried to
// now and its epoch is the one in progress, as a failure of rank 0's own records them.
void advance_to_now(nlohmann::ordered_json& status, const std::filesystem::path& path) {
  std::error_code error;
  const auto written = std::filesystem::last_write_time(path, error);
  if (!error && status.contains("elapsed_s") && status["elapsed_s"].is_number()) {
    const double since = std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - written).count();
    status["elapsed_s"] = status["elapsed_s"].get<double>() + std::max(0.0, since);
  }
  if (status.contains("epoch") && status["epoch"].is_number_integer() && status.contains("epochs") &&
      status["epochs"].is_number_integer()) {
    status["epoch"] = std::min(status["epoch"].get<int>() + 1, status["epochs"].get<int>());
  }
}

}  // namespace

void mark_run_failed(const std::filesystem::path& run_dir, const std::string& message, int failed_rank) {
  const auto path = run_dir / "status.json";
  auto read = read_status(path);
  if (!read) return;
  nlohmann::ordered_json& status = *read;
  const std::string state = status.value("state", "");
  const bool guessed = status.contains("reported_by_rank");  // a surviving rank's word (mark_run_lost)
  if (state != "running" && !(state == "failed" && (failed_rank != 0 || guessed))) return;
  if (state == "failed" && status.contains("message")) {  // keep what the rank that wrote it said, under its name
    const int author = guessed ? status.value("reported_by_rank", -1) : 0;
    status[author >= 0 ? fmt::format("rank{}_message", author) : std::string("earlier_message")] = status["message"];
  }
  status.erase("reported_by_rank");
  if (state == "running") advance_to_now(status, path);
  status["state"] = "failed";
  status["message"] = message;
  status["failed_rank"] = failed_rank;
  write_file_atomically(path, status.dump(2) + "\n");
}

void mark_run_lost(const std::filesystem::path& run_dir, const std::string& message, int reporting_rank) {
  const auto path = run_dir / "status.json";
  auto read = read_status(path);
  if (!read || read->value("state", "") != "running") return;
  nlohmann::ordered_json& status = *read;
  advance_to_now(status, path);
  status["state"] = "failed";
  status["message"] = message;
  status["reported_by_rank"] = reporting_rank;
  write_file_atomically(path, status.dump(2) + "\n");
}

}  // namespace libreyolo::train
