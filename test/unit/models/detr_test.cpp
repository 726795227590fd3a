// The DETR families' denoising queries from our own draws (test/parity/ checks the construction
// against libreyolo 1.6.0 with its draws): a seeded generator repeats itself, positives stay
// within half their box of the target and negatives beyond it, padded slots carry no class.
// RT-DETR behind the Family interface: its packed outputs, targets, loss, detections and groups.
#include "core/error.h"
#include "core/config.h"
#include "models/box_ops.h"
#include "models/checkpoint.h"
#include "models/detr_common/denoising.h"
#include "models/detr_common/dfine_criterion.h"
#include "models/detr_common/dfine_style_family.h"
#include "models/detr_common/dfine_style_recipe.h"
#include "models/detr_common/hybrid_encoder.h"
#include "models/detr_common/sampling.h"
#include "models/detr_common/family_parts.h"
#include "models/rtdetr/recipe.h"
#include "models/safetensors.h"
#include "models/targets.h"
#include "nn/conv.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/nn/functional/vision.h>
#include <torch/nn/module.h>

#include <cmath>
#include <map>
#include <set>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::models::detr;

TEST_CASE("denoising: seeded draws repeat, positives stay near their targets, negatives farther", "[detr]") {
  const DetrTargets targets{at::tensor({3, 7, 1}, at::kLong),
                            at::tensor({0.5, 0.5, 0.2, 0.4, 0.3, 0.6, 0.1, 0.1, 0.7, 0.2, 0.3, 0.3}).to(at::kFloat).view({3, 4}),
                            {2, 0, 1}};
  DenoisingOptions options;
  options.classes = 10;
  options.queries = 5;
  options.denoising = 8;  // 8 / 2 targets at most: 4 groups of 2 positive + 2 negative slots
  const auto [count, groups] = denoising_shape(targets.counts, options);
  REQUIRE(count == 16);
  REQUIRE(groups == 4);
  const auto draw = [&](std::uint64_t seed) {
    return draw_denoising_noise(3, count, options.classes, at::make_generator<at::CPUGeneratorImpl>(seed));
  };
  const DenoisingNoise noise = draw(7), again = draw(7), other = draw(8);
  CHECK(at::equal(noise.box_uniform, again.box_uniform));
  CHECK(at::equal(noise.random_label, again.random_label));
  CHECK_FALSE(at::equal(noise.box_uniform, other.box_uniform));
  CHECK(noise.sign_bit.min().item<float>() >= 0);
  CHECK(noise.sign_bit.max().item<float>() <= 1);
  CHECK(noise.random_label.max().item<std::int64_t>() < options.classes);

  const DenoisingQueries queries = make_denoising_queries(targets, options, noise);
  REQUIRE(queries.count == 16);
  CHECK(queries.attn_mask.sizes() == at::IntArrayRef({21, 21}));
  // image 1 has no target: every slot padded, its class the "no class" index
  CHECK((queries.classes[1] == options.classes).all().item<bool>());
  REQUIRE(queries.match.positive_queries.size() == 3);
  CHECK(queries.match.positive_queries[0].equal(at::tensor({0, 1, 4, 5, 8, 9, 12, 13}, at::kLong)));
  CHECK(queries.match.positive_queries[1].numel() == 0);
  // positives: each corner within half the target's size of the target's; negatives: between half and one
  const at::Tensor boxes = libreyolo::models::centre_size_to_corners(queries.boxes_unact.sigmoid());
  const at::Tensor target = libreyolo::models::centre_size_to_corners(targets.boxes[0]);
  const at::Tensor half = targets.boxes[0].narrow(0, 2, 2).repeat({2}) * 0.5;
  for (std::int64_t slot = 0; slot < 16; slot += 4) {  // image 0's first target, in each group's positive and negative halves
    const at::Tensor positive = (boxes[0][slot] - target).abs(), negative = (boxes[0][slot + 2] - target).abs();
    CHECK((positive <= half + 1e-4).all().item<bool>());
    // a negative moves each corner by half to one size (less where clipped to the image or where the box flipped)
    CHECK((negative <= 2 * half + 1e-4).all().item<bool>());
    CHECK((negative > half).any().item<bool>());
  }
  // the matching queries see no denoising query; group 0 sees itself only
  CHECK(queries.attn_mask.narrow(0, 16, 5).narrow(1, 0, 16).all().item<bool>());
  CHECK_FALSE(queries.attn_mask.narrow(0, 0, 4).narrow(1, 0, 4).any().item<bool>());
  CHECK(queries.attn_mask.narrow(0, 0, 4).narrow(1, 4, 12).all().item<bool>());

  const DetrTargets none{at::empty({0}, at::kLong), at::empty({0, 4}), {0, 0}};
  CHECK(make_denoising_queries(none, options, {}).count == 0);
}

// ---- RT-DETR behind the Family interface

