// One rank of a data-parallel self-test: rendezvous through the launcher's variables (torchrun,
// Slurm, or set by hand), then an all-reduce and a broadcast over c10d's Gloo backend, checked
// against their definitions; then c10d's own Reducer (the one PyTorch DDP uses), driven from C++:
// its gradient hooks must leave every rank with the mean of the ranks' gradients, for two steps.
// DIST_SELFTEST_DEVICE=cuda runs the tensor checks on cuda:LOCAL_RANK over NCCL (the gpu suite);
// CPU tensors (the gathered validation) still go through the group's Gloo backend.
// The network replayed through GraphedNetwork under the Reducer must give eager DDP's gradients.
// Prints "rank R/W ok" or exits 1.
#include "core/error.h"
#include "dist/gradient_sync.h"
#include "dist/launch_env.h"
#include "train/train_state.h"
#include "dist/process_group.h"
#include "dist/collectives.h"
#include "nn/bn_silu.h"
#include "nn/conv.h"
#include "data/dataset.h"
#include "data/dataset_yaml.h"
#include "data/synth.h"
#include "data/training_data.h"
#include "eval/validator.h"
#include "models/family.h"
#include "models/model_name.h"
#include "models/model.h"
#include "train/cuda_graph.h"
#include "train/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <torch/nn/modules/container/sequential.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <exception>
#include <filesystem>

