#include "fuzz_targets.h"

#include "core/error.h"
#include "core/log.h"
#include "data/coco_json.h"
#include "data/dataset_yaml.h"
#include "data/labels.h"
#include "models/safetensors.h"
#include "models/torch_file.h"
#include "profile/analysis.h"
#include "profile/report.h"
#include "profile/summary.h"
#include "profile/trace.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace libreyolo::fuzz {

namespace fs = std::filesystem;

namespace {

// The readers take paths: the input is written to a file of the right extension, rewritten for
// every input, in $LIBREYOLO_FUZZ_DIR (fuzz.sh points it into its scratch folder) or /dev/shm.
std::filesystem::path scratch_folder;

void remove_scratch_folder() {
  std::error_code ignored;
  fs::remove_all(scratch_folder, ignored);
}

fs::path input_file(const std::uint8_t* data, std::size_t size, const char* name) {
  if (scratch_folder.empty()) {
    const char* given = std::getenv("LIBREYOLO_FUZZ_DIR");
    const fs::path base = given && *given ? fs::path(given) : fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    scratch_folder = base / ("libreyolo_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(scratch_folder);
    std::atexit(remove_scratch_folder);
    log::set_quiet(true);  // the readers' warnings would flood the fuzzer's output
  }
  const fs::path path = scratch_folder / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

template <typename Read>
void refused_cleanly(Read read) {
  try {
    read();
  } catch (const Error&) {         // a clear refusal: what every reader must give for bad bytes
  } catch (const data::CorruptLabel&) {
  }
}

}  // namespace

void torch_file(const std::uint8_t* data, std::size_t size) {
  const fs::path path = input_file(data, size, "input.pt");
  refused_cleanly([&] { models::read_torch_file(path, /*tensor_data=*/false); });
  refused_cleanly([&] { models::read_torch_file(path, /*tensor_data=*/true); });
}

void safetensors(const std::uint8_t* data, std::size_t size) {
  const fs::path path = input_file(data, size, "input.safetensors");
  refused_cleanly([&] { models::read_safetensors_metadata(path); });
  refused_cleanly([&] { models::read_safetensors(path); });
}

void labels(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const int class_count = 1 + data[0] % 100;  // the first byte picks the dataset's class count
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  refused_cleanly([&] {
    const auto parsed = data::parse_label_text(text, class_count);
    for (const auto& box : parsed.boxes) {
      if (box.cls < 0 || box.cls >= class_count || !(box.w >= 0 && box.h >= 0) || box.cx < 0 || box.cx > 1) std::abort();
    }
  });
}

void dataset_yaml(const std::uint8_t* data, std::size_t size) {
  const fs::path path = input_file(data, size, "data.yaml");
  refused_cleanly([&] { data::load_dataset_spec(path.string()); });
}

void coco_json(const std::uint8_t* data, std::size_t size) {
  const fs::path path = input_file(data, size, "instances_fuzz.json");
  if (!fs::exists(path.parent_path() / "a.jpg")) std::ofstream(path.parent_path() / "a.jpg") << "x";  // an image that exists
  refused_cleanly([&] {
    std::vector<std::int64_t> ids;
    for (const auto& category : data::read_coco_categories(path)) ids.push_back(category.id);
    const auto scan = data::read_coco_split(path, path.parent_path(), ids);
    for (const auto& record : scan.images) {
      for (const auto& box : record.boxes) {  // what training gets: a class of the dataset, inside the image
        if (box.cls < 0 || box.cls >= static_cast<int>(ids.size()) || !(box.w > 0 && box.h > 0) || !(box.cx >= 0 && box.cx <= 1) ||
            !(box.cy >= 0 && box.cy <= 1)) {
          std::abort();
        }
      }
    }
  });
}

void profile_json(const std::uint8_t* data, std::size_t size) {
  const fs::path path = input_file(data, size, "profile.json");
  refused_cleanly([&] {
    const auto profile = profile::load_profile(path);
    (void)profile::format_report(profile, "", "");
  });
}

void trace_json(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return;
  refused_cleanly([&] {
    const auto trace = profile::parse_trace(document, "input.json");
    (void)profile::analyze(trace, std::nullopt, "input.json");
  });
  refused_cleanly([&] {
    try {
      const auto summary = profile::summary_from_json(document, "input.json");
      (void)profile::summary_to_json(summary);
    } catch (const nlohmann::json::exception&) {  // load_profile turns these into a UsageError
    }
  });
}

const NamedTarget* find_target(std::string_view name) {
  for (const auto& target : kTargets) {
    if (target.name == name) return &target;
  }
  return nullptr;
}

}  // namespace libreyolo::fuzz