TEST_CASE("deformable sampling by gathers: grid_sample's values and gradients, the points outside the map included", "[detr]") {
  // deterministic=true on a GPU samples by gathers (grid_sample's CUDA backward adds with atomics);
  // checked here against grid_sample itself in float64, where the two differ by rounding only.
  namespace F = torch::nn::functional;
  torch::manual_seed(3);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor values = torch::randn({3, 5, 6, 7}, options).requires_grad_();
  // points inside, on pixel centres and edges, and beyond the map on every side
  torch::Tensor grid = torch::rand({3, 4, 9, 2}, options) * 2.6 - 1.3;
  grid.index_put_({0, 0, 0}, torch::tensor({-1.0, -1.0}, options));
  grid.index_put_({0, 0, 1}, torch::tensor({1.0, 1.0}, options));
  grid.index_put_({0, 0, 2}, torch::tensor({1.0 / 7.0, -3.0 / 6.0}, options));  // a pixel centre
  grid.index_put_({0, 0, 3}, torch::tensor({0.0, 0.0}, options));
  grid.requires_grad_();
  const torch::Tensor reference = F::grid_sample(values, grid, F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kZeros).align_corners(false));
  const torch::Tensor gathered = libreyolo::models::detr::bilinear_sample_by_gathers(values, grid);
  REQUIRE(gathered.sizes() == reference.sizes());
  CHECK((gathered - reference).abs().max().item<double>() < 1e-12);
  const torch::Tensor seed = torch::randn_like(reference);
  const auto expected = torch::autograd::grad({reference}, {values, grid}, {seed});
  const auto got = torch::autograd::grad({gathered}, {values, grid}, {seed});
  CHECK((got[0] - expected[0]).abs().max().item<double>() < 1e-12);
  CHECK((got[1] - expected[1]).abs().max().item<double>() < 1e-12);
  CHECK(expected[1].abs().sum().item<double>() > 1);  // the grid's gradient is not trivially zero
  // bilinear_sample is grid_sample's own on the CPU (the references' kernel, bit for bit)
  CHECK(torch::equal(libreyolo::models::detr::bilinear_sample(values, grid), reference));
}

TEST_CASE("hybrid encoder: AIFI's position embedding is made once per size and device, the references' values", "[detr]") {
  // A captured encoder may not copy from the host (CUDA refuses it); the warm-up that precedes a
  // capture makes the embedding of its size, and every later forward reads that same tensor.
  libreyolo::models::detr::HybridEncoder encoder(libreyolo::models::detr::HybridEncoderOptions{.in_channels = {8, 16}, .hidden = 32, .heads = 2, .feedforward = 64});
  const torch::Tensor a = encoder->position_embedding(5, 4, torch::kCPU);
  CHECK(torch::equal(a, libreyolo::models::detr::sincos_position_embedding(5, 4, 32)));
  CHECK(encoder->position_embedding(5, 4, torch::kCPU).data_ptr() == a.data_ptr());
  const torch::Tensor b = encoder->position_embedding(4, 5, torch::kCPU);
  CHECK(b.data_ptr() != a.data_ptr());
  CHECK(torch::equal(b, libreyolo::models::detr::sincos_position_embedding(4, 5, 32)));
  // a forward pass reads the kept one: changed in place, it changes the next pass's output
  encoder->eval();
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> maps{torch::randn({1, 8, 8, 8}), torch::randn({1, 16, 4, 4})};
  const torch::Tensor before = encoder->forward(maps).back();
  CHECK(torch::equal(encoder->forward(maps).back(), before));
  encoder->position_embedding(4, 4, torch::kCPU).zero_();
  CHECK_FALSE(torch::equal(encoder->forward(maps).back(), before));
}

