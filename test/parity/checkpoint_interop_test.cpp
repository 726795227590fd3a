// C++ side of the checkpoint interop test: loads the Python-written LibreYOLO checkpoints (YOLOX-n,
// YOLOv9-t, YOLOv7-b, RTMDet-t, RT-DETR-l in the fine-tune form with frozen backbone norms) with
// model=path (family, size and nc from the file), checks the outputs against Python's, then
// writes them back as cpp-*.pt (training extras kept) for Python to load.
//   checkpoint_interop_test DIR
#include "models/checkpoint.h"
#include "models/safetensors.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

#include <exception>

using namespace libreyolo::models;

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: checkpoint_interop_test DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  try {
    const auto reference = read_safetensors(dir + "/py-outputs.safetensors");
    NamedTensors ours{{"input", reference.at("input")}};
    for (const auto& [family, size] : {std::pair{"yolox", "n"}, std::pair{"yolo9", "t"}, std::pair{"yolo7", "b"}, std::pair{"rtmdet", "t"},
                                        std::pair{"rtdetr", "l"}}) {
      const std::string from = fmt::format("{}/py-{}-{}.pt", dir, family, size);
      std::optional<Checkpoint> read;
      LoadedModel loaded = load_model(from, /*class_count=*/1, &read);  // nc comes from the file
      const Checkpoint& checkpoint = *read;
      fmt::print("{}: {} nc={} imgsz={} names[0]={} extras:", from, loaded.model.display_name, loaded.class_count,
                 checkpoint.image_size, loaded.names.at(0));
      for (const auto& [key, value] : checkpoint.extras) fmt::print(" {}", key);
      fmt::print("\n");
      ok = ok && loaded.class_count == 80 && loaded.name.family == family && loaded.name.size == size &&
           checkpoint.extra("epoch") && checkpoint.extra("epoch")->toInt() == 4;
      // RT-DETR-l's frozen backbone norms (no num_batches_tracked) load, into a model built in that form
      if (std::string(family) == "rtdetr" && !loaded.fine_tune) {
        fmt::print("  {}: its frozen norms were not recognised as LibreYOLO's fine-tune form\n", from);
        ok = false;
      }
      at::NoGradGuard no_grad;
      loaded.model.module->eval();
      const std::string own_input = fmt::format("{}.input", family);  // RT-DETR's: 300 queries need a larger image
      const at::Tensor& input = reference.count(own_input) ? reference.at(own_input) : reference.at("input");
      if (reference.count(own_input)) ours.emplace_back(own_input, input);
      const auto outputs = loaded.model.forward(input);
      for (std::size_t level = 0; level < outputs.size(); ++level) {
        const at::Tensor& expected = reference.at(fmt::format("{}.{}", family, level));
        const bool same = at::allclose(outputs[level], expected, 1e-4, 1e-4);
        fmt::print("  C++ loads Python's file: level {} max |diff| {:.3g} {}\n", level,
                   (outputs[level] - expected).abs().max().item<double>(), same ? "ok" : "MISMATCH");
        ok = ok && same;
        ours.emplace_back(fmt::format("{}.{}", family, level), outputs[level]);
      }
      Checkpoint out = checkpoint;
      out.model = state_dict(*loaded.model.module);
      write_checkpoint(fmt::format("{}/cpp-{}-{}.pt", dir, family, size), out);
    }
    write_safetensors(dir + "/cpp-outputs.safetensors", ours);
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
  return ok ? 0 : 1;
}
