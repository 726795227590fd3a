// The fuzz targets: one per reader of untrusted files. Each takes arbitrary bytes and must either
// read them or refuse them with a libreyolo::Error (or data::CorruptLabel); any other exception,
// crash, sanitizer report or allocation beyond the input's size is a finding.
//
// The same targets run two ways: under libFuzzer (clang, -Dfuzzing=true: test/fuzz/fuzz_main.cpp,
// `meson test --suite fuzz`) and as a corpus replay in every build (replay_main.cpp, the default suite).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace libreyolo::fuzz {

using Target = void (*)(const std::uint8_t* data, std::size_t size);

struct NamedTarget {
  std::string_view name;
  Target run;
};

void torch_file(const std::uint8_t* data, std::size_t size);    // torch.save zip + pickle
void safetensors(const std::uint8_t* data, std::size_t size);   // header JSON + tensor data
void labels(const std::uint8_t* data, std::size_t size);        // YOLO label text
void dataset_yaml(const std::uint8_t* data, std::size_t size);  // data.yaml
void coco_json(const std::uint8_t* data, std::size_t size);     // instances_*.json
void profile_json(const std::uint8_t* data, std::size_t size);  // profile.json, or a trace through it
void trace_json(const std::uint8_t* data, std::size_t size);    // Chrome trace and profile_summary.json

inline constexpr NamedTarget kTargets[] = {
    {"torch_file", torch_file}, {"safetensors", safetensors},   {"labels", labels},
    {"dataset_yaml", dataset_yaml}, {"coco_json", coco_json}, {"profile_json", profile_json}, {"trace_json", trace_json},
};

const NamedTarget* find_target(std::string_view name);

}  // namespace libreyolo::fuzz