TEST_CASE("RT-DETR family: packed outputs round-trip, targets normalise, the loss trains", "[detr]") {
  const libreyolo::models::Family& family = libreyolo::models::family("rtdetr");
  CHECK(family.input_fit() == libreyolo::data::InputFit::stretch);
  CHECK(family.graph_region() == libreyolo::models::GraphRegion::backbone_encoder);
  at::manual_seed(3);
  libreyolo::models::Model model = family.build("r18", 4, 0, false);
  REQUIRE(model.forward_train);

  // too small an input for 300 queries: a usage error that says what to do
  model.module->eval();
  CHECK_THROWS_AS(model.forward(at::rand({1, 3, 64, 96})), libreyolo::UsageError);

  // rows [image, class, cx, cy, w, h] normalised, over an input 192 wide and 128 high
  const at::Tensor rows = at::tensor({0.f, 2.f, 0.5f, 0.5f, 0.25f, 0.5f, 0.f, 1.f, 0.2f, 0.3f, 0.1f, 0.2f, 1.f, 3.f, 0.7f, 0.6f, 0.2f, 0.2f})
                              .view({3, 6});
  const auto targets = libreyolo::models::pad_targets(rows, 2, 192, 128);
  const DetrTargets detr = detr_targets(targets, 192, 128);
  CHECK(detr.counts == std::vector<std::int64_t>{2, 1});
  CHECK(at::equal(detr.classes, at::tensor({2, 1, 3}, at::kLong)));
  CHECK(at::allclose(detr.boxes, rows.narrow(1, 2, 4)));

  const at::Tensor input = at::rand({2, 3, 128, 192});
  model.module->train();
  const std::vector<at::Tensor> packed = model.forward_train(input, targets);
  const PackedOutputs unpacked = unpack_outputs(packed);
  CHECK(unpacked.width == 192);
  CHECK(unpacked.height == 128);
  CHECK(unpacked.outputs.auxiliary.size() == 3);  // two earlier decoder layers and the encoder's proposals
  CHECK(unpacked.outputs.denoising.size() == 3);  // every layer's denoising queries
  CHECK(unpacked.outputs.denoising_match.groups == 50);  // 100 denoising queries / 2 targets at most
  REQUIRE(unpacked.outputs.denoising_match.positive_queries.size() == 2);
  CHECK(unpacked.outputs.denoising_match.positive_queries[1].numel() == 50);
  CHECK(unpacked.outputs.last.logits.sizes() == at::IntArrayRef({2, 300, 4}));
  const std::vector<at::Tensor> again = pack_outputs(unpacked.outputs, unpacked.width, unpacked.height);
  REQUIRE(again.size() == packed.size());
  for (std::size_t i = 0; i < packed.size(); ++i) CHECK(at::equal(again[i], packed[i]));
  CHECK_THROWS(unpack_outputs({packed.begin(), packed.end() - 1}));

  const auto loss = family.make_loss({.classes = 4}, libreyolo::models::parse_arguments(libreyolo::config::command_train, std::vector<std::string>{}));
  const libreyolo::models::LossTerms terms = (*loss)(packed, targets);
  CHECK(terms.parts.size() == family.loss_names().size());
  REQUIRE(std::isfinite(terms.total.item<double>()));
  terms.total.backward();
  bool backbone_gradient = false;
  for (const auto& p : model.module->named_parameters()) {
    if (p.key().rfind("backbone.", 0) == 0 && p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0) {
      backbone_gradient = true;
    }
  }
  CHECK(backbone_gradient);

  // eval: the last layer's queries, then the top-k detections in input pixels
  model.module->eval();
  at::NoGradGuard no_grad;
  const auto maps = model.forward(input);
  REQUIRE(maps.size() == 2);
  const auto detections = family.detections(maps, 192, 128, 0.0, 10);
  REQUIRE(detections.has_value());
  REQUIRE(detections->size() == 2);
  CHECK((*detections)[0].sizes() == at::IntArrayRef({10, 6}));
  CHECK((*detections)[0].select(1, 2).max().item<float>() <= 192 * 1.5f);
}