namespace {

namespace dist = libreyolo::dist;
namespace nn = libreyolo::nn;

// c10d's Reducer as DDP builds it: 25 MB buckets, the first 1 MB.
std::unique_ptr<c10d::Reducer> make_reducer(const std::vector<at::Tensor>& params, dist::Group& group) {
  const std::vector<bool> sparse(params.size(), false);
  const auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(params, {1u << 20, 25u << 20}, sparse);
  return std::make_unique<c10d::Reducer>(params, buckets, group.handle(), sparse, 25 << 20,
                                         /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
                                         std::unordered_map<std::size_t, std::string>{}, 1 << 20,
                                         /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                                         std::vector<std::int64_t>(limits.begin(), limits.end()));
}

// Conv+BN+SiLU twice, the blocks our models are made of, with the same weights on every rank.
torch::nn::Sequential small_net() {
  torch::manual_seed(7);
  torch::nn::Sequential net(nn::BaseConv(3, 8, 3, 1), nn::BaseConv(8, 4, 3, 2));
  return net;
}

// A network's convolution weights and its input stored channels-last (as YOLOv9 and YOLOv5 train on the CPU).
void to_channels_last(torch::nn::Module& net) {
  torch::NoGradGuard no_grad;
  for (auto& p : net.parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

// sync_bn against its definition: W ranks with B samples each give the outputs, running
// statistics and (Reducer-averaged) gradients of plain BatchNorm over the W·B samples in one
// process. The loss is a mean over the global batch; each rank's share is W·(its sum)/N.
// `channels_last`: on the CPU, the fused BatchNorm+SiLU kernels with the global statistics
// (nn::batch_norm_silu_synced); NCHW, the unfused definition.
bool check_sync_batch_norm(dist::Group& group, int r, int w, const c10::Device& device, bool channels_last) {
  constexpr int per_rank = 3;
  torch::manual_seed(11);
  at::Tensor all = (at::randn({per_rank * w, 3, 12, 12}) * 3 + 1).to(device);  // the same global batch everywhere
  if (channels_last) all = all.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor mine = all.narrow(0, r * per_rank, per_rank);
  auto reference = small_net();  // one process, plain BatchNorm, the whole batch
  reference->to(device);
  if (channels_last) to_channels_last(*reference);
  reference->train();
  const at::Tensor ref_out = reference->forward(all);
  ref_out.square().mean().backward();

  auto synced = small_net();
  synced->to(device);
  if (channels_last) to_channels_last(*synced);
  synced->train();
  dist::GroupCollectives collectives(group, device);
  if (channels_last && device.is_cpu()) {  // the case is the fused kernels' (unless switched off by the environment)
    torch::nn::BatchNorm2d probe(8);
    const at::Tensor activation = at::zeros({per_rank, 8, 12, 12}).contiguous(at::MemoryFormat::ChannelsLast);
    if (nn::fused_bn_silu_enabled() && !nn::fused_bn_silu_sync_applies(activation, *probe)) {
      fmt::print(stderr, "rank {}: the fused sync_bn kernels do not apply to a channels-last activation\n", r);
      return false;
    }
  }
  const std::size_t layers = nn::set_batch_norm_sync(*synced, std::make_shared<libreyolo::train::SyncBatchNorm>(collectives));
  const auto reducer_ptr = make_reducer(synced->parameters(), group);
  c10d::Reducer& reducer = *reducer_ptr;
  reducer.prepare_for_forward();
  const at::Tensor out = synced->forward(mine);
  const at::Tensor loss = out.square().sum() * w / ref_out.numel();
  reducer.prepare_for_backward({loss});
  loss.backward();

  const auto close = [](const at::Tensor& a, const at::Tensor& b) { return at::allclose(a.cpu(), b.cpu(), 1e-4, 1e-6); };
  bool ok = layers == 2 && close(out, ref_out.narrow(0, r * per_rank, per_rank).detach());
  const auto ref_buffers = reference->named_buffers(), buffers = synced->named_buffers();
  for (const auto& item : ref_buffers) {
    if (!close(buffers[item.key()].to(at::kFloat), item.value().to(at::kFloat))) {
      fmt::print(stderr, "rank {}: sync_bn buffer {} differs from one process's\n", r, item.key());
      ok = false;
    }
  }
  const auto ref_params = reference->named_parameters(), sync_params = synced->named_parameters();
  for (const auto& item : ref_params) {
    const at::Tensor got = sync_params[item.key()].grad();
    if (!close(got, item.value().grad())) {
      fmt::print(stderr, "rank {}: sync_bn gradient of {} differs by {} (max {})\n", r, item.key(),
                 (got - item.value().grad()).abs().max().item<double>(), item.value().grad().abs().max().item<double>());
      ok = false;
    }
  }
  if (!ok) fmt::print(stderr, "rank {}: sync_bn ({}) differs from BatchNorm over the {} samples\n", r,
                     channels_last ? "channels-last" : "NCHW", per_rank * w);
  return ok;
}

// DDP and CUDA graphs together: the network replayed through GraphedNetwork (the re-running
// backend, so on the CPU too) hands its gradients to autograd, the Reducer's hooks average them,
// and every rank ends with the gradients eager DDP gives, on the rank's own batch.
bool check_graphed_gradients(dist::Group& group, int r, const c10::Device& device) {
  namespace train = libreyolo::train;
  torch::manual_seed(21 + static_cast<std::uint64_t>(r));
  const at::Tensor mine = at::randn({2, 3, 12, 12}).to(device);
  std::vector<std::vector<at::Tensor>> grads;
  for (const bool graphed : {false, true}) {
    auto net = small_net();
    net->to(device);
    net->train();
    std::vector<at::Tensor> params = net->parameters();
    const auto reducer = make_reducer(params, group);
    train::GraphManager manager(std::make_unique<train::RerunBackend>(), {.capture_after = 1, .warmup = 1});
    const train::NetworkFunction network = [&](const at::Tensor& x) { return std::vector<at::Tensor>{net->forward(x)}; };
    reducer->prepare_for_forward();
    const auto capture = [&] { return train::CaptureTensors{.parameters = params, .buffers = net->buffers()}; };
    const auto outputs = graphed ? manager.forward(mine, network, capture) : network(mine);
    const at::Tensor loss = outputs[0].square().mean();
    reducer->prepare_for_backward({loss});
    loss.backward();
    if (graphed && manager.counts().replays != 1) {
      fmt::print(stderr, "rank {}: the graphed step was not replayed\n", r);
      return false;
    }
    grads.emplace_back();
    for (const auto& p : params) grads.back().push_back(p.grad().detach().cpu());
  }
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    if (!at::allclose(grads[1][i], grads[0][i], 1e-5, 1e-7)) {
      fmt::print(stderr, "rank {}: graphed DDP gradient {} differs from eager DDP's by {}\n", r, i,
                 (grads[1][i] - grads[0][i]).abs().max().item<double>());
      return false;
    }
  }
  return true;
}

// Distributed validation: each rank runs every W-th batch and the detections are gathered; the
// result must be one process's exactly (the same detections in the same order, the same metrics).
// An untrained YOLOv9-t at confidence 0 gives thousands of boxes to compare.
bool check_distributed_validation(dist::Group& group, int r) {
  namespace data = libreyolo::data;
  namespace models = libreyolo::models;
  namespace eval = libreyolo::eval;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("libreyolo_dist_val_{}_{}", ::getpid(), r);
  data::write_synthetic_dataset({.out = dir, .train_images = 1, .val_images = 10, .image_size = 64, .seed = 3});
  const auto spec = data::load_dataset_spec((dir / "data.yaml").string());
  auto scan = data::scan_split(spec, "val", 1);
  const data::DetectionDataset dataset(std::move(scan.images), spec.class_count(), 64, data::CacheMode::none);
  torch::manual_seed(5);
  models::Model model = models::build_model(models::parse_model_name("yolo9-t"), spec.class_count());
  model.module->eval();
  const eval::ValidatorOptions options{.family = &models::family("yolo9"), .batch_size = 3, .image_size = 64, .confidence = 0.0, .workers = 1};
  const auto forward = [&](const at::Tensor& x) { return model.forward(x); };
  const eval::Validation one = eval::DetectionValidator(dataset, options).run(forward);
  eval::DetectionValidator sharded(dataset, options);
  dist::GroupCollectives collectives(group, c10::kCPU);
  sharded.distribute({.shard = r, .shards = group.world_size(),
                      .gather_rows = [&](const at::Tensor& rows) { return collectives.gather_rows(rows); },
                      .sum = [&](at::Tensor& values) { collectives.sum(values); }});
  const eval::Validation gathered = sharded.run(forward);
  std::filesystem::remove_all(dir);
  bool same = one.detections.size() == gathered.detections.size() && !one.detections.empty();
  for (std::size_t i = 0; same && i < one.detections.size(); ++i) {
    const auto &a = one.detections[i], &b = gathered.detections[i];
    same = a.image == b.image && a.category == b.category && a.x == b.x && a.y == b.y && a.w == b.w && a.h == b.h && a.score == b.score;
  }
  same = same && one.coco.stats == gathered.coco.stats && one.pr.mean_precision == gathered.pr.mean_precision;
  if (!same) {
    fmt::print(stderr, "rank {}: distributed validation gave {} detections (mAP50 {}), one process {} (mAP50 {})\n", r,
               gathered.detections.size(), gathered.coco.map50(), one.detections.size(), one.coco.map50());
  }
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto env = libreyolo::dist::resolve_launch_env(libreyolo::dist::process_environment());
    libreyolo::dist::GroupOptions options;
    const char* device_name = std::getenv("DIST_SELFTEST_DEVICE");
    const c10::Device device = device_name && std::string(device_name) == "cuda" ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank))
                                                                               : c10::Device(c10::kCPU);
    if (device.is_cuda()) options.backend = "nccl";
    if (argc > 1) options.timeout = std::chrono::seconds(std::atoi(argv[1]));
    libreyolo::dist::Group group(env, options);
    const int r = env.rank, w = env.world_size;
    std::vector<at::Tensor> sum{at::full({1000}, static_cast<float>(r + 1), at::TensorOptions().device(device))};
    group.group().allreduce(sum)->wait();
    const float expected = static_cast<float>(w * (w + 1) / 2);
    if (!at::allclose(sum[0].cpu(), at::full({1000}, expected))) {
      fmt::print(stderr, "rank {}: all-reduce gave {}, expected {}\n", r, sum[0][0].item<float>(), expected);
      return 1;
    }
    std::vector<at::Tensor> shared{(r == 0 ? at::arange(10, at::kFloat) : at::zeros({10})).to(device)};
    group.group().broadcast(shared)->wait();
    if (!at::equal(shared[0].cpu(), at::arange(10, at::kFloat))) {
      fmt::print(stderr, "rank {}: broadcast from rank 0 did not arrive\n", r);
      return 1;
    }
    // The Reducer: a Linear(8, 4) with the same initial weights everywhere; rank r's batch is
    // 4 rows of (r + 1), so d(sum)/dW = 4 (r + 1) and d(sum)/db = 4; the mean over W ranks is
    // dW = 2 (W + 1), db = 4.
    torch::manual_seed(0);
    torch::nn::Linear model(8, 4);
    model->to(device);
    const auto reducer_ptr = make_reducer(model->parameters(), group);
    c10d::Reducer& reducer = *reducer_ptr;
    for (int step = 0; step < 2; ++step) {
      for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
      reducer.prepare_for_forward();
      const at::Tensor loss = model(at::full({4, 8}, static_cast<float>(r + 1), at::TensorOptions().device(device))).sum();
      reducer.prepare_for_backward({loss});
      loss.backward();
      const float dw = 2.0f * static_cast<float>(w + 1);
      if (!at::allclose(model->weight.grad().cpu(), at::full({4, 8}, dw)) || !at::allclose(model->bias.grad().cpu(), at::full({4}, 4.0f))) {
        fmt::print(stderr, "rank {} step {}: reducer gradients dW {} db {}, expected {} and 4\n", r, step,
                   model->weight.grad()[0][0].item<float>(), model->bias.grad()[0].item<float>(), dw);
        return 1;
      }
    }
    // The trainer's hook: rank-dependent initial weights are replaced by rank 0's; with an
    // accumulation window of 2 micro-steps, the first keeps its gradient local (no_sync) and the
    // second leaves the mean of the window's sums: 4 (r + 1) + 4 (r + 1) locally, 4 (W + 1) averaged.
    torch::manual_seed(100 + static_cast<std::uint64_t>(r));
    torch::nn::Linear hooked(8, 4);
    hooked->to(device);
    torch::manual_seed(100);
    const at::Tensor rank0_weight = torch::nn::Linear(8, 4)->weight.detach().clone();
    libreyolo::dist::GradientSync sync(group);
    libreyolo::train::TrainState state;
    state.accumulate = 2;
    state.batches_per_epoch = 2;
    libreyolo::train::RunInfo info;
    info.model = hooked.get();
    sync.on_train_start(info, state);
    if (!at::equal(hooked->weight.detach().cpu(), rank0_weight)) {
      fmt::print(stderr, "rank {}: the start broadcast did not give rank 0's weights\n", r);
      return 1;
    }
    for (state.batch = 0; state.batch < 2; ++state.batch) {
      sync.on_step_start(state);
      sync.on_phase_start(libreyolo::train::Phase::forward);
      const at::Tensor loss = hooked(at::full({4, 8}, static_cast<float>(r + 1), at::TensorOptions().device(device))).sum();
      sync.on_phase_start(libreyolo::train::Phase::backward);
      loss.backward();
      const float want = state.batch == 0 ? 4.0f * static_cast<float>(r + 1) : 4.0f * static_cast<float>(w + 1);
      if (!at::allclose(hooked->weight.grad().cpu(), at::full({4, 8}, want))) {
        fmt::print(stderr, "rank {} micro-step {}: dW {}, expected {}\n", r, state.batch, hooked->weight.grad()[0][0].item<float>(), want);
        return 1;
      }
    }
    for (const bool channels_last : {false, true}) {
      if (!check_sync_batch_norm(group, r, w, device, channels_last)) return 1;
    }
    if (!check_graphed_gradients(group, r, device)) return 1;
    if (!check_distributed_validation(group, r)) return 1;
    group.group().barrier()->wait();
    fmt::print("rank {}/{} ok ({}, local rank {}, master {}:{}; {} on {}: all-reduce, broadcast, Reducer, GradientSync, sync_bn, "
               "graphed DDP, validation)\n", r, w, env.launcher, env.local_rank, env.master_addr, env.master_port, options.backend, device.str());
    return 0;
  } catch (...) {
    return libreyolo::report_error(std::current_exception());
  }
}
