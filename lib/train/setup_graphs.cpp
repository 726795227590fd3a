#include "train/setup_stages.h"

#include "core/log.h"
#include "models/family.h"
#include "train/capturable_optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

namespace libreyolo::train {

// cuda_graph=true: a graph manager for the network, or LibreYOLO's one line saying why not.
void set_up_cuda_graph(const config::Config& config, const Placement& place, const Inputs& inputs, const Network& net,
                       Graphs& graphs) {
  if (!config.get_bool("cuda_graph")) {
    if (config.differs_from_default("cuda_graph_scope")) {
      log::info("cuda_graph_scope={} ignored: it applies with cuda_graph=true", config.get_text("cuda_graph_scope"));
    }
    return;
  }
  std::string missing;
  auto backend = place.device.is_cuda() ? make_cuda_graph_backend(place.device.index(), missing) : make_cpu_capture_backend_for_tests();
  const auto reason = graph_gate_reason({.cuda_device = place.device.is_cuda() || backend != nullptr,
                                         .backend_available = backend != nullptr,
                                         .backend_missing_reason = missing,
                                         // the YOLO networks are tensors in, tensors out; a DETR's decoder takes the
                                         // targets: its region (backbone and encoder) is captured when the model splits there
                                         .family_supported = net.family->graph_region() == models::GraphRegion::network ||
                                                             static_cast<bool>(net.model().train_region.run),
                                         .family = std::string(net.family->name())});
  if (reason) {
    log::info("cuda_graph=true ignored ({}); training runs eager.", *reason);
    return;
  }
  const auto& scales = inputs.batch_scales;
  if (inputs.multi_scale && (!scales || !scales->sizes.empty())) {  // the training-performance guide's line
    log::info("cuda_graph with multi_scale: each batch takes one of {} sizes, so no shape may recur often enough to be "
              "captured (a shape's 3rd batch is); multi_scale=false is the lever",
              scales ? fmt::format("{}", std::set<int>(scales->sizes.begin(), scales->sizes.end()).size()) : std::string("many"));
  }
  if (place.device.is_cuda()) graphs.stream = use_capture_stream(place.device.index());
  const bool whole_network = net.family->graph_region() == models::GraphRegion::network;
  const std::string region = whole_network ? "the network" : "the backbone and encoder";
  const std::string scope = config.get_text("cuda_graph_scope");
  const int level = scope == "network" ? 0 : scope == "loss" ? 1 : scope == "optimizer" ? 2 : 3;
  GraphOptions options{.loss = level >= 1, .optimizer = level >= 2, .ema = level >= 3};
  if (options.loss) {
    std::string obstacle = net.loss->capture_obstacle();
    if (obstacle.empty() && place.dist) obstacle = "the data-parallel gradient reducer runs outside graphs";
    if (!obstacle.empty()) {
      log::info("cuda_graph_scope={}: {}'s loss stays eager ({}); {}'s forward and backward are graphed instead",
                scope, net.family->name(), obstacle, region);
      options.loss = false;
    }
  }
  graphs.label_slots = options.loss ? config.get_int("max_labels") : 0;
  std::string unused;
  auto val_backend = place.device.is_cuda() ? make_cuda_graph_backend(place.device.index(), unused) : make_cpu_capture_backend_for_tests();
  if (val_backend) graphs.validation = std::make_unique<InferenceGraphs>(std::move(val_backend));
  graphs.training = std::make_unique<GraphManager>(std::move(backend), options);
  const std::string optimizer = !options.optimizer ? "the optimizer and EMA stay eager"
                                : options.ema ? "the optimizer step with EMA is a second graph, captured on the 3rd step"
                                              : "the optimizer step is a second graph, captured on the 3rd step; EMA stays eager";
  if (options.loss) {
    log::info("cuda_graph: forward, loss and backward are one graph, captured on the 3rd batch of a shape after 3 warm-up runs "
              "(targets padded to max_labels={} per image, the most the pipeline keeps); {}", graphs.label_slots, optimizer);
  } else {
    log::info("cuda_graph: {}'s forward and backward are captured on the 3rd batch of a shape, after 3 warm-up runs; {} eager; {}",
              region, whole_network ? "the loss stays" : "the decoder (its denoising queries follow each batch's targets) and the loss stay",
              optimizer);
  }
}

// What the graphs capture takes the forms a GPU runs, on any device: lr, momentum and the EMA
// decay read from device tensors, the loss's static shapes. On a GPU they are its forms anyway; on
// a CPU only the tests get here (their capture backend, which refuses host reads as CUDA does, or
// device_forms_for_tests for the eager run a graphed one is compared with).
void use_device_forms(Network& net, Optimisation& optim, const Graphs& graphs) {
  const bool all = device_forms_for_tests();
  if (all || (graphs.training && graphs.training->graphs_optimizer())) dynamic_cast<CapturableOptimizer&>(*optim.optimizer).use_device_tensors(true);
  if (net.ema && (all || (graphs.training && graphs.training->graphs_ema()))) net.ema->use_device_tensors(true);
  if (all || (graphs.training && graphs.training->graphs_loss())) net.loss->use_static_shapes();
}

}  // namespace libreyolo::train