TEST_CASE("RT-DETR optimizer groups: backbone at lr_backbone, no decay on norms and biases", "[detr]") {
  const auto rules = libreyolo::models::detr::rtdetr_parameter_rules(0.05);
  const auto rule = [&](std::string_view name) { return rules(name); };
  CHECK(rule("backbone.conv1.conv1_1.norm.weight").group == 0);
  CHECK_FALSE(rule("backbone.conv1.conv1_1.norm.weight").decay);
  CHECK(rule("backbone.conv1.conv1_1.norm.weight").lr_multiplier == 0.05);
  CHECK(rule("backbone.res_layers.0.blocks.0.branch2a.conv.weight").group == 1);
  CHECK(rule("backbone.res_layers.0.blocks.0.branch2a.conv.weight").decay);
  CHECK(rule("decoder.dec_score_head.0.bias").group == 2);
  CHECK(rule("encoder.encoder.0.layers.0.norm1.weight").group == 2);
  CHECK_FALSE(rule("encoder.encoder.0.layers.0.norm1.weight").decay);
  CHECK(rule("decoder.dec_score_head.0.weight").group == 3);
  CHECK(rule("decoder.dec_score_head.0.weight").lr_multiplier == 1.0);

  // every trainable parameter of the model falls in one of the four groups
  const libreyolo::models::Family& family = libreyolo::models::family("rtdetr");
  const auto model = family.build("r18", 80, 0, false);
  std::set<int> seen;
  for (const auto& p : model.module->named_parameters()) seen.insert(rules(p.key()).group);
  CHECK(seen == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("RT-DETR-l: HGNetv2 backbone, its fine-tune form, groups and LibreYOLO's frozen-norm files", "[detr]") {
  const libreyolo::models::Family& family = libreyolo::models::family("rtdetr");
  const auto scratch = family.build("l", 3, 0, false);
  const auto tuned = family.build("l", 3, 0, true);
  std::map<std::string, at::Tensor> scratch_state, tuned_state;
  for (const auto& item : scratch.module->named_buffers()) scratch_state[item.key()] = item.value();
  for (const auto& item : scratch.module->named_parameters()) scratch_state[item.key()] = item.value();
  for (const auto& item : tuned.module->named_buffers()) tuned_state[item.key()] = item.value();
  for (const auto& item : tuned.module->named_parameters()) tuned_state[item.key()] = item.value();
  // RT-DETR's HGNetv2 names: the padded stem conv is conv.1, the aggregation convs are named
  CHECK(scratch_state.count("backbone.stem.stem2a.conv.1.weight"));
  CHECK(scratch_state.count("backbone.stages.2.blocks.0.layers.0.conv2.bn.weight"));
  CHECK(scratch_state.count("backbone.stages.3.blocks.0.aggregation_excitation_conv.conv.weight"));
  CHECK(scratch_state.count("backbone.stages.0.blocks.0.layers.0.bn.num_batches_tracked"));
  // from weights: the norms frozen (buffers, no counter), the stem takes no gradient, stage 0 does
  CHECK_FALSE(tuned_state.count("backbone.stages.0.blocks.0.layers.0.bn.num_batches_tracked"));
  for (const auto& p : tuned.module->named_parameters()) {
    if (p.key().starts_with("backbone.stem.")) CHECK_FALSE(p.value().requires_grad());
    if (p.key().starts_with("backbone.stages.0.")) CHECK(p.value().requires_grad());
    CHECK(p.key().find(".bn.") == std::string::npos);  // frozen norms hold no parameters
  }
  CHECK(family.fine_tune_form("l") == "the backbone's stem and BatchNorm layers frozen");
  // a file in that form (LibreYOLO's from weights) is recognised by its norms; a scratch one is not
  CHECK(family.written_in_fine_tune_form("l", tuned_state));
  CHECK_FALSE(family.written_in_fine_tune_form("l", scratch_state));
  CHECK_FALSE(family.written_in_fine_tune_form("r18", tuned_state));  // r18 never freezes its norms
  // groups: the HGNetv2 norms (bn) without decay at the backbone's rate
  const auto rules = libreyolo::models::detr::rtdetr_parameter_rules(0.05);
  CHECK(rules("backbone.stages.1.blocks.0.layers.0.bn.weight").group == 0);
  CHECK(rules("backbone.stages.1.blocks.0.layers.0.conv.weight").group == 1);
  std::set<int> seen;
  for (const auto& p : scratch.module->named_parameters()) seen.insert(rules(p.key()).group);
  CHECK(seen == std::set<int>{0, 1, 2, 3});
  // the stride 8, 16 and 32 maps at 512, 1024 and 2048 channels feed the encoder: one forward runs
  scratch.module->eval();
  at::NoGradGuard no_grad;
  const auto out = scratch.forward(at::rand({1, 3, 160, 160}));
  CHECK(out.at(0).sizes() == at::IntArrayRef{1, 300, 3});
  CHECK(out.at(1).sizes() == at::IntArrayRef{1, 300, 4});
}

TEST_CASE("D-FINE family: packed outputs round-trip, the FDR loss trains, AMP is off with a reason", "[detr][dfine]") {
  const libreyolo::models::Family& family = libreyolo::models::family("dfine");
  CHECK(family.input_fit() == libreyolo::data::InputFit::stretch);
  CHECK(family.graph_region() == libreyolo::models::GraphRegion::backbone_encoder);
  CHECK(family.loss_names() == std::vector<std::string>{"vfl", "bbox", "giou", "fgl", "ddf"});
  // AMP: off by default with the guide's reason; float16 warns; bfloat16 says nothing
  CHECK(family.precision_note(false, true).text.find("65504") != std::string::npos);
  CHECK_FALSE(family.precision_note(false, true).warning);
  CHECK(family.precision_note(true, true).warning);
  CHECK(family.precision_note(true, false).text.empty());
  at::manual_seed(5);
  libreyolo::models::Model model = family.build("n", 4, 0, false);
  // n sees strides 16 and 32 only: 288 px gives 18^2 + 9^2 = 405 positions for its 300 queries
  const at::Tensor rows = at::tensor({0.f, 2.f, 0.5f, 0.5f, 0.25f, 0.5f, 0.f, 1.f, 0.2f, 0.3f, 0.1f, 0.2f, 1.f, 3.f, 0.7f, 0.6f, 0.2f, 0.2f})
                              .view({3, 6});
  const auto targets = libreyolo::models::pad_targets(rows, 2, 288, 288);
  const at::Tensor input = at::rand({2, 3, 288, 288});
  model.module->train();
  const std::vector<at::Tensor> packed = model.forward_train(input, targets);
  const PackedDfineOutputs unpacked = unpack_dfine_outputs(packed);
  CHECK(unpacked.width == 288);
  CHECK(unpacked.outputs.auxiliary.size() == 2);  // three layers
  CHECK(unpacked.outputs.denoising.size() == 3);
  CHECK(unpacked.outputs.last.corners.sizes() == at::IntArrayRef({2, 300, 4 * 33}));
  CHECK(unpacked.outputs.reg_scale.item<float>() == 4.0F);
  const std::vector<at::Tensor> again = pack_dfine_outputs(unpacked.outputs, unpacked.width, unpacked.height);
  REQUIRE(again.size() == packed.size());
  for (std::size_t i = 0; i < packed.size(); ++i) CHECK(at::equal(again[i], packed[i]));
  CHECK_THROWS(unpack_dfine_outputs({packed.begin(), packed.end() - 1}));

  const auto loss = family.make_loss({.classes = 4}, libreyolo::models::parse_arguments(libreyolo::config::command_train, std::vector<std::string>{}));
  const libreyolo::models::LossTerms terms = (*loss)(packed, targets);
  REQUIRE(terms.parts.size() == 5);
  REQUIRE(std::isfinite(terms.total.item<double>()));
  CHECK(terms.parts[3].second.item<double>() > 0);  // fgl
  terms.total.backward();
  bool backbone_gradient = false;
  for (const auto& p : model.module->named_parameters()) {
    if (p.key().starts_with("backbone.") && p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0) {
      backbone_gradient = true;
    }
  }
  CHECK(backbone_gradient);
  // groups: backbone norms, biases and the learnable affine's scale without decay, at the multiplier
  const auto rules = dfine_parameter_rules(0.5);
  CHECK(rules("backbone.stem.stem1.lab.scale").group == 3);
  CHECK(rules("backbone.stem.stem1.conv.weight").lr_multiplier == 0.5);
  CHECK(rules("encoder.encoder.0.layers.0.self_attn.in_proj_bias").group == 1);
  CHECK(rules("decoder.dec_bbox_head.0.layers.0.weight").group == 0);
  // eval: top-k detections in input pixels
  model.module->eval();
  at::NoGradGuard no_grad;
  const auto detections = family.detections(model.forward(input), 288, 288, 0.0, 10);
  REQUIRE(detections.has_value());
  CHECK((*detections)[1].sizes() == at::IntArrayRef({10, 6}));
}

TEST_CASE("D-FINE's union of matches keeps each query's most frequent target", "[detr][dfine]") {
  const auto pairs = [](std::vector<std::int64_t> q, std::vector<std::int64_t> t) {
    return std::pair{at::tensor(q, at::kLong), at::tensor(t, at::kLong)};
  };
  // image 0: query 0 goes to target 1 on two levels of three, queries 1 and 2 once each; image 1 has none
  const ImageMatches first{pairs({0, 1}, {0, 1}), pairs({}, {})};
  const std::vector<ImageMatches> others{{pairs({0, 2}, {1, 0}), pairs({}, {})}, {pairs({0}, {1}), pairs({}, {})}};
  const ImageMatches shared = union_of_matches(first, others);
  REQUIRE(shared.size() == 2);
  std::map<std::int64_t, std::int64_t> chosen;
  for (std::int64_t i = 0; i < shared[0].first.numel(); ++i) chosen[shared[0].first[i].item<std::int64_t>()] = shared[0].second[i].item<std::int64_t>();
  CHECK(chosen == std::map<std::int64_t, std::int64_t>{{0, 1}, {1, 1}, {2, 0}});
  CHECK(shared[0].first[0].item<std::int64_t>() == 0);  // the most frequent pair first
  CHECK(shared[1].first.numel() == 0);
}

TEST_CASE("D-FINE's FDR targets: bins within the distribution, neighbour weights summing to one", "[detr][dfine]") {
  const at::Tensor up = at::tensor({0.5F}), reg_scale = at::tensor({4.0F});
  const at::Tensor values = fdr_weighting(32, up, reg_scale);
  REQUIRE(values.numel() == 33);
  CHECK(values[16].item<float>() == 0.0F);
  CHECK(values[0].item<float>() == -4.0F);  // -2 up reg_scale
  CHECK(values[32].item<float>() == 4.0F);
  CHECK(at::all(values.diff() > 0).item<bool>());
  // a target box equal to its reference sits half a reg_scale out on every edge: W's middle
  const at::Tensor points = at::tensor({0.5F, 0.5F, 0.2F, 0.2F, 0.3F, 0.4F, 0.1F, 0.3F}).view({2, 4});
  const at::Tensor boxes = at::tensor({0.4F, 0.4F, 0.6F, 0.6F, 0.0F, 0.0F, 1.0F, 1.0F}).view({2, 4});
  const FdrTargets t = fdr_targets(points, boxes, 32, reg_scale, up);
  REQUIRE(t.bins.numel() == 8);
  // (the bin to the left and the weight of the right one: the position 16, from either side of it)
  CHECK(at::allclose(t.bins.narrow(0, 0, 4) + t.weight_right.narrow(0, 0, 4), at::full({4}, 16.0F), 1e-4, 1e-3));
  CHECK(at::all(t.bins >= 0).item<bool>());
  CHECK(at::all(t.bins <= 31.9F).item<bool>());
  CHECK(at::allclose(t.weight_left + t.weight_right, at::ones({8})));
  CHECK(std::abs(t.bins[6].item<float>() - 31.9F) < 1e-5F);  // far beyond W's end: the last bin, all weight right
  CHECK(t.weight_right[6].item<float>() == 1.0F);
}

TEST_CASE("DEIM: D-FINE's network with SiLU heads, MAL, its recipe and fine-tune form", "[detr][dfine]") {
  const libreyolo::models::Family& deim = libreyolo::models::family("deim");
  CHECK(deim.loss_names() == std::vector<std::string>{"mal", "bbox", "giou", "fgl", "ddf"});
  CHECK(deim.fine_tune_form("n").empty());  // LibreYOLO's DEIM freezes nothing from weights...
  CHECK(deim.fine_tune_form("l") == "the backbone's BatchNorm layers frozen");  // ...but l and x's norms
  CHECK(deim.precision_note(false, true).text.starts_with("DEIM trains in float32"));
  CHECK_FALSE(deim.recognises_key("decoder.decoder.lqe_layers.0.reg_conf.layers.0.weight"));  // D-FINE's names: D-FINE claims them
  // the same weight names as D-FINE's: a D-FINE state dict loads into DEIM and back
  const auto a = libreyolo::models::family("dfine").build("n", 3, 0, false);
  const auto b = deim.build("n", 3, 0, true);
  std::map<std::string, at::Tensor> weights;
  for (const auto& item : a.module->named_parameters()) weights[item.key()] = item.value();
  for (const auto& item : a.module->named_buffers()) weights[item.key()] = item.value();
  libreyolo::models::load_state_dict(*b.module, weights);
  for (const auto& p : b.module->named_parameters()) CHECK(p.value().requires_grad());  // n from weights: nothing frozen
  // the same inputs give other outputs: SiLU where D-FINE has ReLU
  a.module->eval();
  b.module->eval();
  at::NoGradGuard no_grad;
  const at::Tensor input = at::rand({1, 3, 288, 288});
  CHECK_FALSE(at::allclose(a.forward(input).at(0), b.forward(input).at(0)));  // the scores (the box heads start at zero)
}

TEST_CASE("D-FINE's and DEIM's multi_scale sizes are LibreYOLO's collate's", "[detr][dfine]") {
  const auto& dfine = libreyolo::models::family("dfine");
  const auto s = dfine.batch_scales("s", 640);
  REQUIRE(s.has_value());
  std::vector<int> expected{480, 512, 544, 576, 608};  // _generate_scales(640, 20)
  expected.insert(expected.end(), 20, 640);
  for (const int size : {800, 768, 736, 704, 672}) expected.push_back(size);
  CHECK(s->sizes == expected);
  CHECK(dfine.batch_scales("n", 640)->sizes.empty());  // D-FINE-n never resizes
  const auto deim = libreyolo::models::family("deim").batch_scales("n", 640);
  CHECK(std::count(deim->sizes.begin(), deim->sizes.end(), 640) == 3);
  CHECK_FALSE(libreyolo::models::family("rtdetr").batch_scales("r18", 640).has_value());  // Ultralytics' range
  // they stop with the strong augmentations: at 85% (D-FINE) and 91% (DEIM, RT-DETRv4) of the epochs
  const auto default_of = [](std::string_view family, std::string_view key) {
    for (const auto& item : libreyolo::models::family(family).option_defaults("s")) {
      if (item.key == key) return std::string(item.value);
    }
    return std::string("(none)");
  };
  CHECK(default_of("dfine", "aug_stop_epoch_ratio") == "0.85");
  CHECK(default_of("deim", "aug_stop_epoch_ratio") == "0.91");
  CHECK(default_of("rtdetrv4", "aug_stop_epoch_ratio") == "0.91");
  CHECK(default_of("rtdetr", "aug_stop_epoch_ratio") == "(none)");  // the table's 1.0: until no_aug_epochs
}

TEST_CASE("RT-DETRv4: D-FINE's network with SiLU heads and D-FINE's freezing, DEIM's trainer, its own rates", "[detr][dfine]") {
  const libreyolo::models::Family& v4 = libreyolo::models::family("rtdetrv4");
  CHECK(v4.loss_names() == std::vector<std::string>{"mal", "bbox", "giou", "fgl", "ddf"});
  CHECK(v4.sample_pipeline()->name() == "deim transform");  // DEIM's trainer's pipeline
  CHECK(v4.fine_tune_form("s") == "the backbone's stem frozen");
  CHECK(v4.fine_tune_form("l") == "the backbone's stem and BatchNorm layers frozen");
  std::map<std::string, std::string> defaults;
  for (const auto& item : v4.option_defaults("s")) defaults[std::string(item.key)] = std::string(item.value);
  CHECK(defaults["lr0"] == "0.0005");
  CHECK(defaults["weight_decay"] == "0.000125");
  CHECK(defaults["epochs"] == "58");
  CHECK(defaults["no_aug_epochs"] == "12");
  CHECK(defaults["amp"] == "false");
  CHECK(defaults.count("backbone_lr_mult") == 0);  // DEIM's: the backbone at the schedule's rate
  CHECK(v4.batch_scales("s", 640)->sizes.size() == 13);  // DEIM's collate: 640 three times
  // its released checkpoints: recognised by the distillation projector, which is training-only
  CHECK(v4.recognises_key("encoder.feature_projector.0.weight"));
  CHECK(v4.is_training_only_tensor("encoder.feature_projector.0.weight"));
  CHECK_FALSE(v4.is_training_only_tensor("encoder.input_proj.0.conv.weight"));
  CHECK_FALSE(libreyolo::models::family("dfine").is_training_only_tensor("encoder.feature_projector.0.weight"));
  // from weights: the stem frozen (DEIM's is not); SiLU heads: other outputs than D-FINE's from the same weights
  const auto a = libreyolo::models::family("dfine").build("s", 3, 0, true);
  const auto b = v4.build("s", 3, 0, true);
  CHECK(b.display_name == "RT-DETRv4-s");
  std::map<std::string, at::Tensor> weights;
  for (const auto& item : a.module->named_parameters()) weights[item.key()] = item.value();
  for (const auto& item : a.module->named_buffers()) weights[item.key()] = item.value();
  libreyolo::models::load_state_dict(*b.module, weights);
  int frozen = 0;
  for (const auto& p : b.module->named_parameters()) frozen += !p.value().requires_grad();
  CHECK(frozen > 0);
  for (const auto& p : b.module->named_parameters()) {
    if (!p.value().requires_grad()) CHECK(p.key().starts_with("backbone.stem."));
  }
  a.module->eval();
  b.module->eval();
  at::NoGradGuard no_grad;
  const at::Tensor input = at::rand({1, 3, 256, 256});
  CHECK_FALSE(at::allclose(a.forward(input).at(0), b.forward(input).at(0)));
}

namespace {

// The DETRs' data-parallel contract on one machine, without processes: the whole training step
// (denoising queries, matching, loss) of one process over 4 images against two "ranks" holding
// images 0, 2 and 1, 3 (the sampler deals the global batch out in turn). The ranks' collectives
// are played back: a first pass records each rank's local values in call order, a second returns
// their sums. BatchNorm runs on its running statistics here, so that an image's outputs do not
// depend on the batch it is in (sync_bn's job in real training); the rest trains.
void check_ranks_match_one_process(const std::string& family_name, const std::string& size, std::int64_t image_size) {
  namespace models = libreyolo::models;
  const models::Family& family = models::family(family_name);
  at::manual_seed(11);
  models::Model model = family.build(size, 4, 0, false);
  {
    // the box heads' last layers start at zero, where every decoder layer's distribution is the
    // last one's and D-FINE's distillation term vanishes: a little weight there brings it in
    at::NoGradGuard no_grad;
    for (auto& p : model.module->parameters()) {
      if (p.dim() == 2 && p.abs().max().item<double>() == 0) p.normal_(0.0, 0.02);
    }
  }
  model.module->train();
  for (const auto& m : model.module->modules()) {
    if (m->as<torch::nn::BatchNorm2d>()) m->eval();
  }
  // image 0: 3 targets, image 1: none, image 2: 1, image 3: 2. Rank 0 (images 0, 2) holds the
  // batch's most targets, rank 1 (images 1, 3) fewer: one process's denoising groups follow 3.
  const at::Tensor rows = at::tensor({0.f, 2.f, 0.5f, 0.5f, 0.25f, 0.5f,  0.f, 1.f, 0.2f, 0.3f, 0.1f, 0.2f,
                                      0.f, 0.f, 0.7f, 0.7f, 0.3f, 0.2f,  2.f, 3.f, 0.7f, 0.6f, 0.2f, 0.2f,
                                      3.f, 1.f, 0.4f, 0.4f, 0.3f, 0.5f,  3.f, 2.f, 0.6f, 0.3f, 0.2f, 0.3f}).view({-1, 6});
  const at::Tensor images = at::rand({4, 3, image_size, image_size});
  const auto rank_rows = [&](int rank) {
    std::vector<at::Tensor> kept;
    for (std::int64_t i = 0; i < rows.size(0); ++i) {
      const auto image = static_cast<std::int64_t>(rows[i][0].item<float>());
      if (image % 2 != rank) continue;
      at::Tensor row = rows[i].clone();
      row[0] = static_cast<float>(image / 2);
      kept.push_back(row);
    }
    return at::stack(kept);
  };
  const auto gradients = [&] {
    std::vector<at::Tensor> out;
    for (const auto& p : model.module->parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
    model.module->zero_grad();
    return out;
  };
  const auto step = [&](const at::Tensor& x, const models::TargetBatch& targets, const models::LossContext& gains) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_current_seed(23);  // every rank's generator where one process's is
    const std::vector<at::Tensor> maps = model.forward_train(x, targets);
    const models::LossTerms terms = (*family.make_loss(gains, libreyolo::models::parse_arguments(libreyolo::config::command_train, std::vector<std::string>{})))(maps, targets);
    for (const auto& [name, value] : terms.parts) {
      INFO(family_name << " " << name);
      CHECK(value.item<double>() > 0);  // every term takes part (D-FINE's ddf included)
    }
    terms.total.backward();
    std::vector<double> parts;
    for (const auto& [name, value] : terms.parts) parts.push_back(value.item<double>());
    return parts;
  };
  model.module->zero_grad();
  const std::vector<double> single = step(images, models::pad_targets(rows, 4, image_size, image_size), {.classes = 4});
  const std::vector<at::Tensor> expected = gradients();

  // rank r: images r, r + 2; the collectives recorded, then played back
  std::vector<std::vector<at::Tensor>> recorded(2);
  std::size_t call = 0;
  const auto recording = [&](int rank) {
    models::LossContext gains{.classes = 4};
    gains.global_normaliser = [&, rank](const at::Tensor& local) {
      recorded[rank].push_back(local.detach().to(at::kFloat).clone());
      return local.clamp_min(1.0);
    };
    gains.global_share = [&, rank](const at::Tensor& local) {
      recorded[rank].push_back(local.detach().to(at::kFloat).clone());
      return local;
    };
    return gains;
  };
  const auto playing = [&](bool clamp) {
    return [&, clamp](const at::Tensor&) {
      const at::Tensor total = recorded[0].at(call) + recorded[1].at(call);
      ++call;
      return (clamp ? total.clamp_min(1.0) : total) / 2;
    };
  };
  *model.batch_share = {.rank = 0, .world_size = 2, .global_max = [](std::int64_t) { return std::int64_t{3}; }};
  const auto rank_batch = [&](int rank) {
    return std::pair{images.index_select(0, at::tensor({rank, rank + 2}, at::kLong)),
                     models::pad_targets(rank_rows(rank), 2, image_size, image_size)};
  };
  for (int rank = 0; rank < 2; ++rank) {
    model.batch_share->rank = rank;
    const auto [x, targets] = rank_batch(rank);
    step(x, targets, recording(rank));
    model.module->zero_grad();
  }
  REQUIRE(recorded[0].size() == recorded[1].size());
  REQUIRE_FALSE(at::equal(recorded[0][0], recorded[1][0]));  // the ranks' box counts differ
  std::vector<double> parts(single.size(), 0.0);
  std::vector<at::Tensor> averaged;
  for (int rank = 0; rank < 2; ++rank) {
    model.batch_share->rank = rank;
    const auto [x, targets] = rank_batch(rank);
    call = 0;
    models::LossContext gains{.classes = 4, .global_normaliser = playing(true), .global_share = playing(false)};
    const std::vector<double> rank_parts = step(x, targets, gains);
    for (std::size_t k = 0; k < parts.size(); ++k) parts[k] += rank_parts.at(k) / 2;  // as the ranks' mean is logged
    const std::vector<at::Tensor> grads = gradients();
    if (averaged.empty()) averaged.assign(grads.size(), {});
    for (std::size_t i = 0; i < grads.size(); ++i) averaged[i] = averaged[i].defined() ? averaged[i] + grads[i] / 2 : grads[i] / 2;
  }
  *model.batch_share = {};
  for (std::size_t k = 0; k < parts.size(); ++k) {
    INFO(family_name << " loss part " << family.loss_names().at(k));
    CHECK(parts[k] == Approx(single[k]).epsilon(1e-5));
  }
  double difference = 0, norm = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    difference += (averaged[i] - expected[i]).pow(2).sum().item<double>();
    norm += expected[i].pow(2).sum().item<double>();
  }
  INFO(family_name << ": |ranks' mean gradient - one process's| / |one process's| = " << std::sqrt(difference / norm));
  CHECK(std::sqrt(difference / norm) < 1e-4);
}

}  // namespace

TEST_CASE("RT-DETR on two ranks: the mean gradient is one process's over the global batch", "[detr][ranks]") {
  check_ranks_match_one_process("rtdetr", "r18", 128);
}

TEST_CASE("D-FINE on two ranks: the mean gradient is one process's over the global batch", "[detr][dfine][ranks]") {
  check_ranks_match_one_process("dfine", "n", 288);
}

TEST_CASE("sync_bn reaches every BatchNorm of the DETRs (backbone, encoder and decoder norms outside BaseConv)", "[detr][ranks]") {
  struct Counting final : libreyolo::nn::BatchNormSync {
    torch::Tensor forward(const torch::Tensor& x, torch::nn::BatchNorm2dImpl&) override { return x; }
  };
  for (const auto& [family_name, size] : std::vector<std::pair<std::string, std::string>>{{"rtdetr", "r18"}, {"dfine", "n"}}) {
    libreyolo::models::Model model = libreyolo::models::family(family_name).build(size, 4, 0, false);
    std::size_t norms = 0;
    for (const auto& m : model.module->modules()) norms += m->as<torch::nn::BatchNorm2d>() != nullptr;
    INFO(family_name << "-" << size << ": " << norms << " BatchNorm layers");
    CHECK(norms > 0);
    CHECK(libreyolo::nn::set_batch_norm_sync(*model.module, std::make_shared<Counting>()) == norms);
  }
}
