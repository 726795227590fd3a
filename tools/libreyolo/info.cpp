// `libreyolo info model=yolo9-t [imgsz=640] [nc=80]`: layers, parameters, gradients and GFLOPs
// of the model as built and fused for inference, in Ultralytics' summary format.
#include "commands.h"
#include "core/config.h"
#include "core/option_help.h"
#include "models/family.h"
#include "core/log.h"
#include "models/checkpoint.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace libreyolo::cli {

int run_info(const Arguments& arguments) {
  if (wants_help(arguments)) {
    fmt::print("{}", models::command_help(config::command_info));
    return 0;
  }
  const auto config = models::parse_arguments(config::command_info, arguments);
  log::set_quiet(config.get_bool("quiet"));
  auto loaded = models::load_model(config.get_text("model"), static_cast<int>(config.get_int("nc")));
  const int classes = loaded.class_count;  // a weights file's own nc wins over nc=
  models::Model& model = loaded.model;
  auto size = config.get_image_size("imgsz");
  if (config.source("imgsz") == config::Source::table_default) {
    const int side = loaded.image_size > 0 ? loaded.image_size : model.default_image_size;
    size = {side, side};
  }

  const auto built = models::summarize(model, size.height, size.width);
  model.fuse();
  const auto fused = models::summarize(model, size.height, size.width);
  const std::string at = size.height == size.width ? std::to_string(size.height) : fmt::format("{}x{}", size.height, size.width);
  if (config.get_bool("json")) {
    const auto to_json = [](const models::ModelSummary& s) {
      return nlohmann::json{{"layers", s.layers}, {"parameters", s.parameters}, {"gradients", s.gradients}, {"gflops", s.gflops}};
    };
    fmt::print("{}\n", nlohmann::json{{"model", model.display_name}, {"nc", classes}, {"imgsz", at},
                                      {"built", to_json(built)}, {"fused", to_json(fused)}}.dump());
    return 0;
  }
  const auto line = [&](const char* label, const models::ModelSummary& s) {
    fmt::print("{} summary{}: {} layers, {} parameters, {} gradients, {:.2f} GFLOPs at {}\n", model.display_name, label,
               s.layers, s.parameters, s.gradients, s.gflops, at);
  };
  line("", built);
  line(" (fused)", fused);
  return 0;
}

}  // namespace libreyolo::cli
